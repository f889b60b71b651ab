"""bigWig / bedGraph: Predmoter's ``convert2coverage.py`` against ``chromaflow bigwig``.

The stage's sizes (``FULL`` for people, ``QUICK`` for CI), the peers it needs, its builder (``build(ctx)``:
(warm-up commands, cases)) and its helpers; ``benchmarks/stages/__init__.py`` lists the stages in run order.
"""

from __future__ import annotations

from pathlib import Path

from ..harness.core import ROOT, Case, Contender
from ..harness.stagekit import (
    Ctx,
    agree_child,
    ours,
    predictions,
)

#: launchers of ../shared/peers/bin this stage needs
PEERS = ['peer-predmoter-convert']
#: what limits the stage on the CPU (issue 55's profiles), beside its target in the generated tables
LIMIT = (
    "deflating the bigWig's data and zoom blocks (libdeflate level 1, the default) and inflating the "
    "int64 prediction chunks; then the per-base runs pass, all on both cores "
    "([docs/bigwig.md](../docs/bigwig.md), What limits it)"
)
#: sizes of the full run (keys are the results files' and the docs' names; Ctx.cfg merges every stage's)
FULL = {
    "bigwig_mbp": 200,
    "bigwig_worst_mbp": 50,
    "bigwig_variants": [
        ("bigwig", "avg", None),
        ("bedgraph", "avg", None),
        ("bigwig", "+", None),
        ("bigwig", "-", None),
        ("bedgraph", "-", None),  # bench_bigwig.py's bg:- (the A/B script this stage replaced)
        ("bigwig", "avg", 150),
        ("bedgraph", "avg", 150),
    ],
    "bigwig_worst_variants": [("bigwig", "avg", None)],
}
#: sizes of the --quick run
QUICK = {
    "bigwig_mbp": 2,
    "bigwig_worst_mbp": 1,
    # one realistic case: the two real-Predmoter cases quick adds already cover bedGraph and windows
    "bigwig_variants": [("bigwig", "avg", None)],
    "bigwig_worst_variants": [],
}


def _bw_case(
    ctx: Ctx, pred: Path | None, skip: str | None, label: str, fmt: str, strand: str, ws: int | None, params: dict
) -> Case:
    ext = "bw" if fmt == "bigwig" else "bg"
    name = f"{label}_{ext}_{'avg' if strand == 'avg' else 'plus' if strand == '+' else 'minus'}" + (
        f"_ws{ws}" if ws else ""
    )

    def peer_argv(d, r):
        a = [ctx.peer("peer-predmoter-convert"), "-i", pred, "-o", d, "--basename", "bench", "-of", fmt]
        a += ["--strand", strand] if strand != "avg" else []
        return a + (["--window-size", str(ws)] if ws else [])

    def our_argv(d, r):
        return ours(
            "bigwig",
            "--predictions",
            pred,
            "--outdir",
            d,
            "--basename",
            "bench",
            "--format",
            fmt,
            "--strand",
            strand,
            "--no-browser-files",
            *(["--window-size", ws] if ws else []),
        )

    def tracks_of(d: Path) -> dict:
        return {p.name: p.stat().st_size for p in d.iterdir() if p.name.endswith((".bw", ".bg.gz"))}

    peer = Contender("predmoter", "Predmoter convert2coverage.py", "peer", peer_argv, outputs=tracks_of)
    mine = Contender("chromaflow", "chromaflow bigwig", "ours", our_argv, outputs=tracks_of)
    make = params.pop("make", None)
    return Case(
        "bigwig",
        name,
        dict(params, format=fmt, strand=strand, window_size=ws),
        [peer, mine],
        [("chromaflow", "predmoter")],
        lambda dirs: agree_child("tracks", dirs["chromaflow"], dirs["predmoter"], pred, ws or 0),
        skip=skip,
        prepare=make,
    )


def _reference_cases(ctx: Ctx, ref: Path) -> list[Case]:
    """Two cases on real Predmoter output (the reference folder's predictions h5): a windowed bigWig, a bedGraph."""
    return [
        _bw_case(
            ctx,
            ref,
            None,
            "reference_pred_data_1",
            fmt,
            strand,
            ws,
            {"input": "reference predmoter/pred_data_1_predictions.h5", "mbp": 0.154},
        )
        for fmt, strand, ws in (("bigwig", "avg", 150), ("bedgraph", "+", None))
    ]


def _synthetic_cases(ctx: Ctx, cfg: dict) -> list[Case]:
    """The variants on synth_predictions.py's realistic predictions, then the worst-case ones (where configured)."""
    cases = []
    mbp = cfg["bigwig_mbp"]
    pred, skip = predictions(ctx, mbp, "realistic")
    for fmt, strand, ws in cfg["bigwig_variants"]:
        cases.append(
            _bw_case(
                ctx,
                pred,
                skip,
                f"realistic_{mbp}Mbp",
                fmt,
                strand,
                ws,
                {
                    "input": "synth_predictions.py --mode realistic --seed 1",
                    "mbp": mbp,
                    "make": lambda: predictions(ctx, mbp, "realistic", make=True),
                },
            )
        )
    if cfg["bigwig_worst_variants"]:
        wm = cfg["bigwig_worst_mbp"]
        pred_w, skip_w = predictions(ctx, wm, "worst")
        for fmt, strand, ws in cfg["bigwig_worst_variants"]:
            cases.append(
                _bw_case(
                    ctx,
                    pred_w,
                    skip_w,
                    f"worst_{wm}Mbp",
                    fmt,
                    strand,
                    ws,
                    {
                        "input": "synth_predictions.py --mode worst --seed 1",
                        "mbp": wm,
                        "make": lambda: predictions(ctx, wm, "worst", make=True),
                    },
                )
            )
    return cases


def bigwig(ctx: Ctx) -> tuple[list, list[Case]]:
    """Predmoter's convert2coverage.py against ours: the reference output where present (quick), and synthetic
    predictions."""
    cfg = ctx.cfg
    cases = []
    ref = ROOT.parent / "shared" / "reference" / "predmoter" / "pred_data_1_predictions.h5"
    warm = []
    if ref.exists():
        warm = [
            [ctx.peer("peer-predmoter-convert"), "-i", ref, "-o", "{d}", "--basename", "w", "-of", "bw"],
            ours("bigwig", "--predictions", ref, "--outdir", "{d}", "--basename", "w", "--no-browser-files"),
        ]
        if ctx.quick:  # real Predmoter output, wherever the reference folder is
            cases += _reference_cases(ctx, ref)
    cases += _synthetic_cases(ctx, cfg)
    return warm, cases


build = bigwig
