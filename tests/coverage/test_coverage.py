"""``chromaflow add-coverage``: counts by construction, equality with the real Helixer tool, bad input, atomicity.

Genomes are made with ``chromaflow fasta2h5`` (L = 100) from seeded FASTAs; BAMs are written with pysam from read
lists whose coverage :func:`bamfactory.expected` walks base by base from the CIGAR. The Helixer comparison runs
the real ``add_ngs_coverage.py`` (``../shared/peers``) on a copy of the same h5 with the same BAMs.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from helpers.bamfactory import Read, expected, random_reads, to_rows, write_bam, write_fasta
from helpers.environment import REFERENCE, unavailable
from helpers.cli import chromaflow, ok

L = 100
SIZES = {"chr1": 250, "chr2": 70, "chr3": 300}
PEER = REFERENCE.parent / "peers" / "bin" / "peer-helixer-add-ngs-coverage"

# reads whose coverage is known by construction (FORMATS.md §7.1 cases)
READS_A = [
    Read(
        "spliced_edge",
        "chr1",
        90,
        [("S", 5), ("M", 20), ("N", 30), ("M", 15), ("I", 3), ("=", 10), ("D", 5), ("X", 8), ("S", 4)],
    ),
    Read("rev_edge", "chr1", 195, [("M", 30)], True, "r1"),
    Read("to_end", "chr1", 230, [("M", 20)], False, "r2"),
    Read("from_start", "chr1", 0, [("M", 10), ("D", 2), ("M", 10)], True, "r2"),
    Read("dup_mapq0", "chr1", 40, [("M", 25)], False, "r1", flags=0x400, mapq=0),
    Read("supplementary", "chr1", 150, [("H", 20), ("M", 12)], True, "se", flags=0x800),
    Read("secondary", "chr1", 10, [("M", 50)], flags=0x100),
    Read("qcfail", "chr1", 20, [("M", 50)], True, flags=0x200),
    Read("unmapped_placed", "chr1", 60, [("M", 10)], flags=0x4),
    Read("padded", "chr1", 120, [("M", 5), ("P", 2), ("M", 5)], True, "r1"),
    Read("mapq5", "chr1", 100, [("M", 30)], False, "se", mapq=5),
    Read("first_flag_unpaired", "chr1", 60, [("M", 12)], False, "se", flags=0x40),
    Read("chr2_rev", "chr2", 60, [("M", 10)], True),
    Read("chr2_fwd", "chr2", 0, [("S", 3), ("M", 30), ("N", 20), ("M", 6)], False, "r2"),
    Read("chr3_edge", "chr3", 95, [("M", 10)], False, "r1"),
    Read("chr3_long_intron", "chr3", 190, [("M", 20), ("N", 50), ("M", 10)], True, "r1"),
    Read("chr3_del_edge", "chr3", 97, [("M", 2), ("D", 4), ("M", 6)], True, "se", flags=0x400),
]
# short reads: Helixer's --shift crashes on them (span <= 4 / <= 5); ours counts nothing for them
READS_SHORT = [
    Read("short_plus", "chr1", 140, [("M", 3)]),
    Read("short_minus", "chr1", 160, [("M", 5)], True),
]
READS_B = [
    Read("b1", "chr1", 98, [("M", 8)]),
    Read("b2", "chr1", 240, [("M", 10)], True, "r2"),
    Read("b3", "chr2", 5, [("M", 20), ("D", 1), ("M", 5)], True, "r1"),
    Read("b4", "chr3", 199, [("M", 2)], False, "r2"),
]


_cli = functools.partial(chromaflow, "add-coverage")


def _sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _genome(d: Path, sizes=SIZES, species="sp", name="genome") -> Path:
    fa = d / f"{name}.fa"
    write_fasta(str(fa), sizes)
    h5 = d / f"{name}.h5"
    ok("fasta2h5", "--fasta", fa, "--species", species, "--out", h5, "--subsequence-length", L, "--deflate", "zlib")
    return h5


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    d = tmp_path_factory.mktemp("cov")
    h5 = _genome(d)
    write_bam(str(d / "a.bam"), SIZES, READS_A + READS_SHORT)
    write_bam(str(d / "b.bam"), SIZES, READS_B)
    return d, h5


def _layout(h5):
    with h5py.File(h5, "r") as f:
        return [s.decode() for s in f["data/seqids"][()]], f["data/start_ends"][()]


def _check_counts(h5, prefix, bams, mode, shift, **opt):
    seqids, se = _layout(h5)
    with h5py.File(h5, "r") as f:
        cov, spl = f[f"evaluation/{prefix}_coverage"], f[f"evaluation/{prefix}_spliced_coverage"]
        for d in (cov, spl):
            assert d.shape == (len(seqids), L, len(bams))
            assert d.dtype == np.int64 and d.chunks == (1, L, 1) and d.maxshape == (None, L, None)
            assert d.compression == "lzf" and d.shuffle and d.fillvalue == -1
        names = [x.decode() for x in f[f"evaluation/{prefix}_meta/bam_files"][()]]
        assert names == [str(b) for b in bams]
        for k, (bam, reads) in enumerate(bams.items()):
            ec, es = expected(reads, SIZES, mode, shift, **opt)
            np.testing.assert_array_equal(cov[:, :, k], to_rows(ec, seqids, se, L), err_msg=f"{bam} coverage")
            np.testing.assert_array_equal(spl[:, :, k], to_rows(es, seqids, se, L), err_msg=f"{bam} spliced")
            assert (cov[:, :, k] > 0).sum() > 20  # the case is not trivially empty


@pytest.mark.parametrize(
    "mode,flag,shift,window",
    [
        ("unstranded", "--unstranded", False, None),
        ("unstranded", "--unstranded", False, 1),  # one chunk per window: reads cross window edges
        ("second", "--second-read-is-sense-strand", False, None),
        ("first", "--first-read-is-sense-strand", False, 1),
        ("unstranded", "--unstranded", True, None),
        ("unstranded", "--unstranded", True, 1),
    ],
)
def test_counts_by_construction(case, tmp_path, mode, flag, shift, window):
    d, h5 = case
    work = tmp_path / "g.h5"
    shutil.copy(h5, work)
    extra = ["--shift"] if shift else []
    if window:
        extra += ["--window-bp", str(window)]
    res = _cli(
        "--h5", work, "--prefix", "x", "--bam", d / "a.bam", d / "b.bam", flag, *extra, "--threads", "2", cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr
    _check_counts(work, "x", {d / "a.bam": READS_A + READS_SHORT, d / "b.bam": READS_B}, mode, shift)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.h5"]  # nothing else made in the cwd / beside it


def test_extra_options(case, tmp_path):
    d, h5 = case
    work = tmp_path / "g.h5"
    shutil.copy(h5, work)
    res = _cli(
        "--h5", work, "--prefix", "x", "--bam", d / "a.bam", "--unstranded", "--min-mapq", "10", "--skip-duplicates"
    )
    assert res.returncode == 0, res.stderr
    _check_counts(
        work, "x", {d / "a.bam": READS_A + READS_SHORT}, "unstranded", False, min_mapq=10, skip_duplicates=True
    )


def test_append_and_threads_identical(case, tmp_path):
    """A second run with the same prefix appends columns; 1 and 3 workers give byte-identical files."""
    d, h5 = case
    outs = []
    for threads in (1, 3):
        work = tmp_path / f"t{threads}.h5"
        shutil.copy(h5, work)
        for bams in (["a.bam"], ["b.bam", "a.bam", "b.bam"]):
            res = _cli(
                "--h5",
                work,
                "--prefix",
                "x",
                "--bam",
                *[d / b for b in bams],
                "--unstranded",
                "--threads",
                threads,
                "--window-bp",
                1,
            )
            assert res.returncode == 0, res.stderr
        outs.append(work)
    assert _sha(outs[0]) == _sha(outs[1])
    seqids, se = _layout(outs[0])
    with h5py.File(outs[0], "r") as f:
        names = [x.decode() for x in f["evaluation/x_meta/bam_files"][()]]
        assert names == [str(d / "a.bam"), str(d / "b.bam"), str(d / "a.bam")]
        cov = f["evaluation/x_coverage"][()]
    for k, reads in enumerate((READS_A + READS_SHORT, READS_B, READS_A + READS_SHORT)):
        np.testing.assert_array_equal(cov[:, :, k], to_rows(expected(reads, SIZES)[0], seqids, se, L))


# --------------------------------------------------------------------------------------------------
# the real Helixer add_ngs_coverage.py on the same inputs
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def peer():
    if not PEER.exists():
        unavailable(f"{PEER} is absent (the peers kit beside the checkout)")
    return str(PEER)


@pytest.fixture(scope="module")
def peer_case(tmp_path_factory):
    d = tmp_path_factory.mktemp("peer")
    sizes = {"chrA": 1234, "chrB": 300, "chrC": 57}
    h5 = _genome(d, sizes)
    rng = np.random.default_rng(7)
    write_bam(str(d / "r1.bam"), sizes, random_reads(rng, 400, sizes, "x"))
    write_bam(str(d / "r2.bam"), sizes, random_reads(rng, 150, sizes, "y"))
    return d, h5


def _compare(a: Path, b: Path, prefix: str) -> None:
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        for name in (
            f"evaluation/{prefix}_coverage",
            f"evaluation/{prefix}_spliced_coverage",
            f"evaluation/{prefix}_meta/bam_files",
        ):
            x, y = fa[name], fb[name]
            assert (x.shape, x.dtype, x.chunks, x.maxshape, x.compression, x.shuffle, x.fillvalue) == (
                y.shape,
                y.dtype,
                y.chunks,
                y.maxshape,
                y.compression,
                y.shuffle,
                y.fillvalue,
            ), name
            np.testing.assert_array_equal(x[()], y[()], err_msg=name)
        assert fa["evaluation/" + prefix + "_coverage"][()].max() > 0


@pytest.mark.reference
@pytest.mark.parametrize(
    "flag,shift",
    [
        ("--unstranded", False),
        ("--second-read-is-sense-strand", False),
        ("--first-read-is-sense-strand", False),
        ("--unstranded", True),
    ],
)
def test_equals_helixer(peer, peer_case, tmp_path, flag, shift):
    """Same BAMs, same h5: the datasets (values, dtype, chunks, filters, fill, bam_files) equal Helixer's, also
    after a second, appending run."""
    d, h5 = peer_case
    ours, theirs = tmp_path / "ours.h5", tmp_path / "theirs.h5"
    shutil.copy(h5, ours)
    shutil.copy(h5, theirs)
    runs = (["r1.bam", "r2.bam"], ["r2.bam"])
    for bams in runs:
        extra = ["--shift"] if shift else []
        res = _cli("--h5", ours, "--prefix", "p", "--bam", *bams, flag, *extra, cwd=d)
        assert res.returncode == 0, res.stderr
        res = subprocess.run(
            [peer, "-s", "sp", "-d", str(theirs), "-b", *bams, flag, *extra, "--dataset-prefix", "p", "--threads", "1"],
            capture_output=True,
            text=True,
            cwd=d,
        )
        assert res.returncode == 0, res.stderr[-2000:]
    _compare(ours, theirs, "p")


@pytest.mark.reference
def test_equals_helixer_selftest_case(peer, tmp_path):
    """The peers kit's own add_ngs_coverage case (the BAMs its check script builds), through both tools."""
    check = REFERENCE.parent / "peers" / "checks" / "ngs_coverage.py"
    subprocess.run([sys.executable, str(check), "make", str(tmp_path)], check=True)
    h5 = tmp_path / "genome.h5"
    ok("fasta2h5", "--fasta", tmp_path / "genome.fa", "--species", "sp", "--out", h5, "--subsequence-length", "100")
    ours = tmp_path / "ours.h5"
    shutil.copy(h5, ours)
    for args in (
        ["-b", "a.bam", "b.bam", "--second-read-is-sense-strand", "--dataset-prefix", "rna"],
        ["-b", "a.bam", "--unstranded", "--shift", "--dataset-prefix", "atac"],
    ):
        subprocess.run(
            [peer, "-s", "sp", "-d", str(h5), "--threads", "1", *args], check=True, cwd=tmp_path, capture_output=True
        )
        i = args.index("--dataset-prefix")
        mine = ["--bam" if a == "-b" else a for a in args[:i]]
        res = _cli("--h5", ours, "--prefix", args[i + 1], *mine, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
    _compare(ours, h5, "rna")
    _compare(ours, h5, "atac")


# --------------------------------------------------------------------------------------------------
# bad input: one line naming the file, non-zero exit, the h5 unchanged, nothing left behind
# --------------------------------------------------------------------------------------------------
def _bad_bams(d: Path) -> dict[str, tuple[list[str], str]]:
    ok = [Read("r", "chr1", 10, [("M", 20)])]
    write_bam(
        str(d / "unsorted.bam"),
        SIZES,
        [Read("z", "chr1", 200, [("M", 5)])] + ok,
        sort=False,
        index=False,
        so="unsorted",
    )
    write_bam(str(d / "noindex.bam"), SIZES, ok, index=False)
    write_bam(str(d / "missing_seqid.bam"), {"chr1": 250, "chr2": 70}, ok)
    write_bam(str(d / "wrong_ln.bam"), SIZES, ok, header_sizes={"chr1": 251, "chr2": 70, "chr3": 300})
    write_bam(str(d / "empty.bam"), SIZES, [])
    (d / "zero.bam").write_bytes(b"")
    (d / "text.bam").write_text("not a bam\n")
    write_bam(str(d / "badmate.bam"), SIZES, ok + [Read("neither_mate", "chr3", 250, [("M", 10)], kind="bad")])
    return {
        "unsorted": (["--bam", "unsorted.bam", "--unstranded"], "not coordinate-sorted"),
        "noindex": (["--bam", "noindex.bam", "--unstranded"], "no index"),
        "missing_seqid": (["--bam", "missing_seqid.bam", "--unstranded"], "chr3"),
        "wrong_ln": (["--bam", "wrong_ln.bam", "--unstranded"], "LN:251"),
        "empty": (["--bam", "empty.bam", "--unstranded"], "no mapped reads"),
        "zero": (["--bam", "zero.bam", "--unstranded"], "empty"),
        "text": (["--bam", "text.bam", "--unstranded"], "text.bam"),
        "absent": (["--bam", "absent.bam", "--unstranded"], "does not exist"),
        # found while counting (the last window): the atomic update must roll everything back
        "badmate": (["--bam", "badmate.bam", "--second-read-is-sense-strand"], "neither_mate"),
        "shift_stranded": (["--bam", "badmate.bam", "--first-read-is-sense-strand", "--shift"], "--shift"),
        "bad_prefix": (["--bam", "empty.bam", "--unstranded", "--prefix", "a/b"], "--prefix"),
    }


@pytest.fixture(scope="module")
def bad_case(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    h5 = _genome(d)
    return d, h5, _bad_bams(d)


@pytest.mark.parametrize(
    "name",
    [
        "unsorted",
        "noindex",
        "missing_seqid",
        "wrong_ln",
        "empty",
        "zero",
        "text",
        "absent",
        "badmate",
        "shift_stranded",
        "bad_prefix",
    ],
)
def test_bad_input(bad_case, name):
    d, h5, cases = bad_case
    args, needle = cases[name]
    before = _sha(h5)
    listing = sorted(p.name for p in d.iterdir())
    prefix = [] if "--prefix" in args else ["--prefix", "x"]
    res = _cli("--h5", h5, *prefix, *args, "--threads", "2", "--window-bp", "1", cwd=d)
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("chromaflow add-coverage: error:"), res.stderr
    assert needle in lines[0], lines[0]
    if name not in ("shift_stranded", "bad_prefix"):
        assert args[1] in lines[0]  # names the file
    assert _sha(h5) == before
    assert sorted(p.name for p in d.iterdir()) == listing


def test_killed_midway_leaves_h5_unchanged(tmp_path):
    """SIGKILL in the middle of a run: the user's h5 is byte-identical (only a dot-named temporary may remain)."""
    sizes = {f"c{i}": 400_000 for i in range(4)}
    h5 = _genome(tmp_path, sizes)
    rng = np.random.default_rng(3)
    reads = [
        Read(f"r{i}", f"c{i % 4}", int(p), [("M", 50), ("N", 300), ("M", 50)], bool(i % 2))
        for i, p in enumerate(rng.integers(0, 399_000, 120_000))
    ]
    write_bam(str(tmp_path / "big.bam"), sizes, reads)
    before = _sha(h5)
    env = dict(os.environ, CHROMAFLOW_PROGRESS="0")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "chromaflow",
            "add-coverage",
            "--h5",
            str(h5),
            "--prefix",
            "x",
            "--bam",
            str(tmp_path / "big.bam"),
            "--unstranded",
            "--threads",
            "1",
            "--window-bp",
            "1",
        ],
        env=env,
        start_new_session=True,
    )
    deadline = time.time() + 60
    while time.time() < deadline and not any(p.name.endswith(".part") for p in tmp_path.iterdir()):
        time.sleep(0.02)
    time.sleep(0.3)
    assert proc.poll() is None, "finished before it could be killed; make the case bigger"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert _sha(h5) == before
    with h5py.File(h5, "r") as f:
        assert "evaluation" not in f


