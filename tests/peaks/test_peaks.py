"""``chromaflow peaks`` against MACS3 ``bdgpeakcall`` run on the same bedGraph (predictions h5 and bigWig input),
smoothing through ``chromaflow bigwig``'s track, and ``--cutoff auto`` against measured coverage."""

from __future__ import annotations

import functools
import json
import shutil
import struct
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest
from helpers.cli import assert_nothing_left, assert_one_line_error, chromaflow, run_in_process
from helpers.environment import unavailable
from helpers.peaks_files import strand_average, strands, write_bedgraph, write_h5

#: in this process (fast); test_bad_files_one_line runs a child process, as a task does (libBigWig writes to the
#: process's stderr directly, which only a child's captured stderr shows)
cli = functools.partial(run_in_process, "peaks", check=False)
child = functools.partial(chromaflow, "peaks")

#: two chromosomes ending in a partial chunk, one shorter than a chunk
SIZES = {"chrB": 61_237, "chrA": 40_000, "chrM": 777}
L = 5_000


def macs3() -> str:
    exe = shutil.which("macs3")
    if exe is None:
        unavailable("MACS3 (macs3 bdgpeakcall) is not installed")
    return exe


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("peaks")
    tracks = strands(7, SIZES)
    avg = {n: strand_average(p, m) for n, (p, m) in tracks.items()}
    return {
        "dir": d,
        "tracks": tracks,
        "avg": avg,
        "pred": write_h5(d / "pred.h5", tracks, L),
        "bg": write_bedgraph(d / "avg.bg", avg),
    }


def macs3_peaks(bg: Path, out: Path, name: str, cutoff, min_length: int, max_gap: int) -> list[list[str]]:
    out.mkdir(exist_ok=True)
    subprocess.run(
        [
            macs3(),
            "bdgpeakcall",
            "-i",
            str(bg),
            "-c",
            str(cutoff),
            "-l",
            str(min_length),
            "-g",
            str(max_gap),
            "--outdir",
            str(out),
            "-o",
            name,
        ],
        check=True,
        capture_output=True,
    )
    return rows(out / name)  # its default track line left out


def rows(path: Path) -> list[list[str]]:
    return [ln.split("\t") for ln in path.read_text().splitlines() if not ln.startswith("track")]


def assert_same_as_macs3(ours: list[list[str]], theirs: list[list[str]]) -> None:
    """Columns 1-6 (chrom, start, end, name, score, strand) and 10 (summit offset) equal; 7 is the summit value
    (score = int(10 * it)), 8-9 are -1 (MACS3 writes 0: bdgpeakcall computes no p/q-value)."""
    assert len(ours) == len(theirs) > 0
    for a, b in zip(ours, theirs):
        assert a[:6] + a[9:] == b[:6] + b[9:], (a, b)
        assert int(10 * float(a[6])) == int(a[4]) and a[7:9] == ["-1", "-1"]


@pytest.mark.parametrize("cutoff,min_length,max_gap", [(25, 200, 30), (10, 50, 0), (3, 0, 5), (60.5, 100, 400)])
def test_predictions_equal_bdgpeakcall(data, cutoff, min_length, max_gap):
    d = data["dir"] / f"c{cutoff}_{min_length}_{max_gap}"
    theirs = macs3_peaks(data["bg"], d, "atacseq", cutoff, min_length, max_gap)
    out = d / "ours.narrowPeak"
    cli(
        "--predictions",
        data["pred"],
        "--out",
        out,
        "--cutoff",
        cutoff,
        "--min-length",
        min_length,
        "--max-gap",
        max_gap,
        "--track-line",
        check=True,
    )
    assert_same_as_macs3(rows(out), theirs)
    first = (d / "atacseq").read_text().splitlines()[0]
    assert out.read_text().splitlines()[0] == first and first.startswith("track type=narrowPeak")
    summary = json.loads((d / "ours.summary.json").read_text())
    assert summary["cutoff"] == float(cutoff) and summary["cutoff_method"] == "fixed (--cutoff)"
    assert summary["peaks"] == len(theirs)


