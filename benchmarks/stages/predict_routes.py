"""Predict's input routes (opt-in): ``chromaflow predict`` from the genome h5, from the FASTA, and ``fasta2h5`` +
``predict``, against real Predmoter, end to end (process start-up included), on the CPU.
``benchmarks/run --stages predict_routes``; its page ``benchmarks/predict/ROUTES.md`` is made by
``benchmarks/render``. (The published predict-vs-Predmoter figure is the ``predict`` stage's; this stage adds the
FASTA route, issue 17: on the CPU the FASTA route must be at least as fast end to end as fasta2h5 + predict.)

Input: a seeded synthetic genome of ``rows`` subsequences of 21384 bp (one record of rows/2 chunks, both strands),
as FASTA and as its ``chromaflow fasta2h5`` h5. Model: ``make-test-model --preset release-bihybrid --seed 0`` (the
released models' architecture, FORMATS.md §2.9, seeded random weights), which real Predmoter loads.

Contenders, alternated (``--repeats`` rounds): ``predmoter`` (``peer-predmoter -m predict -f genome.h5 --device cpu
-b 120``), ``h5`` (``predict --h5``, fp32), ``fasta2h5+h5`` (``fasta2h5`` then ``predict --h5``: one ``sh -c``
command, so its wall and CPU are the two processes' sum), ``fasta`` (``predict --fasta --species S``, no h5 written)
and ``bf16`` (``predict --h5 --precision bf16 --metrics``, first round only). Every fp32 output of repeat 0 is
compared with Predmoter's (``harness.agree predictions``: identical, or ±1 only at near-ties), bf16's with fp32's
(``harness.agree deviation``); the bf16 run's own ``precision_check`` is read from its metrics into its run record
(``precision_check``). The case's ``agreement`` has ``per_contender`` (each route's comparison) and ``bf16``.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from ..harness.core import Case, Contender, summarize
from ..harness.env import ROOT
from ..harness.stagekit import Ctx, L, agree_child, fasta, ours, run_checked, sizes
from .predict_feed import stage_cases, when

#: launchers of ../shared/peers/bin this stage needs
PEERS = ["peer-predmoter"]
#: sizes of the full run (keys are the results files' and the docs' names; Ctx.cfg merges every stage's)
FULL = {"predict_routes_rows": 120}  # 2.57 Mbp of subsequences
#: sizes of the --quick run
QUICK = {"predict_routes_rows": 4}

SPECIES = "Synthetica"
PAGE = ROOT / "benchmarks" / "predict" / "ROUTES.md"
#: where this stage's runs are kept: ``benchmarks/run --stages predict_routes --out benchmarks/predict/results``
RESULTS_DIR = ROOT / "benchmarks" / "predict" / "results"
#: our fp32 routes, each compared with Predmoter's output
ROUTES = ("h5", "fasta2h5+h5", "fasta")
LABELS = {
    "predmoter": "Predmoter (real, `peer-predmoter -b 120`)",
    "h5": "chromaflow predict --h5",
    "fasta2h5+h5": "chromaflow fasta2h5 + predict --h5",
    "fasta": "chromaflow predict --fasta (no h5)",
    "bf16": "chromaflow predict --h5 --precision bf16",
}


# --------------------------------------------------------------------------------------------------
# the builder
# --------------------------------------------------------------------------------------------------
def _make_inputs(ctx: Ctx, rows: int, genome: Path, ckpt: Path) -> None:
    """The seeded FASTA (stagekit), its fasta2h5 file and the release-bihybrid checkpoint, each made once."""
    fa = fasta(ctx, rows // 2 * L, 1, seed=0)
    if not genome.exists():
        tmp = genome.with_name(genome.stem + "-tmp.h5")
        run_checked(ours("fasta2h5", "--fasta", fa, "--species", SPECIES, "--out", tmp), "fasta2h5")
        tmp.replace(genome)
    if not ckpt.exists():
        tmp = ckpt.with_name(ckpt.stem + "-tmp.ckpt")
        run_checked(ours("make-test-model", "--out", tmp, "--preset", "release-bihybrid", "--seed", "0"), "model")
        tmp.replace(ckpt)


def _contenders(ctx: Ctx, fa: Path, genome: Path, ckpt: Path) -> list[Contender]:
    peer_out = f"{genome.name.split('.')[0]}_predictions.h5"  # Predmoter's name: the input's stem + _predictions

    def predict(*args) -> list[str]:
        return ours("predict", *args, "--model", ckpt, "--device", "cpu")

    def two(d: Path, r: int) -> list[str]:
        conv = ours("fasta2h5", "--fasta", fa, "--species", SPECIES, "--out", d / "genome.h5")
        pred = predict("--h5", d / "genome.h5", "--out", d / "pred.h5")
        return ["sh", "-c", f"{shlex.join(conv)} && {shlex.join(pred)}"]

    peer = [ctx.peer("peer-predmoter"), "-m", "predict", "-f", genome, "--model", ckpt, "--device", "cpu", "-b", "120"]
    bf16 = ["--precision", "bf16", "--metrics"]
    return [
        Contender("predmoter", LABELS["predmoter"], "peer", lambda d, r: [*peer, "-o", d], outputs=sizes(peer_out)),
        Contender("h5", LABELS["h5"], "ours", lambda d, r: predict("--h5", genome, "--out", d / "pred.h5")),
        Contender("fasta2h5+h5", LABELS["fasta2h5+h5"], "ours", two, outputs=sizes("pred.h5", "genome.h5")),
        Contender(
            "fasta",
            LABELS["fasta"],
            "ours",
            lambda d, r: predict("--fasta", fa, "--species", SPECIES, "--out", d / "pred.h5"),
            outputs=sizes("pred.h5"),
        ),
        Contender(
            "bf16",
            LABELS["bf16"],
            "ours",
            lambda d, r: predict("--h5", genome, "--out", d / "pred.h5", *bf16, d / "metrics.json"),
            repeats=1,
            outputs=sizes("pred.h5"),
        ),
    ]


def _agree(genome: Path, ckpt: Path):
    peer_out = f"{genome.name.split('.')[0]}_predictions.h5"

    def agree(dirs: dict[str, Path]) -> dict:
        ref = dirs["predmoter"] / peer_out
        per = {k: agree_child("predictions", dirs[k] / "pred.h5", ref, ckpt, genome) for k in ROUTES}
        dev = agree_child("deviation", dirs["bf16"] / "pred.h5", dirs["h5"] / "pred.h5")
        detail = "; ".join(f"{k}: {v.get('detail')}" for k, v in per.items()) + f"; bf16 vs fp32: {dev.get('detail')}"
        return {"ok": all(v.get("ok") for v in per.values()), "per_contender": per, "bf16": dev, "detail": detail}

    return agree


def _per_run(key: str, d: Path) -> dict:
    """Case.per_run: the bf16 run's own deviation sample (its metrics' ``precision_check``)."""
    m = d / "metrics.json"
    if key != "bf16" or not m.is_file():
        return {}
    return {"precision_check": json.loads(m.read_text()).get("precision_check")}


def predict_routes(ctx: Ctx) -> tuple[list, list[Case]]:
    rows = ctx.cfg["predict_routes_rows"]
    fa = fasta(ctx, rows // 2 * L, 1, seed=0, make=False)
    genome, ckpt = ctx.inputs() / f"routes_{rows}rows.h5", ctx.inputs() / "release_bihybrid_seed0.ckpt"
    case = Case(
        "predict_routes",
        f"routes_{rows}rows",
        {
            "rows": rows,
            "bp": rows * L,
            "model": "release-bihybrid, random weights (make-test-model --preset release-bihybrid --seed 0)",
            "species": SPECIES,
            "predmoter_batch_size": 120,
        },
        _contenders(ctx, fa, genome, ckpt),
        [("h5", "predmoter"), ("fasta2h5+h5", "predmoter"), ("fasta", "predmoter"), ("fasta", "fasta2h5+h5")],
        _agree(genome, ckpt),
        per_run=_per_run,
        prepare=lambda: _make_inputs(ctx, rows, genome, ckpt),
        note="end to end (process start-up included), CPU; fp32 routes must equal Predmoter's output (ties allowed)",
    )
    return [], [case]


build = predict_routes


# --------------------------------------------------------------------------------------------------
# render: benchmarks/predict/ROUTES.md, every full run of this stage (benchmarks/render)
# --------------------------------------------------------------------------------------------------
HEAD = [
    "# chromaflow predict, both input routes, vs Predmoter",
    "",
    "Generated by `benchmarks/render` from the full runs of the `predict_routes` stage in "
    "`benchmarks/predict/results/` (`benchmarks/run --stages predict_routes --out benchmarks/predict/results`) and "
    "`benchmarks/results/` (do not edit by hand). Every figure below comes from a run of the command shown with it.",
    "",
]
NO_RUN = (
    "No run yet: `benchmarks/run --stages predict_routes --out benchmarks/predict/results`, then `benchmarks/render`."
)


def _verdict(case: dict, key: str) -> str:
    if key == "predmoter":
        return "(reference)"
    got = ((case.get("agreement") or {}).get("per_contender") or {}).get(key)
    if got is None:
        return "–"
    return "identical" if got.get("differ") == 0 else "identical except near-ties" if got.get("ok") else "**DIFFERENT**"


def _ratio(case: dict, ours_key: str, peer: str, what: str) -> str:
    r = next((x for x in case.get("ratios", []) if x["ours"] == ours_key and x["peer"] == peer), None)
    return f"{r[what]['of_medians']:.2f}×" if r and r.get(what) else "–"


def _row(case: dict, key: str) -> str:
    runs = [r for r in case["runs"] if r["contender"] == key and r.get("exit") == 0]
    if not runs:
        return f"| {case['contenders'][key]['label']} | **failed** | | | | | | |"
    w, c = summarize([r["wall_s"] for r in runs]), summarize([r["cpu_s"] for r in runs])
    sy = summarize([r.get("sys_s") or 0.0 for r in runs])
    rss = max(r.get("peak_tree_rss_bytes") or 0 for r in runs)
    vs = [_ratio(case, key, "predmoter", x) if key in ROUTES else "–" for x in ("wall", "cpu")]
    return (
        f"| {case['contenders'][key]['label']} | {w['median']:.2f} [{w['min']:.2f}–{w['max']:.2f}] | "
        f"{c['median']:.2f} [{c['min']:.2f}–{c['max']:.2f}] | {sy['median']:.2f} | {rss / 2**20:.0f} MiB | "
        f"{vs[0]} | {vs[1]} | {_verdict(case, key)} |"
    )


def _bf16(case: dict) -> list[str]:
    run = next((r for r in case["runs"] if r["contender"] == "bf16" and r.get("exit") == 0), None)
    d = (case.get("agreement") or {}).get("bf16")
    if not run or not d:
        return []
    pc = run.get("precision_check") or {}
    return [
        "",
        f"bf16 (`--precision bf16`, one run): {run['wall_s']:.2f} s wall, {run['cpu_s']:.2f} CPU-s; vs fp32 "
        f"{d['differ']} of {d['values']} values differ ({d['fraction']:.4%}), max |Δ| {d['max_abs']}; the run's own "
        f"sample ({pc.get('rows_sampled')} rows): {pc.get('differ')} of {pc.get('values')} differ, raw exp() max |Δ| "
        f"{pc.get('raw_max_abs', float('nan')):.3g}.",
    ]


def section(res: dict, case: dict) -> list[str]:
    """One run of this stage (``case``, a record of the results file ``res``)."""
    m = {**(res.get("machine") or {}), **(case.get("machine") or {})}
    loads = [r["load_before"][0] for r in case["runs"] if r.get("load_before")]
    rounds = max(sum(r["contender"] == k for r in case["runs"]) for k in case["contenders"])
    shared = bool(loads) and max(loads) > (m.get("usable_cpus") or 0) + 0.5
    torch = (res.get("software") or {}).get("torch")
    p = case["params"]
    return [
        f"## {when(case.get('started'))[:16].replace('T', ' ')} UTC — {m.get('cpu_model')}, {m.get('usable_cpus')} "
        f"cores, host {m.get('host')}",
        "",
        f"Command: `{case.get('command')}`. {p['rows']} subsequences of {L} bp = {p['rows'] * L / 1e6:.2f} Mbp, "
        f"model release-bihybrid (random weights), fp32 on CPU, torch {torch}. {rounds} rounds, alternating; load "
        f"average (1 min) before the runs: "
        + (f"{min(loads):.1f}–{max(loads):.1f}" if loads else "–")
        + (" — **the machine was shared: wall times are inflated and noisy, compare CPU seconds**" if shared else "")
        + ".",
        "",
        "| case | wall s, median [min–max] | CPU s (user+sys) | sys s | peak RSS | Predmoter ÷ case, wall | "
        "Predmoter ÷ case, CPU | output vs Predmoter |",
        "|---|---|---|---|---|---|---|---|",
        *(_row(case, k) for k in ("predmoter", *ROUTES) if k in case["contenders"]),
        "",
        "* issue 17 (on the CPU the FASTA route at least as fast as fasta2h5 + predict): fasta2h5 + predict ÷ the "
        f"FASTA route, wall {_ratio(case, 'fasta', 'fasta2h5+h5', 'wall')}, CPU "
        f"{_ratio(case, 'fasta', 'fasta2h5+h5', 'cpu')} (1× or more: the FASTA route is as fast or faster)",
        *_bf16(case),
        "",
    ]


def published(results_dir: Path | None = None, own: Path = RESULTS_DIR) -> dict[Path, str]:
    """This stage's page for ``benchmarks/render``: every full run of it in its own folder (``own``) and in
    ``results_dir`` (the harness's results folder), oldest first."""
    runs = stage_cases("predict_routes", (own, results_dir))
    body = [x for _, res, c in runs for x in section(res, c)] or [NO_RUN, ""]
    return {PAGE: "\n".join(HEAD + body).rstrip() + "\n"}
