"""``review-page``: the loci chosen from the pipeline's tables (variants ranked as variant-effect --tracks ranks them,
peaks by signal per file, the most and least accessible promoters), the tracks cut to the loci and embedded by
igv-reports with the bigWigs' values, no page without a locus, and bad input as one line with nothing written."""

from __future__ import annotations

import base64
import gzip
import json
import re
import time
from pathlib import Path

import pyBigWig
import pysam
import pytest

from chromaflow.review import loci as L
from chromaflow.review.slices import variant_intervals
from helpers.cli import assert_nothing_left, assert_one_line_error, run_in_process
from helpers.variant_files import SEQ, write_inputs

#: a gene-accessibility table (the command's header) of 5 genes on c1/c2; g4 has no value (NA)
GENES = (
    "gene_id\tseqid\tstrand\ttss\twindow_start\twindow_end\tmean_atacseq\tmax_atacseq\tpercentile_atacseq\t"
    "mean_atacseq_same_strand\tmean_h3k4me3\n"
    "g1\tc1\t+\t100\t50\t120\t2.5\t3\t75\t2\t0.1\n"
    "g2\tc1\t-\t300\t280\t350\t0.5\t1\t0\t1\t0.9\n"
    "g3\tc2\t+\t40\t0\t60\t2.5\t3\t75\t2\t0.5\n"
    "g4\tc2\t+\t200\t150\t220\tNA\tNA\tNA\tNA\t0.3\n"
    "g5\tc1\t+\t500\t450\t520\t1.0\t2\t50\t1\t0.2\n"
)
#: narrowPeak calls: p2 and p3 tie on signal (file order), p4's 6.0 is the strongest
PEAKS = (
    "c1\t10\t60\tp1\t30\t.\t3.0\t-1\t-1\t20\n"
    "c1\t100\t160\tp2\t20\t.\t5.0\t-1\t-1\t30\n"
    "c2\t10\t90\tp3\t20\t.\t5.0\t-1\t-1\t40\n"
    "c1\t400\t420\tp4\t60\t.\t6.0\t-1\t-1\t5\n"
)


@pytest.fixture(scope="module")
def asm(tmp_path_factory) -> dict:
    """A small assembly as the pipeline publishes it: indexed FASTA, a predicted bigWig, peaks, a gene table and a
    variant-effect table with its --tracks 2 ref/alt bigWigs (a real variant-effect run on 4 variants)."""
    d = tmp_path_factory.mktemp("review")
    recs = [("c1", 40), ("c1", 300), ("c2", 100), ("c1", 500)]
    body = "".join(
        f"{c}\t{p}\tv{i}\t{SEQ[c][p - 1]}\t{'A' if SEQ[c][p - 1] != 'A' else 'C'}\t.\t.\t.\n"
        for i, (c, p) in enumerate(recs, 1)
    )
    fa, model, vcf = write_inputs(d, body)
    pysam.faidx(str(fa))
    tracks = d / "variant_tracks"
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
        d / "e.tsv.gz",
        "--tracks",
        2,
        "--tracks-dir",
        tracks,
    )
    bw = d / "asm_atacseq_avg_strand.bw"
    with pyBigWig.open(str(bw), "w") as w:
        w.addHeader([(k, len(v)) for k, v in SEQ.items()], maxZooms=0)
        for chrom, seq in SEQ.items():  # value = position % 7, one base a value
            w.addEntries(
                [chrom] * len(seq),
                list(range(len(seq))),
                ends=list(range(1, len(seq) + 1)),
                values=[float(i % 7) for i in range(len(seq))],
            )
    (d / "asm_atacseq.narrowPeak").write_text(PEAKS)
    (d / "asm.gene_accessibility.tsv").write_text(GENES)
    return {
        "d": d,
        "fa": fa,
        "effects": d / "e.tsv.gz",
        "vtracks": sorted(tracks.glob("*.bw")),
        "bw": bw,
        "peaks": d / "asm_atacseq.narrowPeak",
        "genes": d / "asm.gene_accessibility.tsv",
        "sizes": {k: len(v) for k, v in SEQ.items()},
    }


