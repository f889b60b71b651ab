"""Host side of prediction: batches of rows for the model, from a FASTA or from a Helixer genome h5.

No torch here (a reader process imports this module). A batch holds either

* ``codes``: (n, L) uint8 **base codes**, 1 byte per base: the FASTA bytes (any case, IUPAC), 0 = padding, with a
  per-row ``strand`` flag (1 = minus row: the bytes are reversed, the one-hot must be complemented). The one-hot
  is built where the model runs (CUDA or CPU) with :data:`ONEHOT_LUT`, a (512, 4) float32 table: entry ``code``
  for strand 0, ``256 + code`` for strand 1 (columns reversed = complement). Its values are float32 of the exact
  float16 patterns fasta2h5 writes (0.33 is float16(0.33) = 0.330078125), so the model sees the same numbers
  as on the h5 route; or
* ``x``: (n, L, 4) float16 (or float32) one-hot rows as stored in ``data/X`` (the h5 route). Converting them to
  float32 is exact; :func:`x_to_codes` turns standard rows back into codes where that is cheaper to ship.

The FASTA route reads with :class:`chromaflow.genome.fasta.FastaReader` (in this thread, or in a child process so that
parsing runs beside the batcher on another core), cuts rows with :func:`chromaflow.genome.layout.cut` exactly as
fasta2h5 does, and copies them into reusable (optionally pinned) buffers with numpy; no per-base Python.
The h5 route reads compressed chunks directly and inflates them in a thread pool when the dataset has Helixer's
chunking and filters (shuffle + deflate), and falls back to h5py's own reads otherwise.
"""

from __future__ import annotations

import contextlib
import io
import os
import queue
import sys
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterator, cast

import numpy as np

from ..utils.errors import ChromaflowError
from ..genome.fasta import FastaReader, Piece
from ..genome.encoding import LUT16
from ..genome.layout import Job, RecordEnd, cut, rows_into
from .fastachild import HDR as _HDR

_DONE = object()

# --------------------------------------------------------------------------------------------------
# the one-hot table (built on the device from codes)
# --------------------------------------------------------------------------------------------------
#: (512, 4) float32: rows 0..255 byte -> (C, A, T, G); rows 256..511 the complement (columns reversed)
ONEHOT_LUT = np.concatenate(
    [LUT16.view(np.float16).astype(np.float32), LUT16[:, ::-1].copy().view(np.float16).astype(np.float32)]
)

# codes from float16 rows: a multiplicative perfect hash of the 16 valid 8-byte patterns (15 IUPAC + padding)
_HASH_MUL = np.uint64(0x8306BDF37922E4FF)
_PATTERNS = {
    int(v): ch for ch, v in ((ch, np.ascontiguousarray(LUT16[ch]).view("<u8")[0]) for ch in b"ACGTNRYSWKMBDHV")
}
_PATTERNS[0] = 0
_KEY_CODE = np.zeros(256, dtype=np.uint8)
_KEY_PATTERN = np.full(256, 0xFFFFFFFFFFFFFFFF, dtype=np.uint64)  # no valid pattern has all bits set
for _pat, _code in _PATTERNS.items():
    _key = ((_pat * int(_HASH_MUL)) & 0xFFFFFFFFFFFFFFFF) >> 56
    assert _KEY_PATTERN[_key] == 0xFFFFFFFFFFFFFFFF, "hash collision"
    _KEY_CODE[_key], _KEY_PATTERN[_key] = _code, _pat


def x_to_codes(x: np.ndarray) -> np.ndarray | None:
    """(n, L, 4) float16 one-hot rows -> (n, L) uint8 codes (strand 0), or None if any row holds a pattern that
    is not one of fasta2h5's 16 (then only the float rows are exact)."""
    if x.dtype != np.float16:
        return None
    v = np.ascontiguousarray(x).view("<u8").reshape(x.shape[0], x.shape[1])
    with np.errstate(over="ignore"):
        key = (v * _HASH_MUL) >> np.uint64(56)
    key = key.astype(np.uint8)
    if not np.array_equal(_KEY_PATTERN[key], v):
        return None
    return _KEY_CODE[key]


