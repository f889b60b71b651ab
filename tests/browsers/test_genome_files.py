"""``chromaflow bigwig --fasta``: the genome files beside the tracks (.fa + .fai, .2bit read back with py2bit, UCSC's
lib2bit), their checks against the predictions, and the hub and session that name them; the label rules."""

from __future__ import annotations

import gzip
import struct
import xml.etree.ElementTree as ET

import pytest
from browsers.conftest import ASM_FASTA, bigwig_with_genome, write_predictions
from helpers.cli import assert_nothing_left, assert_one_line_error, chromaflow

from chromaflow.bigwig.browser import PALETTE, long_label, short_label
from chromaflow.bigwig.core import BigWigOptions
from chromaflow.bigwig.twobit import TwoBitWriter
from chromaflow.utils.errors import ChromaflowError
from chromaflow.genome.fasta import FastaReader
from chromaflow.variant.cli_browser import COLOUR

py2bit = pytest.importorskip("py2bit", reason="py2bit (requirements-test.txt) is the reference .2bit reader")


def _records(path) -> dict[str, str]:
    return {r.seqid: bytes(r.seq).decode() for r in FastaReader(path)}


def _write_2bit(path, seqs: dict[str, str]):
    """``seqs`` (name -> sequence) written with our TwoBitWriter; the path."""
    with open(path, "wb") as fh:
        w = TwoBitWriter(fh)
        for name, seq in seqs.items():
            w.add(name, seq.encode())
        w.close()
    return path


def _as_read(seq: str) -> str:
    """What a 2bit reader gives back for ``seq``: every non-ACGT code as N, the case kept."""
    return "".join(c if c.upper() in "ACGT" else "N" for c in seq)


@pytest.mark.parametrize("masked", [False, True])
def test_twobit_reads_back_with_py2bit(tmp_path, masked):
    """N runs (every non-ACGT IUPAC code reads back as N), soft-masked runs, lengths not a multiple of 4, one base."""
    seqs = {
        "s1": "ACGTacgtNNNNnnACGTRYKMacgtA",
        "s2": "G",
        "long_name_" + "x" * 100: "acgtn" * 333 + "TTT",
        "s4": "NNNN",
    }
    path = _write_2bit(tmp_path / "t.2bit", seqs)
    tb = py2bit.open(str(path), masked)
    try:
        assert tb.chroms() == {n: len(s) for n, s in seqs.items()}
        for name, seq in seqs.items():
            # lib2bit writes N blocks as 'N' even where masked (the mask blocks are checked in the header below)
            want = _as_read(seq)
            assert tb.sequence(name) == (want if masked else want.upper())
    finally:
        tb.close()
    data = path.read_bytes()
    assert struct.unpack("<IIII", data[:16]) == (0x1A412743, 0, 4, 0)
    # s1's record (first after the index): N blocks at 8 (6 bp) and 18 (4 bp), mask blocks at 4, 12 and 22
    off = struct.unpack_from("<I", data, 16 + 3)[0]
    n, nn = struct.unpack_from("<II", data, off)
    assert (n, nn) == (27, 2) and struct.unpack_from("<4I", data, off + 8) == (8, 18, 6, 4)
    (nm,) = struct.unpack_from("<I", data, off + 24)
    assert nm == 3 and struct.unpack_from("<6I", data, off + 28) == (4, 12, 22, 4, 2, 4)


@pytest.mark.parametrize("step", [4, 8, 1 << 22])
def test_twobit_blocks_across_encoding_steps(tmp_path, monkeypatch, step):
    """Records are encoded STEP bases at a time: N and mask runs that cross a step's end are one block (py2bit's
    hardMaskedBlocks / softMaskedBlocks), the bases the same."""
    import random
    import re

    from chromaflow.bigwig import twobit

    monkeypatch.setattr(twobit, "STEP", step)
    rng = random.Random(step)
    seqs = {f"s{i}": "".join(rng.choice("ACGTacgtNnRy") for _ in range(rng.randint(1, 120))) for i in range(15)}
    path = _write_2bit(tmp_path / "t.2bit", seqs)
    tb = py2bit.open(str(path), True)
    try:
        for name, seq in seqs.items():
            assert tb.sequence(name) == _as_read(seq)
            assert tb.hardMaskedBlocks(name) == [m.span() for m in re.finditer(r"[^ACGTacgt]+", seq)]
            assert tb.softMaskedBlocks(name) == [m.span() for m in re.finditer(r"[a-z]+", seq)]
    finally:
        tb.close()


