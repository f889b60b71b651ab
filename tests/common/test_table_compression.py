"""One compression rule for every table a command writes (issue 54, item 4): gzip when the output's name ends in
``.gz`` (any case), plain text otherwise; the two hold the same text, and a gzip file the same bytes on every run (no
file name, time stamp 0)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from chromaflow.utils.outputs import open_table, wants_gzip, write_table_text
from helpers.cli import run_in_process
from helpers.genie3_files import base as genie3_base
from helpers.peaks_files import strands, write_h5
from helpers.variant_files import SEQ, write_inputs

GZIP_MAGIC = b"\x1f\x8b"


def _gzip_of(path: Path) -> bytes:
    """The text of a gzip file, after checking it is one with no name and time stamp 0 (the same bytes every run)."""
    data = path.read_bytes()
    assert data[:2] == GZIP_MAGIC, f"{path.name}: not gzip"
    assert data[4:8] == b"\0\0\0\0" and not data[3] & 0x08, f"{path.name}: gzip header holds a time or a name"
    return gzip.decompress(data)


def _plain_of(path: Path) -> bytes:
    data = path.read_bytes()
    assert data[:2] != GZIP_MAGIC, f"{path.name}: gzip, expected plain text"
    return data


def _same_table(plain: Path, gz: Path) -> None:
    text = _plain_of(plain)
    assert text and _gzip_of(gz) == text


def test_the_rule(tmp_path):
    assert [wants_gzip(n) for n in ("a.tsv.gz", "a.TSV.GZ", "a.gz", "a.tsv", "a.gzip", "a.tgz", "gz")] == [
        True,
        True,
        True,
        False,
        False,
        False,
        False,
    ]
    text = "a\tb\n" * 50000 + "é\n"
    write_table_text(tmp_path / "p", "x.tsv", text)
    write_table_text(tmp_path / "g", "x.tsv.gz", text)
    with open_table(tmp_path / "s", "x.tsv.gz") as fh:  # written in pieces: the same bytes as in one write
        for i in range(0, len(text), 997):
            fh.write(text[i : i + 997])
    assert (tmp_path / "p").read_text(encoding="utf-8") == text
    assert _gzip_of(tmp_path / "g") == text.encode()
    assert (tmp_path / "s").read_bytes() == (tmp_path / "g").read_bytes()


def test_genie3_links_and_weights(tmp_path):
    """Today ``genie3 --out links.tsv`` (and --weights w.tsv) writes gzip whatever the name."""
    for d, ext in (("p", ""), ("g", ".gz"), ("u", ".GZ")):
        (tmp_path / d).mkdir()
        args = genie3_base(tmp_path / d, "--weights", tmp_path / d / f"w.tsv{ext}", out=f"links.tsv{ext}")
        run_in_process(*args)
    _same_table(tmp_path / "p" / "links.tsv", tmp_path / "g" / "links.tsv.gz")
    _same_table(tmp_path / "p" / "w.tsv", tmp_path / "g" / "w.tsv.gz")
    assert (tmp_path / "u" / "links.tsv.GZ").read_bytes() == (tmp_path / "g" / "links.tsv.gz").read_bytes()
    assert _plain_of(tmp_path / "p" / "links.tsv").startswith(b"regulator\ttarget\timportance\n")


def test_genie3_repeats_and_merge(tmp_path):
    """The link list of --repeats, and genie3-merge's (whole and streamed --max-links): plain unless named .gz."""
    run_in_process(*genie3_base(tmp_path, "--repeats", "2", out="r.tsv"))
    run_in_process(*genie3_base(tmp_path, "--repeats", "2", out="r.tsv.gz"))
    _same_table(tmp_path / "r.tsv", tmp_path / "r.tsv.gz")
    assert _plain_of(tmp_path / "r.tsv").startswith(b"regulator\ttarget\timportance\tconfidence\tmean_rank\n")
    parts = [tmp_path / f"c{i}.npz" for i in (1, 2)]
    for i, p in enumerate(parts, 1):
        run_in_process(*genie3_base(tmp_path, "--targets-chunk", f"{i}/2", out=p.name))
    for extra, name in (([], "m"), (["--max-links", "7"], "top")):
        run_in_process("genie3-merge", *parts, *extra, "--out", tmp_path / f"{name}.tsv")
        run_in_process("genie3-merge", *parts, *extra, "--out", tmp_path / f"{name}.tsv.gz")
        _same_table(tmp_path / f"{name}.tsv", tmp_path / f"{name}.tsv.gz")
    assert len(_plain_of(tmp_path / "top.tsv").splitlines()) == 8