# --------------------------------------------------------------------------------------------------
# batches and reusable buffers
# --------------------------------------------------------------------------------------------------
@dataclass
class Batch:
    """Rows ``row0`` .. ``row0 + n`` of the input for one model call: either base ``codes`` with ``strand`` flags (the
    FASTA route and h5 rows that convert to codes) or one-hot ``x`` (the h5 route), plus the buffer ``slot`` to give
    back, the non-padding ``bp`` where counted, and on the FASTA route the rows' ``seqids`` and ``start_ends``."""

    row0: int  # absolute row index of the first row
    n: int  # rows in this batch
    codes: np.ndarray | None = None  # (>= n, L) uint8; rows [0, n) valid
    strand: np.ndarray | None = None  # (>= n,) uint8; 1 = minus row (complement on encoding)
    x: np.ndarray | None = None  # (n, L, 4) float16/float32 one-hot (h5 route)
    slot: int | None = None  # buffer slot to give back with BufferPool.release
    bp: int | None = None  # non-padding positions (counted where it is cheap)
    seqids: list | None = None  # FASTA route: seqid (bytes) per row
    start_ends: np.ndarray | None = None  # FASTA route: (n, 2) int64


class BufferPool:
    """``slots`` reusable (batch, L) uint8 code buffers + (batch,) strand flags; ``alloc(shape, dtype)`` may return
    pinned memory (the CUDA engine passes one). A slot is handed out by :meth:`acquire` and comes back with
    :meth:`release` once its contents have been consumed (copied to the device)."""

    def __init__(self, slots: int, batch: int, L: int, alloc: Callable | None = None):
        alloc = alloc or (lambda shape, dtype: np.empty(shape, dtype=dtype))
        self.codes = [alloc((batch, L), np.uint8) for _ in range(slots)]
        self.strand = [alloc((batch,), np.uint8) for _ in range(slots)]
        self.free: queue.Queue = queue.Queue()
        for i in range(slots):
            self.free.put(i)

    def acquire(self, stop: threading.Event) -> int | None:
        """A free slot, waiting for one to come back; None once ``stop`` is set."""
        while not stop.is_set():
            try:
                return self.free.get(timeout=0.1)
            except queue.Empty:
                continue
        return None

    def release(self, slot: int | None) -> None:
        """Give ``slot`` back to the pool (None: nothing to give back)."""
        if slot is not None:
            self.free.put(slot)


