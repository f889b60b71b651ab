"""The tracks peaks are called on, as merged runs per chromosome: a predictions h5 dataset through the bigwig
stage's reader and conversion (strand average, optional smoothing: exactly the track ``chromaflow bigwig`` writes),
or the intervals of a bigWig (pyBigWig), gaps filled with 0."""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import cast

import numpy as np

from ..bigwig.convert import Track, convert
from ..bigwig.tracks import int_floor
from ..bigwig.h5input import ChunkReader, PredictionsInput
from ..utils.errors import ChromaflowError
from ..utils.progress import Progress
from .call import Peaks, PeakStream, merge_runs


#: first 4 bytes of a bigWig (UCSC bbiFile.h bigWigSig), in the byte order of the writer
BIGWIG_MAGIC = 0x888FFC26


class _Collect:
    """A track writer that keeps the intervals in memory (a chromosome's runs arrive in order, in pieces)."""

    def __init__(self):
        self.parts: dict[str, list] = {}
        self.count = 0

    def write(self, chrom, starts, ends, vals) -> None:
        """Keep a copy of a piece of ``chrom``'s runs (``starts``, ``ends`` as int64, ``vals`` as float32)."""
        self.parts.setdefault(chrom, []).append(
            (
                np.asarray(starts, np.int64).copy(),
                np.asarray(ends, np.int64).copy(),
                np.asarray(vals, np.float32).copy(),
            )
        )
        self.count += len(starts)

    def close(self) -> None:
        """Nothing to close: the runs stay in memory."""
        pass

    def abort(self) -> None:
        """Nothing to give up: the runs stay in memory."""
        pass

    def runs(self, chroms: list[tuple[str, int]]) -> dict[str, tuple]:
        """{chrom: :func:`merge_runs` of its collected runs up to its size} for every (name, size) in ``chroms``; a
        chromosome without data is 0 throughout."""
        out = {}
        for name, size in chroms:
            parts = self.parts.get(name, [])
            if parts:
                s, e, v = (np.concatenate(x) for x in zip(*parts))
            else:
                s = e = np.zeros(0, np.int64)
                v = np.zeros(0, np.float32)
            out[name] = merge_runs(s, e, v, size)
        return out


class _Stream:
    """A track writer that calls peaks as the runs arrive (:class:`PeakStream`, one chromosome at a time): no
    chromosome's runs are held whole."""

    def __init__(self, chroms: list[tuple[str, int]], cutoff: float, min_length: int, max_gap: int):
        self.sizes = dict(chroms)
        self.args = (cutoff, min_length, max_gap)
        self.peaks: dict = {}
        self.runs = 0
        self.chrom: str | None = None
        self.stream: PeakStream | None = None

    def write(self, chrom, starts, ends, vals) -> None:
        """Feed a piece of ``chrom``'s runs to its :class:`PeakStream`; a new chromosome finishes the previous one's
        peaks first."""
        if chrom != self.chrom:
            self._finish()
            self.chrom, self.stream = chrom, PeakStream(*self.args, merged=True)  # the converter's runs
        assert self.stream is not None  # opened with self.chrom
        self.stream.add(starts, ends, vals)

    def _finish(self) -> None:
        if self.chrom is not None:
            assert self.stream is not None  # opened with self.chrom
            self.peaks[self.chrom] = self.stream.finish(self.sizes[self.chrom])
            self.runs += self.stream.runs
            self.chrom = self.stream = None

    def result(self, chroms: list[tuple[str, int]]) -> tuple[dict, int]:
        """{chrom: Peaks} of every chromosome (one without data is 0 throughout: no peak) and the merged runs."""
        self._finish()
        for name, size in chroms:
            if name not in self.peaks:
                st = PeakStream(*self.args)
                self.peaks[name] = st.finish(size)
                self.runs += st.runs
        return self.peaks, self.runs

    def close(self) -> None:
        """Nothing to close: the peaks are taken with :meth:`result`."""
        pass

    def abort(self) -> None:
        """Nothing to give up: the peaks are held in memory."""
        pass


