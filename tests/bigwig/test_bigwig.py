"""Acceptance tests of ``chromaflow bigwig`` against Predmoter's converted reference files (read in place).

Every reference .bw/.bg.gz must be equal, except ±1 at positions where exact arithmetic shows an exact .5
tie of the smoothing (S/w = k + ½), where the reference's own value depends on the CPU it was made on
(FORMATS.md §5.4). ``compare_with_ties`` names each allowed position and fails on any other difference.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import shutil
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

pyBigWig = pytest.importorskip("pyBigWig")

from helpers.bigwig_helpers import (  # noqa: E402
    bg_intervals,
    bg_text,
    bw_intervals,
    compare_with_ties,
    intervals,
    smoothing_ties,
    zoom_levels,
)
from chromaflow import bigwig  # noqa: E402
from chromaflow.bigwig import bedgraph as bgmod  # noqa: E402
from chromaflow.bigwig import bigwigfile  # noqa: E402
from helpers.cli import chromaflow  # noqa: E402

pytestmark = pytest.mark.reference
DATASETS = ("atacseq", "h3k4me3")


cli = functools.partial(chromaflow, "bigwig", check=True)


@pytest.fixture(scope="module")
def pred1(reference_dir, tmp_path_factory):
    """All pred_data_1 conversions the reference made, written by one call per option set (default writer),
    plus the bigWigs again with --bigwig-writer pybigwig (in pybigwig/)."""
    ref = reference_dir / "predmoter"
    out = tmp_path_factory.mktemp("pred1")
    p = ref / "pred_data_1_predictions.h5"
    for fmt in ("bigwig", "bedgraph"):
        d = out / fmt
        d.mkdir()
        cli(
            "--predictions",
            p,
            "--outdir",
            d,
            "--basename",
            "pred_data_1",
            "--format",
            fmt,
            "--strand",
            "all",
            "--metrics",
            d / "metrics.json",
        )
        cli(
            "--predictions",
            p,
            "--outdir",
            d,
            "--basename",
            "pred_data_1",
            "--format",
            fmt,
            "--window-size",
            150,
            "--no-browser-files",
        )
    d = out / "pybigwig"
    d.mkdir()
    cli(
        "--predictions",
        p,
        "--outdir",
        d,
        "--basename",
        "pred_data_1",
        "--strand",
        "all",
        "--bigwig-writer",
        "pybigwig",
        "--no-browser-files",
    )
    cli(
        "--predictions",
        p,
        "--outdir",
        d,
        "--basename",
        "pred_data_1",
        "--window-size",
        150,
        "--bigwig-writer",
        "pybigwig",
        "--no-browser-files",
    )
    d = out / "numpy"
    d.mkdir()
    cli(
        "--predictions",
        p,
        "--outdir",
        d,
        "--basename",
        "pred_data_1",
        "--format",
        "bg",
        "--window-size",
        150,
        "--smoothing",
        "numpy",
        "--no-browser-files",
    )
    cli(
        "--predictions",
        p,
        "--outdir",
        out / "bedgraph",
        "--basename",
        "pred_data_1",
        "--format",
        "bg",
        "--blacklist",
        ref / "converted" / "bl.txt",
        "--no-browser-files",
    )
    cli(
        "--predictions",
        ref / "train_data_4.h5",
        "--experimental",
        "--datasets",
        "atacseq",
        "h3k4me3",
        "--outdir",
        out / "bedgraph",
        "--basename",
        "train_data_4",
        "--format",
        "bg",
        "--no-browser-files",
    )
    return out


@pytest.fixture(scope="module")
def ties150(reference_dir):
    p = reference_dir / "predmoter" / "pred_data_1_predictions.h5"
    return {ds: smoothing_ties(p, i, 150) for i, ds in enumerate(DATASETS)}


PLAIN = [f"pred_data_1_{ds}_{s}_strand" for ds in DATASETS for s in ("avg", "+", "-")]
SMOOTHED = [f"pred_data_1_{ds}_avg_strand_ws=150" for ds in DATASETS]


@pytest.mark.parametrize("name", PLAIN)
def test_plain_tracks_equal_reference(pred1, reference_dir, name):
    conv = reference_dir / "predmoter" / "converted"
    ref_chroms, ref_ivs = bw_intervals(conv / f"{name}.bw")
    chroms, ivs = bw_intervals(pred1 / "bigwig" / f"{name}.bw")
    assert chroms == ref_chroms and ivs == ref_ivs
    # our writer's total summary (bases, min, max, sum, sum of squares) equals the reference header's
    a, b = pyBigWig.open(str(pred1 / "bigwig" / f"{name}.bw")), pyBigWig.open(str(conv / f"{name}.bw"))
    ha, hb = a.header(), b.header()
    assert {k: ha[k] for k in ha if k != "nLevels"} == {k: hb[k] for k in hb if k != "nLevels"}
    # pyBigWig writer: byte-identical to Predmoter's file (FORMATS §5.6)
    assert (pred1 / "pybigwig" / f"{name}.bw").read_bytes() == (conv / f"{name}.bw").read_bytes()
    # bedGraph: the decompressed text, no trailing newline
    ours = bg_text(pred1 / "bedgraph" / f"{name}.bg.gz")
    assert ours == bg_text(conv / f"{name}.bg.gz") and not ours.endswith("\n")


@pytest.mark.parametrize("name", SMOOTHED)
def test_smoothed_tracks_equal_reference_except_ties(pred1, reference_dir, ties150, name):
    conv = reference_dir / "predmoter" / "converted"
    ds = name.split("_")[3]
    ref = intervals(conv / f"{name}.bw")
    assert ref == bg_intervals(bg_text(conv / f"{name}.bg.gz"))
    named = {}
    for variant in ("bigwig/{}.bw", "bedgraph/{}.bg.gz", "pybigwig/{}.bw", "numpy/{}.bg.gz"):
        named[variant] = compare_with_ties(intervals(pred1 / variant.format(name)), ref, ties150[ds])
    # exact arithmetic: the reference (made on an Intel AVX-512 CPU) rounded three of h3k4me3's ties down
    expected = {
        "pred_data_1_atacseq_avg_strand_ws=150": [],
        "pred_data_1_h3k4me3_avg_strand_ws=150": ["Chrom2:58616", "Chrom2:58617", "Chrom2:58621"],
    }[name]
    for variant in ("bigwig/{}.bw", "bedgraph/{}.bg.gz", "pybigwig/{}.bw"):
        assert named[variant] == expected, variant
    if not expected:
        assert (pred1 / "pybigwig" / f"{name}.bw").read_bytes() == (conv / f"{name}.bw").read_bytes()
    # the exact values at the ties themselves: S/w = 1.5 -> 2 (half to even)
    ours = intervals(pred1 / "bedgraph" / f"{name}.bg.gz")
    for c, pos in ((p.split(":")[0], int(p.split(":")[1])) for p in expected):
        assert next(v for s, e, v in ours[c] if s <= pos < e) == 2.0
    assert bg_text(pred1 / "bedgraph" / f"{name}.bg.gz").count("\n") == len(sum(ours.values(), [])) - 1


def test_tie_rule_fails_on_any_other_difference(pred1, reference_dir, ties150, tmp_path):
    """The comparison is not vacuous: one changed value in a copy of the reference fails it, naming the
    position; a ±1 change at a tie passes and is named; ±2 at a tie fails."""
    conv = reference_dir / "predmoter" / "converted"
    name = "pred_data_1_h3k4me3_avg_strand_ws=150"
    ours = intervals(pred1 / "bedgraph" / f"{name}.bg.gz")
    ref_text = bg_text(conv / f"{name}.bg.gz")

    def corrupted(old: str, new: str) -> dict:
        assert old in ref_text
        copy = tmp_path / "copy.bg.gz"
        with gzip.open(copy, "wb") as fh:
            fh.write(ref_text.replace(old, new, 1).encode())
        return intervals(copy)

    # Chrom1 is 1.0 everywhere and has no ties: change one base's value
    with pytest.raises(AssertionError, match=r"Chrom1:1000 ours 1 reference 2"):
        compare_with_ties(
            ours,
            corrupted(
                "Chrom1\t0\t51321\t1.0", "Chrom1\t0\t1000\t1.0\nChrom1\t1000\t1001\t2.0\nChrom1\t1001\t51321\t1.0"
            ),
            ties150["h3k4me3"],
        )
    # a tie that both sides round to 2 (Chrom2:58565): the copy says 1 -> allowed and named
    named = compare_with_ties(
        ours,
        corrupted("Chrom2\t58565\t58567\t2.0", "Chrom2\t58565\t58566\t1.0\nChrom2\t58566\t58567\t2.0"),
        ties150["h3k4me3"],
    )
    assert "Chrom2:58565" in named
    # ... but 2 away at a tie is not a tie-rounding difference
    with pytest.raises(AssertionError, match=r"Chrom2:58565 ours 2 reference 0"):
        compare_with_ties(
            ours,
            corrupted("Chrom2\t58565\t58567\t2.0", "Chrom2\t58565\t58566\t0.0\nChrom2\t58566\t58567\t2.0"),
            ties150["h3k4me3"],
        )
    # and without the tie set, the real differences fail
    with pytest.raises(AssertionError, match="Chrom2:58616"):
        compare_with_ties(ours, intervals(conv / f"{name}.bg.gz"), {})


@pytest.mark.parametrize(
    "name",
    [f"pred_data_1_{ds}_avg_strand_bl" for ds in DATASETS] + [f"train_data_4_{ds}_avg_strand" for ds in DATASETS],
)
def test_blacklist_and_experimental_equal_reference(pred1, reference_dir, name):
    ours = bg_text(pred1 / "bedgraph" / f"{name}.bg.gz")
    assert ours == bg_text(reference_dir / "predmoter" / "converted" / f"{name}.bg.gz")


def test_bigwig_and_bedgraph_agree(pred1):
    for name in PLAIN + SMOOTHED:
        _, bw = bw_intervals(pred1 / "bigwig" / f"{name}.bw")
        assert bw == bg_intervals(bg_text(pred1 / "bedgraph" / f"{name}.bg.gz"))
        assert bw == bw_intervals(pred1 / "pybigwig" / f"{name}.bw")[1]


def test_pybigtools_reads_our_files(pred1):
    pybigtools = pytest.importorskip("pybigtools")
    for name in PLAIN + SMOOTHED:
        _, ivs = bw_intervals(pred1 / "bigwig" / f"{name}.bw")
        f = pybigtools.open(str(pred1 / "bigwig" / f"{name}.bw"))
        assert {c: [tuple(x) for x in f.records(c)] for c in ivs} == ivs


def test_metrics(pred1):
    m = json.loads((pred1 / "bigwig" / "metrics.json").read_text())
    assert m["stage"] == "bigwig"
    assert m["bp"] == 153_963 and m["chromosomes"] == 2 and m["tracks"] == 6
    assert m["datasets"] == ["atacseq", "h3k4me3"] and m["format"] == "bigwig"
    assert m["bigwig_writer"] == "chromaflow" and m["compression_level"] == 1
    # FORMATS §5.8: 5,346 + 44,224 + 43,917 + 51,748 + 43,117 + 42,194 intervals
    assert m["intervals"] == 230_546
    assert m["bp_per_s"] > 0 and m["wall_s"] > 0


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
            str(repo_root / "benchmarks" / "bigwig" / "synth_predictions.py"),
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
# units
# ---------------------------------------------------------------------------------------------------
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