def test_bigwig_input_equals_bdgpeakcall(data):
    import pyBigWig

    d = data["dir"] / "bw"
    d.mkdir()
    bw_path = d / "avg.bw"
    bw = pyBigWig.open(str(bw_path), "w")
    bw.addHeader(list(SIZES.items()))
    for name, v in data["avg"].items():
        nz = np.flatnonzero(v)  # zero bases left out: the reader must fill them with 0
        bw.addEntries(name, nz.tolist() and nz.astype(np.int64).tolist(), values=v[nz].astype(float).tolist(), span=1)
    bw.close()
    theirs = macs3_peaks(data["bg"], d, "avg", 25, 200, 30)
    out = d / "ours.narrowPeak"
    cli("--bigwig", bw_path, "--out", out, "--cutoff", 25, check=True)
    assert_same_as_macs3(rows(out), theirs)


@pytest.mark.parametrize("source", ["predictions", "bigwig"])
def test_small_pieces_equal_bdgpeakcall_and_the_track_is_never_collected(data, monkeypatch, source):
    """The reader cut into one-chunk pieces (h5) or 777 bp windows (bigWig): still bdgpeakcall's peaks; the
    in-memory collector (the --cutoff auto path) is not used."""
    import pyBigWig

    from chromaflow.bigwig import convert
    from chromaflow.peaks import tracks

    monkeypatch.setattr(convert, "PIECE_CHUNKS", 1)
    monkeypatch.setattr(tracks, "BIGWIG_WINDOW", 777)
    monkeypatch.setattr(tracks, "_Collect", None)  # calling it fails: the fixed-cutoff path must stream
    d = data["dir"] / f"small_{source}"
    d.mkdir()
    if source == "bigwig":
        src = d / "avg.bw"
        bw = pyBigWig.open(str(src), "w")
        bw.addHeader(list(SIZES.items()))
        for name, v in data["avg"].items():
            nz = np.flatnonzero(v)
            bw.addEntries(name, nz.astype(np.int64).tolist(), values=v[nz].astype(float).tolist(), span=1)
        bw.close()
    else:
        src = data["pred"]
    theirs = macs3_peaks(data["bg"], d, "atacseq", 10, 50, 30)
    out = d / "ours.narrowPeak"
    cli(
        f"--{source}",
        src,
        "--out",
        out,
        "--cutoff",
        10,
        "--min-length",
        50,
        "--max-gap",
        30,
        "--name",
        "atacseq",
        "--metrics",
        d / "m.json",
        check=True,
    )
    assert_same_as_macs3(rows(out), theirs)
    # the merged runs counted across pieces: one per change of value along each chromosome, as on the whole track
    runs = sum(1 + int(np.count_nonzero(v[1:] != v[:-1])) for v in (a.astype(np.float32) for a in data["avg"].values()))
    assert json.loads((d / "m.json").read_text())["runs"] == runs


def test_smoothed_equals_bdgpeakcall_on_bigwig_track(data):
    """--window-size: the peaks of the track chromaflow bigwig writes with the same window."""
    d = data["dir"] / "ws"
    chromaflow(
        "bigwig",
        "--predictions",
        data["pred"],
        "--outdir",
        d,
        "--basename",
        "p",
        "--format",
        "bedgraph",
        "--window-size",
        51,
        "--no-browser-files",
        check=True,
    )
    bg = d / "p.bg"
    with open(bg, "wb") as fh:
        fh.write(
            subprocess.run(
                ["gzip", "-dc", str(d / "p_atacseq_avg_strand_ws=51.bg.gz")], check=True, capture_output=True
            ).stdout
        )
    theirs = macs3_peaks(bg, d, "atacseq", 20, 100, 10)
    out = d / "ours.narrowPeak"
    cli(
        "--predictions",
        data["pred"],
        "--out",
        out,
        "--cutoff",
        20,
        "--min-length",
        100,
        "--max-gap",
        10,
        "--window-size",
        51,
        check=True,
    )
    assert_same_as_macs3(rows(out), theirs)
    unsmoothed = d / "raw.narrowPeak"
    cli(
        "--predictions",
        data["pred"],
        "--out",
        unsmoothed,
        "--cutoff",
        20,
        "--min-length",
        100,
        "--max-gap",
        10,
        check=True,
    )
    assert rows(unsmoothed) != rows(out)