def test_interrupt_removes_temporary(tmp_path):
    sizes = {f"c{i}": 400_000 for i in range(4)}
    h5 = _genome(tmp_path, sizes)
    rng = np.random.default_rng(4)
    reads = [Read(f"r{i}", f"c{i % 4}", int(p), [("M", 80)]) for i, p in enumerate(rng.integers(0, 399_000, 120_000))]
    write_bam(str(tmp_path / "big.bam"), sizes, reads)
    before = _sha(h5)
    env = dict(os.environ, CHROMAFLOW_PROGRESS="0")
    # Ctrl-C's default action for the child even where this suite runs with SIGINT ignored (a background job of a
    # non-interactive shell, e.g. `.ci/run &`: the child inherits SIG_IGN, Python then installs no KeyboardInterrupt
    # handler and the run ignores Ctrl-C, as a background job should). This was the "lost Ctrl-C" seen in CI.
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "chromaflow",
            "add-coverage",
            "--h5",
            str(h5),
            "--prefix",
            "x",
            "--bam",
            str(tmp_path / "big.bam"),
            "--unstranded",
            "--threads",
            "2",
            "--window-bp",
            "1",
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 60
    while time.time() < deadline and not any(p.name.endswith(".part") for p in tmp_path.iterdir()):
        time.sleep(0.02)
    # interrupt as soon as the temporary copy exists (a fixed extra wait let a fast or idle machine finish first)
    assert proc.poll() is None, "finished before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["chromaflow add-coverage: error: interrupted by SIGINT"]
    assert _sha(h5) == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]


