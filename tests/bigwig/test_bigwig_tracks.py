"""Units of ``chromaflow bigwig``'s track arithmetic: exact and numpy smoothing (whole, streamed, segmented), the
strand average, runs, the C kernels against numpy, the bedGraph formatter and the chromosome map.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("pyBigWig")

from chromaflow import bigwig  # noqa: E402
from chromaflow.bigwig import bedgraph as bgmod  # noqa: E402
from chromaflow.bigwig import bigwigfile  # noqa: E402

pytestmark = pytest.mark.reference


def test_exact_smoothing_matches_fractions():
    """smooth_exact = half-even rounding of the exact rational window mean, numpy 'same' alignment included."""
    rng = np.random.default_rng(0)
    for _ in range(300):
        w = int(rng.integers(1, 40))
        n = int(rng.integers(1, 150))
        x = rng.integers(0, 6, n)
        for clip in (True, False):
            off = (min(n, w) - 1) // 2
            ref = [
                round(Fraction(int(x[max(0, i + off - w + 1) : max(0, min(n, i + off + 1))].sum()), w))
                for i in range(n if clip else max(n, w))
            ]
            assert bigwig.smooth_exact(x, w, clip).tolist() == ref, (w, n, clip)
    # long tracks take the sliced path
    x = rng.integers(0, 4, 100_000)
    w = 150
    S = np.convolve(x, np.ones(w, dtype=np.int64), "same")  # exact integer window sums, numpy's alignment
    assert np.array_equal(bigwig.window_sums(x, w), S)
    q, r = np.divmod(S, w)
    want = q + (2 * r > w) + ((2 * r == w) & (q % 2 == 1))
    assert np.array_equal(bigwig.smooth_exact(x, w), want)
    assert len(bigwig.tie_positions(x, w)) == int(np.count_nonzero(2 * r == w)) > 0


def _streamed_runs(st, bounds, x, minus=None):
    """Feed x (and minus) to a SmoothStream in the pieces [bounds[k], bounds[k+1]); the merged runs."""
    got: list[list] = [[], [], []]
    for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        last = k == len(bounds) - 2
        _, r = st.feed_runs(x[a:b], last) if minus is None else st.feed_runs(x[a:b], last, minus=minus[a:b])
        if r is None:
            continue
        s, e, v = r
        if got[2] and got[2][-1][-1] == v[0]:
            got[1][-1][-1] = e[0]
            s, e, v = s[1:], e[1:], v[1:]
        if len(s):
            for lst, arr in zip(got, (s, e, v)):
                lst.append(arr)
    return [np.concatenate(g) if g else np.zeros(0) for g in got]


def test_streamed_strand_average_smoothing_equals_numpy(monkeypatch):
    """The fused path (strand average formed in C into the window buffer, feed_runs(plus, minus=...)) gives the
    runs of the numpy strand average smoothed whole, piece by piece and in steps; also without the C kernels."""
    monkeypatch.setattr(bigwig.tracks.SmoothStream, "SUB", 41)
    rng = np.random.default_rng(11)
    for native in (True, False):
        for _ in range(400):
            n = int(rng.integers(1, 500))
            w = int(rng.integers(1, 160))
            clip = bool(rng.integers(0, 2))
            p = np.repeat(rng.integers(0, 7, n), int(rng.integers(1, 20)))[:n].astype(np.int32)
            m = np.repeat(rng.integers(0, 7, n), int(rng.integers(1, 20)))[:n].astype(np.int32)
            avg = bigwig.strand_average(p.astype(np.int64), m.astype(np.int64))
            want = bigwig.runs(bigwig.smooth_exact(avg, w, clip))
            cuts = (
                np.sort(rng.choice(np.arange(1, n), min(n - 1, int(rng.integers(0, 5))), replace=False))
                if n > 1
                else []
            )
            bounds = np.concatenate([[0], cuts, [n]]).astype(int)
            got = _streamed_runs(bigwig.tracks.SmoothStream(w, clip, native=native), bounds, p, m)
            assert all(np.array_equal(g, w_) for g, w_ in zip(got, want)), (native, n, w, clip, bounds)


def test_streamed_and_segmented_smoothing_equal_whole_block(monkeypatch):
    """The block is smoothed piece by piece (and in steps within a piece): the runs equal those of the whole
    block at once, for any cut points, windows longer than the pieces, and blocks shorter than the window."""
    monkeypatch.setattr(bigwig.tracks.SmoothStream, "SUB", 37)
    rng = np.random.default_rng(5)
    for _ in range(1500):
        n = int(rng.integers(1, 600))
        w = int(rng.integers(1, 200))
        clip = bool(rng.integers(0, 2))
        x = np.repeat(rng.integers(0, 5, n), int(rng.integers(1, 30)))[:n]
        want = bigwig.runs(bigwig.smooth_exact(x, w, clip))
        assert all(np.array_equal(a, b) for a, b in zip(want, bigwig.tracks.smooth_exact_runs(x, w, clip, segment=23)))
        cuts = np.sort(rng.choice(np.arange(1, n), min(n - 1, int(rng.integers(0, 6))), replace=False)) if n > 1 else []
        bounds = np.concatenate([[0], cuts, [n]]).astype(int)
        got = _streamed_runs(bigwig.tracks.SmoothStream(w, clip), bounds, x)
        assert all(np.array_equal(g, w_) for g, w_ in zip(got, want)), (n, w, clip, bounds)


def test_numpy_smoothing_differs_from_exact_only_at_ties():
    rng = np.random.default_rng(3)
    for w in (150, 10, 7, 2, 300):
        for run in (1, 40, 5000):
            n = int(rng.integers(8 * w, 100_000))
            x = np.repeat(rng.integers(0, 6, n // run + 1), run)[:n].astype(np.float32)
            a = bigwig.smooth_numpy(x, w, True)
            b = bigwig.smooth_exact(x, w, True)
            diff = np.flatnonzero(a != b)
            assert set(diff.tolist()) <= set(bigwig.tie_positions(x, w).tolist())
            assert np.all(np.abs(a[diff] - b[diff]) == 1)
            # the region-limited numpy.convolve equals a whole-block one bit for bit
            assert np.array_equal(a, np.rint(np.convolve(x.astype(np.float64), np.ones(w) / w, "same")))


def test_c_kernels_equal_numpy():
    """The C kernels (runs with the average fused in, exact smoothing, zoom records) equal the numpy versions."""
    from chromaflow.bigwig import _native
    from chromaflow.bigwig import tracks

    if _native.load() is None:
        pytest.skip("no C compiler")
    rng = np.random.default_rng(11)
    for n in (1, 2, 3, 10, 1000, 5000):
        for r in (1, 3, 50):
            x = np.repeat(rng.integers(0, 5, n), r)[:n].astype(np.int32)
            m = np.repeat(rng.integers(0, 5, n), r)[:n].astype(np.int32)
            for mm, want in ((m, tracks.runs(tracks.strand_average(x.copy(), m))), (None, tracks.runs(x))):
                got = tracks.runs_native(x, mm, 7)
                assert np.array_equal(got[0], want[0] + 7) and np.array_equal(got[1], want[1] + 7)
                assert got[2].dtype == np.float32 and np.array_equal(got[2], want[2])
    for _ in range(300):
        n = int(rng.integers(1, 3000))
        lens = rng.geometric(1 / float(rng.choice([1.5, 30, 3000])), n)
        ends = np.cumsum(lens) + int(rng.integers(0, 1000))
        starts = ends - lens
        if rng.random() < 0.5:  # gaps
            keep = rng.random(n) < 0.6
            keep[0] = True
            starts, ends = starts[keep], ends[keep]
        v = rng.integers(0, 9, len(starts)).astype(np.float32)
        z = int(rng.choice([1, 7, 48, 50_000]))
        # at most 100,000 bins a draw: the whole 3000 intervals of 3 kbp at 1 bp bins (9 M) cost the numpy version
        # ~20 s over the 300 draws and cover no other branch (issue 28: the suite's time)
        k = max(1, int(np.searchsorted(ends, starts[0] + 100_000 * z, side="right")))
        starts, ends, v = starts[:k], ends[:k], v[:k]
        a = bigwigfile._bin_records_native(starts, ends, v, z)
        b = bigwigfile._bin_records(starts, ends, v, z)
        assert all(np.array_equal(p, q) and p.dtype == q.dtype for p, q in zip(a, b))
        # each array holds its records only, not a view of the worst-case buffer (a record per interval): queued
        # zoom results were ~16x their size, 896 -> 583 MiB for BIGWIG on 300 Mbp (issue 30)
        assert all(p.base is None or p.base.nbytes == p.nbytes for p in a)
    # smoothing: the C kernel (in SmoothStream) and numpy agree on values up to 10**6 and any piece cuts
    for _ in range(500):
        n = int(rng.integers(1, 700))
        w = int(rng.integers(1, 200))
        x = np.repeat(rng.integers(0, int(rng.choice([3, 10**6])), n), int(rng.integers(1, 30)))[:n]
        outs = []
        for native in (True, False):
            st = tracks.SmoothStream(w, True, native=native)
            assert (st.native is not None) == native
            parts = []
            bounds = [0, n // 3, n] if n > 2 else [0, n]
            for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
                _, rr = st.feed_runs(x[a:b], k == len(bounds) - 2)
                if rr is not None:
                    parts.append(rr)
            outs.append([np.concatenate([p[i] for p in parts]) for i in range(3)])
        assert all(np.array_equal(p, q) for p, q in zip(*outs))


def test_strand_average_equals_float32():
    rng = np.random.default_rng(1)
    p = rng.integers(0, 1 << 23, 200_000).astype(np.int32)
    m = rng.integers(0, 1 << 23, 200_000).astype(np.int32)
    p[:6] = [0, 1, 1, 2, 3, (1 << 23) - 1]
    m[:6] = [1, 2, 0, 1, 4, (1 << 23) - 2]
    f32 = bigwig.tracks.strand_average_f32(p, m)
    assert np.array_equal(bigwig.strand_average(p.copy(), m), f32.astype(np.int64))
    assert bigwig.strand_average(p[:5].copy(), m[:5]).tolist() == [0, 2, 0, 2, 4]  # 0.5->0 1.5->2 2.5->2 3.5->4


@pytest.mark.parametrize("native", [True, False])
def test_bedgraph_formatting_matches_python(native, monkeypatch):
    if not native:
        monkeypatch.setitem(bgmod._native._state, "lib", None)
    elif bgmod._native.load() is None:
        pytest.skip("no C compiler")
    rng = np.random.default_rng(1)
    starts = np.sort(rng.choice(10**10, 5000, replace=False)).astype(np.int64)
    starts[:3] = [0, 9, 10]
    ends = np.append(starts[1:], starts[-1] + 7)
    for dtype in (np.float32, np.float64):
        vals = rng.integers(0, 3000, 5000).astype(dtype)
        vals[:5] = [0, 1e8, 1e17, 12345678, 0.5]
        want = "\n".join(f"chr_1\t{s}\t{e}\t{str(v)}" for s, e, v in zip(starts.tolist(), ends.tolist(), vals))
        assert bytes(bgmod.format_lines("chr_1", starts, ends, vals, first=True)).decode() == want
        assert bytes(bgmod.format_lines("chr_1", starts, ends, vals, first=False)).decode() == "\n" + want
        small = np.arange(5000, dtype=dtype) % 7  # the small-integer table path
        want = "\n".join(f"c\t{s}\t{e}\t{str(v)}" for s, e, v in zip(starts.tolist(), ends.tolist(), small))
        assert bytes(bgmod.format_lines("c", starts, ends, small, first=True)).decode() == want


def test_runs_and_merge():
    st = bigwig.TrackState()
    a = np.array([1, 1, 2, 2], np.float32)
    assert [x.tolist() for x in st.feed(a, 0, False)] == [[0], [2], [1.0]]
    assert st.feed(np.array([2, 2], np.float32), 4, False) is None  # empty-block: nothing
    out = st.feed(np.array([2, 3], np.float32), 6, True)
    assert [x.tolist() for x in out] == [[2, 7], [7, 8], [2.0, 3.0]]


def test_chromosome_map_streams_seqids_in_blocks(tmp_path):
    """The chromosome map from seqids read a block at a time equals the whole-column np.unique one it replaced (order
    of first appearance, rows grouped per seqid in file order), for blocks that cut seqids anywhere, from an array
    and from a one-row-chunked h5 dataset (as Helixer writes them)."""
    import h5py

    from chromaflow.bigwig import h5input

    rng = np.random.default_rng(5)
    names = [f"c{i}".encode() for i in rng.permutation(40)]
    seqids, se = [], []
    for name in names:  # Helixer's rows per seqid: + chunks ascending, then − chunks reversed
        k = int(rng.integers(1, 6))
        seqids += [name] * (2 * k)
        se += [(j * 10, j * 10 + 10) for j in range(k)] + [(j * 10 + 10, j * 10) for j in reversed(range(k))]
    seqids = np.array(seqids, dtype="S50")
    se = np.array(se, dtype=np.int64)
    want = []
    uniq, first, inverse = np.unique(seqids, return_index=True, return_inverse=True)
    for u in np.argsort(first, kind="stable"):
        rows = np.flatnonzero(inverse == u)
        plus = rows[se[rows, 0] <= se[rows, 1]]
        minus = rows[se[rows, 0] > se[rows, 1]][::-1]
        want.append((uniq[u].decode(), int(se[rows].max()), plus.tolist(), minus.tolist()))
    assert [w[0].encode() for w in want] == names
    with h5py.File(tmp_path / "s.h5", "w") as f:
        f.create_dataset("seqids", data=seqids, chunks=(1,))
    with h5py.File(tmp_path / "s.h5", "r") as f:
        for src in (seqids, f["seqids"]):
            for block in (1, 3, 7, 64, 10_000):
                codes, got_names = h5input.seqid_codes(src, block)
                got = [
                    (c.name, c.size, c.plus.tolist(), c.minus.tolist())
                    for c in h5input.chromosome_map_codes(codes, got_names, se, set())
                ]
                assert got == want, block
    assert [c.name for c in bigwig.chromosome_map(seqids, se, {"c3"})] == [w[0] for w in want if w[0] != "c3"]


def test_one_row_chunks_read_by_pread_equal_hdf5(tmp_path):
    """ChunkRows (one unfiltered chunk per row: Predmoter's data/seqids and data/start_ends) reads what HDF5 reads:
    every slice, a row never written (HDF5's fill value, through HDF5), none where the layout differs, and the right
    rows (or none) behind a user block."""
    import h5py

    from chromaflow.bigwig import _native
    from chromaflow.bigwig.h5input import chunk_rows

    if _native.load() is None:
        pytest.skip("no C compiler")
    path = tmp_path / "rows.h5"
    ids = np.array([f"chr{i % 7}".encode() for i in range(1000)], dtype="S50")
    se = np.arange(2000, dtype=np.int64).reshape(1000, 2) * 3
    with h5py.File(path, "w") as f:
        f.create_dataset("seqids", data=ids, chunks=(1,))
        f.create_dataset("se", data=se, chunks=(1, 2))
        f.create_dataset("gz", data=se, chunks=(1, 2), compression="gzip")
        f.create_dataset("flat", data=se)
        holes = f.create_dataset("holes", shape=(10, 2), dtype=np.int64, chunks=(1, 2), fillvalue=-7)
        holes[0], holes[3] = [5, 6], [1, 2]
    with h5py.File(path, "r") as f:
        for name in ("seqids", "se"):
            rows = chunk_rows(f[name], str(path))
            assert rows is not None
            try:
                for a, b in ((0, 1000), (0, 1), (999, 1000), (17, 545), (5, 5)):
                    assert np.array_equal(rows[a:b], f[name][a:b]), (name, a, b)
            finally:
                rows.close()
        assert chunk_rows(f["gz"], str(path)) is None and chunk_rows(f["flat"], str(path)) is None
        rows = chunk_rows(f["holes"], str(path))  # rows never written: HDF5 reads that slice (its fill value)
        assert rows is not None and np.array_equal(rows[0:10], f["holes"][0:10]) and rows[1:2][0, 0] == -7
        rows.close()
    blocked = tmp_path / "ub.h5"
    with h5py.File(blocked, "w", userblock_size=512) as f:
        f.create_dataset("se", data=se, chunks=(1, 2))
    with h5py.File(blocked, "r") as f:
        rows = chunk_rows(f["se"], str(blocked))  # HDF5 2.0 gives file offsets here; else none is made
        if rows is not None:
            assert np.array_equal(rows[0:1000], se)
            rows.close()
