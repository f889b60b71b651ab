"""GENIE3 at genome scale (ours alone): the cost model, the plan -> chunks -> merge path, the merge alone.

The stage's sizes (``FULL`` for people, ``QUICK`` for CI), the peers it needs, its builder (``build(ctx)``:
(warm-up commands, cases)) and its helpers; ``benchmarks/stages/__init__.py`` lists the stages in run order.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from ..harness.core import Case, Contender
from ..harness.env import module
from ..harness.genie3scale import chunk_args
from ..harness.slurm_cluster import SlurmCluster
from ..harness.stagekit import (
    Ctx,
    ours,
    run_checked,
)
from ..harness.tables import (
    _f,
    _ok,
)

#: launchers of ../shared/peers/bin this stage needs
PEERS = []
#: sizes of the full run (keys are the results files' and the docs' names; Ctx.cfg merges every stage's)
FULL = {
    # genie3scale (issue 30 §2): the run whose cost is predicted (genes, regulators, samples, trees); the cost
    # model's points (one factor at a time around the largest of each; TARGETS targets of a chunk, --threads 1);
    # the whole plan -> chunks -> merge path (genes, TFs, samples, trees, chunk size: trees chosen so that the four
    # pipeline runs take well under an hour of a 2-core machine); per-task peak RSS bounds (a failed bound fails
    # the case)
    "g3scale_predict": (25_000, 1_700, 500, 1000),
    "g3scale_cost": {
        "samples": [100, 250, 500],
        "regulators": [200, 600, 1700],
        "trees": [10, 20, 40],
        "targets": 40,
        "extra_genes": 300,
    },
    "g3scale_pipeline": (5_000, 340, 500, 20, 500),
    "g3scale_pipeline_repeats": 1,
    "g3scale_rss_bound": {"plan": 512 << 20, "chunk": 512 << 20, "merge": 1 << 30, "merge_streamed": 256 << 20},
    # the merge alone at the predicted size, on synthetic parts (targets, regulators, chunks); its bounds
    "g3scale_merge": (25_000, 1_700, 50),
    "g3scale_merge_bound": {"merge": 2 << 30, "merge_streamed": 256 << 20},
}
#: sizes of the --quick run
QUICK = {
    "g3scale_predict": (25_000, 1_700, 500, 1000),
    "g3scale_cost": {
        "samples": [20, 40, 60],
        "regulators": [10, 20, 40],
        "trees": [5, 10, 20],
        "targets": 10,
        "extra_genes": 40,
    },
    "g3scale_pipeline": (200, 20, 40, 5, 50),
    "g3scale_pipeline_repeats": 1,
    "g3scale_rss_bound": {"plan": 512 << 20, "chunk": 512 << 20, "merge": 1 << 30, "merge_streamed": 256 << 20},
    "g3scale_merge": (1_000, 100, 4),
    "g3scale_merge_bound": {"merge": 2 << 30, "merge_streamed": 256 << 20},
}


def _scale(*args) -> None:
    run_checked([*module("genie3scale"), *map(str, args)], f"harness.genie3scale {args[0]}")


def cost_points(cfg: dict) -> list[dict]:
    """The cost model's points: every factor at each of its values with the others at their largest (one factor at
    a time around one centre: 3 + 2 + 2 = 7 distinct points for 3 values each)."""
    c = cfg["g3scale_cost"]
    centre = {f: max(c[f]) for f in ("samples", "regulators", "trees")}
    pts = []
    for f in ("samples", "regulators", "trees"):
        for v in c[f]:
            p = dict(centre, **{f: v})
            if p not in pts:
                pts.append(p)
    return pts


def _chunk_cost(d: Path) -> dict:
    m = json.loads((d / "m.json").read_text())
    return {
        "targets": m["targets"],
        "compute_cpu_s": m["compute_cpu_s"],
        "compute_s": m["compute_s"],
        "cpu_s_per_target": m["compute_cpu_s"] / m["targets"],
        "task_cpu_s": m["cpu_s"],
        "overhead_s": m["cpu_s"] - m["compute_cpu_s"],
        "cells": m["genes"] * m["samples"],
        "task_peak_rss_bytes": m["peak_rss_bytes"],
    }


#: disk bounds of the pipeline's tasks: a chunk's part at most its float64 weights uncompressed (8 bytes per
#: regulator x target) + 1 MiB of metadata (the gene names); a merge's outputs at most 64 bytes per link written
#: (two names, a %.9g value, gzip never much larger than the text) + 1 MiB (summary JSON and plot)
DISK_PER_WEIGHT, DISK_PER_LINK, DISK_FIXED = 8, 64, 1 << 20


def disk_bound(task: dict) -> int | None:
    if "out_bytes" not in task:
        return None
    if task["task"].startswith("chunk"):
        return DISK_PER_WEIGHT * task["regulators"] * task["targets"] + DISK_FIXED
    return DISK_PER_LINK * task["links"] + DISK_FIXED


def _bound_check(bounds: dict):
    """agree(): every task's peak RSS (wait4) of the pipeline's tasks.json against its bound, and its output
    bytes against :func:`disk_bound`; AUPR shown."""

    def check(dirs: dict) -> dict:
        bad, worst = [], {}
        for key, d in dirs.items():
            doc = json.loads((d / "w" / "tasks.json").read_text())
            tasks = [doc["plan_task"], *doc["chunks"], *doc["merges"]]
            for t in tasks:
                kind = "chunk" if t["task"].startswith("chunk") else t["task"]
                worst[kind] = max(worst.get(kind, 0), t["peak_rss_bytes"])
                if t["peak_rss_bytes"] > bounds[kind]:
                    bad.append(
                        f"{key} {t['task']}: peak RSS {t['peak_rss_bytes'] / 2**20:.0f} MiB > bound "
                        f"{bounds[kind] / 2**20:.0f} MiB"
                    )
                db = disk_bound(t)
                if db is not None and t["out_bytes"] > db:
                    bad.append(f"{key} {t['task']}: {t['out_bytes']:,} bytes written > disk bound {db:,}")
        detail = (
            "; ".join(bad)
            if bad
            else "per-task peak RSS within bounds: "
            + ", ".join(f"{k} {v / 2**20:.0f} ≤ {bounds[k] / 2**20:.0f} MiB" for k, v in sorted(worst.items()))
            + (
                "; every task's output bytes within its disk bound"
                if any(
                    "out_bytes" in t
                    for d in dirs.values()
                    for t in json.loads((d / "w" / "tasks.json").read_text())["chunks"]
                )
                else ""
            )
        )
        return {"ok": not bad, "detail": detail, "worst_rss_bytes": worst}

    return check


def _tasks_summary(key: str, d: Path) -> dict:
    doc = json.loads((d / "tasks.json").read_text())
    ch = doc["chunks"]
    out = {
        "plan": doc["plan"],
        "parallel": doc["parallel"],
        "chunks_run": len(ch),
        "chunks_wall_s": doc["chunks_wall_s"],
        "pipeline_wall_s": doc["wall_s"],
        "chunk_wall_s": [c["wall_s"] for c in ch],
        "chunk_cpu_s": [c["cpu_s"] for c in ch],
        "chunk_compute_cpu_s": [c.get("compute_cpu_s") for c in ch],
        "chunk_targets": [c["targets"] for c in ch],
        "chunk_peak_rss_bytes": max(c["peak_rss_bytes"] for c in ch),
        "chunk_out_bytes": max((c.get("out_bytes") or 0) for c in ch) or None,
        "plan_task": doc["plan_task"],
        "merges": doc["merges"],
        "score": doc["score"],
    }
    return out


def _cost_contender(expr: Path, regs: Path, trees: int, n_chunks: int) -> Contender:
    """A cost point's run: the last of ``n_chunks`` target chunks, one thread."""
    return Contender(
        "chromaflow",
        f"chromaflow genie3 --targets-chunk {n_chunks}/{n_chunks} --threads 1",
        "ours",
        lambda d, r: ours(*chunk_args(expr, regs, trees, n_chunks, n_chunks, d / "part.npz", d / "m.json")),
    )


