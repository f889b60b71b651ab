"""GENIE3 on DREAM4 (and a synthetic matrix): ours against arboreto GENIE3/GRNBoost2 and the reference GENIE3.

The stage's sizes (``FULL`` for people, ``QUICK`` for CI), the peers it needs, its builder (``build(ctx)``:
(warm-up commands, cases)) and its helpers; ``benchmarks/stages/__init__.py`` lists the stages in run order.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from ..harness.core import ROOT, TREE_NORMALISED, Case, Contender
from ..harness.stagekit import (
    Ctx,
    gen,
    ours,
    score_links,
)

#: launchers of ../shared/peers/bin this stage needs
PEERS = ['peer-arboreto-python', 'peer-genie3-python']
#: what limits the stage on the CPU (issue 55's profiles), beside its target in the generated tables
LIMIT = (
    "the tree kernel's sample × feature visits (the bit walk and pass 1, memory-bound: "
    "[docs/genie3.md](../docs/genie3.md), Speed); start-up, reading and writing are the rest"
)
#: sizes of the full run (keys are the results files' and the docs' names; Ctx.cfg merges every stage's)
FULL = {
    # seeds: the peers' (arboreto ~9 min of 2 cores per seed for the 5 networks) and ours (seconds per seed)
    "genie3_networks": [1, 2, 3, 4, 5],
    "genie3_trees": 1000,
    "genie3_seeds": 6,
    "genie3_reference_seeds": 1,
    "genie3_our_seeds": 12,
    "genie3_synthetic": (500, 300, 300),  # genes, samples, trees
}
#: sizes of the --quick run
QUICK = {
    "genie3_networks": [1],
    "genie3_trees": 20,
    "genie3_seeds": 1,
    "genie3_reference_seeds": 1,
    "genie3_our_seeds": 1,
    "genie3_synthetic": None,  # DREAM4 net 1 runs every GENIE3 contender already
}


DREAM4 = ROOT.parent / "shared" / "reference" / "dream4"


GRNBOOST2 = ROOT / "benchmarks" / "harness" / "grnboost2_peer.py"  # run by the arboreto peer's interpreter


def _ours_genie3(expr: Path, trees: int, repeats: int, key: str, label: str, extra: list) -> Contender:
    """``chromaflow genie3`` on ``expr`` (2 threads), repeat r with seed r + 1."""
    return Contender(
        key,
        label,
        "ours",
        lambda d, r: ours(
            "genie3",
            "--expression",
            expr,
            "--layout",
            "samples-x-genes",
            "--n-trees",
            trees,
            *extra,
            "--seed",
            r + 1,
            "--threads",
            "2",
            "--out",
            d / "links.tsv.gz",
        ),
        repeats=repeats,
        seed_for_repeat=True,
    )


def _peer_genie3(ctx: Ctx, key: str, label: str, launcher: str, script, expr: Path, extra: list, repeats: int):
    """A peer's GENIE3 (or GRNBoost2) run by its launcher: ``script EXPR links.tsv *extra --seed r+1 *workers``."""
    workers = ["--threads", "2"] if key == "reference GENIE3" else ["--workers", "2"]
    return Contender(
        key,
        label,
        "peer",
        lambda d, r: [ctx.peer(launcher), script, expr, d / "links.tsv", *extra, "--seed", str(r + 1), *workers],
        repeats=repeats,
        seed_for_repeat=True,
    )


def _genie3_contenders(
    ctx: Ctx,
    expr: Path,
    trees: int,
    seeds: int,
    ref_seeds: int | None,
    grnboost: bool = True,
    our_seeds: int | None = None,
    tree_normalised: bool = False,
) -> list[Contender]:
    """Ours (and, with ``tree_normalised``, ours with arboreto's importance) beside arboreto GENIE3, the reference
    GENIE3 (``ref_seeds`` runs) and arboreto GRNBoost2, in that order."""
    mine = our_seeds or seeds
    checks, t = ctx.peers / "checks", ["--trees", str(trees)]
    cs = [
        _ours_genie3(expr, trees, mine, "chromaflow", f"chromaflow genie3 --n-trees {trees} --threads 2", []),
        _peer_genie3(
            ctx,
            "arboreto genie3",
            f"arboreto 0.1.6 GENIE3 (RF, {trees} trees, 2 dask workers)",
            "peer-arboreto-python",
            checks / "arboreto_genie3.py",
            expr,
            t,
            seeds,
        ),
    ]
    if tree_normalised:  # arboreto's importance (scikit-learn's feature_importances_): the like-for-like accuracy
        label = f"chromaflow genie3 --n-trees {trees} --importance tree-normalised --threads 2"
        cs.insert(1, _ours_genie3(expr, trees, mine, TREE_NORMALISED, label, ["--importance", "tree-normalised"]))
    if ref_seeds:
        label = f"reference GENIE3.py (RF, K=sqrt, {trees} trees, 2 processes)"
        script = checks / "reference_genie3.py"
        cs.append(_peer_genie3(ctx, "reference GENIE3", label, "peer-genie3-python", script, expr, t, ref_seeds))
    if grnboost:
        label = "arboreto 0.1.6 GRNBoost2 (2 dask workers)"
        cs.append(_peer_genie3(ctx, "arboreto grnboost2", label, "peer-arboreto-python", GRNBOOST2, expr, [], seeds))
    return cs


