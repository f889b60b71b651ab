"""Bad input to ``chromaflow variant-effect``: one clear line naming the file and record, exit != 0, nothing written
(the output folder holds no output and no temporary afterwards)."""

from __future__ import annotations

from pathlib import Path

import pysam
import pytest

from chromaflow.model.checkpoint import write_test_checkpoint
from chromaflow.model.network import ModelConfig
from helpers.cli import assert_nothing_left, assert_one_line_error
from helpers.cli import run_in_process

SEQ = {"c1": "ACGTTGCAAC" * 30, "c2": "GGGAAATTTC" * 20}
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
    datasets=("atacseq",),
    seq_len=100,
)


def _vcf(path: Path, lines: list[str], index: bool = True) -> Path:
    text = "##fileformat=VCFv4.2\n##contig=<ID=c1,length=300>\n##contig=<ID=c2,length=200>\n##contig=<ID=chrX>\n"
    text += "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n" + "".join(
        ln.replace(" ", "\t") + "\t.\t.\t.\n" for ln in lines
    )
    if path.suffix != ".gz":
        path.write_text(text)
        return path
    plain = path.with_suffix("")
    plain.write_text(text)
    pysam.tabix_compress(str(plain), str(path), force=True)
    plain.unlink()
    if index:
        pysam.tabix_index(str(path), preset="vcf", force=True)
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("vin")
    fa = d / "g.fa"
    fa.write_text("".join(f">{k}\n{v}\n" for k, v in SEQ.items()))
    model = d / "m.ckpt"
    write_test_checkpoint(model, CFG, 1)
    odd = d / "odd.ckpt"  # seq_len 101 cannot pass a step-2 layer
    write_test_checkpoint(odd, ModelConfig(**{**CFG.__dict__, "seq_len": 101, "extra": {}}), 1)
    return dict(dir=d, fasta=fa, model=model, odd=odd)


def _case(inputs, tmp_path, name):
    """(vcf, extra arguments, needles) of one bad input."""
    ok = "c1 5 ok T A"
    if name == "ref_mismatch":
        return (
            _vcf(tmp_path / "v.vcf", [ok, "c1 12 rs9 A C"]),
            [],
            ["rs9", "c1:12", "REF A does not match the FASTA", "c1:12 is C"],
        )
    if name == "chrom_absent":
        return _vcf(tmp_path / "v.vcf", [ok, "chrX 3 . A C"]), [], ["CHROM chrX is not a record of", "g.fa"]
    if name == "ref_past_end":
        return _vcf(tmp_path / "v.vcf", ["c2 200 . CA C"]), [], ["past the end of FASTA record c2 (200 bp)"]
    if name == "region_without_index":
        return _vcf(tmp_path / "v.vcf.gz", [ok], index=False), ["--region", "c1:1-100"], ["needs an index", "v.vcf.gz"]
    if name == "bad_alt":
        return _vcf(tmp_path / "v.vcf", [ok, "c1 9 . T A-C"]), [], ["record 2 (c1:9)", "ALT 'A-C'"]
    if name == "model_length":
        return _vcf(tmp_path / "v.vcf", [ok]), ["--model", inputs["odd"]], ["L=101 is not divisible", "odd.ckpt"]
    if name == "flank_too_long":
        return _vcf(tmp_path / "v.vcf", [ok]), ["--flank", 50], ["--flank 50", "input length 100"]
    if name == "not_a_vcf":
        p = tmp_path / "v.vcf"
        p.write_text("this is not a vcf\n")
        return p, [], ["v.vcf", "VCF"]
    if name == "vcf_missing":
        return tmp_path / "none.vcf", [], ["none.vcf: VCF does not exist"]
    if name == "tracks_without_dir":
        return _vcf(tmp_path / "v.vcf", [ok]), ["--tracks", 2], ["--tracks needs --tracks-dir"]
    raise AssertionError(name)


CASES = [
    "ref_mismatch",
    "chrom_absent",
    "ref_past_end",
    "region_without_index",
    "bad_alt",
    "model_length",
    "flank_too_long",
    "not_a_vcf",
    "vcf_missing",
    "tracks_without_dir",
]


@pytest.mark.parametrize("name", CASES)
def test_bad_input(inputs, tmp_path, name):
    vcf, extra, needles = _case(inputs, tmp_path, name)
    out = tmp_path / "out"
    out.mkdir()
    args = [
        "variant-effect",
        "--vcf",
        vcf,
        "--fasta",
        inputs["fasta"],
        "--model",
        inputs["model"],
        "--out",
        out / "e.tsv.gz",
        "--metrics",
        out / "m.json",
        "--flank",
        10,
        "--device",
        "cpu",
        "--threads",
        1,
    ]
    proc = run_in_process(*args, *extra, check=False)
    assert_one_line_error(proc, "variant-effect", *needles)
    assert_nothing_left(out)


def test_output_exists_needs_force(inputs, tmp_path):
    vcf = _vcf(tmp_path / "v.vcf", ["c1 5 ok T A"])
    out = tmp_path / "e.tsv"
    out.write_text("keep\n")
    args = [
        "variant-effect",
        "--vcf",
        vcf,
        "--fasta",
        inputs["fasta"],
        "--model",
        inputs["model"],
        "--out",
        out,
        "--flank",
        10,
        "--device",
        "cpu",
        "--threads",
        1,
    ]
    assert_one_line_error(run_in_process(*args, check=False), "variant-effect", "output exists")
    assert out.read_text() == "keep\n"
    run_in_process(*args, "--force")
    assert out.read_text().startswith("CHROM\tPOS\tID\tREF\tALT\tref_mean_atacseq_avg\t")
