"""Running the ``chromaflow`` command line in tests, and what a failed command must leave.

``chromaflow(*args)`` is the one runner: ``python -m chromaflow ARGS`` in a child process, as a pipeline task runs
it (text output captured, no progress bar). A test file that runs one command binds it, e.g.
``_cli = functools.partial(chromaflow, "fasta2h5")``. The commands that import torch (``FORKED_COMMANDS``) start
their child from a fork server instead (:class:`ForkServer`): a process of this session that has imported torch and
Lightning once and forks one child per command, which then runs the CLI as ``python -m chromaflow`` does (its own
process, cwd, environment, stdout/stderr, exit status). A fresh interpreter spends 1.7 (predict) to 5.5 (train)
CPU-s importing before the command starts; the suite runs some 70 of them. ``run_in_process(*args)`` runs the same
command line in this
process (fast where torch would be imported by every child). ``assert_one_line_error`` is the one check of the error
rule (docs/reliability.md): a non-zero exit and exactly one stderr line, ``chromaflow <command>: error: ...``.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

#: the commands whose child starts from the fork server: they import torch (train and evaluate: Lightning too)
FORKED_COMMANDS = frozenset({"train", "predict", "evaluate", "make-test-model", "variant-effect", "attribute"})
#: what the fork server imports once; only imports (nothing runs: no thread pool, no native library loaded by a call)
PRELOAD = (
    "torch",
    "lightning",
    "chromaflow.cli",
    "chromaflow.train.cli_train",
    "chromaflow.train.module",
    "chromaflow.train.datamodule",
    "chromaflow.train.evaluate",
    "chromaflow.predict.cli_predict",
    "chromaflow.model.checkpoint",
    "chromaflow.predict.engine",
)

#: the fork server: reads one JSON request per line, forks, and in the child runs the CLI as ``python -m chromaflow``
#: does (``main()`` with ``sys.argv``, then ``sys.exit``); it answers the child's pid, then its exit status
_SERVER = r"""
import importlib, json, os, signal, sys, traceback
for m in sys.argv[1:]:
    importlib.import_module(m)
answer = os.fdopen(os.dup(1), "w", buffering=1)
devnull = os.open(os.devnull, os.O_RDWR)
os.dup2(devnull, 1)
print(json.dumps({"ready": os.getpid()}), file=answer)
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        rc = 1
        try:
            os.dup2(devnull, 0)
            for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
            os.chdir(req["cwd"])
            os.environ.clear()
            os.environ.update(req["env"])
            sys.argv = [os.path.join(req["src"], "chromaflow", "__main__.py"), *req["argv"]]
            from chromaflow.cli import main
            try:
                rc = main()
            except SystemExit as exc:
                if exc.code is None or isinstance(exc.code, int):
                    rc = exc.code or 0
                else:
                    print(exc.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(rc)
    print(json.dumps({"pid": pid}), file=answer)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"status": os.waitstatus_to_exitcode(status)}), file=answer)
