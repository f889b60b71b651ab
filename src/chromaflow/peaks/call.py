"""MACS3 ``bdgpeakcall`` on run-length tracks, in numpy (docs/peaks.md "Semantics").

A track of one chromosome is its runs: ``starts``, ``ends`` (contiguous, 0-based half-open) and ``values``,
adjacent runs of equal value merged (MACS3's ``bedGraphTrackI.add_loc`` merges them while reading, and the
summit depends on it). MACS3 3.0 ``bedGraphTrackI.call_peaks`` + ``__close_peak``, which this reproduces:

* values are float32 and compared with the float32 cutoff: a run is *above* when ``value >= cutoff``;
* consecutive above-cutoff runs join one peak when the gap between them (start of the next minus end of the last)
  is ``<= max_gap``; a peak is kept when ``end - start >= min_length``;
* the summit value is the peak's largest run value; among the runs holding it (in order), their midpoints
  ``(start + end) // 2``, the summit is the ``((k + 1) // 2)``-th of the k candidates (the lower middle one);
* the narrowPeak score is ``int(10 * summit value)`` (MACS3's ``score_column="score"``), not capped at 1000.

Written here rather than run through MACS3: MACS3 walks every bedGraph line in Python (Cython objects) and has to
read a text bedGraph; numpy over the runs is a few passes over arrays (benchmarks/peaks: the measured ratio).
MACS3 requires a cutoff above 0 in effect (its summit rule treats a value of 0 as "no summit yet"), so cutoffs
here must be > 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np

from ..bigwig.spool import Records, Spill


@dataclass
class Peaks:
    """Peaks of one chromosome: start, end (0-based, half-open), summit (absolute) and summit value, sorted."""

    starts: np.ndarray
    ends: np.ndarray
    summits: np.ndarray
    values: np.ndarray  # float32 summit values

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def bp(self) -> int:
        """Bases covered by the peaks."""
        return int((self.ends - self.starts).sum())


def merge_runs(starts: np.ndarray, ends: np.ndarray, values: np.ndarray, size: int | None = None):
    """Contiguous runs with equal neighbours merged, values as float32; gaps (bigWig regions without data) and
    the stretch up to ``size`` filled with 0, as MACS3 fills a bedGraph's uncovered start with its baseline 0."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    values = np.asarray(values, dtype=np.float32)
    if len(starts) and (np.any(ends <= starts) or np.any(starts[1:] < ends[:-1]) or starts[0] < 0):
        raise ValueError("intervals are unsorted, overlapping or empty")
    gap = np.concatenate([[starts[0] > 0] if len(starts) else [], starts[1:] > ends[:-1]]).astype(bool)
    tail = size is not None and (not len(ends) or ends[-1] < size)
    if gap.any() or tail:
        gs = np.concatenate([[0], ends[:-1]])[gap]
        ge = starts[gap]
        s = np.concatenate([starts, gs, [ends[-1] if len(ends) else 0] if tail else []]).astype(np.int64)
        e = np.concatenate([ends, ge, [size] if tail else []]).astype(np.int64)
        v = np.concatenate([values, np.zeros(len(gs) + int(tail), np.float32)])
        order = np.argsort(s, kind="stable")
        starts, ends, values = s[order], e[order], v[order]
    if len(values) < 2:
        return starts, ends, values
    keep = np.empty(len(values), dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    idx = np.flatnonzero(keep)
    new_ends = np.concatenate([starts[idx[1:]], ends[-1:]])
    return starts[idx], new_ends, values[idx]


def middle(n):
    """Which of ``n`` runs at a peak's top value holds its summit: the middle one, the lower of two (0-based)."""
    return (n + 1) // 2 - 1


def _new_summits() -> Records:
    """The summit candidates of a folded peak, in order: the midpoints ``(start + end) // 2`` of its runs at the top
    value, 8 bytes each, spooled to an anonymous temporary file ($TMPDIR) past ``Records.HELD``: the middle one is
    only known when the peak closes, and a peak as long as a record can hold millions (the tiny test model's track at
    cutoff 2: 5.4 M in one 35 Mbp record, 430 MB as the Python lists they were once kept in; 2.3 GiB PEAKS at the
    scale benchmark's 4 Gbp)."""
    return Records(1, Spill())


@dataclass
class _Fold:
    """The folded start of an open peak (:class:`PeakStream`): its start, the end of its last above-cutoff run, its
    top value and the summit candidates at that value."""

    start: int
    end: int
    top: np.float32
    summits: Records  # width 1, on its own Spill: _new_summits()


def call_peaks(
    starts: np.ndarray, ends: np.ndarray, values: np.ndarray, cutoff: float, min_length: int, max_gap: int
) -> Peaks:
    """bdgpeakcall's peaks of one chromosome's merged runs (module docstring)."""
    values = np.asarray(values, dtype=np.float32)
    above = np.flatnonzero(values >= np.float32(cutoff))
    empty = np.zeros(0, np.int64)
    if not len(above):
        return Peaks(empty, empty, empty, np.zeros(0, np.float32))
    s, e, v = starts[above], ends[above], values[above]
    new = np.empty(len(above), dtype=bool)
    new[0] = True
    np.greater(s[1:] - e[:-1], max_gap, out=new[1:])
    first = np.flatnonzero(new)
    last = np.concatenate([first[1:], [len(above)]]) - 1
    pstart, pend = s[first], e[last]
    top = np.maximum.reduceat(v, first)
    group = np.cumsum(new) - 1
    cand = v == top[group]
    cidx = np.flatnonzero(cand)
    cgroup = group[cidx]
    count = np.bincount(cgroup, minlength=len(first))
    rank = np.arange(len(cidx)) - np.concatenate([[0], np.cumsum(count)[:-1]])[cgroup]
    pick = cidx[rank == middle(count[cgroup])]  # one per group, in group order
    summit = (s[pick] + e[pick]) // 2
    keep = pend - pstart >= min_length
    return Peaks(pstart[keep], pend[keep], summit[keep], top[keep])


def scores(values: np.ndarray) -> np.ndarray:
    """MACS3's narrowPeak score column: int(10 * value) of the float32 value taken as a double (truncation)."""
    return np.trunc(10.0 * np.asarray(values, dtype=np.float32).astype(np.float64)).astype(np.int64)


def covered_before(starts: np.ndarray, ends: np.ndarray, x: np.ndarray) -> np.ndarray:
    """bp of the sorted disjoint intervals lying before each position in ``x``."""
    cum = np.concatenate([[0], np.cumsum(ends - starts)])
    j = np.searchsorted(starts, x, side="right")  # intervals starting at or before x
    full = cum[j]
    k = np.maximum(j - 1, 0)
    over = np.where((j > 0) & (x < ends[k]), ends[k] - x, 0)  # the part of the last one beyond x
    return full - over


def overlap_bp(a_starts, a_ends, b_starts, b_ends) -> int:
    """bp shared by two sorted sets of disjoint intervals (base-wise intersection)."""
    if not len(a_starts) or not len(b_starts):
        return 0
    return int((covered_before(b_starts, b_ends, a_ends) - covered_before(b_starts, b_ends, a_starts)).sum())


class PeakStream:
    """:func:`call_peaks` over one chromosome whose runs arrive in pieces, in order: the same peaks as
    ``call_peaks(*merge_runs(all runs, size), ...)`` while holding only the runs that can still change a peak.

    After each piece the buffered (merged) runs are cut where no later run can reach back: before the last group
    of above-cutoff runs when that group may still grow (its end is within ``max_gap`` of the data's end), else
    before the last run (kept so an equal next run merges with it, as ``merge_runs`` merges). Peaks before the
    cut are final. An open peak longer than ``FOLD_AT`` runs is folded: its runs but the last are replaced by
    what its peak needs (start, end of its last above-cutoff run, top value, the midpoints of the runs at the top
    value in order, for the middle one's summit: :func:`_new_summits`, spooled to a temporary file), so a
    peak as long as a chromosome (a track above the cutoff almost everywhere: the scale benchmark's 1.2 Gbp run's
    PEAKS peaked at 5.2 GiB, re-merging the whole open peak at every piece) costs a few MB, not its runs. Memory is
    one piece plus that, not the chromosome (a 300 Mbp record of base-wise runs was 6 GB as whole arrays)."""

    #: runs an open peak may hold before it is folded (a few MB); tests set it low to fold at every piece
    FOLD_AT = 1 << 16

    def __init__(self, cutoff: float, min_length: int, max_gap: int, merged: bool = False):
        self.cutoff, self.min_length, self.max_gap = np.float32(cutoff), min_length, max_gap
        #: the pieces are known to be merged runs that continue each other (the converter's: no gap, no equal
        #: neighbours), so adding one is a concatenation (merge_runs checked and merged them again: ~a third of
        #: the stream's time on a 200 Mbp track)
        self.merged = merged
        self.s = np.zeros(0, np.int64)
        self.e = np.zeros(0, np.int64)
        self.v = np.zeros(0, np.float32)
        self.pos = 0  # end of the data seen so far (a gap before the next run is filled with 0)
        self.runs = 0  # merged runs finalized (what merge_runs over the whole chromosome counts)
        self.parts: list[Peaks] = []
        self.fold: _Fold | None = None  # the open peak's folded start

    def add(self, starts, ends, values) -> None:
        """Add the next piece of runs (``starts``, ``ends``: (n,) int64, 0-based, half-open; ``values``: (n,) float32),
        which must start at or after the end of the data seen so far (ValueError otherwise); peaks that no later run can
        change are kept as final."""
        starts = np.asarray(starts, dtype=np.int64)
        if not len(starts):
            return
        if starts[0] < self.pos:
            raise ValueError("intervals are unsorted, overlapping or empty")
        self._merge(starts, np.asarray(ends, dtype=np.int64), np.asarray(values, dtype=np.float32), None)
        if self.fold is not None and self._extend_fold(closing=False):
            return  # the folded peak is still open: every held run but the last is in it
        above = np.flatnonzero(self.v >= self.cutoff)
        if len(above):
            gaps = self.s[above[1:]] - self.e[above[:-1]]
            new = np.flatnonzero(gaps > self.max_gap)
            last_group = above[new[-1] + 1] if len(new) else above[0]
            k = last_group if self.e[above[-1]] + self.max_gap >= self.e[-1] else len(self.v) - 1
        else:
            k = len(self.v) - 1
        if k > 0:
            self._emit(k)
        if len(above) and k == last_group and len(self.v) - 1 > self.FOLD_AT:
            self._start_fold()

    def finish(self, size: int) -> Peaks:
        """The chromosome's peaks, its stretch up to ``size`` filled with 0."""
        if self.pos < size or not len(self.v):
            self._merge(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32), size)
        if self.fold is not None:
            self._extend_fold(closing=True)
        self._emit(len(self.v))
        if not self.parts:
            empty = np.zeros(0, np.int64)
            return Peaks(empty, empty, empty, np.zeros(0, np.float32))
        return Peaks(
            *(np.concatenate([getattr(p, f) for p in self.parts]) for f in ("starts", "ends", "summits", "values"))
        )

    def _merge(self, starts, ends, values, size) -> None:
        fast = self.merged and size is None and len(starts) and len(self.v)
        if fast and int(starts[0]) == self.pos and values[0] != self.v[-1]:
            self.s = np.concatenate([self.s, starts])
            self.e = np.concatenate([self.e, ends])
            self.v = np.concatenate([self.v, values])
            self.pos = int(self.e[-1])
            return
        # merge_runs fills from 0 to the first start: the buffer is shifted to begin at 0 (the gap before a
        # piece, from the data's end so far, is added as a 0 run first)
        lead_s = np.array([self.pos] if len(starts) and starts[0] > self.pos and not len(self.v) else [], np.int64)
        s = np.concatenate([self.s, lead_s, starts])
        e = np.concatenate([self.e, starts[: len(lead_s)], ends])
        v = np.concatenate([self.v, np.zeros(len(lead_s), np.float32), values])
        base = int(s[0]) if len(s) else self.pos
        s, e, v = merge_runs(s - base, e - base, v, None if size is None else size - base)
        self.s, self.e, self.v = s + base, e + base, v
        self.pos = int(self.e[-1]) if len(self.e) else self.pos

    def _fold_in(self, idx: np.ndarray) -> None:
        """Fold the above-cutoff runs ``idx`` of the buffer (in order, one peak with the fold) into the fold."""
        if not len(idx):
            return
        f = self.fold
        v = self.v[idx]
        top = v.max()
        if f is None:
            f = self.fold = _Fold(int(self.s[idx[0]]), int(self.e[idx[-1]]), top, _new_summits())
        elif top > f.top:  # a higher top: the candidates start again
            f.top = top
            f.summits.spill.close()
            f.summits = _new_summits()
        f.end = int(self.e[idx[-1]])
        if top == f.top:
            at = idx[v == top]
            f.summits.extend((self.s[at] + self.e[at]) // 2)

    def _drop(self, k: int) -> None:
        """The first ``k`` buffered runs are done with (folded, or below the cutoff)."""
        self.runs += int(k)
        self.s, self.e, self.v = self.s[k:], self.e[k:], self.v[k:]

    def _start_fold(self) -> None:
        """Fold the open peak (the whole buffer, from its first above-cutoff run) but its last run."""
        n = len(self.v) - 1
        self._fold_in(np.flatnonzero(self.v[:n] >= self.cutoff))
        self._drop(n)

    def _extend_fold(self, closing: bool) -> bool:
        """The buffered runs that continue the folded peak are folded in; True while the peak stays open (the
        buffer is then its last run), else the peak is emitted and the buffer holds what follows it."""
        f = cast(_Fold, self.fold)  # called with a peak folded
        above = np.flatnonzero(self.v >= self.cutoff)
        prev = np.concatenate([[f.end], self.e[above[:-1]]]) if len(above) else np.zeros(0, np.int64)
        breaks = np.flatnonzero(self.s[above] - prev > self.max_gap)
        chain = above[: breaks[0]] if len(breaks) else above
        end = int(self.e[chain[-1]]) if len(chain) else f.end
        if not closing and not len(breaks) and end + self.max_gap >= self.e[-1]:
            n = len(self.v) - 1  # still open: all but the last run fold in
            self._fold_in(chain[chain < n])
            self._drop(n)
            return True
        self._fold_in(chain)
        self._drop(int(above[breaks[0]]) if len(breaks) else (len(self.v) if closing else len(self.v) - 1))
        f, self.fold = cast(_Fold, self.fold), None
        try:
            if f.end - f.start >= self.min_length:
                self.parts.append(
                    Peaks(
                        np.array([f.start], np.int64),
                        np.array([f.end], np.int64),
                        np.array([f.summits.value(middle(len(f.summits)))], np.int64),
                        np.array([f.top], np.float32),
                    )
                )
        finally:
            f.summits.spill.close()
        return False

    def _emit(self, k: int) -> None:
        if k <= 0:
            return
        self.parts.append(call_peaks(self.s[:k], self.e[:k], self.v[:k], self.cutoff, self.min_length, self.max_gap))
        self._drop(k)