# --------------------------------------------------------------------------------------------------
# FASTA pieces: in this thread or from a child process (shared-memory ring)
# --------------------------------------------------------------------------------------------------
class ProcessPieces:
    """Iterate FastaReader pieces parsed in a child process (its own interpreter: its own core and GIL).

    The child is a plain ``python -c`` subprocess (no multiprocessing: nothing of the parent's ``__main__`` is
    re-imported, and it works beside threads and CUDA). Pieces come through a pipe (enlarged to 1 MiB where the
    kernel allows); the parent's reads release the GIL.
    """

    def __init__(self, path: str, block: int = 4 << 20):
        import subprocess

        self.path = path
        code = "from chromaflow.predict.fastachild import main; main()"
        self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-c", code, path, str(block)], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, bufsize=0
        )
        self.fd = cast(io.FileIO, self.proc.stdout).fileno()  # stdout=PIPE, bufsize=0: a FileIO
        with contextlib.suppress(OSError, AttributeError):
            import fcntl

            fcntl.fcntl(self.fd, fcntl.F_SETPIPE_SZ, 1 << 20)

    def _read(self, n: int) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        assert self.proc is not None  # read until close()
        while got < n:
            k = cast(io.FileIO, self.proc.stdout).readinto(view[got:])
            if not k:
                code = self.proc.wait()
                raise ChromaflowError(f"{self.path}: FASTA reader process ended early (exit code {code})")
            got += k
        return buf

    def __iter__(self) -> Iterator[Piece]:
        try:
            while True:
                kind, nbytes, nsid, line = _HDR.unpack(self._read(_HDR.size))
                if kind == 2:
                    return
                if kind == 3:
                    raise ChromaflowError(self._read(nbytes).decode("utf-8", "replace"))
                seqid = self._read(nsid).decode("ascii")
                yield Piece(seqid, line, cast(bytes, self._read(nbytes)), kind == 1)  # a bytearray serves as bytes
        finally:
            self.close()

    def close(self) -> None:
        """Stop the child: close its pipe, terminate it if still running and wait for it (up to 5 s); a second call does
        nothing."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        with contextlib.suppress(OSError):
            cast(io.FileIO, proc.stdout).close()
        if proc.poll() is None:
            proc.terminate()
        with contextlib.suppress(Exception):
            proc.wait(timeout=5)


def fasta_pieces(path: str, reader: str = "thread", block: int = 4 << 20):
    """The pieces of the FASTA at ``path``, parsed in this process's thread (``reader`` 'thread') or in a child process
    ('process'), read ``block`` bytes at a time."""
    if reader == "process":
        return iter(ProcessPieces(path, block))
    return FastaReader(path, block_size=block).pieces()


# --------------------------------------------------------------------------------------------------
# feeds: iterate batches
# --------------------------------------------------------------------------------------------------
class FastaFeed:
    """Batches of rows [row_start, row_end) of a FASTA (row_end None = to the end), aligned like the h5 route:
    every batch starts at row_start + m·batch. Rows before row_start are skipped without copying."""

    def __init__(
        self,
        path: str,
        L: int,
        batch: int,
        pool: BufferPool,
        *,
        row_start: int = 0,
        row_end: int | None = None,
        reader: str = "thread",
        block: int = 4 << 20,
    ):
        self.path, self.L, self.batch, self.pool = path, L, batch, pool
        self.row_start, self.row_end = row_start, row_end
        self.reader, self.block = reader, block
        self.records: list[tuple[str, int]] = []  # (seqid, n) of complete records seen
        self.bp = 0
        #: bytes of the file on disk the reader consumed (the thread reader; None for the child process)
        self.streamed: int | None = None if reader == "process" else 0

    def _progress(self, raw_bytes: int) -> None:
        self.streamed = raw_bytes

    def batches(self, stop: threading.Event) -> Iterator[Batch]:
        """The batches of rows [row_start, row_end) of the FASTA, read as it streams by (in a thread or a child process,
        as ``reader`` says), until ``stop`` is set; the records completed are noted in :attr:`records` and :attr:`bp`.
        """
        L = self.L
        seg_rows = max(1, (8 << 20) // L)
        if self.reader == "process":
            pieces = fasta_pieces(self.path, self.reader, self.block)
        else:
            pieces = FastaReader(self.path, block_size=self.block, on_progress=self._progress).pieces()
        try:
            yield from self._fill(cut(pieces, L, seg_rows), stop)
        finally:
            close = getattr(pieces, "close", None)
            if close is not None:
                close()

    def _fill(self, jobs, stop: threading.Event, first_row: int = 0) -> Iterator[Batch]:
        """Batches of the rows [row_start, row_end) of ``jobs`` (the cut's windows and record ends, its first row
        ``first_row``), each filled in a buffer of the pool, until ``stop`` is set; record ends are noted in
        :attr:`records` and :attr:`bp`."""
        B = self.batch
        row = first_row  # absolute index of the next job row
        end = self.row_end
        cur: Batch | None = None
        pos = 0
        for job in jobs:
            if stop.is_set():
                return
            if isinstance(job, RecordEnd):
                self.records.append((job.seqid, job.n))
                self.bp += job.n
                continue
            assert isinstance(job, Job)
            g = job.j1 - job.j0
            lo = max(row, self.row_start)
            hi = row + g if end is None else min(row + g, end)
            sid = job.seqid.encode("ascii")
            while lo < hi:
                if cur is None:
                    cur = self._new_batch(lo, stop)
                    if cur is None:
                        return
                    pos = 0
                take = min(hi - lo, B - pos)
                self._put_rows(cur, pos, job, sid, job.j0 + (lo - row), take)
                pos += take
                lo += take
                cur.n = pos
                if pos == B:
                    cur.start_ends = cast(np.ndarray, cur.start_ends)[:pos]  # a FASTA batch (_new_batch)
                    yield cur
                    cur = None
            row += g
            if end is not None and row >= end:
                break
        if cur is not None and cur.n:
            cur.start_ends = cast(np.ndarray, cur.start_ends)[: cur.n]  # a FASTA batch (_new_batch)
            yield cur

    def _new_batch(self, row0: int, stop: threading.Event) -> Batch | None:
        """An empty FASTA batch starting at row ``row0`` in a free buffer slot of the pool (waiting for one); None once
        ``stop`` is set."""
        slot = self.pool.acquire(stop)
        if slot is None:
            return None
        return Batch(
            row0=row0,
            n=0,
            codes=self.pool.codes[slot],
            strand=self.pool.strand[slot],
            slot=slot,
            seqids=[],
            start_ends=np.empty((self.batch, 2), dtype=np.int64),
        )

    def _put_rows(self, cur: Batch, pos: int, job: Job, sid: bytes, j0: int, take: int) -> None:
        """Copy windows [j0, j0 + take) of ``job`` (record ``sid``) into rows [pos, pos + take) of batch ``cur``:
        their codes and strand flags, seqids and start_ends (reversed on the minus strand)."""
        L = self.L
        # a FASTA batch: built by _new_batch with its codes, strands, seqids and start_ends
        assert cur.codes is not None and cur.strand is not None
        assert cur.seqids is not None and cur.start_ends is not None
        rows_into(cur.codes[pos : pos + take], job.seq, job.base, job.n, L, job.k, job.strand, j0, j0 + take)
        cur.strand[pos : pos + take] = 1 if job.strand < 0 else 0
        idx = np.arange(j0, j0 + take, dtype=np.int64)
        i = idx if job.strand > 0 else job.k - 1 - idx
        s, e = i * L, np.minimum((i + 1) * L, job.n)
        se = cur.start_ends[pos : pos + take]
        if job.strand > 0:
            se[:, 0], se[:, 1] = s, e
        else:
            se[:, 0], se[:, 1] = e, s
        cur.seqids.extend([sid] * take)


class IndexedFastaFeed(FastaFeed):
    """:class:`FastaFeed` of rows [row_start, row_end) read through the FASTA's index
    (:func:`chromaflow.genome.faidx.indexed_jobs`): only the shard's own records and windows are read, from their
    bytes on; the same batches as the streaming feed."""

    row_end: int  # always given here

    def __init__(self, index, L: int, batch: int, pool: BufferPool, *, row_start: int, row_end: int):
        from ..genome.faidx import ReadStats

        super().__init__(index.fasta, L, batch, pool, row_start=row_start, row_end=row_end, reader="index")
        self.index = index
        self.read = ReadStats()

    def batches(self, stop: threading.Event) -> Iterator[Batch]:
        """The batches of rows [row_start, row_end), their records and windows read through the FASTA's index."""
        from ..genome.faidx import indexed_jobs

        jobs = indexed_jobs(self.index, self.L, self.row_start, self.row_end, self.read)
        yield from self._fill(jobs, stop, first_row=self.row_start)


