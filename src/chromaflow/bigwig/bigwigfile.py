"""bigWig writers: chromaflow's own streaming writer (default) and a pyBigWig wrapper.

Why our own writer: pyBigWig (libBigWig) spends ~1 µs per interval, mostly in zlib level 6 on one thread,
holding the GIL, then re-reads the whole file to build the zoom levels at close. Predictions tracks have one
interval per ~3 bp (h3k4me3-like) to ~30 bp, so the writer dominated the conversion (profile in
docs/bigwig.md). pybigtools (Rust) is ~2x faster but takes one Python tuple per interval. This writer packs the
intervals with numpy, deflates 32 KB blocks with libdeflate in a thread pool (the GIL is released) and builds
the zoom levels while streaming.

Layout (the bigWig format of Kent et al. 2010, as written by UCSC's bedGraphToBigWig and read by every
browser):

* header, 10 zoom-header slots, total summary, chromosome B+ tree (keys sorted bytewise, ids in file order),
  data section (uint64 block count, zlib blocks of up to 2728 bedGraph items, never across chromosomes),
  data R-tree index, then per zoom level its data (uint32 block count, zlib blocks of up to 1024 records)
  and R-tree index; the bigWig magic again at the end. Blocks hold ≤ 32,760 bytes uncompressed (the header's
  uncompressBufSize is 32,768), as in libBigWig.
* Zoom levels: reduction z0 = 16 × floor(mean interval length) (libBigWig's rule; the mean is taken over the
  first 2**20 intervals so the levels can be built while streaming), then ×4 per level while z fits the
  largest chromosome, at most 10 levels, stopping after the first level with one record per chromosome.
  Bins are aligned to multiples of z on each chromosome. Each record holds the exact count, min, max, sum and
  sum of squares of the bases it covers (libBigWig instead leaves sum = 0 in every 1023rd record and in the
  last one, and starts a shifted bin there).
* Total summary: exact basesCovered, min, max, sum, sum of squares (libBigWig's max skips the first value).

The intervals and values (float32) are the same as pyBigWig would store; the bytes are not. Use
``--bigwig-writer pybigwig`` for pyBigWig's bytes (byte-identical to Predmoter's .bw files for identical
intervals).
"""

from __future__ import annotations

import io
import os
import struct
import sys
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import numpy as np

from .spool import Records, Spill
from ..utils.errors import ChromaflowError

BIGWIG_MAGIC = 0x888FFC26
CHROM_TREE_MAGIC = 0x78CA8C91
RTREE_MAGIC = 0x2468ACE0
HEADER_BYTES = 64
ZOOM_SLOTS = 10
SUMMARY_BYTES = 40
UNCOMPRESS_BUF = 32768
ITEMS_PER_BLOCK = (UNCOMPRESS_BUF - 24) // 12  # 2728 bedGraph items: 32,760 bytes
RECORDS_PER_BLOCK = UNCOMPRESS_BUF // 32  # 1024 zoom records
RTREE_BLOCK = 256  # children per R-tree / B+ tree node (UCSC's default)
ZOOM_SAMPLE = 1 << 20  # intervals whose mean length sets the first zoom reduction
#: blocks per compression task (amortises the task overhead; ~1 MB of input)
BLOCKS_PER_TASK = 32
#: intervals per zoom-record task
ZOOM_TASK = 1 << 18
#: work on fewer intervals (or zoom records) than this is done in the writing thread, not in the pool (_submit)
INLINE_ITEMS = ITEMS_PER_BLOCK

ITEM = np.dtype([("start", "<u4"), ("end", "<u4"), ("value", "<f4")])
RECORD = np.dtype(
    [
        ("chrom", "<u4"),
        ("start", "<u4"),
        ("end", "<u4"),
        ("count", "<u4"),
        ("min", "<f4"),
        ("max", "<f4"),
        ("sum", "<f4"),
        ("sumsq", "<f4"),
    ]
)


def _compressor(level: int, method: str):
    if method == "zlib":
        return lambda data: zlib.compress(data, level)
    import deflate  # libdeflate: ~5x zlib's speed at the same level and size; releases the GIL

    return _Libdeflate(level, lambda data: bytes(deflate.zlib_compress(data, level)))