#: edge cases of bdgpeakcall's rules at cutoff 2.5, min length 10, max gap 3 (chrom, start, end, value)
EDGES = [
    ("e1", 0, 10, 2.5),  # a peak at the chromosome start, exactly min length, value == cutoff
    ("e1", 10, 20, 1),
    ("e1", 20, 24, 7),
    ("e1", 24, 27, 0),  # gap of exactly max gap: joined
    ("e1", 27, 31, 7),
    ("e1", 31, 40, 1),  # ... summit: 2 runs hold 7 -> the first (midpoint 22)
    ("e1", 40, 43, 5),
    ("e1", 43, 45, 2),
    ("e1", 45, 47, 5),
    ("e1", 47, 49, 2),  # 3 runs hold 5 -> the middle
    ("e1", 49, 52, 5),
    ("e1", 52, 60, 1),  # ... (midpoint 46)
    ("e1", 60, 69, 9),
    ("e1", 69, 100, 0),  # 9 bp: one short of min length, dropped
    ("e2", 5, 30, 3.75),
    ("e2", 30, 34, 0),
    ("e2", 34, 40, 3.75),  # starts after 0 (baseline 0); gap 4 > 3: split
]


def test_edge_cases_equal_bdgpeakcall(tmp_path):
    from chromaflow.peaks.call import call_peaks, merge_runs
    from chromaflow.peaks.core import write_narrowpeak

    bg = tmp_path / "edges.bg"
    bg.write_text("".join(f"{c}\t{s}\t{e}\t{v}\n" for c, s, e, v in EDGES))
    theirs = macs3_peaks(bg, tmp_path, "edges", 2.5, 10, 3)
    chroms, peaks = [], {}
    for c in dict.fromkeys(r[0] for r in EDGES):
        rs = [r for r in EDGES if r[0] == c]
        runs = merge_runs([r[1] for r in rs], [r[2] for r in rs], [r[3] for r in rs], rs[-1][2])
        chroms.append((c, rs[-1][2]))
        peaks[c] = call_peaks(*runs, 2.5, 10, 3)
    write_narrowpeak(tmp_path / "ours.narrowPeak", chroms, peaks, "edges", False)
    ours = rows(tmp_path / "ours.narrowPeak")
    assert_same_as_macs3(ours, theirs)
    assert [(a[0], a[1], a[2], a[9]) for a in ours] == [
        ("e1", "0", "10", "5"),
        ("e1", "20", "31", "2"),
        ("e1", "40", "52", "6"),
        ("e2", "5", "30", "12"),
    ]


def test_narrowpeak_layout_and_track_line(data):
    d = data["dir"] / "layout"
    d.mkdir()
    out = d / "p.narrowPeak"
    cli("--predictions", data["pred"], "--out", out, "--cutoff", 25, "--track-line", "--name", "x", check=True)
    text = out.read_text()
    assert text.startswith('track type=narrowPeak name="x"')
    r = rows(out)
    keys = [(a[0].encode(), int(a[1])) for a in r]
    assert keys == sorted(keys)  # sorted by chromosome (byte order) and start
    assert [a[0] for a in r][0] == "chrA"
    for a in r:
        start, end, off = int(a[1]), int(a[2]), int(a[9])
        assert 0 <= start < end and 0 <= off < end - start and a[3].startswith("x_narrowPeak")
        v = data["avg"][a[0]]
        assert float(a[6]) == v[start:end].max() == v[start + off]  # the summit holds the peak's maximum
    again = d / "q.narrowPeak"
    cli(
        "--predictions",
        data["pred"],
        "--out",
        again,
        "--cutoff",
        25,
        "--track-line",
        "--name",
        "x",
        "--threads",
        1,
        check=True,
    )
    assert again.read_bytes() == out.read_bytes()


