"""``chromaflow gene-accessibility`` on Predmoter's predictions against the tracks of Predmoter's own converter
(bigWig files made by convert2coverage.py, ../shared/reference/predmoter/converted/), and its bad input."""

from __future__ import annotations

import csv
import functools

import numpy as np
import pytest
from helpers.annotation_files import gff3_text, random_genes, write
from helpers.cli import assert_nothing_left, assert_one_line_error, chromaflow, run_in_process

pytestmark = pytest.mark.reference

SIZES = {"Chrom1": 51321, "Chrom2": 102642}  # pred_data.fa
GENES = random_genes(29, SIZES, 40)
cli = functools.partial(chromaflow, "gene-accessibility")


@pytest.fixture(scope="module")
def ref(reference_dir):
    d = reference_dir / "predmoter"
    if not (d / "pred_data_1_predictions.h5").exists():
        from helpers.environment import unavailable

        unavailable(f"{d}: Predmoter reference files missing")
    return d


@pytest.fixture(scope="module")
def tables(ref, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ga")
    gff = write(tmp / "genes.gff3", gff3_text(GENES))
    out = {}
    run_in_process(
        "gene-accessibility",
        "--annotation",
        gff,
        "--predictions",
        ref / "pred_data_1_predictions.h5",
        "--out",
        tmp / "pred.tsv",
    )
    out["pred"] = tmp / "pred.tsv"
    conv = ref / "converted"
    for strand in ("avg", "+", "-"):
        run_in_process(
            "gene-accessibility",
            "--annotation",
            gff,
            "--bigwig",
            *(conv / f"pred_data_1_{ds}_{strand}_strand.bw" for ds in ("atacseq", "h3k4me3")),
            "--out",
            tmp / f"bw{strand}.tsv",
        )
        out[strand] = tmp / f"bw{strand}.tsv"
    out["gff"] = gff
    return out


def _rows(path):
    with open(path) as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def test_columns_and_windows(tables):
    rows = _rows(tables["pred"])
    assert list(rows[0])[:6] == ["gene_id", "seqid", "strand", "tss", "window_start", "window_end"]
    assert [k for k in rows[0] if "atacseq" in k] == [
        "mean_atacseq",
        "max_atacseq",
        "percentile_atacseq",
        "mean_atacseq_same_strand",
        "max_atacseq_same_strand",
        "percentile_atacseq_same_strand",
    ]
    assert len(rows) == len(GENES)
    by_id = {g[0]: g for g in GENES}
    for r in rows:
        gid, seqid, s, e, st = by_id[r["gene_id"]]
        tss = s - 1 if st == "+" else e - 1
        lo, hi = (tss - 1000, tss + 200) if st == "+" else (tss - 199, tss + 1001)
        assert (int(r["tss"]), int(r["window_start"]), int(r["window_end"])) == (tss, max(0, lo), min(SIZES[seqid], hi))
    clipped = [r for r in rows if int(r["window_start"]) == 0 or int(r["window_end"]) in SIZES.values()]
    assert clipped, "the factory puts genes at record ends"


@pytest.mark.parametrize("ds", ["atacseq", "h3k4me3"])
def test_strand_average_equals_predmoter_avg_track(tables, ds):
    pred, bw = _rows(tables["pred"]), _rows(tables["avg"])
    col = f"pred_data_1_{ds}_avg_strand"
    assert [r["gene_id"] for r in pred] == [r["gene_id"] for r in bw]
    np.testing.assert_allclose([float(r[f"mean_{ds}"]) for r in pred], [float(r[f"mean_{col}"]) for r in bw], atol=1e-4)
    assert [r[f"max_{ds}"] for r in pred] == [r[f"max_{col}"] for r in bw]
    assert [r[f"percentile_{ds}"] for r in pred] == [r[f"percentile_{col}"] for r in bw]


@pytest.mark.parametrize("ds", ["atacseq", "h3k4me3"])
def test_same_strand_equals_predmoter_strand_tracks(tables, ds):
    pred, plus, minus = _rows(tables["pred"]), _rows(tables["+"]), _rows(tables["-"])
    for r, p, m in zip(pred, plus, minus):
        src, strand = (p, "+") if r["strand"] == "+" else (m, "-")
        col = f"pred_data_1_{ds}_{strand}_strand"
        assert abs(float(r[f"mean_{ds}_same_strand"]) - float(src[f"mean_{col}"])) < 1e-4, r["gene_id"]
        assert r[f"max_{ds}_same_strand"] == src[f"max_{col}"], r["gene_id"]


def test_percentile_rule():
    from chromaflow.annotation.accessibility import percentile

    assert percentile(np.array([3.0, 1.0, 2.0, 2.0, 5.0])).tolist() == [75.0, 0.0, 25.0, 25.0, 100.0]
    assert percentile(np.array([4.0])).tolist() == [100.0]


def test_unsorted_gzipped_same_bytes(tables, ref, tmp_path):
    gz = write(tmp_path / "shuffled.gff3.gz", gff3_text(GENES, shuffle_seed=5), gz=True)
    run_in_process(
        "gene-accessibility",
        "--annotation",
        gz,
        "--predictions",
        ref / "pred_data_1_predictions.h5",
        "--out",
        tmp_path / "o.tsv",
    )
    assert (tmp_path / "o.tsv").read_bytes() == tables["pred"].read_bytes()


def _bad(tmp_path, ref, gff_text, name="g.gff3"):
    d = tmp_path / "in"
    d.mkdir()
    gff = write(d / name, gff_text)
    out = tmp_path / "out"
    out.mkdir()
    proc = cli("--annotation", gff, "--predictions", ref / "pred_data_1_predictions.h5", "--out", out / "o.tsv")
    assert_nothing_left(out)
    return proc, gff


def test_seqid_absent(tmp_path, ref):
    proc, gff = _bad(tmp_path, ref, gff3_text([("g1", "Chrom1", 10, 500, "+"), ("g2", "chrX", 10, 500, "+")]))
    assert_one_line_error(proc, "gene-accessibility", str(gff), "line 5", "'chrX'", "not in")


def test_gene_past_record_end(tmp_path, ref):
    proc, gff = _bad(tmp_path, ref, gff3_text([("g1", "Chrom1", 51000, 51400, "-")]))
    assert_one_line_error(proc, "gene-accessibility", str(gff), "line 2", "past the end of Chrom1", "51321")


def test_no_genes(tmp_path, ref):
    proc, gff = _bad(tmp_path, ref, "##gff-version 3\nChrom1\tt\texon\t1\t10\t.\t+\t.\tID=e\n")
    assert_one_line_error(proc, "gene-accessibility", str(gff), "no gene features")


def test_gtf_given_as_gff3(tmp_path, ref):
    proc, gff = _bad(tmp_path, ref, 'Chrom1\tt\tgene\t1\t10\t.\t+\t.\tgene_id "g1";\n')
    assert_one_line_error(proc, "gene-accessibility", str(gff), "GTF syntax")


def test_bad_window(tmp_path, ref, tables):
    proc = cli(
        "--annotation",
        tables["gff"],
        "--predictions",
        ref / "pred_data_1_predictions.h5",
        "--out",
        tmp_path / "o.tsv",
        "--downstream",
        "0",
    )
    assert_one_line_error(proc, "gene-accessibility", "--downstream")
    assert_nothing_left(tmp_path)


def test_promoter_bed(tables, ref, tmp_path):
    run_in_process(
        "gene-accessibility",
        "--annotation",
        tables["gff"],
        "--predictions",
        ref / "pred_data_1_predictions.h5",
        "--out",
        tmp_path / "o.tsv",
        "--bed",
        tmp_path / "p.bed",
    )
    bed = [ln.split("\t") for ln in (tmp_path / "p.bed").read_text().splitlines()]
    rows = _rows(tables["pred"])
    assert [(b[0], int(b[1]), int(b[2]), b[3], b[5]) for b in bed] == [
        (r["seqid"], int(r["window_start"]), int(r["window_end"]), r["gene_id"], r["strand"]) for r in rows
    ]
    # the score is 10 x the unrounded percentile (the table prints 2 decimals): within 1 of the printed one x 10
    assert all(abs(int(b[4]) - 10 * float(r["percentile_atacseq"])) <= 0.55 for b, r in zip(bed, rows))


def test_promoter_bigbed_holds_the_bed(tables, ref, tmp_path):
    """--bigbed (the UCSC hub's promoter track): read back with pyBigWig (another library than the writer,
    pybigtools), its entries are the BED's rows; a bigBed 6 (autoSql bed6, as the hub stanza's type says)."""
    import pyBigWig

    run_in_process(
        "gene-accessibility",
        "--annotation",
        tables["gff"],
        "--predictions",
        ref / "pred_data_1_predictions.h5",
        "--out",
        tmp_path / "o.tsv",
        "--bed",
        tmp_path / "p.bed",
        "--bigbed",
        tmp_path / "p.bb",
    )
    bed = sorted(tuple(ln.split("\t")) for ln in (tmp_path / "p.bed").read_text().splitlines())
    bb = pyBigWig.open(str(tmp_path / "p.bb"))
    assert bb.isBigBed() and bb.chroms() == SIZES
    got = sorted(
        (c, str(s), str(e), *rest.split("\t")) for c, n in SIZES.items() for s, e, rest in (bb.entries(c, 0, n) or [])
    )
    assert got == bed and len(got) == len(GENES)
    sql = bb.SQL().decode()
    assert "table bed6" in sql and all(f in sql for f in ("string name;", "uint   score;", "char[1] strand;"))
    # alone (no --bed) it is the same file
    run_in_process(
        "gene-accessibility",
        "--annotation",
        tables["gff"],
        "--predictions",
        ref / "pred_data_1_predictions.h5",
        "--out",
        tmp_path / "o2.tsv",
        "--bigbed",
        tmp_path / "q.bb",
    )
    assert (tmp_path / "q.bb").read_bytes() == (tmp_path / "p.bb").read_bytes()


def test_not_a_bigwig(tables, tmp_path):
    bad = tmp_path / "in" / "x.bw"
    bad.parent.mkdir()
    bad.write_text("not a bigwig\n")
    out = tmp_path / "out"
    out.mkdir()
    proc = cli("--annotation", tables["gff"], "--bigwig", bad, "--out", out / "o.tsv")
    assert_one_line_error(proc, "gene-accessibility", str(bad), "not a bigWig")
    assert_nothing_left(out)
