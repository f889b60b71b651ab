"""The conversion loop: pieces of chunks → track vectors → runs → writers (FORMATS.md §5.3–5.5).

Each chromosome is processed in pieces that never cross one of Predmoter's blocks (21,384,000 // L chunks):
128 chunks (2.7 Mbp per strand) for unsmoothed tracks, a whole block for smoothed ones (smoothing is per
block). Every chunk is read once per call, for all datasets and strands. While one piece's tracks are
computed and written, the next piece is read (a prefetch thread fanning out to the pool). All O(bp) work runs
in numpy (or libdeflate / the C formatter) in pool threads; the main thread touches O(intervals) data only.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from ..utils.errors import ChromaflowError
from ..native.memory import release_free_memory
from ..utils.outputs import naming_errors
from ..utils.progress import Progress
from .h5input import POOL_MIN_BP, Chrom, ChunkReader, Piece, PredictionsInput
from .tracks import SmoothStream, TrackState, runs, runs_native, smooth_numpy, strand_average, strand_average_f32

#: Predmoter's conversion block: 21,384,000 // L chunks (FORMATS §5.3)
BLOCK_BP = 21_384_000
#: unsmoothed tracks are streamed in pieces of at most this many chunks (the result does not depend on it)
PIECE_CHUNKS = 128


@dataclass
class Track:
    """One output track: the ``dataset`` and ``channel`` (index into the input's chosen datasets) it comes from, its
    ``strand`` ('avg', '+' or '-'), its output ``path``, the ``writer`` that writes it and its streaming
    :class:`TrackState`."""

    dataset: str
    channel: int  # index into the input's chosen datasets
    strand: str  # avg, +, -
    path: Path
    writer: Any = None  # BigWigWriter, PyBigWigWriter or BedGraphWriter (bigwig.cli)
    state: TrackState = field(default_factory=TrackState)

    def write(self, chrom: str, *intervals) -> None:
        """Write intervals of ``chrom`` through the track's writer; an OSError without a file name is raised naming the
        track."""
        with naming_errors(self.path):  # a full disk names the track
            self.writer.write(chrom, *intervals)

    def close(self) -> None:
        """Close the track's writer; an OSError without a file name is raised naming the track."""
        with naming_errors(self.path):
            self.writer.close()


#: bp written between two returns of the C heap's free pages to the system (native.memory.release_free_memory): its RSS
#: grew by what numpy freed but glibc kept (BIGWIG over 3.5 Gbp: ~40 MB in 30 s, ~110 Mbp written)
RELEASE_BP = 32_000_000


def pieces(chroms: list[Chrom], n_block: int, piece: int):
    """(chrom, j, e, final, block_final) for each piece of at most ``piece`` chunks, never crossing a block
    boundary (``final``: the chromosome's last piece; ``block_final``: the last piece of a block)."""
    for chrom in chroms:
        k = len(chrom.plus)
        j = 0
        while j < k:
            block_end = min(j + n_block, k)
            while j < block_end:
                e = min(j + piece, block_end)
                yield chrom, j, e, e == k, e == block_end
                j = e


def _unpadded(X: np.ndarray) -> np.ndarray:
    v = X.reshape(-1)
    return v[v != -1]


def strand_arrays(piece: Piece, strand: str) -> tuple[np.ndarray, np.ndarray | None]:
    """The flat strand(s) a track is made of, padding removed: (plus or minus, None), or (plus, minus) for avg."""
    p, m = (piece.plus, piece.minus) if strand == "avg" else (piece.plus if strand == "+" else piece.minus, None)
    p = _unpadded(p) if piece.dirty else p.reshape(-1)
    m = (_unpadded(m) if piece.dirty else m.reshape(-1)) if m is not None else None
    if m is not None and len(p) != len(m):
        raise ChromaflowError(f"plus and minus strands differ in length ({len(p)} vs {len(m)} bp)")
    return p, m


def track_vector(piece: Piece, strand: str) -> np.ndarray:
    """The FORMATS §5.3 track of one piece: padding removed, then +, − or the half-even average."""
    p, m = strand_arrays(piece, strand)
    if m is None:
        return p
    if not piece.exact:
        return strand_average_f32(p, m)
    return strand_average(p, m, out=piece.scratch(len(p)), tmp=piece.scratch(len(p)))


def piece_runs(
    piece: Piece,
    strand: str,
    window: int | None,
    smoothing: str,
    clip: bool,
    stream: SmoothStream | None,
    block_final: bool,
):
    """(runs or None, value dtype, bp of the piece, start of the runs relative to the piece) of one track.

    Exact smoothing streams through the block (``stream``): its output lags the piece by up to w/2 bp.
    """
    # Predmoter's smoothed tracks are float64, its +, − and avg tracks float32 (integers print the same)
    out_dtype = np.float64 if window is not None else np.float32
    if window is None and piece.exact:  # one C pass: average (if any) and runs together
        p, m = strand_arrays(piece, strand)
        rns = runs_native(p, m)
        if rns is not None:
            n = len(p)
            if not n:
                return None, out_dtype, 0, 0
            return rns, out_dtype, n, 0
    if window is not None and smoothing == "exact":
        # integer strands: the average is formed in C straight into the smoothing window's int64 buffer
        v, m = strand_arrays(piece, strand) if piece.exact else (track_vector(piece, strand), None)
        n = len(v)
        assert stream is not None  # exact smoothing: a stream per track (_Conversion.streams)
        piece_start = stream.buf_start + len(stream.buf)  # block coordinate of v[0]
        start, rns = stream.feed_runs(v, block_final, minus=m)
        if rns is None:
            return None, out_dtype, n, 0
        s, e, vals = rns
        return (s - start, e - start, vals.astype(out_dtype)), out_dtype, n, start - piece_start
    v = track_vector(piece, strand)
    n = len(v)
    if not n:
        return None, out_dtype, n, 0
    if window is None:
        s, e, vals = runs(v)
    else:
        s, e, vals = runs(smooth_numpy(v, window, clip))
    return (s, e, vals.astype(out_dtype)), out_dtype, n, 0


def convert(
    inp: PredictionsInput,
    tracks: list[Track],
    *,
    window: int | None,
    smoothing: str,
    clip: bool,
    pool: ThreadPoolExecutor | None,
    prog: Progress,
) -> None:
    """Convert the predictions of ``inp`` into ``tracks``, block by block of BLOCK_BP (as Predmoter does), smoothed over
    ``window`` bp (None: not smoothed) with the ``smoothing`` method ('numpy' reads whole blocks, otherwise pieces of at
    most PIECE_CHUNKS chunks); the reader is closed at the end. The writers are not closed here."""
    n_block = max(1, BLOCK_BP // inp.L)
    whole_blocks = window is not None and smoothing == "numpy"  # numpy.convolve needs the block at once
    reader = ChunkReader(inp, pool, n_block if whole_blocks else min(n_block, PIECE_CHUNKS))
    try:
        _Conversion(inp, reader, tracks, window, smoothing, clip, pool).run(prog)
    finally:
        reader.close()


class _Conversion:
    """One conversion's shared state: the (channel, strand) keys of the tracks, their exact-smoothing streams and
    the strands to read per channel; :meth:`run` streams the pieces through them."""

    def __init__(
        self,
        inp: PredictionsInput,
        reader: ChunkReader,
        tracks: list[Track],
        window: int | None,
        smoothing: str,
        clip: bool,
        pool: ThreadPoolExecutor | None,
    ):
        self.inp, self.reader, self.tracks = inp, reader, tracks
        self.window, self.smoothing, self.clip, self.pool = window, smoothing, clip, pool
        self.n_block = max(1, BLOCK_BP // inp.L)
        self.piece_chunks = (
            self.n_block if (window is not None and smoothing == "numpy") else min(self.n_block, PIECE_CHUNKS)
        )
        self.keys = list(dict.fromkeys((t.channel, t.strand) for t in tracks))
        self.streams = (
            {k: SmoothStream(window, clip) for k in self.keys} if window is not None and smoothing == "exact" else {}
        )
        self.need: dict[int, tuple[bool, bool]] = {}  # channel: (plus wanted, minus wanted)
        for c, s in self.keys:
            wp, wm = self.need.get(c, (False, False))
            self.need[c] = (wp or s in ("avg", "+"), wm or s in ("avg", "-"))

    def load(self, desc):
        """The :class:`Piece` objects of one piece ``desc`` (chrom, j, e, final, block_final: :func:`pieces`) for the
        channels and strands needed."""
        chrom, j, e, _, _ = desc
        return self.reader.load(chrom.plus[j:e], chrom.minus[j:e], self.need)

    def compute(self, data, key, chrom: Chrom, block_final: bool):
        """:func:`piece_runs` of the (channel, strand) ``key`` for one piece's ``data``; a ChromaflowError is raised
        again naming the input and seqid."""
        c, strand = key
        try:
            return piece_runs(
                data[c], strand, self.window, self.smoothing, self.clip, self.streams.get(key), block_final
            )
        except ChromaflowError as exc:
            raise ChromaflowError(f"{self.inp.path}: seqid {chrom.name!r}: {exc}") from None

    def compute_all(self, data, chrom: Chrom, block_final: bool) -> dict:
        """piece_runs of every key (in the pool when there are several), then the piece's buffers are released."""
        if self.pool is not None and len(self.keys) > 1 and _piece_bp(data) >= POOL_MIN_BP:
            futs = [self.pool.submit(self.compute, data, k, chrom, block_final) for k in self.keys]
            results = dict(zip(self.keys, (f.result() for f in futs)))
        else:
            results = {k: self.compute(data, k, chrom, block_final) for k in self.keys}
        for piece in data.values():  # runs are copies: the chunk buffers go back to the reader
            piece.release()
        return results

    def write(self, results: dict, chrom: Chrom, offset: int, final: bool) -> int:
        """Feed each track its runs of one piece (writing what is complete); the piece's length in bp."""
        length = None
        for t in self.tracks:
            rns, dtype, n, rel = results[(t.channel, t.strand)]
            if length is not None and n != length:
                raise ChromaflowError(f"{self.inp.path}: seqid {chrom.name!r}: tracks of one piece differ in length")
            length = n
            res = t.state.feed_runs(rns, dtype, offset + rel, final)
            if res is not None:
                t.write(chrom.name, *res)
        return cast(int, length)  # set by the first track (there is always one)

    def run(self, prog: Progress) -> None:
        """Every piece in order, in three stages that overlap: piece k + 1 is read (prefetch thread) while piece k's
        runs are computed (runs thread, fanning out to the pool when there are several tracks) and piece k - 1's are
        fed to the writers (this thread). Feeding the writers had waited for each piece's runs: peaks of one
        track spent as long in its stream as in the runs kernel, one after the other."""
        prefetch = ThreadPoolExecutor(1, thread_name_prefix="bigwig-read")
        runner = ThreadPoolExecutor(1, thread_name_prefix="bigwig-runs")
        it = pieces(self.inp.chroms, self.n_block, self.piece_chunks)
        nxt = next(it, None)
        fut = prefetch.submit(self.load, nxt) if nxt is not None else None
        feed = _Feed(self, prog)
        computed: tuple | None = None  # (piece, future of its runs)
        try:
            while nxt is not None:
                desc = nxt
                data = cast(Future, fut).result()  # submitted for nxt
                nxt = next(it, None)
                fut = prefetch.submit(self.load, nxt) if nxt is not None else None
                chrom, _, _, _, block_final = desc
                runs = runner.submit(self.compute_all, data, chrom, block_final)
                del data
                if computed is not None:
                    feed(*computed)
                computed = (desc, runs)
            if computed is not None:
                feed(*computed)
            feed.finish()
        finally:
            runner.shutdown(wait=True, cancel_futures=True)
            prefetch.shutdown(wait=True, cancel_futures=True)


class _Feed:
    """The writing stage of :meth:`_Conversion.run`: each piece's runs fed to the tracks in order, the chromosomes'
    sizes checked as they end, the C heap's free pages given back every RELEASE_BP."""

    def __init__(self, conv: _Conversion, prog: Progress):
        self.conv, self.prog = conv, prog
        self.cur: Chrom | None = None
        self.offset = 0
        self.since_release = 0

    def __call__(self, desc, runs: Future) -> None:
        """Feed piece ``desc`` (:func:`pieces`) its computed ``runs`` (a future of :meth:`_Conversion.compute_all`)."""
        chrom, _, _, final, _ = desc
        conv = self.conv
        if chrom is not self.cur:
            if self.cur is not None:
                check_size(conv.inp.path, self.cur, self.offset)
            self.cur, self.offset = chrom, 0
            for t in conv.tracks:
                t.state = TrackState()
        length = conv.write(runs.result(), chrom, self.offset, final)
        self.offset += length
        self.prog.update(length)
        self.since_release += length
        if self.since_release >= RELEASE_BP:
            release_free_memory()
            self.since_release = 0

    def finish(self) -> None:
        """Check the last chromosome's size, and that no seqid without rows claims a size."""
        inp = self.conv.inp
        if self.cur is not None:
            check_size(inp.path, self.cur, self.offset)
        for c in inp.chroms:  # a seqid without rows (malformed) covers nothing
            if len(c.plus) == 0:
                check_size(inp.path, c, 0)


def _piece_bp(data: dict) -> int:
    """Base pairs (padding included) of one strand of a piece's channels."""
    piece = next(iter(data.values()), None)
    if piece is None:
        return 0
    x = piece.plus if piece.plus is not None else piece.minus
    return 0 if x is None else int(x.size)


def check_size(path: str, chrom: Chrom, offset: int) -> None:
    """A ChromaflowError naming the file and seqid unless the rows fed (``offset`` bp) cover ``chrom``'s size."""
    if offset != chrom.size:
        raise ChromaflowError(
            f"{path}: seqid {chrom.name!r}: rows cover {offset} bp but data/start_ends say {chrom.size} bp"
        )
