"""Helpers shared by every stage: one-line errors, atomic outputs, terminal progress, metrics JSON.

Nothing here knows about Nextflow. Stages raise :class:`ChromaflowError` for every bad input; the CLI
turns it into a single line on stderr and a non-zero exit code.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import re
import resource
import secrets
import signal
import socket
import sys
import time
from array import array
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from . import __version__


class ChromaflowError(Exception):
    """A user-facing error: the message is printed as one line, naming the file/record/line at fault."""

    exit_code = 1

    def __init__(self, message: str):
        # keep the message on one line whatever the caller passed in
        super().__init__(" ".join(str(message).split()))


class OutputExistsError(ChromaflowError):
    """An output already exists and the caller did not ask to overwrite it."""


class OutputBusyError(ChromaflowError):
    """Another live process is writing the same output. Exit 75 (EX_TEMPFAIL, "try again later"): the pipeline
    retries it (conf/base.config), and a retry runs in a work directory of its own."""

    exit_code = 75


# --------------------------------------------------------------------------------------------------
# atomic outputs
# --------------------------------------------------------------------------------------------------
#: tags every temporary name with this host and the writing process: ``.<name>.<host>-<pid>.<random>[suffix].part``
_HOST = hashlib.sha1(socket.gethostname().encode()).hexdigest()[:6]
#: the tag and random part of a temporary name (cli.py turns a temporary name back into its output's name)
_RANDOM = r"[A-Za-z0-9_]{8}"
TEMP_MIDDLE = rf"(?:[0-9a-f]{{6}}-\d+\.)?{_RANDOM}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def remove_stale_temporaries(path: str | os.PathLike) -> list[str]:
    """Remove the temporaries of ``path`` that a killed earlier run (kill -9) on this host left: those whose
    writing process is no longer alive. A live run's temporaries (also another one's) are kept."""
    path = Path(path)
    pattern = re.compile(rf"\.{re.escape(path.name)}\.{_HOST}-(\d+)\.{_RANDOM}.*\.part")
    removed = []
    with contextlib.suppress(OSError), os.scandir(path.parent if str(path.parent) else ".") as entries:
        for entry in entries:
            m = pattern.fullmatch(entry.name)
            if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
                    removed.append(entry.name)
    return removed


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, *, force: bool = True, suffix: str = "",
                  mode: int = 0o644) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds.

    On any exception (including KeyboardInterrupt and :class:`Interrupted`: SIGTERM, SIGINT, SIGHUP) the temporary
    file is removed, so no half-written file is ever left under the final name. The temporary name starts with
    ``.`` and ends with ``.part`` so pipeline output globs never match it; it carries this host and process id,
    so the temporaries a killed run (kill -9) left are recognised and removed here, by the next run with the same
    output (:func:`remove_stale_temporaries`). ``mode`` is the permission bits of the result (an in-place update
    passes the original file's).
    """
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise ChromaflowError(f"{parent}: output directory does not exist")
    taken = lock_output(path)  # False: this process took it already (check_outputs)
    try:
        if path.exists() and not force:
            raise OutputExistsError(f"{path}: output exists (use --force to overwrite)")
        remove_stale_temporaries(path)
        existed = path.exists()
        name = _new_temporary(parent, path.name, suffix)
        try:
            yield Path(name)
            raise_if_stopped()  # never rename after a stop signal, even one whose exception was swallowed
            os.chmod(name, mode)
            os.replace(name, path)
            if not existed:
                CREATED_OUTPUTS.append(str(path))
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)
            raise
        finally:
            _LIVE_TEMPORARIES.discard(name)
    finally:
        if taken:
            release_output(path)


#: outputs this process created (renamed into place where no file was before), in order: when a command fails
#: after some were complete (its --metrics cannot be written, a later output fails), the CLI removes them, so a
#: failed run leaves none of its outputs (:func:`remove_created_outputs`). An output that existed before (an
#: in-place update, a --force overwrite) is not listed: removing it would lose what was there.
CREATED_OUTPUTS: list[str] = []


def remove_created_outputs() -> list[str]:
    """Remove the outputs listed in :data:`CREATED_OUTPUTS` and empty the list."""
    removed = _unlink_existing(CREATED_OUTPUTS)
    CREATED_OUTPUTS.clear()
    return removed


