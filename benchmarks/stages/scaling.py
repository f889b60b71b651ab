"""Scaling (ours alone): cost and peak RSS against input size for fasta2h5, bigwig and GENIE3.

The stage's sizes (``FULL`` for people, ``QUICK`` for CI), the peers it needs, its builder (``build(ctx)``:
(warm-up commands, cases)) and its helpers; ``benchmarks/stages/__init__.py`` lists the stages in run order.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..harness.core import Case, Contender
from ..harness.stagekit import (
    SPECIES,
    Ctx,
    fasta,
    gen,
    ours,
    predictions,
    sizes,
)
from ..harness.tables import (
    _f,
)

#: launchers of ../shared/peers/bin this stage needs
PEERS = ['peer-arboreto-python']
#: sizes of the full run (keys are the results files' and the docs' names; Ctx.cfg merges every stage's)
FULL = {
    "scaling_fasta2h5_mbp": [10, 50, 200],
    "scaling_bigwig_mbp": [10, 50, 200],
    "scaling_genie3_genes": [100, 1000, 5000],
    "scaling_genie3_samples": 100,
    "scaling_genie3_trees": 100,
    "scaling_genie3_peer_max_genes": 1000,  # arboreto beside us up to this size (5,000 genes: hours)
}
#: sizes of the --quick run
QUICK = {
    "scaling_fasta2h5_mbp": [1, 2, 4],
    "scaling_bigwig_mbp": [1, 2, 4],
    "scaling_genie3_genes": [20, 40, 80],
    "scaling_genie3_samples": 40,
    "scaling_genie3_trees": 10,
    "scaling_genie3_peer_max_genes": 20,
}


def _fasta2h5_cases(ctx: Ctx, cfg: dict) -> list[Case]:
    """fasta2h5 (default) at each of ``scaling_fasta2h5_mbp``."""
    cases = []
    for mbp in cfg["scaling_fasta2h5_mbp"]:
        fa = fasta(ctx, int(mbp * 1e6), 4, seed=5, make=False)
        c = Contender(
            "chromaflow",
            "chromaflow fasta2h5 (default)",
            "ours",
            lambda d, r, fa=fa: ours("fasta2h5", "--fasta", fa, "--species", SPECIES, "--out", d / "out.h5"),
            outputs=sizes("out.h5"),
        )
        cases.append(
            Case(
                "scaling",
                f"fasta2h5_{mbp:g}Mbp",
                {"series": "fasta2h5", "size": mbp, "unit": "Mbp", "records": 4},
                [c],
                [],
                prepare=lambda mbp=mbp: fasta(ctx, int(mbp * 1e6), 4, seed=5),
            )
        )
    return cases


def _bigwig_cases(ctx: Ctx, cfg: dict) -> list[Case]:
    """bigwig (bigWig, avg) at each of ``scaling_bigwig_mbp``."""
    cases = []
    for mbp in cfg["scaling_bigwig_mbp"]:
        pred, skip = predictions(ctx, mbp, "realistic")
        c = Contender(
            "chromaflow",
            "chromaflow bigwig (bigWig, avg)",
            "ours",
            lambda d, r, pred=pred: ours(
                "bigwig", "--predictions", pred, "--outdir", d, "--basename", "bench", "--no-browser-files"
            ),
        )
        cases.append(
            Case(
                "scaling",
                f"bigwig_{mbp:g}Mbp",
                {"series": "bigwig", "size": mbp, "unit": "Mbp"},
                [c],
                [],
                skip=skip,
                prepare=lambda mbp=mbp: predictions(ctx, mbp, "realistic", make=True),
            )
        )
    return cases


def _arboreto_contender(ctx: Ctx, expr: Path, t: int) -> Contender:
    """arboreto's GENIE3 (``t`` trees, 2 dask workers) on ``expr``."""
    return Contender(
        "arboreto genie3",
        f"arboreto 0.1.6 GENIE3 (RF, {t} trees, 2 dask workers)",
        "peer",
        lambda d, r: [
            ctx.peer("peer-arboreto-python"),
            ctx.peers / "checks" / "arboreto_genie3.py",
            expr,
            d / "links.tsv",
            "--trees",
            str(t),
            "--seed",
            "1",
            "--workers",
            "2",
        ],
    )


