#!/usr/bin/env python3
"""GENIE3 benchmark: DREAM4 size-100 accuracy/time for both engines, and cost scaling.

usage (from the repo, after `source scripts/env.sh`):
  python benchmarks/genie3/run_benchmark.py dream4 --engine fast --n-trees 1000 [--nets 1 2 3 4 5]
  python benchmarks/genie3/run_benchmark.py dream4 --engine sklearn --n-trees 1000 --nets 1
  python benchmarks/genie3/run_benchmark.py scale            # time per target vs samples / regulators
  python benchmarks/genie3/run_benchmark.py bigmem           # 20,000 genes x 2,000 samples via the CLI: RSS
  python benchmarks/genie3/run_benchmark.py bigcpu           # same size in-process: CPU per tree

Comparisons with arboreto and the reference GENIE3, run side by side, are made by
``benchmarks/run --stages genie3`` (no peer figure is typed here).

Each run is a `chromaflow genie3` subprocess (seed = network number), timed by its
metrics JSON (wall_s, cpu_s, peak RSS); the 1-minute load average is recorded before and after,
since other jobs share the machine. Results are printed as Markdown table rows.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
REF = Path(os.environ.get("CHROMAFLOW_REFERENCE", ROOT.parent / "shared" / "reference")) / "dream4"
sys.path.insert(0, str(HERE))
from score import score  # noqa: E402



def run_genie3(args: list[str], tmp: Path) -> dict:
    metrics = tmp / "m.json"
    t0 = time.perf_counter()
    subprocess.run(["chromaflow", "genie3", *args, "--metrics", str(metrics)], check=True)
    m = json.loads(metrics.read_text())
    m["process_wall_s"] = time.perf_counter() - t0
    return m


def dream4(ns) -> None:
    print("| engine | net | trees | AUROC | AUPR | wall s (process) | in-stage wall s | "
          "CPU s | CPU % | peak RSS MB | load 1-min before/after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for net in ns.nets:
            la0 = os.getloadavg()[0]
            out = tmp / f"links{net}.tsv.gz"
            m = run_genie3(["--expression", str(REF / f"insilico_size100_{net}_multifactorial.tsv"),
                            "--layout", "samples-x-genes", "--engine", ns.engine, "--n-trees", str(ns.n_trees),
                            "--seed", str(net), "--threads", str(ns.threads), "--out", str(out)], tmp)
            la1 = os.getloadavg()[0]
            auroc, aupr = score(str(out), str(REF / f"DREAM4_GoldStandard_InSilico_Size100_multifactorial_{net}.tsv"))
            rows.append((auroc, aupr, m["process_wall_s"], m["cpu_s"]))
            print(f"| {m['engine']} | {net} | {ns.n_trees} | {auroc:.4f} | {aupr:.4f} | "
                  f"{m['process_wall_s']:.2f} | {m['wall_s']:.2f} | {m['cpu_s']:.2f} | "
                  f"{100 * m['cpu_s'] / m['wall_s']:.0f} | {m['peak_rss_bytes'] / 2**20:.0f} | {la0:.2f} / {la1:.2f} |",
                  flush=True)
    a = np.array(rows)
    print(f"| **mean** | | | **{a[:, 0].mean():.4f}** | **{a[:, 1].mean():.4f}** | "
          f"{a[:, 2].mean():.2f} | | {a[:, 3].mean():.2f} | | | |")


def _synthetic(genes: int, samples: int, seed: int = 0) -> np.ndarray:
    """genes x samples float32; genes depend on a few 'regulators' so trees are realistic (not pure noise)."""
    rng = np.random.default_rng(seed)
    n_reg = max(2, genes // 10)
    R = rng.uniform(0, 1, size=(n_reg, samples)).astype(np.float32)
    parents = rng.integers(0, n_reg, size=(genes, 2))
    X = R[parents[:, 0]] * 0.6 + R[parents[:, 1]] ** 2 * 0.4 + rng.normal(0, 0.05, (genes, samples)).astype(np.float32)
    X[:n_reg] = R
    return np.round(X, 5).astype(np.float32)


def scale(ns) -> None:
    """CPU time per target (fast engine, RF, K=sqrt, one thread, in-process, thread CPU clock) vs samples and
    #regulators. Few targets, 100 trees; cost is linear in trees."""
    import resource

    from chromaflow.genie3.core import Options, compute_weights

    def cpu():
        r = resource.getrusage(resource.RUSAGE_THREAD)
        return r.ru_utime + r.ru_stime

    print("| samples | inputs (regulators − 1) | K | trees | targets | CPU s per target | CPU µs per tree | load before |")
    print("|---|---|---|---|---|---|---|---|")
    for genes, samples in ((100, 100), (1000, 100), (4000, 100), (20000, 100), (100, 500), (1000, 500),
                           (100, 2000), (1000, 2000), (4000, 2000)):
        X = _synthetic(genes, samples)
        names = [f"g{i}" for i in range(genes)]
        T = 5 if samples >= 2000 else 10
        la0 = os.getloadavg()[0]
        c0 = cpu()
        W, _ = compute_weights(X, names, np.arange(genes), np.arange(genes - T, genes), Options(n_trees=ns.n_trees), 1)
        per_t = (cpu() - c0) / T
        k = int(np.floor(np.sqrt(genes - 1)))
        print(f"| {samples} | {genes - 1} | {k} | {ns.n_trees} | {T} | {per_t:.4f} | {1e6 * per_t / ns.n_trees:.0f} | "
              f"{la0:.2f} |", flush=True)