def test_variants_ranked_as_variant_effect_tracks_ranks_them(asm):
    """The two strongest of the page are variant-effect's own --tracks 2 (ranks 001, 002), in that order."""
    loci = L.top_variants(asm["effects"], 4, asm["sizes"])
    names = [p.name for p in asm["vtracks"] if p.name.endswith(".atacseq.ref.bw")]
    ranked = [(m.group(2), int(m.group(3))) for m in (re.fullmatch(r"(\d+)_(.+)_(\d+)_\d+\..*", n) for n in names)]
    assert [(x.chrom, x.start + 1) for x in loci[:2]] == ranked
    assert [x.rank for x in loci] == [1, 2, 3, 4]
    assert all(a.score >= b.score for a, b in zip(loci, loci[1:]))
    assert L.top_variants(asm["effects"], 1, asm["sizes"]) == loci[:1]


def test_variant_rows_without_a_value_are_never_chosen(tmp_path):
    table = tmp_path / "e.tsv"
    table.write_text(
        "CHROM\tPOS\tID\tREF\tALT\tdelta_mean_a_avg\tdelta_mean_b_avg\n"
        "c1\t5\tx\tA\tC\tNA\tnan\nc1\t9\ty\tA\tC\t-0.5\t0.1\nc2\t3\tz\tG\tT\t0.2\t0.5\n"
    )
    loci = L.top_variants(table, 5, {"c1": 100, "c2": 100})
    assert [(x.name, x.score) for x in loci] == [("y", 0.5), ("z", 0.5)]  # tie: table order
    assert loci[0].detail == "A>C, |delta mean| 0.5 (a)"


def test_peaks_by_signal_per_file_ties_in_file_order(asm):
    loci = L.top_peaks([str(asm["peaks"])], 3, asm["sizes"])
    assert [x.name for x in loci] == ["p4", "p2", "p3"]
    assert (loci[0].chrom, loci[0].start, loci[0].end, loci[0].score) == ("c1", 400, 420, 6.0)


def test_promoters_most_and_least_accessible_never_both(asm):
    loci = L.promoter_extremes(asm["genes"], 3, asm["sizes"])
    high = [x.name for x in loci if x.section == "promoter high"]
    low = [x.name for x in loci if x.section == "promoter low"]
    assert high == ["g1", "g3", "g5"]  # g1/g3 tie at 2.5: table order; g4 (NA) never
    assert low == ["g2"]
    assert (loci[0].chrom, loci[0].start, loci[0].end) == ("c1", 50, 120)
    other = L.promoter_extremes(asm["genes"], 1, asm["sizes"], dataset="h3k4me3")
    assert [(x.section, x.name) for x in other] == [("promoter high", "g2"), ("promoter low", "g1")]


def test_views_flank_clipped_to_the_sequence():
    loci = [L.Locus("peak", 1, "a", "c1", 10, 20, 1.0, ""), L.Locus("peak", 2, "b", "c1", 90, 95, 1.0, "")]
    views = L.with_views(loci, 30, {"c1": 100})
    assert [(x.view_start, x.view_end) for x in views] == [(0, 50), (60, 100)]
    assert L.merged_windows(L.with_views(loci, 40, {"c1": 100})) == {"c1": [(0, 100)]}


def _sessions(page: Path) -> dict:
    """The page's igv.js sessions (igv-reports' session dictionary), each decoded: {row id: session JSON}."""
    m = re.search(r"const sessionDictionary = (\{.*?\})\n", page.read_text())
    assert m, "no session dictionary in the page"
    return {k: json.loads(_data(v)) for k, v in json.loads(m.group(1)).items()}


def _data(uri: str) -> str:
    head, b64 = uri.split(",", 1)
    raw = base64.b64decode(b64)
    return (gzip.decompress(raw) if "gzip" in head else raw).decode()


def _page_args(asm, out: Path, *extra) -> list:
    return [
        "review-page",
        "--fasta",
        asm["fa"],
        "--name",
        "asm",
        "--out",
        out,
        "--tracks",
        asm["bw"],
        "--peaks",
        asm["peaks"],
        "--effects",
        asm["effects"],
        "--variant-tracks",
        *asm["vtracks"],
        "--genes",
        asm["genes"],
        "--flank",
        20,
        *extra,
    ]


