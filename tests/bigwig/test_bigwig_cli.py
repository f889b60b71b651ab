"""Bad input and browser files of ``chromaflow bigwig`` (subprocess, like a pipeline task)."""

from __future__ import annotations

import functools
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import unquote

import shutil

import h5py
import numpy as np
import pytest
from helpers.cli import assert_one_line_error, chromaflow

pytestmark = pytest.mark.reference


cli = functools.partial(chromaflow, "bigwig")


@pytest.fixture
def pred(reference_dir):
    return reference_dir / "predmoter" / "pred_data_1_predictions.h5"


def test_not_a_predictions_file(reference_dir, tmp_path):
    txt = tmp_path / "x.h5"
    txt.write_text("hello\n")
    assert_one_line_error(
        cli("--predictions", txt, "--outdir", tmp_path, "--basename", "b"), "bigwig", "not a readable HDF5 file"
    )
    genome = reference_dir / "predmoter" / "pred_data_1.h5"
    assert_one_line_error(
        cli("--predictions", genome, "--outdir", tmp_path, "--basename", "b"),
        "bigwig",
        "not a predictions file",
        "prediction/predictions",
    )
    assert_one_line_error(
        cli("--predictions", tmp_path / "nope.h5", "--outdir", tmp_path, "--basename", "b"),
        "bigwig",
        "predictions file does not exist",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.h5"]


def test_dataset_not_present(pred, tmp_path):
    assert_one_line_error(
        cli("--predictions", pred, "--outdir", tmp_path, "--basename", "b", "--datasets", "dnase"),
        "bigwig",
        str(pred),
        "dnase",
        "prediction/datasets",
        "available: atacseq h3k4me3",
    )
    assert list(tmp_path.iterdir()) == []


def _variant(pred: Path, out: Path, **changes) -> Path:
    """A copy of the predictions file with datasets replaced (value None: left out)."""
    with h5py.File(pred) as src, h5py.File(out, "w") as dst:
        for key in ("data/seqids", "data/start_ends", "prediction/datasets", "prediction/predictions"):
            if key in changes:
                if changes[key] is not None:
                    dst.create_dataset(key, data=changes[key])
            else:
                src.copy(key, dst, name=key)
    return out


@pytest.mark.parametrize(
    "case,key,words",
    [
        ("float", "prediction/predictions", ["dtype float32", "expected integers"]),
        ("nan", "prediction/predictions", ["dtype float64", "expected integers"]),
        ("2d", "prediction/predictions", ["shape (16, 21384)", "3 dimensions"]),
        ("channels", "prediction/predictions", ["3 channels", "names 2"]),
        ("rows", "prediction/predictions", ["15 rows", "data/seqids 16"]),
        ("start_ends", "data/start_ends", ["shape (16, 3)", "(N, 2) integers"]),
        ("seqids", "data/seqids", ["dtype int64", "byte strings"]),
        ("tab_in_seqid", "data/seqids", ["\\tdesc'", "holds whitespace"]),
        ("no_datasets", "prediction/datasets", ["not a predictions file", "missing prediction/datasets"]),
        ("no_start_ends", "data/start_ends", ["missing data/start_ends"]),
        ("wide_row", "data/start_ends", ["row 0", "spans 30000 bp", "L = 21384"]),
    ],
)
def test_bad_predictions_file(pred, tmp_path, case, key, words):
    with h5py.File(pred) as src:
        p = src["prediction/predictions"][()]
        se = src["data/start_ends"][()]
        sq = src["data/seqids"][()]
    change = {
        "float": p.astype(np.float32),
        "nan": np.where(p == 3, np.nan, p.astype(np.float64)),
        "2d": p[:, :, 0],
        "channels": np.concatenate([p, p[:, :, :1]], axis=2),
        "rows": p[:15],
        "start_ends": np.concatenate([se, se[:, :1]], axis=1),
        "seqids": np.arange(len(sq)),
        "tab_in_seqid": np.char.add(sq, b"\tdesc"),
        "no_datasets": None,
        "no_start_ends": None,
        "wide_row": np.where(np.arange(len(se))[:, None] == 0, [[0, 30000]], se),
    }[case]
    bad = _variant(pred, tmp_path / "bad.h5", **{key: change})
    out = tmp_path / "out"
    out.mkdir()
    assert_one_line_error(
        cli("--predictions", bad, "--outdir", out, "--basename", "b"), "bigwig", str(bad), key, *words
    )
    assert list(out.iterdir()) == []


def test_corrupt_chunk(pred, tmp_path):
    bad = tmp_path / "corrupt.h5"
    shutil.copy(pred, bad)
    with h5py.File(bad, "r+") as h5:
        d = h5["prediction/predictions"]
        _, raw = d.id.read_direct_chunk((7, 0, 1))
        d.id.write_direct_chunk((7, 0, 1), b"x" * 10 + bytes(raw[10:]))
    out = tmp_path / "out"
    out.mkdir()
    assert_one_line_error(
        cli("--predictions", bad, "--outdir", out, "--basename", "b", "--strand", "all"),
        "bigwig",
        str(bad),
        "prediction/predictions row 7",
        "corrupt chunk",
    )
    assert list(out.iterdir()) == []


@pytest.mark.parametrize(
    "args,words",
    [
        (["--compression-level", "13"], ["--compression-level must be 1..12"]),
        (["--experimental"], ["--experimental needs --datasets"]),
        (["--basename", "a/b"], ["--basename", "without '/'"]),
    ],
)
def test_bad_options(pred, reference_dir, tmp_path, args, words):
    p = reference_dir / "predmoter" / "train_data_4.h5" if "--experimental" in args else pred
    argv = ["--predictions", p, "--outdir", tmp_path, *args]
    if "--basename" not in args:
        argv += ["--basename", "b"]
    assert_one_line_error(cli(*argv), "bigwig", *words)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("w", [0, -5])
def test_bad_window(pred, tmp_path, w):
    assert_one_line_error(
        cli("--predictions", pred, "--outdir", tmp_path, "--basename", "b", "--window-size", w),
        "bigwig",
        "--window-size",
    )
    assert list(tmp_path.iterdir()) == []


def test_existing_output_and_force(pred, tmp_path):
    existing = tmp_path / "b_h3k4me3_avg_strand.bw"
    existing.write_text("old")
    proc = cli("--predictions", pred, "--outdir", tmp_path, "--basename", "b")
    assert_one_line_error(proc, "bigwig", "output exists", "--force")
    assert sorted(p.name for p in tmp_path.iterdir()) == [existing.name]  # nothing else written
    assert existing.read_text() == "old"
    proc = cli("--predictions", pred, "--outdir", tmp_path, "--basename", "b", "--force")
    assert proc.returncode == 0, proc.stderr
    assert existing.read_bytes()[:4] == bytes.fromhex("26fc8f88")  # bigWig magic, little-endian


def test_blacklist_absent_seqid_warns(pred, tmp_path):
    bl = tmp_path / "bl.txt"
    bl.write_text("Chrom2 some comment\nChrUn\n")
    out = tmp_path / "out"
    out.mkdir()
    proc = cli("--predictions", pred, "--outdir", out, "--basename", "b", "--blacklist", bl, "--format", "bg")
    assert proc.returncode == 0
    assert proc.stderr.strip().splitlines() == [
        f"chromaflow bigwig: WARNING: blacklisted seqid(s) not in {pred}: ChrUn"
    ]
    assert (out / "chrom.sizes").read_text() == "Chrom1\t51321\n"
    assert (out / "b_atacseq_avg_strand_bl.bg.gz").exists()


def test_no_partial_output_on_failure(pred, tmp_path):
    """A file that breaks mid-conversion leaves no output at all (not even the tracks already done)."""
    bad = tmp_path / "bad.h5"
    with h5py.File(pred) as src, h5py.File(bad, "w") as dst:
        for k in ("data/seqids", "prediction/datasets"):
            src.copy(k, dst, name=k)
        se = src["data/start_ends"][()]
        se[6:, :] *= 2  # Chrom2 rows now claim twice the bp they hold
        dst["data/start_ends"] = se
        src.copy("prediction/predictions", dst, name="prediction/predictions")
    out = tmp_path / "out"
    out.mkdir()
    assert_one_line_error(
        cli("--predictions", bad, "--outdir", out, "--basename", "b", "--strand", "all"), "bigwig", "Chrom2"
    )
    assert list(out.iterdir()) == []


def test_browser_files(pred, tmp_path):
    proc = cli("--predictions", pred, "--outdir", tmp_path, "--basename", "pd1", "--strand", "all")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "chrom.sizes").read_text() == "Chrom1\t51321\nChrom2\t102642\n"
    # IGV session: parses, every Resource exists relative to the XML
    xml = tmp_path / "igv_session.xml"
    root = ET.parse(xml).getroot()
    assert root.tag == "Session" and root.get("genome")
    paths = [r.get("path") for r in root.iter("Resource")]
    assert len(paths) == 6
    for p in paths:
        assert (xml.parent / p).is_file()
    assert {t.get("id") for t in root.iter("Track")} == set(paths)
    # UCSC hub: required fields, every bigDataUrl exists
    hub = _stanzas(tmp_path / "hub.txt")
    assert len(hub) == 1 and {"hub", "shortLabel", "longLabel", "genomesFile", "email"} <= hub[0].keys()
    assert len(hub[0]["shortLabel"]) <= 17
    genomes = _stanzas(tmp_path / hub[0]["genomesFile"])
    assert len(genomes) == 1 and {"genome", "trackDb"} <= genomes[0].keys()
    tracks = _stanzas(tmp_path / genomes[0]["trackDb"])
    assert len(tracks) == 6
    names = set()
    for t in tracks:
        assert {"track", "bigDataUrl", "shortLabel", "longLabel", "type"} <= t.keys()
        assert t["type"] == "bigWig" and t["autoScale"] == "on" and t["visibility"] == "full"
        # a URL: '+' escaped (object stores read it as a space), the file found under the unescaped name
        assert "+" not in t["bigDataUrl"] and (tmp_path / unquote(t["bigDataUrl"])).is_file()
        assert len(t["shortLabel"]) <= 17
        names.add(t["track"])
    assert len(names) == 6
    assert [t["shortLabel"] for t in tracks] == [
        f"{ds} {s}" for ds in ("atacseq", "h3k4me3") for s in ("avg", "plus", "minus")
    ]
    colours = {t["bigDataUrl"].split("_")[1]: set() for t in tracks}
    for t in tracks:
        colours[t["bigDataUrl"].split("_")[1]].add(t["color"])
    assert all(len(c) == 1 for c in colours.values()) and len({c.pop() for c in colours.values()}) == 2


