"""The FASTA index (``chromaflow.genome.faidx``): the layout from a ``.fai`` equals the reader's scan on plain and
bgzip FASTAs (odd ones included), where htslib's faidx rules differ from the reader's the plan scans or gives the
reader's error (never another layout), a stale or foreign index is refused with one line, and a shard's rows
fetched through the index are the reader's rows."""

from __future__ import annotations

import os
import re

import numpy as np
import pysam
import pytest

from chromaflow.utils.errors import ChromaflowError
from chromaflow.genome import faidx
from chromaflow.genome.fasta import FastaReader
from chromaflow.genome.layout import cut, scan_layout
from helpers.cli import assert_one_line_error, run_in_process as run_cli
from helpers.environment import REFERENCE, ROOT

HELIXER = REFERENCE / "helixer"

#: odd FASTAs the index must lay out exactly as the reader does
ODD = {
    # lowercase, N runs, descriptions after the id with a tab and spaces, blank lines between records
    "lower_n_desc": b">r1 some description\there\nacgtNNNNNNNNnnnnACGT\nacgtNNNNNNNNnnnnAC\n\n\n>r2\tdesc\nNNNN\n",
    # Windows line ends, a blank CRLF line between records, last line without a line break
    "crlf": b">c1 x\r\nACGTACGTAC\r\nACGTACGTAC\r\nAC\r\n\r\n>c2\r\nTTTTT\r\nTT",
    # long lines in one record, short ones in the next, a record of exactly one full line, one of one base
    "long_short": b">long\n"
    + b"ACGT" * 300
    + b"\n"
    + b"GGCC" * 300
    + b"\n"
    + b"A" * 7
    + b"\n"
    + b">short\n"
    + b"AC\nGT\nA\n"
    + b">one\n"
    + b"ACGTACGTAC\n"
    + b">single\nN\n",
    # trailing spaces after every line (the same count, so htslib's line lengths agree) and IUPAC codes
    "trailing_blanks": b">t1\nRYSWKM  \nBDHVNa  \nc  \n",
}


def bgzip(src, dst):
    pysam.tabix_compress(str(src), str(dst), force=True)
    return dst


@pytest.fixture(scope="module")
def fastas(tmp_path_factory):
    """name -> path of each FASTA, plain and bgzip, each in a folder of its own (the index is made beside it)."""
    base = tmp_path_factory.mktemp("faidx")
    out = {}
    sources = {name: data for name, data in ODD.items()}
    for stem in ("iupac_L10", "multichunk_L1000", "exactmultiple_L10_lzf"):
        sources[stem] = (HELIXER / f"{stem}.fa").read_bytes()
    sources["pred_data"] = (REFERENCE / "predmoter" / "pred_data.fa").read_bytes()
    sources["asmA"] = (ROOT / "assets" / "test" / "asmA.fa").read_bytes()
    for name, data in sources.items():
        d = base / name
        d.mkdir()
        (d / f"{name}.fa").write_bytes(data)
        out[(name, "plain")] = d / f"{name}.fa"
        (d / "gz").mkdir()
        out[(name, "bgzf")] = bgzip(d / f"{name}.fa", d / "gz" / f"{name}.fa.gz")
    return out


CASES = [
    (name, kind)
    for name in [*ODD, "iupac_L10", "multichunk_L1000", "exactmultiple_L10_lzf", "pred_data", "asmA"]
    for kind in ("plain", "bgzf")
]