def _unlink_existing(paths) -> list[str]:
    """Remove each of ``paths`` that exists; the ones removed, in order."""
    removed = []
    for path in list(paths):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
            removed.append(path)
    return removed


@contextlib.contextmanager
def atomic_outputs(paths: Iterable[str | os.PathLike | None], *, force: bool = True) -> Iterator[list[Path | None]]:
    """:func:`atomic_output` for all the outputs of one run: yield one temporary per path (None for a None path);
    they are renamed onto their outputs only when the whole block succeeded, and on any failure (a full disk while
    the second output is written, a signal) every temporary is removed and no output is renamed."""
    with contextlib.ExitStack() as stack:
        yield [None if p is None else stack.enter_context(atomic_output(p, force=force)) for p in paths]


@contextlib.contextmanager
def naming_errors(path: str | os.PathLike) -> Iterator[None]:
    """An OSError raised in the block without a file name (``write``/``close`` into a full disk, an I/O error)
    is raised again naming ``path`` (a temporary's name is turned back into its output's by the CLI)."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None:
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), os.fspath(path)) from exc


# --------------------------------------------------------------------------------------------------
# output locks: two runs never write the same output at the same time
# --------------------------------------------------------------------------------------------------
#: absolute output path -> open descriptor of its lock file ``.<name>.lock``, for the outputs this process holds
_HELD_LOCKS: dict[str, int] = {}


def _lock_name(key: str) -> str:
    return os.path.join(os.path.dirname(key), f".{os.path.basename(key)}.lock")


def lock_output(path: str | os.PathLike) -> bool:
    """Take ``path`` for this process: an exclusive ``flock`` on ``.<name>.lock`` beside it, which holds the pid.

    Another live process holding it -> one-line :class:`ChromaflowError` naming its pid. The kernel drops the lock
    when its process dies, so the lock file a killed run (kill -9) left is simply taken over. Returns False when
    this process holds it already, True when taken now (then :func:`release_output` removes it)."""
    key = os.path.abspath(path)
    if key in _HELD_LOCKS:
        return False
    lock = _lock_name(key)
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:  # a read-only folder, a full disk: name the output, not its lock file
            raise OSError(exc.errno, exc.strerror, os.fspath(path)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise OutputBusyError(f"{path}: is being written by another chromaflow process (pid {holder}); wait "
                                  "for it to end or write elsewhere") from None
        with contextlib.suppress(FileNotFoundError):
            if os.stat(lock).st_ino == os.fstat(fd).st_ino:  # not removed by its last holder meanwhile
                break
        os.close(fd)
    with contextlib.suppress(OSError):  # a full disk: the lock holds all the same, its pid reads "unknown"
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    _HELD_LOCKS[key] = fd
    return True


def release_output(path: str | os.PathLike) -> None:
    """Remove the lock :func:`lock_output` took on ``path`` (a no-op when this process does not hold it)."""
    key = os.path.abspath(path)
    fd = _HELD_LOCKS.pop(key, None)
    if fd is not None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(_lock_name(key))
        os.close(fd)


def release_output_locks() -> None:
    """Release every output lock this process holds (the CLI calls it when a command stops)."""
    for key in list(_HELD_LOCKS):
        release_output(key)


#: temporaries of this process that are neither renamed nor removed yet. A signal can arrive between two
#: bytecodes anywhere, also after a temporary was created and before the block that removes it on error was
#: entered (or before an ExitStack registered it): the CLI removes what is still listed here when it stops.
_LIVE_TEMPORARIES: set[str] = set()


def _new_temporary(parent: Path, name: str, suffix: str) -> str:
    """Create an empty temporary ``.<name>.<host>-<pid>.<random>[suffix].part`` in ``parent``; it is listed in
    :data:`_LIVE_TEMPORARIES` before it exists, so no moment leaves it unlisted."""
    for _ in range(100):
        tmp = os.path.join(parent, f".{name}.{_HOST}-{os.getpid()}.{secrets.token_hex(4)}{suffix}.part")
        _LIVE_TEMPORARIES.add(tmp)
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            return tmp
        except FileExistsError:  # another process's (a random collision): try another name
            _LIVE_TEMPORARIES.discard(tmp)
    raise ChromaflowError(f"{parent}: could not create a temporary file for {name}")


def remove_live_temporaries() -> list[str]:
    """Remove this process's temporaries that are still listed (the CLI calls it when a command stops)."""
    listed = list(_LIVE_TEMPORARIES)
    _LIVE_TEMPORARIES.difference_update(listed)
    return _unlink_existing(listed)


