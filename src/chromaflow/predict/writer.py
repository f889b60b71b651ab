"""The predictions writer: a background thread that compresses int64 chunks in a thread pool and writes them
with HDF5 direct chunk writes, in row order."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import h5py
import numpy as np

from ..utils.errors import ChromaflowError
from ..fasta2h5.deflate import byte_compressor

_DONE = object()


class PredictionWriter(threading.Thread):
    """Compresses in a pool (``compress``: bytes -> zlib stream; default zlib level 9 = what HDF5's deflate 9
    writes, Predmoter's bytes) and writes chunks directly, in order.

    Accepts any integer array: each chunk is widened to int64 (the layout's type) in the pool, so the producer
    hands over the small transfer type of a CUDA batch (8x fewer bytes) and never widens on its own thread.
    With ``grow`` the dataset is resized as rows arrive (FASTA route: the row count is known only at the end).
    """

    def __init__(
        self,
        dset: h5py.Dataset,
        row_offset: int,
        pool_threads: int,
        depth: int,
        grow: bool = False,
        compress: Callable[[bytes], bytes | bytearray] | None = None,
    ):
        super().__init__(name="predict-writer", daemon=True)
        self.dset, self.row_offset, self.grow = dset, row_offset, grow
        self.q: queue.Queue = queue.Queue(maxsize=max(1, depth))
        self.pool = ThreadPoolExecutor(max_workers=max(1, pool_threads), thread_name_prefix="predict-zlib")
        self.error: BaseException | None = None
        self.deflate = compress or byte_compressor("zlib", 9)

    #: rows per pool task: one widening + D*ROWS_PER_TASK compressions per task, so the writer thread handles a
    #: future per 16 rows instead of one per chunk (its per-chunk Python work limited a GPU run's host)
    ROWS_PER_TASK = 16

    def _compress_rows(self, rows: np.ndarray) -> list[bytes | bytearray]:
        """(g, L, D) rows of any integer type -> the zlib streams of their int64 chunks, row-major then dataset."""
        cols = np.ascontiguousarray(rows.transpose(0, 2, 1), dtype="<i8")  # (g, D, L): each chunk contiguous
        return [self.deflate(cols[i, j]) for i in range(cols.shape[0]) for j in range(cols.shape[1])]

    def run(self) -> None:
        """The thread's body: write each queued (first row, (n, L, D) array) as compressed int64 chunks (compressed in
        the pool), growing the dataset where asked, until the end marker; an error is kept for :meth:`put` to raise and
        the queue drained."""
        try:
            while True:
                item = self.q.get()
                if item is _DONE:
                    break
                a, arr = item
                n, _, d = arr.shape
                first = a - self.row_offset
                if self.grow and first + n > self.dset.shape[0]:
                    self.dset.resize(max(first + n, 2 * self.dset.shape[0]), axis=0)
                g = self.ROWS_PER_TASK
                futures = [(first + r, self.pool.submit(self._compress_rows, arr[r : r + g])) for r in range(0, n, g)]
                write = self.dset.id.write_direct_chunk
                for row, fut in futures:
                    for k, buf in enumerate(fut.result()):
                        write((row + k // d, 0, k % d), buf, 0)
        except BaseException as exc:  # noqa: BLE001 - re-raised by the producer
            self.error = exc
            with contextlib.suppress(Exception):  # drain so the producer never blocks forever
                while self.q.get(timeout=0.5) is not _DONE:
                    pass
        finally:
            self.pool.shutdown(wait=True)

    def put(self, item) -> float:
        """Queue ``item`` for writing, waiting while the queue is full; returns the seconds waited. Raises the writer's
        error, or ChromaflowError if the thread has stopped."""
        t0 = time.perf_counter()
        while True:
            if self.error is not None:
                raise self.error
            try:
                self.q.put(item, timeout=0.1)
                return time.perf_counter() - t0
            except queue.Full:
                if not self.is_alive():
                    raise self.error or ChromaflowError("prediction writer stopped unexpectedly")

    def finish(self) -> None:
        """No more rows: the thread writes what is queued and ends; returns once it has. A failure of the thread
        is left in :attr:`error` for the producer to raise."""
        with contextlib.suppress(BaseException):
            self.put(_DONE)  # loops until queued or the writer has died
        self.join()
