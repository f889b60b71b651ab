"""Prediction: Predmoter ``-m predict`` against ``chromaflow predict`` fp32 (identical) and bf16 (deviation).

The stage's sizes (``FULL`` for people, ``QUICK`` for CI), the peers it needs, its builder (``build(ctx)``:
(warm-up commands, cases)) and its helpers; ``benchmarks/stages/__init__.py`` lists the stages in run order.
"""

from __future__ import annotations

from pathlib import Path

from ..harness.core import Case, Contender
from ..harness.stagekit import (
    SPECIES,
    Ctx,
    L,
    agree_child,
    fasta,
    ours,
    run_checked,
    sizes,
)

#: launchers of ../shared/peers/bin this stage needs
PEERS = ['peer-predmoter']
#: what limits the stage on the CPU (issue 55's profiles), beside its target in the generated tables
LIMIT = (
    "the torch kernels Predmoter runs too (oneDNN convolutions, the LSTM layers, layout copies), which "
    "identical fp32 predictions need; then torch's import ([docs/predict.md](../docs/predict.md), CPU "
    "limit)"
)
#: sizes of the full run (keys are the results files' and the docs' names; Ctx.cfg merges every stage's)
FULL = {
    "predict_rows": 120,  # 2.57 Mbp of subsequences (60 per strand)
}
#: sizes of the --quick run
QUICK = {
    "predict_rows": 4,
}


FULLSIZE = [
    "--model-type",
    "bi-hybrid",
    "--cnn-layers",
    "3",
    "--filter-size",
    "64",
    "--kernel-size",
    "9",
    "--step",
    "2",
    "--up",
    "2",
    "--dilation",
    "1",
    "--lstm-layers",
    "2",
    "--hidden-size",
    "128",
    "--bnorm",
    "--dropout",
    "0.3",
    "--datasets",
    "atacseq",
    "h3k4me3",
]


def _predict_inputs(ctx: Ctx, rows: int) -> tuple[Path, Path, Path]:
    """The full-size test checkpoint, the genome h5 of ``rows`` subsequences and the warm-up's h5 (made when
    absent)."""
    inp = ctx.inputs()
    ckpt = inp / "fullsize_bihybrid_seed0.ckpt"
    if not ckpt.exists():
        ctx.log("  writing the full-size bi-hybrid test checkpoint (random weights, seed 0)")
        run_checked(ours("make-test-model", "--out", ckpt, "--seed", "0", *FULLSIZE), "make-test-model")
    fa = fasta(ctx, rows // 2 * L, 1, seed=11)
    genome = inp / f"predict_{rows}rows.h5"
    if not genome.exists():
        run_checked(ours("fasta2h5", "--fasta", fa, "--species", SPECIES, "--out", genome), "fasta2h5")
    warm_h5 = inp / "predict_warm.h5"
    if not warm_h5.exists():
        run_checked(
            ours("fasta2h5", "--fasta", fasta(ctx, 5000, 1, seed=3), "--species", SPECIES, "--out", warm_h5), "fasta2h5"
        )
    return ckpt, genome, warm_h5


def _predict_warm(ctx: Ctx, ckpt: Path, warm_h5: Path) -> list:
    """The warm-up commands: each tool once on the small h5."""
    return [
        [
            ctx.peer("peer-predmoter"),
            "-m",
            "predict",
            "-f",
            warm_h5,
            "-o",
            "{d}",
            "--model",
            ckpt,
            "--device",
            "cpu",
            "-b",
            "120",
        ],
        ours("predict", "--h5", warm_h5, "--model", ckpt, "--out", "{d}/w.h5", "--device", "cpu"),
    ]


def _predict_contenders(ctx: Ctx, genome: Path, ckpt: Path) -> list[Contender]:
    """Predmoter -m predict, ours in fp32 (the default) and ours in bf16."""
    pm = Contender(
        "predmoter",
        "Predmoter.py -m predict --device cpu -b 120",
        "peer",
        lambda d, r: [
            ctx.peer("peer-predmoter"),
            "-m",
            "predict",
            "-f",
            genome,
            "-o",
            d,
            "--model",
            ckpt,
            "--device",
            "cpu",
            "-b",
            "120",
        ],
        outputs=sizes(f"{genome.stem}_predictions.h5"),
    )
    fp32 = Contender(
        "chromaflow fp32",
        "chromaflow predict --device cpu (fp32, default)",
        "ours",
        lambda d, r: ours(
            "predict", "--h5", genome, "--model", ckpt, "--out", d / "pred.h5", "--device", "cpu", "--batch-size", "120"
        ),
        outputs=sizes("pred.h5"),
    )
    bf16 = Contender(
        "chromaflow bf16",
        "chromaflow predict --device cpu --precision bf16",
        "ours",
        lambda d, r: ours(
            "predict",
            "--h5",
            genome,
            "--model",
            ckpt,
            "--out",
            d / "pred.h5",
            "--device",
            "cpu",
            "--batch-size",
            "120",
            "--precision",
            "bf16",
        ),
        outputs=sizes("pred.h5"),
    )
    return [pm, fp32, bf16]


def _predict_agree(genome: Path, ckpt: Path):
    """agree(): fp32 must equal Predmoter's output (ties allowed); bf16's deviation from it is recorded."""

    def agree(dirs: dict) -> dict:
        peer_out = dirs["predmoter"] / f"{genome.stem}_predictions.h5"
        fp = agree_child("predictions", dirs["chromaflow fp32"] / "pred.h5", peer_out, ckpt, genome)
        bf = agree_child("deviation", dirs["chromaflow bf16"] / "pred.h5", peer_out)
        return {
            "ok": fp.get("ok"),
            "fp32": fp,
            "bf16": bf,
            "detail": f"fp32: {fp.get('detail')}; bf16 vs Predmoter: {bf.get('detail')}",
        }

    return agree


def predict(ctx: Ctx) -> tuple[list, list[Case]]:
    """Predmoter against ours in fp32 and bf16 on the full-size bi-hybrid model (random weights)."""
    rows = ctx.cfg["predict_rows"]
    ckpt, genome, warm_h5 = _predict_inputs(ctx, rows)
    warm = _predict_warm(ctx, ckpt, warm_h5)
    case = Case(
        "predict",
        f"fullsize_{rows}rows",
        {
            "rows": rows,
            "bp": rows * L,
            "model": "bi-hybrid full size, random weights (make-test-model seed 0)",
            "batch_size": 120,
        },
        _predict_contenders(ctx, genome, ckpt),
        [("chromaflow fp32", "predmoter"), ("chromaflow bf16", "predmoter")],
        _predict_agree(genome, ckpt),
        note="end to end (process start-up included); fp32 must equal Predmoter's output (ties allowed)",
    )
    return warm, [case]


build = predict
