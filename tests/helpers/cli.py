"""Running the ``chromaflow`` command line in tests, and what a failed command must leave.

``chromaflow(*args)`` is the one runner: ``python -m chromaflow ARGS`` in a child process, as a pipeline task runs
it (text output captured, no progress bar). A test file that runs one command binds it, e.g.
``_cli = functools.partial(chromaflow, "fasta2h5")``. ``run_in_process(*args)`` runs the same command line in this
process (fast where torch would be imported by every child). ``assert_one_line_error`` is the one check of the error
rule (docs/reliability.md): a non-zero exit and exactly one stderr line, ``chromaflow <command>: error: ...``.
"""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path


def chromaflow(*args, cwd: Path | str | None = None, env: Mapping[str, str] | None = None,
               base_env: Mapping[str, str] | None = None, timeout: float | None = 600, check: bool = False,
               prefix: Sequence[str] = ()) -> subprocess.CompletedProcess:
    """``python -m chromaflow ARGS`` (each argument through ``str``) in a child process.

    The child's environment is ``base_env`` (default: this process's) with ``CHROMAFLOW_PROGRESS=0`` and then
    ``env`` set over it. ``check``: a non-zero exit is an AssertionError that shows the end of stderr. ``prefix``: a
    command to run it under (``setpriv ...``).
    """
    environ = dict(os.environ if base_env is None else base_env, CHROMAFLOW_PROGRESS="0", **(env or {}))
    proc = subprocess.run([*prefix, sys.executable, "-m", "chromaflow", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=environ, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"chromaflow {' '.join(map(str, args[:1]))}: exit {proc.returncode}: {proc.stderr[-3000:]}")
    return proc


def run_in_process(*args, check: bool = True) -> subprocess.CompletedProcess:
    """The chromaflow CLI in this process (fast: torch is imported once), stderr captured, as a CompletedProcess."""
    from chromaflow.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main([str(a) for a in args])
    proc = subprocess.CompletedProcess(["chromaflow", *args], rc, "", err.getvalue())
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr}")
    return proc


def ok(*args, **kw) -> subprocess.CompletedProcess:
    """:func:`chromaflow` that must succeed."""
    return chromaflow(*args, check=True, **kw)


def assert_one_line_error(proc: subprocess.CompletedProcess, command: str, *needles: str) -> str:
    """The error rule: exit != 0, one non-blank stderr line ``chromaflow <command>: error: ...`` holding every needle,
    no traceback. Returns the line."""
    assert proc.returncode != 0, f"exit 0, expected an error:\n{proc.stdout}{proc.stderr}"
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one stderr line, got:\n{proc.stderr}"
    line = lines[0]
    assert line.startswith(f"chromaflow {command}: error: "), line
    assert "Traceback" not in proc.stderr
    for n in needles:
        assert n in line, f"{n!r} not in {line!r}"
    return line


def assert_nothing_left(directory: Path, keep: set[str] = frozenset()) -> None:
    """Nothing in ``directory`` but the names in ``keep`` (no output, no temporary)."""
    left = {p.name for p in directory.iterdir()} - set(keep)
    assert not left, f"left behind: {sorted(left)}"