# --------------------------------------------------------------------------------------------------
# signals: SIGTERM, SIGINT and SIGHUP end every command alike
# --------------------------------------------------------------------------------------------------
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread by SIGTERM, SIGINT or SIGHUP (:func:`handle_stop_signals`). A KeyboardInterrupt,
    so everything that cleans up after Ctrl-C (temporaries, worker pools, child processes) does so for all three;
    the CLI prints one line naming the signal and exits with 128 + its number."""

    def __init__(self, signum: int, note: str = ""):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.note = note


#: the stop signal this process received (:func:`handle_stop_signals`). Its :class:`Interrupted` can be raised where
#: Python swallows exceptions (a ``__del__`` or weakref callback: "Exception ignored in ...") and the run then goes
#: on, so :func:`atomic_output` checks this before renaming and the CLI before reporting success.
STOPPED: list[int] = []


def raise_if_stopped() -> None:
    """Raise :class:`Interrupted` again if a stop signal arrived (its first exception may have been swallowed)."""
    if STOPPED:
        raise Interrupted(STOPPED[0])


def _unraisable(hook: Callable) -> Callable:
    """``sys.unraisablehook`` that keeps quiet about a swallowed :class:`Interrupted` (:data:`STOPPED` has it)."""
    def quiet(unraisable) -> None:
        if not isinstance(unraisable.exc_value, Interrupted):
            hook(unraisable)
    quiet.chromaflow_quiet = True
    return quiet


def handle_stop_signals(on_stop: Callable[[int], None] | None = None) -> None:
    """Make SIGTERM, SIGINT and SIGHUP raise :class:`Interrupted` in this (main) process, or, with ``on_stop``,
    call ``on_stop(signum)`` instead (``train`` stops at the next batch end, see its StopOnSignal).

    A signal ignored when the process started stays ignored (SIGINT of a background job, SIGHUP under nohup).
    After the first signal the three get their default action back: a second one ends the process at once
    (what the first left is then removed by the next run, see :func:`remove_stale_temporaries`). A process
    forked from this one (a worker pool) does not raise: it takes the signal's default action, as before.
    """
    main_pid = os.getpid()
    handled = [s for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN]

    def on_signal(signum: int, frame: object) -> None:
        for s in handled:
            signal.signal(s, signal.SIG_DFL)
        if os.getpid() != main_pid:
            os.kill(os.getpid(), signum)
        elif on_stop is not None:
            on_stop(signum)
        else:
            STOPPED.append(signum)
            raise Interrupted(signum)

    STOPPED.clear()
    if on_stop is None and not getattr(sys.unraisablehook, "chromaflow_quiet", False):
        sys.unraisablehook = _unraisable(sys.unraisablehook)
    for s in handled:
        signal.signal(s, on_signal)


#: (option, path) pairs; a path may be None (option not given) and an option may name several paths
Named = Iterable[tuple[str, Any]]


def _same_file(a: str, b: str) -> bool:
    """The same file: same inode where both exist (so hard and symbolic links are caught), else same real path."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _given(pairs) -> list[tuple[str, str]]:
    return [(opt, os.fspath(p)) for opt, p in pairs if p is not None and os.fspath(p) != ""]