def test_page_embeds_the_loci_and_the_bigwig_values(asm, tmp_path):
    out = tmp_path / "asm.review.html"
    run_in_process(*_page_args(asm, out, "--top-variants", 2, "--top-peaks", 2, "--top-genes", 1))
    text = out.read_text()
    assert "<title>chromaflow review: asm</title>" in text
    assert 'class="lbl-toggle">Loci<' in text and "Variants<" not in text
    assert '<script src="https://cdn.jsdelivr.net/npm/igv@' in text  # no --igvjs: igv.js loaded when opened
    table = json.loads(re.search(r"const tableJson = (\{.*?\})\n", text).group(1))
    assert [r[1] for r in table["rows"]] == ["variant"] * 2 + ["peak"] * 2 + ["promoter high", "promoter low"]
    sessions = _sessions(out)
    assert len(sessions) == 6
    peak = sessions["2"]  # p4: c1:400-420, shown 380-440
    assert peak["locus"] == "c1:381-440"
    tracks = {t["name"]: t for t in peak["tracks"]}
    assert set(tracks) == {
        "asm atacseq avg",
        "asm variant atacseq ref",
        "asm variant atacseq alt",
        "asm variant h3k4me3 ref",
        "asm variant h3k4me3 alt",
        "asm atacseq peaks",
    }
    rows = [ln.split("\t") for ln in _data(tracks["asm atacseq avg"]["url"]).splitlines()]
    assert rows and all(float(v) == int(s) % 7 for _c, s, _e, v in rows)  # the bigWig's values, position % 7
    assert {int(s) for _c, s, _e, _v in rows} >= set(range(380, 440))
    assert "p4" in _data(tracks["asm atacseq peaks"]["url"])


def test_variant_tracks_are_the_variants_bigwigs(asm, tmp_path):
    out = tmp_path / "asm.review.html"
    run_in_process(*_page_args(asm, out, "--top-variants", 1, "--top-peaks", 0, "--top-genes", 0))
    (session,) = _sessions(out).values()
    tracks = {t["name"]: t for t in session["tracks"]}
    ref = next(p for p in asm["vtracks"] if p.name.startswith("001_") and p.name.endswith(".atacseq.ref.bw"))
    rows = [ln.split("\t") for ln in _data(tracks["asm variant atacseq ref"]["url"]).splitlines()]
    with pyBigWig.open(str(ref)) as bw:
        for chrom, s, e, v in rows:
            assert bw.values(chrom, int(s), int(e)) == pytest.approx([float(v)] * (int(e) - int(s)), rel=1e-5)
    assert len(rows) > 0


def test_no_locus_no_page(asm, tmp_path):
    out = tmp_path / "asm.review.html"
    proc = run_in_process("review-page", "--fasta", asm["fa"], "--name", "asm", "--out", out, "--tracks", asm["bw"])
    assert proc.returncode == 0 and "no page written" in proc.stderr
    assert_nothing_left(tmp_path)


@pytest.mark.parametrize(
    ("what", "text", "needles"),
    [
        (
            "effects",
            "CHROM\tPOS\tREF\tALT\tdelta_mean_a_avg\nc1\t5\tA\tC\t0.1\nc1\tfive\tA\tC\t0.2\n",
            ["line 3", "POS 'five' is not a number"],
        ),
        ("effects", "CHROM\tPOS\tREF\tALT\tscore\nc1\t5\tA\tC\t0.1\n", ["no delta_mean_<dataset>_avg column"]),
        (
            "effects",
            "CHROM\tPOS\tREF\tALT\tdelta_mean_a_avg\nchrX\t5\tA\tC\t0.1\n",
            ["line 2", "sequence 'chrX' is not in the FASTA"],
        ),
        ("peaks", "c1\t10\t60\tp1\t30\t.\t3.0\n", ["line 1", "7 fields, a narrowPeak line has 10"]),
        (
            "peaks",
            "c1\t10\t9999\tp1\t30\t.\t3.0\t-1\t-1\t5\nc1\t9000\t9100\tp2\t30\t.\t3.0\t-1\t-1\t5\n",
            ["line 2", "c1:9000-9100 is outside c1"],
        ),
        (
            "genes",
            "gene_id\tseqid\twindow_start\twindow_end\tmean_a\ng1\tc1\t1\t9\n",
            ["line 2", "4 fields, the header has 5"],
        ),
        ("genes", "gene_id\tseqid\tstart\n", ["no window_start, window_end column"]),
    ],
)
def test_bad_table_one_line_naming_file_and_line(asm, tmp_path, what, text, needles):
    bad = tmp_path / f"bad.{what}"
    bad.write_text(text)
    opt = {"effects": "--effects", "peaks": "--peaks", "genes": "--genes"}[what]
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    proc = run_in_process(
        "review-page", "--fasta", asm["fa"], "--name", "asm", "--out", out_dir / "p.html", opt, bad, check=False
    )
    assert_one_line_error(proc, "review-page", str(bad), *needles)
    assert_nothing_left(out_dir)