def test_feature_track_in_igv_session(pred, tmp_path):
    """--feature-track: a BED (gene-accessibility's promoter windows) joins the IGV session as a feature track,
    its path relative to the session; the UCSC hub (bigBed only) is unchanged."""
    out = tmp_path / "tracks"
    proc = cli(
        "--predictions", pred, "--outdir", out, "--basename", "pd1", "--feature-track", "../genes/pd1.promoters.bed"
    )
    assert proc.returncode == 0, proc.stderr
    root = ET.parse(out / "igv_session.xml").getroot()
    assert [(r.get("path"), r.get("type")) for r in root.iter("Resource")][-1] == ("../genes/pd1.promoters.bed", "bed")
    feature = [t for t in root.iter("Track") if t.get("clazz") == "org.broad.igv.track.FeatureTrack"]
    assert [(t.get("id"), t.get("name")) for t in feature] == [("../genes/pd1.promoters.bed", "pd1 promoters")]
    assert "promoters" not in (out / "trackDb.txt").read_text()


def test_hub_track_in_trackdb(pred, tmp_path):
    """--hub-track: a bigBed 6 (gene-accessibility --bigbed's promoter windows) gets its own trackDb stanza, its
    bigDataUrl relative to trackDb.txt; the coverage stanzas are unchanged."""
    out = tmp_path / "tracks"
    plain = tmp_path / "plain"
    for d, extra in ((out, ["--hub-track", "../genes/pd1.promoters.bb"]), (plain, [])):
        proc = cli("--predictions", pred, "--outdir", d, "--basename", "pd1", *extra)
        assert proc.returncode == 0, proc.stderr
    st = _stanzas(out / "trackDb.txt")
    assert st[:-1] == _stanzas(plain / "trackDb.txt")
    assert st[-1] == {  # named once by the assembly (was pd1_pd1_promoters)
        "track": "pd1_promoters",
        "bigDataUrl": "../genes/pd1.promoters.bb",
        "shortLabel": "promoters",
        "longLabel": "pd1 promoters (pd1.promoters.bb)",
        "type": "bigBed 6",
        "visibility": "pack",
    }
    assert "promoters" not in (out / "igv_session.xml").read_text()  # the IGV session takes --feature-track


