"""Acceptance tests of ``chromaflow bigwig`` against Predmoter's converted reference files (read in place).

Every reference .bw/.bg.gz must be equal, except ±1 at positions where exact arithmetic shows an exact .5
tie of the smoothing (S/w = k + ½), where the reference's own value depends on the CPU it was made on
(FORMATS.md §5.4). ``compare_with_ties`` names each allowed position and fails on any other difference.

The stage's other test files: test_bigwig_synthetic.py (the synthetic reference fixtures, the real converter,
fallback paths, large values), test_bigwig_tracks.py (smoothing, runs and kernels), test_bigwig_writer.py (our bigWig
writer), test_bigwig_kernels.py (other BLAS/SIMD kernels), test_bigbedfile.py (our bigBed writer),
test_bigwig_options.py (the options from Python) and test_bigwig_cli.py (bad input, browser files).
"""

from __future__ import annotations

import functools
import gzip
import json

import pytest

pyBigWig = pytest.importorskip("pyBigWig")

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