"""

#: environment variables a forked child may get different from the server's: chromaflow's own, read when a command
#: runs, never when a module is imported, and pytest's name of the running test (anything else, e.g. a kernel
#: variable torch reads at import, makes the command a fresh ``python -m chromaflow`` instead)
_FORK_ENV_PREFIXES = ("CHROMAFLOW_", "PYTEST_CURRENT_TEST")


class ForkServer:
    """Started at the first forked command with this process's environment, ended with the process."""

    def __init__(self, env: Mapping[str, str]):
        self.env = dict(env)
        self.src = str(Path(__file__).resolve().parents[2] / "src")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER, *PRELOAD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
            env=self.env,
            start_new_session=True,
        )
        self.lock = threading.Lock()
        self.served = 0  # commands run (its tests check which path a command took)
        self._buf = b""
        self._read(600)  # {"ready": pid}

    def _read(self, timeout: float | None) -> dict:
        """The server's next answer line. Read with os.read into our own buffer: select() on a buffered reader
        would wait for bytes the reader already holds (the pid and status lines of a quick child come together)."""
        fd = self.proc.stdout.fileno()
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buf:
            if deadline is not None and not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                raise subprocess.TimeoutExpired("chromaflow fork server", timeout)
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError(f"the chromaflow fork server ended (exit {self.proc.wait()})")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def accepts(self, environ: Mapping[str, str]) -> bool:
        return _same_env(environ, self.env)

    def send(self, args: list[str], cwd: str, environ: Mapping[str, str], out: Path, err: Path) -> None:
        """One request; the server answers the child's pid, then its exit status (hold ``lock`` to the end)."""
        self.proc.stdin.write(
            json.dumps(
                {
                    "argv": args,
                    "cwd": cwd,
                    "env": dict(environ),
                    "src": self.src,
                    "stdout": str(out),
                    "stderr": str(err),
                }
            ).encode()
            + b"\n"
        )

    def run(
        self, args: list[str], cwd: str, environ: Mapping[str, str], timeout: float | None, scratch: Path
    ) -> subprocess.CompletedProcess:
        out, err = scratch / "stdout", scratch / "stderr"
        with self.lock:
            self.send(args, cwd, environ, out, err)
            self.served += 1
            pid = self._read(60)["pid"]
            t0 = time.monotonic()
            try:
                status = self._read(timeout)["status"]
            except subprocess.TimeoutExpired:
                os.kill(pid, signal.SIGKILL)
                self._read(60)
                raise subprocess.TimeoutExpired(args, timeout or time.monotonic() - t0) from None
        return subprocess.CompletedProcess(
            [sys.executable, "-m", "chromaflow", *args],
            status,
            out.read_text(errors="replace"),
            err.read_text(errors="replace"),
        )

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _same_env(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    return all(a.get(k) == b.get(k) for k in set(a) | set(b) if not k.startswith(_FORK_ENV_PREFIXES))


_server: ForkServer | None = None
_starts = 0
#: fork servers one test process may start: a new one when this process's own environment changed for good (importing
#: Lightning sets PL_* and PYTORCH_NVML_BASED_CUDA_CHECK in a test that trains in process, say)
_MAX_STARTS = 8
#: one caller at a time picks or starts the server: threads that send their first forked commands at once (a test's
#: thread pool) would otherwise each start a server of their own, each importing torch and Lightning (~13 CPU-s)
_SERVER_LOCK = threading.Lock()


def _fork_server(environ: Mapping[str, str]) -> ForkServer | None:
    """The server for a child with ``environ``, or None: an environment given for one call (not this process's own),
    or too many restarts, runs a fresh interpreter instead."""
    with _SERVER_LOCK:
        return _pick_server(environ)


def _pick_server(environ: Mapping[str, str]) -> ForkServer | None:
    global _server, _starts
    if _server is not None and _server.proc.poll() is None and _server.accepts(environ):
        return _server
    if not _same_env(environ, os.environ) or _starts >= _MAX_STARTS:
        return None
    if _server is not None:
        _server.close()
    _server = ForkServer(os.environ)
    _starts += 1
    atexit.register(_server.close)
    return _server


def chromaflow(
    *args,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    base_env: Mapping[str, str] | None = None,
    timeout: float | None = 600,
    check: bool = False,
    prefix: Sequence[str] = (),
    fresh: bool = False,
) -> subprocess.CompletedProcess:
    """``python -m chromaflow ARGS`` (each argument through ``str``) in a child process.

    The child's environment is ``base_env`` (default: this process's) with ``CHROMAFLOW_PROGRESS=0`` and then
    ``env`` set over it. ``check``: a non-zero exit is an AssertionError that shows the end of stderr. ``prefix``: a
    command to run it under (``setpriv ...``). ``fresh``: a new interpreter even for a ``FORKED_COMMANDS`` command.
    """
    environ = {**(os.environ if base_env is None else base_env), "CHROMAFLOW_PROGRESS": "0", **(env or {})}
    argv = [str(a) for a in args]
    proc = None
    # --devices: DDP re-runs sys.argv
    if not (fresh or prefix) and argv and argv[0] in FORKED_COMMANDS and "--devices" not in argv:
        server = _fork_server(environ)
        if server is not None:
            with tempfile.TemporaryDirectory(prefix="cf-forked-") as scratch:
                proc = server.run(argv, os.path.abspath(cwd or os.getcwd()), environ, timeout, Path(scratch))
    if proc is None:
        proc = subprocess.run(
            [*prefix, sys.executable, "-m", "chromaflow", *argv],
            capture_output=True,
            text=True,
            cwd=cwd,
            env=environ,
            timeout=timeout,
        )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"chromaflow {' '.join(map(str, args[:1]))}: exit {proc.returncode}: {proc.stderr[-3000:]}"
        )
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
