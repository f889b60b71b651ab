#!/usr/bin/env python
"""Profile ``chromaflow bigwig`` alone on large synthetic predictions (our cost only).

Comparisons with Predmoter's converter, run side by side on the same machine, are made by
``benchmarks/run --stages bigwig`` (no peer figure is typed here).

1. Generates (seeded, into a temp dir) a synthetic predictions h5 in Predmoter's exact layout (FORMATS §4:
   int64, chunks (1, L, 1), gzip 9, fill -1): ``--mbp`` Mbp in 4 chromosomes, both strands, realistic value
   runs (geometric run lengths, mean ``--run-bp`` bp, small integer values drifting like a coverage track).
   Chunk contents are drawn from a pool of distinct random chunks (compressed once each, written with
   write_direct_chunk), so generating 200+ Mbp takes seconds, not minutes.
2. Runs ``chromaflow bigwig`` (subprocess, like a pipeline task) for bw/bg x avg/all, reads the metrics JSON
   (wall, CPU seconds of all threads, peak RSS) and the load average, and prints a Markdown table with Mbp/s.
3. Optionally (``--reference``) runs the same options on ``extra/synthetic_multiblock_predictions.h5``
   (85.6 Mbp).

Usage: python benchmarks/bigwig/bench_bigwig.py [--mbp 210] [--reference ../shared/reference] [--threads N]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

L = 21384
MULTIBLOCK_OPTIONS = [("bedgraph", "avg", None), ("bedgraph", "+", None), ("bedgraph", "-", None),
                      ("bedgraph", "avg", 150), ("bigwig", "avg", 150)]


def make_chunk(rng: np.random.Generator, run_bp: float) -> np.ndarray:
    n_runs = int(L / run_bp * 3) + 16
    lengths = rng.geometric(1.0 / run_bp, n_runs)
    steps = rng.choice([-1, 0, 1], n_runs, p=[0.35, 0.3, 0.35])
    level = np.clip(np.cumsum(steps) + rng.integers(0, 6), 0, 12)
    vals = np.repeat(level, lengths)[:L]
    return vals.astype(np.int64)


def generate(path: Path, mbp: float, run_bp: float, seed: int, datasets: int) -> int:
    import h5py

    rng = np.random.default_rng(seed)
    pool = [zlib.compress(make_chunk(rng, run_bp).tobytes(), 9) for _ in range(97)]
    total = int(mbp * 1e6)
    sizes = [total // 4 + i * 12_345 for i in range(4)]
    sizes[-1] = total - sum(sizes[:-1])
    seqids, start_ends = [], []
    for ci, n in enumerate(sizes):
        k = -(-n // L)
        bounds = [(i * L, min((i + 1) * L, n)) for i in range(k)]
        seqids += [f"chr{ci + 1}".encode()] * (2 * k)
        start_ends += [list(b) for b in bounds] + [[e, s] for s, e in reversed(bounds)]
    N = len(seqids)
    with h5py.File(path, "w", libver="earliest") as h5:
        h5.create_dataset("data/seqids", data=np.array(seqids, dtype="S50"), chunks=(1,), maxshape=(None,))
        h5.create_dataset("data/start_ends", data=np.array(start_ends, dtype=np.int64), chunks=(1, 2),
                          maxshape=(None, 2))
        h5.create_dataset("prediction/datasets", data=np.array([b"atacseq", b"h3k4me3"][:datasets], dtype="S25"),
                          maxshape=(None,))
        d = h5.create_dataset("prediction/predictions", shape=(N, L, datasets), dtype=np.int64, chunks=(1, L, 1),
                              compression="gzip", compression_opts=9, fillvalue=-1, maxshape=(None, L, None))
        se = np.array(start_ends)
        for r in range(N):
            valid = abs(int(se[r, 0]) - int(se[r, 1]))
            for c in range(datasets):
                if valid == L:
                    raw = pool[(r * 7 + c * 13) % len(pool)]
                else:  # padded chunk: valid part first, -1 after
                    a = np.frombuffer(zlib.decompress(pool[r % len(pool)]), dtype=np.int64).copy()
                    a[valid:] = -1
                    raw = zlib.compress(a.tobytes(), 9)
                d.id.write_direct_chunk((r, 0, c), raw)
    return sum(sizes)


def run_one(pred: Path, outdir: Path, fmt: str, strand: str, ws: int | None, threads: int | None) -> dict:
    outdir.mkdir(parents=True, exist_ok=True)
    metrics = outdir / "metrics.json"
    cmd = [sys.executable, "-m", "chromaflow", "bigwig", "--predictions", str(pred), "--outdir", str(outdir),
           "--basename", "bench", "--format", fmt, "--strand", strand, "--force", "--metrics", str(metrics),
           "--no-browser-files"]
    if ws:
        cmd += ["--window-size", str(ws)]
    if threads:
        cmd += ["--threads", str(threads)]
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    wall_proc = time.perf_counter() - t0
    m = json.loads(metrics.read_text())
    m["wall_process_s"] = wall_proc
    m["load_before"] = load0
    m["load_after"] = os.getloadavg()[0]
    m["out_bytes"] = sum(p.stat().st_size for p in outdir.iterdir() if p.name.startswith("bench_"))
    for p in outdir.iterdir():
        p.unlink()
    return m


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mbp", type=float, default=210.0)
    ap.add_argument("--run-bp", type=float, default=25.0, help="mean run length of the synthetic values")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--datasets", type=int, default=1, choices=[1, 2])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--reference", type=Path, default=None, help="shared/reference folder (multiblock comparison)")
    ap.add_argument("--json", type=Path, default=None, help="also write all results as JSON here")
    args = ap.parse_args()
    rows = []
    print(f"# chromaflow bigwig benchmark  (host {os.uname().nodename}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f})\n")
    with tempfile.TemporaryDirectory(prefix="cf_bigwig_bench_") as tmp:
        tmp = Path(tmp)
        pred = tmp / "synthetic_predictions.h5"
        t0 = time.perf_counter()
        bp = generate(pred, args.mbp, args.run_bp, args.seed, args.datasets)
        print(f"generated {bp / 1e6:.1f} Mbp x {args.datasets} dataset(s) in {time.perf_counter() - t0:.1f} s "
              f"({pred.stat().st_size / 1e6:.0f} MB)\n")
        print("| input | format | strand | ws | tracks | intervals/track (avg) | wall s | CPU s | Mbp/s (wall) | "
              "Mbp per CPU-s | peak RSS MB | load before/after |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for fmt, strand in [("bigwig", "avg"), ("bedgraph", "avg"), ("bigwig", "all"), ("bedgraph", "all")]:
            m = run_one(pred, tmp / "out", fmt, strand, None, args.threads)
            mbps = m["bp"] / 1e6 / m["wall_s"]
            rows.append({**m, "input": f"synthetic {bp / 1e6:.0f} Mbp", "fmt": fmt, "strand": strand, "ws": None,
                         "mbp_per_s": mbps})
            print(f"| synthetic {bp / 1e6:.0f} Mbp | {fmt} | {strand} | – | {m['tracks']} | {m['intervals'] // m['tracks']} | {m['wall_s']:.2f} | "
                  f"{m['cpu_s']:.2f} | {mbps:.1f} | {m['bp'] / 1e6 / m['cpu_s']:.1f} | "
                  f"{m['peak_rss_bytes'] / 2**20:.0f} | {m['load_before']:.1f}/{m['load_after']:.1f} |", flush=True)
        if args.reference:
            mb = args.reference / "predmoter" / "extra" / "synthetic_multiblock" / "synthetic_multiblock_predictions.h5"
            for fmt, strand, ws in MULTIBLOCK_OPTIONS:
                m = run_one(mb, tmp / "out", fmt, strand, ws, args.threads)
                rows.append({**m, "input": "multiblock 85.6 Mbp", "fmt": fmt, "strand": strand, "ws": ws})
                print(f"| multiblock 85.6 Mbp | {fmt} | {strand} | {ws or '–'} | {m['tracks']} | – | "
                      f"{m['wall_process_s']:.2f} (stage {m['wall_s']:.2f}) | {m['cpu_s']:.2f} | "
                      f"{m['bp'] / 1e6 / m['wall_s']:.1f} | {m['bp'] / 1e6 / m['cpu_s']:.1f} | "
                      f"{m['peak_rss_bytes'] / 2**20:.0f} | {m['load_before']:.1f}/{m['load_after']:.1f} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