@pytest.mark.parametrize("cutoff,min_length,max_gap,strand", [(10, 50, 0, "avg"), (3, 0, 5, "avg"), (25, 200, 30, "+")])
def test_c_peak_caller_equals_the_stream(data, monkeypatch, cutoff, min_length, max_gap, strand):
    """The C caller of an unsmoothed track (_native_h5_peaks) gives the peaks and merged-run count of the converter +
    PeakStream path (CHROMAFLOW_PEAKS_KERNEL=0), in one-chunk pieces too (peaks and runs across piece ends)."""
    from chromaflow.bigwig import _native, convert
    from chromaflow.peaks import tracks

    if _native.load() is None:
        pytest.skip("no C compiler")
    for pieces in (convert.PIECE_CHUNKS, 1):
        monkeypatch.setattr(convert, "PIECE_CHUNKS", pieces)
        args = (str(data["pred"]), "atacseq", cutoff, min_length, max_gap)
        native = tracks._native_h5_peaks(*args, strand=strand, threads=2)
        monkeypatch.setenv("CHROMAFLOW_PEAKS_KERNEL", "0")
        stream = tracks.h5_peaks(*args, strand=strand, threads=2)
        monkeypatch.delenv("CHROMAFLOW_PEAKS_KERNEL")
        assert native is not None and native[0] == stream[0] and native[2] == stream[2]
        assert sum(len(p) for p in native[1].values()) > 0
        for name in native[1]:
            a, b = native[1][name], stream[1][name]
            for f in ("starts", "ends", "summits", "values"):
                assert np.array_equal(getattr(a, f), getattr(b, f)), (pieces, name, f)


def test_narrowpeak_lines_c_equal_python(monkeypatch):
    """The C formatter of narrowPeak lines writes what the Python one writes (values' %.6g, numbering, a non-ASCII
    chromosome name, integers of every width)."""
    from chromaflow.bigwig import _native
    from chromaflow.peaks import core
    from chromaflow.peaks.call import Peaks

    if _native.load() is None:
        pytest.skip("no C compiler")
    rng = np.random.default_rng(5)
    starts = np.sort(rng.choice(10**12, 500, replace=False)).astype(np.int64)
    ends = starts + rng.integers(1, 10**6, 500)
    summits = starts + (ends - starts) // 3
    values = rng.choice(np.array([3, 25.5, 1e7, 123456789, 0.1], np.float32), 500)
    p = Peaks(starts, ends, summits, values)
    c = core._narrowpeak_text("chrÄ_1", p, "atac", 99)
    monkeypatch.setattr(_native, "load", lambda: None)
    assert c == core._narrowpeak_text("chrÄ_1", p, "atac", 99)
    assert c.splitlines()[0].split("\t")[3] == "atac_narrowPeak100" and len(c.splitlines()) == 500


def _base_mask(r, name, n):
    m = np.zeros(n, bool)
    for a in r:
        if a[0] == name:
            m[int(a[1]) : int(a[2])] = True
    return m


def test_cutoff_auto_against_measured_coverage(data):
    """Measured coverage = the predicted strands: its peaks at --observed-cutoff 37 are matched exactly (F1 = 1) by
    the predicted peaks at cutoff 37 and by no other. One F1 row checked against base masks of two fixed runs."""
    d = data["dir"] / "auto"
    d.mkdir()
    obs = write_h5(d / "genome.h5", data["tracks"], L, observed=True)
    out = d / "auto.narrowPeak"
    cli(
        "--predictions",
        data["pred"],
        "--out",
        out,
        "--observed",
        obs,
        "--observed-cutoff",
        37,
        "--metrics",
        d / "m.json",
        check=True,
    )
    s = json.loads((d / "auto.summary.json").read_text())
    assert s["cutoff"] == 37 and s["f1"] == 1.0 and s["cutoff_method"].startswith("auto")
    assert json.loads((d / "m.json").read_text())["cutoff"] == 37
    row = next(r for r in s["f1_table"] if r["cutoff"] == 20)
    cli("--predictions", data["pred"], "--out", d / "m.narrowPeak", "--cutoff", 37, check=True)
    cli("--predictions", data["pred"], "--out", d / "p.narrowPeak", "--cutoff", 20, check=True)
    tp = pb = mb = 0
    for name, n in SIZES.items():
        pm = _base_mask(rows(d / "p.narrowPeak"), name, n)
        mm = _base_mask(rows(d / "m.narrowPeak"), name, n)
        tp, pb, mb = tp + int((pm & mm).sum()), pb + int(pm.sum()), mb + int(mm.sum())
    assert (row["tp_bp"], row["peak_bp"]) == (tp, pb)
    assert row["f1"] == round(2 * tp / (pb + mb), 6) < 1.0


