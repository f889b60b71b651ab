"""The ranked link list of a weight matrix and the files written from it (link list, weight matrix).

Links are ranked by importance, then regulator and target name (a total order), and printed ``%.9g`` into gzip
members (plain text when the output's name does not end in ``.gz``); the C kernel ``_links.c`` sorts and prints
them (:func:`links_kernel`), with the same bytes as the numpy / Python path used without a compiler.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor


class GzipMembers:
    """Write text as a sequence of gzip members (a valid .gz file: readers concatenate members), each
    compressed in one call by libdeflate (the pinned ``deflate`` package) -- about 8x faster than the gzip
    module at level 6 and smaller. No file name or time stamp: identical text gives identical bytes.

    A member is cut at the first ``write`` that brings the text to >= MEMBER bytes, so the bytes depend only on
    the text and the sequence of writes, never on ``threads``: with threads > 1 members are compressed on a
    thread pool (libdeflate runs outside the GIL for most of a call) while the caller produces the next ones,
    and written in order; at most 2 x threads members wait in memory."""

    LEVEL = 4
    MEMBER = 4 << 20  # bytes of text per member

    def __init__(self, fh, threads: int = 1):
        self.fh = fh
        self.buf: list[bytes] = []
        self.size = 0
        self.threads = max(1, int(threads))
        self.pool: ThreadPoolExecutor | None = None
        self.pending: list = []

    def write(self, data: bytes) -> None:
        """Add ``data`` to the text; a member is compressed once MEMBER bytes or more are waiting."""
        self.buf.append(data)
        self.size += len(data)
        if self.size >= self.MEMBER:
            self.flush()

    def flush(self) -> None:
        """Compress the waiting text as one gzip member: written at once with one thread, else handed to the pool,
        writing finished members in order while more than 2 x threads wait."""
        if not self.buf:
            return
        import deflate

        data = b"".join(self.buf)
        self.buf, self.size = [], 0
        if self.threads == 1:
            self.fh.write(deflate.gzip_compress(data, self.LEVEL))
            return
        if self.pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(self.threads, thread_name_prefix="chromaflow-gzip")
        self.pending.append(self.pool.submit(deflate.gzip_compress, data, self.LEVEL))
        while len(self.pending) > 2 * self.threads:
            self.fh.write(self.pending.pop(0).result())

    def close(self) -> None:
        """Flush, write every pending member, stop the pool."""
        try:
            self.flush()
            while self.pending:
                self.fh.write(self.pending.pop(0).result())
        finally:
            if self.pool is not None:
                self.pool.shutdown(wait=True, cancel_futures=True)
                self.pool = None


class PlainText:
    """The writer of a plain-text table (an output whose name does not end in ``.gz``): :class:`GzipMembers`'s
    ``write``/``flush``/``close``, the text written as it is."""

    def __init__(self, fh):
        self.fh = fh

    def write(self, data: bytes) -> None:
        """Write ``data``."""
        self.fh.write(data)

    def flush(self) -> None:
        """Nothing waits: a no-op."""

    def close(self) -> None:
        """Nothing waits: a no-op (the caller closes the file)."""


def table_writer(fh, gz: bool, threads: int = 1) -> GzipMembers | PlainText:
    """The writer of a table into ``fh``: gzip members (``gz``, the output's name ends in ``.gz``:
    :func:`chromaflow.utils.outputs.wants_gzip`) or plain text."""
    return GzipMembers(fh, threads) if gz else PlainText(fh)


def self_mask(reg_idx: np.ndarray, tgt_idx: np.ndarray) -> np.ndarray:
    """Boolean R x T matrix, True where regulator == target (self-links, never reported)."""
    return reg_idx[:, None] == tgt_idx[None, :]


def _name_order(names: list[str]) -> np.ndarray:
    """Indices of ``names`` in (byte-order) sorted order, ties (never, names are unique) by position."""
    return np.argsort(np.array(names, dtype=object), kind="stable")


def ranked_links(
    W: np.ndarray, reg_names: list[str], tgt_names: list[str], reg_idx: np.ndarray, tgt_idx: np.ndarray, limit: int = 0
):
    """Order of the (regulator, target) pairs of W (R x T), self-links excluded; the first ``limit``
    (0 = all).

    Sort key: importance descending, then regulator name, then target name (byte order) - a total,
    deterministic order. Returns (rows, cols) index arrays into W. With a limit only the entries >= the
    limit-th largest value are sorted (exact: every tie at the cut is included before sorting).

    How (the order is exactly that of ``np.lexsort((target rank, regulator rank, -value))``, ~6x faster at
    25 M pairs): the candidate pairs are first listed in (regulator name, target name) order, so that one
    stable sort by value (:func:`_order_desc`) gives the whole order.
    """
    R, T = W.shape
    rord = _name_order(reg_names)
    cord = _name_order(tgt_names)
    rrank = np.empty(R, dtype=np.int64)
    rrank[rord] = np.arange(R)
    trank = np.empty(T, dtype=np.int64)
    trank[cord] = np.arange(T)
    # self-links at their positions in name order (at most one per regulator)
    tpos = {int(g): j for j, g in enumerate(tgt_idx)}
    selfs = np.array(
        sorted(int(rrank[i]) * T + int(trank[tpos[int(g)]]) for i, g in enumerate(reg_idx) if int(g) in tpos),
        dtype=np.int64,
    )
    n_self = len(selfs)
    if limit and 0 < limit < R * T - n_self:
        # only the candidates (entries >= the cut) are ordered, read in place: listed in name order but given
        # by their own flat positions in W (ties keep list order, so the name order still breaks them)
        flat = W.ravel()
        k = min(limit + n_self, R * T)  # self entries could be among the k largest; never more than n_self
        cand = entries_at_or_above_kth(flat, k)
        rows, cols = np.divmod(cand, T)
        key = rrank[rows] * T + trank[cols]  # unique: any sort gives the same order
        keep = ~np.isin(key, selfs)
        cand = cand[keep][np.argsort(key[keep])]
        return _order_desc(flat, cand, T, np.arange(R), np.arange(T), min(limit, len(cand)))
    identity = np.array_equal(rord, np.arange(R)) and np.array_equal(cord, np.arange(T))
    wp = (W if identity else W[np.ix_(rord, cord)]).ravel()  # W in name order: position = rrank * T + trank
    if n_self:
        keep = np.ones(R * T, dtype=bool)
        keep[selfs] = False
        nk = np.flatnonzero(keep)
        del keep
    else:
        nk = None  # every pair, in name order
    n = R * T if nk is None else len(nk)
    return _order_desc(wp, nk, T, rord, cord, min(limit, n) if limit and limit > 0 else n)


def ranked_entries(
    vals: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    reg_names: list[str],
    tgt_names: list[str],
    reg_idx: np.ndarray,
    tgt_idx: np.ndarray,
    limit: int,
) -> np.ndarray:
    """The order of the first ``limit`` links among listed entries (value ``vals[i]`` at regulator ``rows[i]``,
    target ``cols[i]``), as :func:`ranked_links` orders them: the entries >= the (limit + self-links)-th largest
    value, self-links dropped, sorted by importance descending, then regulator and target name. Used by the
    streaming ``genie3-merge --max-links`` on the union of the parts' candidates (a superset of the whole matrix's,
    so the same links in the same order); returns indices into the entries."""
    n_self = int(np.isin(reg_idx, tgt_idx).sum())
    k = limit + n_self
    sel = entries_at_or_above_kth(vals, k) if 0 < k < len(vals) else np.arange(len(vals))
    reg_idx = np.asarray(reg_idx, dtype=np.int64)
    tgt_idx = np.asarray(tgt_idx, dtype=np.int64)
    sel = sel[reg_idx[rows[sel]] != tgt_idx[cols[sel]]]
    rrank = np.empty(len(reg_names), dtype=np.int64)
    rrank[_name_order(reg_names)] = np.arange(len(reg_names))
    trank = np.empty(len(tgt_names), dtype=np.int64)
    trank[_name_order(tgt_names)] = np.arange(len(tgt_names))
    order = sel[np.lexsort((trank[cols[sel]], rrank[rows[sel]], -(vals[sel] + 0.0)))]
    return order[:limit] if limit > 0 else order


#: values per block when the --max-links candidates are found (memory: about 2 blocks of float64, not R x T)
LIMIT_BLOCK = 1 << 22


def entries_at_or_above_kth(flat: np.ndarray, k: int) -> np.ndarray:
    """Positions (ascending) of the values >= the k-th largest of ``flat``, found block by block: the k largest
    seen so far are kept and merged with the next block (``np.partition``'s order, NaN largest), so memory stays
    at max(k, LIMIT_BLOCK) values instead of a copy of the whole matrix (7.2 GB at 30,000 x 30,000) and an R x T
    boolean mask. Same positions as ``np.flatnonzero(flat >= np.partition(flat, n - k)[n - k])``."""
    n = len(flat)
    block = max(LIMIT_BLOCK, k)
    top = flat[:0]
    for a in range(0, n, block):
        merged = np.concatenate([top, flat[a : a + block]])
        top = np.partition(merged, len(merged) - k)[len(merged) - k :] if len(merged) > k else merged
    thr = np.partition(top, 0)[0] if len(top) > 1 else top[0]
    return np.concatenate([np.flatnonzero(flat[a : a + block] >= thr) + a for a in range(0, n, block)])


def _order_desc(
    wp: np.ndarray, nk: np.ndarray | None, T: int, rord: np.ndarray, cord: np.ndarray, nout: int
) -> tuple[np.ndarray, np.ndarray]:
    """Elements i with value ``wp[nk[i]]`` (``nk`` None: ``wp[i]``) in stable order of value descending (ties
    keep i's order; -0.0 == 0.0); the first ``nout``, as (rord[position // T], cord[position % T]) of their
    positions nk[i]. The C radix sort of ``_links.c`` (~5x faster than ``np.lexsort`` at 25 M values);
    ``np.lexsort`` without a compiler, for non-finite values or 2^32 positions and more. Both give the same
    order (tests compare them)."""
    wp = np.ascontiguousarray(wp, dtype=np.float64)
    rord = np.ascontiguousarray(rord, dtype=np.int64)
    cord = np.ascontiguousarray(cord, dtype=np.int64)
    pos = None if nk is None else np.ascontiguousarray(nk, dtype=np.int64)
    m = len(wp) if pos is None else len(pos)
    lib = links_kernel()
    # only the values that are sorted need to be finite (the --max-links path sorts a few candidates of W)
    finite = np.isfinite(wp).all() if pos is None else np.isfinite(wp[pos]).all()
    if lib is not None and 0 < m and len(wp) <= (1 << 32) and finite:
        rows = np.empty(nout, dtype=np.int64)
        cols = np.empty(nout, dtype=np.int64)
        if (
            lib.genie3_order_desc(
                wp.ctypes.data,
                None if pos is None else pos.ctypes.data,
                m,
                T,
                rord.ctypes.data,
                cord.ctypes.data,
                nout,
                rows.ctypes.data,
                cols.ctypes.data,
            )
            == 0
        ):
            return rows, cols
    if pos is None:
        pos = np.arange(len(wp), dtype=np.int64)
    order = pos[np.lexsort((np.arange(m), -(wp[pos] + 0.0)))][:nout]
    r, c = np.divmod(order, T)
    return rord[r], cord[c]


#: the loaded link kernel under "lib" (None: not available), once :func:`links_kernel` has looked; tests and
#: benchmarks set it to None to run the numpy / Python path
LINKS_KERNEL: dict = {}


def links_kernel():
    """The C link formatter (``_links.c``, compiled once into the cache), or None without a compiler, with
    CHROMAFLOW_GENIE3_NO_CC=1 (tests), or when the C locale's decimal point is not '.'."""
    if "lib" not in LINKS_KERNEL:
        import ctypes
        import locale
        import os

        from chromaflow.native import build as cbuild

        lib = None
        if os.environ.get("CHROMAFLOW_GENIE3_NO_CC") != "1" and locale.localeconv()["decimal_point"] == ".":
            try:
                so = cbuild.build(
                    Path(__file__).with_name("_links.c"),
                    ["-O2", "-fPIC", "-shared", "-std=c99"],
                    "genie3-kernel",
                    "libgenie3links",
                )
                lib = ctypes.CDLL(str(so))
                lib.genie3_format_links.restype = ctypes.c_int64
                lib.genie3_order_desc.restype = ctypes.c_int
                lib.genie3_order_desc.argtypes = [
                    ctypes.c_void_p,
                    ctypes.c_void_p,
                    ctypes.c_int64,
                    ctypes.c_int64,
                    ctypes.c_void_p,
                    ctypes.c_void_p,
                    ctypes.c_int64,
                    ctypes.c_void_p,
                    ctypes.c_void_p,
                ]
                lib.genie3_format_links.argtypes = [ctypes.c_void_p] * 7 + [
                    ctypes.c_int64,
                    ctypes.c_void_p,
                    ctypes.c_int64,
                ]
            except (cbuild.BuildError, OSError):
                lib = None
        LINKS_KERNEL["lib"] = lib
    return LINKS_KERNEL["lib"]


def _name_table(names: list[str]) -> tuple[bytes, np.ndarray]:
    enc = [n.encode() for n in names]
    off = np.zeros(len(enc) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in enc], out=off[1:])
    return b"".join(enc), off


def write_links(
    path: str | Path,
    W: np.ndarray | None,
    reg_names: list[str],
    tgt_names: list[str],
    rows: np.ndarray,
    cols: np.ndarray,
    threads: int = 1,
    values: np.ndarray | None = None,
    gz: bool = True,
) -> int:
    """Write the TSV link list ``regulator<TAB>target<TAB>importance`` (header line, %.9g) for the ranked pairs
    (rows, cols) of W, gzip'ed with ``gz`` (the output's name ends in ``.gz``), else plain text.

    Lines are formatted in C (``_links.c``) on ``threads`` threads, members compressed on ``threads`` threads;
    the bytes are the same as the pure-Python path's (used without a compiler) and do not depend on
    ``threads``. ``path`` is written directly: the caller passes a temporary (report.finish_outputs). ``values``:
    the importances of the pairs themselves (W None: the streaming merge holds no matrix), else ``W[rows, cols]``."""
    step = 1 << 16
    if values is not None:
        values = np.ascontiguousarray(values, dtype=np.float64)
    lib = links_kernel()
    with open(path, "wb") as fh:
        out = table_writer(fh, gz, threads)
        try:
            out.write(b"regulator\ttarget\timportance\n")
            if lib is None:
                regs = np.array(reg_names, dtype=object)
                tgts = np.array(tgt_names, dtype=object)
                for s in range(0, len(rows), step):
                    r, c = rows[s : s + step], cols[s : s + step]
                    v = cast(np.ndarray, W)[r, c] if values is None else values[s : s + step]
                    lines = [f"{a}\t{b}\t{x:.9g}\n" for a, b, x in zip(regs[r], tgts[c], v.tolist())]
                    out.write("".join(lines).encode())
            else:
                _write_links_c(lib, out, W, reg_names, tgt_names, rows, cols, step, threads, values)
        finally:
            out.close()
    return len(rows)


def _write_links_c(lib, gz, W, reg_names, tgt_names, rows, cols, step, threads, values=None) -> None:
    rb, roff = _name_table(reg_names)
    tb, toff = _name_table(tgt_names)
    per_line = int(np.diff(roff).max(initial=0) + np.diff(toff).max(initial=0)) + 2 + 32
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    cols = np.ascontiguousarray(cols, dtype=np.int64)

    def fmt(s: int) -> bytes:
        """The link lines of the ``step`` links starting at ``s`` (regulator, target, importance), formatted by the C
        kernel."""
        r, c = rows[s : s + step], cols[s : s + step]
        v = np.ascontiguousarray(W[r, c] if values is None else values[s : s + step], dtype=np.float64)
        cap = per_line * len(r)
        out = np.empty(cap, dtype=np.uint8)
        n = lib.genie3_format_links(
            rb,
            roff.ctypes.data,
            tb,
            toff.ctypes.data,
            r.ctypes.data,
            c.ctypes.data,
            v.ctypes.data,
            len(r),
            out.ctypes.data,
            cap,
        )
        if n < 0:
            raise RuntimeError("link formatting overflowed its buffer")  # cannot happen: cap is an upper bound
        return out[:n].tobytes()

    starts = list(range(0, len(rows), step))
    if threads <= 1:
        for s in starts:
            gz.write(fmt(s))
        return
    from concurrent.futures import ThreadPoolExecutor

    window = 4 * threads
    with ThreadPoolExecutor(threads, thread_name_prefix="chromaflow-links") as ex:
        for i in range(0, len(starts), window):
            for text in ex.map(fmt, starts[i : i + window]):
                gz.write(text)


def write_weights(path: str | Path, W: np.ndarray, reg_names: list[str], tgt_names: list[str], gz: bool = True) -> None:
    """Full weight matrix as TSV (gzip'ed with ``gz``): rows = regulators, columns = targets, corner cell
    'regulator'; ``path`` is written directly (a temporary of report.finish_outputs)."""
    with open(path, "wb") as fh:
        out = table_writer(fh, gz)
        out.write(("regulator\t" + "\t".join(tgt_names) + "\n").encode())
        for i, name in enumerate(reg_names):
            out.write((name + "\t" + "\t".join(f"{x:.9g}" for x in W[i].tolist()) + "\n").encode())
        out.close()


def write_links_stability(
    path: str | Path,
    W: np.ndarray,
    conf: np.ndarray,
    mrank: np.ndarray,
    reg_names: list[str],
    tgt_names: list[str],
    rows: np.ndarray,
    cols: np.ndarray,
    gz: bool = True,
) -> int:
    """The link list of ``--repeats``: ``regulator, target, importance, confidence, mean_rank`` (each ``%.9g``),
    in the order (rows, cols), gzip'ed with ``gz``. Python formatting (the C formatter writes the three plain
    columns only)."""
    step = 1 << 16
    regs = np.array(reg_names, dtype=object)
    tgts = np.array(tgt_names, dtype=object)
    with open(path, "wb") as fh:
        out = table_writer(fh, gz)
        try:
            out.write(b"regulator\ttarget\timportance\tconfidence\tmean_rank\n")
            for s in range(0, len(rows), step):
                r, c = rows[s : s + step], cols[s : s + step]
                lines = [
                    f"{a}\t{b}\t{x:.9g}\t{q:.9g}\t{m:.9g}\n"
                    for a, b, x, q, m in zip(
                        regs[r], tgts[c], W[r, c].tolist(), conf[r, c].tolist(), mrank[r, c].tolist()
                    )
                ]
                out.write("".join(lines).encode())
        finally:
            out.close()
    return len(rows)
