"""Peaks: MACS3 ``bdgpeakcall`` on the bedGraph against ``chromaflow peaks`` from the predictions h5.

The stage's sizes (``FULL`` for people, ``QUICK`` for CI), the peers it needs, its builder (``build(ctx)``:
(warm-up commands, cases)) and its helpers; ``benchmarks/stages/__init__.py`` lists the stages in run order.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from ..harness.core import Case, Contender
from ..harness.stagekit import (
    PY,
    Ctx,
    ours,
    predictions,
    run_checked,
    sizes,
)

#: launchers of ../shared/peers/bin this stage needs
PEERS = []
#: what limits the stage on the CPU (issue 55's profiles), beside its target in the generated tables
LIMIT = (
    "inflating the int64 prediction chunks (libdeflate) and one pass over both strands' int32 values, on "
    "two cores, plus a fixed start-up ([docs/peaks.md](../docs/peaks.md), Speed)"
)
#: sizes of the full run (keys are the results files' and the docs' names; Ctx.cfg merges every stage's)
FULL = {
    "peaks_mbp": 200,
}
#: sizes of the --quick run
QUICK = {
    "peaks_mbp": 2,
}


#: strand averages mostly 2 and 3 with 3s in runs of 1-4 bp, so cutoff 3 with a 50-bp max gap calls ~100k peaks per
#: 50 Mbp (a cutoff of 25 would call none)
PEAKS_ARGS = {"cutoff": 3, "min_length": 50, "max_gap": 50}


def _macs3() -> str | None:
    exe = Path(PY).with_name("macs3")
    return str(exe) if exe.exists() else None


def _narrowpeak_rows(path: Path) -> list[list[str]]:
    return [ln.split("\t") for ln in path.read_text().splitlines() if ln and not ln.startswith("track")]


def _peaks_agree(dirs: dict) -> dict:
    """Columns 1-6 and 10 of every peak equal (chromaflow's 7-9: summit value, -1, -1; MACS3's: 0, 0, 0)."""
    ours_rows = _narrowpeak_rows(dirs["chromaflow"] / "peaks.narrowPeak")
    theirs = _narrowpeak_rows(dirs["macs3"] / "peaks")
    if len(ours_rows) != len(theirs):
        return {"ok": False, "detail": f"{len(ours_rows)} peaks vs MACS3's {len(theirs)}"}
    for a, b in zip(ours_rows, theirs):
        if a[:6] + a[9:] != b[:6] + b[9:]:
            return {"ok": False, "detail": f"first difference: {a} vs {b}"}
    return {
        "ok": True,
        "detail": f"{len(theirs)} peaks identical (coordinates, name, score, summit)",
        "peaks": len(theirs),
    }


def _peaks_prepare(ctx: Ctx, mbp: float, pred: Path | None, bg: Path):
    """prepare(): the predictions h5 and the bedGraph of its atacseq average track (made by chromaflow bigwig, not
    timed)."""

    def prepare():
        predictions(ctx, mbp, "realistic", make=True)
        if not bg.exists():
            ctx.log(f"  generating {bg.name}")
            d = ctx.inputs() / "peaks_bg"
            run_checked(
                ours(
                    "bigwig",
                    "--predictions",
                    pred,
                    "--outdir",
                    d,
                    "--basename",
                    "b",
                    "--format",
                    "bedgraph",
                    "--datasets",
                    "atacseq",
                    "--no-browser-files",
                    "--force",
                ),
                "chromaflow bigwig",
            )
            with open(bg.with_name(bg.name + ".tmp"), "wb") as fh:
                subprocess.run(["gzip", "-dc", str(d / "b_atacseq_avg_strand.bg.gz")], stdout=fh, check=True)
            bg.with_name(bg.name + ".tmp").replace(bg)

    return prepare


def _macs3_contender(macs3: str | None, bg: Path) -> Contender:
    """MACS3 bdgpeakcall on the bedGraph, with :data:`PEAKS_ARGS`."""
    a = PEAKS_ARGS
    return Contender(
        "macs3",
        "MACS3 bdgpeakcall (on the bedGraph)",
        "peer",
        lambda d, r: [
            macs3,
            "bdgpeakcall",
            "-i",
            bg,
            "-c",
            str(a["cutoff"]),
            "-l",
            str(a["min_length"]),
            "-g",
            str(a["max_gap"]),
            "--outdir",
            d,
            "-o",
            "peaks",
        ],
        outputs=sizes("peaks"),
    )


def _peaks_ours(pred: Path | None) -> Contender:
    """chromaflow peaks on the predictions h5, with :data:`PEAKS_ARGS`."""
    a = PEAKS_ARGS
    return Contender(
        "chromaflow",
        "chromaflow peaks (on the predictions h5)",
        "ours",
        lambda d, r: ours(
            "peaks",
            "--predictions",
            pred,
            "--dataset",
            "atacseq",
            "--out",
            d / "peaks.narrowPeak",
            "--name",
            "peaks",
            "--cutoff",
            a["cutoff"],
            "--min-length",
            a["min_length"],
            "--max-gap",
            a["max_gap"],
        ),
        outputs=sizes("peaks.narrowPeak"),
    )


def peaks(ctx: Ctx) -> tuple[list, list[Case]]:
    """chromaflow peaks on the predictions h5 vs MACS3 bdgpeakcall on the bedGraph of the same track (made
    beforehand by chromaflow bigwig and not timed: the peer's time is the peak call alone)."""
    mbp = ctx.cfg["peaks_mbp"]
    pred, skip = predictions(ctx, mbp, "realistic")
    macs3 = _macs3()
    if macs3 is None:
        skip = skip or "MACS3 is not installed in the chromaflow venv (pip install MACS3)"
    bg = ctx.inputs() / f"predictions_realistic_{mbp:g}Mbp_seed1_atacseq_avg.bg"
    case = Case(
        "peaks",
        f"realistic_{mbp}Mbp_atacseq_avg",
        {"input": "synth_predictions.py --mode realistic --seed 1", "mbp": mbp, **PEAKS_ARGS},
        [_macs3_contender(macs3, bg), _peaks_ours(pred)],
        [("chromaflow", "macs3")],
        _peaks_agree,
        skip=skip,
        prepare=_peaks_prepare(ctx, mbp, pred, bg),
        note="MACS3 reads the bedGraph chromaflow bigwig wrote (not timed); chromaflow reads the h5",
    )
    return [], [case]


build = peaks
