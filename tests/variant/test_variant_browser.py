"""``variant-browser``: the top variants' ref/alt bigWigs of ``variant-effect --tracks`` in the IGV session and UCSC
hub written by ``chromaflow bigwig``'s browser writer (after ``peaks`` added its track, as in the pipeline), with
paths relative to the browser folder; a rerun replaces the entries; bad input is one line."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from chromaflow.bigwig.browser import PALETTE, write_browser_files
from chromaflow.peaks.browser import add_to_browser_files
from chromaflow.variant.cli_browser import COLOUR
from helpers.cli import assert_one_line_error, run_in_process
from helpers.variant_files import SEQ, write_inputs


@pytest.fixture(scope="module")
def variant_tracks(tmp_path_factory):
    """The pipeline's layout: <id>/variants/variant_tracks/*.bw of variant-effect --tracks 2."""
    d = tmp_path_factory.mktemp("vbrowser")
    recs = [("c1", 40), ("c1", 300), ("c2", 100)]
    fa, model, vcf = write_inputs(
        d, "".join(f"{c}\t{p}\t.\t{SEQ[c][p - 1]}\t{'A' if SEQ[c][p - 1] != 'A' else 'C'}\t.\t.\t.\n" for c, p in recs)
    )
    tracks = d / "asm" / "variants" / "variant_tracks"
    run_in_process(
        "variant-effect",
        "--vcf",
        vcf,
        "--fasta",
        fa,
        "--model",
        model,
        "--flank",
        10,
        "--threads",
        1,
        "--out",
        d / "e.tsv",
        "--tracks",
        2,
        "--tracks-dir",
        tracks,
    )
    return sorted(tracks.glob("*.bw"))


def _browser(tmp_path: Path, fmt: str = "bigwig") -> Path:
    """bigwig's browser files of an assembly 'asm' (one dataset, strand average) with a peaks track added."""
    b = tmp_path / "asm" / "tracks"
    b.mkdir(parents=True)
    write_browser_files(
        b, chroms=[("c1", 600), ("c2", 280)], tracks=[("atacseq", "avg", "asm_atacseq_avg.bw")], fmt=fmt, basename="asm"
    )
    add_to_browser_files(
        b, Path("asm_atacseq.narrowPeak"), "asm_atacseq", "asm_atacseq.bb" if fmt == "bigwig" else None
    )
    return b


def test_session_and_hub_list_the_variant_tracks(variant_tracks, tmp_path):
    b = _browser(tmp_path)
    # staged as the pipeline stages them: tracks/ beside variants/variant_tracks/
    staged = tmp_path / "asm" / "variants" / "variant_tracks"
    staged.mkdir(parents=True)
    for t in variant_tracks:
        (staged / t.name).symlink_to(t)
    run_in_process("variant-browser", "--browser-dir", b, "--name", "asm", *sorted(staged.iterdir()))
    assert len(variant_tracks) == 2 * 2 * 2  # 2 variants x 2 datasets x ref/alt
    root = ET.parse(b / "igv_session.xml").getroot()
    rel = [f"../variants/variant_tracks/{t.name}" for t in variant_tracks]
    resources = [r.get("path") for r in root.iter("Resource")]
    assert resources[:2] == ["asm_atacseq_avg.bw", "asm_atacseq.narrowPeak"] and sorted(resources[2:]) == rel
    panel = [p for p in root.iter("Panel") if p.get("name") == "VariantPanel"]
    assert len(panel) == 1
    ids = [t.get("id") for t in panel[0]]
    # rank order, datasets in order, ref before alt
    assert [Path(i).name.split("_")[0] for i in ids] == ["001"] * 4 + ["002"] * 4
    assert [i.rsplit(".", 3)[1:3] for i in ids[:4]] == [
        ["atacseq", "ref"],
        ["atacseq", "alt"],
        ["h3k4me3", "ref"],
        ["h3k4me3", "alt"],
    ]
    assert all((b / i).resolve().is_file() for i in ids)  # the relative paths lead to the bigWigs
    assert any(p.get("name") == "FeaturePanel" for p in root.iter("Panel"))  # the peaks track is kept
    db = (b / "trackDb.txt").read_text()
    assert "track asm_atacseq_peaks" in db and "track asm_atacseq_avg" in db
    stanzas = [s for s in db.split("\n\n") if s.startswith("track asm_variant_")]
    assert len(stanzas) == 8
    assert sorted(s.split("\n")[1] for s in stanzas) == sorted(f"bigDataUrl {r}" for r in rel)
    # labels within UCSC's limits, whole words; ref/alt colours none of the dataset palette's
    fields = [dict(line.split(" ", 1) for line in s.strip().split("\n")) for s in stanzas]
    assert fields[0]["shortLabel"] == "v1 ref atacseq" and all(len(f["shortLabel"]) <= 17 for f in fields)
    assert all(len(f["longLabel"]) <= 76 for f in fields)
    palette = {",".join(map(str, c)) for c in PALETTE}
    assert {f["color"] for f in fields} == set(COLOUR.values()) and not set(COLOUR.values()) & palette
    # a rerun replaces, it does not add
    before = {f: (b / f).read_text() for f in ("igv_session.xml", "trackDb.txt")}
    run_in_process("variant-browser", "--browser-dir", b, "--name", "asm", *sorted(staged.iterdir()))
    assert {f: (b / f).read_text() for f in before} == before
    # and with no bigWigs, the variant entries go
    run_in_process("variant-browser", "--browser-dir", b, "--name", "asm")
    assert "variant" not in (b / "igv_session.xml").read_text() and "_variant_" not in (b / "trackDb.txt").read_text()
    assert "asm_atacseq.narrowPeak" in (b / "igv_session.xml").read_text()


def test_bedgraph_browser_files_get_the_session_only(variant_tracks, tmp_path):
    b = _browser(tmp_path, fmt="bedgraph")
    run_in_process("variant-browser", "--browser-dir", b, "--name", "asm", *variant_tracks)
    assert not (b / "trackDb.txt").exists()
    assert ET.parse(b / "igv_session.xml").getroot().find("Resources") is not None
    assert (b / "igv_session.xml").read_text().count('type="bw"') == 8


@pytest.mark.parametrize("case", ["no_session", "bad_name", "missing"])
def test_bad_input_is_one_line(variant_tracks, tmp_path, case):
    b = tmp_path / "asm" / "tracks"
    if case == "no_session":
        b.mkdir(parents=True)
        args, needles = [variant_tracks[0]], ["no igv_session.xml"]
    else:
        b = _browser(tmp_path)
        bad = tmp_path / ("asm.bw" if case == "bad_name" else "001_c1_5_1.atacseq.ref.bw")
        if case == "bad_name":
            bad.write_bytes(variant_tracks[0].read_bytes())
        args, needles = (
            [variant_tracks[0], bad],
            (
                [bad.name, "not a variant-effect --tracks bigWig name"]
                if case == "bad_name"
                else [bad.name, "does not exist"]
            ),
        )
    before = {p.name: p.read_bytes() for p in b.iterdir()}
    proc = run_in_process("variant-browser", "--browser-dir", b, "--name", "asm", *args, check=False)
    assert_one_line_error(proc, "variant-browser", *needles)
    assert {p.name: p.read_bytes() for p in b.iterdir()} == before
