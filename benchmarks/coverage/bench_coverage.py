"""add-coverage benchmark: chromaflow add-coverage vs Helixer's add_ngs_coverage.py (the real peer), side by side.

  python benchmarks/coverage/bench_coverage.py [--work /tmp/cf-bench-cov] [--reps 3] [--threads 1,2]
      [--peer-threads 1] [--records 5 --record-bp 10000000 --reads 1000000] [--out benchmarks/coverage/results.json]

Inputs (made once by make_inputs.py, seeded): 5 x 10 Mbp genome h5 (chromaflow fasta2h5, L = 21384) and 1 M reads of
100 bp (20 % with a 1 kb N), the shape of the peer measurement in FORMATS.md §7.1. Each run works on a fresh copy of
the genome h5 (--unstranded, prefix atacseq). Runs alternate (peer, ours t=1, ours t=2, then rotated) so load
changes hit every variant; reported are medians (and ranges) of wall, CPU seconds (user+sys of the process tree, from
wait4) and peak RSS (largest single process). Outputs are checked equal to the peer's (values of both datasets).
Also: ours at a 5x smaller genome (same read density) to show peak RSS does not grow with genome size.
Writes --out (JSON) and RESULTS.md beside it.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PEER = ROOT.parent / "shared" / "peers" / "bin" / "peer-helixer-add-ngs-coverage"
sys.path.insert(0, str(ROOT / "benchmarks"))  # harness.timer: the benchmarks' process timer
from harness.timer import measure  # noqa: E402


def timed(cmd, cwd, log) -> dict:
    """Run cmd in cwd, its output to log (the benchmarks' process timer)."""
    with open(log, "w") as fh:
        r = measure(cmd, cwd=cwd, env=dict(os.environ, CHROMAFLOW_PROGRESS="0"), stdin=None, stdout=fh,
                    stderr=subprocess.STDOUT)
    if r["exit"] != 0:
        raise SystemExit(f"failed: {' '.join(map(str, cmd))} (see {log})")
    return {"wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "peak_rss_bytes": r["peak_rss_bytes"],
            "load_avg": r["load_after"]}


def inputs(work: Path, records: int, record_bp: int, reads: int) -> Path:
    d = work / f"in_{records}x{record_bp}_{reads}"
    if not (d / "reads.bam.bai").exists():
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "coverage" / "make_inputs.py"), str(d),
                        "--records", str(records), "--record-bp", str(record_bp), "--reads", str(reads)], check=True)
    return d


def run(variant: str, d: Path, work: Path, tag: str) -> dict:
    run_dir = work / "runs" / tag
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    h5 = run_dir / "genome.h5"
    shutil.copyfile(d / "genome.h5", h5)
    if variant.startswith("peer"):
        t = variant.split("_t")[1]
        cmd = [PEER, "-s", "sp", "-d", h5, "-b", d / "reads.bam", "--unstranded", "--dataset-prefix", "atacseq",
               "--threads", t]
    else:
        t = variant.split("_t")[1]
        cmd = [sys.executable, "-m", "chromaflow", "add-coverage", "--h5", h5, "--prefix", "atacseq", "--bam",
               d / "reads.bam", "--unstranded", "--threads", t]
    r = timed(cmd, run_dir, run_dir / "log.txt")
    r["h5"] = str(h5)
    return r