def _cost_cases(ctx: Ctx, cfg: dict) -> list[Case]:
    """(a) the cost model: one chunk of ~TARGETS non-TF targets per point (the last chunk: TFs come first in the
    file)."""
    c = cfg["g3scale_cost"]
    cost_genes = max(c["regulators"]) + c["extra_genes"]
    cost_dir = ctx.inputs() / f"g3scale_cost_{cost_genes}x{max(c['samples'])}_seed7"
    n_chunks = cost_genes // c["targets"]

    def make_cost():
        if not (cost_dir / "truth.json").exists():
            _scale(
                "make",
                cost_dir,
                7,
                cost_genes,
                max(c["regulators"]),
                max(c["samples"]),
                "--sample-subsets",
                ",".join(str(x) for x in c["samples"] if x != max(c["samples"])),
                "--regulator-subsets",
                ",".join(str(x) for x in c["regulators"] if x != max(c["regulators"])),
            )

    cases = []
    for p in cost_points(cfg):
        expr = cost_dir / ("expression.tsv" if p["samples"] == max(c["samples"]) else f"expression_s{p['samples']}.tsv")
        regs = cost_dir / (
            "regulators.txt" if p["regulators"] == max(c["regulators"]) else f"regulators_r{p['regulators']}.txt"
        )
        cases.append(
            Case(
                "genie3scale",
                f"cost_s{p['samples']}_r{p['regulators']}_t{p['trees']}",
                {"series": "cost", **p, "genes": cost_genes, "chunk": f"{n_chunks}/{n_chunks}"},
                [_cost_contender(expr, regs, p["trees"], n_chunks)],
                [],
                per_run=lambda key, d: _chunk_cost(d),
                prepare=make_cost,
                note="CPU s per target = the metrics' compute_cpu_s (tree growing, --threads 1) / targets",
            )
        )
    return cases


