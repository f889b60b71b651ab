"""add-coverage's two ways of counting a BAM window give the same arrays, counts and errors: the C kernel over
pysam's htslib (``coverage/_bam.c``, used wherever it builds) and the loop over pysam's reads (the fallback without
a compiler, or with ``CHROMAFLOW_COVERAGE_NO_CC=1``). The counts themselves are checked by construction and against
Helixer in test_coverage.py, which runs the command (the C kernel where it builds)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from helpers.bamfactory import Read, random_reads, write_bam
from helpers.cli import chromaflow

from chromaflow.coverage import _native
from chromaflow.coverage.sources import CountOptions, HtsBam, count_bam_window
from chromaflow.utils.errors import ChromaflowError

SIZES = {"chrA": 3000, "chrB": 700, "chrC": 57}


@pytest.fixture(scope="module")
def lib():
    lib = _native.load()
    if lib is None:
        pytest.skip("the C counting kernel does not build here (no compiler or no pysam headers)")
    return lib


@pytest.fixture(scope="module")
def bams(tmp_path_factory):
    d = tmp_path_factory.mktemp("kernel")
    rng = np.random.default_rng(5)
    reads = random_reads(rng, 3000, SIZES, "k")
    reads.append(Read("nocigar", "chrA", 500, [], False, "se"))  # mapped, CIGAR "*": counts nothing, is counted
    write_bam(str(d / "r.bam"), SIZES, reads)
    write_bam(str(d / "badmate.bam"), SIZES, reads[:50] + [Read("neither", "chrA", 2900, [("M", 10)], kind="bad")])
    return d


def _both(lib, path, seqid, lo, hi, opt):
    import pysam

    c = HtsBam(lib, str(path))
    try:
        got_c = count_bam_window(c, str(path), seqid, lo, hi, SIZES[seqid], opt)
    finally:
        c.close()
    with pysam.AlignmentFile(str(path), "rb") as p:
        got_py = count_bam_window(p, str(path), seqid, lo, hi, SIZES[seqid], opt)
    return got_c, got_py


OPTIONS = [
    CountOptions(),
    CountOptions(strand_mode="first"),
    CountOptions(strand_mode="second", min_mapq=10),
    CountOptions(shift=True),
    CountOptions(skip_duplicates=True, min_mapq=1),
]


@pytest.mark.parametrize("opt", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in dataclasses.asdict(o).items()))
def test_c_kernel_counts_what_the_pysam_loop_counts(lib, bams, opt):
    path = bams / "r.bam"
    windows = [(s, 0, n) for s, n in SIZES.items()] + [("chrA", 0, 777), ("chrA", 777, 1500), ("chrA", 2990, 3000)]
    windows += [("chrB", 13, 14), ("chrA", 1500, 3000)]
    total = 0
    for seqid, lo, hi in windows:
        (c_arrs, c_n), (p_arrs, p_n) = _both(lib, path, seqid, lo, hi, opt)
        assert c_n == p_n, (seqid, lo, hi)
        for k, (a, b) in enumerate(zip(c_arrs, p_arrs)):
            assert a.dtype == b.dtype == np.int64 and a.shape == b.shape == (hi - lo,)
            np.testing.assert_array_equal(a, b, err_msg=f"{seqid}:{lo}-{hi} array {k}")
            total += int(a.sum())
    assert total > 10_000  # the windows are not empty


def test_c_kernel_errors_as_the_pysam_loop(lib, bams):
    path = bams / "badmate.bam"
    msgs = []
    for kernel in (True, False):
        import pysam

        src = HtsBam(lib, str(path)) if kernel else pysam.AlignmentFile(str(path), "rb")
        with pytest.raises(ChromaflowError) as exc:
            count_bam_window(src, str(path), "chrA", 0, 3000, 3000, CountOptions(strand_mode="second"))
        src.close()
        msgs.append(str(exc.value))
    assert msgs[0] == msgs[1] and "neither" in msgs[0] and str(path) in msgs[0]


def _corrupt_bam(d):
    """A sorted, indexed BAM whose data blocks past the first are corrupt (bad CRC): its header and index read
    fine, its records do not."""
    sizes = {"chrA": 200_000}
    rng = np.random.default_rng(2)
    reads = [Read(f"c{i}", "chrA", int(p), [("M", 100)]) for i, p in enumerate(np.sort(rng.integers(0, 199_000, 6000)))]
    write_bam(str(d / "corrupt.bam"), sizes, reads)
    data = bytearray((d / "corrupt.bam").read_bytes())
    mid = len(data) // 2
    data[mid : mid + 64] = bytes(b ^ 0x5A for b in data[mid : mid + 64])
    (d / "corrupt.bam").write_bytes(data)
    return sizes


@pytest.mark.parametrize("kernel", ["c", "pysam"])
def test_corrupt_bam_gives_one_line_naming_the_file(tmp_path, kernel):
    from helpers.bamfactory import write_fasta

    sizes = _corrupt_bam(tmp_path)
    write_fasta(str(tmp_path / "g.fa"), sizes)
    r = chromaflow("fasta2h5", "--fasta", tmp_path / "g.fa", "--out", tmp_path / "g.h5", "--species", "sp")
    assert r.returncode == 0, r.stderr
    env = {"CHROMAFLOW_COVERAGE_NO_CC": "1"} if kernel == "pysam" else {}
    before = (tmp_path / "g.h5").read_bytes()
    res = chromaflow(
        "add-coverage", "--h5", tmp_path / "g.h5", "--prefix", "x", "--bam", tmp_path / "corrupt.bam",
        "--unstranded", "--threads", "1", env=env,
    )  # fmt: skip
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1 and len(lines) == 1, res.stderr
    assert lines[0].startswith("chromaflow add-coverage: error: ") and "corrupt.bam" in lines[0], lines[0]
    assert "cannot read the BAM's records in chrA:" in lines[0], lines[0]
    assert (tmp_path / "g.h5").read_bytes() == before