def h5_dataset(path: str, dataset: str | None, *, experimental: bool = False) -> str:
    """The dataset peaks are called on: ``dataset`` (checked when the file is read), or the predictions h5's only one
    (the file opened once more only then)."""
    if dataset is not None:
        return dataset
    inp = PredictionsInput(path, experimental=experimental)
    try:
        if len(inp.datasets) != 1:
            raise ChromaflowError(f"{path}: holds datasets {' '.join(inp.datasets)}; choose one with --dataset")
        return inp.datasets[0]
    finally:
        inp.close()


def _read_h5(
    path: str,
    dataset: str,
    make_writer,
    *,
    strand: str,
    window: int | None,
    experimental: bool,
    threads: int,
    what: str,
):
    """Runs of one dataset of a predictions h5 into the writer ``make_writer(chroms)`` returns: (chroms, writer)."""
    inp = PredictionsInput(path, experimental=experimental, datasets=[dataset])
    try:
        chroms = [(c.name, c.size) for c in inp.chroms]
        writer = make_writer(chroms)
        track = Track(dataset, 0, strand, Path(path), writer=writer)
        pool = ThreadPoolExecutor(threads, thread_name_prefix="peaks") if threads > 1 else None
        try:
            total = sum(c.size for c in inp.chroms)
            with Progress(total, f"peaks: reading {what}", "bp") as prog:
                convert(inp, [track], window=window, smoothing="exact", clip=True, pool=pool, prog=prog)
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
        return chroms, writer
    finally:
        inp.close()


def h5_track(
    path: str,
    dataset: str | None,
    *,
    strand: str = "avg",
    window: int | None = None,
    experimental: bool = False,
    threads: int = 1,
    what: str = "--predictions",
):
    """(chroms [(name, size)], {chrom: merged runs}, dataset) of one dataset of a predictions h5 (or, with
    ``experimental``, the measured evaluation/<dataset>_coverage of a genome h5). Holds the whole track: for
    ``--cutoff auto``'s table of cutoffs; :func:`h5_peaks` when the cutoff is known."""
    dataset = h5_dataset(path, dataset, experimental=experimental)
    chroms, col = _read_h5(
        path,
        dataset,
        lambda chroms: _Collect(),
        strand=strand,
        window=window,
        experimental=experimental,
        threads=threads,
        what=what,
    )
    return chroms, col.runs(chroms), dataset


class _PeakKernel:
    """One chromosome at a time, the C peak caller (``bigwig/_kernels.c`` cf_peaks_*): fed the int32 strands of each
    piece in order, it keeps the last run open across pieces and the open peak, and returns the chromosome's
    :class:`~chromaflow.peaks.call.Peaks` and merged-run count when finished."""

    def __init__(self, lib, cutoff: float, min_length: int, max_gap: int):
        self.lib = lib
        self.state = lib.cf_peaks_new(int_floor(cutoff), min_length, max_gap)
        if not self.state:
            raise MemoryError("cf_peaks_new")

    def feed(self, x: np.ndarray, m: np.ndarray | None) -> None:
        """The next positions of the chromosome: strand ``x`` (int32) or the average of ``x`` and ``m``."""
        x = np.ascontiguousarray(x)
        m = None if m is None else np.ascontiguousarray(m)
        mp = None if m is None else m.ctypes.data
        if self.lib.cf_peaks_feed(self.state, x.ctypes.data, mp, len(x)):
            raise MemoryError("cf_peaks_feed")

    def finish(self, size: int) -> tuple[Peaks, int]:
        """The chromosome's peaks and merged runs (its track ends at ``size``); the state is ready for the next."""
        k = self.lib.cf_peaks_finish(self.state, size)
        if k < 0:
            raise MemoryError("cf_peaks_finish")
        st, en, su = (np.empty(k, np.int64) for _ in range(3))
        val = np.empty(k, np.float32)
        runs = np.zeros(1, np.int64)
        self.lib.cf_peaks_take(
            self.state, st.ctypes.data, en.ctypes.data, su.ctypes.data, val.ctypes.data, runs.ctypes.data
        )
        return Peaks(st, en, su, val), int(runs[0])

    def close(self) -> None:
        """Free the C state."""
        if self.state:
            self.lib.cf_peaks_free(self.state)
            self.state = None


