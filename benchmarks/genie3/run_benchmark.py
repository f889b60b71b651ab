#!/usr/bin/env python3
"""GENIE3 A/B tools for the engine's own development (comparisons with arboreto and the reference GENIE3, run
side by side, are made by ``benchmarks/run --stages genie3``). No peer figure is typed here: reference values are read from
``../shared/reference/dream4/ANCHORS.md`` at run time, peers are run by ``peer_arboreto.py``.

usage (from the repo root, after `source scripts/env.sh`):
  python benchmarks/genie3/run_benchmark.py dream4 [--seeds 1 2 3] [--n-trees 1000] [--threads 2]
        [--importance unnormalised|tree-normalised]
        our CLI on the 5 DREAM4 size-100 networks: AUROC / AUPR per network and seed, process wall and CPU
        seconds; the mean over networks per seed and the seed-to-seed spread; the reference GENIE3 rows of
        ANCHORS.md beside them
  python benchmarks/genie3/run_benchmark.py synth --genes 500 --samples 300 --out x.tsv [--seed 0]
        a synthetic samples x genes TSV (header of gene names; the layout of DREAM4, arboreto and the
        reference GENIE3): every gene is a noisy function of two of genes/10 "regulators", values printed
        with 5 decimals (so, like real tables, about 40 % of genes have tied values)
  python benchmarks/genie3/run_benchmark.py scale [--genes 100 1000 5000] [--samples 300] [--n-trees 100]
        CPU seconds per tree (all genes as regulators, K = sqrt, one thread, in process) for a few targets of
        synthetic matrices of growing gene count at a fixed sample count
  python benchmarks/genie3/run_benchmark.py bigmem [--genes 20000] [--samples 2000]
        peak RSS of the CLI on a genes x samples table of that size (one target chunk): the memory bound
  python benchmarks/genie3/run_benchmark.py links [--genes 5000] [--repeats 3] [--threads 2]
        ranking and writing the link list of a genes x genes random weight block (30 % zeros), alternated:
        np.lexsort of the specification vs ranked_links (C radix sort); the pure-Python writer (the path
        without a compiler) vs the C writer on 1 and --threads threads; medians and ranges, same-bytes check
  python benchmarks/genie3/run_benchmark.py prior [--nets 1] [--rounds 5] [--n-trees 1000] [--alphas 0.25 0.5 1]
        cost of genie3 --prior (iRafNet weighted candidate draws): CPU seconds of compute_weights on a DREAM4
        size-100 network (one thread, in process, all 100 targets) without a prior and with a random prior
        (per pair pi = 1 with probability 0.1, 0 with 0.6, NA otherwise) at each alpha; the conditions
        alternate within each round; medians, ranges and the ratio to the unweighted median
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
REF = Path(os.environ.get("CHROMAFLOW_REFERENCE", ROOT.parent / "shared" / "reference")) / "dream4"
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))  # harness.timer: the benchmarks' process timer
from chromaflow.genie3.dream4 import score_links  # noqa: E402
from harness.timer import measure  # noqa: E402


def anchors(method: str = "reference GENIE3") -> dict[int, tuple[float, float]]:
    """{net: (AUROC, AUPR)} of `method` at 1000 trees from the per-network table of ANCHORS.md."""
    out = {}
    for line in (REF / "ANCHORS.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 6 and cells[0] == method and cells[1].isdigit() and cells[3] == "1000":
            out.setdefault(int(cells[1]), (float(cells[4]), float(cells[5])))
    return out


def run_genie3(args: list[str], tmp: Path) -> dict:
    """``chromaflow genie3`` as a process (the benchmarks' process timer): its metrics, the process's wall time and
    the load average before it."""
    metrics = tmp / "m.json"
    r = measure([sys.executable, "-m", "chromaflow", "genie3", *args, "--metrics", str(metrics)], stdin=None,
                stdout=None, stderr=None, check=True)
    m = json.loads(metrics.read_text())
    m.update(process_wall_s=r["wall_s"], load_before=r["load_before"])
    return m


def dream4(ns) -> None:
    ref = anchors()
    print("| seed | net | trees | AUROC | AUPR | reference AUROC / AUPR (ANCHORS, seed = net) | process wall s | "
          "CPU s | load before |")
    print("|---|---|---|---|---|---|---|---|---|")
    per_seed = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for seed in ns.seeds:
            rows = []
            for net in ns.nets:
                out = tmp / f"links{net}.tsv.gz"
                m = run_genie3(["--expression", str(REF / f"insilico_size100_{net}_multifactorial.tsv"),
                                "--layout", "samples-x-genes", "--engine", ns.engine, "--n-trees", str(ns.n_trees),
                                "--importance", ns.importance,
                                "--seed", str(seed), "--threads", str(ns.threads), "--out", str(out)], tmp)
                s = score_links(out, REF / f"DREAM4_GoldStandard_InSilico_Size100_multifactorial_{net}.tsv")
                auroc, aupr = s["auroc"], s["aupr"]
                rows.append((auroc, aupr, m["process_wall_s"], m["cpu_s"]))
                r = ref.get(net, (float("nan"), float("nan")))
                print(f"| {seed} | {net} | {ns.n_trees} | {auroc:.4f} | {aupr:.4f} | {r[0]:.4f} / {r[1]:.4f} | "
                      f"{m['process_wall_s']:.2f} | {m['cpu_s']:.2f} | {m['load_before']:.2f} |", flush=True)
            a = np.array(rows)
            per_seed.append(a.mean(axis=0))
            print(f"| {seed} | **mean** | | **{a[:, 0].mean():.4f}** | **{a[:, 1].mean():.4f}** | | "
                  f"{a[:, 2].mean():.2f} | {a[:, 3].mean():.2f} | |", flush=True)
    p = np.array(per_seed)
    sd = p.std(axis=0, ddof=1) if len(p) > 1 else np.zeros(4)
    print(f"\nover {len(p)} seeds: AUROC {p[:, 0].mean():.4f} (sd {sd[0]:.4f}), AUPR {p[:, 1].mean():.4f} "
          f"(sd {sd[1]:.4f}, range {p[:, 1].min():.4f}-{p[:, 1].max():.4f}); per network: process wall "
          f"{p[:, 2].mean():.2f} s, CPU {p[:, 3].mean():.2f} s")


def synthetic(genes: int, samples: int, seed: int = 0) -> np.ndarray:
    """genes x samples float32; genes depend on a few 'regulators' so trees are realistic (not pure noise)."""
    rng = np.random.default_rng(seed)
    n_reg = max(2, genes // 10)
    R = rng.uniform(0, 1, size=(n_reg, samples)).astype(np.float32)
    parents = rng.integers(0, n_reg, size=(genes, 2))
    X = R[parents[:, 0]] * 0.6 + R[parents[:, 1]] ** 2 * 0.4 + rng.normal(0, 0.05, (genes, samples)).astype(np.float32)
    X[:n_reg] = R
    return np.round(X, 5).astype(np.float32)


def synth(ns) -> None:
    X = synthetic(ns.genes, ns.samples, ns.seed)
    with open(ns.out, "w") as fh:
        fh.write("\t".join(f'"G{g + 1}"' for g in range(ns.genes)) + "\n")
        for row in X.T:
            fh.write("\t".join(f"{v:.5f}" for v in row.tolist()) + "\n")
    print(f"{ns.out}: {ns.samples} samples x {ns.genes} genes (samples-x-genes)")



def thread_cpu_s() -> float:
    """CPU seconds (user + sys) of the calling thread."""
    r = resource.getrusage(resource.RUSAGE_THREAD)
    return r.ru_utime + r.ru_stime


def scale(ns) -> None:
    from chromaflow.genie3.core import Options, compute_weights

    print("| genes | samples | K | trees | targets | CPU µs per tree | CPU s per target at 1000 trees | load before |")
    print("|---|---|---|---|---|---|---|---|")
    for genes in ns.genes:
        X = synthetic(genes, ns.samples)
        names = [f"g{i}" for i in range(genes)]
        T = ns.targets
        la0 = os.getloadavg()[0]
        c0 = thread_cpu_s()
        compute_weights(X, names, np.arange(genes), np.arange(T), Options(n_trees=ns.n_trees), 1, warn=lambda m: None)
        per_tree = (thread_cpu_s() - c0) / (T * ns.n_trees)
        k = int(np.floor(np.sqrt(genes - 1)))
        print(f"| {genes} | {ns.samples} | {k} | {ns.n_trees} | {T} | {1e6 * per_tree:.0f} | {1000 * per_tree:.2f} | "
              f"{la0:.2f} |", flush=True)


def bigmem(ns) -> None:
    with tempfile.TemporaryDirectory(dir=ns.tmpdir) as d:
        tmp = Path(d)
        f = tmp / "big.tsv"
        t0 = time.perf_counter()
        with open(f, "w") as fh:
            fh.write("gene\t" + "\t".join(f"s{i}" for i in range(ns.samples)) + "\n")
            for a in range(0, ns.genes, 1000):
                X = synthetic(min(1000, ns.genes - a), ns.samples, seed=a)
                for i, row in enumerate(X):
                    fh.write(f"g{a + i}\t" + "\t".join(f"{v:.5f}" for v in row.tolist()) + "\n")
        print(f"wrote {f.stat().st_size / 1e6:.0f} MB in {time.perf_counter() - t0:.0f} s", flush=True)
        m = run_genie3(["--expression", str(f), "--layout", "genes-x-samples", "--n-trees", str(ns.n_trees),
                        "--targets-chunk", f"1/{ns.genes // 2}", "--threads", "2", "--out", str(tmp / "p.npz")], tmp)
        print(json.dumps({k: m[k] for k in ("genes", "samples", "regulators", "targets", "trees", "wall_s",
                                            "compute_s", "cpu_s", "peak_rss_bytes")}, indent=1))


def links(ns) -> None:
    import hashlib

    from chromaflow.genie3 import links as glinks

    G = ns.genes
    rng = np.random.default_rng(0)
    W = rng.random((G, G)) * rng.random((G, G)) ** 3
    W[rng.random((G, G)) < 0.3] = 0.0
    names = [f"G{i:05d}" for i in range(G)]
    idx = np.arange(G)
    lib = glinks.links_kernel()
    if lib is None:
        sys.exit("links: the C link formatter is unavailable (no compiler?)")
    t = {k: [] for k in ("rank lexsort", "rank radix", "write python", "write C 1 thread",
                         f"write C {ns.threads} threads")}
    digests = set()
    with tempfile.TemporaryDirectory() as d:
        for _ in range(ns.repeats):
            t0 = time.perf_counter()
            rows, cols = np.divmod(np.arange(G * G), G)
            keep = rows != cols
            rows, cols = rows[keep], cols[keep]
            o = np.lexsort((cols, rows, -W[rows, cols]))        # names sort as indices here
            ref = (rows[o], cols[o])
            t1 = time.perf_counter()
            got = glinks.ranked_links(W, names, names, idx, idx)
            t2 = time.perf_counter()
            assert np.array_equal(ref[0], got[0]) and np.array_equal(ref[1], got[1]), "ranking differs"
            del ref, rows, cols, keep, o
            t["rank lexsort"].append(t1 - t0)
            t["rank radix"].append(t2 - t1)
            glinks.LINKS_KERNEL["lib"] = None
            t0 = time.perf_counter()
            glinks.write_links(Path(d) / "py.gz", W, names, names, *got, threads=1)
            t["write python"].append(time.perf_counter() - t0)
            glinks.LINKS_KERNEL["lib"] = lib
            for n, key in ((1, "write C 1 thread"), (ns.threads, f"write C {ns.threads} threads")):
                t0 = time.perf_counter()
                glinks.write_links(Path(d) / f"c{n}.gz", W, names, names, *got, threads=n)
                t[key].append(time.perf_counter() - t0)
            for f in ("py.gz", "c1.gz", f"c{ns.threads}.gz"):
                digests.add(hashlib.sha256((Path(d) / f).read_bytes()).hexdigest())
    print(f"{G} x {G} weights, {G * G - G:,} links, {ns.repeats} alternated repeats, load before "
          f"{os.getloadavg()[0]:.2f}; identical files: {len(digests) == 1}")
    print("| step | median s | range |")
    print("|---|---|---|")
    for k, v in t.items():
        print(f"| {k} | {np.median(v):.2f} | {min(v):.2f}–{max(v):.2f} |")


def prior_cost(ns) -> None:
    from chromaflow.genie3 import expression
    from chromaflow.genie3.core import Options, compute_weights
    from chromaflow.genie3.prior import Prior

    print("| net | condition | trees | rounds | CPU s median | range | ratio to no prior |")
    print("|---|---|---|---|---|---|---|")
    for net in ns.nets:
        expr = expression.read_expression(REF / f"insilico_size100_{net}_multifactorial.tsv", "samples-x-genes")
        G = expr.n_genes
        rng = np.random.default_rng(net)
        reg, tgt = np.divmod(np.arange(G * G), G)
        keep = reg != tgt
        u = rng.uniform(size=G * G)
        pi = np.where(u < 0.1, 1.0, np.where(u < 0.7, 0.0, 0.5))[keep]
        prior = Prior(reg=reg[keep], tgt=tgt[keep], pi=pi, layout="long", pairs_read=int(keep.sum()), ignored=0,
                      path="random")
        conds = [("no prior", None)] + [(f"alpha {a}", a) for a in ns.alphas]
        times: dict[str, list[float]] = {c: [] for c, _ in conds}
        for _ in range(ns.rounds):
            for name, a in conds:
                opts = Options(n_trees=ns.n_trees, prior_alpha=a)
                c0 = thread_cpu_s()
                compute_weights(expr.values, expr.genes, np.arange(G), np.arange(G), opts, 1, warn=lambda m: None,
                                prior=None if a is None else prior)
                times[name].append(thread_cpu_s() - c0)
        base = float(np.median(times["no prior"]))
        for name, _ in conds:
            v = times[name]
            print(f"| {net} | {name} | {ns.n_trees} | {ns.rounds} | {np.median(v):.3f} | {min(v):.3f}–{max(v):.3f} | "
                  f"{np.median(v) / base:.3f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("dream4")
    p.add_argument("--engine", default="fast")
    p.add_argument("--n-trees", type=int, default=1000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--nets", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    p.add_argument("--seeds", type=int, nargs="+", default=[1])
    p.add_argument("--importance", default="unnormalised", choices=["unnormalised", "tree-normalised"])
    p = sub.add_parser("synth")
    p.add_argument("--genes", type=int, required=True)
    p.add_argument("--samples", type=int, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p = sub.add_parser("scale")
    p.add_argument("--genes", type=int, nargs="+", default=[100, 1000, 5000])
    p.add_argument("--samples", type=int, default=300)
    p.add_argument("--n-trees", type=int, default=100)
    p.add_argument("--targets", type=int, default=10)
    p = sub.add_parser("bigmem")
    p.add_argument("--genes", type=int, default=20000)
    p.add_argument("--samples", type=int, default=2000)
    p.add_argument("--n-trees", type=int, default=10)
    p.add_argument("--tmpdir", default=None)
    p = sub.add_parser("links")
    p.add_argument("--genes", type=int, default=5000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p = sub.add_parser("prior")
    p.add_argument("--nets", type=int, nargs="+", default=[1])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--n-trees", type=int, default=1000)
    p.add_argument("--alphas", type=float, nargs="+", default=[0.25, 0.5, 1.0])
    ns = ap.parse_args()
    {"dream4": dream4, "synth": synth, "scale": scale, "bigmem": bigmem, "links": links,
     "prior": prior_cost}[ns.cmd](ns)


if __name__ == "__main__":
    main()
