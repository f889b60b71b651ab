"""The one environment of the processes the benchmarks start: this checkout's ``benchmarks`` and ``chromaflow``
importable (``python -m benchmarks.harness.gen``, ``python -m chromaflow``) whatever the caller's working
directory, and nothing else changed."""

from __future__ import annotations

import os
from pathlib import Path

#: the repository root (the folder holding ``benchmarks/`` and ``src/``)
ROOT = Path(__file__).resolve().parents[2]


def child_env(extra: dict | None = None, base: dict | None = None) -> dict:
    """``base`` (default ``os.environ``) with the repository root and ``src/`` first on ``PYTHONPATH`` and the
    ``extra`` variables set: the environment of every child process of the harness and the stage scripts."""
    env = dict(os.environ if base is None else base)
    ours = [str(ROOT), str(ROOT / "src")]
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in ours]
    env["PYTHONPATH"] = os.pathsep.join(ours + rest)
    env.update(extra or {})
    return env


def module(name: str) -> list[str]:
    """The argv prefix that runs ``benchmarks.harness.<name>`` (a harness tool) in a child process of this
    interpreter; pair it with :func:`child_env`."""
    import sys

    return [sys.executable, "-m", f"benchmarks.harness.{name}"]
