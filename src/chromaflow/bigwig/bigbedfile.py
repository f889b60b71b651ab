"""chromaflow's streaming bigBed writer (the peaks' bigNarrowPeak, the promoters' bigBed 6).

Why our own writer: pybigtools (0.3, Rust), which wrote these files before, keeps ~45 KB per chromosome that holds a
feature until it closes the file: a draft assembly of 50,000 contigs with a peak on each needs ~2.2 GB for a file
of a few MB (measured in docs/scale.md). pyBigWig cannot write bigBed, and UCSC's bedToBigBed is not a Python
dependency. This writer holds one block of rows (``ITEMS_PER_SLOT``), one chromosome's feature coordinates (for
the coverage zoom levels) and one index entry per block; memory does not grow with the chromosome count.

Layout (bigBed of Kent et al. 2010, as UCSC's bedToBigBed writes it and every browser reads it), reusing the
bigWig writer's chromosome B+ tree and R-tree (bigwigfile.py):

* header, 10 zoom-header slots, autoSql (NUL-terminated), total summary, chromosome B+ tree (every chromosome
  given, keys sorted bytewise, ids in that order), data section (uint64 item count, zlib blocks of up to
  ``ITEMS_PER_SLOT`` rows, never across chromosomes; a row is chromId, start, end as uint32 then the other fields
  tab-joined and NUL-terminated), R-tree index over the blocks, then per zoom level its records (blocks of up to
  1024, running on across chromosomes) and index; the magic again at the end. uncompressBufSize is the largest
  uncompressed block.
* Zoom levels summarise coverage depth (the number of features over each base), as bedToBigBed's do for a
  browser's dense view: reduction z0 = 10 × mean feature length (at least 10 bp), then ×4 per level while z fits
  the largest chromosome, at most 10 levels, stopping after the first level with one record per chromosome.
  A record's validCount is the bases covered (each once), its sum the depth summed over them (each feature once per
  base, as in bedToBigBed), min/max the depths met (bedToBigBed adds each feature as its own range of value 1, so
  its validCount counts a base once per feature and its max stays 1).
* Rows must come sorted by chromosome (bytewise name) and start (zero-length features, BED's insertion points, are
  kept and cover nothing); the file is written under a temporary name
  and renamed (an error leaves nothing).
"""

from __future__ import annotations

import gzip
import os
import struct
from array import array
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .spool import Records, Spill
from ..utils.errors import ChromaflowError
from ..utils.outputs import atomic_output, naming_errors
from .bigwigfile import (
    HEADER_BYTES,
    RECORD,
    RECORDS_PER_BLOCK,
    SUMMARY_BYTES,
    ZOOM_SLOTS,
    chrom_tree,
    record_blocks,
    write_index_and_zooms,
    zoom_ladder,
    zoom_records,
)

BIGBED_MAGIC = 0x8789F2EB
ITEMS_PER_SLOT = 512  # bedToBigBed's default -itemsPerSlot
ZLIB_LEVEL = 6
MIN_ZOOM = 10

Row = tuple[str, int, int, str]  # chrom, start, end, the other fields tab-joined ("" for BED3)


