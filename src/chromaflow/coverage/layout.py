"""Row layout of a genome h5 and the genomic windows coverage is computed in.

A Helixer-layout genome h5 stores each record as ``L``-bp chunks: a plus row ``[a, b)`` with ``a < b`` holds
genomic positions ``a .. b-1``; a minus row ``[a, b]`` with ``a > b`` holds genomic ``a-1-p`` at position ``p``
(reverse orientation); padding follows the valid positions (FORMATS.md §1.5). Coverage is therefore computed
per genomic *window* (a few Mbp at most) covering whole rows of both strands, and each row is cut out of the
window's per-strand arrays. Memory depends on the window, never on the genome or record size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..utils.errors import ChromaflowError
from ..genome.h5rows import read_rows


@dataclass
class GenomeLayout:
    """The rows of a genome h5: path, row count, chunk length, ``seqids`` ((N,) str), ``start_ends`` ((N, 2) int64),
    ``species`` ((N,) str, None without data/species) and every seqid's record length (the largest chunk end of its
    rows)."""

    path: str
    n_rows: int
    length: int
    seqids: np.ndarray  # (N,) str
    start_ends: np.ndarray  # (N, 2) int64
    species: np.ndarray | None  # (N,) str or None when data/species is absent
    #: seqid -> record length (largest chunk end of its rows)
    record_lengths: dict[str, int] = field(default_factory=dict)


def read_layout(fh, path: str) -> GenomeLayout:
    """Validate and read what coverage needs from an open genome h5."""
    for name in ("data/X", "data/seqids", "data/start_ends"):
        if name not in fh:
            raise ChromaflowError(f"{path}: dataset {name} is missing (not a Helixer genome h5?)")
    X = fh["data/X"]
    if X.ndim != 3:
        raise ChromaflowError(f"{path}: data/X has shape {X.shape}, expected (N, L, 4)")
    n, length = int(X.shape[0]), int(X.shape[1])
    if n == 0:
        raise ChromaflowError(f"{path}: data/X has no rows")
    seqids = np.array([s.decode("ascii", "replace") for s in read_rows(fh["data/seqids"])], dtype=object)
    start_ends = read_rows(fh["data/start_ends"]).astype(np.int64)
    if seqids.shape != (n,) or start_ends.shape != (n, 2):
        raise ChromaflowError(
            f"{path}: data/seqids {seqids.shape} / data/start_ends {start_ends.shape} do not match data/X rows ({n})"
        )
    species = None
    if "data/species" in fh:
        sp = read_rows(fh["data/species"])
        if sp.shape == (n,):
            species = np.array([s.decode("ascii", "replace") for s in sp], dtype=object)
    lo = start_ends.min(axis=1)
    hi = start_ends.max(axis=1)
    span = hi - lo
    bad = np.flatnonzero((lo < 0) | (span > length))
    if bad.size:
        i = int(bad[0])
        raise ChromaflowError(
            f"{path}: data/start_ends row {i} = {start_ends[i].tolist()} is not a chunk of at most L={length} bp"
        )
    lengths: dict[str, int] = {}
    for s, h in zip(seqids, hi):
        if h > lengths.get(s, 0):
            lengths[s] = int(h)
    return GenomeLayout(
        path=path,
        n_rows=n,
        length=length,
        seqids=seqids,
        start_ends=start_ends,
        species=species,
        record_lengths=lengths,
    )


@dataclass
class Segment:
    """Rows of one seqid whose chunks all lie in the genomic window [lo, hi)."""

    seqid: str
    lo: int
    hi: int
    rows: np.ndarray  # row indices, ascending


@dataclass
class Unit:
    """One task: a few segments (small records are batched) covering at most ~``window_bp`` bases."""

    index: int
    segments: list[Segment]

    @property
    def bp(self) -> int:
        """Bases the unit's segments cover."""
        return sum(s.hi - s.lo for s in self.segments)

    @property
    def n_rows(self) -> int:
        """Rows of the unit's segments."""
        return sum(len(s.rows) for s in self.segments)


def plan_units(layout: GenomeLayout, rows: np.ndarray, window_bp: int) -> list[Unit]:
    """Group ``rows`` (indices into the layout) into units of at most ~``window_bp`` genomic bases.

    Rows are grouped per seqid by genomic start, so the plus and minus rows of the same interval land in the
    same segment; whole small records are batched into one unit. Units follow the file's row order of their
    first row, so output order (and bytes) never depends on the number of workers.
    """
    window_bp = max(int(window_bp), layout.length)
    by_seqid: dict[str, list[int]] = {}
    for r in rows.tolist():
        by_seqid.setdefault(layout.seqids[r], []).append(r)
    segments: list[tuple[int, Segment]] = []
    for seqid, rlist in by_seqid.items():
        r = np.asarray(rlist, dtype=np.int64)
        lo = layout.start_ends[r].min(axis=1)
        hi = layout.start_ends[r].max(axis=1)
        order = np.lexsort((r, lo))
        r, lo, hi = r[order], lo[order], hi[order]
        start = 0
        while start < len(r):
            seg_lo = int(lo[start])
            end = start
            seg_hi = seg_lo
            while end < len(r) and (int(hi[end]) - seg_lo <= window_bp or end == start):
                seg_hi = max(seg_hi, int(hi[end]))
                end += 1
            seg_rows = np.sort(r[start:end])
            segments.append((int(seg_rows[0]), Segment(seqid, seg_lo, seg_hi, seg_rows)))
            start = end
    segments.sort(key=lambda t: t[0])
    units: list[Unit] = []
    cur: list[Segment] = []
    cur_bp = 0
    for _, seg in segments:
        if cur and cur_bp + (seg.hi - seg.lo) > window_bp:
            units.append(Unit(len(units), cur))
            cur, cur_bp = [], 0
        cur.append(seg)
        cur_bp += seg.hi - seg.lo
    if cur:
        units.append(Unit(len(units), cur))
    return units


class SegmentRows(Protocol):
    """What :func:`cut_rows` reads of a segment: a :class:`Segment`, or a unit's rows renumbered (add.py)."""

    lo: int
    rows: np.ndarray


def cut_rows(
    seg: SegmentRows, start_ends: np.ndarray, length: int, plus: np.ndarray, minus: np.ndarray, out: np.ndarray
) -> None:
    """Fill ``out[i]`` (len(seg.rows), length) from window arrays ``plus``/``minus`` over [seg.lo, seg.hi).

    Plus row [a, b): ``plus[a-lo : b-lo]``; minus row [a, b] with a > b: ``minus[b-lo : a-lo]`` reversed.
    Positions past the chunk's valid length are -1 (padding).
    """
    out[...] = -1
    for i, r in enumerate(seg.rows.tolist()):
        a, b = int(start_ends[r, 0]), int(start_ends[r, 1])
        if a < b:
            out[i, : b - a] = plus[a - seg.lo : b - seg.lo]
        elif a > b:
            out[i, : a - b] = minus[b - seg.lo : a - seg.lo][::-1]
