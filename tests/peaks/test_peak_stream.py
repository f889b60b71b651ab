"""Peaks called as the track streams (``--cutoff`` known before reading: a fixed one, or the default without
measured coverage): the same peaks as over the whole track, for every way of cutting it into pieces, holding
only what can still change (issue 30: PEAKS took 7.3 GiB at 400 Mbp holding every chromosome's runs). The
readers cut into small pieces end to end: tests/peaks/test_peaks.py."""

from __future__ import annotations

import numpy as np
import pytest
from chromaflow.bigwig.spool import Records
from chromaflow.peaks.call import PeakStream, call_peaks, merge_runs


def _random_track(rng):
    n = int(rng.integers(1, 60))
    lens = rng.integers(1, 8, n)
    gaps = rng.integers(0, 4, n) * (rng.random(n) < 0.3)
    starts = np.cumsum(gaps + np.r_[0, lens[:-1]]) + int(rng.integers(0, 3))
    values = rng.integers(0, 6, n).astype(np.float32) + (rng.random(n) < 0.2).astype(np.float32) * np.float32(0.5)
    return starts, starts + lens, values, int(starts[-1] + lens[-1] + rng.integers(0, 20))


@pytest.mark.parametrize("fold_at, spill_at", [(PeakStream.FOLD_AT, Records.HELD), (0, Records.HELD), (1, 1), (3, 2)])
def test_stream_equals_whole_track_for_any_pieces(monkeypatch, fold_at, spill_at):
    """2,000 random tracks (gaps, equal neighbours, values at the cutoff), random cutoffs, gaps and minimum
    lengths, cut into random pieces: peaks and the merged-run count equal merge_runs + call_peaks on the whole.
    With ``fold_at`` low, an open peak is folded at (almost) every piece: the same peaks; with ``spill_at`` low too
    (spool.Records.HELD), its summit candidates go to the temporary file at (almost) every piece and the summit is
    read back from it."""
    monkeypatch.setattr(PeakStream, "FOLD_AT", fold_at)
    monkeypatch.setattr(Records, "HELD", spill_at)
    rng = np.random.default_rng(30)
    for trial in range(2000):
        s, e, v, size = _random_track(rng)
        cutoff, min_length, max_gap = float(rng.integers(1, 6)), int(rng.integers(0, 6)), int(rng.integers(0, 6))
        whole = merge_runs(s, e, v, size)
        ref = call_peaks(*whole, cutoff, min_length, max_gap)
        st = PeakStream(cutoff, min_length, max_gap)
        cuts = sorted({0, len(s), *rng.integers(0, len(s) + 1, int(rng.integers(0, 6))).tolist()})
        for a, b in zip(cuts[:-1], cuts[1:]):
            st.add(s[a:b], e[a:b], v[a:b])
        got = st.finish(size)
        for f in ("starts", "ends", "summits", "values"):
            assert np.array_equal(getattr(ref, f), getattr(got, f)), (trial, f)
        assert st.runs == len(whole[0]), trial


def test_stream_holds_only_what_can_still_change():
    """A long track of short peaks: after each piece the buffer is a run or an open peak, not the track."""
    st = PeakStream(5, 0, 2)
    held = []
    for k in range(200):
        base = k * 100
        st.add(
            np.array([base, base + 10, base + 20]),
            np.array([base + 10, base + 20, base + 100]),
            np.array([0, 9, 0], np.float32),
        )
        held.append(len(st.v))
    assert max(held) <= 3
    assert len(st.finish(20_000)) == 200


def test_stream_refuses_runs_out_of_order():
    st = PeakStream(5, 0, 2)
    st.add(np.array([0]), np.array([10]), np.array([1], np.float32))
    with pytest.raises(ValueError, match="unsorted"):
        st.add(np.array([5]), np.array([12]), np.array([1], np.float32))


def test_a_peak_as_long_as_the_track_holds_its_top_runs_not_all_its_runs():
    """A track above the cutoff everywhere (the tiny test model's predictions at the scale benchmark's 1.2 Gbp:
    PEAKS held 4.7 GB, re-merging the open peak at every piece): the buffer stays at most FOLD_AT runs plus a
    piece, and the one peak equals the whole-track call, its summit the middle one of the runs at the top value."""
    rng = np.random.default_rng(7)
    st, held = PeakStream(2.0, 50, 25), []
    whole = []
    pos = 0
    for k in range(40):
        lens = rng.integers(1, 5, 20_000)
        s = pos + np.concatenate([[0], np.cumsum(lens)[:-1]])
        e = s + lens
        v = (2 + rng.integers(0, 50, len(s)) / 10).astype(np.float32)
        pos = int(e[-1])
        st.add(s, e, v)
        held.append(len(st.v))
        whole.append((s, e, v))
    got = st.finish(pos + 10)
    ref = call_peaks(*merge_runs(*(np.concatenate(x) for x in zip(*whole)), pos + 10), 2.0, 50, 25)
    for f in ("starts", "ends", "summits", "values"):
        assert np.array_equal(getattr(ref, f), getattr(got, f)), f
    assert len(got) == 1 and max(held) <= PeakStream.FOLD_AT + 20_000
    assert st.runs == len(merge_runs(*(np.concatenate(x) for x in zip(*whole)), pos + 10)[0])


def test_a_long_peak_whose_top_value_recurs_millions_of_times_holds_megabytes():
    """The tiny test model's track at cutoff 2 is one peak a record, its top value in a third of the runs: 5.4 M
    summit candidates in a 35 Mbp record were held as Python lists (430 MB; PEAKS 2.3 GiB at the scale benchmark's
    4 Gbp). 3 M runs alternating 2 and 3, in pieces: the traced peak stays under 40 MB (the lists: ~100 MB), and the
    summit is the middle candidate, read back from the temporary file."""
    import tracemalloc

    n, piece = 3_000_000, 50_000
    st = PeakStream(2.0, 50, 30)
    tracemalloc.start()
    try:
        for a in range(0, n, piece):
            s = np.arange(a, a + piece, dtype=np.int64) * 2
            v = np.where(np.arange(a, a + piece) % 2, 3, 2).astype(np.float32)
            st.add(s, s + 2, v)
            del s, v
        got = st.finish(2 * n)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    k = n // 2  # candidates: the runs at 3, i = 1, 3, 5, ...
    mid = 2 * (2 * ((k + 1) // 2 - 1) + 1) + 1  # the middle one's midpoint
    assert (len(got), int(got.starts[0]), int(got.ends[0]), float(got.values[0])) == (1, 0, 2 * n, 3.0)
    assert int(got.summits[0]) == mid
    assert peak < 40 << 20, f"{peak / 2**20:.0f} MB traced"