def test_genome_files_match_the_fasta_and_predictions(asm_predictions, tmp_path):
    out = bigwig_with_genome(asm_predictions, tmp_path / "tracks")
    want = _records(ASM_FASTA)
    assert _records(out / "asmA.fa") == want
    assert (out / "chrom.sizes").read_text() == "".join(f"{k}\t{len(v)}\n" for k, v in want.items())
    # .fai: samtools' columns; every record's first bases found at its offset
    fa = (out / "asmA.fa").read_bytes()
    for line in (out / "asmA.fa.fai").read_text().splitlines():
        name, n, off, bases, width = line.split("\t")
        assert (int(n), int(bases), int(width)) == (len(want[name]), 60, 61)
        assert fa[int(off) : int(off) + 60].decode() == want[name][:60]
    tb = py2bit.open(str(out / "asmA.2bit"), True)
    try:
        assert {c: tb.sequence(c) for c in tb.chroms()} == want
    finally:
        tb.close()
    session = ET.parse(out / "igv_session.xml").getroot()
    assert session.get("genome") == "asmA.fa" and session.get("locus") == "chr1:1-20000"
    names = [t.get("name") for t in session.iter("Track")]
    assert len(names) == len(set(names)) == 6
    hub = (out / "hub.txt").read_text()
    stanzas = [dict(ln.split(" ", 1) for ln in s.strip().splitlines()) for s in hub.split("\n\n")]
    assert stanzas[0]["useOneFile"] == "on" and "genomesFile" not in stanzas[0]
    assert stanzas[1] == {
        "genome": "asmA",
        "twoBitPath": "asmA.2bit",
        "chromSizes": "chrom.sizes",
        "organism": "asmA",
        "defaultPos": "chr1:1-20000",
        "description": "asmA (chromaflow predicted tracks)",
        "scientificName": "asmA",
    }
    assert len(stanzas) == 2 + 6 and not (out / "trackDb.txt").exists() and not (out / "genomes.txt").exists()
    # the same bytes again (deterministic), gzip input gives the same files
    again = tmp_path / "again"
    gz = tmp_path / "asmA.fa.gz"
    gz.write_bytes(gzip.compress(ASM_FASTA.read_bytes(), mtime=0))
    chromaflow(*_args(asm_predictions, again), "--fasta", gz, check=True)
    for name in ("asmA.fa", "asmA.fa.fai", "asmA.2bit", "hub.txt", "igv_session.xml"):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name


def _args(pred, out) -> list:
    return ["bigwig", "--predictions", pred, "--outdir", out, "--basename", "asmA", "--strand", "all"]


@pytest.mark.parametrize(
    "case, needles",
    [
        ("extra", ["record 'chrX' (line", "is not a sequence of"]),
        ("length", ["record 'ctg3' (line", "has 699 bp but", "has 700 bp"]),
        ("missing", ["no record 'ctg3'"]),
    ],
)
def test_fasta_that_disagrees_with_the_predictions_is_one_line(asm_predictions, tmp_path, case, needles):
    """The record named, nothing written (tracks included)."""
    text = ASM_FASTA.read_text()
    body = text[: text.index(">ctg3")]
    bad = {
        "extra": text + ">chrX\nACGT\n",
        "length": text.rstrip("\n")[:-1] + "\n",
        "missing": body,
    }[case]
    fasta = tmp_path / "bad.fa"
    fasta.write_text(bad)
    out = tmp_path / "out"
    proc = chromaflow(*_args(asm_predictions, out), "--fasta", fasta)
    assert_one_line_error(proc, "bigwig", str(fasta), *needles)
    assert_nothing_left(out)


def test_blacklisted_records_are_left_out(asm_predictions, tmp_path):
    bl = tmp_path / "bl.txt"
    bl.write_text("ctg3\n")
    out = tmp_path / "out"
    chromaflow(*_args(asm_predictions, out), "--fasta", ASM_FASTA, "--blacklist", bl, check=True)
    assert list(_records(out / "asmA.fa")) == ["chr1", "chr2"]
    assert [ln.split("\t")[0] for ln in (out / "asmA.fa.fai").read_text().splitlines()] == ["chr1", "chr2"]


def test_fasta_options(tmp_path):
    base = dict(predictions="p.h5", outdir=str(tmp_path), basename="b")
    with pytest.raises(ChromaflowError, match=r"^--fasta .*nope.fa: file does not exist"):
        BigWigOptions(**base, fasta=str(tmp_path / "nope.fa")).validate()
    with pytest.raises(ChromaflowError, match="drop --no-browser-files"):
        BigWigOptions(**base, fasta=str(ASM_FASTA), no_browser_files=True).validate()


def test_without_fasta_the_three_file_hub_stays(tmp_path):
    pred = write_predictions(tmp_path / "p.h5", {"c1": 5000})
    out = tmp_path / "out"
    chromaflow("bigwig", "--predictions", pred, "--outdir", out, "--basename", "b", check=True)
    assert sorted(p.name for p in out.iterdir() if not p.name.endswith(".bw")) == [
        "chrom.sizes",
        "genomes.txt",
        "hub.txt",
        "igv_session.xml",
        "trackDb.txt",
    ]
    assert ET.parse(out / "igv_session.xml").getroot().get("genome") == "chrom.sizes"