# --------------------------------------------------------------------------------------------------
# species rows and bigWig input
# --------------------------------------------------------------------------------------------------
def test_species_rows(tmp_path):
    """With --species only that species' rows are computed; the others stay -1 (Helixer's -s)."""
    a = _genome(tmp_path, {"chr1": 250}, species="spA", name="a")
    b = _genome(tmp_path, {"chrZ": 150}, species="spB", name="b")
    both = tmp_path / "both.h5"
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb, h5py.File(both, "w") as out:
        for k in ("X", "seqids", "species", "start_ends"):
            x, y = fa["data"][k], fb["data"][k]
            out.create_dataset(
                f"data/{k}", data=np.concatenate([x[()], y[()]]), maxshape=(None,) + x.shape[1:], chunks=x.chunks
            )
    write_bam(
        str(tmp_path / "s.bam"),
        {"chr1": 250, "chrZ": 150},
        [Read("a", "chr1", 5, [("M", 30)]), Read("z", "chrZ", 5, [("M", 30)])],
    )
    res = _cli("--h5", both, "--prefix", "x", "--bam", tmp_path / "s.bam", "--unstranded", "--species", "spB")
    assert res.returncode == 0, res.stderr
    with h5py.File(both, "r") as f:
        cov = f["evaluation/x_coverage"][:, :, 0]
        sp = f["data/species"][()]
    assert (cov[sp == b"spA"] == -1).all()
    assert cov[sp == b"spB"].max() == 1 and cov[sp == b"spB"][0, 5:35].tolist() == [1] * 30
    res = _cli("--h5", both, "--prefix", "y", "--bam", tmp_path / "s.bam", "--unstranded", "--species", "spC")
    assert res.returncode != 0 and "spC" in res.stderr


