"""Our bigWig writer (``bigwigfile.BigWigWriter``): intervals, summary and zoom records read back exactly by pyBigWig
and pybigtools; many chromosomes and contigs (B+ tree levels, bounded memory, spooled records); the data R-tree
written a chunk at a time; zoom blocks across chromosomes.
"""

from __future__ import annotations

import numpy as np
import pytest

pyBigWig = pytest.importorskip("pyBigWig")

from helpers.bigwig_helpers import bw_intervals, zoom_levels  # noqa: E402
from chromaflow.bigwig import bigwigfile  # noqa: E402

pytestmark = pytest.mark.reference


@pytest.mark.parametrize("mean_len,gaps,threads", [(1.5, False, 2), (3, False, 0), (30, True, 2), (3000, True, 0)])
def test_bigwig_writer(tmp_path, mean_len, gaps, threads):
    """Our writer: pyBigWig and pybigtools read back exactly the intervals written (pieces of any size,
    several chromosomes, gaps); the total summary and every zoom record equal exact statistics of the bases."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(int(mean_len * 10))
    sizes = [("chrA", 300_000), ("chr2", int(rng.integers(1, 3000))), ("c3_long_name", 700_000)]
    data = []
    for c, size in sizes:
        ends = np.cumsum(rng.geometric(1 / mean_len, size))
        ends = np.append(ends[ends < size], size)
        starts = np.concatenate([[0], ends[:-1]])
        if gaps:
            keep = rng.random(len(starts)) < 0.6
            starts, ends = starts[keep], ends[keep]
        data.append((c, starts, ends, rng.integers(0, 5, len(starts)).astype(np.float32)))
    pool = ThreadPoolExecutor(threads) if threads else None
    path = tmp_path / "w.bw"
    w = bigwigfile.BigWigWriter(path, sizes, pool)
    for c, s, e, v in data:
        cuts = np.sort(rng.choice(np.arange(1, len(s)), min(6, len(s) - 1), replace=False)) if len(s) > 1 else []
        for a, b in zip(np.concatenate([[0], cuts]).astype(int), np.concatenate([cuts, [len(s)]]).astype(int)):
            w.write(c, s[a:b], e[a:b], v[a:b])
    w.close()
    if pool:
        pool.shutdown()
    want = {c: list(zip(s.tolist(), e.tolist(), v.astype(float).tolist())) for c, s, e, v in data if len(s)}
    chroms, ivs = bw_intervals(path)
    assert chroms == sizes and {c: x for c, x in ivs.items() if x} == want
    pybigtools = pytest.importorskip("pybigtools")
    f = pybigtools.open(str(path))
    assert {c: [tuple(x) for x in f.records(c)] for c in want} == want
    summary, levels = zoom_levels(path)
    allv = np.concatenate([np.repeat(v.astype(np.float64), e - s) for _, s, e, v in data])
    assert summary == (len(allv), allv.min(), allv.max(), allv.sum(), (allv**2).sum())
    assert len(levels) >= 2 and levels[0][0] == 16 * max(
        1, int(np.mean(np.concatenate([e - s for _, s, e, _ in data])))
    )
    for red, recs in levels:
        for r in recs:
            _, s, e, v = data[r["chrom"]]
            # the intervals overlapping the record (sorted, disjoint: a slice, found by bisection; a mask over the
            # whole chromosome per record made this test quadratic)
            m = slice(np.searchsorted(e, r["start"], "right"), np.searchsorted(s, r["end"], "left"))
            ov = np.minimum(e[m], r["end"]) - np.maximum(s[m], r["start"])
            assert r["start"] // red == (r["end"] - 1) // red  # one aligned bin per record
            assert (r["count"], r["min"], r["max"]) == (ov.sum(), v[m].min(), v[m].max())
            assert (r["sum"], r["sumsq"]) == (np.float32((ov * v[m]).sum()), np.float32((ov * v[m] ** 2.0).sum()))
        assert int(recs["count"].sum()) == len(allv)


def test_bigwig_writer_many_chromosomes(tmp_path):
    """A draft assembly's contig count: 70,000 chromosomes make a chromosome B+ tree of three levels (256 keys a
    node), whose inner nodes point at their children by absolute file offset. Both readers find every
    chromosome and its intervals (before the fix, any file with more than 256 chromosomes did not open)."""
    sizes = [(f"ctg{i:05d}", 1000 + i % 7) for i in range(70_000)]
    path = tmp_path / "many.bw"
    w = bigwigfile.BigWigWriter(path, sizes)
    for i, (c, _) in enumerate(sizes):
        if i % 3 == 0:
            w.write(c, np.array([i % 500]), np.array([600]), np.array([i], np.float32))
    w.close()
    bw = pyBigWig.open(str(path))
    try:
        assert list(bw.chroms().items()) == sizes
        for i in (0, 255, 256, 65_535, 65_536, 69_999):
            want = ((i % 500, 600, float(i)),) if i % 3 == 0 else None
            assert bw.intervals(sizes[i][0]) == want, i
    finally:
        bw.close()
    pybigtools = pytest.importorskip("pybigtools")
    f = pybigtools.open(str(path))
    assert f.chroms() == dict(sizes)
    assert [tuple(x) for x in f.records("ctg69999")] == [(69999 % 500, 600, 69999.0)]


def _write_contigs(path, sizes, pool):
    """Two intervals per contig (a near-constant track: fewer intervals in all than the zoom sample, so the zoom
    levels are only decided at close); the traced peak of writing and closing."""
    import tracemalloc

    w = bigwigfile.BigWigWriter(path, sizes, pool=pool)
    tracemalloc.start()
    try:
        for i, (c, n) in enumerate(sizes):
            w.write(c, np.array([0, n // 2]), np.array([n // 2, n]), np.array([i % 5, 1], np.float32))
        w.close()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_bigwig_writer_many_contigs_bounded_memory_and_spooled_records(tmp_path, monkeypatch):
    """8,000 contigs of a near-constant track, written with a pool: when the zoom levels are decided at close, the
    sample is replayed and drained as it goes (it was queued whole: 34 MB traced here; BIGWIG at 20,000 contigs of
    the tiny model's predictions peaked at 472 MB, 221 MB after), traced under 12 MB. Block records spooled to the
    spill file every few blocks (Records.HELD low) give the same bytes, which pyBigWig reads back with zoom levels."""
    from concurrent.futures import ThreadPoolExecutor

    sizes = [(f"ctg{i:05d}", 1000 + i % 1000) for i in range(8_000)]
    with ThreadPoolExecutor(2) as pool:
        peak = _write_contigs(tmp_path / "many.bw", sizes, pool)
        sizes = sizes[:1500]
        _write_contigs(tmp_path / "a.bw", sizes, pool)
        monkeypatch.setattr(bigwigfile.Records, "HELD", 12)
        _write_contigs(tmp_path / "b.bw", sizes, pool)
    assert peak < 12 << 20, f"{peak / 2**20:.0f} MB traced"
    assert (tmp_path / "a.bw").read_bytes() == (tmp_path / "b.bw").read_bytes()
    bw = pyBigWig.open(str(tmp_path / "b.bw"))
    try:
        for i in (0, 7, 1234, 1499):
            c, n = sizes[i]
            assert bw.intervals(c) == ((0, n // 2, float(i % 5)), (n // 2, n, 1.0)), i
    finally:
        bw.close()
    assert zoom_levels(tmp_path / "b.bw")[1], "no zoom levels"


def test_data_index_is_written_a_spilled_chunk_at_a_time(tmp_path):
    """The data R-tree is written from the spilled block records a chunk at a time (BIGWIG at 4 Gbp: ~0.4 M blocks a
    file, ~170 bytes a block when built from whole arrays: 33 MB traced here, now under 6 MB), in the bytes of the
    whole-array tree; any cut of the items into chunks (across nodes, empty chunks, overlapping items) too."""
    import io
    import tracemalloc

    from chromaflow.bigwig.spool import Records, Spill

    rng = np.random.default_rng(3)
    n = 240_000
    tid = np.repeat(np.arange(4), n // 4)
    start = np.tile(np.arange(n // 4) * 3000, 4)
    end = start + rng.integers(1000, 6000, n)  # overlapping, as bigBed features may
    off, size = np.arange(n) * 5000 + 1000, rng.integers(100, 5000, n)
    whole = bigwigfile.rtree(tid, start, tid, end, off, size, 77, 77, 1024)
    for cuts in ([0, 0, 255, 256, 1000, 70_001, 70_001], list(rng.integers(0, n, 20))):
        bounds = [0, *sorted(cuts), n]

        def chunks():
            for a, b in zip(bounds, bounds[1:]):
                yield tid[a:b], start[a:b], tid[a:b], end[a:b], off[a:b], size[a:b]

        out = io.BytesIO()
        bigwigfile.write_rtree(out, n, chunks, 77, 77, 1024)
        assert out.getvalue() == whole, cuts
    spill = Spill(tmp_path / "spill")
    index = Records(5, spill)
    rows = np.stack([tid, start, end, off, size], axis=1)
    for a in range(0, n, 1000):  # as the writer adds them: a few blocks at a time
        index.extend(rows[a : a + 1000].reshape(-1))
    del rows
    with open(tmp_path / "tail", "wb") as fh:
        fh.write(b"\0" * 77)
        tracemalloc.start()
        try:
            assert bigwigfile.write_index_and_zooms(fh, index, 1024, [], [], [], spill) == (77, [])
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    spill.close()
    assert (tmp_path / "tail").read_bytes()[77:] == whole
    assert peak < 6 << 20, f"{peak / 2**20:.0f} MB traced"


def test_zoom_blocks_run_across_chromosomes_and_each_chromosome_reads_its_own(tmp_path):
    """600 contigs of 2-6 kbp, each with values of its own: every zoom level's blocks run on across chromosomes (as
    kent's bbiWrite.c and our bigBed writer do; one block per contig and level made 50,000 tiny blocks a level at
    the scale benchmark's 4 Gbp), so a level has fewer blocks than chromosomes, and pyBigWig's zoom-level stats of
    every whole contig equal its exact ones: no record of another chromosome is counted in them."""
    import struct

    rng = np.random.default_rng(5)
    sizes = [(f"c{i:04d}", int(rng.integers(2000, 6000))) for i in range(600)]
    path = tmp_path / "z.bw"
    w = bigwigfile.BigWigWriter(path, sizes)
    for i, (c, n) in enumerate(sizes):
        cuts = np.unique(np.r_[0, rng.integers(1, n, 200), n])
        w.write(c, cuts[:-1], cuts[1:], ((i % 50) * 10 + rng.integers(0, 5, len(cuts) - 1)).astype(np.float32))
    w.close()
    b = path.read_bytes()
    n_levels = struct.unpack_from("<H", b, 6)[0]
    assert n_levels >= 2
    for z in range(n_levels):
        index = struct.unpack_from("<IIQQ", b, 64 + 24 * z)[3]
        assert struct.unpack_from("<Q", b, index + 8)[0] < len(sizes) // 4, z  # the R-tree's block count
    bw = pyBigWig.open(str(path))
    try:
        for c, n in sizes:
            for kind in ("max", "min", "coverage", "mean"):
                assert bw.stats(c, 0, n, type=kind) == pytest.approx(bw.stats(c, 0, n, type=kind, exact=True)), (
                    c,
                    kind,
                )
    finally:
        bw.close()