def _planted_pipeline_inputs(ctx: Ctx, cfg: dict):
    """The planted run of the pipeline cases: its folder and the function that makes it (once)."""
    PG, PT, PS, PN, PC = cfg["g3scale_pipeline"]
    pdir = ctx.inputs() / f"g3scale_planted_{PG}x{PT}x{PS}_seed11"

    def make_pipe():
        if not (pdir / "truth.json").exists():
            _scale("make", pdir, 11, PG, PT, PS)

    return pdir, make_pipe


def _pipe_contender(cfg: dict, pdir: Path, kind: str, what: str, par: int, extra: list) -> Contender:
    """``python -m benchmarks.harness.genie3scale KIND`` (pipeline: local processes; slurm: SLURM jobs) on the
    planted run."""
    PG, PT, PS, PN, PC = cfg["g3scale_pipeline"]
    return Contender(
        "chromaflow",
        what,
        "ours",
        lambda d, r: list(
            map(
                str,
                [
                    *module("genie3scale"),
                    kind,
                    d / "w",
                    pdir / "expression.tsv",
                    pdir / "regulators.txt",
                    pdir / "gold.tsv",
                    PN,
                    PC,
                    par,
                    *extra,
                ],
            )
        ),
        repeats=cfg["g3scale_pipeline_repeats"],
    )


def _pipeline_cases(cfg: dict, pdir: Path, make_pipe) -> list[Case]:
    """(b) + (c): the plan -> chunks -> merge path, 1 and 2 tasks at a time (local processes), and weak scaling."""
    PG, PT, PS, PN, PC = cfg["g3scale_pipeline"]
    bounds = cfg["g3scale_rss_bound"]
    cases = []
    for name, par, only in (("strong_p1", 1, None), ("strong_p2", 2, None), ("weak_p1", 1, 1), ("weak_p2", 2, 2)):
        extra = [] if only is None else ["--chunks-only", only]
        what = (
            f"genie3-plan -> {PG // PC} x genie3 --targets-chunk ({par} at a time) -> genie3-merge"
            if only is None
            else f"the first {only} chunk(s) of {PG // PC}, {par} at a time"
        )
        cases.append(
            Case(
                "genie3scale",
                f"pipeline_{name}",
                {
                    "series": name.split("_")[0],
                    "tasks": par,
                    "genes": PG,
                    "regulators": PT,
                    "samples": PS,
                    "trees": PN,
                    "chunk_size": PC,
                    "chunks_only": only,
                    "rss_bounds": bounds,
                    "executor": "local processes (harness.genie3scale; not SLURM)",
                },
                [_pipe_contender(cfg, pdir, "pipeline", what, par, extra)],
                [],
                agree=_bound_check(bounds),
                per_run=lambda key, d: _tasks_summary(key, d / "w"),
                prepare=make_pipe,
                note="tasks as fresh processes, wall/CPU/peak RSS of each from wait4; a task over its "
                "RSS bound fails the case",
            )
        )
    return cases


def _slurm_cases(cfg: dict, pdir: Path, make_pipe) -> list[Case]:
    """(d) the same through SLURM: the real pipeline, -profile slurm, on a single-node cluster started by the run
    (harness.slurm_cluster, as root), 1 and 2 jobs of one CPU at a time; weak: 1 and 2 chunks of PC genes."""
    PG, PT, PS, PN, PC = cfg["g3scale_pipeline"]
    bounds = cfg["g3scale_rss_bound"]
    no_slurm = SlurmCluster.unavailable()
    cases = []
    for name, par, genes in (
        ("strong_p1", 1, None),
        ("strong_p2", 2, None),
        ("weak_p1", 1, PC),
        ("weak_p2", 2, 2 * PC),
    ):
        extra = [] if genes is None else ["--genes", genes]
        g = genes or PG
        what = f"-profile slurm: GENIE3_PLAN -> {g // PC} GENIE3 jobs ({par} at a time) -> GENIE3_MERGE, {g:,} genes"
        cases.append(
            Case(
                "genie3scale",
                f"slurm_{name}",
                {
                    "series": "slurm_" + name.split("_")[0],
                    "tasks": par,
                    "genes": g,
                    "regulators": PT,
                    "samples": PS,
                    "trees": PN,
                    "chunk_size": PC,
                    "rss_bounds": bounds,
                    "executor": "SLURM 22.05 (-profile slurm; one node, 2 CPUs, started by the run)",
                },
                [_pipe_contender(cfg, pdir, "slurm", what, par, extra)],
                [],
                agree=_bound_check(bounds),
                per_run=lambda key, d: _tasks_summary(key, d / "w"),
                prepare=make_pipe,
                skip=f"SLURM unavailable: {no_slurm}" if no_slurm else None,
                note="every task an sbatch job; wall/CPU/peak RSS from Nextflow's trace; the chunk "
                "phase from the first GENIE3 job's start to the last one's end",
            )
        )
    return cases


