"""GENIE3 at genome scale (the ``genie3scale`` stage): a planted network at genome size, the chunked pipeline
driven task by task, and the cost model (``python -m benchmarks.harness.genie3scale KIND ...``, each in its own
process).

    make OUTDIR SEED GENES TFS SAMPLES          expression.tsv (genes x samples), regulators.txt, gold.tsv,
                                                truth.json; plus expression_s<S>.tsv (the first S samples) and
                                                regulators_r<R>.txt (the first R TFs) for --samples-subsets /
                                                --regulator-subsets
    task OUT.json -- ARGV...                    run ARGV as one task: OUT.json gets its wall, CPU, peak RSS (wait4)
    parts OUTDIR TARGETS REGULATORS CHUNKS      synthetic part files of a genome-size weight matrix (the merge alone)
    pipeline WORK EXPR REGS GOLD TREES CHUNK P [--chunks-only K]
                                                genie3-plan -> genie3 --targets-chunk (P tasks at a time) ->
                                                genie3-merge, each a fresh process; tasks.json: every task's wall,
                                                CPU and peak RSS (wait4), the plan, the merge's AUPR
    slurm WORK EXPR REGS GOLD TREES CHUNK P [--genes K]
                                                the same path through the real pipeline, -profile slurm, on a
                                                single-node SLURM cluster started here (harness.slurm_cluster),
                                                P jobs at a time (executor.queueSize), on the first K genes of EXPR
                                                (weak scaling); tasks.json as above, from Nextflow's trace

The network is :func:`harness.planted.network` (the ``network`` stage's generator: TFs TF1.., genes G1.., 70 % of
the genes with 1-3 TF regulators, signed), so the topology is the same family at every size. The expression is not
grnlab's ODE steady state (the ``network`` stage's: minutes at 100 genes, far too slow at 25,000 genes x 500
samples) but a seeded nonlinear structural model of the same network: every TF starts as N(0, 1); genes are then
computed in file order (TFs first, so a TF regulated by a TF sees its regulator's final value when the regulator
comes first, else its starting value: one pass, no cycles to solve) as
``x_g = sum_edges sign * w * tanh(x_t) + noise``, w ~ U(0.5, 1.5), noise N(0, 0.5^2); an unregulated gene is noise.
Same arguments, same bytes.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from .planted import network

NOISE = 0.5


def simulate(net: dict, samples: int, seed: int) -> np.ndarray:
    """genes x samples float64 (see the module docstring)."""
    names = net["names"]
    idx = {g: i for i, g in enumerate(names)}
    rng = np.random.default_rng([seed, 30])
    X = np.empty((len(names), samples))
    n_tf = len(net["tfs"])
    X[:n_tf] = rng.normal(size=(n_tf, samples))
    regs: dict[str, list] = {}
    for (t, g), s in net["edges"].items():
        regs.setdefault(g, []).append((t, s))
    for g in names:  # file order: TFs first
        i = idx[g]
        noise = rng.normal(0, NOISE, samples)
        if g in regs:
            acc = np.zeros(samples)
            for t, s in sorted(regs[g]):
                acc += s * rng.uniform(0.5, 1.5) * np.tanh(X[idx[t]])
            X[i] = acc + noise
        elif i >= n_tf:
            X[i] = noise
    return X


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _matrix(names: list[str], X: np.ndarray) -> str:
    S = X.shape[1]
    return (
        "gene\t"
        + "\t".join(f"S{j + 1}" for j in range(S))
        + "\n"
        + "".join(g + "\t" + "\t".join(f"{v:.5g}" for v in row) + "\n" for g, row in zip(names, X))
    )


def make(
    outdir: str, seed: str, genes: str, tfs: str, samples: str, sample_subsets: str = "", regulator_subsets: str = ""
) -> None:
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    seed_i, G, T, S = int(seed), int(genes), int(tfs), int(samples)
    net = network(seed_i, G, T)
    X = simulate(net, S, seed_i)
    names = net["names"]
    _write(out / "regulators.txt", "".join(f"{t}\n" for t in net["tfs"]))
    for r in (int(x) for x in regulator_subsets.split(",") if x):
        _write(out / f"regulators_r{r}.txt", "".join(f"{t}\n" for t in net["tfs"][:r]))
    # gold: every (TF, gene) pair, 1 for a planted edge (harness.planted's format, dream4.read_gold)
    with open(out / "gold.tsv.tmp", "w") as fh:
        for t in net["tfs"]:
            fh.write("".join(f"{t}\t{g}\t{int((t, g) in net['edges'])}\n" for g in names if g != t))
    (out / "gold.tsv.tmp").replace(out / "gold.tsv")
    for s in (int(x) for x in sample_subsets.split(",") if x):
        _write(out / f"expression_s{s}.tsv", _matrix(names, X[:, :s]))
    _write(out / "expression.tsv", _matrix(names, X))
    _write(
        out / "truth.json",
        json.dumps(
            {
                "seed": seed_i,
                "genes": G,
                "tfs": T,
                "samples": S,
                "edges": len(net["edges"]),
                "simulator": "harness.genie3scale.simulate",
                "noise_sd": NOISE,
            },
            indent=1,
        )
        + "\n",
    )


def make_parts(outdir: str, targets: str, regulators: str, chunks: str) -> list[Path]:
    """CHUNKS part files (``chromaflow.genie3.parts.write_part``, the chunk tasks' format) of a seeded weight
    matrix shaped like GENIE3's (70 % zeros, the rest exponential, self entries 0): the genome-size merge measured
    without growing its forests. Kept once written."""
    from chromaflow.utils.sharding import part_bounds
    from chromaflow.genie3.parts import write_part

    work, T, R, n = Path(outdir), int(targets), int(regulators), int(chunks)
    work.mkdir(parents=True, exist_ok=True)
    genes = [f"TF{i + 1}" for i in range(R)] + [f"G{i + 1}" for i in range(T - R)]
    paths = [work / f"part{i}.npz" for i in range(1, n + 1)]
    if all(p.exists() for p in paths):
        return paths
    rng = np.random.default_rng(30)
    for i, p in enumerate(paths, 1):
        lo, hi = part_bounds(i, n, T)
        W = rng.exponential(size=(R, hi - lo)) * (rng.random((R, hi - lo)) > 0.7)
        for t in range(lo, min(hi, R)):  # regulator t is target t: its self entry is 0
            W[t, t - lo] = 0.0
        meta = {
            "genes": genes,
            "regulators": list(range(R)),
            "targets": list(range(lo, hi)),
            "n_targets_total": T,
            "target_range": [lo, hi],
            "chunk": [i, n],
            "options": {
                "tree_method": "RF",
                "max_features": "sqrt",
                "n_trees": 10,
                "seed": 0,
                "engine": "fast",
                "importance": "unnormalised",
            },
            "fingerprint": "synthetic",
            "samples": 500,
            "expression": "synthetic",
            "constant_targets": [],
        }
        write_part(p, W, meta)
    return paths


# --------------------------------------------------------------------------------------------------
# the pipeline, task by task
# --------------------------------------------------------------------------------------------------
def _cf(*args) -> list[str]:
    return [sys.executable, "-m", "chromaflow", *map(str, args)]


def _start(argv: list[str], log: Path) -> tuple[subprocess.Popen, float, object]:
    fh = open(log, "wb")
    return (
        subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=dict(os.environ, CHROMAFLOW_PROGRESS="0")),
        time.perf_counter(),
        fh,
    )


def _reap(running: dict) -> dict:
    """Wait for any child of ``running`` (pid -> (name, t0, fh)): its wall, CPU and peak RSS from wait4."""
    pid, status, ru = os.wait4(-1, 0)
    name, t0, fh = running.pop(pid)
    fh.close()
    return {
        "task": name,
        "exit": os.waitstatus_to_exitcode(status),
        "wall_s": round(time.perf_counter() - t0, 3),
        "cpu_s": round(ru.ru_utime + ru.ru_stime, 3),
        "peak_rss_bytes": ru.ru_maxrss * 1024,
    }


def run_tasks(tasks: list[tuple[str, list[str]]], parallel: int, logs: Path) -> list[dict]:
    """Run the (name, argv) tasks ``parallel`` at a time, as Nextflow's local executor would (queue order)."""
    out, running, queue = [], {}, list(tasks)
    while queue or running:
        while queue and len(running) < parallel:
            name, argv = queue.pop(0)
            p, t0, fh = _start(argv, logs / f"{name}.log")
            running[p.pid] = (name, t0, fh)
        rec = _reap(running)
        if rec["exit"] != 0:
            tail = (logs / f"{rec['task']}.log").read_text(errors="replace").strip().splitlines()[-3:]
            raise SystemExit(f"{rec['task']} failed (exit {rec['exit']}): {' | '.join(tail)}")
        out.append(rec)
    return out


def _plan_task(expr: str, regs: str, chunk: str, w: Path) -> list[dict]:
    """The genie3-plan task (plan.json in ``w``): its record."""
    return run_tasks(
        [
            (
                "plan",
                _cf(
                    "genie3-plan",
                    "--expression",
                    expr,
                    "--layout",
                    "genes-x-samples",
                    "--regulators",
                    regs,
                    "--chunk-size",
                    chunk,
                    "--out",
                    w / "plan.json",
                ),
            )
        ],
        1,
        w,
    )


def chunk_args(expr, regs, trees, i: int, n: int, out, metrics) -> list:
    """``chromaflow genie3`` arguments of target chunk ``i`` of ``n`` on one thread, its part file ``out`` and its
    ``metrics``: the chunk tasks of the plan -> chunks -> merge path and the genie3scale stage's cost points."""
    return [
        "genie3",
        "--expression",
        expr,
        "--layout",
        "genes-x-samples",
        "--regulators",
        regs,
        "--n-trees",
        trees,
        "--threads",
        "1",
        "--targets-chunk",
        f"{i}/{n}",
        "--out",
        out,
        "--metrics",
        metrics,
    ]


def _chunk_tasks(expr: str, regs: str, trees: str, n: int, todo: range, w: Path) -> list[tuple[str, list[str]]]:
    """The (name, argv) of the chunk tasks ``todo`` of ``n``: genie3 --targets-chunk i/n, one thread each."""
    return [
        (
            f"chunk{i}",
            _cf(*chunk_args(expr, regs, trees, i, n, w / f"part{i}.npz", w / f"chunk{i}.metrics.json")),
        )
        for i in todo
    ]


def _merge_tasks(w: Path, n: int, plan: dict, gold: str) -> tuple[list[dict], dict]:
    """Both merges of the ``n`` parts (the pipeline's, with summary and plot; the streamed top 100,000), their
    output bytes and links, and the AUPR / AUROC of the merged links; the parts are removed after."""
    parts = [w / f"part{i}.npz" for i in range(1, n + 1)]
    merge_recs = run_tasks(
        [
            (
                "merge",
                _cf(
                    "genie3-merge",
                    "--out",
                    w / "links.tsv.gz",
                    "--summary",
                    w / "summary.json",
                    "--plot",
                    w / "weights.png",
                    "--threads",
                    "1",
                    *parts,
                ),
            ),
            (
                "merge_streamed",
                _cf("genie3-merge", "--max-links", "100000", "--out", w / "top.tsv.gz", "--threads", "1", *parts),
            ),
        ],
        1,
        w,
    )
    for r, out in zip(merge_recs, ("links.tsv.gz", "top.tsv.gz")):
        r["out_bytes"] = (w / out).stat().st_size
        if r["task"] == "merge":
            r["out_bytes"] += sum((w / f).stat().st_size for f in ("summary.json", "weights.png"))
            r["links"] = plan["genes"] * plan["regulators"] - plan["regulators"]  # every pair but self-links
        else:
            r["links"] = 100_000
    from .planted import score as score_links

    score = score_links(str(w / "links.tsv.gz"), gold)
    for p in parts:  # the parts are the largest files: gone once merged
        p.unlink()
    return merge_recs, score


def pipeline(work: str, expr: str, regs: str, gold: str, trees: str, chunk: str, parallel: str, *opts: str) -> None:
    """genie3-plan -> chunks -> genie3-merge (see the module docstring); ``--chunks-only K``: only the first K
    chunks (the weak-scaling runs), no merge."""
    w = Path(work)
    w.mkdir(parents=True, exist_ok=True)
    only = int(opts[opts.index("--chunks-only") + 1]) if "--chunks-only" in opts else None
    t0 = time.perf_counter()
    plan_rec = _plan_task(expr, regs, chunk, w)
    plan = json.loads((w / "plan.json").read_text())
    n = plan["chunks"]
    todo = range(1, n + 1) if only is None else range(1, min(only, n) + 1)
    chunk_tasks = _chunk_tasks(expr, regs, trees, n, todo, w)
    t1 = time.perf_counter()
    chunk_recs = run_tasks(chunk_tasks, int(parallel), w)
    t2 = time.perf_counter()
    for r in chunk_recs:
        m = json.loads((w / f"{r['task']}.metrics.json").read_text())
        r.update(
            targets=m["targets"],
            regulators=m["regulators"],
            compute_s=m["compute_s"],
            compute_cpu_s=m.get("compute_cpu_s"),
            out_bytes=(w / f"part{r['task'][len('chunk') :]}.npz").stat().st_size,
        )  # the task's disk
    merge_recs, score = [], None
    if only is None:
        merge_recs, score = _merge_tasks(w, n, plan, gold)
    t3 = time.perf_counter()
    doc = {
        "plan": {k: plan[k] for k in ("genes", "chunk_size", "chunks", "samples", "regulators")},
        "parallel": int(parallel),
        "trees": int(trees),
        "plan_task": plan_rec[0],
        "chunks": chunk_recs,
        "merges": merge_recs,
        "score": score,
        "chunks_wall_s": round(t2 - t1, 3),
        "wall_s": round(t3 - t0, 3),
    }
    _write(w / "tasks.json", json.dumps(doc, indent=1) + "\n")


# --------------------------------------------------------------------------------------------------
# the same path through SLURM: the pipeline's GENIE3_PLAN -> GENIE3 -> GENIE3_MERGE as sbatch jobs
# --------------------------------------------------------------------------------------------------
#: the run's own settings over -profile slurm: one CPU per task (two GENIE3 jobs share the 2-CPU node), fast polling,
#: the trace in raw units (ms, bytes, epoch ms)
SLURM_CONFIG = """
process.resourceLimits = [cpus: 1, memory: 8.GB, time: 4.h]
trace.raw = true
executor {{
    queueSize         = {parallel}
    pollInterval      = '1 sec'
    queueStatInterval = '2 sec'
    submitRateLimit   = '50/1s'
}}
"""


def _subset_genes(expr: Path, k: int, out: Path) -> Path:
    """The first ``k`` gene rows of a genes x samples matrix (TFs come first: the regulators stay in)."""
    with open(expr) as src, open(out.with_suffix(".tmp"), "w") as dst:
        for i, line in enumerate(src):
            if i > k:
                break
            dst.write(line)
    out.with_suffix(".tmp").replace(out)
    return out


def _slurm_inputs(w: Path, expr: str, regs: str, parallel: str, opts: tuple) -> None:
    """The run's sample sheet (one assembly row with this expression matrix; ``--genes K``: its first K genes) and
    its config over -profile slurm, in ``w``."""
    expr_p = Path(expr)
    if "--genes" in opts:
        expr_p = _subset_genes(expr_p, int(opts[opts.index("--genes") + 1]), w / "expression.tsv")
    fasta = w / "g.fa"
    fasta.write_text(">chr1\n" + "ACGT" * 500 + "\n")  # the sheet needs an assembly; only FASTA2H5 reads it
    (w / "sheet.csv").write_text(
        "id,fasta,species,expression,regulators,expression_layout\n"
        f"net,{fasta},Planted_net,{expr_p},{regs},genes-x-samples\n"
    )
    (w / "run.config").write_text(SLURM_CONFIG.format(parallel=int(parallel)))


def _slurm_argv(main_nf: Path, w: Path, out: Path, trace: Path, trees: str, chunk: str) -> list[str]:
    """``nextflow run MAIN_NF -profile slurm`` of the sheet in ``w``: GENIE3 only, the trace to ``trace``."""
    return [
        "nextflow",
        "-log",
        str(w / ".nextflow.log"),
        "run",
        str(main_nf),
        "-profile",
        "slurm",
        "-c",
        str(w / "run.config"),
        "-ansi-log",
        "false",
        "-with-trace",
        str(trace),
        "--input",
        str(w / "sheet.csv"),
        "--outdir",
        str(out),
        "--skip_predict",
        "--skip_benchmark",
        "--skip_multiqc",
        "--genie3_n_trees",
        str(trees),
        "--genie3_chunk_size",
        str(chunk),
    ]


def slurm(work: str, expr: str, regs: str, gold: str, trees: str, chunk: str, parallel: str, *opts: str) -> None:
    """The real pipeline (``main.nf -profile slurm --skip_predict``) on one assembly row with this expression
    matrix: GENIE3_PLAN, one GENIE3 job per chunk (``parallel`` at a time), GENIE3_MERGE, each an sbatch job of one
    CPU on a cluster started here and stopped after. ``--genes K``: only the first K genes (weak scaling: one chunk
    per task). tasks.json in :func:`pipeline`'s shape from the trace (realtime, %cpu, peak_rss)."""
    from .core import ROOT
    from .slurm_cluster import SlurmCluster

    w = Path(work)
    w.mkdir(parents=True, exist_ok=True)
    _slurm_inputs(w, expr, regs, parallel, opts)
    out, trace = w / "out", w / "trace.txt"
    cluster = SlurmCluster().start()  # its own folder under $TMPDIR (munge must traverse every parent), removed by stop
    try:
        t0 = time.perf_counter()
        with open(w / "nextflow.log.txt", "w") as log:
            p = subprocess.run(
                _slurm_argv(ROOT / "main.nf", w, out, trace, trees, chunk),
                cwd=w,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **cluster.env, "NXF_ANSI_LOG": "false"},
            )
        wall = time.perf_counter() - t0
    finally:
        cluster.stop()
    if p.returncode != 0:
        tail = (w / "nextflow.log.txt").read_text(errors="replace").strip().splitlines()[-5:]
        raise SystemExit(f"the pipeline failed under -profile slurm (exit {p.returncode}): {' | '.join(tail)}")
    doc = slurm_summary(trace, out, None if "--genes" in opts else gold, int(parallel), int(trees), wall)
    _write(w / "tasks.json", json.dumps(doc, indent=1) + "\n")