@pytest.mark.parametrize("name,kind", CASES)
def test_layout_from_the_index_is_the_scan_layout(fastas, name, kind):
    fa = str(fastas[(name, kind)])
    idx, how = faidx.plan_index(fa)
    assert how["index"] == "fai", how
    assert idx.kind == kind and faidx.compression(fa) == kind
    assert how["index_files"] == (
        [os.path.basename(fa) + ".fai"] + ([os.path.basename(fa) + ".gzi"] if kind == "bgzf" else [])
    )
    for L in (1, 7, 2000):
        got, want = idx.layout(L, b"sp"), scan_layout(fa, L, b"sp")
        assert got.records == want.records
        assert all(np.array_equal(x, y) for x, y in zip(got.rows(), want.rows()))
        assert got.fingerprint() == want.fingerprint()
    # found beside the FASTA the second time: verified again, the same index, not rewritten
    mtime = os.stat(idx.fai).st_mtime_ns
    again, how2 = faidx.plan_index(fa)
    assert how2 == how and again.records == idx.records and os.stat(idx.fai).st_mtime_ns == mtime


@pytest.mark.parametrize(
    "name,kind", [("long_short", "plain"), ("crlf", "bgzf"), ("multichunk_L1000", "bgzf"), ("lower_n_desc", "plain")]
)
@pytest.mark.parametrize("L", [3, 1000])
def test_rows_through_the_index_are_the_readers_rows(fastas, name, kind, L):
    """Every row range (shard boundaries anywhere, inside records too): the jobs fetched through the index cut the
    same bytes as the reader's stream, in small windows."""
    fa = str(fastas[(name, kind)])
    faidx.plan_index(fa)
    idx = faidx.read_index(fa)
    want = _rows(cut(FastaReader(fa).pieces(), L, 2), L)
    n = len(want)
    for start, end in {(0, n), (0, 1), (n - 1, n), (n // 3, 2 * n // 3), (1, n - 1)}:
        stats = faidx.ReadStats()
        got = _rows(faidx.indexed_jobs(idx, L, start, end, stats, window_bp=2 * L), L)
        assert got == want[start:end], (start, end)
    idx.close()


def _rows(jobs, L):
    """(seqid, strand, j) -> bytes of each row, in order, from Jobs (RecordEnd markers skipped)."""
    from chromaflow.genome.layout import Job, chunk_codes

    rows = []
    for job in jobs:
        if not isinstance(job, Job):
            continue
        codes = chunk_codes(job.seq, job.base, job.n, L, job.k, job.strand, job.j0, job.j1)
        for j in range(job.j0, job.j1):
            rows.append(((job.seqid, job.strand, j), codes[j - job.j0].tobytes()))
    return rows


# --------------------------------------------------------------------------------------------------
# where htslib's rules differ from the reader's: the scan (saying why) or the reader's error, never another layout
# --------------------------------------------------------------------------------------------------
DIFFER = [
    # lines of different lengths inside a record: htslib refuses, the reader reads it
    ("ragged_lines", b">a\nACGT\nACG\nACGT\n", "scan", "htslib"),
    # a blank line inside a record: htslib refuses, the reader skips it
    ("blank_inside", b">a\nACGT\n\nACGT\n", "scan", "htslib"),
    # equal line bytes but not equal bases (a trailing blank on one line): htslib indexes it with the wrong
    # positions for every base after that line; the verification sees it
    ("uneven_bases", b">a\nACG \nACGT\nAC\n", "scan", "not where the index puts them"),
    # a full-width blank line inside a record: htslib counts it as a line of no bases
    ("blank_full_width", b">a\nACGT\n    \nACGT\n", "scan", "differs"),
    # plain gzip cannot be indexed
    ("plain_gzip", None, "scan", "gzip (not bgzip)"),
    # htslib drops a duplicate id and an empty record, reads '> x' as 'x' and '>' as '': the reader's errors
    ("duplicate", b">a\nACGT\n>a\nAC\n", "error", "duplicate record id 'a'"),
    ("empty_record", b">a\n>b\nACGT\n", "error", "record 'a' (line 1) is empty"),
    ("blank_before_id", b"> a\nACGT\n", "error", "empty record id"),
    ("only_gt", b">\nACGT\n", "error", "empty record id"),
    ("long_id", b">" + b"x" * 51 + b"\nACGT\n", "error", "51 bytes long"),
    ("bad_char", b">a\nACGU\n", "error", "invalid character 'U'"),
]


@pytest.mark.parametrize("name,data,outcome,needle", DIFFER, ids=[d[0] for d in DIFFER])
def test_where_faidx_differs_the_plan_scans_or_gives_the_readers_error(tmp_path, name, data, outcome, needle):
    fa = tmp_path / "g.fa"
    if data is None:
        import gzip

        fa = tmp_path / "g.fa.gz"
        fa.write_bytes(gzip.compress(b">a\nACGT\n"))
    else:
        fa.write_bytes(data)
    if outcome == "scan":
        idx, how = faidx.plan_index(str(fa))
        assert idx is None and how["index"] == "scan" and needle in how["index_reason"], how
        assert sorted(p.name for p in tmp_path.iterdir()) == [fa.name]  # nothing made is left behind
        scan_layout(str(fa), 3)  # the reader reads it: the plan lays it out by the scan
    else:  # through the command: the reader's one line, the very same as the scan's, and nothing left behind
        proc = run_cli("predict-plan", "--fasta", fa, "--out", tmp_path / "plan.json", check=False)
        line = assert_one_line_error(proc, "predict-plan", needle)
        with pytest.raises(ChromaflowError) as exc:
            scan_layout(str(fa), 3)
        assert line == f"chromaflow predict-plan: error: {exc.value}"
        assert sorted(p.name for p in tmp_path.iterdir()) == [fa.name]


# --------------------------------------------------------------------------------------------------
# stale or foreign indexes: one line naming the index
# --------------------------------------------------------------------------------------------------
@pytest.fixture
def indexed(tmp_path):
    fa = tmp_path / "g.fa"
    fa.write_bytes(b">a desc\n" + b"ACGTACGTAC\n" * 20 + b">b\n" + b"GGGGCCCCAA\n" * 10)
    faidx.plan_index(str(fa))
    return fa


def test_stale_index_of_a_shorter_file(indexed):
    indexed.write_bytes(b">a desc\n" + b"ACGTACGTAC\n" * 20 + b">b\n" + b"GGGGCCCCAA\n" * 5)
    with pytest.raises(ChromaflowError, match=r"g\.fa\.fai: record 'b' .* ends past the end of .*g\.fa"):
        faidx.read_index(str(indexed))
    with pytest.raises(ChromaflowError, match=r"g\.fa\.fai: record 'b' .* ends past the end of .*delete it"):
        faidx.plan_index(str(indexed))


def test_stale_index_found_by_the_plan_is_an_error_not_overwritten(indexed):
    """A header one byte longer: every base one byte later than the index says; the plan's verification sees it."""
    indexed.write_bytes(indexed.read_bytes().replace(b">a desc\n", b">a descr\n"))
    fai = indexed.parent / "g.fa.fai"
    before = fai.read_bytes()
    with pytest.raises(
        ChromaflowError,
        match=r"g\.fa\.fai: FASTA index does not match .*g\.fa \(record 'a': bases "
        r"0-200 are not where the index puts them\).*delete it",
    ):
        faidx.plan_index(str(indexed))
    assert fai.read_bytes() == before


def test_stale_index_with_other_ids_is_found_at_the_header(indexed):
    """Same sizes, another id: the cheap checks pass, the header before the record names another id; the shard that
    reads the record refuses it."""
    indexed.write_bytes(indexed.read_bytes().replace(b">b\n", b">c\n"))
    idx = faidx.read_index(str(indexed))
    with pytest.raises(ChromaflowError, match=r"g\.fa\.fai: record 'b' at byte .*'>c'.*stale"):
        list(faidx.indexed_jobs(idx, 10, 40, 50, faidx.ReadStats()))  # rows 40..59 are record 'b''s
    assert len(list(faidx.indexed_jobs(idx, 10, 0, 40, faidx.ReadStats()))) == 2  # record 'a' is still 'a'


def test_stale_index_with_a_bad_base_gives_the_readers_error(indexed):
    data = bytearray(indexed.read_bytes())
    data[data.index(b">b\n") + 5] = ord("U")
    indexed.write_bytes(bytes(data))
    idx = faidx.read_index(str(indexed))
    with pytest.raises(
        ChromaflowError, match=r"record 'b' \(header line 22\): line 23, column 3: invalid character 'U'"
    ):
        list(faidx.indexed_jobs(idx, 10, 40, 60, faidx.ReadStats()))


@pytest.mark.parametrize(
    "fai_text,needle",
    [
        (b"a\t200\t8\t10\n", "not a FASTA index line"),
        (b"a\t200\t8\t10\t11\na\t100\t231\t10\t11\n", "duplicate record id 'a'"),
        (b"a\t200\t8\t10\t11\nb\t100\t100\t10\t11\n", "inside the previous record"),
        (b"a\t0\t8\t10\t11\n", "0 bases"),
        (b"a b\t200\t8\t10\t11\n", "not printable ASCII"),
    ],
)
def test_malformed_index_lines(indexed, fai_text, needle):
    (indexed.parent / "g.fa.fai").write_bytes(fai_text)
    with pytest.raises(ChromaflowError, match=re.escape(needle)):
        faidx.read_index(str(indexed))


def test_bgzip_without_its_gzi_and_with_a_foreign_gzi(tmp_path):
    fa = bgzip_of(tmp_path, b">a\n" + b"ACGT" * 30000 + b"\n")
    faidx.plan_index(str(fa))
    gzi = fa.parent / (fa.name + ".gzi")
    saved = gzi.read_bytes()
    gzi.unlink()
    with pytest.raises(ChromaflowError, match=r"\.gzi: bgzip FASTA .* has a \.fai but no \.gzi"):
        faidx.read_index(str(fa))
    gzi.write_bytes(saved[:-3])
    with pytest.raises(ChromaflowError, match=r"\.gzi: not a bgzip index"):
        faidx.read_index(str(fa))


def bgzip_of(tmp_path, data):
    src = tmp_path / "src.fa"
    src.write_bytes(data)
    out = bgzip(src, tmp_path / "g.fa.gz")
    src.unlink()
    return out


@pytest.mark.parametrize("kind", ["plain", "bgzf"])
def test_a_shard_reads_about_its_share_of_the_file(tmp_path, kind):
    """Three records of 300 kbp (random bases, 60 a line; bgzip: 15 BGZF blocks): the rows of shard i of 3 are
    read from a third of the file on disk or little more, each record's bases once per strand."""
    from chromaflow.utils.sharding import part_bounds

    rng = np.random.default_rng(0)
    fa = tmp_path / "g.fa"
    with open(fa, "wb") as fh:
        for r in range(3):
            seq = np.frombuffer(b"ACGT", dtype=np.uint8)[rng.integers(0, 4, 300_000)].tobytes()
            fh.write(f">r{r}\n".encode() + b"\n".join(seq[i : i + 60] for i in range(0, len(seq), 60)) + b"\n")
    if kind == "bgzf":
        fa = bgzip_of(tmp_path, fa.read_bytes())
    idx, how = faidx.plan_index(str(fa))
    assert how["index"] == "fai" and len(idx.blocks) > (10 if kind == "bgzf" else 0)
    size, L = fa.stat().st_size, 10_000
    rows = idx.layout(L).n_rows
    assert rows == 180
    got = []
    for i in (1, 2, 3):
        stats = faidx.ReadStats()
        for job in faidx.indexed_jobs(idx, L, *part_bounds(i, 3, rows), stats, window_bp=50_000):
            assert job.seq.size <= 50_000  # memory bounded: a record is fetched in windows, never whole
        got.append(stats)
        assert stats.records == {f"r{i - 1}"} and stats.bases == 2 * 300_000  # its record, both strands
        assert size / 3 * 0.99 < stats.disk_bytes < size / 3 + (2 * 65536 if kind == "bgzf" else 0)
    assert sum(s.disk_bytes for s in got) <= size + (6 * 65536 if kind == "bgzf" else 0)