def _task(d: Path, *argv) -> list[str]:
    """``harness.genie3scale task``: our command ``argv`` as one task (its wall, CPU and peak RSS in task.json)."""
    return list(map(str, [*module("genie3scale"), "task", d / "task.json", "--", *ours(*argv)]))


def _merge_contenders(mparts: list[Path]) -> list[Contender]:
    """The two merge paths on the synthetic parts: the pipeline's (summary and plot) and the streamed one."""
    return [
        Contender(
            "merge",
            "genie3-merge --max-links 100000 --summary --plot (the pipeline's merge)",
            "ours",
            lambda d, r: _task(
                d,
                "genie3-merge",
                "--max-links",
                "100000",
                "--out",
                d / "top.tsv.gz",
                "--summary",
                d / "s.json",
                "--plot",
                d / "p.png",
                "--threads",
                "1",
                *mparts,
            ),
        ),
        Contender(
            "merge_streamed",
            "genie3-merge --max-links 100000 (streamed)",
            "ours",
            lambda d, r: _task(
                d, "genie3-merge", "--max-links", "100000", "--out", d / "top.tsv.gz", "--threads", "1", *mparts
            ),
        ),
    ]


def _merge_bounds(mb: dict):
    """agree(): each merge's peak RSS (its task.json) against its bound in ``mb``."""

    def merge_bounds(dirs: dict) -> dict:
        bad, got = [], []
        for key, d in dirs.items():
            rss = json.loads((d / "task.json").read_text())["peak_rss_bytes"]
            got.append(f"{key} {rss / 2**20:.0f} ≤ {mb[key] / 2**20:.0f} MiB")
            if rss > mb[key]:
                bad.append(f"{key}: peak RSS {rss / 2**20:.0f} MiB > bound {mb[key] / 2**20:.0f} MiB")
        return {"ok": not bad, "detail": "; ".join(bad) or "peak RSS within bounds: " + ", ".join(got)}

    return merge_bounds


def _merge_case(ctx: Ctx, cfg: dict) -> Case:
    """The merge alone at the predicted size: synthetic parts (harness.genie3scale.make_parts), both merge paths."""
    MT, MR, MC = cfg["g3scale_merge"]
    mdir = ctx.inputs() / f"g3scale_parts_{MT}x{MR}_{MC}chunks"
    mparts = [mdir / f"part{i}.npz" for i in range(1, MC + 1)]
    mb = cfg["g3scale_merge_bound"]
    return Case(
        "genie3scale",
        f"merge_{MT}x{MR}",
        {
            "series": "merge",
            "targets": MT,
            "regulators": MR,
            "chunks": MC,
            "rss_bounds": mb,
            "dense_copy_bytes": MT * MR * 8,
        },
        _merge_contenders(mparts),
        [],
        agree=_merge_bounds(mb),
        per_run=lambda key, d: {"task": json.loads((d / "task.json").read_text())},
        prepare=lambda: _scale("parts", mdir, MT, MR, MC),
        note="synthetic parts of the predicted run's shape (70 % zeros); peak RSS of the merge "
        "process itself (wait4) against the bounds: a failed bound fails the case",
    )


def genie3scale(ctx: Ctx) -> tuple[list, list[Case]]:
    """The cost model's points, the chunked pipeline (local processes, then SLURM jobs) and the merge alone."""
    cfg = ctx.cfg
    cases = _cost_cases(ctx, cfg)
    pdir, make_pipe = _planted_pipeline_inputs(ctx, cfg)
    cases += _pipeline_cases(cfg, pdir, make_pipe)
    cases += _slurm_cases(cfg, pdir, make_pipe)
    cases.append(_merge_case(ctx, cfg))
    return [], cases


build = genie3scale


# --------------------------------------------------------------------------------------------------
# the stage's tables and plots (benchmarks/render)
# --------------------------------------------------------------------------------------------------
#: the run whose cost is predicted: genes, regulators, samples, trees (cases.FULL["g3scale_predict"]), and the chunk
#: size of the extrapolated run (the pipeline's default --chunk-size)
G3_PREDICT = (25_000, 1_700, 500, 1000)


G3_CHUNK = 500


G3_TASKS = (1, 2, 4, 8, 16, 32, 50)