def _trace_task(r: dict, name: str) -> dict:
    """A task's record from its raw trace row and its work directory."""
    # raw trace: realtime in ms, %cpu a number, peak_rss in bytes. When the job ran: its work directory's
    # .command.begin (written as the script starts) and .exitcode (as it ends), to the file system's ns; the
    # trace's start/complete are when the driver's poll saw the job, a poll interval apart or in the same poll
    real, wd = int(r["realtime"]) / 1000, Path(r["workdir"])
    return {
        "task": name,
        "exit": int(r["exit"]),
        "wall_s": round(real, 3),
        "cpu_s": round(real * float(r["%cpu"]) / 100, 3),
        "peak_rss_bytes": int(r["peak_rss"]),
        "slurm_job": r["native_id"],
        "began": (wd / ".command.begin").stat().st_mtime_ns / 1e9,
        "ended": (wd / ".exitcode").stat().st_mtime_ns / 1e9,
    }


def _trace_process(r: dict) -> str:
    """The process name of a trace row (its last component)."""
    return r["process"].split(":")[-1]


def _slurm_chunks(rows: list[dict]) -> list[dict]:
    """The GENIE3 jobs' records in chunk order, each with its metrics and part file from its work directory."""
    chunks = []
    for r in sorted(
        (r for r in rows if _trace_process(r) == "GENIE3"), key=lambda r: int(r["tag"].split()[-1].split("/")[0])
    ):
        c = _trace_task(r, "chunk" + r["tag"].split()[-1].split("/")[0])
        m = json.loads(next(Path(r["workdir"]).glob("*.genie3.metrics.json")).read_text())
        c.update(
            targets=m["targets"],
            regulators=m["regulators"],
            compute_s=m["compute_s"],
            compute_cpu_s=m.get("compute_cpu_s"),
            out_bytes=next(Path(r["workdir"]).glob("*.genie3.part.npz")).stat().st_size,
        )
        chunks.append(c)
    return chunks


