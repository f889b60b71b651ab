"""The streaming GFF3/GTF reader of ``chromaflow.annotation.gff`` against gffutils run side by side, and its
one-line errors."""

from __future__ import annotations

import pytest
from helpers.annotation_files import gff3_text, gtf_text, random_genes, write

from chromaflow.annotation.gff import read_genes, tss_windows
from chromaflow.utils.errors import ChromaflowError

gffutils = pytest.importorskip("gffutils")

SIZES = {"chrA": 30000, "chrB": 12000}
GENES = random_genes(7, SIZES, 30)


def _gffutils(path, featuretype):
    db = gffutils.create_db(
        str(path),
        ":memory:",
        merge_strategy="error",
        keep_order=True,
        disable_infer_genes=True,
        disable_infer_transcripts=True,
    )
    return sorted((f.id, f.seqid, f.start - 1, f.end, f.strand) for f in db.features_of_type(featuretype))


def _ours(path, feature):
    return sorted((g.gene_id, g.seqid, g.start, g.end, g.strand) for g in read_genes(str(path), feature))


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("feature", ["gene", "mRNA"])
def test_gff3_same_as_gffutils(tmp_path, gz, feature):
    path = write(tmp_path / ("a.gff3" + (".gz" if gz else "")), gff3_text(GENES, shuffle_seed=3), gz=gz)
    ref = _gffutils(path, feature)
    assert len(ref) == len(GENES)
    assert _ours(path, feature) == ref


@pytest.mark.parametrize("feature,gff_type", [("gene", "gene"), ("mRNA", "transcript")])
def test_gtf_same_as_gffutils(tmp_path, feature, gff_type):
    path = write(tmp_path / "a.gtf", gtf_text(GENES))
    db = gffutils.create_db(
        str(path), ":memory:", merge_strategy="merge", disable_infer_genes=True, disable_infer_transcripts=True
    )
    key = "gene_id" if feature == "gene" else "transcript_id"
    ref = sorted((f.attributes[key][0], f.seqid, f.start - 1, f.end, f.strand) for f in db.features_of_type(gff_type))
    assert _ours(path, feature) == ref


def test_gtf_without_gene_lines_spans_the_gene_id(tmp_path):
    """A GTF without gene lines: each gene is the span of its gene_id (gffutils infers the same genes)."""
    path = write(tmp_path / "a.gtf", gtf_text(GENES, gene_lines=False))
    db = gffutils.create_db(str(path), ":memory:", merge_strategy="merge", disable_infer_transcripts=True)
    ref = sorted((f.id, f.seqid, f.start - 1, f.end, f.strand) for f in db.features_of_type("gene"))
    assert _ours(path, "gene") == ref


def test_unsorted_is_the_same(tmp_path):
    a = write(tmp_path / "a.gff3", gff3_text(GENES))
    b = write(tmp_path / "b.gff3", gff3_text(GENES, shuffle_seed=11))
    assert _ours(a, "gene") == _ours(b, "gene")


def test_windows_strand_aware_and_clipped():
    from chromaflow.annotation.gff import Gene

    genes = [
        Gene("p", "c", 5000, 6000, "+", 1),
        Gene("m", "c", 5000, 6000, "-", 2),
        Gene("p0", "c", 100, 900, "+", 3),
        Gene("mEnd", "c", 9000, 9990, "-", 4),
    ]
    got = tss_windows(genes, {"c": 10000}, 1000, 200)
    assert got == [(5000, 4000, 5200), (5999, 5800, 7000), (100, 0, 300), (9989, 9790, 10000)]


@pytest.mark.parametrize(
    "name,text,needles",
    [
        ("gtf_named_gff3.gff3", 'c\tt\tgene\t1\t10\t.\t+\t.\tgene_id "g1";\n', ["line 1", "GTF syntax"]),
        ("gff3_named_gtf.gtf", "c\tt\tgene\t1\t10\t.\t+\t.\tID=g1\n", ["line 1", "GFF3 syntax"]),
        ("no_genes.gff3", "##gff-version 3\nc\tt\texon\t1\t10\t.\t+\t.\tID=e1\n", ["no gene features"]),
        ("no_id.gff3", "c\tt\tgene\t1\t10\t.\t+\t.\tName=g1\n", ["line 1", "without an ID"]),
        ("strand.gff3", "c\tt\tgene\t1\t10\t.\t.\t.\tID=g1\n", ["line 1", "strand '.'"]),
        ("dup.gff3", "c\tt\tgene\t1\t10\t.\t+\t.\tID=g1\nc\tt\tgene\t20\t30\t.\t+\t.\tID=g1\n", ["line 2", "line 1"]),
        ("coords.gff3", "c\tt\tgene\t10\t5\t.\t+\t.\tID=g1\n", ["line 1", "start 10, end 5"]),
        ("cols.gff3", "c\tt\tgene\t10\t5\n", ["line 1", "5 tab-separated columns"]),
    ],
)
def test_bad_annotation(tmp_path, name, text, needles):
    path = write(tmp_path / name, text)
    with pytest.raises(ChromaflowError) as exc:
        read_genes(str(path))
    msg = str(exc.value)
    assert "\n" not in msg and str(path) in msg
    for n in needles:
        assert n in msg