@pytest.mark.parametrize(
    "args, want",
    [
        (("atacseq", "minus"), "atacseq minus"),
        (("atacseq_leaf_tissue_rep1", "minus"), "atacseq minus"),
        (("atacseq_leaf_tissue_rep1", "avg"), "atacseq leaf avg"),
        (("H3K4me3-ChIP.seq.rep2", "plus"), "H3K4me3 ChIP plus"),
        (("supercalifragilisticexpialidocious", "avg"), "supercalifra. avg"),
        (("asmA_atacseq", "peaks", "", "end"), "atacseq peaks"),
        (("asmA_atacseq_leaf_tissue", "peaks", "", "end"), "leaf tissue peaks"),
        (("h3k4me3_leaf_tissue", "", "v12 alt"), "v12 alt h3k4me3"),
        (("promoters",), "promoters"),
    ],
)
def test_short_labels_fit_and_keep_whole_words(args, want):
    got = short_label(*args)
    assert got == want and len(got) <= 17


def test_short_labels_of_long_names_never_cut_a_word():
    for ds in ["a_" * 20, "atacseq_" + "x" * 30, "chip seq of leaf", "rna-seq.polyA.rep1.long"]:
        for strand in ("avg", "plus", "minus"):
            label = short_label(ds, strand)
            assert len(label) <= 17 and label.endswith(" " + strand)
            words = label[: -len(strand) - 1].split(" ")
            parts = [w for w in ds.replace("_", " ").replace("-", " ").replace(".", " ").split(" ") if w]
            assert all(w in parts or (w.endswith(".") and parts[0].startswith(w[:-1])) for w in words), label


def test_long_labels_fit():
    assert long_label("x " * 50).endswith("...") and len(long_label("x " * 50)) <= 76
    assert long_label("short") == "short"


def test_variant_colours_are_not_dataset_colours():
    palette = {",".join(map(str, c)) for c in PALETTE}
    assert len(set(COLOUR.values())) == 2 and not set(COLOUR.values()) & palette


def test_peaks_and_variants_go_into_the_single_file_hub(asm_predictions, asm_browser_files, tmp_path):
    """With --fasta, peaks and variant-browser add their stanzas to hub.txt (no trackDb.txt): once each, after the
    hub and genome stanzas; a rerun of peaks replaces its stanza."""
    import shutil

    out = tmp_path / "tracks"
    shutil.copytree(asm_browser_files, out)
    peaks = ["--out", out / "asmA_atacseq.narrowPeak", "--name", "asmA_atacseq", "--cutoff", "20", "--force"]
    chromaflow(
        "peaks", "--predictions", asm_predictions, "--dataset", "atacseq", *peaks, "--browser-dir", out, check=True
    )
    stanzas = [s for s in (out / "hub.txt").read_text().split("\n\n") if s.strip()]
    heads = [s.split("\n", 1)[0].split(" ", 1) for s in stanzas]
    assert heads[0][0] == "hub" and heads[1][0] == "genome" and all(k == "track" for k, _ in heads[2:])
    tracks = [v for _, v in heads[2:]]
    assert len(tracks) == len(set(tracks)) == 10
    assert {"asmA_promoters", "asmA_atacseq_peaks", "asmA_variant_001_h3k4me3_alt"} <= set(tracks)
    peak = next(s for s in stanzas if s.startswith("track asmA_atacseq_peaks\n"))
    assert "\ntype bigBed 6 +\n" in peak + "\n" and "\nshortLabel atacseq peaks\n" in peak
    # named like the bigWig tracks (<id> <dataset> ...), in the hub and in the IGV session
    assert "\nlongLabel asmA atacseq peaks on the predicted track (chromaflow peaks)" in peak
    assert 'name="asmA atacseq peaks"' in (out / "igv_session.xml").read_text()
    assert not (out / "trackDb.txt").exists()


@pytest.mark.parametrize(
    ("name", "dataset", "shown"),
    [
        ("asmA_atacseq", "atacseq", "asmA atacseq"),
        ("my_calls", "atacseq", "my_calls"),
        ("atacseq", "atacseq", "atacseq"),
    ],
)
def test_peaks_are_shown_as_id_and_dataset(name, dataset, shown):
    """The pipeline's peaks name <id>_<dataset> is shown as the bigWig tracks are (<id> <dataset>); another --name as
    given."""
    from chromaflow.peaks.browser import display_name

    assert display_name(name, dataset) == shown
    assert display_name(name, None) == name