def g3scale_cost(cases: list[dict]) -> tuple[list[dict], dict | None]:
    """The cost points (median CPU s per target and per-task overhead over each case's runs) and the log-log fit
    over them."""
    from ..harness.genie3scale import fit_cost

    pts = []
    for c in cases:
        if c["stage"] != "genie3scale" or c["params"].get("series") != "cost" or c.get("skipped"):
            continue
        vals = [r["cpu_s_per_target"] for r in c["runs"] if r.get("exit") == 0 and r.get("cpu_s_per_target")]
        if vals:
            p = c["params"]
            ok = [r for r in c["runs"] if r.get("exit") == 0 and r.get("cpu_s_per_target")]
            # task CPU outside tree growing (recorded as overhead_s; older records: from its two parts)
            over = [r["overhead_s"] if "overhead_s" in r else r["task_cpu_s"] - r["compute_cpu_s"] for r in ok]
            pts.append(
                {
                    "samples": p["samples"],
                    "regulators": p["regulators"],
                    "trees": p["trees"],
                    "cpu_s_per_target": statistics.median(vals),
                    "runs": len(vals),
                    "overhead_s": statistics.median(over) if over else None,
                    "cells": ok[0].get("cells") or p["genes"] * p["samples"],
                    "rss": max(r["task_peak_rss_bytes"] for r in c["runs"] if r.get("exit") == 0),
                }
            )
    return pts, fit_cost(pts)


def _g3_pipe(cases: list[dict]) -> dict:
    """pipeline case name -> its first successful run's record (with the case's agreement and load): ``strong_p1``
    .. for the local processes (``pipeline_*`` cases), ``slurm_strong_p1`` .. for the runs through SLURM."""
    out = {}
    for c in cases:
        if c["stage"] == "genie3scale" and c["case"].startswith(("pipeline_", "slurm_")) and not c.get("skipped"):
            runs = [r for r in c["runs"] if r.get("exit") == 0 and "chunks_wall_s" in r]
            if runs:
                out[c["case"].removeprefix("pipeline_")] = dict(
                    runs[0], agreement=c.get("agreement"), params=c["params"]
                )
    return out


#: how the chunked pipeline's tasks ran: (prefix of its keys in _g3_pipe, label)
G3_EXECUTORS = (("", "local processes"), ("slurm_", "SLURM jobs"))


#: the scaling runs of the chunked pipeline, in table order: (key in _g3_pipe, how its tasks ran)
G3_RUNS = [(f"{pre}{kind}_p{n}", how) for pre, how in G3_EXECUTORS for kind in ("strong", "weak") for n in (1, 2)]


def _g3_merge(cases: list[dict]) -> dict | None:
    """The merge measured alone at the predicted size (synthetic parts): params, agreement, per contender the
    median wall s and the largest peak RSS of the merge process."""
    for c in cases:
        if c["stage"] == "genie3scale" and c["params"].get("series") == "merge" and not c.get("skipped"):
            out = {"params": c["params"], "agreement": c.get("agreement"), "contenders": {}}
            for key in ("merge", "merge_streamed"):
                runs = [
                    r["task"] for r in c["runs"] if r.get("contender") == key and r.get("exit") == 0 and r.get("task")
                ]
                if runs:
                    out["contenders"][key] = {
                        "wall_s": statistics.median(t["wall_s"] for t in runs),
                        "cpu_s": statistics.median(t["cpu_s"] for t in runs),
                        "peak_rss_bytes": max(t["peak_rss_bytes"] for t in runs),
                        "runs": len(runs),
                    }
            return out
    return None