def slurm_summary(trace: Path, out: Path, gold: str | None, parallel: int, trees: int, wall: float) -> dict:
    """:func:`pipeline`'s tasks.json from a run's raw trace (``trace.raw``) and its outdir: the plan, every GENIE3
    job (with its metrics and part file from its work directory), the merge, the chunk phase (from the first GENIE3
    job's start to the last one's end) and, with ``gold``, the AUPR / AUROC of the published links."""
    from chromaflow.report.trace import read_trace

    from .planted import score as score_links

    rows = [r for r in read_trace(trace)[0] if r.get("status") == "COMPLETED"]  # the package's one trace reader
    plan_rows = [r for r in rows if _trace_process(r) == "GENIE3_PLAN"]
    plan = json.loads(next(Path(plan_rows[0]["workdir"]).glob("*.genie3_plan.json")).read_text()) if plan_rows else {}
    chunks = _slurm_chunks(rows)
    merges = [_trace_task(r, "merge") for r in rows if _trace_process(r) == "GENIE3_MERGE"]
    links = next(out.rglob("*.genie3_links.tsv.gz"))
    for m in merges:  # every pair but self-links, as genie3-merge writes them without --max-links
        m["out_bytes"] = sum(f.stat().st_size for f in links.parent.glob("*.genie3_*"))
        m["links"] = plan["genes"] * plan["regulators"] - plan["regulators"]
    starts, ends = [c["began"] for c in chunks], [c["ended"] for c in chunks]
    return {
        "plan": {k: plan.get(k) for k in ("genes", "chunk_size", "chunks", "samples", "regulators")},
        "parallel": parallel,
        "trees": trees,
        "executor": "slurm",
        "plan_task": _trace_task(plan_rows[0], "plan") if plan_rows else None,
        "chunks": chunks,
        "merges": merges,
        "score": score_links(str(links), gold) if gold else None,
        "chunks_wall_s": round(max(ends) - min(starts), 3),
        "wall_s": round(wall, 3),
        "slurm_jobs": len(rows),
    }


