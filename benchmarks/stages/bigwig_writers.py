"""bigWig writers on the same intervals: chromaflow's writer at libdeflate levels 1 and 6, pyBigWig, pybigtools
(opt-in: ``benchmarks/run --stages bigwig_writers``; it replaced ``benchmarks/bigwig/bench_writers.py``).

Seeded intervals like a predictions track (one chromosome, geometric run lengths of mean ``bwwriters_mean_bp``,
values 0..3). Each writer is a child process (``python -m benchmarks.harness.tools bigwig-write``) that makes the
intervals, writes them and prints the seconds of the write call alone; the harness times the process (CPU, wall,
peak RSS), alternating the writers. Every file of the first repeat is read back with pyBigWig and must hold
exactly the intervals written. The libraries are the pinned environment's (``requirements-test.txt``), not the
peers kit's; a writer whose library is not installed is left out, with the reason in the case's note.

The stage's sizes (``FULL`` for people, ``QUICK`` for CI), the peers it needs, its builder (``build(ctx)``:
(warm-up commands, cases)), and its render section (:func:`writers_lines`: the table of the results Markdown).
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import subprocess
from pathlib import Path

from ..harness.core import Case, Contender
from ..harness.env import child_env, module
from ..harness.stagekit import Ctx, sizes
from ..harness.tables import _f, _ok, _spread
from ..harness.tools import WRITERS

#: launchers of ../shared/peers/bin this stage needs (none: the libraries are in our environment)
PEERS: list[str] = []
#: sizes of the full run (keys are the results files' and the docs' names; Ctx.cfg merges every stage's)
FULL = {"bwwriters_intervals": 5_000_000, "bwwriters_mean_bp": 3.0, "bwwriters_seed": 1}
#: sizes of the --quick run
QUICK = {"bwwriters_intervals": 20_000, "bwwriters_mean_bp": 3.0, "bwwriters_seed": 1}

#: the module each writer needs
LIBRARY = {
    "chromaflow-l1": "chromaflow",
    "chromaflow-l6": "chromaflow",
    "pybigwig": "pyBigWig",
    "pybigtools": "pybigtools",
}
LABEL = {
    "chromaflow-l1": "chromaflow BigWigWriter, libdeflate level 1 (the default)",
    "chromaflow-l6": "chromaflow BigWigWriter, libdeflate level 6",
    "pybigwig": "pyBigWig addEntries (arrays)",
    "pybigtools": "pybigtools write (one tuple per interval)",
}


def _contender(writer: str, n: int, mean: float, seed: int, threads: int) -> Contender:
    def argv(d: Path, r: int) -> list[str]:
        return [*module("tools"), "bigwig-write", writer, str(d / "out.bw"), str(n), str(mean), str(seed), str(threads)]

    role = "ours" if writer.startswith("chromaflow") else "peer"
    return Contender(writer, LABEL[writer], role, argv, outputs=sizes("out.bw"))


def _write_s(key: str, d: Path) -> dict:
    """The writer's own figure: seconds of the write call (the last line of its stdout)."""
    lines = (d / "stdout.txt").read_text().split()
    return {"write_s": float(lines[-1])} if lines else {}


def _read_back(n: int, mean: float, seed: int):
    def agree(dirs: dict[str, Path]) -> dict:
        bad = []
        for key, d in dirs.items():
            p = subprocess.run(
                [*module("tools"), "bigwig-check", str(d / "out.bw"), str(n), str(mean), str(seed)],
                capture_output=True,
                text=True,
                env=child_env(),
            )
            if p.returncode != 0:
                bad.append(f"{key}: {(p.stdout.strip() or p.stderr.strip() or '?').splitlines()[-1][:200]}")
        if bad:
            return {"ok": False, "detail": "read back with pyBigWig: " + "; ".join(bad)}
        return {"ok": True, "detail": f"every file holds exactly the {n:,} intervals written (read back with pyBigWig)"}

    return agree


def bigwig_writers(ctx: Ctx) -> tuple[list, list[Case]]:
    cfg = ctx.cfg
    n, mean, seed = cfg["bwwriters_intervals"], cfg["bwwriters_mean_bp"], cfg["bwwriters_seed"]
    threads = os.cpu_count() or 1
    here = [w for w in WRITERS if importlib.util.find_spec(LIBRARY[w]) is not None]
    missing = [w for w in WRITERS if w not in here]
    cons = [_contender(w, n, mean, seed, threads) for w in here]
    ours_keys = [c.key for c in cons if c.role == "ours"]
    pairs = [(ours_keys[0], c.key) for c in cons if c.role == "peer"] if ours_keys else []
    note = (
        "each writer a fresh process: process CPU and wall include Python's start-up and making the intervals "
        "(about the same for every writer); write_s is the write call alone"
        + (f"; left out (library not installed): {', '.join(missing)}" if missing else "")
    )
    case = Case(
        "bigwig_writers",
        f"intervals_{n}_mean{mean:g}bp",
        {"intervals": n, "mean_bp": mean, "seed": seed, "threads": threads, "chromosomes": 1},
        cons,
        pairs,
        _read_back(n, mean, seed) if cons else None,
        per_run=_write_s,
        skip=None if cons else "no bigWig writer library is installed",
        note=note,
    )
    warm = [[*module("tools"), "bigwig-write", w, "{d}/w.bw", "1000", str(mean), str(seed), "1"] for w in here]
    return warm, [case]


build = bigwig_writers


# --------------------------------------------------------------------------------------------------
# the stage's table (benchmarks/render: the results Markdown)
# --------------------------------------------------------------------------------------------------
def writers_lines(res: dict) -> list[str]:
    """Per bigwig_writers case: each writer's process CPU and wall, its write call and its file size."""
    out: list[str] = []
    for c in res.get("cases", []):
        if c["stage"] != "bigwig_writers" or c.get("skipped"):
            continue
        p = c["params"]
        out += [
            f"### {c['case']}: {p['intervals']:,} intervals (mean {p['mean_bp']:g} bp, seed {p['seed']}), "
            f"{p['threads']} threads",
            "",
            "| writer | runs | CPU s median (min–max) | wall s median (min–max) | write call s median | file MB |",
            "|---|---|---|---|---|---|",
        ]
        for key, con in c.get("contenders", {}).items():
            runs = [r for r in c["runs"] if r["contender"] == key and r.get("exit") == 0]
            write = [r["write_s"] for r in runs if r.get("write_s") is not None]
            size = next((sum(r["outputs"].values()) for r in runs if r.get("outputs")), None)
            out.append(
                f"| {key}{' (**failed**)' if con.get('failed') else ''} | {len(runs)} | {_spread(con.get('cpu_s'))} | "
                f"{_spread(con.get('wall_s'))} | {_f(statistics.median(write)) if write else '–'} | "
                f"{_f(size / 1e6) if size is not None else '–'} |"
            )
        out += ["", f"* outputs: {_ok(c.get('agreement'))}", ""]
    return out