def test_bigwig_input(case, tmp_path):
    import pyBigWig

    d, h5 = case
    bw_path = tmp_path / "t.bw"
    bw = pyBigWig.open(str(bw_path), "w")
    bw.addHeader(list(SIZES.items()))
    vals = {c: np.zeros(n, np.float32) for c, n in SIZES.items()}
    vals["chr1"][95:130] = 3.0
    vals["chr1"][200:250] = 1.5
    vals["chr3"][10:20] = 7.0
    for c in SIZES:
        nz = np.flatnonzero(vals[c])
        if nz.size:
            bw.addEntries([c] * nz.size, nz.tolist(), ends=(nz + 1).tolist(), values=vals[c][nz].astype(float).tolist())
    bw.close()
    seqids, se = _layout(h5)
    for split, factor in (("half", 0.5), ("both", 1.0)):
        work = tmp_path / f"{split}.h5"
        shutil.copy(h5, work)
        res = _cli("--h5", work, "--prefix", "bw", "--bigwig", bw_path, "--unstranded", "--bigwig-split", split)
        assert res.returncode == 0, res.stderr
        with h5py.File(work, "r") as f:
            got = f["evaluation/bw_coverage"]
            assert got.dtype == np.float32 and got.fillvalue == -1
            arr = {(c, s): vals[c] * factor for c in SIZES for s in "+-"}
            np.testing.assert_array_equal(got[:, :, 0], _rows_f(arr, seqids, se))
            assert (f["evaluation/bw_spliced_coverage"][()] <= 0).all()
    res = _cli("--h5", work, "--prefix", "bw", "--bam", d / "a.bam", "--unstranded")
    assert res.returncode != 0 and "another --prefix" in res.stderr