def test_measured_coverage_from_a_bigwig_is_read_as_floats(data):
    """add-coverage --bigwig stores measured coverage as float32 (bigWig values): --observed reads it as it reads read
    counts, the same F1 table and cutoff as the same values stored as integers (before: "expected integers")."""
    d = data["dir"] / "float_obs"
    d.mkdir()
    ints = write_h5(d / "ints.h5", data["tracks"], L, observed=True)
    floats = d / "floats.h5"
    shutil.copy(ints, floats)
    with h5py.File(floats, "r+") as f:
        key = next(k for k in f["evaluation"] if k.endswith("_coverage"))
        vals = f["evaluation"][key][:]
        del f["evaluation"][key]
        f["evaluation"].create_dataset(key, data=vals.astype(np.float32))
    for name, obs in (("ints", ints), ("floats", floats)):
        cli("--predictions", data["pred"], "--out", d / f"{name}.narrowPeak", "--observed", obs, check=True)
    a, b = (json.loads((d / f"{n}.summary.json").read_text()) for n in ("ints", "floats"))
    assert a["f1_table"] == b["f1_table"] and a["cutoff"] == b["cutoff"]
    assert (d / "ints.narrowPeak").read_bytes() == (d / "floats.narrowPeak").read_bytes()


def test_cutoff_auto_without_coverage_uses_default(data):
    d = data["dir"] / "default"
    d.mkdir()
    cli("--predictions", data["pred"], "--out", d / "a.narrowPeak", check=True)
    s = json.loads((d / "a.summary.json").read_text())
    assert s["cutoff"] == 25 and s["cutoff_method"].startswith("default")


@pytest.mark.parametrize(
    "args,needles",
    [
        (["--cutoff", "0"], ["--cutoff '0'", "> 0"]),
        (["--cutoff", "x"], ["--cutoff 'x'"]),
        (["--min-length", "-1"], ["--min-length"]),
        (["--max-gap", "-3"], ["--max-gap"]),
        (["--dataset", "dnase"], ["dnase", "prediction/datasets"]),
        (["--name", "a b"], ["--name 'a b'", "whitespace"]),
        (["--cutoff", "5", "--observed", "PRED"], ["--observed goes with --cutoff auto"]),
    ],
)
def test_bad_input_one_line(data, tmp_path, args, needles):
    args = [str(data["pred"]) if a == "PRED" else a for a in args]
    proc = cli("--predictions", data["pred"], "--out", tmp_path / "x.narrowPeak", *args)
    assert_one_line_error(proc, "peaks", *needles)
    assert_nothing_left(tmp_path)


def test_bad_files_one_line(data, tmp_path):
    bad = tmp_path / "bad.bw"
    bad.write_text("not a bigwig\n")
    assert_one_line_error(child("--bigwig", bad, "--out", tmp_path / "x.narrowPeak"), "peaks", str(bad), "bigWig")
    assert_one_line_error(
        child("--predictions", bad, "--out", tmp_path / "x.narrowPeak"), "peaks", str(bad), "not a readable HDF5"
    )
    other = write_h5(tmp_path / "other.h5", {"chrA": data["tracks"]["chrA"]}, L, observed=True)
    assert_one_line_error(
        child("--predictions", data["pred"], "--out", tmp_path / "x.narrowPeak", "--observed", other),
        "peaks",
        str(other),
        "chromosomes differ",
    )
    assert_nothing_left(tmp_path, {"bad.bw", "other.h5"})
    (tmp_path / "x.narrowPeak").write_text("")
    assert_one_line_error(
        child("--predictions", data["pred"], "--out", tmp_path / "x.narrowPeak"), "peaks", "output exists"
    )


