"""chromaflow's streaming bigBed writer (bigwig/bigbedfile.py), read back by two other libraries (pyBigWig's
libBigWig and pybigtools), its zoom records against the coverage depth counted base by base."""

from __future__ import annotations

import struct
import subprocess
import sys

import numpy as np
import pytest

pyBigWig = pytest.importorskip("pyBigWig")

from helpers.bigwig_helpers import zoom_levels  # noqa: E402
from chromaflow.bigwig import bigbedfile  # noqa: E402
from chromaflow.utils.errors import ChromaflowError  # noqa: E402

SQL = """table bed6
"test"
    (
    string chrom;      "c"
    uint   chromStart; "s"
    uint   chromEnd;   "e"
    string name;       "n"
    uint   score;      "s"
    char[1] strand;    "+ or -"
    )
"""


def features(rng, sizes, n_per_chrom, max_len, overlap=True):
    rows = []
    for c, size in sorted(sizes, key=lambda x: x[0].encode()):
        n = n_per_chrom if size > max_len else 0
        s = np.sort(rng.integers(0, size - max_len, n))
        if not overlap:  # disjoint: spread out
            s = np.unique(s // (2 * max_len)) * (2 * max_len)
        e = s + rng.integers(1, max_len, len(s))
        for i, (a, b) in enumerate(zip(s.tolist(), e.tolist())):
            rows.append((c, a, b, f"{c}_f{i}\t{int(rng.integers(0, 1001))}\t{'+-'[i % 2]}"))
    return rows


def read_all(path, sizes):
    bb = pyBigWig.open(str(path))
    try:
        assert bb.isBigBed() and bb.chroms() == dict(sizes)
        got = [
            (c, s, e, rest)
            for c in sorted(bb.chroms(), key=str.encode)
            for s, e, rest in (bb.entries(c, 0, bb.chroms()[c]) or [])
        ]
        sql = bb.SQL().decode()
    finally:
        bb.close()
    return got, sql


@pytest.mark.parametrize("slot", [512, 3])
def test_rows_read_back_by_pybigwig_and_pybigtools(tmp_path, monkeypatch, slot):
    """Every row back in order with its fields, chromosome sizes, autoSql and field counts; windowed queries
    equal a scan of the rows (the R-tree), also with 3 rows a block (several index levels) and overlapping
    features whose ends are not sorted (a node's box must reach the largest end under it). With 3 rows a block,
    the block records are spooled to the spill file every two blocks (spool.Records)."""
    monkeypatch.setattr(bigbedfile, "ITEMS_PER_SLOT", slot)
    if slot == 3:
        monkeypatch.setattr(bigbedfile.Records, "HELD", 12)
    rng = np.random.default_rng(slot)
    sizes = [("chr10", 900_000), ("chr2", 500_000), ("scaffold_9", 5_000), ("chrM", 40)]
    rows = features(rng, sizes, 400, 20_000)
    rows.append(("chrM", 0, 40, "m\t0\t+"))
    rows.sort(key=lambda r: (r[0].encode(), r[1]))
    path = tmp_path / "x.bb"
    assert bigbedfile.write_bigbed(path, sizes, lambda: iter(rows), SQL, 6, 6) == len(rows)
    got, sql = read_all(path, sizes)
    assert got == rows and sql == SQL
    assert struct.unpack_from("<IHH", path.read_bytes(), 0)[0] == bigbedfile.BIGBED_MAGIC
    assert struct.unpack_from("<HH", path.read_bytes(), 32) == (6, 6)
    bb = pyBigWig.open(str(path))
    try:
        for _ in range(60):
            c, size = sizes[int(rng.integers(0, 2))]
            a = int(rng.integers(0, size - 1))
            b = int(rng.integers(a + 1, min(size, a + 60_000) + 1))
            want = [(s, e, r) for cc, s, e, r in rows if cc == c and s < b and e > a]
            assert [tuple(x) for x in (bb.entries(c, a, b) or [])] == want
    finally:
        bb.close()
    pybigtools = pytest.importorskip("pybigtools")
    f = pybigtools.open(str(path))
    assert [
        (c, *tuple(x)[:2], "\t".join(tuple(x)[2:]))
        for c, _ in sorted(sizes, key=lambda x: x[0].encode())
        for x in f.records(c)
    ] == rows


def test_index_reaches_a_long_feature_in_an_early_block(tmp_path, monkeypatch):
    """One row a block, 300 blocks (two index levels): a feature spanning the chromosome in the first block is
    found by a query far past the first index node's last block, whose own end is 2,555."""
    monkeypatch.setattr(bigbedfile, "ITEMS_PER_SLOT", 1)
    rows = [("a", 0, 100_000, "long\t0\t+")] + [("a", i * 10, i * 10 + 5, f"f{i}\t0\t+") for i in range(1, 300)]
    path = tmp_path / "l.bb"
    bigbedfile.write_bigbed(path, [("a", 100_000)], lambda: iter(rows), SQL, 6, 6)
    bb = pyBigWig.open(str(path))
    try:
        assert bb.entries("a", 50_000, 50_001) == [(0, 100_000, "long\t0\t+")]
        assert len(bb.entries("a", 2_990, 2_996)) == 2
    finally:
        bb.close()


def test_zoom_levels_are_the_coverage_depth(tmp_path):
    """Total summary and every zoom record: the coverage depth (features over each base, overlaps counted per
    feature) in aligned bins, as counted base by base; reductions 10 × mean length then × 4."""
    rng = np.random.default_rng(5)
    sizes = [("a", 300_000), ("b", 120_000)]
    rows = features(rng, sizes, 300, 3_000)
    path = tmp_path / "z.bb"
    bigbedfile.write_bigbed(path, sizes, lambda: iter(rows), SQL, 6, 6)
    depth = {c: np.zeros(size, np.int64) for c, size in sizes}
    for c, s, e, _ in rows:
        depth[c][s:e] += 1
    summary, levels = zoom_levels(path)
    allv = np.concatenate([d[d > 0] for d in depth.values()]).astype(np.float64)
    assert summary == (len(allv), allv.min(), allv.max(), allv.sum(), (allv**2).sum()) and allv.max() > 1
    mean = np.mean([e - s for _, s, e, _ in rows])
    assert len(levels) >= 2 and [r for r, _ in levels] == [10 * int(mean) * 4**k for k in range(len(levels))]
    names = sorted((c for c, _ in sizes), key=str.encode)
    for red, recs in levels:
        assert int(recs["count"].sum()) == len(allv)
        for r in recs:
            d = depth[names[r["chrom"]]][r["start"] : r["end"]]
            assert r["start"] // red == (r["end"] - 1) // red
            cov = d[d > 0]
            assert (r["count"], r["min"], r["max"], r["sum"]) == (len(cov), cov.min(), cov.max(), cov.sum())
            assert d[0] > 0 and d[-1] > 0  # the record spans covered bases only at its ends


def test_bad_rows_one_line_error_and_no_file(tmp_path):
    sizes = [("a", 1000), ("b", 1000)]
    cases = {
        "unsorted chromosomes": [("b", 1, 5, ""), ("a", 1, 5, "")],
        "unsorted starts": [("a", 10, 15, ""), ("a", 1, 5, "")],
        "unknown chromosome": [("c", 1, 5, "")],
        "beyond the end": [("a", 990, 1001, "")],
        "end before start": [("a", 5, 4, "")],
    }
    for what, rows in cases.items():
        path = tmp_path / "bad.bb"
        with pytest.raises(ChromaflowError) as e:
            bigbedfile.write_bigbed(path, sizes, lambda rows=rows: iter(rows), SQL, 6, 6)
        assert str(path) in str(e.value) and "\n" not in str(e.value), what
        assert list(tmp_path.iterdir()) == [], what


def test_no_rows_still_a_bigbed(tmp_path):
    path = tmp_path / "e.bb"
    assert bigbedfile.write_bigbed(path, [("a", 100)], lambda: iter([]), SQL, 6, 6) == 0
    assert read_all(path, [("a", 100)]) == ([], SQL)


def test_memory_does_not_grow_with_the_chromosomes(tmp_path):
    """20,000 contigs with a feature each (a draft assembly's peaks): the writer's peak RSS stays within a few
    tens of MB of the interpreter's, where pybigtools 0.3 kept ~45 KB per chromosome (~900 MB here; 2.1 GB at
    50,000, measured)."""
    code = f"""
import resource, sys
sys.path[:0] = {sys.path!r}
from chromaflow.bigwig import bigbedfile
sizes = [(f"ctg{{i:05d}}", 5000) for i in range(20_000)]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
rows = lambda: ((c, 100, 400, "p\\t0\\t.") for c, _ in sizes)
bigbedfile.write_bigbed(sys.argv[1], sizes, rows, {SQL!r}, 6, 6)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "m.bb")], capture_output=True, text=True, check=True
    )
    grown_kb = int(out.stdout.strip())
    assert grown_kb < 100_000, f"the writer grew by {grown_kb} KB for 20,000 chromosomes"
    bb = pyBigWig.open(str(tmp_path / "m.bb"))
    try:
        assert len(bb.chroms()) == 20_000 and bb.entries("ctg19999", 0, 5000) == [(100, 400, "p\t0\t.")]
    finally:
        bb.close()


def test_zero_length_features_and_no_zoom_level(tmp_path):
    """A zero-length feature (an insertion point, as BED allows) is stored and covers nothing; a chromosome
    shorter than the first reduction gets no zoom level, and the total summary is still the coverage depth."""
    rows = [("a", 0, 10, "x\t0\t+"), ("a", 5, 5, "ins\t0\t+"), ("a", 5, 20, "y\t0\t-")]
    path = tmp_path / "s.bb"
    bigbedfile.write_bigbed(path, [("a", 50)], lambda: iter(rows), SQL, 6, 6)
    summary, levels = zoom_levels(path)
    assert levels == []
    depth = np.zeros(50)
    depth[0:10] += 1
    depth[5:20] += 1
    cov = depth[depth > 0]
    assert summary == (len(cov), cov.min(), cov.max(), cov.sum(), (cov**2).sum())
    got, _ = read_all(path, [("a", 50)])
    assert got == rows
