"""Peak RSS of ``genie3-merge`` on a synthetic genome-scale weight matrix (issue 30 §2, memory review).

    python benchmarks/genie3/merge_memory.py WORKDIR [--targets 25000] [--regulators 1700] [--chunks 50]
                                             [--max-links 100000]

Writes CHUNKS part files (``harness.genie3scale.make_parts``: the chunk tasks' format, a seeded weight matrix shaped
like GENIE3's) once (kept in WORKDIR), then runs ``chromaflow genie3-merge`` under ``/usr/bin/time -v`` twice:
``--max-links`` alone (the streaming path) and ``--max-links`` with ``--summary`` and ``--plot`` (the pipeline's
merge), and prints one JSON
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


def make_parts(work: Path, T: int, R: int, chunks: int) -> list[Path]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from harness.genie3scale import make_parts as make

    return make(str(work), str(T), str(R), str(chunks))


def measure(argv: list[str], work: Path) -> dict:
    p = subprocess.run(
        ["/usr/bin/time", "-v", *argv],
        capture_output=True,
        text=True,
        cwd=work,
        env=dict(os.environ, CHROMAFLOW_PROGRESS="0"),
    )
    if p.returncode != 0:
        raise SystemExit(p.stderr[-2000:])
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1)) * 1024
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", p.stderr).group(1)
    secs = sum(float(x) * 60**k for k, x in enumerate(reversed(wall.split(":"))))
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
        rec.update(
            case=label,
            targets=a.targets,
            regulators=a.regulators,
            chunks=a.chunks,
            max_links=a.max_links,
            dense_copy_bytes=a.targets * a.regulators * 8,
        )
        print(json.dumps(rec), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
