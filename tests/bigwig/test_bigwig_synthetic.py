"""``chromaflow bigwig`` on the synthetic fixtures of the reference folder (multi-block, short chromosomes; FORMATS
§5.9), against the real converter on generated predictions, on its fallback paths and on values past float32's
integers.

As in test_bigwig.py, outputs must equal the reference except ±1 at exact smoothing ties (``compare_with_ties``).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("pyBigWig")

from helpers.bigwig_helpers import (  # noqa: E402
    bg_intervals,
    bg_text,
    bw_intervals,
    compare_with_ties,
    intervals,
    smoothing_ties,
)
from helpers.cli import chromaflow  # noqa: E402

pytestmark = pytest.mark.reference
DATASETS = ("atacseq", "h3k4me3")


cli = functools.partial(chromaflow, "bigwig", check=True)


# ---------------------------------------------------------------------------------------------------
# synthetic multi-block and short fixtures (FORMATS §5.9)
# ---------------------------------------------------------------------------------------------------
def test_multiblock(reference_dir, tmp_path):
    ex = reference_dir / "predmoter" / "extra" / "synthetic_multiblock"
    p = ex / "synthetic_multiblock_predictions.h5"
    cli(
        "--predictions",
        p,
        "--outdir",
        tmp_path,
        "--basename",
        "synth",
        "--format",
        "bg",
        "--strand",
        "all",
        "--no-browser-files",
    )
    cli(
        "--predictions",
        p,
        "--outdir",
        tmp_path,
        "--basename",
        "synth",
        "--format",
        "bw",
        "--strand",
        "all",
        "--no-browser-files",
    )
    for s in ("avg", "+", "-"):
        name = f"synth_atacseq_{s}_strand"
        ref = bg_text(ex / f"{name}.bg.gz")
        ours = bg_text(tmp_path / f"{name}.bg.gz")
        # the reference's blank lines (empty-block defect) are the only difference
        assert ours == "\n".join(line for line in ref.split("\n") if line)
        # the reference crashed on these bigWigs; ours are valid and equal the bedGraph
        chroms, ivs = bw_intervals(tmp_path / f"{name}.bw")
        assert chroms == [("chrA", 42_778_000), ("chrB", 42_778_000), ("chrC", 30_000)]
        assert ivs == bg_intervals(ours)
    # cross-block merge and half-even averaging (FORMATS §5.9)
    avg = bg_text(tmp_path / "synth_atacseq_avg_strand.bg.gz").split("\n")
    assert "chrA\t21383000\t21385000\t3.0" in avg
    assert avg[-1] == "chrC\t10010\t30000\t0.0"


def test_multiblock_smoothed_and_blacklist(reference_dir, tmp_path):
    ex = reference_dir / "predmoter" / "extra" / "synthetic_multiblock"
    p = ex / "synthetic_multiblock_predictions.h5"
    for writer in ("chromaflow", "pybigwig"):
        d = tmp_path / writer
        d.mkdir()
        cli(
            "--predictions",
            p,
            "--outdir",
            d,
            "--basename",
            "synth",
            "--format",
            "bw",
            "--window-size",
            150,
            "--no-browser-files",
            "--bigwig-writer",
            writer,
        )
        cli(
            "--predictions",
            p,
            "--outdir",
            d,
            "--basename",
            "synth",
            "--format",
            "bw",
            "--blacklist",
            ex / "bl_chrB.txt",
            "--strand",
            "all",
            "--no-browser-files",
            "--bigwig-writer",
            writer,
        )
    cli(
        "--predictions",
        p,
        "--outdir",
        tmp_path,
        "--basename",
        "synth",
        "--format",
        "bg",
        "--blacklist",
        ex / "bl_chrB.txt",
        "--no-browser-files",
    )
    ties = smoothing_ties(p, 0, 150)
    named = compare_with_ties(
        intervals(tmp_path / "chromaflow" / "synth_atacseq_avg_strand_ws=150.bw"),
        intervals(ex / "synth_atacseq_avg_strand_ws=150.bw"),
        ties,
    )
    # 5 of the fixture's 10 ties: the reference (Intel AVX-512 numpy) rounded them the other way
    assert named == ["chrA:1000000", "chrA:21383950", "chrA:21384050", "chrA:42768050", "chrA:42768100"]
    assert bw_intervals(tmp_path / "chromaflow" / "synth_atacseq_avg_strand_ws=150.bw") == bw_intervals(
        tmp_path / "pybigwig" / "synth_atacseq_avg_strand_ws=150.bw"
    )
    for name in ("synth_atacseq_avg_strand_bl.bw", "synth_atacseq_+_strand_bl.bw"):
        assert bw_intervals(tmp_path / "chromaflow" / name) == bw_intervals(ex / name)
        assert (tmp_path / "pybigwig" / name).read_bytes() == (ex / name).read_bytes()
    assert bg_text(tmp_path / "synth_atacseq_avg_strand_bl.bg.gz") == bg_text(ex / "synth_atacseq_avg_strand_bl.bg.gz")
    # the reference crashed on the minus strand with chrB dropped (empty block in chrA); ours is valid
    _, ivs = bw_intervals(tmp_path / "chromaflow" / "synth_atacseq_-_strand_bl.bw")
    assert list(ivs) == ["chrA", "chrC"]


def _clip(text: str, sizes: dict[str, int]) -> str:
    out = []
    for line in text.split("\n"):
        c, s, e, v = line.split("\t")
        if int(s) < sizes[c]:
            out.append(f"{c}\t{s}\t{min(int(e), sizes[c])}\t{v}")
    return "\n".join(out)


def test_short_chromosomes_clipped(reference_dir, tmp_path):
    ex = reference_dir / "predmoter" / "extra" / "synthetic_short"
    p = ex / "synthetic_short_predictions.h5"
    sizes = {"tiny": 100, "small": 500}
    cli("--predictions", p, "--outdir", tmp_path, "--basename", "short", "--format", "bg", "--no-browser-files")
    assert bg_text(tmp_path / "short_atacseq_avg_strand.bg.gz") == bg_text(ex / "short_atacseq_avg_strand.bg.gz")
    for fmt in ("bg", "bw"):
        cli(
            "--predictions",
            p,
            "--outdir",
            tmp_path,
            "--basename",
            "short",
            "--format",
            fmt,
            "--window-size",
            150,
            "--no-browser-files",
        )
    ref = bg_text(ex / "short_atacseq_avg_strand_ws=150.bg.gz")
    ours = bg_text(tmp_path / "short_atacseq_avg_strand_ws=150.bg.gz")
    ties = smoothing_ties(p, 0, 150)
    # deliberate deviation: intervals are clipped to the chromosome size
    assert compare_with_ties(bg_intervals(ours), bg_intervals(_clip(ref, sizes)), ties) == []
    assert ours == _clip(ref, sizes)
    assert "tiny\t25\t100\t2.0" in ours.split("\n")
    chroms, ivs = bw_intervals(tmp_path / "short_atacseq_avg_strand_ws=150.bw")
    assert chroms == [("tiny", 100), ("small", 500)]
    assert ivs == bg_intervals(ours)
    # --no-clip reproduces the reference exactly (bedGraph text; bigWig bytes with pyBigWig)
    d = tmp_path / "noclip"
    d.mkdir()
    cli(
        "--predictions",
        p,
        "--outdir",
        d,
        "--basename",
        "short",
        "--format",
        "bg",
        "--window-size",
        150,
        "--no-clip",
        "--no-browser-files",
    )
    cli(
        "--predictions",
        p,
        "--outdir",
        d,
        "--basename",
        "short",
        "--format",
        "bw",
        "--window-size",
        150,
        "--no-clip",
        "--no-browser-files",
        "--bigwig-writer",
        "pybigwig",
    )
    assert bg_text(d / "short_atacseq_avg_strand_ws=150.bg.gz") == ref
    assert (d / "short_atacseq_avg_strand_ws=150.bw").read_bytes() == (
        ex / "short_atacseq_avg_strand_ws=150.bw"
    ).read_bytes()


# ---------------------------------------------------------------------------------------------------
# the real converter on generated, realistic predictions (values change every ~3 bp)
# ---------------------------------------------------------------------------------------------------
def test_equals_real_converter_on_synthetic_predictions(repo_root, reference_dir, tmp_path):
    peer = repo_root.parent / "shared" / "peers" / "bin" / "peer-predmoter-convert"
    if not peer.exists():
        pytest.skip(f"{peer} absent")
    pred = tmp_path / "synth_predictions.h5"
    subprocess.run(
        [
            sys.executable,
            str(repo_root / "benchmarks" / "harness" / "synth_predictions.py"),
            "--mbp",
            "0.4",
            "--mode",
            "realistic",
            "--seed",
            "3",
            "--chromosomes",
            "2",
            "--pool",
            "8",
            "--out",
            str(pred),
        ],
        check=True,
        capture_output=True,
    )
    for opts in (["-of", "bw"], ["-of", "bg", "--strand", "+"], ["-of", "bg", "--window-size", "10"]):
        out = tmp_path / "peer"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        proc = subprocess.run(
            [str(peer), "-i", str(pred), "-o", str(out), "--basename", "s", *opts], capture_output=True, text=True
        )
        if proc.returncode != 0:
            pytest.skip(f"peer-predmoter-convert unusable here: {proc.stderr.strip().splitlines()[-1:]}")
        ours = tmp_path / "ours"
        shutil.rmtree(ours, ignore_errors=True)
        ours.mkdir()
        mine = ["--format", "bw" if opts[1] == "bw" else "bg"]
        if "--strand" in opts:
            mine += ["--strand", "+"]
        w = int(opts[-1]) if "--window-size" in opts else None
        if w:
            mine += ["--window-size", str(w)]
        cli("--predictions", pred, "--outdir", ours, "--basename", "s", "--no-browser-files", *mine)
        for i, ds in enumerate(DATASETS):
            got = sorted(p.name for p in ours.iterdir() if f"_{ds}_" in p.name)
            assert len(got) == 1
            ties = smoothing_ties(pred, i, w) if w else {}
            named = compare_with_ties(intervals(ours / got[0]), intervals(out / got[0]), ties)
            if not w:
                assert named == []


# ---------------------------------------------------------------------------------------------------
# fallback paths and values past float32's integers
# ---------------------------------------------------------------------------------------------------
def test_fallback_paths_equal(reference_dir, tmp_path):
    """zlib instead of libdeflate, the h5py reader (other chunking, or forced), and the numpy bedGraph formatter
    (no C compiler) give identical output."""
    import h5py

    ref = reference_dir / "predmoter"
    src = ref / "pred_data_1_predictions.h5"
    rechunked = tmp_path / "rechunked.h5"
    with h5py.File(src) as a, h5py.File(rechunked, "w") as b:
        for k in ("data/seqids", "data/start_ends", "prediction/datasets"):
            a.copy(k, b, name=k)
        p = a["prediction/predictions"][()]
        b.create_dataset("prediction/predictions", data=p, chunks=(3, 1000, 2), compression="lzf", fillvalue=-1)
    base = dict(os.environ)
    cases = (
        ("zlib", src, {"CHROMAFLOW_LIBDEFLATE": "0"}),
        ("generic", rechunked, {}),
        ("h5py", src, {"CHROMAFLOW_BIGWIG_READER": "h5py"}),
        ("nocc", src, {"CHROMAFLOW_BIGWIG_NO_CC": "1"}),
    )
    for name, pred, extra in cases:
        d = tmp_path / name
        d.mkdir()
        cli(
            "--predictions",
            pred,
            "--outdir",
            d,
            "--basename",
            "pred_data_1",
            "--format",
            "bg",
            "--strand",
            "all",
            "--no-browser-files",
            "--threads",
            "2",
            env={**base, **extra},
        )
        for ds in DATASETS:
            for s in ("avg", "+", "-"):
                n = f"pred_data_1_{ds}_{s}_strand.bg.gz"
                assert bg_text(d / n) == bg_text(ref / "converted" / n), (name, n)


def test_bigwig_bytes_equal_without_c_kernels(reference_dir, tmp_path):
    """The C kernels (batch chunk reader, runs, zoom records, data blocks packed and deflated in one call) write the
    same bigWig bytes as the numpy/Python paths (libdeflate at the same level either way)."""
    src = reference_dir / "predmoter" / "pred_data_1_predictions.h5"
    base = dict(os.environ)
    for name, extra in (("c", {}), ("nocc", {"CHROMAFLOW_BIGWIG_NO_CC": "1"})):
        args = ["--predictions", src, "--outdir", tmp_path / name, "--basename", "p", "--strand", "all"]
        cli(*args, "--no-browser-files", "--threads", "2", env={**base, **extra})
    files = sorted(p.name for p in (tmp_path / "c").iterdir())
    assert len(files) == 3 * len(DATASETS)
    for n in files:
        assert (tmp_path / "c" / n).read_bytes() == (tmp_path / "nocc" / n).read_bytes(), n


def test_large_values_take_predmoters_float32_path(tmp_path):
    """Values ≥ 2**23 leave the integer path: the average is Predmoter's float32 arithmetic (p + m rounds)."""
    import h5py

    L = 1000
    big = (1 << 24) + 1  # float32 rounds it to 2**24
    se = [[0, L], [L, 0]]
    pred = np.full((2, L, 1), 5, dtype=np.int64)
    pred[0, :10, 0] = big
    path = tmp_path / "big_predictions.h5"
    with h5py.File(path, "w") as h5:
        h5["data/seqids"] = np.array([b"c1", b"c1"], dtype="S50")
        h5["data/start_ends"] = np.array(se, dtype=np.int64)
        h5["prediction/datasets"] = np.array([b"atacseq"], dtype="S25")
        h5.create_dataset("prediction/predictions", data=pred, chunks=(1, L, 1), compression="gzip", fillvalue=-1)
    cli(
        "--predictions",
        path,
        "--outdir",
        tmp_path,
        "--basename",
        "b",
        "--format",
        "bg",
        "--strand",
        "all",
        "--no-browser-files",
    )
    f32 = np.float32(big)
    avg = np.rint((f32 + np.float32(5)) / np.float32(2))
    # numpy's str() of float32 (what Predmoter prints): 8.38861e+06, 1.6777216e+07
    assert bg_text(tmp_path / "b_atacseq_avg_strand.bg.gz") == f"c1\t0\t10\t{str(avg)}\nc1\t10\t1000\t5.0"
    assert bg_text(tmp_path / "b_atacseq_+_strand.bg.gz") == f"c1\t0\t10\t{str(f32)}\nc1\t10\t1000\t5.0"
    assert str(avg) == "8.38861e+06"
