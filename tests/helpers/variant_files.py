"""Small variant-effect inputs shared by the tests of tests/variant/: a two-record genome, a hand-sized CNN checkpoint
and a VCF of given records (the full-size model and real-data checks live in test_variant.py)."""

from __future__ import annotations

from pathlib import Path

from chromaflow.model.checkpoint import write_test_checkpoint
from chromaflow.model.network import ModelConfig

#: a two-record genome whose records are longer and shorter than the model's input length
SEQ = {"c1": "ACGTTGCAACGGATCCTTAG" * 30, "c2": "GGGAAATTTCCAGT" * 20}
#: a tiny CNN (seq_len 100, two datasets)
CFG = ModelConfig(
    model_type="cnn",
    cnn_layers=1,
    filter_size=2,
    kernel_size=3,
    step=2,
    up=1,
    dilation=1,
    lstm_layers=0,
    hidden_size=1,
    bnorm=False,
    dropout=0.0,
    datasets=("atacseq", "h3k4me3"),
    seq_len=100,
)
VCF_HEADER = "##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"


def write_inputs(
    d: Path, records: str, seq: dict[str, str] = SEQ, cfg: ModelConfig = CFG, seed: int = 3
) -> tuple[Path, Path, Path]:
    """``d``/g.fa (``seq``), m.ckpt (``cfg``, weights from ``seed``) and v.vcf (its ##contig lines from ``seq``, then
    ``records``: VCF body lines). Returns (fasta, model, vcf)."""
    fa, model, vcf = d / "g.fa", d / "m.ckpt", d / "v.vcf"
    fa.write_text("".join(f">{k}\n{v}\n" for k, v in seq.items()))
    write_test_checkpoint(model, cfg, seed)
    contigs = "".join(f"##contig=<ID={k},length={len(v)}>\n" for k, v in seq.items())
    head, columns = VCF_HEADER.split("\n", 1)
    vcf.write_text(f"{head}\n{contigs}{columns}{records}")
    return fa, model, vcf
