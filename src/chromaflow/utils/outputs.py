"""Outputs that are complete or absent: atomic renames, per-output locks, temporaries a kill leaves, the output
rule every command checks before any work (:func:`check_outputs`, docs/reliability.md), the one rule for file names
built from data (:func:`safe_name`) and the one compression rule for tables (:func:`wants_gzip`)."""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import hashlib
import json
import os
import re
import secrets
import socket
import sys
import unicodedata
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Mapping, Protocol, TypeVar, cast

from .errors import ChromaflowError, OutputBusyError, OutputExistsError
from .signals import raise_if_stopped


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
def atomic_output(
    path: str | os.PathLike, *, force: bool = True, suffix: str = "", mode: int = 0o644
) -> Iterator[Path]:
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
            raise OutputBusyError(
                f"{path}: is being written by another chromaflow process (pid {holder}); wait "
                "for it to end or write elsewhere"
            ) from None
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
                raise ChromaflowError(
                    f"{opt} {path}: is the input {in_opt} {in_path}; an output never overwrites "
                    "an input (not even with --force)"
                )
        for other_opt, other in outs[:i]:
            if _same_file(path, other):
                raise ChromaflowError(
                    f"{opt} {path}: is the same file as {other_opt} {other}; every output needs its own path"
                )
        if os.path.isdir(path):
            raise ChromaflowError(f"{opt} {path}: is a folder, not a file")
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent) and os.path.realpath(parent) not in made:
            raise ChromaflowError(f"{os.path.dirname(path) or '.'}: output directory does not exist (for {opt} {path})")
    for _, d in dirs:
        os.makedirs(d, exist_ok=True)
    for _, path in outs:  # held until the command ends (chromaflow.cli.main releases them)
        lock_output(path)


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` through :func:`atomic_output`."""
    with atomic_output(path) as tmp:
        tmp.write_text(text)


_PathT = TypeVar("_PathT", bound="str | os.PathLike")


def write_texts_atomic(texts: Mapping[_PathT, str]) -> None:
    """Write each ``path: text`` through :func:`atomic_outputs`: all the files or none."""
    with atomic_outputs(texts) as tmps:
        for path, tmp in zip(texts, tmps):
            assert tmp is not None  # a temporary for every (not None) path
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
# file names built from data, and the compression of tables
# --------------------------------------------------------------------------------------------------
#: the most bytes of an output file name built from data (:func:`safe_name`): the file system allows 255, and the
#: temporary beside it (``.<name>.<host>-<pid>.<random>[suffix].part``, :func:`atomic_output`) adds up to 34
NAME_MAX_BYTES = 200
#: escapes a byte in a safe name: ``~`` and two upper-case hex digits (``/`` -> ``~2F``); ``~~`` starts the hash
#: of a shortened name. Not ``%``: IGV reads the paths of a session as URL-encoded and would undo ``%2F``
ESCAPE = "~"
#: Unicode categories escaped in a safe name: control characters, lone surrogates (undecodable bytes), line and
#: paragraph separators (``str.splitlines`` breaks lines at them)
_ESCAPED_CATEGORIES = ("Cc", "Cs", "Zl", "Zp")
_HASH_HEX = 12  # hex digits of the hash that ends a shortened name


def _escape_char(ch: str) -> str:
    """``ch`` as ``~XX`` per byte (UTF-8; a lone surrogate of an undecodable byte: that byte)."""
    raw = ch.encode("utf-8", "surrogateescape") if "\udc80" <= ch <= "\udcff" else ch.encode("utf-8", "surrogatepass")
    return "".join(f"{ESCAPE}{b:02X}" for b in raw)


def safe_name(text: str, what: str, max_bytes: int = NAME_MAX_BYTES) -> str:
    """``text`` (a seqid, dataset name, gene id, ...) made safe to stand in an output file name, so no output lands
    outside its folder whatever the data holds; the one rule for every name built from data (docs/output.md,
    "File names built from data").

    Parameters
    ----------
    text : str
        The name as the data gives it.
    what : str
        What the name is, for the error of an empty one (e.g. ``"g.fa: FASTA record ''"``).
    max_bytes : int
        The most UTF-8 bytes of the result (at least 32): :data:`NAME_MAX_BYTES` for a whole file name, less for a
        part of one.

    Returns
    -------
    str
        ``text`` where it is safe as it is (most names); else ``text`` with each ``/``, ``~``, control character
        (C0, DEL, C1; also tab), line or paragraph separator and undecodable byte written as ``~`` and two hex digits
        per UTF-8 byte (``chrA/1`` -> ``chrA~2F1``), and a leading ``.`` as ``~2E`` (never ``.``, ``..`` or a hidden
        file). Other Unicode is kept as it is, not normalised, so distinct names stay distinct (the escaping is
        reversible). A result longer than ``max_bytes`` is cut at a character and ends in ``~~`` and 12 hex digits of
        the SHA-256 of ``text``: distinct long names stay distinct.

    Raises
    ------
    ChromaflowError
        ``text`` is empty (``"<what>: an empty name cannot name an output file"``).
    """
    if not text:
        raise ChromaflowError(f"{what}: an empty name cannot name an output file")
    if max_bytes < 32:
        raise ValueError(f"max_bytes must be >= 32, got {max_bytes}")
    parts = [
        _escape_char(ch)
        if ch in "/" + ESCAPE or unicodedata.category(ch) in _ESCAPED_CATEGORIES or (i == 0 and ch == ".")
        else ch
        for i, ch in enumerate(text)
    ]
    name = "".join(parts)
    if len(name.encode()) <= max_bytes:
        return name
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_HEX]
    room, kept = max_bytes - 2 - _HASH_HEX, []
    for part in parts:  # whole characters and whole escapes only
        room -= len(part.encode())
        if room < 0:
            break
        kept.append(part)
    return "".join(kept) + ESCAPE * 2 + digest


def wants_gzip(path: str | os.PathLike) -> bool:
    """The one compression rule for the tables a command writes: gzip when the output's name ends in ``.gz`` (any
    case), plain text otherwise (docs/output.md, "Compressed or plain")."""
    return os.fspath(path).lower().endswith(".gz")


class TextSink(Protocol):
    """Where :func:`open_table` writes: text in, as a file's ``write``."""

    def write(self, text: str) -> int:
        """Write ``text``; the number of characters written."""
        ...


class _EncodedInto:
    """Text written UTF-8 encoded into the binary stream ``raw``; no ``flush``: a flush of a ``GzipFile`` ends a
    deflate block (Z_SYNC_FLUSH), so the bytes would depend on how the text was written."""

    def __init__(self, raw: IO[bytes]):
        self.raw = raw

    def write(self, text: str) -> int:
        """Writes ``text`` UTF-8 encoded; returns its length in characters (as ``TextIO.write`` does)."""
        self.raw.write(text.encode("utf-8"))
        return len(text)


@contextlib.contextmanager
def open_table(tmp: str | os.PathLike, path: str | os.PathLike, level: int = 9) -> Iterator[TextSink]:
    """A text stream into ``tmp``, the temporary of the table ``path``: gzip (deflate ``level``, no file name, time
    stamp 0: the same text gives the same bytes, however it is cut into writes) when :func:`wants_gzip` says so for
    ``path``, else plain UTF-8; lines end in ``\\n`` as written."""
    if not wants_gzip(path):
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            yield fh
        return
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=level) as gz:
        yield _EncodedInto(cast(IO[bytes], gz))


def write_table_text(tmp: str | os.PathLike, path: str | os.PathLike, text: str, level: int = 9) -> None:
    """Write the table ``text`` into ``tmp``, the temporary of ``path``, compressed or not by :func:`wants_gzip`
    (:func:`open_table`; errors name ``path``)."""
    with naming_errors(path), open_table(tmp, path, level) as fh:
        fh.write(text)