def _h5_filters(X) -> list[int]:
    dcpl = X.id.get_create_plist()
    return [dcpl.get_filter(i)[0] for i in range(dcpl.get_nfilters())]


class H5Feed:
    """Batches of rows [row_start, row_end) of ``data/X`` as float rows (``mode='x'``) or codes (``mode='codes'``,
    falling back to float rows for a batch with non-standard values).

    With Helixer's chunking (1, L, 4), float16 and filters shuffle+deflate (or a subset), chunks are read raw and
    inflated in a pool of ``threads`` (zlib releases the GIL); otherwise h5py reads the rows itself.
    """

    SHUFFLE, DEFLATE = 2, 1

    def __init__(self, X, path: str, batch: int, *, row_start: int, row_end: int, threads: int = 1, mode: str = "x"):
        self.X, self.path, self.batch = X, path, batch
        self.row_start, self.row_end, self.mode = row_start, row_end, mode
        self.L = int(X.shape[1])
        filters = _h5_filters(X)
        self.shuffle = filters[:1] == [self.SHUFFLE]
        rest = filters[1:] if self.shuffle else filters
        self.deflate = rest == [self.DEFLATE]
        self.direct = X.chunks == (1, self.L, 4) and X.dtype == np.dtype("<f2") and (self.deflate or not rest)
        self.pool = (
            ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="predict-inflate")
            if self.direct and threads > 1
            else None
        )
        try:
            from isal import isal_zlib

            self._inflate = isal_zlib.decompress
        except ImportError:  # pragma: no cover - isal is a pinned dependency
            self._inflate = zlib.decompress

    def close(self) -> None:
        """Shut down the inflating pool, if there is one."""
        if self.pool is not None:
            self.pool.shutdown(wait=True)

    def _err(self, a: int, b: int, exc: BaseException) -> ChromaflowError:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return ChromaflowError(f"{self.path}: cannot read data/X rows {a}-{b - 1} (corrupt or truncated file: {first})")

    def _decode(self, raw: bytes, out: np.ndarray) -> None:
        data = self._inflate(raw) if self.deflate else raw
        if len(data) != self.L * 8:
            raise ValueError(f"chunk inflates to {len(data)} bytes, expected {self.L * 8}")
        if self.shuffle:  # HDF5's shuffle stored all low bytes, then all high bytes: rebuild the uint16 values
            planes = np.frombuffer(data, dtype=np.uint8).reshape(2, self.L * 4)
            dst = out.view(np.uint16).reshape(self.L * 4)
            np.left_shift(planes[1], 8, out=dst, dtype=np.uint16)
            np.bitwise_or(dst, planes[0], out=dst)
        else:
            out.view(np.uint8).reshape(-1)[:] = np.frombuffer(data, dtype=np.uint8)

    def read_rows(self, a: int, b: int) -> np.ndarray:
        """Rows [a, b) of ``data/X`` as an array of (b - a, L, 4): raw chunks inflated here (in the pool where there is
        one) when the layout allows, else read by h5py (also when a chunk is unallocated or filtered otherwise);
        ChromaflowError for unreadable data."""
        X = self.X
        if self.direct:
            out = np.empty((b - a, self.L, 4), dtype=np.float16)
            try:
                raws = []
                for r in range(a, b):
                    mask, raw = X.id.read_direct_chunk((r, 0, 0))
                    if mask:
                        raise KeyError("filter mask")
                    raws.append(raw)
            except (KeyError, OSError, RuntimeError, ValueError):
                raws = None  # unallocated or partially filtered chunk: let HDF5 do it
            if raws is not None:
                try:
                    if self.pool is None:
                        for i, raw in enumerate(raws):
                            self._decode(raw, out[i])
                    else:
                        for f in [self.pool.submit(self._decode, raw, out[i]) for i, raw in enumerate(raws)]:
                            f.result()
                    return out
                except Exception as exc:  # noqa: BLE001 - zlib.error, isal's IsalError, wrong sizes: bad data
                    raise self._err(a, b, exc) from None
        try:
            return X[a:b]
        except (OSError, ValueError, RuntimeError) as exc:
            raise self._err(a, b, exc) from None

    def check_finite(self, x: np.ndarray, a: int) -> None:
        """Raise ChromaflowError naming the first row (``a`` + its index in ``x``) and position holding NaN or Inf."""
        # on the bits: all exponent bits set = Inf or NaN (numpy's float16 isfinite is emulated and ~4x slower)
        if x.dtype.itemsize == 2:
            bits, mask = x.view(np.uint16), np.uint16(0x7C00)
        else:
            bits, mask = x.view(np.uint32), np.uint32(0x7F800000)
        if bits.max() < mask:  # one pass without temporaries: every value finite and >= +0 (one-hot rows)
            return
        if ((bits & mask) == mask).any():
            bad = np.argwhere(~np.isfinite(x))[0]
            raise ChromaflowError(
                f"{self.path}: data/X row {a + int(bad[0])} position {int(bad[1])} holds "
                f"{x[tuple(bad)]!r}, not a one-hot value (NaN/Inf)"
            )

    def batches(self, stop: threading.Event) -> Iterator[Batch]:
        """The batches of rows [row_start, row_end) of ``data/X``, ``batch`` rows each, until ``stop`` is set: as codes
        in mode 'codes' (where every value converts), else as float rows with their bp counted; NaN/Inf raise
        ChromaflowError."""
        for a in range(self.row_start, self.row_end, self.batch):
            if stop.is_set():
                return
            b = min(a + self.batch, self.row_end)
            x = self.read_rows(a, b)
            self.check_finite(x, a)
            if self.mode == "codes":
                codes = x_to_codes(x)
                if codes is not None:
                    yield Batch(row0=a, n=b - a, codes=codes, strand=np.zeros(b - a, dtype=np.uint8))
                    continue
            yield Batch(row0=a, n=b - a, x=x, bp=count_bp(x))