def check_outputs(outputs: Named, inputs: Named = (), outdirs: Named = ()) -> None:
    """The output rule, called by every command before any work (docs/reliability.md, "The output rule").

    ``outputs``, ``inputs`` and ``outdirs`` are (option, path) pairs; files under an ``outdirs`` folder are
    listed in ``outputs`` too. Refused with one line naming the option and the path: an output that is the
    same file as an input (also through links, and also with ``--force``: nothing is worth losing an input
    for), an output that is the same file as another output, an output that is an existing folder, and an
    output whose folder does not exist (an ``outdirs`` folder excepted: it is created, as MACS3 does, once
    every check has passed). Nothing is written when a check fails. Every output is then taken for this process
    (:func:`lock_output`), so a concurrent run into the same output is refused; the CLI releases them at the end.
    """
    outs, ins, dirs = _given(outputs), _given(inputs), _given(outdirs)
    for opt, d in dirs:
        if os.path.exists(d) and not os.path.isdir(d):
            raise ChromaflowError(f"{opt} {d}: exists and is not a folder")
    made = {os.path.realpath(d) for _, d in dirs}
    for i, (opt, path) in enumerate(outs):
        for in_opt, in_path in ins:
            if _same_file(path, in_path):
                raise ChromaflowError(f"{opt} {path}: is the input {in_opt} {in_path}; an output never overwrites "
                                      "an input (not even with --force)")
        for other_opt, other in outs[:i]:
            if _same_file(path, other):
                raise ChromaflowError(f"{opt} {path}: is the same file as {other_opt} {other}; every output needs "
                                      "its own path")
        if os.path.isdir(path):
            raise ChromaflowError(f"{opt} {path}: is a folder, not a file")
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent) and os.path.realpath(parent) not in made:
            raise ChromaflowError(f"{os.path.dirname(path) or '.'}: output directory does not exist "
                                  f"(for {opt} {path})")
    for _, d in dirs:
        os.makedirs(d, exist_ok=True)
    for _, path in outs:  # held until the command ends (chromaflow.cli.main releases them)
        lock_output(path)


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` through :func:`atomic_output`."""
    with atomic_output(path) as tmp:
        tmp.write_text(text)


def write_texts_atomic(texts: dict[str | os.PathLike, str]) -> None:
    """Write each ``path: text`` through :func:`atomic_outputs`: all the files or none."""
    with atomic_outputs(texts) as tmps:
        for path, tmp in zip(texts, tmps):
            with naming_errors(tmp):
                tmp.write_text(texts[path])


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented, key-sorted JSON through :func:`atomic_output`."""
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def emit_json(obj: Any, path: str | os.PathLike | None) -> None:
    """``obj`` as indented, key-sorted JSON: to ``path`` (atomically) when given, else to stdout (the plan commands)."""
    if path:
        write_json_atomic(path, obj)
    else:
        sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True) + "\n")


# --------------------------------------------------------------------------------------------------
# progress on a terminal, silence elsewhere
# --------------------------------------------------------------------------------------------------
class Progress:
    """A small progress bar on stderr, drawn only when stderr is a terminal.

    In Nextflow task logs (stderr is a file) it prints nothing. ``CHROMAFLOW_PROGRESS=1`` forces it
    on, ``=0`` off. The bar redraws at most ~5 times per second, so it costs nothing in hot loops.
    ``total=None``: the amount is not known ahead (an unsharded ``predict --fasta`` learns its rows as it reads):
    a count and a rate, no bar.
    """

    def __init__(self, total: float | None, desc: str, unit: str = "", enabled: bool | None = None):
        env = os.environ.get("CHROMAFLOW_PROGRESS")
        if enabled is None:
            enabled = env == "1" if env in ("0", "1") else sys.stderr.isatty()
        self.enabled = enabled
        self.known = total is not None
        self.total = max(float(total), 1e-12) if self.known else float("inf")
        self.desc = desc
        self.unit = unit
        self.done = 0.0
        self.t0 = time.perf_counter()
        self._last = 0.0

    def update(self, n: float = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._last < 0.2 and self.done < self.total:
            return
        self._last = now
        rate = self.done / max(now - self.t0, 1e-9)
        if not self.known:
            sys.stderr.write(f"\r{self.desc} {_human(self.done)}{self.unit} {_human(rate)}{self.unit}/s ")
            sys.stderr.flush()
            return
        frac = min(self.done / self.total, 1.0)
        width = 30
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        sys.stderr.write(f"\r{self.desc} [{bar}] {frac * 100:5.1f}% {_human(rate)}{self.unit}/s ")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            self._last = 0.0
            self.update(0)
            sys.stderr.write("\n")
            sys.stderr.flush()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _human(x: float) -> str:
    for unit in ("", "k", "M", "G", "T"):
        if abs(x) < 1000:
            return f"{x:.1f}{unit}"
        x /= 1000.0
    return f"{x:.1f}P"


# --------------------------------------------------------------------------------------------------
# metrics JSON (collected by the BENCHMARK stage)
# --------------------------------------------------------------------------------------------------
def process_age_s() -> float | None:
    """Seconds since this process started (Linux ``/proc``; None elsewhere): the interpreter's start-up and
    imports before any stage code ran."""
    try:
        with open("/proc/self/stat") as fh:
            start_ticks = int(fh.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        return round(max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK")), 3)
    except (OSError, ValueError, IndexError):
        return None


class Phases:
    """Wall seconds of a run's consecutive phases: ``mark(name)`` closes the phase that ran since the last mark
    (or since the object was made) under ``name``; ``as_dict()`` gives them in order."""

    def __init__(self) -> None:
        self._t = time.perf_counter()
        self.seconds: dict[str, float] = {}

    def mark(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = round(self.seconds.get(name, 0.0) + now - self._t, 6)
        self._t = now

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = round(seconds, 6)

    def as_dict(self) -> dict[str, float]:
        return dict(self.seconds)


def peak_rss_bytes() -> int:
    """Peak resident set size of this process and its waited-for children, in bytes (Linux: ru_maxrss is KiB)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return int(max(own, children) * 1024)


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and its waited-for children."""
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


#: environment variable through which whatever launched this command names the task (recorded as ``task_name``)
TASK_NAME_ENV = "CHROMAFLOW_TASK_NAME"


class StageMetrics:
    """Measures one stage run and writes the metrics JSON every stage shares.

    Common fields: ``stage``, ``wall_s``, ``cpu_s``, ``peak_rss_bytes``, ``device``, ``threads``,
    ``started``/``finished`` (UTC ISO), ``host``, ``chromaflow_version``, ``python``, and ``task_name`` where the
    launcher named the task in the environment (:data:`TASK_NAME_ENV`; a report joins its rows to the launcher's
    own records by that name, absent when unset). Stages add their
    counts with :meth:`set` (``bp``, ``subsequences``, ``records``, ``data_wait_fraction``, ...);
    ``bp_per_s`` and ``subsequences_per_s`` are derived from ``wall_s`` when the counts are present.

    Use ``with StageMetrics("fasta2h5", path) as m: ...; m.set(bp=...)``. The JSON is written (atomically)
    only when the block succeeds and ``path`` is not None.
    """

    def __init__(self, stage: str, path: str | os.PathLike | None, **fields: Any):
        self.stage = stage
        self.path = path
        self.fields: dict[str, Any] = {"device": "cpu", "threads": None}
        self.fields.update(fields)

    def set(self, **fields: Any) -> None:
        self.fields.update(fields)

    def __enter__(self) -> "StageMetrics":
        self._t0 = time.perf_counter()
        self._c0 = cpu_seconds()
        self._started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            return
        self.result = self.finish()
        if self.path is not None:
            write_json_atomic(self.path, self.result)

    def finish(self) -> dict[str, Any]:
        wall = time.perf_counter() - self._t0
        out: dict[str, Any] = {
            "stage": self.stage,
            "chromaflow_version": __version__,
            "started": self._started,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "wall_s": round(wall, 6),
            "cpu_s": round(cpu_seconds() - self._c0, 6),
            "peak_rss_bytes": peak_rss_bytes(),
            "host": socket.gethostname(),
            "python": platform.python_version(),
        }
        if os.environ.get(TASK_NAME_ENV):
            out["task_name"] = os.environ[TASK_NAME_ENV]
        out.update(self.fields)
        if out.get("bp") is not None and wall > 0:
            out["bp_per_s"] = out["bp"] / wall
        if out.get("subsequences") is not None and wall > 0:
            out["subsequences_per_s"] = out["subsequences"] / wall
        return out


def open_h5_input(path: str | os.PathLike, what: str = "input h5"):
    """Open an HDF5 file for reading, or raise a one-line :class:`ChromaflowError` naming it.

    Missing path, a directory, and a file HDF5 cannot open (not HDF5, truncated, corrupt) are told apart.
    """
    import h5py

    path = os.fspath(path)
    if not os.path.exists(path):
        raise ChromaflowError(f"{path}: {what} does not exist")
    if not os.path.isfile(path):
        raise ChromaflowError(f"{path}: {what} is not a regular file")
    try:
        return h5py.File(path, "r")
    except OSError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ChromaflowError(f"{path}: not a readable HDF5 file ({first})") from None


def parse_part(text: str | None, option: str) -> tuple[int, int] | None:
    """``"I/N"`` (1-based part I of N, as in ``--shard`` or ``--targets-chunk``) -> (i, n); None -> None.

    Anything else is a one-line :class:`ChromaflowError` naming ``option``.
    """
    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m:
        raise ChromaflowError(f"{option} {text!r}: expected I/N with 1 <= I <= N, e.g. 1/4")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 1 <= i <= n:
        raise ChromaflowError(f"{option} {text!r}: expected I/N with 1 <= I <= N (parts are numbered from 1)")
    return i, n


def part_bounds(i: int, n: int, total: int) -> tuple[int, int]:
    """Items [start, end) of 1-based part i of n over ``total`` items: contiguous, sizes differ by at most one."""
    return (i - 1) * total // n, i * total // n


def shard_list(n: int, total: int) -> list[dict]:
    """The shards of a plan (predict-plan, variant-plan): ``shard`` as ``--shard`` takes it, ``index``/``count`` and
    the [start, end) ``rows`` of each (:func:`part_bounds`)."""
    return [{"shard": f"{i}/{n}", "index": i, "count": n, "rows": list(part_bounds(i, n, total))}
            for i in range(1, n + 1)]


#: the help of --metrics and --force where a command says nothing of its own
METRICS_HELP = "write the stage metrics JSON here"
FORCE_HELP = "overwrite an existing --out"


def add_run_options(p, *, threads: str | None = None, metrics: bool | str = False, force: bool | str = False,
                    threads_default: int | None = 0) -> None:
    """Add ``--threads``, ``--metrics`` and ``--force``, the options the stages share, with one type, default and
    action each (``p``: a parser or an argument group). Only those asked for are added: ``threads`` is its help
    text (what the threads do differs per command; ``threads_default`` None where 0 is refused, as in predict),
    ``metrics`` / ``force`` are True for the common help or a help text of the command's own."""
    if threads is not None:
        p.add_argument("--threads", type=int, default=threads_default, metavar="N", help=threads)
    if metrics:
        p.add_argument("--metrics", default=None, metavar="JSON", help=METRICS_HELP if metrics is True else metrics)
    if force:
        p.add_argument("--force", action="store_true", help=FORCE_HELP if force is True else force)


def resolve_threads(threads: int | None) -> int:
    """Number of worker threads: ``threads`` if > 0, else the CPUs this process may use."""
    if threads and threads > 0:
        return int(threads)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


_MALLOC_TUNED = False


def _libc():
    """The C library (ctypes), for glibc's malloc controls."""
    import ctypes
    import ctypes.util

    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def tune_malloc(single_arena: bool = True) -> bool:
    """Keep large temporary buffers in the heap instead of fresh ``mmap`` s (glibc only; a no-op elsewhere).

    glibc serves blocks above a (dynamic, <= 32 MiB) threshold with ``mmap`` and returns them with ``munmap``;
    every reuse then page-faults the whole block in again (the kernel zeroes each page). Stages that allocate
    the same big temporaries over and over (model activations, read blocks) spend a large share of their time
    in the kernel that way. This raises the mmap threshold to 1 GiB, stops heap trimming and (optionally) puts
    every thread in one arena, so freed blocks are reused without page faults. Memory freed stays in the
    process (RSS keeps its high-water mark). Returns True when the settings were applied.
    """
    global _MALLOC_TUNED
    if _MALLOC_TUNED:
        return True
    try:
        mallopt = _libc().mallopt
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return False
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8
    ok = mallopt(M_MMAP_THRESHOLD, 1 << 30) == 1 and mallopt(M_TRIM_THRESHOLD, (1 << 31) - 1) == 1
    if single_arena:
        ok = mallopt(M_ARENA_MAX, 1) == 1 and ok
    _MALLOC_TUNED = bool(ok)
    return _MALLOC_TUNED


_MALLOC_TRIM = None


def release_free_memory() -> bool:
    """Give the C heap's free pages back to the system (glibc ``malloc_trim(0)``; a no-op elsewhere): memory that
    numpy freed stays in the process when blocks still in use sit above it (fragmentation). Measured on BIGWIG over
    3.5 Gbp of predictions: Python's traced memory level at 147 MB while RSS grew ~16 MB a minute; one call gave back
    73 MB. Returns True when glibc released something."""
    global _MALLOC_TRIM
    if _MALLOC_TRIM is None:
        try:
            _MALLOC_TRIM = _libc().malloc_trim
        except (OSError, AttributeError):  # pragma: no cover - not glibc
            _MALLOC_TRIM = False
    return bool(_MALLOC_TRIM and _MALLOC_TRIM(0))


# --------------------------------------------------------------------------------------------------
# spooling: append-only int64 records that go to an anonymous temporary file past a bound
# --------------------------------------------------------------------------------------------------
class Spill:
    """An anonymous temporary file (unlinked at once: gone whatever happens), opened on first use, that a writer
    appends to while it works and reads back later: the bigWig/bigBed writers' zoom blocks (their place in the file
    is only known once the data is written) and every :class:`Records`. Beside ``path`` (the output it serves), or in
    the temporary folder ($TMPDIR) without one."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else None
        self.fh = None
        self.end = 0          # bytes appended
        self.at_end = True    # the file position is the end (a seek flushes the buffer: only after a read)

    def append(self, data) -> int:
        """Append ``data`` (bytes-like); its offset."""
        if self.fh is None:
            import tempfile

            if self.path is None:
                self.fh = tempfile.TemporaryFile(prefix="chromaflow-spill-")
            else:
                fd, name = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".part", dir=self.path.parent)
                self.fh = os.fdopen(fd, "w+b")
                os.unlink(name)
        if not self.at_end:
            self.fh.seek(self.end)
            self.at_end = True
        off = self.end
        self.end += self.fh.write(data)
        return off

    def read(self, offset: int, size: int) -> bytes:
        self.at_end = False
        self.fh.seek(offset)
        return self.fh.read(size)

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None


class Records:
    """Fixed-width int64 records appended in order, held up to :attr:`HELD` values, then appended to a
    :class:`Spill` in chunks; read back whole (:meth:`to_array`) or one value at a time (:meth:`value`).

    Used where a count grows with the input and only the end needs it all: the block records of the bigWig/bigBed
    indexes (a track that changes at almost every base has ~1.5 M data blocks a file at 4 Gbp, and BIGWIG writes six
    files at once: 40 bytes a data block, 48 a zoom block, ~60 MB a file held; spooled, the memory is one file's
    records, at its close), and a folded peak's summit candidates (width 1: millions in one long peak, only the
    middle one wanted when the peak closes)."""

    #: values held before a chunk goes to the spill file (512 KB); tests set it low
    HELD = 1 << 16

    def __init__(self, width: int, spill: Spill):
        self.width = width
        self.spill = spill
        self.buf = array("q")
        self.chunks: list[tuple[int, int]] = []  # (offset in the spill file, values)
        self.n_spilled = 0

    def extend(self, values) -> None:
        """Append values (an int64-convertible numpy array, or any iterable of ints), ``width`` per record."""
        if hasattr(values, "dtype"):   # numpy: its bytes, not one Python int per value
            import numpy as np

            self.buf.frombytes(np.ascontiguousarray(values, dtype="=i8").tobytes())
        else:
            self.buf.extend(values)
        if len(self.buf) >= self.HELD:
            self.chunks.append((self.spill.append(self.buf), len(self.buf)))
            self.n_spilled += len(self.buf)
            self.buf = array("q")

    def __len__(self) -> int:
        return (self.n_spilled + len(self.buf)) // self.width

    def value(self, i: int) -> int:
        """The ``i``-th value appended (counting every field of every record)."""
        if not 0 <= i < self.n_spilled + len(self.buf):
            raise IndexError(i)
        for off, n in self.chunks:
            if i < n:
                return int.from_bytes(self.spill.read(off + 8 * i, 8), sys.byteorder, signed=True)
            i -= n
        return self.buf[i]

    def arrays(self):
        """The records in order as (k, width) int64 arrays, one spilled chunk (at most :attr:`HELD` values) at a
        time, then those held."""
        import numpy as np

        for off, n in self.chunks:
            yield np.frombuffer(self.spill.read(off, 8 * n), dtype=np.int64).reshape(-1, self.width)
        if len(self.buf):
            yield np.frombuffer(self.buf, dtype=np.int64).reshape(-1, self.width).copy()

    def to_array(self):
        """All records as an (n, width) int64 array, in the order they were added."""
        import numpy as np

        return np.concatenate([*self.arrays(), np.zeros((0, self.width), np.int64)])
