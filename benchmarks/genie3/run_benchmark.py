#!/usr/bin/env python3
"""GENIE3 A/B tools for the engine's own development (comparisons with arboreto and the reference GENIE3, run
side by side, are made by ``benchmarks/run --stages genie3``). No peer figure is typed here: reference values are read
from
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
  python benchmarks/genie3/run_benchmark.py prior [--nets 1 2 3 4 5] [--rounds 3] [--n-trees 1000]
        [--alphas 0.25 0.5 1] [--accuracy-net 1] [--accuracy-alphas 0 0.05 0.1 0.25 0.5 1] [--out JSON]
        genie3 --prior on DREAM4 size 100, written to benchmarks/genie3/prior_results.json: cost (CPU seconds of
        compute_weights, one thread, in process, all 100 targets, without a prior and with a random prior --
        per pair pi = 1 with probability 0.1, 0 with 0.6, NA otherwise -- at each alpha, alternated within each
        round; and of the prior check) and accuracy (AUPR with a prior made from the gold standard and with its
        values shuffled, at each alpha, --prior-check off and auto)
  python benchmarks/genie3/run_benchmark.py prior-render [--results JSON]
        write the two tables of that JSON into docs/genie3.md, between their GENERATED markers
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
    r = measure(
        [sys.executable, "-m", "chromaflow", "genie3", *args, "--metrics", str(metrics)],
        stdin=None,
        stdout=None,
        stderr=None,
        check=True,
    )
    m = json.loads(metrics.read_text())
    m.update(process_wall_s=r["wall_s"], load_before=r["load_before"])
    return m


def dream4(ns) -> None:
    ref = anchors()
    print(
        "| seed | net | trees | AUROC | AUPR | reference AUROC / AUPR (ANCHORS, seed = net) | process wall s | "
        "CPU s | load before |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    per_seed = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for seed in ns.seeds:
            rows = []
            for net in ns.nets:
                out = tmp / f"links{net}.tsv.gz"
                m = run_genie3(
                    [
                        "--expression",
                        str(REF / f"insilico_size100_{net}_multifactorial.tsv"),
                        "--layout",
                        "samples-x-genes",
                        "--engine",
                        ns.engine,
                        "--n-trees",
                        str(ns.n_trees),
                        "--importance",
                        ns.importance,
                        "--seed",
                        str(seed),
                        "--threads",
                        str(ns.threads),
                        "--out",
                        str(out),
                    ],
                    tmp,
                )
                s = score_links(out, REF / f"DREAM4_GoldStandard_InSilico_Size100_multifactorial_{net}.tsv")
                auroc, aupr = s["auroc"], s["aupr"]
                rows.append((auroc, aupr, m["process_wall_s"], m["cpu_s"]))
                r = ref.get(net, (float("nan"), float("nan")))
                print(
                    f"| {seed} | {net} | {ns.n_trees} | {auroc:.4f} | {aupr:.4f} | {r[0]:.4f} / {r[1]:.4f} | "
                    f"{m['process_wall_s']:.2f} | {m['cpu_s']:.2f} | {m['load_before']:.2f} |",
                    flush=True,
                )
            a = np.array(rows)
            per_seed.append(a.mean(axis=0))
            print(
                f"| {seed} | **mean** | | **{a[:, 0].mean():.4f}** | **{a[:, 1].mean():.4f}** | | "
                f"{a[:, 2].mean():.2f} | {a[:, 3].mean():.2f} | |",
                flush=True,
            )
    p = np.array(per_seed)
    sd = p.std(axis=0, ddof=1) if len(p) > 1 else np.zeros(4)
    print(
        f"\nover {len(p)} seeds: AUROC {p[:, 0].mean():.4f} (sd {sd[0]:.4f}), AUPR {p[:, 1].mean():.4f} "
        f"(sd {sd[1]:.4f}, range {p[:, 1].min():.4f}-{p[:, 1].max():.4f}); per network: process wall "
        f"{p[:, 2].mean():.2f} s, CPU {p[:, 3].mean():.2f} s"
    )


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
        print(
            f"| {genes} | {ns.samples} | {k} | {ns.n_trees} | {T} | {1e6 * per_tree:.0f} | {1000 * per_tree:.2f} | "
            f"{la0:.2f} |",
            flush=True,
        )


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
        m = run_genie3(
            [
                "--expression",
                str(f),
                "--layout",
                "genes-x-samples",
                "--n-trees",
                str(ns.n_trees),
                "--targets-chunk",
                f"1/{ns.genes // 2}",
                "--threads",
                "2",
                "--out",
                str(tmp / "p.npz"),
            ],
            tmp,
        )
        print(
            json.dumps(
                {
                    k: m[k]
                    for k in (
                        "genes",
                        "samples",
                        "regulators",
                        "targets",
                        "trees",
                        "wall_s",
                        "compute_s",
                        "cpu_s",
                        "peak_rss_bytes",
                    )
                },
                indent=1,
            )
        )


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
    t = {
        k: []
        for k in ("rank lexsort", "rank radix", "write python", "write C 1 thread", f"write C {ns.threads} threads")
    }
    digests = set()
    with tempfile.TemporaryDirectory() as d:
        for _ in range(ns.repeats):
            t0 = time.perf_counter()
            rows, cols = np.divmod(np.arange(G * G), G)
            keep = rows != cols
            rows, cols = rows[keep], cols[keep]
            o = np.lexsort((cols, rows, -W[rows, cols]))  # names sort as indices here
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
    print(
        f"{G} x {G} weights, {G * G - G:,} links, {ns.repeats} alternated repeats, load before "
        f"{os.getloadavg()[0]:.2f}; identical files: {len(digests) == 1}"
    )
    print("| step | median s | range |")
    print("|---|---|---|")
    for k, v in t.items():
        print(f"| {k} | {np.median(v):.2f} | {min(v):.2f}–{max(v):.2f} |")


PRIOR_RESULTS = HERE / "prior_results.json"
DOC = ROOT / "docs" / "genie3.md"
#: the generated blocks of docs/genie3.md (``prior-render``): one per table, replaced between its markers
PRIOR_BLOCKS = ("prior-cost", "prior-accuracy")


def _markers(name: str) -> tuple[str, str]:
    return (
        f"<!-- BEGIN GENERATED {name} by benchmarks/genie3/run_benchmark.py prior-render: do not edit by hand -->",
        f"<!-- END GENERATED {name} -->",
    )


def _random_prior(G: int, seed: int):
    """Per ordered pair (no self-pairs) pi = 1 with probability 0.1, 0 with 0.6, NA (0.5) otherwise."""
    from chromaflow.genie3.prior import Prior

    rng = np.random.default_rng(seed)
    reg, tgt = np.divmod(np.arange(G * G), G)
    keep = reg != tgt
    u = rng.uniform(size=G * G)
    pi = np.where(u < 0.1, 1.0, np.where(u < 0.7, 0.0, 0.5))[keep]
    return Prior(
        reg=reg[keep], tgt=tgt[keep], pi=pi, layout="long", pairs_read=int(keep.sum()), ignored=0, path="random"
    )


def _gold_priors(genes: list[str], gold: dict, seed: int):
    """From the gold standard: each pair NA with probability 0.3, else pi = 1 with probability 0.6 for a true
    edge and 0.05 for a false one (informative); and the same pi values permuted over the pairs (shuffled)."""
    from chromaflow.genie3.prior import Prior

    idx = {g: i for i, g in enumerate(genes)}
    keys = sorted(gold)
    rng = np.random.default_rng(seed)
    na = rng.uniform(size=len(keys)) < 0.3
    hit = rng.uniform(size=len(keys)) < np.array([0.6 if gold[k] else 0.05 for k in keys])
    pi = np.where(na, 0.5, np.where(hit, 1.0, 0.0))
    reg = np.array([idx[r] for r, _ in keys], dtype=np.int64)
    tgt = np.array([idx[t] for _, t in keys], dtype=np.int64)
    shuffled = pi[rng.permutation(len(pi))]
    return {
        name: Prior(reg=reg, tgt=tgt, pi=v, layout="long", pairs_read=len(keys), ignored=0, path=name)
        for name, v in (("informative", pi), ("shuffled", shuffled))
    }


def prior_bench(ns) -> None:
    """Both measurements of ``genie3 --prior`` on DREAM4 size 100, into a results JSON (``prior-render`` writes
    the tables of docs/genie3.md from it):

    * cost: CPU seconds of compute_weights (one thread, in process, all 100 targets) without a prior and with a
      random prior at each alpha, alternated within each round, and of the prior check (check_prior);
    * accuracy: AUPR on network ``--accuracy-net`` with a prior made from its gold standard and with the same
      values shuffled, at each ``--accuracy-alphas``, with ``--prior-check off`` (the weighted forest) and what
      ``--prior-check auto`` runs (the same forest when the check keeps the prior, alpha 0's when it turns it off:
      the CLI's rule, chromaflow.genie3.cli)."""
    import platform
    import subprocess

    from chromaflow.genie3 import dream4 as d4
    from chromaflow.genie3 import expression
    from chromaflow.genie3.core import Options, compute_weights
    from chromaflow.genie3.prior_check import check_prior
    from chromaflow.report.machine import machine_info

    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    load_before = os.getloadavg()
    cost = []
    for net in ns.nets:
        expr = expression.read_expression(REF / f"insilico_size100_{net}_multifactorial.tsv", "samples-x-genes")
        G = expr.n_genes
        prior = _random_prior(G, net)
        conds = [("no prior", None)] + [(f"alpha {a:g}", a) for a in ns.alphas]
        times: dict[str, list[float]] = {c: [] for c, _ in conds}
        checks = []
        for _ in range(ns.rounds):
            c0 = thread_cpu_s()
            check_prior(expr.values, expr.genes, np.arange(G), prior)
            checks.append(thread_cpu_s() - c0)
            for name, a in conds:
                opts = Options(n_trees=ns.n_trees, prior_alpha=a)
                c0 = thread_cpu_s()
                compute_weights(
                    expr.values,
                    expr.genes,
                    np.arange(G),
                    np.arange(G),
                    opts,
                    1,
                    warn=lambda m: None,
                    prior=None if a is None else prior,
                )
                times[name].append(thread_cpu_s() - c0)
        row = {"net": net, "cpu_s": times, "check_cpu_s": checks}
        cost.append(row)
        base = float(np.median(times["no prior"]))
        print(
            f"cost net {net}: no prior {base:.3f} s; "
            + ", ".join(f"{k} {np.median(v) / base:.3f}x" for k, v in times.items() if k != "no prior")
            + f"; check {np.median(checks):.4f} s",
            flush=True,
        )
    net = ns.accuracy_net
    expr = expression.read_expression(REF / f"insilico_size100_{net}_multifactorial.tsv", "samples-x-genes")
    gold = d4.read_gold(REF / f"DREAM4_GoldStandard_InSilico_Size100_multifactorial_{net}.tsv")
    G = expr.n_genes
    acc = {"net": net, "seed": ns.seed, "n_trees": ns.n_trees, "alphas": ns.accuracy_alphas, "priors": {}}
    plain = None
    for name, prior in _gold_priors(expr.genes, gold, ns.accuracy_net).items():
        chk = check_prior(expr.values, expr.genes, np.arange(G), prior)
        off, auto = [], []
        for a in ns.accuracy_alphas:
            if a == 0 and plain is not None:
                r = plain
            else:
                W, _ = compute_weights(
                    expr.values,
                    expr.genes,
                    np.arange(G),
                    np.arange(G),
                    Options(n_trees=ns.n_trees, seed=ns.seed, prior_alpha=a or None),
                    ns.threads,
                    warn=lambda m: None,
                    prior=prior if a else None,
                )
                r = d4.score(gold, d4.matrix_weights(W, expr.genes, expr.genes))
                r = {"auroc": r["auroc"], "aupr": r["aupr"]}
            if a == 0:
                plain = r
            off.append(r)
        auto = [r if chk["decision"] == "kept" else plain for r in off]
        acc["priors"][name] = {"check": chk, "prior_check_off": off, "prior_check_auto": auto}
        print(
            f"accuracy {name}: check {chk['decision']} (z {chk['z']}, p {chk['p']}); AUPR off "
            + " ".join(f"{r['aupr']:.3f}" for r in off),
            flush=True,
        )
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    doc = {
        "command": "python benchmarks/genie3/run_benchmark.py " + " ".join(sys.argv[1:]),
        "started": started,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": commit.strip(),
        "machine": machine_info(),
        "python": platform.python_version(),
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "n_trees": ns.n_trees,
        "rounds": ns.rounds,
        "cost": cost,
        "accuracy": acc,
    }
    out = Path(ns.out)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    tmp.replace(out)
    print(f"wrote {out}")


def prior_tables(doc: dict) -> dict[str, str]:
    """The two Markdown blocks of docs/genie3.md from a ``prior`` results JSON."""
    m = doc["machine"]
    where = (
        f"`{doc['command']}` at commit {doc['commit']}, {doc['started']} – {doc['finished']}, on "
        f"{m.get('cpu_model')} ({m.get('usable_cpus')} usable CPUs), load average "
        f"{doc['load_before'][0]:.1f} before, {doc['load_after'][0]:.1f} after"
    )
    cost = doc["cost"]
    names = [k for k in cost[0]["cpu_s"] if k != "no prior"]
    lines = [
        f"Generated from `benchmarks/genie3/{PRIOR_RESULTS.name}` ({where}); {doc['n_trees']} trees, medians "
        f"of {doc['rounds']} alternated rounds.",
        "",
        "| net | no prior (CPU s) | "
        + " | ".join(n.replace("alpha", "α =") for n in names)
        + " | prior check (CPU s) |",
        "|---|---|" + "---|" * (len(names) + 1),
    ]
    for row in cost:
        base = float(np.median(row["cpu_s"]["no prior"]))
        lines.append(
            f"| {row['net']} | {base:.2f} | "
            + " | ".join(f"{np.median(row['cpu_s'][n]) / base:.2f}×" for n in names)
            + f" | {np.median(row['check_cpu_s']):.4f} |"
        )
    ratios = [float(np.median(r["cpu_s"][n]) / np.median(r["cpu_s"]["no prior"])) for r in cost for n in names]
    lines += ["", f"Weighted / unweighted: {min(ratios):.2f}–{max(ratios):.2f}× (limit 1.2×)."]
    acc = doc["accuracy"]
    al = acc["alphas"]
    a_lines = [
        f"Generated from `benchmarks/genie3/{PRIOR_RESULTS.name}` ({where}). DREAM4 size-100 network "
        f"{acc['net']}, {acc['n_trees']} trees, RF, seed {acc['seed']}; AUPR (AUROC in the JSON).",
        "",
        "| prior | `--prior-check` | check: decision (z, one-sided p) | "
        + " | ".join(f"α {a:g}" + (" (= no prior)" if a == 0 else "") for a in al)
        + " |",
        "|---|---|---|" + "---|" * len(al),
    ]
    for name, r in acc["priors"].items():
        c = r["check"]
        ctext = f"{c['decision']} (z {c['z']:.2f}, p {c['p']:.2g})" if c["z"] is not None else c["decision"]
        a_lines.append(f"| {name} | off | – | " + " | ".join(f"{x['aupr']:.3f}" for x in r["prior_check_off"]) + " |")
        a_lines.append(
            f"| {name} | auto (default) | {ctext} | "
            + " | ".join(f"{x['aupr']:.3f}" for x in r["prior_check_auto"])
            + " |"
        )
    return {"prior-cost": "\n".join(lines), "prior-accuracy": "\n".join(a_lines)}


def with_prior_tables(text: str, doc: dict) -> str:
    """``text`` (docs/genie3.md) with its generated blocks replaced by the tables of ``doc``."""
    for name, body in prior_tables(doc).items():
        begin, end = _markers(name)
        if begin not in text or end not in text:
            raise SystemExit(f"{DOC}: no {name} block (markers {begin!r} ... {end!r})")
        a, b = text.index(begin), text.index(end) + len(end)
        text = text[:a] + f"{begin}\n{body}\n{end}" + text[b:]
    return text


def prior_render(ns) -> None:
    text = with_prior_tables(DOC.read_text(), json.loads(Path(ns.results).read_text()))
    if DOC.read_text() != text:
        DOC.write_text(text)
    print(f"wrote {DOC}")


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
    p.add_argument("--nets", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--n-trees", type=int, default=1000)
    p.add_argument("--alphas", type=float, nargs="+", default=[0.25, 0.5, 1.0])
    p.add_argument("--accuracy-net", type=int, default=1)
    p.add_argument("--accuracy-alphas", type=float, nargs="+", default=[0, 0.05, 0.1, 0.25, 0.5, 1])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2, help="threads of the accuracy runs (the same bytes for any)")
    p.add_argument("--out", default=str(PRIOR_RESULTS))
    p = sub.add_parser("prior-render")
    p.add_argument("--results", default=str(PRIOR_RESULTS))
    ns = ap.parse_args()
    {
        "dream4": dream4,
        "synth": synth,
        "scale": scale,
        "bigmem": bigmem,
        "links": links,
        "prior": prior_bench,
        "prior-render": prior_render,
    }[ns.cmd](ns)


if __name__ == "__main__":
    main()
