"""The kept inputs of the suite's real benchmark runs (tests/benchmarks/test_harness_quick_run.py,
test_dev_stages_quick_run.py): a finished set of generated inputs is kept in a cache folder keyed by the code that
makes or reads them, so a later suite run does not make them again."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from benchmarks.harness.slurm_cluster import pid_alive

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
#: the stages of the suite's quick run against the peers (coverage and train, about a minute each with --quick, most
#: of it Predmoter's start-up, are left out; tests/benchmarks/test_stage_coverage_train.py tests their cases)
SUITE_STAGES = ("fasta2h5", "predict", "bigwig", "peaks", "genie3", "network", "scaling")


def suite_inputs(cache: Path, stages: tuple[str, ...] = SUITE_STAGES) -> tuple[Path, Path]:
    """Where the suite's quick run reads its generated inputs (FASTA, predictions, expression matrices; ~25 CPU-s to
    make, 23 MB): (folder to pass as --inputs, folder it becomes once the run passed). A finished set is kept under
    ``cache`` for later suite runs, keyed by every file of the code that makes or reads them (the harness, the
    generators, the package) and the stages: any change to those makes a fresh set. A run that stops half-way leaves
    only its ``.partial`` folder, never a set a later run would read; older sets are removed when a new one is kept.
    Another quick run of the suite (test_dev_stages_quick_run.py) keeps its own set the same way, in its own
    ``cache``, keyed by its ``stages``."""
    code = [
        *BENCH.rglob("*.py"),
        *(ROOT / "src" / "chromaflow").rglob("*.py"),
        *(ROOT / "src" / "chromaflow").rglob("*.c"),
    ]
    ready = cache / _inputs_key(ROOT, [f for f in code if "__pycache__" not in f.parts], stages)
    return (ready if ready.is_dir() else cache / f"{ready.name}.{os.getpid()}.partial"), ready


def _inputs_key(root: Path, files: list[Path], stages: tuple[str, ...] = SUITE_STAGES) -> str:
    import hashlib

    h = hashlib.sha256(",".join(stages).encode())
    for f in sorted(files):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def keep_suite_inputs(used: Path, ready: Path) -> None:
    """After a passing run: its fresh inputs become the kept set, the only one (see :func:`suite_inputs`)."""
    if used != ready:
        used.rename(ready)
        for other in ready.parent.iterdir():
            pid = other.name.split(".")[1] if other.name.endswith(".partial") else None
            if other != ready and (pid is None or not pid_alive(int(pid))):  # not another live run's
                shutil.rmtree(other, ignore_errors=True)