def _depth_runs(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted, disjoint runs of positive coverage depth of the features [s, e) (any order, may overlap)."""
    pos = np.concatenate([s, e])
    step = np.concatenate([np.ones(len(s), np.int64), -np.ones(len(e), np.int64)])
    order = np.argsort(pos, kind="stable")
    pos, step = pos[order], step[order]
    cut = np.flatnonzero(np.diff(pos)) + 1  # positions where the depth may change
    first = np.concatenate([[0], cut])
    at = pos[first]
    depth = np.cumsum(np.add.reduceat(step, first))
    keep = depth[:-1] > 0
    return at[:-1][keep], at[1:][keep], depth[:-1][keep].astype(np.float32)


class BigBedWriter:
    """Write rows in order with ``add``, then ``close`` (or ``abort``). See the module docstring."""

    def __init__(
        self,
        path: str | os.PathLike,
        chroms: list[tuple[str, int]],
        autosql: str,
        field_count: int,
        defined_field_count: int,
        zooms: list[int],
        name: str | os.PathLike | None = None,
    ):
        self.path = Path(path)
        self.name = str(name or path)  # in messages: the final name when writing to a temporary one
        names = sorted((c for c, _ in chroms), key=str.encode)
        size_of = dict(chroms)
        for c in names:
            if not 0 < int(size_of[c]) < 2**32:
                raise ChromaflowError(
                    f"{self.name}: chromosome {c!r} of {size_of[c]} bp cannot be stored in a "
                    "bigBed (sizes must be 1 .. 4,294,967,295)"
                )
        self.names = names
        self.sizes = [int(size_of[c]) for c in names]
        self.tid_of = {c: i for i, c in enumerate(names)}
        self.field_count, self.defined = field_count, defined_field_count
        self.zs = zooms
        self.fh = open(self.path, "wb")
        sql = autosql.encode() + b"\0"
        self.fh.write(b"\0" * (HEADER_BYTES + ZOOM_SLOTS * 24))
        self.autosql_offset = self.fh.tell()
        self.fh.write(sql)
        self.summary_offset = self.fh.tell()
        self.fh.write(b"\0" * SUMMARY_BYTES)
        self.chrom_tree_offset = self.fh.tell()
        self.fh.write(chrom_tree(names, self.sizes, self.chrom_tree_offset))
        self.data_offset = self.fh.tell()
        self.fh.write(b"\0" * 8)  # item count, filled in at close
        self.count = 0
        self.max_block = RECORDS_PER_BLOCK * 32 if zooms else 0
        self._tid, self._last_start = -1, -1
        self._block: list[bytes] = []
        self._block_box = [0, 0]  # start, max end of the pending block
        self._spill = Spill(self.path)  # zoom blocks and the indexes' block records (spool.Records)
        self._index = Records(5, self._spill)  # (tid, start, end, offset, size) per block
        self._starts = array("q")  # features of the current chromosome (for its zoom records): 8 bytes each
        self._ends = array("q")
        self._totals = [0, 0.0, 0.0, np.inf, -np.inf]  # bases, sum, sum of squares, min, max
        self._pending: list[list[np.ndarray]] = [[] for _ in zooms]  # per level: records not yet in a block
        self._pending_n = [0] * len(zooms)
        # per level: (tid0, start, tid1, end, spill offset, size) per block
        self._zblocks = [Records(6, self._spill) for _ in zooms]
        self._zcount = [0] * len(zooms)
        self._compress = lambda data: zlib.compress(data, ZLIB_LEVEL)

    def add(self, chrom: str, start: int, end: int, rest: str) -> None:
        """Add one row: ``chrom``, ``start``, ``end`` (0-based, half-open, inside the chromosome) and ``rest``, the
        remaining BED fields as text. Rows must come sorted by chromosome (in the writer's order), then start, else
        ChromaflowError."""
        tid = self.tid_of.get(chrom)
        if tid is None:
            raise ChromaflowError(f"{self.name}: row on {chrom!r}, which is not among the chromosomes")
        if not 0 <= start <= end <= self.sizes[tid]:
            raise ChromaflowError(
                f"{self.name}: row {chrom}:{start}-{end} is not inside {chrom} "
                f"(0 .. {self.sizes[tid]}) or ends before it starts"
            )
        if tid != self._tid:
            if tid < self._tid:
                raise ChromaflowError(
                    f"{self.name}: rows of {chrom!r} come after {self.names[self._tid]!r} "
                    "(rows must be sorted by chromosome name bytes, then start)"
                )
            self._end_chrom()
            self._tid, self._last_start = tid, -1
        elif start < self._last_start:
            raise ChromaflowError(
                f"{self.name}: row {chrom}:{start}-{end} comes after a row starting at "
                f"{self._last_start} (rows must be sorted by start)"
            )
        self._last_start = start
        if not self._block:
            self._block_box = [start, end]
        elif end > self._block_box[1]:
            self._block_box[1] = end
        self._block.append(struct.pack("<III", tid, start, end) + rest.encode() + b"\0")
        self._starts.append(start)
        self._ends.append(end)
        self.count += 1
        if len(self._block) == ITEMS_PER_SLOT:
            self._flush_block()

    def _flush_block(self) -> None:
        if not self._block:
            return
        raw = b"".join(self._block)
        self.max_block = max(self.max_block, len(raw))
        blob = self._compress(raw)
        self._index.extend((self._tid, self._block_box[0], self._block_box[1], self.fh.tell(), len(blob)))
        self.fh.write(blob)
        self._block = []

    def _end_chrom(self) -> None:
        if self._tid < 0:
            return
        self._flush_block()
        s: Any = ()  # the depth runs' starts (an ndarray) once the chromosome has features
        if len(self._starts):
            s, e, v = _depth_runs(np.frombuffer(self._starts, np.int64), np.frombuffer(self._ends, np.int64))
        if len(s):  # zero-length features (insertions) cover nothing
            ln = (e - s).astype(np.float64)
            v64 = v.astype(np.float64)
            t = self._totals
            t[0] += int(ln.sum())
            t[1] += float((ln * v64).sum())
            t[2] += float((ln * v64 * v64).sum())
            t[3] = min(t[3], float(v.min()))
            t[4] = max(t[4], float(v.max()))
        if len(s) and self.zs:
            recs = zoom_records(s, e, v, self.zs)
            for k, rec in enumerate(recs):
                r = np.empty(len(rec[0]), dtype=RECORD)
                r["chrom"] = self._tid
                for name, a in zip(("start", "end", "count", "min", "max", "sum", "sumsq"), rec[1:]):
                    r[name] = a
                self._pending[k].append(r)
                self._pending_n[k] += len(r)
                if self._pending_n[k] >= RECORDS_PER_BLOCK:
                    self._zoom_flush(k, final=False)
        self._starts, self._ends = array("q"), array("q")

    def _zoom_flush(self, k: int, final: bool) -> None:
        """Whole blocks of level k's records to the spill file (all of them when ``final``). Unlike data blocks,
        zoom blocks run on across chromosomes, as bedToBigBed's do: a draft assembly's 50,000 contigs would
        otherwise need 50,000 blocks per level."""
        if not self._pending_n[k]:
            return
        recs = np.concatenate(self._pending[k])
        n = len(recs) if final else len(recs) // RECORDS_PER_BLOCK * RECORDS_PER_BLOCK
        for meta, blob in record_blocks(recs[:n], self._compress):
            self._zblocks[k].extend((*meta, self._spill.append(blob), len(blob)))
        self._zcount[k] += n
        self._pending[k] = [recs[n:]] if n < len(recs) else []
        self._pending_n[k] = len(recs) - n

    def close(self) -> None:
        """Finish the file: the last chromosome and zoom blocks, the data index and zoom levels, then the header, zoom
        headers, summary and item count; the file and spill are closed even on failure."""
        try:
            self._end_chrom()
            for k in range(len(self.zs)):
                self._zoom_flush(k, final=True)
            fh = self.fh
            index_offset, zoom_headers = write_index_and_zooms(
                fh, self._index, ITEMS_PER_SLOT, self.zs, self._zblocks, self._zcount, self._spill
            )
            fh.write(struct.pack("<I", BIGBED_MAGIC))
            fh.seek(0)
            fh.write(
                struct.pack(
                    "<IHHQQQHHQQIQ",
                    BIGBED_MAGIC,
                    4,
                    len(zoom_headers),
                    self.chrom_tree_offset,
                    self.data_offset,
                    index_offset,
                    self.field_count,
                    self.defined,
                    self.autosql_offset,
                    self.summary_offset,
                    self.max_block,
                    0,
                )
            )
            fh.write(b"".join(zoom_headers))
            fh.seek(self.summary_offset)
            bases, sm, sq, mn, mx = self._totals
            if not bases:
                mn = mx = 0.0
            fh.write(struct.pack("<Qdddd", bases, mn, mx, sm, sq))
            fh.seek(self.data_offset)
            fh.write(struct.pack("<Q", self.count))
        finally:
            self._release()

    def abort(self) -> None:
        """Give up the file: close it and the spill without finishing them."""
        self._release()

    def _release(self) -> None:
        self.fh.close()
        self._spill.close()


def zoom_reductions(mean_length: float, largest: int) -> list[int]:
    """bedToBigBed's ladder: 10 × the mean feature length (at least MIN_ZOOM), ×4 per level, ≤ 10 levels."""
    return zoom_ladder(max(MIN_ZOOM, 10 * int(mean_length)), largest)


def write_bigbed(
    path: str | os.PathLike,
    chroms: list[tuple[str, int]],
    rows: Callable[[], Iterable[Row]],
    autosql: str,
    field_count: int,
    defined_field_count: int,
) -> int:
    """Write ``rows()`` (called twice: the first pass measures the mean feature length for the zoom levels) as a
    bigBed at ``path`` (atomically). Returns the number of rows."""
    path = Path(path)
    n = total = 0
    for _, s, e, _ in rows():
        n += 1
        total += e - s
    largest = max((int(s) for _, s in chroms), default=1)
    zs = zoom_reductions(total / n, largest) if n else []
    with atomic_output(path) as tmp, naming_errors(path):
        w = BigBedWriter(tmp, chroms, autosql, field_count, defined_field_count, zs, name=path)
        try:
            for chrom, s, e, rest in rows():
                w.add(chrom, s, e, rest)
        except BaseException:
            w.abort()
            raise
        w.close()
        if w.count != n:
            raise ChromaflowError(f"{path}: the rows changed between the two passes ({n} then {w.count})")
    return n


def bed_rows(path: str | os.PathLike) -> Iterator[Row]:
    """Rows of a BED-like text file, plain or gzip (by its first bytes; track/browser/# lines skipped): chrom, start,
    end, the other fields."""
    with open(path, "rb") as raw:
        gz = raw.read(2) == b"\x1f\x8b"
    with gzip.open(path, "rt", encoding="utf-8") if gz else open(path, encoding="utf-8") as fh:
        for no, line in enumerate(fh, 1):
            if line.startswith(("track", "browser", "#")) or not line.strip():
                continue
            f = line.rstrip("\n").split("\t", 3)
            try:
                yield f[0], int(f[1]), int(f[2]), f[3] if len(f) > 3 else ""
            except (IndexError, ValueError):
                raise ChromaflowError(f"{path}:{no}: not a BED row (chrom, start, end, ...)") from None