@pytest.fixture(scope="module")
def coverage(tmp_path_factory):
    """A predictions h5 with peaks (two records) and a GFF3 of three genes on it."""
    d = tmp_path_factory.mktemp("tables")
    write_h5(d / "p.h5", strands(1, {"c1": 20000, "c2": 8000}), 1000)
    genes = [("c1", 1000, "+"), ("c1", 5000, "-"), ("c2", 3000, "+")]
    (d / "g.gff3").write_text(
        "##gff-version 3\n" + "".join(f"{c}\t.\tgene\t{s}\t{s + 500}\t.\t{st}\t.\tID=g{i}\n" for i, (c, s, st) in
                                      enumerate(genes))
    )  # fmt: skip
    return d


def test_gene_accessibility_table_and_bed(coverage, tmp_path):
    """Today ``gene-accessibility --out genes.tsv.gz`` (and --bed) writes plain text under the .gz name."""
    base = ["gene-accessibility", "--annotation", coverage / "g.gff3", "--predictions", coverage / "p.h5"]
    run_in_process(*base, "--out", tmp_path / "g.tsv", "--bed", tmp_path / "p.bed")
    run_in_process(*base, "--out", tmp_path / "g.tsv.gz", "--bed", tmp_path / "p.bed.gz")
    _same_table(tmp_path / "g.tsv", tmp_path / "g.tsv.gz")
    _same_table(tmp_path / "p.bed", tmp_path / "p.bed.gz")


def test_peaks_narrowpeak(coverage, tmp_path):
    """Today ``peaks --out x.narrowPeak.gz`` writes plain text (and names the summary x.narrowPeak.gz.summary.json,
    the bigBed x.narrowPeak.gz.bb); the bigBed is made from the gzip file."""
    tracks = tmp_path / "tracks"
    run_in_process("bigwig", "--predictions", coverage / "p.h5", "--outdir", tracks, "--basename", "b")
    run_in_process("peaks", "--predictions", coverage / "p.h5", "--out", tmp_path / "y.narrowPeak")
    run_in_process(
        "peaks", "--predictions", coverage / "p.h5", "--out", tracks / "x.narrowPeak.gz", "--browser-dir", tracks
    )
    _same_table(tmp_path / "y.narrowPeak", tracks / "x.narrowPeak.gz")
    assert (tracks / "x.summary.json").is_file() and (tracks / "x.bb").read_bytes()[:4] == b"\xeb\xf2\x89\x87"
    assert "x.narrowPeak.gz" in (tracks / "igv_session.xml").read_text()


def test_variant_effect_table(tmp_path):
    """variant-effect chose by the suffix already; now also a .GZ name is gzip (the rule ignores case)."""
    recs = "".join(
        f"c1\t{p}\t.\t{SEQ['c1'][p - 1]}\t{'A' if SEQ['c1'][p - 1] != 'A' else 'C'}\t.\t.\t.\n" for p in (40, 90)
    )
    fa, model, vcf = write_inputs(tmp_path, recs)
    base = ["variant-effect", "--vcf", vcf, "--fasta", fa, "--model", model, "--flank", 10, "--threads", 1]
    for name in ("e.tsv", "e.tsv.gz", "e.tsv.GZ"):
        run_in_process(*base, "--out", tmp_path / name)
    _same_table(tmp_path / "e.tsv", tmp_path / "e.tsv.gz")
    assert (tmp_path / "e.tsv.GZ").read_bytes() == (tmp_path / "e.tsv.gz").read_bytes()


@pytest.mark.reference
def test_evaluate_table(reference_dir, tmp_path):
    """Today ``evaluate --out m.tsv.gz`` writes plain text under the .gz name."""
    pred = reference_dir / "predmoter"
    base = ["evaluate", "--model", pred / "mini_model.ckpt", "--h5", pred / "val_data_1.h5", "--device", "cpu"]
    run_in_process(*base, "--out", tmp_path / "m.tsv")
    run_in_process(*base, "--out", tmp_path / "m.tsv.gz")
    _same_table(tmp_path / "m.tsv", tmp_path / "m.tsv.gz")