def g3scale_extrapolation(
    pipe: dict, pred: dict | None, overhead: dict | None, merge: dict | None
) -> list[dict] | None:
    """The full run at N tasks, on paper: CHUNKS = genes / G3_CHUNK chunks, each costing G3_CHUNK x the fitted
    CPU s per target plus the per-task overhead (start-up, reading the matrix, writing the part: the linear fit
    o0 + o1 x genes x samples of the cost cases' task CPU - tree-growing CPU); tasks run in ceil(CHUNKS / N) waves
    of one CPU each at the weak-scaling efficiency measured with 2 tasks (assumed to hold for N tasks on N cores;
    the SLURM jobs' where they ran, as a cluster runs the tasks, else the local processes'); plus the merge
    (measured alone at the predicted size when that case ran, else the pipeline's merge scaled by regulators x
    targets)."""
    pre, how = next(
        ((p, h) for p, h in reversed(G3_EXECUTORS) if pipe.get(p + "weak_p1") and pipe.get(p + "weak_p2")),
        G3_EXECUTORS[0],
    )
    w1, w2 = pipe.get(pre + "weak_p1"), pipe.get(pre + "weak_p2")
    if not (pred and overhead):
        return None
    G, R, S, N = G3_PREDICT
    over = overhead["o0"] + overhead["o1"] * G * S
    chunk_cpu = G3_CHUNK * pred["cpu_s_per_target"] + over
    chunks = math.ceil(G / G3_CHUNK)
    m = (merge or {}).get("contenders", {}).get("merge")
    if m and (merge["params"]["targets"], merge["params"]["regulators"]) == (G, R):
        # its CPU s: the merge is one thread, so on a core of its own its wall is its CPU (the measured wall
        # here is mostly the other work of a shared machine)
        merge_s, merge_how = m["cpu_s"], "its CPU s measured alone at this size on synthetic parts"
    else:
        p1 = pipe.get("strong_p1")
        pm = next((x for x in (p1 or {}).get("merges", []) if x["task"] == "merge"), None)
        if not pm:
            return None
        pp = p1["params"]
        merge_s = pm["cpu_s"] * (R * G) / (pp["regulators"] * pp["genes"])
        merge_how = "the pipeline's merge CPU s scaled by regulators × targets"
    eff2 = (w1["chunks_wall_s"] / w2["chunks_wall_s"]) if (w1 and w2 and w2["chunks_wall_s"]) else 1.0
    rows = []
    for n in G3_TASKS:
        waves = math.ceil(chunks / n)
        eff = 1.0 if n == 1 else min(1.0, eff2)
        wall = waves * chunk_cpu / eff + merge_s
        rows.append(
            {
                "tasks": n,
                "waves": waves,
                "wall_h": wall / 3600,
                "efficiency": eff,
                "efficiency_from": how,
                "chunk_cpu_s": chunk_cpu,
                "overhead_s": over,
                "merge_s": merge_s,
                "merge_how": merge_how,
                "chunks": chunks,
                "cpu_h": (chunks * chunk_cpu + merge_s) / 3600,
            }
        )
    base = rows[0]["wall_h"]
    for r in rows:
        r["speedup"] = base / r["wall_h"]
    return rows


def _g3_cost_lines(pts: list[dict], fit: dict | None) -> list[str]:
    """The measured cost points, with the fit's residual of each."""
    lines = [
        "### Cost per target (measured)",
        "",
        "One chunk of targets per point (`genie3 --targets-chunk --threads 1`); CPU s per target = the "
        "metrics' `compute_cpu_s` (tree growing) / targets, median over the runs; the fit's residual per "
        "point.",
        "",
        "| samples | regulators | trees | runs | CPU s per target | fit residual (measured / fit) | "
        "task peak RSS MiB |",
        "|---|---|---|---|---|---|---|",
    ]
    resid = {
        (r["samples"], r["regulators"], r["trees"]): r["measured_over_fit"] for r in (fit or {}).get("residuals", [])
    }
    for p in sorted(pts, key=lambda p: (p["samples"], p["regulators"], p["trees"])):
        k = (p["samples"], p["regulators"], p["trees"])
        lines.append(
            f"| {p['samples']} | {p['regulators']} | {p['trees']} | {p['runs']} | "
            f"{p['cpu_s_per_target']:.4g} | {_f(resid.get(k), 3)} | {p['rss'] / 2**20:,.0f} |"
        )
    lines.append("")
    return lines


def _g3_fit_lines(pts: list[dict], fit: dict, pred: dict) -> list[str]:
    """The fitted cost model and the predicted run's CPU-hours."""
    G, R, S, N = G3_PREDICT
    e, se = fit["exponents"], fit["stderr"]
    return [
        f"Fit ({len(pts)} points, {fit['dof']} degrees of freedom): CPU s per target = "
        f"{math.exp(fit['a']):.3g} · samples^{e['samples']:.2f}±{se['samples']:.2f} · regulators^"
        f"{e['regulators']:.2f}±{se['regulators']:.2f} · (trees + {fit['n0']:.3g}) (± one standard "
        f"error; trees enter linearly — every tree is the same independent work — and n0 is the "
        f"per-target work outside the trees in tree-equivalents, chosen by least squares; the rest a "
        f"least-squares line on log–log axes); residual sd {fit['residual_sd']:.3f} (log e).",
        "",
        f"**Predicted** (extrapolated from the fit): {G:,} targets × {R:,} regulators × {S} samples × "
        f"{N} trees = **{pred['cpu_hours']:.3g} CPU-hours** of tree growing (95 % interval "
        f"{pred['cpu_hours_low']:.3g}–{pred['cpu_hours_high']:.3g}: the coefficients' covariance and the "
        f"residual scatter; {pred['cpu_s_per_target']:.3g} CPU s per target).",
        "",
    ]