def bigmem(ns) -> None:
    """20,000 genes x 2,000 samples through the CLI (genes-x-samples TSV, ~300 MB): parse + order tables +
    2 targets; reports wall, CPU and peak RSS (memory bound check)."""
    with tempfile.TemporaryDirectory(dir=ns.tmpdir) as d:
        tmp = Path(d)
        f = tmp / "big.tsv"
        t0 = time.perf_counter()
        genes, samples = 20000, 2000
        with open(f, "w") as fh:
            fh.write("gene\t" + "\t".join(f"s{i}" for i in range(samples)) + "\n")
            for a in range(0, genes, 1000):
                X = _synthetic(1000, samples, seed=a)
                for i, row in enumerate(X):
                    fh.write(f"g{a + i}\t" + "\t".join(f"{v:.5f}" for v in row.tolist()) + "\n")
        print(f"wrote {f.stat().st_size / 1e6:.0f} MB in {time.perf_counter() - t0:.0f} s", flush=True)
        m = run_genie3(["--expression", str(f), "--layout", "genes-x-samples", "--n-trees", str(ns.n_trees),
                        "--targets-chunk", "1/10000", "--threads", "2", "--out", str(tmp / "p.npz")], tmp)
        print(json.dumps({k: m[k] for k in ("genes", "samples", "regulators", "targets", "trees", "wall_s",
                                            "compute_s", "cpu_s", "peak_rss_bytes", "targets_per_s")}, indent=1))


def bigcpu(ns) -> None:
    """In-process CPU per tree at 20,000 genes x 2,000 samples (all genes or 1,600 regulators), 2 targets."""
    import resource

    from chromaflow.genie3 import fast
    from chromaflow.genie3.core import Options, compute_weights

    def cpu():
        r = resource.getrusage(resource.RUSAGE_THREAD)
        return r.ru_utime + r.ru_stime

    genes = 20000
    X = np.vstack([_synthetic(1000, 2000, seed=a) for a in range(0, genes, 1000)])
    for regs in (20000, 1600):
        c0 = cpu()
        compute_weights(X, [f"g{i}" for i in range(genes)], np.arange(regs), np.arange(genes - 2, genes),
                        Options(n_trees=ns.n_trees), 1)
        c1 = cpu()
        fast.sort_orders(X[:regs])
        c2 = cpu()
        per_tree = ((c1 - c0) - (c2 - c1)) / (2 * ns.n_trees)
        print(f"genes {genes} regulators {regs} samples 2000: tables {c2 - c1:.1f} CPU-s, {per_tree * 1e3:.1f} "
              f"CPU-ms per tree -> {per_tree * 1000:.0f} CPU-s per target at 1000 trees; peak RSS "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("dream4")
    p.add_argument("--engine", default="fast")
    p.add_argument("--n-trees", type=int, default=1000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--nets", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    p = sub.add_parser("scale")
    p.add_argument("--n-trees", type=int, default=100)
    p = sub.add_parser("bigmem")
    p.add_argument("--n-trees", type=int, default=10)
    p.add_argument("--tmpdir", default=None)
    p = sub.add_parser("bigcpu")
    p.add_argument("--n-trees", type=int, default=10)
    ns = ap.parse_args()
    {"dream4": dream4, "scale": scale, "bigmem": bigmem, "bigcpu": bigcpu}[ns.cmd](ns)


if __name__ == "__main__":
    main()