def test_browser_dir_adds_peaks_to_igv_session_and_hub(data, tmp_path):
    """--browser-dir: the narrowPeak in chromaflow bigwig's IGV session (a FeatureTrack in its one feature panel), a
    bigBed with bigNarrowPeak's fields and the same rows, and a ``type bigBed 6 +`` trackDb stanza (igv.js skips
    ``type bigNarrowPeak``); a rerun replaces the entries instead of adding more."""
    import xml.etree.ElementTree as ET

    import pyBigWig

    tracks = tmp_path / "tracks"
    chromaflow("bigwig", "--predictions", data["pred"], "--outdir", tracks, "--basename", "p", check=True)
    out = tracks / "p_atacseq.narrowPeak"
    for _ in range(2):
        cli(
            "--predictions",
            data["pred"],
            "--out",
            out,
            "--name",
            "p_atacseq",
            "--browser-dir",
            tracks,
            "--force",
            check=True,
        )
    root = ET.parse(tracks / "igv_session.xml").getroot()
    res = [r.get("path") for r in root.iter("Resource")]
    assert res == ["p_atacseq_avg_strand.bw", "p_atacseq.narrowPeak"]
    feat = [t for t in root.iter("Track") if t.get("clazz") == "org.broad.igv.track.FeatureTrack"]
    assert [t.get("id") for t in feat] == ["p_atacseq.narrowPeak"]
    assert [t.get("name") for t in feat] == ["p atacseq peaks"]  # named like the bigWig tracks (p atacseq avg)
    assert [p.get("name") for p in root.iter("Panel")] == ["DataPanel", "FeaturePanel"]
    stanzas = (tracks / "trackDb.txt").read_text().split("\n\n")
    peak = [x for x in stanzas if x.startswith("track p_atacseq_peaks\n")]
    assert len(peak) == 1 and "bigDataUrl p_atacseq.bb" in peak[0] and "\ntype bigBed 6 +\n" in peak[0]
    assert "\nshortLabel p atacseq peaks\n" in peak[0]
    bb = pyBigWig.open(str(tracks / "p_atacseq.bb"))
    try:
        sizes = bb.chroms()
        got = [
            [c, str(s), str(e), *rest.split("\t")]
            for c in sorted(sizes)
            for s, e, rest in (bb.entries(c, 0, sizes[c]) or [])
        ]
    finally:
        bb.close()
    assert got == rows(out) and len(got) > 0
    # UCSC's bigNarrowPeak: its autoSql, 10 fields of which 6 are BED's (as bedToBigBed -type=bed6+4 writes them)
    head = (tracks / "p_atacseq.bb").read_bytes()[:36]
    assert struct.unpack_from("<IHH", head, 0)[0] == 0x8789F2EB and struct.unpack_from("<HH", head, 32) == (10, 6)
    bb = pyBigWig.open(str(tracks / "p_atacseq.bb"))
    try:
        assert bb.SQL().decode().startswith("table bigNarrowPeak")
    finally:
        bb.close()


def test_cutoff_auto_reads_coverage_inside_the_predictions_h5(data, tmp_path):
    """A predictions h5 that also holds evaluation/<dataset>_coverage: --cutoff auto uses it without --observed."""
    import h5py

    both = tmp_path / "both.h5"
    shutil.copy(data["pred"], both)
    obs = write_h5(tmp_path / "obs.h5", data["tracks"], L, observed=True)
    with h5py.File(obs) as src, h5py.File(both, "a") as dst:
        src.copy("evaluation", dst)
    cli("--predictions", both, "--out", tmp_path / "a.narrowPeak", "--observed-cutoff", 37, check=True)
    s = json.loads((tmp_path / "a.summary.json").read_text())
    assert s["cutoff"] == 37 and s["observed"] == "both.h5" and s["f1"] == 1.0