def same(a: str, b: str) -> bool:
    import h5py
    import numpy as np

    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        for n in ("evaluation/atacseq_coverage", "evaluation/atacseq_spliced_coverage"):
            x, y = fa[n], fb[n]
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            for i in range(0, x.shape[0], 256):
                if not np.array_equal(x[i:i + 256], y[i:i + 256]):
                    return False
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/cf-bench-cov")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", default="1,2", help="our --threads values")
    ap.add_argument("--peer-threads", default="1", help="the peer's --threads values (its default is 8)")
    ap.add_argument("--records", type=int, default=5)
    ap.add_argument("--record-bp", type=int, default=10_000_000)
    ap.add_argument("--reads", type=int, default=1_000_000)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "coverage" / "results.json"))
    a = ap.parse_args(argv)
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    d = inputs(work, a.records, a.record_bp, a.reads)
    variants = [f"peer_t{t}" for t in a.peer_threads.split(",")] + [f"ours_t{t}" for t in a.threads.split(",")]
    runs = {v: [] for v in variants}
    for rep in range(a.reps):
        order = variants[rep % len(variants):] + variants[:rep % len(variants)]
        for v in order:
            r = run(v, d, work, f"{v}_{rep}")
            runs[v].append(r)
            print(f"rep {rep + 1} {v}: wall {r['wall_s']:.2f} s, cpu {r['cpu_s']:.2f} s, "
                  f"rss {r['peak_rss_bytes'] / 2**20:.0f} MiB, load {r['load_avg']:.1f}", flush=True)
    ref = runs[variants[0]][0]["h5"]
    equal = {v: same(runs[v][0]["h5"], ref) for v in variants[1:]}
    small = inputs(work, a.records, a.record_bp // 5, a.reads // 5)
    scale = {"genome_bp": [a.records * a.record_bp // 5, a.records * a.record_bp],
             "peak_rss_bytes": [run("ours_t1", small, work, "small")["peak_rss_bytes"],
                                statistics.median(r["peak_rss_bytes"] for r in runs.get("ours_t1", runs[variants[-1]]))]}
    summary = {}
    for v, rs in runs.items():
        summary[v] = {k: statistics.median(r[k] for r in rs) for k in ("wall_s", "cpu_s", "peak_rss_bytes")}
        summary[v]["wall_range"] = [min(r["wall_s"] for r in rs), max(r["wall_s"] for r in rs)]
        summary[v]["cpu_range"] = [min(r["cpu_s"] for r in rs), max(r["cpu_s"] for r in rs)]
    base = summary[variants[0]]
    ratios = {v: {"wall": base["wall_s"] / s["wall_s"], "cpu": base["cpu_s"] / s["cpu_s"]}
              for v, s in summary.items() if v != variants[0]}
    for r in (x for rs in runs.values() for x in rs):
        r.pop("h5", None)
    res = {"input": {"records": a.records, "record_bp": a.record_bp, "reads": a.reads}, "cpus": len(os.sched_getaffinity(0)),
           "summary": summary, "ratios_vs_" + variants[0]: ratios, "equal_to_peer": equal, "memory_scale": scale,
           "runs": runs, "command": " ".join(["python", "benchmarks/coverage/bench_coverage.py"] + (argv or sys.argv[1:]))}
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    lines = ["# add-coverage benchmark: chromaflow vs Helixer add_ngs_coverage.py", "",
             f"Generated by `{res['command']}`. Do not edit by hand.", "",
             f"{a.records} x {a.record_bp:,} bp genome, {a.reads:,} reads of 100 bp (20 % with a 1 kb N), "
             f"--unstranded; {res['cpus']} usable CPUs; {a.reps} alternated repetitions; medians (ranges).", "",
             "| variant | wall s | CPU s | peak RSS MiB | equal to peer |", "|---|---|---|---|---|"]
    for v, s in summary.items():
        lines.append(f"| {v} | {s['wall_s']:.2f} ({s['wall_range'][0]:.2f}–{s['wall_range'][1]:.2f}) | "
                     f"{s['cpu_s']:.2f} ({s['cpu_range'][0]:.2f}–{s['cpu_range'][1]:.2f}) | "
                     f"{s['peak_rss_bytes'] / 2**20:.0f} | {'reference' if v == variants[0] else equal[v]} |")
    lines += ["", "Ratios vs " + variants[0] + ": " + "; ".join(
        f"{v}: {r['wall']:.2f}x wall, {r['cpu']:.2f}x CPU" for v, r in ratios.items()),
        "", f"Peak RSS of ours (1 thread) at {scale['genome_bp'][0]:,} bp: {scale['peak_rss_bytes'][0] / 2**20:.0f} MiB; "
        f"at {scale['genome_bp'][1]:,} bp: {scale['peak_rss_bytes'][1] / 2**20:.0f} MiB.",
        "", "Load average at each run: " + "; ".join(
            f"{v}: " + ", ".join(f"{r['load_avg']:.1f}" for r in rs) for v, rs in runs.items()), ""]
    (Path(a.out).parent / "RESULTS.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