def _rows_f(arrs, seqids, start_ends):
    out = np.full((len(seqids), L), -1, np.float32)
    for i, (c, (a, b)) in enumerate(zip(seqids, start_ends)):
        v = arrs[c, "+"][a:b] if a < b else arrs[c, "-"][b:a][::-1]
        out[i, : len(v)] = v
    return out


def test_out_leaves_input_untouched(case, tmp_path):
    """--out writes a new file with the same datasets an in-place update gives; --h5 keeps its bytes."""
    d, h5 = case
    src, inplace = tmp_path / "src.h5", tmp_path / "inplace.h5"
    shutil.copy(h5, src)
    shutil.copy(h5, inplace)
    before = _sha(src)
    _ok = _cli("--h5", src, "--prefix", "x", "--bam", d / "a.bam", "--unstranded", "--out", tmp_path / "new.h5")
    assert _ok.returncode == 0, _ok.stderr
    assert _sha(src) == before
    res = _cli("--h5", inplace, "--prefix", "x", "--bam", d / "a.bam", "--unstranded")
    assert res.returncode == 0, res.stderr
    assert _sha(tmp_path / "new.h5") == _sha(inplace)
    again = _cli("--h5", src, "--prefix", "x", "--bam", d / "a.bam", "--unstranded", "--out", tmp_path / "new.h5")
    assert again.returncode != 0 and "output exists" in again.stderr