@pytest.mark.parametrize("case", ["no_fai", "not_bigwig", "bad_track_name", "no_dataset", "negative"])
def test_bad_input_one_line_nothing_written(asm, tmp_path, case):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    args = ["review-page", "--fasta", asm["fa"], "--name", "asm", "--out", out_dir / "p.html", "--peaks", asm["peaks"]]
    needles: list[str] = []
    if case == "no_fai":
        fa = tmp_path / "g.fa"
        fa.write_text(asm["fa"].read_text())
        args[2], needles = fa, [f"no index {fa}.fai"]
    elif case == "not_bigwig":
        fake = tmp_path / "x.bw"
        fake.write_text("not a bigwig\n")
        args += ["--tracks", fake]
        needles = [f"{fake}: not a bigWig file"]
    elif case == "bad_track_name":
        args += ["--effects", asm["effects"], "--variant-tracks", asm["bw"]]
        needles = [f"{asm['bw']}: not a variant-effect --tracks bigWig name"]
    elif case == "no_dataset":
        args += ["--genes", asm["genes"], "--gene-dataset", "dnase"]
        needles = ["--gene-dataset 'dnase': not a dataset of", "atacseq, h3k4me3"]
    else:
        args += ["--flank", -1]
        needles = ["--flank -1: must be 0 or more"]
    proc = run_in_process(*args, check=False)
    assert_one_line_error(proc, "review-page", *needles)
    assert_nothing_left(out_dir)


def test_overlapping_variant_windows_show_the_stronger_variants_values(tmp_path):
    """Two variants 10 bp apart, windows overlapping: one track per dataset and allele, the stronger (rank 1)
    variant's values over its whole window, the other's only beyond it; a variant without tracks adds none."""
    paths = []
    for rank, pos, value in ((1, 50, 1.0), (2, 60, 2.0)):
        path = tmp_path / f"00{rank}_c1_{pos}_{rank}.atacseq.ref.bw"
        with pyBigWig.open(str(path), "w") as w:
            w.addHeader([("c1", 200)], maxZooms=0)
            w.addEntries(["c1"], [0], ends=[200], values=[value])
        paths.append(str(path))
    loci = [
        L.Locus("variant", 1, "a", "c1", 49, 50, 1.0, "", 30, 80),
        L.Locus("variant", 2, "b", "c1", 59, 60, 0.5, "", 40, 100),
        L.Locus("variant", 3, "c", "c1", 150, 151, 0.1, "", 130, 170),
    ]
    out = variant_intervals(paths, loci)
    assert out == {("atacseq", "ref"): [("c1", 30, 80, 1.0), ("c1", 80, 100, 2.0)]}


def test_same_inputs_same_page_bytes(asm, tmp_path):
    """igv-reports' gzipped data URIs carry no time stamp here (mtime 0): a rerun writes the same file."""
    pages = []
    for i in (1, 2):
        out = tmp_path / f"p{i}.html"
        run_in_process(*_page_args(asm, out, "--top-variants", 1, "--top-peaks", 1, "--top-genes", 1))
        pages.append(out.read_bytes())
        time.sleep(1.1)  # gzip's time stamp has a resolution of one second
    assert pages[0] == pages[1]


@pytest.mark.parametrize(
    ("stem", "kind", "label"),
    [
        ("asmA_atacseq_avg_strand", "", "asmA atacseq avg"),
        ("asmA_leaf_atac_+_strand", "", "asmA leaf_atac plus"),
        ("asmA_atacseq_-_strand", "", "asmA atacseq minus"),
        ("asmA_atacseq_x_strand", "", "asmA_atacseq_x_strand"),  # not a strand bigwig writes
        ("other_atacseq_avg_strand", "", "other_atacseq_avg_strand"),  # another assembly's name
        ("asmA_atacseq", "peaks", "asmA atacseq peaks"),
        ("my_calls", "peaks", "my_calls peaks"),
    ],
)
def test_tracks_are_named_as_the_igv_session_names_them(stem, kind, label):
    """The page's track names are those of chromaflow bigwig's session and hub (``<id> <dataset> <strand>``, peaks
    ``<id> <dataset> peaks``); a file named otherwise keeps its stem."""
    from chromaflow.review.core import track_label

    assert track_label(stem, "asmA", kind) == label