def test_no_browser_files(pred, tmp_path):
    proc = cli(
        "--predictions",
        pred,
        "--outdir",
        tmp_path,
        "--basename",
        "x",
        "--no-browser-files",
        "--format",
        "bg",
        "--datasets",
        "h3k4me3",
    )
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["x_h3k4me3_avg_strand.bg.gz"]


def _stanzas(path: Path) -> list[dict[str, str]]:
    out, cur = [], {}
    for line in path.read_text().splitlines() + [""]:
        line = line.strip()
        if line.startswith("#"):
            continue
        if not line:
            if cur:
                out.append(cur)
            cur = {}
            continue
        key, _, value = line.partition(" ")
        cur[key] = value.strip()
    return out


def test_dataset_name_with_slash_is_refused(pred, tmp_path):
    """A '/' in a dataset name was reported as 'output directory does not exist', or, where that subfolder
    existed, the track was written into it with exit 0."""
    bad = _variant(pred, tmp_path / "slash.h5", **{"prediction/datasets": np.array([b"atac/seq", b"h3k4me3"])})
    out = tmp_path / "out"
    (out / "b_atac").mkdir(parents=True)
    assert_one_line_error(
        cli("--predictions", bad, "--outdir", out, "--basename", "b"), "bigwig", str(bad), "'atac/seq'", "holds '/'"
    )
    assert [p.name for p in out.rglob("*")] == ["b_atac"]


def test_dataset_name_with_space_is_escaped_in_bigDataUrl(pred, tmp_path):
    from urllib.parse import unquote

    spaced = _variant(pred, tmp_path / "spaced.h5", **{"prediction/datasets": np.array([b"atac seq", b"h3k4me3"])})
    out = tmp_path / "out"
    proc = cli("--predictions", spaced, "--outdir", out, "--basename", "b", "--window-size", "5")
    assert proc.returncode == 0, proc.stderr
    urls = [t["bigDataUrl"] for t in _stanzas(out / "trackDb.txt")]
    assert urls == ["b_atac%20seq_avg_strand_ws=5.bw", "b_h3k4me3_avg_strand_ws=5.bw"]
    assert all((out / unquote(u)).is_file() for u in urls)