def test_explicit_bam_index(case, tmp_path):
    """--bam-index: an index that is not beside the BAM (as a pipeline stages them) gives the same file."""
    d, h5 = case
    (tmp_path / "bams").mkdir()
    (tmp_path / "idx").mkdir()
    shutil.copy(d / "a.bam", tmp_path / "bams" / "a.bam")
    shutil.copy(d / "a.bam.bai", tmp_path / "idx" / "a.index")
    ref, got = tmp_path / "ref.h5", tmp_path / "got.h5"
    shutil.copy(h5, ref)
    shutil.copy(h5, got)
    assert _cli("--h5", ref, "--prefix", "x", "--bam", "a.bam", "--unstranded", cwd=d.parent / d.name).returncode == 0
    res = _cli(
        "--h5",
        got,
        "--prefix",
        "x",
        "--bam",
        "a.bam",
        "--bam-index",
        tmp_path / "idx" / "a.index",
        "--unstranded",
        cwd=tmp_path / "bams",
    )
    assert res.returncode == 0, res.stderr
    assert _sha(ref) == _sha(got)
    res = _cli("--h5", got, "--prefix", "y", "--bam", "a.bam", "--unstranded", cwd=tmp_path / "bams")
    assert res.returncode != 0 and "no index" in res.stderr
    res = _cli(
        "--h5",
        got,
        "--prefix",
        "y",
        "--bam",
        "a.bam",
        "a.bam",
        "--bam-index",
        "i1",
        "--unstranded",
        cwd=tmp_path / "bams",
    )
    assert res.returncode != 0 and "--bam-index" in res.stderr