def _native_h5_peaks(path, dataset, cutoff, min_length, max_gap, *, strand, threads):
    """:func:`h5_peaks` of an unsmoothed track in C (``_PeakKernel``), the next piece read while the C caller works
    on this one: (chroms, {chrom: Peaks}, merged runs), or None where the C kernels are not built or a piece is
    outside the exact integer path (values >= 2^23: Predmoter's float32 arithmetic, in the general path)."""
    from ..bigwig import _native
    from ..bigwig.convert import BLOCK_BP, PIECE_CHUNKS

    lib = _native.load()
    if lib is None:
        return None
    inp = PredictionsInput(path, datasets=[dataset])
    kernel = _PeakKernel(lib, cutoff, min_length, max_gap)
    pool = ThreadPoolExecutor(threads, thread_name_prefix="peaks") if threads > 1 else None
    reader = None
    try:
        reader = ChunkReader(inp, pool, min(max(1, BLOCK_BP // inp.L), PIECE_CHUNKS))
        with Progress(sum(c.size for c in inp.chroms), "peaks: reading --predictions", "bp") as prog:
            return _call_streamed(inp, reader, kernel, strand, prog)
    finally:
        if reader is not None:
            reader.close()
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        kernel.close()
        inp.close()


def _call_streamed(inp: PredictionsInput, reader: ChunkReader, kernel: _PeakKernel, strand: str, prog: Progress):
    """The pieces of ``inp`` read (prefetch thread) and fed to ``kernel`` in order, chromosome by chromosome:
    (chroms, {chrom: Peaks}, merged runs), or None at the first piece outside the exact integer path."""
    from ..bigwig.convert import BLOCK_BP, PIECE_CHUNKS, check_size, pieces, strand_arrays

    n_block = max(1, BLOCK_BP // inp.L)
    need = {0: (strand in ("avg", "+"), strand in ("avg", "-"))}
    peaks: dict[str, Peaks] = {}
    runs, cur, offset = 0, None, 0

    def load(desc):
        """The Piece of one piece ``desc`` (chrom, j, e, ...: bigwig.convert.pieces)."""
        chrom, j, e = desc[:3]
        return reader.load(chrom.plus[j:e], chrom.minus[j:e], need)[0]

    def finish(chrom, offset: int) -> int:
        check_size(inp.path, chrom, offset)
        peaks[chrom.name], n = kernel.finish(chrom.size)
        return n

    prefetch = ThreadPoolExecutor(1, thread_name_prefix="peaks-read")
    try:
        it = pieces(inp.chroms, n_block, min(n_block, PIECE_CHUNKS))
        nxt = next(it, None)
        fut = prefetch.submit(load, nxt) if nxt is not None else None
        while nxt is not None:
            chrom, piece = nxt[0], cast(Future, fut).result()
            nxt = next(it, None)
            fut = prefetch.submit(load, nxt) if nxt is not None else None
            if chrom is not cur:
                runs += finish(cur, offset) if cur is not None else 0
                cur, offset = chrom, 0
            try:
                if not piece.exact:
                    return None
                x, m = strand_arrays(piece, strand)
                kernel.feed(x, m)
            except ChromaflowError as exc:
                raise ChromaflowError(f"{inp.path}: seqid {chrom.name!r}: {exc}") from None
            finally:
                piece.release()
            offset += len(x)
            prog.update(len(x))
    finally:
        prefetch.shutdown(wait=True, cancel_futures=True)
    runs += finish(cur, offset) if cur is not None else 0
    for c in inp.chroms:  # a seqid without rows (malformed) covers nothing; one without data is 0 throughout
        if len(c.plus) == 0:
            runs += finish(c, 0)
    chroms = [(c.name, c.size) for c in inp.chroms]
    return chroms, peaks, runs


def h5_peaks(
    path: str,
    dataset: str,
    cutoff: float,
    min_length: int,
    max_gap: int,
    *,
    strand: str = "avg",
    window: int | None = None,
    threads: int = 1,
):
    """(chroms, {chrom: Peaks}, merged runs) of one dataset of a predictions h5 at a known cutoff, streamed: in C
    for an unsmoothed track (:func:`_native_h5_peaks`), else through the bigwig converter into
    :class:`PeakStream` (smoothed tracks, values past 2^23, no C compiler, ``CHROMAFLOW_PEAKS_KERNEL=0``)."""
    if window is None and os.environ.get("CHROMAFLOW_PEAKS_KERNEL", "1") != "0":
        got = _native_h5_peaks(path, dataset, cutoff, min_length, max_gap, strand=strand, threads=threads)
        if got is not None:
            return got
    chroms, st = _read_h5(
        path,
        dataset,
        lambda chroms: _Stream(chroms, cutoff, min_length, max_gap),
        strand=strand,
        window=window,
        experimental=False,
        threads=threads,
        what="--predictions",
    )
    peaks, runs = st.result(chroms)
    return chroms, peaks, runs


#: bp of a bigWig chromosome read at a time (pyBigWig returns a window's intervals as Python tuples)
BIGWIG_WINDOW = 8 << 20


def _open_bigwig(path: str):
    import os

    import pyBigWig

    if not os.path.isfile(path):
        raise ChromaflowError(f"{path}: bigWig does not exist or is not a file")
    with open(path, "rb") as fh:  # libBigWig prints its own lines on stderr for a non-bigWig: check the magic first
        magic = fh.read(4)
    if magic not in (BIGWIG_MAGIC.to_bytes(4, "little"), BIGWIG_MAGIC.to_bytes(4, "big")):
        raise ChromaflowError(f"{path}: not a bigWig file (no bigWig signature)")
    try:
        bw = pyBigWig.open(path)
    except RuntimeError:
        bw = None
    if bw is None or not bw.isBigWig():
        raise ChromaflowError(f"{path}: not a readable bigWig file")
    return bw


def _bigwig_pieces(bw, path: str, name: str, size: int):
    """(starts, ends, values) of one chromosome, window by window (an interval across a window's start was
    returned with the window before); NaN/inf values refused naming the chromosome."""
    for a in range(0, size, BIGWIG_WINDOW):
        iv = bw.intervals(name, a, min(a + BIGWIG_WINDOW, size)) or ()
        x = np.array(iv, dtype=np.float64).reshape(-1, 3)
        if a:
            x = x[x[:, 0] >= a]
        if len(x) and not np.isfinite(x[:, 2]).all():
            raise ChromaflowError(f"{path}: chromosome {name!r} holds NaN or infinite values")
        yield x[:, 0].astype(np.int64), x[:, 1].astype(np.int64), x[:, 2]


def bigwig_track(path: str):
    """(chroms, {chrom: merged runs}) of a bigWig, in its chromosome order; regions without data are 0."""
    bw = _open_bigwig(path)
    try:
        chroms = list(bw.chroms().items())
        out = {}
        for name, size in chroms:
            pieces = list(_bigwig_pieces(bw, path, name, size)) or [(np.zeros(0, np.int64),) * 2 + (np.zeros(0),)]
            s, e, v = (np.concatenate(x) for x in zip(*pieces))
            try:
                out[name] = merge_runs(s, e, v, size)
            except ValueError as exc:
                raise ChromaflowError(f"{path}: chromosome {name!r}: {exc}") from None
        return chroms, out
    finally:
        bw.close()


def bigwig_peaks(path: str, cutoff: float, min_length: int, max_gap: int):
    """(chroms, {chrom: Peaks}, merged runs) of a bigWig at a known cutoff, a window at a time."""
    bw = _open_bigwig(path)
    try:
        chroms = list(bw.chroms().items())
        peaks, runs = {}, 0
        for name, size in chroms:
            st = PeakStream(cutoff, min_length, max_gap)
            try:
                for piece in _bigwig_pieces(bw, path, name, size):
                    st.add(*piece)
                peaks[name] = st.finish(size)
            except ValueError as exc:
                raise ChromaflowError(f"{path}: chromosome {name!r}: {exc}") from None
            runs += st.runs
        return chroms, peaks, runs
    finally:
        bw.close()