# --------------------------------------------------------------------------------------------------
# the cost model
# --------------------------------------------------------------------------------------------------
FACTORS = ("samples", "regulators", "trees")


def fit_overhead(points: list[dict]) -> dict | None:
    """Per-task CPU outside tree growing (start-up, reading the matrix, writing the part) against the matrix size:
    least squares overhead = o0 + o1 * genes * samples over points with ``cells`` and ``overhead_s``."""
    pts = [p for p in points if p.get("overhead_s") is not None and p.get("cells")]
    if len({p["cells"] for p in pts}) < 2:
        return None
    x = np.array([p["cells"] for p in pts], dtype=float)
    y = np.array([p["overhead_s"] for p in pts], dtype=float)
    o1, o0 = np.polyfit(x, y, 1)
    return {"o0": float(o0), "o1": float(o1), "points": len(pts)}


def _lstsq(A: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    return coef, y - A @ coef


def fit_cost(points: list[dict]) -> dict | None:
    """The cost model over the measured points (dicts with samples, regulators, trees, cpu_s_per_target):

        CPU s per target = exp(a) * samples^b_S * regulators^b_R * (trees + n0)

    Trees enter linearly (every tree is the same independent work; a power law in trees fitted over 10-40 trees
    and carried to 1,000 would bend the wrong way), n0 >= 0 is the per-target work outside the trees (tables,
    sorting the target's samples) in tree-equivalents. For each n0 on a grid the rest is a least-squares line on
    log-log axes; the n0 with the smallest residual sum of squares is kept. Returns the coefficients, their
    standard errors (given n0), the covariance, each point's residual and the residual sd (log e)."""
    pts = [p for p in points if p.get("cpu_s_per_target")]
    if len(pts) < 5 or len({p["trees"] for p in pts}) < 2:
        return None
    A = np.array([[1.0, math.log(p["samples"]), math.log(p["regulators"])] for p in pts])
    if np.linalg.matrix_rank(A) < A.shape[1]:
        return None
    y0 = np.array([math.log(p["cpu_s_per_target"]) for p in pts])
    N = np.array([float(p["trees"]) for p in pts])
    grid = np.concatenate([[0.0], np.geomspace(0.01, 100 * N.max(), 2000)])
    best = min(grid, key=lambda n0: float(np.sum(_lstsq(A, y0 - np.log(N + n0))[1] ** 2)))
    coef, res = _lstsq(A, y0 - np.log(N + best))
    dof = len(pts) - A.shape[1] - 1  # n0 is fitted too
    s2 = float(res @ res) / dof if dof > 0 else float("nan")
    cov = s2 * np.linalg.inv(A.T @ A)
    return {
        "model": "CPU s per target = exp(a) * samples^b_samples * regulators^b_regulators * (trees + n0)",
        "a": float(coef[0]),
        "n0": float(best),
        "exponents": {"samples": float(coef[1]), "regulators": float(coef[2])},
        "stderr": {"samples": float(math.sqrt(cov[1, 1])), "regulators": float(math.sqrt(cov[2, 2]))},
        "cov": cov.tolist(),
        "residual_sd": math.sqrt(s2),
        "dof": dof,
        "residuals": [
            {**{f: p[f] for f in FACTORS}, "log_residual": float(r), "measured_over_fit": float(math.exp(r))}
            for p, r in zip(pts, res)
        ],
    }


def predict(fit: dict, samples: int, regulators: int, trees: int, targets: int, z: float = 1.96) -> dict:
    """CPU-hours of ``targets`` targets at (samples, regulators, trees) from the fit, with a ~95 % interval:
    the fitted mean's standard error from the coefficients' covariance (n0 taken as fitted), widened by the
    residual sd (a new point scatters as the measured ones did)."""
    x = np.array([1.0, math.log(samples), math.log(regulators)])
    coef = np.array([fit["a"], fit["exponents"]["samples"], fit["exponents"]["regulators"]])
    mean = float(x @ coef) + math.log(trees + fit["n0"])
    se = math.sqrt(float(x @ np.array(fit["cov"]) @ x) + fit["residual_sd"] ** 2)
    per_target = math.exp(mean)
    hours = per_target * targets / 3600
    return {
        "samples": samples,
        "regulators": regulators,
        "trees": trees,
        "targets": targets,
        "cpu_s_per_target": per_target,
        "cpu_hours": hours,
        "cpu_hours_low": hours * math.exp(-z * se),
        "cpu_hours_high": hours * math.exp(z * se),
        "log_se": se,
    }


def main(argv: list[str]) -> int:
    kind, args = argv[0], argv[1:]
    if kind == "make":
        pos = [a for a in args if not a.startswith("--")]
        kw = {"sample_subsets": "", "regulator_subsets": ""}
        for key, opt in (("sample_subsets", "--sample-subsets"), ("regulator_subsets", "--regulator-subsets")):
            if opt in args:
                kw[key] = args[args.index(opt) + 1]
                pos.remove(kw[key])
        make(*pos, **kw)
    elif kind == "task":  # task OUT.json -- ARGV...: run ARGV, write its wall, CPU and peak RSS (wait4); its exit
        rec = run_tasks([("task", args[2:])], 1, Path(args[0]).parent)[0]
        _write(Path(args[0]), json.dumps(rec) + "\n")
    elif kind == "parts":
        make_parts(*args)
    elif kind == "pipeline":
        pipeline(*args)
    elif kind == "slurm":
        slurm(*args)
    else:
        raise SystemExit(f"harness.genie3scale: unknown kind {kind!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
