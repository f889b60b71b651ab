"""Acceptance tests of ``chromaflow bigwig`` against Predmoter's converted reference files (read in place)."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pyBigWig = pytest.importorskip("pyBigWig")

from chromaflow import bigwig  # noqa: E402

pytestmark = pytest.mark.reference


def cli(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "chromaflow", "bigwig", *map(str, args)],
                          capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr}")
    return proc


def bg_text(path: Path) -> str:
    with gzip.open(path, "rb") as fh:
        return fh.read().decode()


def bw_content(path: Path):
    bw = pyBigWig.open(str(path))
    try:
        chroms = list(bw.chroms().items())
        return chroms, {c: bw.intervals(c) for c, _ in chroms}
    finally:
        bw.close()


def bg_as_intervals(text: str):
    out: dict[str, list] = {}
    for line in text.split("\n"):
        if not line:
            continue
        c, s, e, v = line.split("\t")
        out.setdefault(c, []).append((int(s), int(e), float(v)))
    return out


@pytest.fixture(scope="module")
def pred1(reference_dir, tmp_path_factory):
    """All pred_data_1 conversions the reference made, written by one call per option set."""
    ref = reference_dir / "predmoter"
    out = tmp_path_factory.mktemp("pred1")
    p = ref / "pred_data_1_predictions.h5"
    for fmt in ("bigwig", "bedgraph"):
        d = out / fmt
        d.mkdir()
        cli("--predictions", p, "--outdir", d, "--basename", "pred_data_1", "--format", fmt, "--strand", "all",
            "--metrics", d / "metrics.json")
        cli("--predictions", p, "--outdir", d, "--basename", "pred_data_1", "--format", fmt,
            "--window-size", 150, "--no-browser-files")
    cli("--predictions", p, "--outdir", out / "bedgraph", "--basename", "pred_data_1", "--format", "bg",
        "--blacklist", ref / "converted" / "bl.txt", "--no-browser-files")
    cli("--predictions", ref / "train_data_4.h5", "--experimental", "--datasets", "atacseq", "h3k4me3",
        "--outdir", out / "bedgraph", "--basename", "train_data_4", "--format", "bg", "--no-browser-files")
    return out


REF_BW = [f"pred_data_1_{ds}_{s}_strand{ws}.bw" for ds in ("atacseq", "h3k4me3") for s in ("avg", "+", "-")
          for ws in ("",)] + [f"pred_data_1_{ds}_avg_strand_ws=150.bw" for ds in ("atacseq", "h3k4me3")]
REF_BG = [n.replace(".bw", ".bg.gz") for n in REF_BW] + \
    [f"pred_data_1_{ds}_avg_strand_bl.bg.gz" for ds in ("atacseq", "h3k4me3")] + \
    [f"train_data_4_{ds}_avg_strand.bg.gz" for ds in ("atacseq", "h3k4me3")]


@pytest.mark.parametrize("name", REF_BW)
def test_bigwig_equals_reference(pred1, reference_dir, name):
    ours = pred1 / "bigwig" / name
    ref = reference_dir / "predmoter" / "converted" / name
    assert bw_content(ours) == bw_content(ref)
    # FORMATS §5.6: pyBigWig 0.3.29 writes byte-identical files for the same header + intervals
    assert ours.read_bytes() == ref.read_bytes()


@pytest.mark.parametrize("name", REF_BG)
def test_bedgraph_equals_reference(pred1, reference_dir, name):
    ours = bg_text(pred1 / "bedgraph" / name)
    ref = bg_text(reference_dir / "predmoter" / "converted" / name)
    assert ours.split("\n") == ref.split("\n")
    assert ours == ref and not ours.endswith("\n")


def test_bigwig_and_bedgraph_agree(pred1):
    for name in REF_BW:
        _, bw = bw_content(pred1 / "bigwig" / name)
        bg = bg_as_intervals(bg_text(pred1 / "bedgraph" / name.replace(".bw", ".bg.gz")))
        assert {c: list(v) for c, v in bw.items()} == bg


def test_metrics(pred1):
    m = json.loads((pred1 / "bigwig" / "metrics.json").read_text())
    assert m["stage"] == "bigwig"
    assert m["bp"] == 153_963 and m["chromosomes"] == 2 and m["tracks"] == 6
    assert m["datasets"] == ["atacseq", "h3k4me3"] and m["format"] == "bigwig"
    assert m["bp_per_s"] > 0 and m["wall_s"] > 0


# ---------------------------------------------------------------------------------------------------
# synthetic multi-block and short fixtures (FORMATS §5.9)
# ---------------------------------------------------------------------------------------------------
def test_multiblock(reference_dir, tmp_path):
    ex = reference_dir / "predmoter" / "extra" / "synthetic_multiblock"
    p = ex / "synthetic_multiblock_predictions.h5"
    cli("--predictions", p, "--outdir", tmp_path, "--basename", "synth", "--format", "bg", "--strand", "all",
        "--no-browser-files")
    cli("--predictions", p, "--outdir", tmp_path, "--basename", "synth", "--format", "bw", "--strand", "all",
        "--no-browser-files")
    for s in ("avg", "+", "-"):
        name = f"synth_atacseq_{s}_strand"
        ref = bg_text(ex / f"{name}.bg.gz")
        ours = bg_text(tmp_path / f"{name}.bg.gz")
        # the reference's blank lines (empty-block defect) are the only difference
        assert ours == "\n".join(line for line in ref.split("\n") if line)
        # the reference crashed on these bigWigs; ours are valid and equal the bedGraph
        chroms, ivs = bw_content(tmp_path / f"{name}.bw")
        assert chroms == [("chrA", 42_778_000), ("chrB", 42_778_000), ("chrC", 30_000)]
        assert {c: list(v) for c, v in ivs.items()} == bg_as_intervals(ours)
    # cross-block merge and half-even averaging (FORMATS §5.9)
    avg = bg_text(tmp_path / "synth_atacseq_avg_strand.bg.gz").split("\n")
    assert "chrA\t21383000\t21385000\t3.0" in avg
    assert avg[-1] == "chrC\t10010\t30000\t0.0"


def test_multiblock_smoothed_and_blacklist(reference_dir, tmp_path):
    ex = reference_dir / "predmoter" / "extra" / "synthetic_multiblock"
    p = ex / "synthetic_multiblock_predictions.h5"
    cli("--predictions", p, "--outdir", tmp_path, "--basename", "synth", "--format", "bw", "--window-size", 150,
        "--no-browser-files")
    cli("--predictions", p, "--outdir", tmp_path, "--basename", "synth", "--format", "bw",
        "--blacklist", ex / "bl_chrB.txt", "--strand", "all", "--no-browser-files")
    cli("--predictions", p, "--outdir", tmp_path, "--basename", "synth", "--format", "bg",
        "--blacklist", ex / "bl_chrB.txt", "--no-browser-files")
    for name in ("synth_atacseq_avg_strand_ws=150.bw", "synth_atacseq_avg_strand_bl.bw",
                 "synth_atacseq_+_strand_bl.bw"):
        assert bw_content(tmp_path / name) == bw_content(ex / name)
        assert (tmp_path / name).read_bytes() == (ex / name).read_bytes()
    assert bg_text(tmp_path / "synth_atacseq_avg_strand_bl.bg.gz") == bg_text(ex / "synth_atacseq_avg_strand_bl.bg.gz")
    # the reference crashed on the minus strand with chrB dropped (empty block in chrA); ours is valid
    _, ivs = bw_content(tmp_path / "synth_atacseq_-_strand_bl.bw")
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
        cli("--predictions", p, "--outdir", tmp_path, "--basename", "short", "--format", fmt,
            "--window-size", 150, "--no-browser-files")
    ref = bg_text(ex / "short_atacseq_avg_strand_ws=150.bg.gz")
    ours = bg_text(tmp_path / "short_atacseq_avg_strand_ws=150.bg.gz")
    # deliberate deviation: intervals are clipped to the chromosome size
    assert ours == _clip(ref, sizes)
    assert "tiny\t25\t100\t2.0" in ours.split("\n")
    chroms, ivs = bw_content(tmp_path / "short_atacseq_avg_strand_ws=150.bw")
    assert chroms == [("tiny", 100), ("small", 500)]
    assert {c: list(v) for c, v in ivs.items()} == bg_as_intervals(ours)
    # --no-clip reproduces the reference exactly (bedGraph text and bigWig bytes)
    d = tmp_path / "noclip"
    d.mkdir()
    for fmt in ("bg", "bw"):
        cli("--predictions", p, "--outdir", d, "--basename", "short", "--format", fmt, "--window-size", 150,
            "--no-clip", "--no-browser-files")
    assert bg_text(d / "short_atacseq_avg_strand_ws=150.bg.gz") == ref
    assert (d / "short_atacseq_avg_strand_ws=150.bw").read_bytes() == \
        (ex / "short_atacseq_avg_strand_ws=150.bw").read_bytes()


# ---------------------------------------------------------------------------------------------------
# units
# ---------------------------------------------------------------------------------------------------
def test_format_bedgraph_matches_python():
    rng = np.random.default_rng(1)
    starts = np.sort(rng.choice(10**10, 5000, replace=False)).astype(np.int64)
    starts[:3] = [0, 9, 10]
    ends = np.append(starts[1:], starts[-1] + 7)
    for dtype in (np.float32, np.float64):
        vals = rng.integers(0, 3000, 5000).astype(dtype)
        vals[:4] = [0, 1e8, 1e17, 12345678]
        text = bigwig.format_bedgraph("chr_1", starts, ends, vals).decode()
        assert text == "".join(f"chr_1\t{s}\t{e}\t{str(v)}\n" for s, e, v in zip(starts.tolist(), ends.tolist(), vals))


def test_runs_and_merge():
    st = bigwig.TrackState()
    a = np.array([1, 1, 2, 2], np.float32)
    assert [x.tolist() for x in st.feed(a, None, 0, False)] == [[0], [2], [1.0]]
    assert st.feed(np.array([2, 2], np.float32), None, 4, False) is None  # empty-block: nothing
    out = st.feed(np.array([2, 3], np.float32), None, 6, True)
    assert [x.tolist() for x in out] == [[2, 7], [7, 8], [2.0, 3.0]]


def test_fallback_paths_equal(reference_dir, tmp_path):
    """zlib instead of libdeflate, and the generic h5py reader (other chunking), give identical output."""
    import os

    import h5py

    ref = reference_dir / "predmoter"
    src = ref / "pred_data_1_predictions.h5"
    rechunked = tmp_path / "rechunked.h5"
    with h5py.File(src) as a, h5py.File(rechunked, "w") as b:
        for k in ("data/seqids", "data/start_ends", "prediction/datasets"):
            a.copy(k, b, name=k)
        p = a["prediction/predictions"][()]
        b.create_dataset("prediction/predictions", data=p, chunks=(3, 1000, 2), compression="lzf", fillvalue=-1)
    env = dict(os.environ, CHROMAFLOW_LIBDEFLATE="0")
    for name, pred, extra_env in (("zlib", src, env), ("generic", rechunked, None)):
        d = tmp_path / name
        d.mkdir()
        proc = subprocess.run([sys.executable, "-m", "chromaflow", "bigwig", "--predictions", str(pred),
                               "--outdir", str(d), "--basename", "pred_data_1", "--format", "bg", "--strand", "all",
                               "--no-browser-files", "--threads", "2"], capture_output=True, text=True, env=extra_env)
        assert proc.returncode == 0, proc.stderr
        for ds in ("atacseq", "h3k4me3"):
            for s in ("avg", "+", "-"):
                n = f"pred_data_1_{ds}_{s}_strand.bg.gz"
                assert bg_text(d / n) == bg_text(ref / "converted" / n)


def test_smooth_is_numpy_convolve():
    """The region-limited smoothing equals a whole-block numpy.convolve bit for bit (ties included)."""
    rng = np.random.default_rng(3)

    def ref(x, w):
        return np.rint(np.convolve(x.astype(np.float64), np.ones(w) / w, "same"))

    for w in (150, 10, 7, 2, 300):
        for run in (1, 40, 500, 5000, 10**6):
            n = int(rng.integers(8 * w, 200_000))
            x = np.repeat(rng.integers(0, 6, n // run + 1), run)[:n]
            x[rng.integers(0, n, 4)] = rng.integers(0, 9, 4)  # isolated spikes
            x = x.astype(np.float32)
            assert np.array_equal(bigwig.smooth(x, w, True), ref(x, w)), (w, run)
    x = rng.integers(0, 5, 5000).astype(np.float32)
    assert len(bigwig.smooth(x[:100], 150, True)) == 100
    assert len(bigwig.smooth(x[:100], 150, False)) == 150