def _g3_merge_lines(merge: dict) -> list[str]:
    """The merge measured alone at the predicted size, per merge path."""
    mp = merge["params"]
    lines = [
        f"### The merge at {mp['targets']:,} targets × {mp['regulators']:,} regulators (measured, synthetic parts)",
        "",
        f"{mp['chunks']} part files of the predicted run's shape (one dense R × T float64 copy = "
        f"{mp['dense_copy_bytes'] / 2**20:,.0f} MiB); peak RSS of the merge process (wait4) against its "
        f"bound: {_ok(merge['agreement'])}",
        "",
        "| merge | runs | wall s (median) | CPU s (median) | peak RSS MiB (max) | bound MiB |",
        "|---|---|---|---|---|---|",
    ]
    for key, cm in merge["contenders"].items():
        lines.append(
            f"| {key} | {cm['runs']} | {_f(cm['wall_s'])} | {_f(cm.get('cpu_s'))} | "
            f"{cm['peak_rss_bytes'] / 2**20:,.0f} | {mp['rss_bounds'][key] / 2**20:,.0f} |"
        )
    lines.append("")
    return lines


def _g3_pipe_row(name: str, how: str, r: dict) -> str:
    """One run of the chunked pipeline as a row of its table."""
    pp = r["params"]
    mg = {m["task"]: m for m in r["merges"]}
    rss = " / ".join(
        _f(x / 2**20, 0) if x else "–"
        for x in (
            r["plan_task"]["peak_rss_bytes"],
            r["chunk_peak_rss_bytes"],
            (mg.get("merge") or {}).get("peak_rss_bytes"),
            (mg.get("merge_streamed") or {}).get("peak_rss_bytes"),
        )
    )
    ag = r.get("agreement") or {}
    sc = r.get("score")
    acc = f"{sc['aupr']:.3f} / {sc['auroc']:.3f}" if sc else "–"
    return (
        f"| {name.removeprefix('slurm_')} | {how} | {pp['genes']:,} × {pp['regulators']} × "
        f"{pp['samples']}, {pp['trees']} | "
        f"{pp['tasks']} | {r['chunks_run']} of {r['plan']['chunks']} | "
        f"{_f(r['pipeline_wall_s'])} | {_f(r['chunks_wall_s'])} | {_f(sum(r['chunk_cpu_s']))} | "
        f"{rss} | {_f((r.get('chunk_out_bytes') or 0) / 2**20, 2) if r.get('chunk_out_bytes') else '–'} | "
        f"{_ok(ag)} | "
        f"{acc} | "
        f"{_f((r.get('load_before') or [None])[0], 1)} |"
    )