def count_bp(x: np.ndarray) -> int:
    """Non-padding positions of (n, L, 4) one-hot rows: positions whose four values are not all zero (on the bits;
    for fasta2h5/Helixer rows the same as ``max > 0``)."""
    if x.dtype.itemsize == 2:
        return int(np.count_nonzero(np.ascontiguousarray(x).view(np.uint64)))
    return int(np.count_nonzero(np.ascontiguousarray(x).view(np.uint64).reshape(x.shape[0], x.shape[1], 2).any(axis=2)))


class Prefetcher(threading.Thread):
    """Runs ``feed.batches(stop)`` in a background thread into a bounded queue (``depth`` batches)."""

    def __init__(self, feed, depth: int):
        super().__init__(name="predict-feed", daemon=True)
        self.feed = feed
        self.q: queue.Queue = queue.Queue(maxsize=max(1, depth))
        self.stop = threading.Event()

    def _put(self, item) -> bool:
        while not self.stop.is_set():
            try:
                self.q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run(self) -> None:
        """The thread's body: put the feed's batches into the queue, then the end marker; an error is put there for
        :meth:`get` to raise. Returns early once stopped."""
        try:
            for b in self.feed.batches(self.stop):
                if not self._put(b):
                    return
            self._put(_DONE)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            self._put(exc)

    def get(self):
        """Next batch, None at the end; re-raises the feed's error."""
        item = self.q.get()
        if item is _DONE:
            return None
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        """Stop the thread and wait for it (up to 10 s)."""
        self.stop.set()
        self.join(timeout=10)


def cpu_count() -> int:
    """CPUs this process may run on (its affinity mask where the platform has one, else the CPU count); at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover
        return max(1, os.cpu_count() or 1)
