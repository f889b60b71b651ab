"""Peak RSS of ``genie3-merge`` on a synthetic genome-scale weight matrix (issue 30 §2, memory review).

    python benchmarks/genie3/merge_memory.py WORKDIR [--targets 25000] [--regulators 1700] [--chunks 50]
                                             [--max-links 100000]

Writes CHUNKS part files (``chromaflow.genie3.parts.write_part``, the format the chunk tasks write) of a seeded
weight matrix shaped like GENIE3's (70 % zeros, the rest exponential, the self entries 0), once (kept in
WORKDIR), then runs ``chromaflow genie3-merge`` under ``/usr/bin/time -v`` twice: ``--max-links`` alone (the
streaming path) and ``--max-links`` with ``--summary`` and ``--plot`` (the pipeline's merge), and prints one JSON
line per run: the command, wall seconds and peak RSS in bytes, and R x T x 8 (one dense float64 copy) beside it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np


def make_parts(work: Path, T: int, R: int, chunks: int) -> list[Path]:
    from chromaflow.common import part_bounds
    from chromaflow.genie3.parts import write_part

    genes = [f"TF{i + 1}" for i in range(R)] + [f"G{i + 1}" for i in range(T - R)]
    paths = [work / f"part{i}.npz" for i in range(1, chunks + 1)]
    if all(p.exists() for p in paths):
        return paths
    rng = np.random.default_rng(30)
    for i, p in enumerate(paths, 1):
        lo, hi = part_bounds(i, chunks, T)
        W = rng.exponential(size=(R, hi - lo)) * (rng.random((R, hi - lo)) > 0.7)
        for t in range(lo, min(hi, R)):   # regulator t is target t: its self entry is 0
            W[t, t - lo] = 0.0
        meta = {"genes": genes, "regulators": list(range(R)), "targets": list(range(lo, hi)),
                "n_targets_total": T, "target_range": [lo, hi], "chunk": [i, chunks],
                "options": {"tree_method": "RF", "max_features": "sqrt", "n_trees": 10, "seed": 0,
                            "engine": "fast", "importance": "unnormalised"},
                "fingerprint": "synthetic", "samples": 500, "expression": "synthetic", "constant_targets": []}
        write_part(p, W, meta)
    return paths


def measure(argv: list[str], work: Path) -> dict:
    p = subprocess.run(["/usr/bin/time", "-v", *argv], capture_output=True, text=True, cwd=work,
                       env=dict(os.environ, CHROMAFLOW_PROGRESS="0"))
    if p.returncode != 0:
        raise SystemExit(p.stderr[-2000:])
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1)) * 1024
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", p.stderr).group(1)
    secs = sum(float(x) * 60 ** k for k, x in enumerate(reversed(wall.split(":"))))
    return {"peak_rss_bytes": rss, "wall_s": round(secs, 2)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("--targets", type=int, default=25_000)
    ap.add_argument("--regulators", type=int, default=1_700)
    ap.add_argument("--chunks", type=int, default=50)
    ap.add_argument("--max-links", type=int, default=100_000)
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    parts = make_parts(work, a.targets, a.regulators, a.chunks)
    base = [sys.executable, "-m", "chromaflow", "genie3-merge", "--max-links", str(a.max_links)]
    for label, extra in (("links only", []), ("links + summary + plot", ["--summary", "s.json", "--plot", "p.png"])):
        for name in ("links.tsv.gz", "s.json", "p.png"):
            (work / name).unlink(missing_ok=True)
        rec = measure(base + ["--out", "links.tsv.gz", *extra, *map(str, parts)], work)
        rec.update(case=label, targets=a.targets, regulators=a.regulators, chunks=a.chunks, max_links=a.max_links,
                   dense_copy_bytes=a.targets * a.regulators * 8)
        print(json.dumps(rec), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