def _scorer(gold: Path):
    def per_run(key: str, d: Path) -> dict:
        links = d / ("links.tsv.gz" if (d / "links.tsv.gz").exists() else "links.tsv")
        s = score_links(links, gold)
        return {"auroc": s.get("auroc"), "aupr": s.get("aupr"), "scored_links": s.get("scored_links")}

    return per_run


def _genie3_summary(dirs: dict) -> dict:
    return {
        "ok": None,
        "detail": "accuracy per run (AUROC/AUPR) beside the times; no equality check (different random forests)",
    }


def _synthetic_genie3(ctx: Ctx, g: int, s: int, t: int) -> Case:
    """GENIE3 on a generated matrix (genes x samples, t trees), scored against the edges that generated it."""
    expr = ctx.inputs() / f"expression_{g}x{s}_seed1.tsv"
    gold = ctx.inputs() / f"expression_{g}x{s}_seed1.gold.tsv"
    if not expr.exists():
        gen("expression", expr, g, s, 1, gold)
    cs = _genie3_contenders(ctx, expr, t, ctx.repeats, None)
    return Case(
        "genie3",
        f"synthetic_{g}x{s}",
        {"genes": g, "samples": s, "trees": t, "regulators": "all genes"},
        cs,
        [("chromaflow", c.key) for c in cs[1:]],
        _genie3_summary,
        per_run=_scorer(gold),
        note="reference GENIE3 left out at this size (hours); gold = the generating edges",
    )


def genie3(ctx: Ctx) -> tuple[list, list[Case]]:
    cfg = ctx.cfg
    cases = []
    trees, seeds = cfg["genie3_trees"], cfg["genie3_seeds"]
    for net in cfg["genie3_networks"]:
        expr = DREAM4 / f"insilico_size100_{net}_multifactorial.tsv"
        gold = DREAM4 / f"DREAM4_GoldStandard_InSilico_Size100_multifactorial_{net}.tsv"
        skip = None if expr.exists() else f"reference folder missing: {expr}"
        ns = cfg["genie3_our_seeds"]
        cs = _genie3_contenders(
            ctx, expr, trees, seeds, cfg["genie3_reference_seeds"], our_seeds=ns, tree_normalised=True
        )
        cases.append(
            Case(
                "genie3",
                f"dream4_net{net}",
                {
                    "network": net,
                    "genes": 100,
                    "samples": 100,
                    "trees": trees,
                    "seeds": list(range(1, seeds + 1)),
                    "our_seeds": list(range(1, ns + 1)),
                },
                cs,
                [("chromaflow", c.key) for c in cs if c.role == "peer"] + [(TREE_NORMALISED, "arboreto genie3")],
                _genie3_summary,
                per_run=_scorer(gold),
                skip=skip,
                note=f"repeat r uses seed r + 1 for every tool; peers seeds 1-{seeds}, ours 1-{ns} (seconds "
                "each); AUROC/AUPR per run",
            )
        )
    if cfg["genie3_synthetic"]:
        cases.append(_synthetic_genie3(ctx, *cfg["genie3_synthetic"]))
    warm = []
    if (DREAM4 / "insilico_size100_1_multifactorial.tsv").exists():
        e = DREAM4 / "insilico_size100_1_multifactorial.tsv"
        warm = [
            [
                ctx.peer("peer-arboreto-python"),
                ctx.peers / "checks" / "arboreto_genie3.py",
                e,
                "{d}/l.tsv",
                "--trees",
                "5",
            ],
            [
                ctx.peer("peer-genie3-python"),
                ctx.peers / "checks" / "reference_genie3.py",
                e,
                "{d}/l.tsv",
                "--trees",
                "5",
            ],
            ours("genie3", "--expression", e, "--layout", "samples-x-genes", "--n-trees", "5", "--out", "{d}/l.tsv.gz"),
        ]
    return warm, cases


build = genie3


# --------------------------------------------------------------------------------------------------
# the stage's tables and plots (benchmarks/render)
# --------------------------------------------------------------------------------------------------
def genie3_accuracy(cases: list[dict]) -> dict:
    """Per tool: per seed, the mean AUROC/AUPR over the DREAM4 networks; their seed-to-seed spread; median
    wall per network."""
    out: dict = {}
    d4 = [c for c in cases if c["stage"] == "genie3" and c["case"].startswith("dream4") and not c.get("skipped")]
    if not d4:
        return out
    nets = len(d4)
    tools = {k for c in d4 for k in c.get("contenders", {})}
    for t in sorted(tools):
        by_seed: dict[int, list] = {}
        walls = []
        for c in d4:
            for r in c["runs"]:
                if r["contender"] == t and r.get("exit") == 0 and r.get("aupr") is not None:
                    by_seed.setdefault(r.get("seed"), []).append((r["auroc"], r["aupr"]))
                    walls.append(r["wall_s"])
        full = {s: v for s, v in by_seed.items() if len(v) == nets}
        if not full:
            continue
        auroc = [statistics.mean(a for a, _ in v) for v in full.values()]
        aupr = [statistics.mean(b for _, b in v) for v in full.values()]
        out[t] = {
            "seeds": sorted(full),
            "mean_auroc": auroc,
            "mean_aupr": aupr,
            "networks": nets,
            "median_wall_s": statistics.median(walls),
            "label": d4[0]["contenders"][t]["label"],
        }
    return out
