#!/usr/bin/env python
"""bigWig writers on the same intervals: chromaflow's writer (libdeflate levels 1 and 6), pyBigWig, pybigtools.

Seeded intervals like a predictions track (geometric run lengths, mean ``--mean-bp``, values 0..3, one
chromosome). Each writer runs in its own child process (``--repeat`` times, alternating); CPU seconds
(user + sys from wait4), wall seconds, file size; every file is read back with pyBigWig and must hold
exactly the intervals written.

    python benchmarks/bigwig/bench_writers.py --intervals 5000000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # harness.timer: the benchmarks' process timer
from harness.timer import measure  # noqa: E402

WRITERS = ["chromaflow-l1", "chromaflow-l6", "pybigwig", "pybigtools"]


def make(n: int, mean: float, seed: int):
    rng = np.random.default_rng(seed)
    lens = rng.geometric(1 / mean, n).astype(np.int64)
    ends = np.cumsum(lens)
    vals = rng.integers(0, 4, n).astype(np.float32)
    return ends - lens, ends, vals


def child(writer: str, n: int, mean: float, seed: int, out: str, threads: int) -> None:
    s, e, v = make(n, mean, seed)
    size = int(e[-1])
    t0 = time.perf_counter()
    if writer.startswith("chromaflow"):
        from concurrent.futures import ThreadPoolExecutor

        from chromaflow.bigwig.bigwigfile import BigWigWriter

        pool = ThreadPoolExecutor(threads) if threads > 1 else None
        w = BigWigWriter(out, [("chr1", size)], pool, level=int(writer[-1]))
        step = 1 << 20  # written in pieces, as the converter does
        for a in range(0, n, step):
            w.write("chr1", s[a : a + step], e[a : a + step], v[a : a + step])
        w.close()
    elif writer == "pybigwig":
        import pyBigWig

        bw = pyBigWig.open(out, "w")
        bw.addHeader([("chr1", size)])
        bw.addEntries(["chr1"] * n, s, ends=e, values=v.astype(np.float64))
        bw.close()
    else:
        import pybigtools

        bw = pybigtools.open(out, "w")
        bw.write({"chr1": size}, zip(["chr1"] * n, s.tolist(), e.tolist(), v.tolist()))
    print(time.perf_counter() - t0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--intervals", type=int, default=5_000_000)
    ap.add_argument("--mean-bp", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--child", nargs=2, metavar=("WRITER", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child[0], args.intervals, args.mean_bp, args.seed, args.child[1], args.threads)
        return 0
    s, e, v = make(args.intervals, args.mean_bp, args.seed)
    res: dict[str, list] = {w: [] for w in WRITERS}
    with tempfile.TemporaryDirectory(prefix="cf_bw_writers_") as tmp:
        for rep in range(args.repeat):
            for w in WRITERS:
                out = Path(tmp) / f"{w}.bw"
                cmd = [
                    sys.executable,
                    __file__,
                    "--intervals",
                    str(args.intervals),
                    "--mean-bp",
                    str(args.mean_bp),
                    "--seed",
                    str(args.seed),
                    "--threads",
                    str(args.threads),
                    "--child",
                    w,
                    str(out),
                ]
                r = measure(cmd, stdin=None, stdout=subprocess.PIPE, stderr=None)
                inner = float(r["stdout"].decode().strip() or "nan")
                assert r["exit"] == 0, w
                if rep == 0:  # the file holds exactly the intervals written
                    import pyBigWig

                    bw = pyBigWig.open(str(out))
                    got = np.array(bw.intervals("chr1"), dtype=np.float64)
                    bw.close()
                    assert (
                        len(got) == len(s)
                        and np.array_equal(got[:, 0], s)
                        and np.array_equal(got[:, 1], e)
                        and np.array_equal(got[:, 2], v)
                    ), w
                res[w].append(
                    {
                        "cpu_s": r["cpu_s"],
                        "wall_s": r["wall_s"],
                        "write_s": inner,
                        "bytes": out.stat().st_size,
                        "load": r["load_before"],
                    }
                )
    print(
        f"{args.intervals:,} intervals (mean {args.mean_bp} bp, seed {args.seed}), {args.repeat} alternating "
        f"runs each, {os.cpu_count()} CPUs, load {min(r['load'] for x in res.values() for r in x):.1f}–"
        f"{max(r['load'] for x in res.values() for r in x):.1f}; process CPU and wall include Python start-up and "
        "making the intervals (~the same for all)\n"
    )
    print("| writer | CPU s (median, min–max) | wall s | write call s | file MB |")
    print("|---|---|---|---|---|")
    for w, rs in res.items():
        c = [r["cpu_s"] for r in rs]
        print(
            f"| {w} | {statistics.median(c):.2f} ({min(c):.2f}–{max(c):.2f}) | "
            f"{statistics.median(r['wall_s'] for r in rs):.2f} | {statistics.median(r['write_s'] for r in rs):.2f} | "
            f"{rs[0]['bytes'] / 1e6:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
