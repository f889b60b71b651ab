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


@pytest.fixture(scope="module")
def corrupt(tmp_path_factory):
    """A genome h5 and two sorted, indexed BAMs with a corrupt (bad CRC) BGZF data block: the first one (no record
    of the window can be read) or one in the middle; their header and index read fine."""
    from helpers.bamfactory import write_fasta

    d = tmp_path_factory.mktemp("corrupt")
    sizes = {"chrA": 200_000}
    rng = np.random.default_rng(2)
    starts = np.sort(rng.integers(0, 199_000, 6000))
    reads = [Read(f"c{i}", "chrA", int(p), [("M", 100)]) for i, p in enumerate(starts)]
    write_bam(str(d / "ok.bam"), sizes, reads)
    data = (d / "ok.bam").read_bytes()
    first_data_block = int.from_bytes(data[16:18], "little") + 1  # the header's BGZF block ends here (BSIZE + 1)
    for name, at in (("first", first_data_block + 30), ("middle", len(data) // 2)):
        bad = bytearray(data)
        bad[at : at + 64] = bytes(b ^ 0x5A for b in bad[at : at + 64])
        (d / f"{name}.bam").write_bytes(bad)
        (d / f"{name}.bam.bai").write_bytes((d / "ok.bam.bai").read_bytes())
    write_fasta(str(d / "g.fa"), sizes)
    r = chromaflow("fasta2h5", "--fasta", d / "g.fa", "--out", d / "g.h5", "--species", "sp")
    assert r.returncode == 0, r.stderr
    return d


@pytest.mark.parametrize("where", ["first", "middle"])
@pytest.mark.parametrize("kernel", ["c", "pysam"])
def test_corrupt_bam_gives_one_line_naming_the_file(corrupt, tmp_path, kernel, where):
    h5 = tmp_path / "g.h5"
    h5.write_bytes((corrupt / "g.h5").read_bytes())
    env = {"CHROMAFLOW_COVERAGE_NO_CC": "1"} if kernel == "pysam" else {}
    res = chromaflow(
        "add-coverage", "--h5", h5, "--prefix", "x", "--bam", corrupt / f"{where}.bam", "--unstranded",
        "--threads", "1", env=env,
    )  # fmt: skip
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1 and len(lines) == 1, res.stderr
    assert lines[0].startswith("chromaflow add-coverage: error: ") and f"{where}.bam" in lines[0], lines[0]
    assert "cannot read the BAM's records in chrA:" in lines[0], lines[0]
    assert h5.read_bytes() == (corrupt / "g.h5").read_bytes()
