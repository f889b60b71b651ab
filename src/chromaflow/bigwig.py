"""``chromaflow bigwig``: predictions h5 -> bigWig / bedGraph tracks with Predmoter's semantics.

Semantics follow FORMATS.md §5 (chromosome map, + / − assembly, padding removal, half-to-even strand
average in float32, per-block smoothing with numpy ``convolve`` 'same' semantics in float64, run-length
intervals merged across blocks, file naming). Deliberate deviations (see docs/bigwig.md):

* a block that only continues the previous run emits nothing (the reference writes a blank bedGraph line
  and crashes when writing bigWig);
* smoothed intervals are clipped to the chromosome size (the reference emits intervals past the end of
  chromosomes shorter than the window); ``--no-clip`` restores the reference behaviour.

Implementation notes: every chunk is decompressed once per call (all datasets and strands come from one
read), in a thread pool straight from the raw HDF5 chunks when the layout allows it; run-length encoding
and bedGraph text formatting are vectorised in numpy; gzip members are compressed in threads; memory is
bounded by one block (≤ 1000 chunks per strand and dataset, float32).
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import sys
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .common import ChromaflowError, OutputExistsError, Progress, StageMetrics, atomic_output, open_h5_input, resolve_threads

#: Predmoter's conversion block: 21,384,000 // L chunks (FORMATS §5.3)
BLOCK_BP = 21_384_000
#: unsmoothed tracks are streamed in pieces of at most this many chunks (the result does not depend on it)
PIECE_CHUNKS = 128
#: gzip level of .bg.gz output (Predmoter uses 9; decompressed text is identical, see docs/bigwig.md)
GZIP_LEVEL = 6

# --------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--predictions", required=True, metavar="P.h5",
                   help="predictions h5 (or, with --experimental, a training-style h5 with evaluation/<ds>_coverage)")
    p.add_argument("--outdir", required=True, metavar="D", help="output directory (must exist)")
    p.add_argument("--basename", required=True, metavar="B", help="file name prefix")
    p.add_argument("--format", choices=["bigwig", "bw", "bedgraph", "bg"], default="bigwig",
                   help="bigwig -> .bw, bedgraph -> .bg.gz (default: bigwig)")
    p.add_argument("--strand", choices=["avg", "+", "-", "all"], default="avg",
                   help="avg (rounded half-to-even mean of both strands, default), + , - or all three")
    p.add_argument("--window-size", type=int, default=None, metavar="W",
                   help="smooth with a W-bp moving average per 21.384 Mbp block (Predmoter semantics)")
    p.add_argument("--blacklist", metavar="FILE", default=None,
                   help="text file; first whitespace-separated column = seqids to leave out")
    p.add_argument("--datasets", nargs="+", metavar="DS", default=None,
                   help="datasets to convert (default: all, in file order)")
    p.add_argument("--experimental", action="store_true",
                   help="convert evaluation/<ds>_coverage (mean over BAMs) of a training-style h5")
    p.add_argument("--no-clip", action="store_true",
                   help="with --window-size: keep the reference's intervals past the end of chromosomes "
                        "shorter than the window (breaks genome browsers)")
    p.add_argument("--force", action="store_true", help="overwrite existing outputs")
    p.add_argument("--metrics", metavar="M.json", default=None, help="write stage metrics JSON here")
    p.add_argument("--no-browser-files", action="store_true",
                   help="do not write chrom.sizes, igv_session.xml and the UCSC hub files")
    p.add_argument("--genome", default=None, metavar="NAME",
                   help="genome name for the UCSC hub / IGV session (default: chrom.sizes placeholder)")
    p.add_argument("--threads", type=int, default=0, metavar="N", help="worker threads (default: all CPUs)")


# --------------------------------------------------------------------------------------------------
# input layout
# --------------------------------------------------------------------------------------------------
@dataclass
class Chrom:
    name: str
    size: int
    plus: np.ndarray   # file rows, ascending genome
    minus: np.ndarray  # file rows, element k covers the same window as plus[k]
    length: int = 0    # bp covered by the valid part of the rows (== size for well-formed files)


def _decode(x: bytes | np.bytes_) -> str:
    return bytes(x).decode("ascii", errors="replace")


def chromosome_map(seqids: np.ndarray, start_ends: np.ndarray, blacklist: set[str]) -> list[Chrom]:
    """FORMATS §5.2: order of first appearance, size = max of start_ends, + rows in file order, − reversed."""
    uniq, first, inverse = np.unique(seqids, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rows_by = np.argsort(inverse, kind="stable")  # rows grouped by seqid, file order within a group
    bounds = np.concatenate([[0], np.cumsum(np.bincount(inverse, minlength=len(uniq)))])
    chroms = []
    for u in order:
        name = _decode(uniq[u])
        if name in blacklist:
            continue
        rows = rows_by[bounds[u]:bounds[u + 1]]
        se = start_ends[rows]
        is_plus = se[:, 0] <= se[:, 1]
        plus = rows[is_plus]
        minus = rows[~is_plus][::-1]
        if len(plus) != len(minus):
            raise ChromaflowError(f"seqid {name!r}: {len(plus)} plus rows but {len(minus)} minus rows; "
                                  "not a Helixer-layout predictions file")
        chroms.append(Chrom(name=name, size=int(se.max()), plus=plus.astype(np.int64),
                            minus=minus.astype(np.int64)))
    return chroms


class ChunkReader:
    """Reads rows of a (N, L, C) dataset for some channels as float32 arrays shaped (C, rows, L).

    Fast path (Predmoter's layout: chunks (1, L, 1), deflate only): raw chunks are read with
    ``read_direct_chunk`` and inflated in a thread pool (libdeflate via ctypes, else zlib; both release
    the GIL). Any other
    layout is read through h5py. ``reduce_mean`` averages the last axis (BAM replicates) in float32 and
    rounds half-to-even (--experimental); then each dataset is one channel of its own dataset object.
    """

    def __init__(self, dsets: list, channels: list[int], pool: ThreadPoolExecutor | None, reduce_mean: bool):
        self.dsets = dsets
        self.channels = channels
        self.pool = pool
        self.reduce_mean = reduce_mean
        d0 = dsets[0]
        self.L = int(d0.shape[1])
        self.fast = False
        if not reduce_mean and len(dsets) == 1:
            try:
                plist = d0.id.get_create_plist()
                filters = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]
                self.fast = (d0.chunks == (1, self.L, 1) and filters == [1] and d0.dtype.kind == "i")
            except Exception:  # pragma: no cover - exotic h5py builds
                self.fast = False
            if self.fast:
                self.dtype = d0.dtype
                self.fill = d0.fillvalue

    def read(self, rows: np.ndarray, reverse: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Rows -> (float32 array (C, rows, L), per-channel bool "contains -1").

        With ``reverse`` every row is reversed, so flattening the result gives the minus-strand vector in
        ascending genome order (FORMATS §5.3: flatten in file order, then reverse the whole vector).
        """
        m = len(rows)
        C = len(self.channels)
        out = np.empty((C, m, self.L), dtype=np.float32)
        if self.fast:
            did = self.dsets[0].id
            jobs = []
            for i, r in enumerate(rows.tolist()):
                for c, ch in enumerate(self.channels):
                    try:
                        mask, raw = did.read_direct_chunk((r, 0, ch))
                    except Exception:  # unallocated chunk: fill value
                        out[c, i] = self.fill
                        continue
                    jobs.append((c, i, mask, raw))
            inflate = _inflater(self.L * self.dtype.itemsize)
            step = -1 if reverse else 1

            def work(job):
                c, i, mask, raw = job
                data = np.frombuffer(raw, dtype=self.dtype) if mask & 1 else inflate(raw).view(self.dtype)
                out[c, i] = data[::step]

            if self.pool is not None and len(jobs) > 1:
                for _ in self.pool.map(work, jobs, chunksize=max(1, len(jobs) // 16)):
                    pass
            else:
                for job in jobs:
                    work(job)
        else:
            # generic path: contiguous slice when possible, else sorted fancy index
            srt = np.sort(rows)
            inv = np.argsort(np.argsort(rows))
            sel = slice(int(srt[0]), int(srt[-1]) + 1) if m and srt[-1] - srt[0] + 1 == m else srt
            if self.reduce_mean:
                for c, d in enumerate(self.dsets):
                    a = np.asarray(d[sel]).astype(np.float32)
                    out[c] = np.rint(a.mean(axis=-1, dtype=np.float32))[inv]
            else:
                a = np.asarray(self.dsets[0][sel][:, :, self.channels])
                out[:] = np.moveaxis(a.astype(np.float32), 2, 0)[:, inv]
            if reverse:
                out = np.ascontiguousarray(out[:, :, ::-1])
        # padding check on the last row first: in well-formed files only a chromosome's last chunk is padded
        dirty = np.array([bool(np.any(out[c, -1] == -1)) or bool(np.any(out[c, :-1] == -1)) for c in range(C)])
        return out, dirty


    def _buffer(self, shape) -> np.ndarray:
        free = getattr(self, "_free", None)
        if free is None:
            free = self._free = {}
        lst = free.get(shape)
        return lst.pop() if lst else np.empty(shape, np.float32)

    def recycle(self) -> None:
        """The arrays of the last load_piece are no longer referenced: reuse them (no page faults)."""
        for x in getattr(self, "_in_use", []):
            self._free.setdefault(x.shape, []).append(x)
        self._in_use = []

    def load_piece(self, plus_rows: np.ndarray, minus_rows: np.ndarray, keys: list[tuple[int, str]],
                   want_cuts: bool) -> dict:
        """Track vectors of one piece: {(channel, strand): (vector, cuts or None)}.

        ``vector`` is the padding-free track in ascending genome order (strand avg/+/-); ``cuts`` are the
        positions i ≥ 1 where vector[i] != vector[i-1] (the run boundaries), or None if not computed.
        On the fast path all O(bp) work (inflate, cast, reverse, average, run boundaries) happens per
        chunk in the thread pool; the caller only touches O(intervals) data.
        """
        need_p = sorted({c for c, s in keys if s in ("avg", "+")})
        need_m = sorted({c for c, s in keys if s in ("avg", "-")})
        if not self.fast:
            P = self.read(plus_rows) if need_p else None
            M = self.read(minus_rows, reverse=True) if need_m else None
            return {k: (_track_vector(P, M, *k), None) for k in keys}
        m = len(plus_rows)
        L = self.L
        C = len(self.channels)
        P = self._buffer((C, m, L)) if need_p else None
        M = self._buffer((C, m, L)) if need_m else None
        A = self._buffer((C, m, L)) if any(s == "avg" for _, s in keys) else None
        self._in_use = [x for x in (P, M, A) if x is not None]
        strands_of = {c: [s for cc, s in keys if cc == c] for c in range(C)}
        did = self.dsets[0].id
        inflate = _inflater(L * self.dtype.itemsize)

        def raw(row, ch):
            try:
                mask, data = did.read_direct_chunk((row, 0, ch))
            except Exception:  # unallocated chunk: every value is the fill value
                return np.full(L, self.fill, dtype=self.dtype)
            return np.frombuffer(data, dtype=self.dtype) if mask & 1 else data

        jobs = []
        pr = plus_rows.tolist()
        mr = minus_rows.tolist()
        for i in range(m):
            for c in range(C):
                ch = self.channels[c]
                jobs.append((i, c, raw(pr[i], ch) if c in need_p else None, raw(mr[i], ch) if c in need_m else None))

        def work(job):
            i, c, rp, rm = job
            dirty = False
            if rp is not None:
                a = rp if isinstance(rp, np.ndarray) else inflate(rp).view(self.dtype)
                P[c, i] = a
                dirty |= bool(a.min() < 0)
            if rm is not None:
                a = rm if isinstance(rm, np.ndarray) else inflate(rm).view(self.dtype)
                M[c, i] = a[::-1]
                dirty |= bool(a.min() < 0)
            if dirty:  # padding (or other negative values): exact masking later, on the whole piece
                return c, None
            cuts = {}
            for s in strands_of[c]:
                if s == "avg":
                    row = A[c, i]
                    np.add(P[c, i], M[c, i], out=row)
                    row *= np.float32(0.5)  # exactly / 2
                    np.rint(row, out=row)
                else:
                    row = P[c, i] if s == "+" else M[c, i]
                if want_cuts:
                    cuts[s] = np.flatnonzero(row[1:] != row[:-1]) + 1
            return c, cuts

        if self.pool is not None and len(jobs) > 1:
            results = list(self.pool.map(work, jobs, chunksize=max(1, len(jobs) // 16)))
        else:
            results = [work(j) for j in jobs]
        out = {}
        for c in range(C):
            res = results[c::C]
            if any(r[1] is None for r in res):
                for s in strands_of[c]:
                    out[(c, s)] = (_track_vector((P, _dirty_flags(P)) if P is not None else None,
                                                 (M, _dirty_flags(M)) if M is not None else None, c, s), None)
                continue
            for s in strands_of[c]:
                X = A if s == "avg" else (P if s == "+" else M)
                v = X[c].reshape(-1)
                cuts = None
                if want_cuts:
                    parts = []
                    Xc = X[c]
                    boundary = np.flatnonzero(Xc[1:, 0] != Xc[:-1, -1]) + 1  # rows whose first value differs
                    bset = set(boundary.tolist())
                    for i in range(m):
                        if i in bset:
                            parts.append(np.array([i * L], dtype=np.int64))
                        parts.append(res[i][1][s] + i * L)
                    cuts = np.concatenate(parts) if parts else np.empty(0, np.int64)
                out[(c, s)] = (v, cuts)
        return out


def _dirty_flags(X: np.ndarray) -> np.ndarray:
    return np.array([bool(np.any(X[c] == -1)) for c in range(X.shape[0])])


def _track_vector(P, M, c: int, strand: str) -> np.ndarray:
    """Exact FORMATS §5.3 track of channel c from (array, dirty) pairs: remove -1, then + / − / avg."""
    p = _strand_vector(P, c) if strand in ("avg", "+") else None
    m = _strand_vector(M, c) if strand in ("avg", "-") else None
    if strand == "+":
        return p
    if strand == "-":
        return m
    if len(p) != len(m):
        raise ChromaflowError(f"plus and minus strands differ in length ({len(p)} vs {len(m)} bp)")
    v = np.add(p, m)
    v *= np.float32(0.5)  # exactly / 2 in float32
    np.rint(v, out=v)
    return v


def _strand_vector(arr_dirty, c: int) -> np.ndarray:
    arr, dirty = arr_dirty
    v = arr[c].reshape(-1)
    return v[v != -1] if dirty[c] else v


_tls = threading.local()


def _inflater(nbytes: int):
    """zlib-format inflate of one chunk into a fresh buffer; libdeflate (ctypes, GIL released) if present."""
    lib = _libdeflate()
    if lib is None:
        return lambda raw: np.frombuffer(zlib.decompress(raw), dtype=np.uint8)

    def inflate(raw: bytes) -> np.ndarray:
        d = getattr(_tls, "dec", None)
        if d is None:
            d = _tls.dec = lib.libdeflate_alloc_decompressor()
        buf = np.empty(nbytes, dtype=np.uint8)
        got = ctypes.c_size_t()
        rc = lib.libdeflate_zlib_decompress(d, raw, len(raw), buf.ctypes.data, nbytes, ctypes.byref(got))
        if rc != 0:  # not exactly nbytes or corrupt: let zlib decide/raise with its own message
            return np.frombuffer(zlib.decompress(raw), dtype=np.uint8)
        return buf

    return inflate


_LIBDEFLATE: list = []


def _libdeflate():
    """The system libdeflate through ctypes (2-4x faster inflate than zlib), or None.

    Optional: used only when the shared library is installed; CHROMAFLOW_LIBDEFLATE=0 disables it.
    """
    if not _LIBDEFLATE:
        lib = None
        if os.environ.get("CHROMAFLOW_LIBDEFLATE", "1") != "0":
            import ctypes.util

            name = ctypes.util.find_library("deflate")
            try:
                lib = ctypes.CDLL(name or "libdeflate.so.0")
                lib.libdeflate_alloc_decompressor.restype = ctypes.c_void_p
                lib.libdeflate_alloc_decompressor.argtypes = []
                lib.libdeflate_zlib_decompress.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                                           ctypes.c_void_p, ctypes.c_size_t,
                                                           ctypes.POINTER(ctypes.c_size_t)]
                lib.libdeflate_zlib_decompress.restype = ctypes.c_int
            except (OSError, AttributeError):
                lib = None
        _LIBDEFLATE.append(lib)
    return _LIBDEFLATE[0]


# --------------------------------------------------------------------------------------------------
# track maths
# --------------------------------------------------------------------------------------------------
def smooth(track: np.ndarray, w: int, clip: bool) -> np.ndarray:
    """round_half_even(numpy.convolve(track, ones(w)/w, 'same')) in float64 (FORMATS §5.4), bit-exact.

    numpy.convolve itself defines the reference values, including its floating-point behaviour at exact
    .5 ties (FORMATS §5.4 tie caveat), so it is what computes every value that can differ from the input.
    Only where a window lies wholly inside a run of one integer value c is the result known without
    computing it: it is c (numpy's sum of w products c * fl(1/w) is within ~w*c*1e-16 of c). So
    numpy.convolve is run on the regions within w of a value change or of a block edge only. Each region is
    convolved with w bp of context on both sides (or the block edge itself), so every output position
    gets the same dot product over the same data as in a whole-block call. Blocks that change
    everywhere, are short, or are not integral take one whole-block numpy.convolve.
    """
    n = len(track)
    kernel = np.ones(w) / w
    t64 = track.astype(np.float64)
    # tracks are integral by construction (int predictions, rint'ed averages / BAM means)
    if n >= 8 * w and os.environ.get("CHROMAFLOW_SMOOTH") != "convolve":
        cuts = np.flatnonzero(track[1:] != track[:-1]) + 1
        if len(cuts) * 4 * w < n and max(float(track.max()), -float(track.min())) < 2.0 ** 40:
            starts = np.concatenate([[0], cuts - w, [n - w]])
            ends = np.concatenate([[w], cuts + w, [n]])
            np.clip(starts, 0, n, out=starts)
            np.clip(ends, 0, n, out=ends)
            brk = np.flatnonzero(starts[1:] > ends[:-1]) + 1  # starts/ends are both sorted
            rs = starts[np.concatenate([[0], brk])]
            re = ends[np.concatenate([brk - 1, [len(ends) - 1]])]
            done = []
            for a, b in zip(rs.tolist(), re.tolist()):
                lo = max(0, a - w)
                hi = min(n, b + w)
                done.append((a, b, np.rint(np.convolve(t64[lo:hi], kernel, mode="same")[a - lo:b - lo])))
            for a, b, v in done:  # t64 becomes the output (outside the regions it already is the answer)
                t64[a:b] = v
            return t64
    out = np.rint(np.convolve(t64, kernel, mode="same"))
    if clip:
        out = out[: len(track)]
    return out


def runs(v: np.ndarray, cut: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Maximal runs of equal values: (starts, ends, values), block coordinates (``cut``: known boundaries)."""
    n = len(v)
    if cut is None:
        cut = np.flatnonzero(v[1:] != v[:-1]) + 1
    starts = np.empty(len(cut) + 1, dtype=np.int64)
    starts[0] = 0
    starts[1:] = cut
    ends = np.empty_like(starts)
    ends[:-1] = cut
    ends[-1] = n
    return starts, ends, v[starts]


@dataclass
class TrackState:
    """Cross-piece merge state of one output track within one chromosome."""
    pending: tuple[int, float] | None = None  # (start, value) of the held-back last run
    end: int = 0

    def feed(self, v: np.ndarray, cuts: np.ndarray | None, offset: int, final: bool):
        """Return (starts, ends, values) to emit for piece ``v`` starting at chromosome coordinate ``offset``."""
        return self.feed_runs(runs(v, cuts) if len(v) else None, v.dtype, offset, final)

    def feed_runs(self, piece_runs, dtype, offset: int, final: bool):
        """Like :meth:`feed`, for the piece's runs (block coordinates) computed beforehand (None: empty)."""
        if piece_runs is None:
            if final and self.pending is not None:
                s, val = self.pending
                self.pending = None
                return (np.array([s], np.int64), np.array([self.end], np.int64), np.array([val], dtype))
            return None
        starts, ends, vals = piece_runs
        starts = starts + offset
        ends = ends + offset
        if self.pending is not None:
            ps, pv = self.pending
            if vals[0] == pv:
                starts[0] = ps
            else:
                starts = np.concatenate([[ps], starts])
                ends = np.concatenate([[offset], ends])
                vals = np.concatenate([np.array([pv], dtype=vals.dtype), vals])
            self.pending = None
        if not final:
            self.pending = (int(starts[-1]), vals[-1])
            self.end = int(ends[-1])
            starts, ends, vals = starts[:-1], ends[:-1], vals[:-1]
        if len(starts) == 0:  # empty-block defect of the reference: emit nothing
            return None
        return starts, ends, vals


# --------------------------------------------------------------------------------------------------
# writers
# --------------------------------------------------------------------------------------------------
class BigWigWriter:
    def __init__(self, path: Path, header: list[tuple[str, int]]):
        import pyBigWig

        self.bw = pyBigWig.open(str(path), "w")
        if self.bw is None:
            raise ChromaflowError(f"{path}: cannot open for writing")
        self.bw.addHeader(header)
        self.count = 0

    def write(self, chrom: str, starts, ends, vals) -> None:
        n = len(starts)
        self.count += n
        if n:
            self.bw.addEntries([chrom] * n, starts, ends=ends, values=vals.astype(np.float64))

    def close(self) -> None:
        self.bw.close()


def format_bedgraph(chrom: str, starts: np.ndarray, ends: np.ndarray, vals: np.ndarray) -> bytes:
    """``chrom\\tstart\\tend\\tstr(value)\\n`` per interval, vectorised (value strings as Python's str())."""
    n = len(starts)
    if n == 0:
        return b""
    cb = chrom.encode()
    lc = len(cb)
    uniq, inv = np.unique(vals, return_inverse=True)
    vstr = [str(u).encode() for u in uniq]  # numpy scalar str(): 2.0, 0.0, ... exactly as Predmoter
    vlen_u = np.array([len(s) for s in vstr], dtype=np.int64)
    vmat = np.zeros((len(vstr), int(vlen_u.max())), dtype=np.uint8)
    for i, s in enumerate(vstr):
        vmat[i, : len(s)] = np.frombuffer(s, dtype=np.uint8)
    vlen = vlen_u[inv]
    ds = _ndigits(starts)
    de = _ndigits(ends)
    linelen = lc + ds + de + vlen + 4
    off = np.empty(n, dtype=np.int64)
    off[0] = 0
    np.cumsum(linelen[:-1], out=off[1:])
    total = int(off[-1] + linelen[-1])
    buf = np.empty(total, dtype=np.uint8)
    for i, b in enumerate(cb):
        buf[off + i] = b
    p = off + lc
    buf[p] = 9
    _put_digits(buf, p + ds, starts, ds)
    p = p + ds + 1
    buf[p] = 9
    _put_digits(buf, p + de, ends, de)
    p = p + de + 1
    buf[p] = 9
    p = p + 1
    for k in range(vmat.shape[1]):
        sel = vlen > k
        if sel.all():
            buf[p + k] = vmat[inv, k]
        else:
            buf[(p + k)[sel]] = vmat[inv[sel], k]
    buf[p + vlen] = 10
    return buf.tobytes()


def _ndigits(x: np.ndarray) -> np.ndarray:
    nd = np.ones(len(x), dtype=np.int64)
    t = 10
    mx = int(x.max()) if len(x) else 0
    while t <= mx:
        nd += x >= t
        t *= 10
    return nd


def _put_digits(buf: np.ndarray, last: np.ndarray, x: np.ndarray, nd: np.ndarray) -> None:
    """Write decimal digits of x so that the last digit lands at ``last`` (exclusive end position - 1 + 1)."""
    lo = int(nd.min())
    hi = int(nd.max())
    q = x.copy()
    for k in range(hi):
        digit = (q % 10).astype(np.uint8) + 48
        if k < lo:
            buf[last - k] = digit
        else:
            sel = nd > k
            buf[(last - k)[sel]] = digit[sel]
        q //= 10


class BedGraphWriter:
    """gzip'ed bedGraph; one gzip member per written piece, compressed in a thread pool, in order.

    Lines are joined with newlines and the file has no trailing newline (FORMATS §5.7).
    """

    def __init__(self, path: Path, pool: ThreadPoolExecutor | None, level: int = GZIP_LEVEL):
        self.fh = open(path, "wb")
        self.pool = pool
        self.level = level
        self.started = False
        self.queue: list = []
        self.buffer: list[bytes] = []
        self.buffered = 0
        self.count = 0

    def write(self, chrom: str, starts, ends, vals) -> None:
        self.count += len(starts)
        text = format_bedgraph(chrom, starts, ends, vals)
        if not text:
            return
        # hold back each line's newline until the next line exists -> no trailing newline at the end
        self.buffer.append(b"\n" + text[:-1] if self.started else text[:-1])
        self.started = True
        self.buffered += len(text)
        if self.buffered >= 8 << 20:
            self._flush()

    def _flush(self) -> None:
        if not self.buffer:
            return
        data = b"".join(self.buffer)
        self.buffer, self.buffered = [], 0
        if self.pool is not None:
            self.queue.append(self.pool.submit(_gzip_member, data, self.level))
            while len(self.queue) > 4:
                self.fh.write(self.queue.pop(0).result())
        else:
            self.fh.write(_gzip_member(data, self.level))

    def close(self) -> None:
        self._flush()
        for fut in self.queue:
            self.fh.write(fut.result())
        self.queue = []
        if not self.started:  # an empty file is still a valid (empty) gzip stream
            self.fh.write(_gzip_member(b"", self.level))
        self.fh.close()


def _gzip_member(data: bytes, level: int) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


# --------------------------------------------------------------------------------------------------
# run
# --------------------------------------------------------------------------------------------------
@dataclass
class Track:
    dataset: str
    channel: int  # index into the reader's channel list
    strand: str   # avg, +, -
    path: Path
    writer: object = None
    state: TrackState = field(default_factory=TrackState)


def output_name(basename: str, dataset: str, strand: str, bl: bool, ws: int | None, fmt: str) -> str:
    ext = "bw" if fmt == "bigwig" else "bg.gz"
    return f"{basename}_{dataset}_{strand}_strand{'_bl' if bl else ''}{'' if ws is None else f'_ws={ws}'}.{ext}"


def _read_blacklist(path: str) -> set[str]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ChromaflowError(f"{path}: cannot read blacklist ({exc.strerror or exc})") from None
    return {line.split()[0] for line in text.splitlines() if line.split()}


def _open_input(args):
    path = args.predictions
    h5 = open_h5_input(path, "predictions file")
    need = ["data/seqids", "data/start_ends"]
    if not args.experimental:
        need += ["prediction/predictions", "prediction/datasets"]
    missing = [k for k in need if k not in h5]
    if missing:
        h5.close()
        kind = "training-style h5 (--experimental)" if args.experimental else "predictions file"
        raise ChromaflowError(f"{path}: not a {kind} (missing {', '.join(missing)})")
    return h5


def _keep_freed_memory() -> None:
    """Let glibc reuse freed large blocks instead of unmapping them (numpy's per-piece arrays of tens to
    MB otherwise pay fresh page faults on every allocation; measured ~10x on a 21 M-element astype).
    Arrays above 32 MiB (whole smoothing blocks) are still mmapped by glibc."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD (glibc's maximum on 64-bit: 32 MiB)
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):  # not glibc: nothing to tune
        pass


def run(args: argparse.Namespace) -> int:
    fmt = {"bw": "bigwig", "bg": "bedgraph"}.get(args.format, args.format)
    ws = args.window_size
    if ws is not None and ws <= 0:
        raise ChromaflowError(f"--window-size must be a positive integer (got {ws})")
    if "/" in args.basename or not args.basename:
        raise ChromaflowError(f"--basename {args.basename!r}: must be a non-empty file name without '/'")
    outdir = Path(args.outdir)
    if not outdir.is_dir():
        raise ChromaflowError(f"{outdir}: output directory does not exist")
    threads = resolve_threads(args.threads)
    _keep_freed_memory()
    blacklist = _read_blacklist(args.blacklist) if args.blacklist else set()

    with StageMetrics("bigwig", args.metrics, threads=threads) as metrics:
        h5 = _open_input(args)
        with contextlib.ExitStack() as stack:
            stack.callback(h5.close)
            # ---- datasets
            if args.experimental:
                avail = sorted(k[: -len("_coverage")] for k in h5.get("evaluation", {}).keys()
                               if k.endswith("_coverage")) if "evaluation" in h5 else []
                if not avail:
                    raise ChromaflowError(f"{args.predictions}: no evaluation/<dataset>_coverage datasets "
                                          "(not a training-style h5)")
                if not args.datasets:
                    raise ChromaflowError(f"--experimental needs --datasets (available: {' '.join(avail)})")
            else:
                avail = [_decode(x) for x in h5["prediction/datasets"][()]]
            datasets = list(args.datasets) if args.datasets else list(avail)
            bad = [d for d in datasets if d not in avail]
            if bad:
                raise ChromaflowError(f"dataset(s) {' '.join(bad)} not in {args.predictions} "
                                      f"(available: {' '.join(avail)})")
            if len(set(datasets)) != len(datasets):
                raise ChromaflowError("--datasets names a dataset twice")
            # ---- chromosome map
            seqids = np.asarray(h5["data/seqids"][()])
            start_ends = np.asarray(h5["data/start_ends"][()], dtype=np.int64)
            present = {_decode(s) for s in np.unique(seqids)}
            absent = sorted(blacklist - present)
            if absent:
                print(f"chromaflow bigwig: WARNING: blacklisted seqid(s) not in {args.predictions}: "
                      f"{' '.join(absent)}", file=sys.stderr)
            chroms = chromosome_map(seqids, start_ends, blacklist)
            if not chroms:
                raise ChromaflowError("nothing to convert: every seqid is blacklisted")
            # ---- reader
            pool = ThreadPoolExecutor(threads) if threads > 1 else None
            if pool is not None:
                stack.callback(pool.shutdown)
            if args.experimental:
                dsets = [h5[f"evaluation/{d}_coverage"] for d in datasets]
                reader = ChunkReader(dsets, list(range(len(datasets))), pool, reduce_mean=True)
            else:
                dset = h5["prediction/predictions"]
                if dset.ndim != 3:
                    raise ChromaflowError(f"{args.predictions}: prediction/predictions is not (N, L, D)")
                reader = ChunkReader([dset], [avail.index(d) for d in datasets], pool, reduce_mean=False)
            L = reader.L
            n_block = BLOCK_BP // L
            # ---- outputs (all or none: every file is renamed into place only if the whole call succeeds)
            strands = ["avg", "+", "-"] if args.strand == "all" else [args.strand]
            tracks = [Track(d, c, s, outdir / output_name(args.basename, d, s, bool(args.blacklist), ws, fmt))
                      for c, d in enumerate(datasets) for s in strands]
            browser = [] if args.no_browser_files else _browser_paths(outdir, fmt)
            if not args.force:
                for p in [t.path for t in tracks] + browser:
                    if p.exists():
                        raise OutputExistsError(f"{p}: output exists (use --force to overwrite)")
            header = [(c.name, c.size) for c in chroms]
            for t in tracks:
                tmp = stack.enter_context(atomic_output(t.path, force=True))
                t.writer = BigWigWriter(tmp, header) if fmt == "bigwig" else BedGraphWriter(tmp, pool)
            total_bp = sum(c.size for c in chroms)
            piece = n_block if ws is not None else min(n_block, PIECE_CHUNKS)
            with Progress(total_bp, "bigwig", "bp") as prog:
                _convert(chroms, tracks, reader, n_block, piece, ws, not args.no_clip, prog, pool)
            for t in tracks:
                t.writer.close()
            if browser:
                from .browser import write_browser_files

                write_browser_files(outdir, chroms=header, tracks=[(t.dataset, t.strand, t.path.name) for t in tracks],
                                    fmt=fmt, basename=args.basename, genome=args.genome, force=True)
        metrics.set(bp=total_bp, chromosomes=len(chroms), datasets=datasets, tracks=len(tracks), format=fmt,
                    strand=args.strand, window_size=ws, experimental=bool(args.experimental),
                    outputs=[t.path.name for t in tracks], intervals=sum(t.writer.count for t in tracks))
    return 0


def _browser_paths(outdir: Path, fmt: str) -> list[Path]:
    from .browser import browser_file_names

    return [outdir / n for n in browser_file_names(fmt)]


def _pieces(chroms: list[Chrom], n_block: int, piece: int):
    """(chrom, j, e, final) for each piece of at most ``piece`` chunks, never crossing a block boundary."""
    for chrom in chroms:
        k = len(chrom.plus)
        j = 0
        while j < k:
            block_end = min(j + n_block, k)
            while j < block_end:
                e = min(j + piece, block_end)
                yield chrom, j, e, e == k
                j = e


def _convert(chroms: list[Chrom], tracks: list[Track], reader: ChunkReader, n_block: int, piece: int,
             ws: int | None, clip: bool, prog: Progress, pool: ThreadPoolExecutor | None) -> None:
    keys = list(dict.fromkeys((t.channel, t.strand) for t in tracks))

    def load(desc):
        chrom, j, e, _ = desc
        try:
            data = reader.load_piece(chrom.plus[j:e], chrom.minus[j:e], keys, want_cuts=ws is None)
        except ChromaflowError as exc:
            raise ChromaflowError(f"seqid {chrom.name!r}: {exc}") from None
        # smoothing and run-length encoding happen here, i.e. in the prefetch thread / pool, overlapping
        # the writing of the previous piece; only the (small) runs are kept, not the dense vectors
        def encode(k):
            v, cuts = data[k]
            length = len(v)
            if ws is not None:
                v, cuts = smooth(v, ws, clip), None
            return k, (runs(v, cuts) if len(v) else None, v.dtype, length)

        mapper = pool.map if (pool is not None and len(keys) > 1) else map
        out = dict(mapper(encode, keys))
        del data
        reader.recycle()
        return out

    # read, smooth and run-length encode the next piece while this one is written
    prefetch = ThreadPoolExecutor(1)
    it = _pieces(chroms, n_block, piece)
    nxt = next(it, None)
    fut = prefetch.submit(load, nxt) if (prefetch and nxt is not None) else None
    cur = None
    offset = 0
    try:
        while nxt is not None:
            desc = nxt
            piece_data = fut.result() if fut is not None else load(desc)
            nxt = next(it, None)
            fut = prefetch.submit(load, nxt) if (prefetch and nxt is not None) else None
            chrom, j, e, final = desc
            if chrom is not cur:
                if cur is not None:
                    _check_size(cur, offset)
                cur, offset = chrom, 0
                for t in tracks:
                    t.state = TrackState()
            length = _process_piece(chrom, tracks, piece_data, offset, final)
            offset += length
            prog.update(length)
        if cur is not None:
            _check_size(cur, offset)
        for c in chroms:  # a seqid without plus rows (malformed) covers nothing
            if len(c.plus) == 0:
                _check_size(c, 0)
    finally:
        if prefetch is not None:
            prefetch.shutdown(wait=True, cancel_futures=True)


def _check_size(chrom: Chrom, offset: int) -> None:
    if offset != chrom.size:
        raise ChromaflowError(f"seqid {chrom.name!r}: rows cover {offset} bp but start_ends say {chrom.size} bp")


def _process_piece(chrom: Chrom, tracks: list[Track], piece: dict, offset: int, final: bool) -> int:
    length = 0
    for t in tracks:
        piece_runs, dtype, length = piece[(t.channel, t.strand)]
        res = t.state.feed_runs(piece_runs, dtype, offset, final)
        if res is not None:
            t.writer.write(chrom.name, *res)
    return length
