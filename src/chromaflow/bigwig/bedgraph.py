"""bedGraph output (FORMATS.md §5.7): ``seqid<TAB>start<TAB>end<TAB>value`` lines joined by newlines, no
trailing newline, no header; value is numpy's ``str()`` of the track's float (``2.0``: float32 for plain
tracks, float64 for smoothed ones). gzip: independent members (one per ≤ 2^18 lines) deflated by libdeflate
in a thread pool; the decompressed text is Predmoter's exactly, the compressed bytes are not (Predmoter writes
gzip level 9 with a file name and time stamp in every member header).
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable, cast

import numpy as np

from . import _native

#: lines per gzip member (and per formatting task)
LINES_PER_MEMBER = 1 << 18


def value_table(vals: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
    """(index per value, the str() of each distinct value) — numpy scalar str(), exactly as Predmoter prints."""
    if len(vals) and vals.dtype.kind == "f":
        lo = vals.min()
        hi = vals.max()
        if -(2.0**24) < lo and hi < 2.0**24 and hi - lo < 65536:  # float32-exact integers
            lo_i = np.floor(lo)
            off = vals - lo_i
            idx = off.astype(np.int32)
            if np.array_equal(idx, off):  # integral values in a small range: a table of all integers there
                n = int(idx.max()) + 1
                table = np.arange(n, dtype=vals.dtype) + vals.dtype.type(lo_i)
                return idx, [str(x).encode() for x in table]
    uniq, inv = np.unique(vals, return_inverse=True)
    return inv.astype(np.int32), [str(u).encode() for u in uniq]


def format_lines(chrom: str, starts: np.ndarray, ends: np.ndarray, vals: np.ndarray, first: bool):
    """The lines, each preceded by a newline except the file's first line (``first``): text without a trailing
    newline, ready to be appended to what came before (bytes or a memoryview)."""
    n = len(starts)
    if n == 0:
        return b""
    idx, strs = value_table(vals)
    lib = _native.load()
    if lib is None:
        text = format_bedgraph_numpy(chrom, starts, ends, vals, (idx, strs))
        return text[:-1] if first else b"\n" + text[:-1]
    cb = chrom.encode()
    vtab = b"".join(strs)
    vlen = np.array([len(s) for s in strs], dtype=np.int32)
    voff = np.zeros(len(strs), dtype=np.int32)
    np.cumsum(vlen[:-1], out=voff[1:])
    s = np.ascontiguousarray(starts, dtype=np.int64)
    e = np.ascontiguousarray(ends, dtype=np.int64)
    idx = np.ascontiguousarray(idx, dtype=np.int32)
    width = len(cb) + 4 + 2 * len(str(int(e[-1]) if len(e) else 0)) + int(vlen.max())
    buf = np.empty(n * width, dtype=np.uint8)
    got = lib.cf_bedgraph(
        cb,
        len(cb),
        s.ctypes.data,
        e.ctypes.data,
        idx.ctypes.data,
        vtab,
        voff.ctypes.data,
        vlen.ctypes.data,
        n,
        1 if first else 0,
        buf.ctypes.data,
    )
    return memoryview(buf)[:got]  # type: ignore[arg-type]  # numpy stubs: ndarray.__buffer__ only on 3.12+


def format_bedgraph_numpy(chrom: str, starts: np.ndarray, ends: np.ndarray, vals: np.ndarray, table=None) -> bytes:
    """``chrom\\tstart\\tend\\tstr(value)\\n`` per interval, vectorised numpy (fallback when there is no C compiler)."""
    n = len(starts)
    if n == 0:
        return b""
    cb = chrom.encode()
    lc = len(cb)
    inv, vstr = table if table is not None else value_table(vals)
    vlen_u = np.array([len(s) for s in vstr], dtype=np.int64)
    vmat = np.zeros((len(vstr), int(vlen_u.max())), dtype=np.uint8)
    for i, s in enumerate(vstr):
        vmat[i, : len(s)] = np.frombuffer(s, dtype=np.uint8)
    vlen = vlen_u[inv]
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
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
    """Write the decimal digits of x so that the last digit lands at ``last``."""
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


def _gzip(data, level: int):
    import deflate  # libdeflate: the member header has no name and time 0, so the bytes are reproducible

    return deflate.gzip_compress(data, level)


class BedGraphWriter:
    """gzip'ed bedGraph, written in order; formatting and compression run in the pool (GIL released)."""

    def __init__(self, path: str | os.PathLike, pool: ThreadPoolExecutor | None, level: int = 1):
        self.path = Path(path)
        self.fh = open(self.path, "wb")
        self.pool = pool
        self.level = level
        self.started = False
        self.count = 0
        self.queue: list[Future] = []

    def write(self, chrom: str, starts, ends, vals) -> None:
        """Add the intervals of ``chrom`` (``starts``, ``ends``, ``vals``: (n,) each) as gzip members of at most
        LINES_PER_MEMBER lines, compressed in the pool where there is one; results are written in order."""
        n = len(starts)
        if not n:
            return
        self.count += n
        level = self.level
        for a in range(0, n, LINES_PER_MEMBER):
            b = min(n, a + LINES_PER_MEMBER)
            first = not self.started
            self.started = True
            args = (chrom, starts[a:b], ends[a:b], vals[a:b], first)
            if self.pool is None:
                self.fh.write(_gzip(format_lines(*args), level))
            else:
                # cast: mypy cannot infer a lambda with a default argument as submit's callable
                self.queue.append(
                    self.pool.submit(cast("Callable[[], bytes]", lambda args=args: _gzip(format_lines(*args), level)))
                )
        self._drain(block=len(self.queue) > 64)

    def _drain(self, block: bool) -> None:
        while self.queue and (block or self.queue[0].done()):
            self.fh.write(self.queue.pop(0).result())
            block = block and len(self.queue) > 32

    def close(self) -> None:
        """Write the pending members (an empty gzip member if nothing was written) and close the file."""
        try:
            while self.queue:
                self.fh.write(self.queue.pop(0).result())
            if not self.started:  # an empty file is still a valid (empty) gzip stream
                self.fh.write(_gzip(b"", self.level))
        finally:
            self.fh.close()

    def abort(self) -> None:
        """Cancel the pending compressions and close the file without writing them."""
        for f in self.queue:
            f.cancel()
        self.fh.close()