def _g3_pipe_table(pipe: dict) -> list[str]:
    """The chunked pipeline's runs, one row each, in table order."""
    lines = [
        "### The chunked pipeline (measured)",
        "",
        "| run | tasks as | genes × regulators × samples, trees | tasks at a time | chunks | plan → chunks → "
        "merge wall s | chunk phase wall s | chunk CPU s (sum) | per-task peak RSS MiB (plan / chunk / merge / "
        "streamed merge) | largest part MiB | bounds | AUPR / AUROC (planted) | load before |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, how in G3_RUNS:
        r = pipe.get(name)
        if r:
            lines.append(_g3_pipe_row(name, how, r))
    lines.append("")
    return lines


def _g3_model_check(pipe: dict, fit: dict | None) -> list[str]:
    """The cost model against the pipeline's own chunks (a point it was not fitted on)."""
    from ..harness.genie3scale import predict

    s1 = pipe.get("strong_p1")
    if not (fit and s1 and s1.get("chunk_targets") and all(s1.get("chunk_compute_cpu_s") or [None])):
        return []
    pp = s1["params"]
    measured = sum(s1["chunk_compute_cpu_s"]) / sum(s1["chunk_targets"])
    fitted = predict(fit, pp["samples"], pp["regulators"], pp["trees"], 1)["cpu_s_per_target"]
    return [
        f"Check of the cost model on these chunks ({pp['samples']} samples, {pp['regulators']} "
        f"regulators, {pp['trees']} trees, {pp['genes']:,} genes: a point it was not fitted on): "
        f"measured {measured:.4g} CPU s per target, fitted {fitted:.4g} (measured / fit "
        f"{measured / fitted:.2f}).",
        "",
    ]


def _g3_scaling_lines(pipe: dict) -> list[str]:
    """Strong and weak scaling measured with 1 and 2 tasks, per executor."""
    strong = next((r for k, r in pipe.items() if "strong" in k), None)
    lines = [
        "### Strong and weak scaling",
        "",
        "Measured with 1 and 2 concurrent tasks, as local processes (`harness.genie3scale pipeline`: the "
        "commands a task runs) and as SLURM jobs of one CPU each (the real pipeline, `-profile slurm`, on a "
        "single-node SLURM 22.05 cluster of 2 CPUs that the run starts as root). Strong: the same "
        f"{strong['params']['genes'] if strong else 0:,}-gene run, wall of the chunk phase; weak: one chunk "
        "per task. All on one shared 2-core machine (see the load column above).",
        "",
        "| scaling | tasks as | tasks | chunk phase wall s | speed-up | efficiency |",
        "|---|---|---|---|---|---|",
    ]
    for pre, how in G3_EXECUTORS:
        s1, s2, w1, w2 = (pipe.get(pre + k) for k in ("strong_p1", "strong_p2", "weak_p1", "weak_p2"))
        if s1 and s2:
            sp = s1["chunks_wall_s"] / s2["chunks_wall_s"]
            lines += [
                f"| strong (measured) | {how} | 1 | {_f(s1['chunks_wall_s'])} | 1 | 1 |",
                f"| strong (measured) | {how} | 2 | {_f(s2['chunks_wall_s'])} | {sp:.2f} | {sp / 2:.2f} |",
            ]
        if w1 and w2:
            ef = w1["chunks_wall_s"] / w2["chunks_wall_s"]
            lines += [
                f"| weak (measured) | {how} | 1 | {_f(w1['chunks_wall_s'])} | 1 | 1 |",
                f"| weak (measured) | {how} | 2 | {_f(w2['chunks_wall_s'])} | {2 * ef:.2f} | {ef:.2f} |",
            ]
    lines.append("")
    return lines


def _g3_load_caution(res: dict, pipe: dict) -> list[str]:
    """A caution when the load during the pipeline runs exceeded the usable CPUs."""
    loads = [x["load_before"][0] for x in pipe.values() if x.get("load_before")]
    cpus = ((res.get("machine") or {}).get("usable_cpus")) or 0
    if not (loads and cpus and max(loads) > cpus):
        return []
    return [
        f"Caution: the 1-minute load was {min(loads):.1f}–{max(loads):.1f} on {cpus} usable CPUs "
        f"during these runs, mostly other work on a shared machine; the wall times, and so the "
        f"speed-ups and efficiencies above (an efficiency over 1 is that noise), measure that load as "
        f"much as chromaflow. The CPU seconds and peak RSS are the tasks' own.",
        "",
    ]


def _g3_extrapolation_lines(ext: list[dict]) -> list[str]:
    """The full run at N tasks, on paper (:func:`g3scale_extrapolation`'s rows)."""
    G, R, S, N = G3_PREDICT
    e0 = ext[0]
    lines = [
        f"**Extrapolated** (on paper, not measured): the full {G:,}-gene run ({R:,} regulators, {S} "
        f"samples, {N} trees) in {e0['chunks']} chunks of {G3_CHUNK} targets, each "
        f"{e0['chunk_cpu_s']:,.0f} CPU s ({G3_CHUNK} × the fitted cost per target + "
        f"{e0['overhead_s']:.1f} s per-task overhead from its fit), {e0['cpu_h']:.3g} CPU-hours in "
        f"all; one CPU per task, the weak-scaling efficiency measured at 2 tasks "
        f"({e0['efficiency_from']}) assumed for more; "
        f"plus the merge, {e0['merge_s']:.0f} s ({e0['merge_how']}).",
        "",
        "| tasks (extrapolated) | waves | wall h | speed-up | efficiency |",
        "|---|---|---|---|---|",
    ]
    for r in ext:
        lines.append(
            f"| {r['tasks']} | {r['waves']} | {r['wall_h']:.3g} | {r['speedup']:.3g} | "
            f"{r['speedup'] / r['tasks']:.2f} |"
        )
    lines.append("")
    return lines


def g3scale_lines(res: dict) -> list[str]:
    """The genie3scale tables (results Markdown and docs/genie3-scale.md)."""
    from ..harness.genie3scale import fit_overhead, predict

    cases = res["cases"]
    pts, fit = g3scale_cost(cases)
    overhead = fit_overhead(pts)
    pipe = _g3_pipe(cases)
    merge = _g3_merge(cases)
    if not pts and not pipe and not merge:
        return []
    G, R, S, N = G3_PREDICT
    lines = _g3_cost_lines(pts, fit) if pts else []
    pred = None
    if fit:
        pred = predict(fit, S, R, N, G)
        lines += _g3_fit_lines(pts, fit, pred)
    if overhead:
        lines += [
            f"Per-task CPU outside tree growing (start-up, reading the matrix, writing the part), linear fit "
            f"over the cost cases: {overhead['o0']:.3g} s + {overhead['o1'] * 1e6:.3g} s per million matrix "
            f"values ({overhead['points']} points).",
            "",
        ]
    if merge and merge["contenders"]:
        lines += _g3_merge_lines(merge)
    if pipe:
        lines += _g3_pipe_table(pipe)
        lines += _g3_model_check(pipe, fit)
        lines += _g3_scaling_lines(pipe)
        lines += _g3_load_caution(res, pipe)
        ext = g3scale_extrapolation(pipe, pred, overhead, merge)
        if ext:
            lines += _g3_extrapolation_lines(ext)
    return lines