class _Libdeflate:
    """libdeflate at ``level``: called with bytes, the ``deflate`` package's zlib_compress (``compress``);
    :meth:`data_blocks` packs and compresses a task's data blocks in one C call (``_kernels.c`` cf_data_blocks:
    the same library, so the same bytes; one call per block released and took back the GIL ~27,000 times per
    200 Mbp track, and the threads' hand-overs of it cost more CPU than the packing)."""

    def __init__(self, level: int, compress):
        self.level = level
        self.compress = compress
        self.bound: int | None = None

    def __call__(self, data) -> bytes:
        return self.compress(data)

    def data_blocks(self, tid: int, s: np.ndarray, e: np.ndarray, v: np.ndarray):
        """(meta (k, 3) int64: tid, start, end; compressed sizes (k,) int64; the k compressed blocks as one bytes)
        of the intervals in blocks of ITEMS_PER_BLOCK, or None without the C kernels (or on a big-endian machine)."""
        from . import _native

        lib = _native.load() if sys.byteorder == "little" else None
        lz = _native.libdeflate() if lib is not None else None
        if lib is None or lz is None:
            return None
        c = _native.compressor(self.level)  # this thread's, freed with it
        if self.bound is None:
            self.bound = int(lz["zlib_compress_bound"](c, 24 + 12 * ITEMS_PER_BLOCK))
        bound = self.bound
        n = len(s)
        k = -(-n // ITEMS_PER_BLOCK)
        s = np.ascontiguousarray(s, dtype=np.int64)
        e = np.ascontiguousarray(e, dtype=np.int64)
        v = np.ascontiguousarray(v, dtype=np.float32)  # the ITEM value's cast (float64 smoothed tracks)
        out = np.empty(k * bound, np.uint8)
        sizes = np.empty(k, np.int64)
        meta = np.empty((k, 3), np.int64)
        size = lib.cf_data_blocks(
            tid,
            s.ctypes.data,
            e.ctypes.data,
            v.ctypes.data,
            n,
            ITEMS_PER_BLOCK,
            lz["zlib_compress_addr"],
            c,
            bound,
            out.ctypes.data,
            sizes.ctypes.data,
            meta.ctypes.data,
        )
        if size < 0:
            return None
        return meta, sizes, out[:size].tobytes()


# --------------------------------------------------------------------------------------------------
# B+ tree (chromosomes) and R-tree (block index)
# --------------------------------------------------------------------------------------------------
def _level_sizes(n: int, block: int) -> list[int]:
    """Node counts per tree level, root first (a tree over n >= 1 items)."""
    sizes = [max(1, -(-n // block))]
    while sizes[0] > 1:
        sizes.insert(0, -(-sizes[0] // block))
    return sizes


def chrom_tree(names: list[str], sizes: list[int], file_offset: int) -> bytes:
    """Chromosome B+ tree written at ``file_offset``: keys sorted bytewise (lookups binary-search them), values
    (id, size), id = file order. Over 256 chromosomes the tree has inner nodes, whose child offsets are absolute
    file offsets (readers seek to them)."""
    keys = [n.encode() for n in names]
    n = len(keys)
    key_size = max(1, max((len(k) for k in keys), default=1))
    block = max(1, min(RTREE_BLOCK, n))
    order = sorted(range(n), key=lambda i: keys[i])
    out = [struct.pack("<IIIIQQ", CHROM_TREE_MAGIC, block, key_size, 8, n, 0)]
    levels = _level_sizes(n, block)
    leaf_bytes = 4 + block * (key_size + 8)
    # every node is padded to `block` slots, so node offsets follow from their index
    base = file_offset + 32
    level_start = []
    pos = base
    for cnt in levels:
        level_start.append(pos)
        pos += cnt * leaf_bytes  # leaf and non-leaf slots are both key_size + 8 bytes
    items_per_node = [block ** (len(levels) - d) for d in range(len(levels))]  # items under one node (at most)
    for d, cnt in enumerate(levels):
        leaf = d == len(levels) - 1
        span = items_per_node[d]
        for j in range(cnt):
            first = j * span
            if leaf:
                members = order[first : first + block]
                body = b"".join(keys[i].ljust(key_size, b"\0") + struct.pack("<II", i, sizes[i]) for i in members)
            else:
                child_span = items_per_node[d + 1]
                members = [c for c in range(j * block, min((j + 1) * block, levels[d + 1]))]
                body = b"".join(
                    keys[order[c * child_span]].ljust(key_size, b"\0")
                    + struct.pack("<Q", level_start[d + 1] + c * leaf_bytes)
                    for c in members
                )
            out.append(
                struct.pack("<BBH", 1 if leaf else 0, 0, len(members))
                + body
                + b"\0" * ((block - len(members)) * (key_size + 8))
            )
    return b"".join(out)


def rtree(
    chrom0: np.ndarray,
    start: np.ndarray,
    chrom1: np.ndarray,
    end: np.ndarray,
    offset: np.ndarray,
    size: np.ndarray,
    file_offset: int,
    end_of_data: int,
    items_per_slot: int,
) -> bytes:
    """R-tree index (cirTree) over sorted blocks, written at ``file_offset``: header, then levels root first.

    Nodes are padded to RTREE_BLOCK slots (as UCSC writes them), so every child offset is computed.
    """
    out = io.BytesIO()
    cols = (chrom0, start, chrom1, end, offset, size)
    write_rtree(out, len(start), lambda: iter([cols]), file_offset, end_of_data, items_per_slot)
    return out.getvalue()


def _whole_nodes(chunks, B: int):
    """The (c0, s, c1, e, offset, size) arrays of ``chunks`` regrouped into runs of whole nodes of ``B`` items,
    the last run possibly ending in a partial node."""
    held = None
    for cols in chunks:
        cols = tuple(np.asarray(a) for a in cols)
        if held is not None:
            cols = tuple(np.concatenate([h, a]) for h, a in zip(held, cols))
        k = len(cols[1]) // B * B
        if k:
            yield tuple(a[:k] for a in cols)
        held = tuple(a[k:] for a in cols) if k < len(cols[1]) else None
    if held is not None:
        yield held


def write_rtree(fh, n: int, chunks, file_offset: int, end_of_data: int, items_per_slot: int) -> None:
    """:func:`rtree` written to ``fh`` from its ``n`` items given in order by ``chunks()`` (called twice; each
    call yields (chrom0, start, chrom1, end, offset, size) arrays of consecutive items), holding one chunk and the
    levels above the leaves (an item in RTREE_BLOCK) instead of every item: the data index of a bigWig that
    changes at almost every base has ~0.4 M blocks a file at 4 Gbp, and the whole-array build took ~170 bytes a
    block (idx, keys, boxes, items, node bytes, the joined tree) at each of BIGWIG's six closes."""
    B = RTREE_BLOCK
    levels = _level_sizes(n, B)
    node_bytes = [4 + B * 24] * (len(levels) - 1) + [4 + B * 32]  # inner nodes, then the leaves
    level_start = []
    pos = file_offset + 48
    for cnt, nb in zip(levels, node_bytes):
        level_start.append(pos)
        pos += cnt * nb
    # pass 1: each leaf node's box, then the header and the inner levels, root first
    leaf_boxes = _leaf_boxes(chunks(), B, n)
    fh.write(_rtree_header(n, leaf_boxes, end_of_data, items_per_slot))
    for d, (c0, s, end_key) in enumerate(_inner_boxes(leaf_boxes, len(levels), B)):
        off = level_start[d + 1] + np.arange(len(s), dtype=np.uint64) * node_bytes[d + 1]
        _write_nodes(
            fh,
            B,
            (c0, s, (end_key >> np.uint64(32)).astype(np.uint32), (end_key & np.uint64(0xFFFFFFFF)).astype(np.uint32)),
            off,
            None,
        )
    # pass 2: the leaves, a chunk at a time
    wrote = 0
    for c0, s, c1, e, off, size in _whole_nodes(chunks(), B):
        _write_nodes(fh, B, (c0, s, c1, e), off, size)
        wrote += len(s)
    if not n:  # the empty tree: one leaf node without items
        fh.write(struct.pack("<BBH", 1, 0, 0) + b"\0" * (B * 32))
    elif wrote != n:
        raise ValueError(f"R-tree of {n} items given {wrote}")


def _leaf_boxes(chunks, B: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The box of each leaf node of the ``n`` items of ``chunks`` (None when ``n`` is 0): its first chrom (uint32,
    shape (nodes,)) and start (uint32) and its largest (chrom << 32 | end) (uint64): not always its last child's
    when items overlap, as bigBed features do; for the sorted, disjoint blocks of a bigWig it is the last one's."""
    c0s, ss, keys = [], [], []
    for c0, s, c1, e, _, _ in _whole_nodes(chunks, B):
        key = (np.asarray(c1, np.uint64) << np.uint64(32)) | np.asarray(e, np.uint64)
        first = np.arange(0, len(s), B)
        c0s.append(np.asarray(c0, np.uint32)[first])
        ss.append(np.asarray(s, np.uint32)[first])
        keys.append(np.maximum.reduceat(key, first))
    if not n:
        return None
    c0, s, end_key = (np.concatenate(x) for x in (c0s, ss, keys))
    return c0, s, end_key


def _rtree_header(n: int, leaf_boxes, end_of_data: int, items_per_slot: int) -> bytes:
    """The R-tree's 48-byte header: its ``n`` items' bounding box from ``leaf_boxes`` (:func:`_leaf_boxes`; None
    for the empty tree, whose box is all 0)."""
    if leaf_boxes is None:
        return struct.pack("<IIQIIIIQII", RTREE_MAGIC, RTREE_BLOCK, 0, 0, 0, 0, 0, end_of_data, items_per_slot, 0)
    c0, s, end_key = leaf_boxes
    top = int(end_key.max())
    return struct.pack(
        "<IIQIIIIQII",
        RTREE_MAGIC,
        RTREE_BLOCK,
        n,
        int(c0[0]),
        int(s[0]),
        top >> 32,
        top & 0xFFFFFFFF,
        end_of_data,
        items_per_slot,
        0,
    )


def _inner_boxes(leaf_boxes, n_levels: int, B: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The items of the inner levels, root level first: (c0, s, end key) of each node of the level below, from the
    leaves' ``leaf_boxes`` (:func:`_leaf_boxes`) up, a parent's box the union of its ``B`` children's."""
    boxes = []
    if n_levels > 1:
        boxes.append(leaf_boxes)
        while len(boxes) < n_levels - 1:
            c0, s, end_key = boxes[-1]
            first = np.arange(0, len(s), B)
            boxes.append((c0[first], s[first], np.maximum.reduceat(end_key, first)))
    return boxes[::-1]


def _write_nodes(fh, B: int, box: tuple, off: np.ndarray, size: np.ndarray | None) -> None:
    """Write the nodes of one R-tree level: blocks of ``B`` items, each (c0, s, c1, e) of ``box`` with its child or
    data offset ``off`` (uint64) and, for leaves (``size`` given), the data size; each node with its header (leaf
    flag, item count) and padded to ``B`` items."""
    m = len(box[1])
    leaf = size is not None
    if leaf:
        items = np.zeros(
            m, dtype=[("c0", "<u4"), ("s", "<u4"), ("c1", "<u4"), ("e", "<u4"), ("off", "<u8"), ("size", "<u8")]
        )
        items["size"] = size
    else:
        items = np.zeros(m, dtype=[("c0", "<u4"), ("s", "<u4"), ("c1", "<u4"), ("e", "<u4"), ("off", "<u8")])
    items["off"] = off
    items["c0"], items["s"], items["c1"], items["e"] = box
    raw = items.tobytes()
    isz = items.dtype.itemsize
    for j in range(-(-m // B)):
        k = min(B, m - j * B)
        fh.write(
            struct.pack("<BBH", 1 if leaf else 0, 0, k) + raw[j * B * isz : (j * B + k) * isz] + b"\0" * ((B - k) * isz)
        )


# --------------------------------------------------------------------------------------------------
# zoom levels
# --------------------------------------------------------------------------------------------------
def _bin_records(s: np.ndarray, e: np.ndarray, v: np.ndarray, z: int) -> tuple:
    """Level-0 records of sorted, non-overlapping intervals, bins [b·z, (b+1)·z) (only bins with data).

    Per bin: a reduceat over the intervals that end inside it ([lo_b, lo_b+1), lo_b = first interval ending
    after the bin start), minus the part of interval lo_b before the bin, plus the part of interval lo_b+1
    (which crosses the bin end) inside the bin. Sums in float64 are exact for integer data. min/max reduce over
    every interval overlapping the bin. No per-bin splitting of the intervals.
    """
    n = len(s)
    s = s.astype(np.int64, copy=False)
    e = e.astype(np.int64, copy=False)
    b_first = int(s[0]) // z
    b_last = (int(e[-1]) - 1) // z
    edges = np.arange(b_first, b_last + 2, dtype=np.int64) * z
    edges[0] = s[0]
    edges[-1] = e[-1]
    lo = np.searchsorted(e, edges, side="right")  # first interval that ends after each edge (n: none)
    lo_b = lo[:-1]
    lo_n = lo[1:]  # the interval crossing each bin's end (n after the last bin)
    ln = e - s
    v64 = v.astype(np.float64)
    lv = ln * v64
    lvv = lv * v64
    has = lo_n > lo_b  # the bin holds the end of at least one interval
    idx = np.minimum(lo_b, n - 1)
    cnt = np.add.reduceat(ln, idx).astype(np.float64)
    sm = np.add.reduceat(lv, idx)
    sq = np.add.reduceat(lvv, idx)
    cnt[~has] = 0.0
    sm[~has] = 0.0
    sq[~has] = 0.0
    vb = v64[idx]
    # part of interval lo_b before the bin (only when the reduceat counted it whole; else "post" has it)
    pre = np.where(has, np.clip(edges[:-1] - s[idx], 0, None), 0).astype(np.float64)
    cnt -= pre
    sm -= pre * vb
    sq -= pre * vb * vb
    k = np.minimum(lo_n, n - 1)
    post = np.where(lo_n < n, np.clip(edges[1:] - np.maximum(s[k], edges[:-1]), 0, None), 0).astype(np.float64)
    vk = v64[k]
    cnt += post
    sm += post * vk
    sq += post * vk * vk
    hi = np.searchsorted(s, edges[1:], side="left") - 1  # last interval starting before each bin's end
    bins = np.arange(b_first, b_last + 1, dtype=np.int64)
    keep = cnt > 0
    if not keep.all():  # gaps between intervals: bins without data get no record
        bins, lo_b, hi, cnt, sm, sq = bins[keep], lo_b[keep], hi[keep], cnt[keep], sm[keep], sq[keep]
    mn = np.minimum.reduceat(v, lo_b)
    mx = np.maximum.reduceat(v, lo_b)
    # reduceat covers [lo_b, next lo_b); the interval crossing into the next bin (hi) also belongs to this one
    np.minimum(mn, v[hi], out=mn)
    np.maximum(mx, v[hi], out=mx)
    start = np.maximum(bins * z, s[lo_b])
    end = np.minimum((bins + 1) * z, e[hi])
    return bins, start, end, cnt.astype(np.int64), mn, mx, sm, sq


def _coarsen(rec: tuple, factor: int) -> tuple:
    b, st, en, cnt, mn, mx, sm, sq = rec
    nb = b // factor
    grp = np.flatnonzero(nb[1:] != nb[:-1]) + 1
    idx = np.concatenate([[0], grp])
    last = np.concatenate([grp - 1, [len(nb) - 1]])
    return (
        nb[idx],
        st[idx],
        en[last],
        np.add.reduceat(cnt, idx),
        np.minimum.reduceat(mn, idx),
        np.maximum.reduceat(mx, idx),
        np.add.reduceat(sm, idx),
        np.add.reduceat(sq, idx),
    )


def _bin_records_native(s: np.ndarray, e: np.ndarray, v: np.ndarray, z: int) -> tuple | None:
    """_bin_records in one C pass over the intervals (None without the C kernels)."""
    from . import _native

    lib = _native.load()
    if lib is None:
        return None
    s = np.ascontiguousarray(s, dtype=np.int64)
    e = np.ascontiguousarray(e, dtype=np.int64)
    v = np.ascontiguousarray(v, dtype=np.float32)
    n = len(s)
    cap = n + int(e[-1] - s[0]) // z + 2
    out = (
        [np.empty(cap, np.int64) for _ in range(4)]
        + [np.empty(cap, np.float32) for _ in range(2)]
        + [np.empty(cap, np.float64) for _ in range(2)]
    )
    k = lib.cf_zoom0(s.ctypes.data, e.ctypes.data, v.ctypes.data, n, z, *(a.ctypes.data for a in out))
    # copies, not views: the buffers are sized for the worst case (a record per interval), ~16x the records the
    # first reduction (16 x the mean interval length) leaves; views kept every queued result at that size (issue 30)
    return tuple(a[:k].copy() for a in out)


def zoom_records(s: np.ndarray, e: np.ndarray, v: np.ndarray, zs: list[int]) -> list[tuple]:
    """Records of every zoom level for one run of intervals (partial bins at both ends included)."""
    rec = _bin_records_native(s, e, v, zs[0])
    if rec is None:
        rec = _bin_records(s, e, v, zs[0])
    out = [rec]
    for a, b in zip(zs, zs[1:]):
        rec = _coarsen(rec, b // a)
        out.append(rec)
    return out


def zoom_ladder(z0: int, largest: int) -> list[int]:
    """Zoom reductions z0, ×4 per level, while they fit the largest chromosome, at most ZOOM_SLOTS levels."""
    zs: list[int] = []
    z = z0
    while z <= largest and len(zs) < ZOOM_SLOTS:
        zs.append(z)
        z *= 4
    return zs


def _combine(a: tuple, b: tuple) -> tuple:
    return (a[0], a[1], b[2], a[3] + b[3], min(a[4], b[4]), max(a[5], b[5]), a[6] + b[6], a[7] + b[7], a[8])


class _LevelStream:
    """Records of one zoom level in order, across chromosomes (a block runs on into the next chromosome, as
    kent's bbiWrite.c and our bigBed writer do: a draft assembly's 50,000 contigs made 50,000 tiny blocks a level).
    The last record is held back: its bin may go on in the next piece (records of the same bin are combined: counts
    and sums add, min/max reduce) until its chromosome ends (:meth:`end_chrom`)."""

    def __init__(self):
        self.carry: tuple | None = None
        self.parts: list[tuple] = []  # complete records not yet in a block (tuples of 9 arrays: 8 fields, tid)
        self.n = 0

    def add(self, rec: tuple, tid: int) -> None:
        """Append one piece's records of this level for chromosome ``tid`` (a tuple of 8 field arrays): the first is
        combined with the held-back record where they share a bin, the last is held back."""
        n = len(rec[0])
        if n == 0:
            return
        rec = (*rec, np.full(n, tid, dtype=np.int64))
        first = tuple(a[0] for a in rec)
        if self.carry is not None:
            if first[0] == self.carry[0]:
                first = _combine(self.carry, first)
            else:
                self._one(self.carry)
            self.carry = None
        if n == 1:
            self.carry = first
            return
        self._one(first)
        if n > 2:
            self.parts.append(tuple(a[1:-1] for a in rec))
            self.n += n - 2
        self.carry = tuple(a[-1] for a in rec)

    def _one(self, r: tuple) -> None:
        self.parts.append(tuple(np.array([x]) for x in r))
        self.n += 1

    def end_chrom(self) -> None:
        """The chromosome ended: its last record is complete."""
        if self.carry is not None:
            self._one(self.carry)
            self.carry = None

    def take(self, final: bool) -> tuple | None:
        """Whole blocks of records (all of them with ``final``, at the end of the file), as 9 arrays."""
        if final:
            self.end_chrom()
        k = self.n if final else self.n // RECORDS_PER_BLOCK * RECORDS_PER_BLOCK
        if not k:
            return None
        cat = [
            np.concatenate([p[i] for p in self.parts]) if len(self.parts) > 1 else self.parts[0][i] for i in range(9)
        ]
        self.parts = [tuple(a[k:] for a in cat)] if k < self.n else []
        self.n -= k
        return tuple(a[:k] for a in cat)


def _data_blocks(tid: int, s: np.ndarray, e: np.ndarray, v: np.ndarray, compress) -> tuple:
    """(meta (k, 3) int64: tid, start, end of each block; compressed sizes (k,); the compressed blocks as one bytes)
    for items in blocks of ITEMS_PER_BLOCK (last one may be short): in C where ``compress`` can (libdeflate), else
    :func:`_data_blocks_py`."""
    native = getattr(compress, "data_blocks", None)
    got = native(tid, s, e, v) if native is not None else None
    if got is not None:
        return got
    blocks = _data_blocks_py(tid, s, e, v, compress)
    meta = np.array([m for m, _ in blocks], np.int64).reshape(-1, 3)
    return meta, np.array([len(b) for _, b in blocks], np.int64), b"".join(b for _, b in blocks)


def _data_blocks_py(tid: int, s: np.ndarray, e: np.ndarray, v: np.ndarray, compress) -> list:
    """[((tid, start, end), compressed block)] for items in blocks of ITEMS_PER_BLOCK (last one may be short)."""
    n = len(s)
    items = np.empty(n, dtype=ITEM)
    items["start"] = s
    items["end"] = e
    items["value"] = v
    raw = memoryview(items.view(np.uint8))  # type: ignore[arg-type]  # numpy stubs: ndarray.__buffer__ only on 3.12+
    out = []
    for a in range(0, n, ITEMS_PER_BLOCK):
        b = min(a + ITEMS_PER_BLOCK, n)
        st = int(s[a])
        en = int(e[b - 1])
        hdr = struct.pack("<IIIIIBBH", tid, st, en, 0, 0, 1, 0, b - a)
        out.append(((tid, st, en), compress(hdr + raw[a * 12 : b * 12])))
    return out


def record_blocks(recs: np.ndarray, compress) -> list:
    """[((first tid, start, last tid, end), compressed block)] for zoom records (a RECORD array, in order; a block
    may run across chromosomes) in blocks of RECORDS_PER_BLOCK: the bigWig and bigBed writers' zoom blocks."""
    n = len(recs)
    raw = memoryview(recs.view(np.uint8))  # type: ignore[arg-type]  # numpy stubs: ndarray.__buffer__ only on 3.12+
    out = []
    for a in range(0, n, RECORDS_PER_BLOCK):
        b = min(a + RECORDS_PER_BLOCK, n)
        out.append(
            (
                (int(recs["chrom"][a]), int(recs["start"][a]), int(recs["chrom"][b - 1]), int(recs["end"][b - 1])),
                compress(raw[a * RECORD.itemsize : b * RECORD.itemsize]),
            )
        )
    return out


def _zoom_blocks(rec: tuple, compress) -> list:
    """:func:`record_blocks` of a level stream's records (9 arrays: the 8 fields by bin, then their chromosomes)."""
    recs = np.empty(len(rec[0]), dtype=RECORD)
    recs["chrom"] = rec[8]
    for name, a in zip(("start", "end", "count", "min", "max", "sum", "sumsq"), rec[1:8]):
        recs[name] = a
    return record_blocks(recs, compress)


def write_index_and_zooms(
    fh, index: Records, items_per_slot: int, zs: list[int], zblocks: list[Records], zcount: list[int], spill: Spill
) -> tuple[int, list[bytes]]:
    """The tail of a bigWig/bigBed at ``fh``'s position: the data R-tree over ``index`` (tid, start, end, offset,
    size per block), then per zoom level its blocks (copied from ``spill``: (tid0, start, tid1, end, spill offset,
    size) each) and their R-tree, stopping after the first level with one record per chromosome (coarser levels
    would repeat it). Returns (data index offset, the zoom headers to put after the file header)."""
    index_offset = fh.tell()
    tids = set()

    def chunks():
        """The data index's items, chunk by chunk, as (chrom0, start, chrom1, end, offset, size) arrays; notes every
        chromosome id seen in ``tids``."""
        for a in index.arrays():
            tids.update(np.unique(a[:, 0]).tolist())
            yield a[:, 0], a[:, 1], a[:, 0], a[:, 2], a[:, 3], a[:, 4]

    write_rtree(fh, len(index), chunks, index_offset, index_offset, items_per_slot)
    zoom_headers = []
    n_chroms = len(tids) or 1
    for k, z in enumerate(zs):
        blocks = zblocks[k].to_array()
        if not len(blocks):
            break
        data_off = fh.tell()
        fh.write(struct.pack("<I", len(blocks)))
        sizes = blocks[:, 5]
        offs = data_off + 4 + np.concatenate([[0], np.cumsum(sizes[:-1])]).astype(np.int64)
        for so, sz in zip(blocks[:, 4].tolist(), sizes.tolist()):
            fh.write(spill.read(so, sz))
        zi = fh.tell()
        fh.write(rtree(blocks[:, 0], blocks[:, 1], blocks[:, 2], blocks[:, 3], offs, sizes, zi, zi, RECORDS_PER_BLOCK))
        zoom_headers.append(struct.pack("<IIQQ", z, 0, data_off, zi))
        if zcount[k] <= n_chroms:
            break
    return index_offset, zoom_headers


# --------------------------------------------------------------------------------------------------
# the writer
# --------------------------------------------------------------------------------------------------
class BigWigWriter:
    """Streaming bigWig writer: ``write`` intervals chromosome by chromosome (sorted), then ``close``.

    ``pool``: threads for packing, zoom records and compression (None: all inline). ``level``: deflate level
    (libdeflate 1–12, or zlib 1–9 with ``method="zlib"``). The calling thread only does O(1) work per
    ``write`` plus merging a few records per zoom level; results are written in submission order.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        chroms: list[tuple[str, int]],
        pool: ThreadPoolExecutor | None = None,
        level: int = 1,
        method: str = "libdeflate",
    ):
        self.path = Path(path)
        self.names = [c for c, _ in chroms]
        self.sizes = [int(s) for _, s in chroms]
        for name, size in chroms:
            if not 0 < size < 2**32:
                raise ChromaflowError(
                    f"{path}: chromosome {name!r} of {size} bp cannot be stored in a bigWig "
                    "(sizes must be 1 .. 4,294,967,295)"
                )
        self.tid_of = {c: i for i, c in enumerate(self.names)}
        self.pool = pool
        self.compress = _compressor(level, method)
        self.fh = open(self.path, "wb")
        self.fh.write(b"\0" * (HEADER_BYTES + ZOOM_SLOTS * 24 + SUMMARY_BYTES))
        self.chrom_tree_offset = self.fh.tell()
        self.fh.write(chrom_tree(self.names, self.sizes, self.chrom_tree_offset))
        self.data_offset = self.fh.tell()
        self.fh.write(b"\0" * 8)  # block count, filled in at close
        self.count = 0  # intervals written
        self._tid = -1
        self._last_end = 0
        self._left: list[tuple] = []  # slices of the current chromosome not yet in a block
        self._left_n = 0
        self._queue: list[tuple] = []  # ("data", result) / ("zoom", tid, result) / ("zblock", level, result) / ("end",)
        # the zoom blocks and both indexes' block records go to an anonymous file beside the output (Records)
        self._spill = Spill(self.path)
        self._index = Records(5, self._spill)  # (tid, start, end, offset, size) per data block
        self._totals = [0, 0.0, 0.0, np.inf, -np.inf]  # bases, sum, sum of squares, min, max
        # zoom levels: undecided until ZOOM_SAMPLE intervals were written (or close)
        self._sample: list[tuple] | None = []
        self._sample_n = 0
        self._zs: list[int] = []
        self._streams: list[_LevelStream] = []
        self._zblocks: list[Records] = []  # per level: (tid0, start, tid1, end, spill offset, size) per block
        self._zcount: list[int] = []

    def _submit(self, fn, *args, items: int):
        """``fn(*args)`` in the pool (a Future), or here (its result) without a pool or for fewer than
        INLINE_ITEMS intervals/records: a contig of a few kbp made ~7 tiny tasks a track (data, zoom records, one
        block per zoom level), whose hand-offs cost more than their work (5,000 contigs, 6 tracks, 2 threads:
        29 s against 18 s with one thread). The output is the same: the queue keeps the order."""
        if self.pool is None or items < INLINE_ITEMS:
            return fn(*args)
        return self.pool.submit(fn, *args)

    # ---------------------------------------------------------------- data
    def write(self, chrom: str, starts: np.ndarray, ends: np.ndarray, values: np.ndarray) -> None:
        """Add the sorted intervals of ``chrom`` (``starts``, ``ends``: (n,) 0-based, half-open; ``values``: (n,)) after
        those written before. Chromosomes come in the order of ``chroms`` and intervals in ascending order, else
        ChromaflowError."""
        n = len(starts)
        if not n:
            return
        tid = self.tid_of[chrom]
        if tid != self._tid:
            if tid < self._tid:
                raise ChromaflowError(f"{self.path}: chromosome {chrom!r} written out of order")
            self._end_chrom()
            self._tid = tid
            self._last_end = 0
        s = np.asarray(starts)
        e = np.asarray(ends)
        v = np.asarray(values)
        if int(s[0]) < self._last_end:
            raise ChromaflowError(f"{self.path}: intervals of {chrom!r} out of order at {int(s[0])}")
        self._last_end = int(e[-1])
        self.count += n
        # data blocks: the first items complete the pending short block, whole blocks go to the pool
        head = min(n, ITEMS_PER_BLOCK - self._left_n) if self._left_n else 0
        if head:
            self._left.append((s[:head], e[:head], v[:head]))
            self._left_n += head
            if self._left_n == ITEMS_PER_BLOCK:
                self._flush_left()
        full = (n - head) // ITEMS_PER_BLOCK * ITEMS_PER_BLOCK
        step = ITEMS_PER_BLOCK * BLOCKS_PER_TASK
        for a in range(head, head + full, step):
            b = min(a + step, head + full)
            self._queue.append(
                ("data", self._submit(_data_blocks, tid, s[a:b], e[a:b], v[a:b], self.compress, items=b - a))
            )
        if head + full < n:
            self._left.append((s[head + full :], e[head + full :], v[head + full :]))
            self._left_n += n - head - full
        # zoom records
        if self._sample is not None:
            self._sample.append(("piece", tid, s, e, v))
            self._sample_n += n
            if self._sample_n >= ZOOM_SAMPLE:
                self._decide_zoom()
        else:
            self._queue_zoom(tid, s, e, v)
        self._drain(block=len(self._queue) > 256)

    def _queue_zoom(self, tid: int, s, e, v) -> None:
        for a in range(0, len(s), ZOOM_TASK):  # small tasks: small temporaries (no fresh pages per call)
            b = a + ZOOM_TASK
            self._queue.append(
                ("zoom", tid, self._submit(zoom_records, s[a:b], e[a:b], v[a:b], self._zs, items=len(s[a:b])))
            )

    def _flush_left(self) -> None:
        if not self._left_n:
            return
        s, e, v = (np.concatenate([p[i] for p in self._left]) for i in range(3))
        self._left = []
        self._left_n = 0
        self._queue.append(("data", self._submit(_data_blocks, self._tid, s, e, v, self.compress, items=len(s))))

    def _end_chrom(self) -> None:
        if self._tid < 0:
            return
        self._flush_left()
        if self._sample is not None:
            self._sample.append(("end",))
        else:
            self._queue.append(("end",))

    # ---------------------------------------------------------------- zoom
    def _decide_zoom(self) -> None:
        """First reduction = 16 × floor(mean interval length) of the first ZOOM_SAMPLE intervals, then ×4."""
        sample = cast("list[tuple]", self._sample)  # called while sampling
        self._sample = None
        n = 0
        total = 0
        for ev in sample:
            if ev[0] != "piece":
                continue
            _, _, s, e, _ = ev
            take = min(len(s), ZOOM_SAMPLE - n)
            total += int((e[:take] - s[:take]).sum())
            n += take
            if n >= ZOOM_SAMPLE:
                break
        largest = max(self.sizes)
        self._zs = zoom_ladder(16 * max(1, total // max(n, 1)), largest) or [largest]
        self._streams = [_LevelStream() for _ in self._zs]
        self._zblocks = [Records(6, self._spill) for _ in self._zs]
        self._zcount = [0] * len(self._zs)
        # replayed in order, drained as it goes and let go of piece by piece: a track with fewer than ZOOM_SAMPLE
        # intervals in all (a near-constant track over 20,000 contigs) is decided at close, and queueing its
        # whole sample at once held every piece's zoom task: +240 MB per such file at 20,000 contigs
        sample.reverse()
        while sample:
            ev = sample.pop()
            if ev[0] == "piece":
                _, tid, s, e, v = ev
                self._queue_zoom(tid, s, e, v)
            else:
                self._queue.append(ev)
            del ev
            self._drain(block=len(self._queue) > 256)

    def _take_records(self, k: int, final: bool) -> None:
        rec = self._streams[k].take(final)
        if rec is not None:
            self._zcount[k] += len(rec[0])
            self._queue.append(("zblock", k, self._submit(_zoom_blocks, rec, self.compress, items=len(rec[0]))))

    # ---------------------------------------------------------------- output in order
    def _drain(self, block: bool) -> None:
        q = self._queue
        while q:
            ev = q[0]
            res: Any = ev[-1] if ev[0] != "end" else None  # a future's result: the kind's own type
            if isinstance(res, Future):
                if not block and not res.done():
                    return
                res = res.result()
            q.pop(0)
            kind = ev[0]
            if kind == "data":
                meta, sizes, blob = res
                offsets = self.fh.tell() + np.cumsum(sizes) - sizes
                self._index.extend(np.column_stack([meta, offsets, sizes]))
                self.fh.write(blob)
            elif kind == "zoom":
                tid = ev[1]
                r0 = res[0]
                t = self._totals
                t[0] += int(r0[3].sum())
                t[1] += float(r0[6].sum())
                t[2] += float(r0[7].sum())
                t[3] = min(t[3], float(r0[4].min()))
                t[4] = max(t[4], float(r0[5].max()))
                for k, rec in enumerate(res):
                    self._streams[k].add(rec, tid)
                    if self._streams[k].n >= RECORDS_PER_BLOCK:
                        self._take_records(k, False)
            elif kind == "end":  # the chromosome's last records are complete; blocks run on into the next
                for stream in self._streams:
                    stream.end_chrom()
            else:  # zblock
                k = ev[1]
                for meta, blob in res:
                    self._zblocks[k].extend((*meta, self._spill.append(blob), len(blob)))

    # ---------------------------------------------------------------- finish
    def close(self) -> None:
        """Finish the file: flush the remaining data and zoom blocks, write the data index and zoom levels, then the
        header, zoom headers, summary and block count; the file and spill are closed even on failure."""
        try:
            self._end_chrom()
            if self._sample is not None and self._sample_n:
                self._decide_zoom()
            self._drain(block=True)
            for k in range(len(self._streams)):  # the last block of every level
                self._take_records(k, True)
            self._drain(block=True)
            fh = self.fh
            n_blocks = len(self._index)
            index_offset, zoom_headers = write_index_and_zooms(
                fh, self._index, ITEMS_PER_BLOCK, self._zs, self._zblocks, self._zcount, self._spill
            )
            fh.write(struct.pack("<I", BIGWIG_MAGIC))
            fh.seek(0)
            fh.write(
                struct.pack(
                    "<IHHQQQHHQQIQ",
                    BIGWIG_MAGIC,
                    4,
                    len(zoom_headers),
                    self.chrom_tree_offset,
                    self.data_offset,
                    index_offset,
                    0,
                    0,
                    0,
                    HEADER_BYTES + ZOOM_SLOTS * 24,
                    UNCOMPRESS_BUF,
                    0,
                )
            )
            fh.write(b"".join(zoom_headers))
            fh.seek(HEADER_BYTES + ZOOM_SLOTS * 24)
            bases, sm, sq, mn, mx = self._totals
            if not bases:
                mn = mx = 0.0
            fh.write(struct.pack("<Qdddd", bases, mn, mx, sm, sq))
            fh.seek(self.data_offset)
            fh.write(struct.pack("<Q", n_blocks))
        finally:
            self._release()

    def abort(self) -> None:
        """Give up the file: cancel the queued work and close the file and spill without finishing them."""
        for ev in self._queue:
            if isinstance(ev[-1], Future):
                ev[-1].cancel()
        self._queue = []
        self._release()

    def _release(self) -> None:
        self.fh.close()
        self._spill.close()


class PyBigWigWriter:
    """The pyBigWig library (libBigWig): Predmoter's writer. Same header and intervals give the same bytes as
    Predmoter's .bw files (FORMATS §5.6). Entries are added per piece; pyBigWig appends the later calls of a
    chromosome to the first, so the file equals one call per chromosome (or Predmoter's one per block)."""

    def __init__(self, path: str | os.PathLike, chroms: list[tuple[str, int]]):
        import pyBigWig

        self.bw = pyBigWig.open(str(path), "w")
        if self.bw is None:
            raise ChromaflowError(f"{path}: cannot open for writing")
        self.bw.addHeader([(c, int(s)) for c, s in chroms])
        self.count = 0

    def write(self, chrom: str, starts, ends, values) -> None:
        """Add the intervals of ``chrom`` (values as float64) through pyBigWig."""
        n = len(starts)
        self.count += n
        if n:
            self.bw.addEntries([chrom] * n, starts, ends=ends, values=np.asarray(values, dtype=np.float64))

    def close(self) -> None:
        """Close the pyBigWig file, which writes it out."""
        self.bw.close()

    def abort(self) -> None:
        """Close the pyBigWig file (pyBigWig has no way to abandon one)."""
        self.bw.close()