def _genie3_cases(ctx: Ctx, cfg: dict) -> list[Case]:
    """genie3 at each of ``scaling_genie3_genes``, arboreto beside it up to ``scaling_genie3_peer_max_genes``."""
    cases = []
    s, t = cfg["scaling_genie3_samples"], cfg["scaling_genie3_trees"]
    for g in cfg["scaling_genie3_genes"]:
        expr = ctx.inputs() / f"expression_{g}x{s}_seed2.tsv"
        c = Contender(
            "chromaflow",
            f"chromaflow genie3 --n-trees {t} --threads 2",
            "ours",
            lambda d, r, expr=expr: ours(
                "genie3",
                "--expression",
                expr,
                "--layout",
                "samples-x-genes",
                "--n-trees",
                t,
                "--threads",
                "2",
                "--out",
                d / "links.tsv.gz",
            ),
        )
        cs = [c]
        if g <= cfg["scaling_genie3_peer_max_genes"]:  # the ratio as genes grow, where the peer ends in minutes
            cs.append(_arboreto_contender(ctx, expr, t))
        cases.append(
            Case(
                "scaling",
                f"genie3_{g}genes",
                {"series": "genie3", "size": g, "unit": "genes", "samples": s, "trees": t},
                cs,
                [("chromaflow", "arboreto genie3")] if len(cs) > 1 else [],
                prepare=lambda expr=expr, g=g: expr.exists() or gen("expression", expr, g, s, 2, str(expr) + ".gold"),
            )
        )
    return cases


def scaling(ctx: Ctx) -> tuple[list, list[Case]]:
    """Our cost against input size: fasta2h5 and bigwig by Mbp, genie3 by genes."""
    cfg = ctx.cfg
    return [], _fasta2h5_cases(ctx, cfg) + _bigwig_cases(ctx, cfg) + _genie3_cases(ctx, cfg)


build = scaling


# --------------------------------------------------------------------------------------------------
# the stage's tables and plots (benchmarks/render)
# --------------------------------------------------------------------------------------------------
def fit_exponent(xs: list[float], ys: list[float]) -> float | None:
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x and y and x > 0 and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return None if sxx == 0 else sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def scaling_series(cases: list[dict]) -> dict:
    out: dict = {}
    for c in cases:
        if c["stage"] != "scaling" or c.get("skipped"):
            continue
        con = (c.get("contenders") or {}).get("chromaflow") or {}
        if not con.get("wall_s"):
            continue
        p = c["params"]
        peer = next((r for r in c.get("ratios") or [] if r["ours"] == "chromaflow"), None)
        s = out.setdefault(p["series"], {"unit": p["unit"], "points": [], "peer_ratio": {}})
        s["points"].append(
            (p["size"], con["wall_s"]["median"], con["cpu_s"]["median"], con["peak_rss_bytes"]["median"])
        )
        if peer:
            s["peer_ratio"][p["size"]] = (c["contenders"][peer["peer"]]["label"], peer["wall"])
    for s in out.values():
        s["points"].sort()
        xs = [p[0] for p in s["points"]]
        s["exp_wall"] = fit_exponent(xs, [p[1] for p in s["points"]])
        s["exp_cpu"] = fit_exponent(xs, [p[2] for p in s["points"]])
        s["exp_rss"] = fit_exponent(xs, [p[3] for p in s["points"]])
    return out


def scaling_plot(series: dict, png: Path) -> Path | None:
    if not series:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(series), figsize=(4.2 * len(series), 7), squeeze=False)
    for i, (name, s) in enumerate(sorted(series.items())):
        xs = [p[0] for p in s["points"]]
        ax = axes[0][i]
        ax.loglog(xs, [p[2] for p in s["points"]], "o-", label=f"CPU s (exponent {_f(s['exp_cpu'])})")
        ax.loglog(xs, [p[1] for p in s["points"]], "s--", label=f"wall s (exponent {_f(s['exp_wall'])})")
        ax.set_title(f"{name}: cost vs size")
        ax.set_xlabel(s["unit"])
        ax.set_ylabel("seconds")
        ax.legend(fontsize=8)
        ax = axes[1][i]
        ax.semilogx(
            xs, [p[3] / 2**20 for p in s["points"]], "o-", color="C2", label=f"peak RSS (exponent {_f(s['exp_rss'])})"
        )
        ax.set_ylim(bottom=0)
        ax.set_xlabel(s["unit"])
        ax.set_ylabel("MiB")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    plt.close(fig)
    return png
