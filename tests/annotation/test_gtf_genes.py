"""Every gene of an annotation kept (issue 54): a GTF whose genes have gene lines merged with StringTie loci (genes
without one) gives every gene, the loci as the span of their transcripts, in ``read_genes``, ``gene-accessibility``
and ``motif-prior`` alike, with the counts in the metrics; one id rule for GFF3 and GTF; a UTF-8 byte-order mark
and CRLF line ends accepted."""

from __future__ import annotations

import csv
import gzip
import json

import numpy as np
import pytest
from helpers.annotation_files import write
from helpers.cli import assert_nothing_left, assert_one_line_error, run_in_process

from chromaflow.annotation.gff import Gene, read_genes
from chromaflow.utils.errors import ChromaflowError

#: a reference gene with its gene line, then StringTie loci merged in: transcripts and exons, no gene line
MERGED = (
    'chrA\tref\tgene\t2001\t2600\t.\t+\t.\tgene_id "G1"; gene_name "g1";\n'
    'chrA\tref\ttranscript\t2001\t2600\t.\t+\t.\tgene_id "G1"; transcript_id "G1.1";\n'
    'chrA\tref\texon\t2001\t2600\t.\t+\t.\tgene_id "G1"; transcript_id "G1.1";\n'
    'chrA\tStringTie\ttranscript\t5001\t5800\t.\t-\t.\tgene_id "MSTRG.1"; transcript_id "MSTRG.1.1";\n'
    'chrA\tStringTie\texon\t5001\t5200\t.\t-\t.\tgene_id "MSTRG.1"; transcript_id "MSTRG.1.1";\n'
    'chrA\tStringTie\texon\t5601\t5800\t.\t-\t.\tgene_id "MSTRG.1"; transcript_id "MSTRG.1.1";\n'
    'chrA\tStringTie\ttranscript\t4801\t5700\t.\t-\t.\tgene_id "MSTRG.1"; transcript_id "MSTRG.1.2";\n'
    'chrA\tStringTie\texon\t4801\t5700\t.\t-\t.\tgene_id "MSTRG.1"; transcript_id "MSTRG.1.2";\n'
    'chrA\tref\tgene\t7001\t7300\t.\t-\t.\tgene_id "G2";\n'
    'chrA\tStringTie\ttranscript\t8001\t8500\t.\t+\t.\tgene_id "MSTRG.2"; transcript_id "MSTRG.2.1";\n'
)
#: what the merged GTF holds: G1 and G2 from their gene lines, the loci from their transcripts' span (0-based)
EXPECTED = [
    ("G1", "chrA", 2000, 2600, "+", 1),
    ("MSTRG.1", "chrA", 4800, 5800, "-", 4),
    ("G2", "chrA", 7000, 7300, "-", 9),
    ("MSTRG.2", "chrA", 8000, 8500, "+", 10),
]
SIZE = 10000


def _genes(path, feature="gene", counts=None):
    return [(g.gene_id, g.seqid, g.start, g.end, g.strand, g.line) for g in read_genes(str(path), feature, counts)]


def test_genes_without_a_gene_line_are_spanned_from_their_transcripts(tmp_path):
    """Before: MSTRG.1 and MSTRG.2 were dropped without a word (exit 0) as soon as G1's gene line was read."""
    counts: dict = {}
    assert _genes(write(tmp_path / "m.gtf", MERGED), counts=counts) == EXPECTED
    assert counts == {"genes_read": 4, "genes_from_spans": 2, "other_gene_types": {}}


def test_transcripts_without_a_transcript_line_are_spanned_the_same_way(tmp_path):
    text = MERGED + 'chrA\tx\texon\t9001\t9100\t.\t+\t.\tgene_id "MSTRG.3"; transcript_id "MSTRG.3.1";\n'
    got = {g[0]: g[1:5] for g in _genes(write(tmp_path / "m.gtf", text), "mRNA")}
    assert set(got) == {"G1.1", "MSTRG.1.1", "MSTRG.1.2", "MSTRG.2.1", "MSTRG.3.1"}
    assert got["MSTRG.3.1"] == ("chrA", 9000, 9100, "+")  # from its exon alone


def test_the_order_of_the_lines_does_not_matter(tmp_path):
    lines = MERGED.splitlines(keepends=True)
    shuffled = write(tmp_path / "s.gtf", "".join(lines[3:] + lines[:3]))
    assert sorted(g[:5] for g in _genes(shuffled)) == sorted(g[:5] for g in EXPECTED)


@pytest.mark.parametrize(
    "extra,needles",
    [
        (
            'chrB\tStringTie\ttranscript\t100\t200\t.\t-\t.\tgene_id "MSTRG.1"; transcript_id "MSTRG.1.9";\n',
            ["line 11", "gene_id 'MSTRG.1' has no gene line", "on chrB - here but on chrA - at line 4"],
        ),
        (
            'chrA\tStringTie\texon\t5001\t5100\t.\t+\t.\tgene_id "MSTRG.1"; transcript_id "MSTRG.1.1";\n',
            ["line 11", "gene_id 'MSTRG.1' has no gene line", "on chrA + here but on chrA - at line 4"],
        ),
    ],
    ids=["seqid", "strand"],
)
def test_a_spanned_gene_whose_lines_disagree_is_refused_naming_it(tmp_path, extra, needles):
    path = write(tmp_path / "m.gtf", MERGED + extra)
    with pytest.raises(ChromaflowError) as exc:
        read_genes(str(path))
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(f"{path} ")
    for n in needles:
        assert n in msg, msg


def test_a_gene_with_its_own_line_may_have_lines_elsewhere(tmp_path):
    """A gene line decides: G1's stray exon on another strand (a trans-spliced gene, say) is no error."""
    extra = 'chrA\tref\texon\t9001\t9100\t.\t-\t.\tgene_id "G1"; transcript_id "G1.2";\n'
    assert _genes(write(tmp_path / "m.gtf", MERGED + extra)) == EXPECTED


@pytest.mark.parametrize(
    "name,text,needles",
    [
        ("space.gtf", 'c\tt\tgene\t1\t10\t.\t+\t.\tgene_id "A B";\n', ["line 1", "gene_id 'A B' holds a space"]),
        (
            "space_span.gtf",
            'c\tt\tgene\t1\t10\t.\t+\t.\tgene_id "A";\n'
            'c\tt\texon\t20\t30\t.\t+\t.\tgene_id "B C"; transcript_id "t";\n',
            ["line 2", "gene_id 'B C' holds a space"],
        ),
        ("ctrl.gtf", 'c\tt\ttranscript\t1\t10\t.\t+\t.\tgene_id "A"; transcript_id "T\x01";\n', ["U+0001"]),
        ("space.gff3", "c\tt\tgene\t1\t10\t.\t+\t.\tID=A%20B\n", ["line 1", "ID 'A B' holds a space"]),
        ("tab.gff3", "c\tt\tgene\t1\t10\t.\t+\t.\tID=A%09B\n", ["line 1", "ID 'A\\tB' holds a tab"]),
        ("ctrl.gff3", "c\tt\tgene\t1\t10\t.\t+\t.\tID=A%01B\n", ["line 1", "control character U+0001"]),
    ],
)
def test_one_id_rule_for_gff3_and_gtf(tmp_path, name, text, needles):
    """Whitespace and control characters are refused in GFF3 (after percent-decoding) and GTF ids alike, naming the
    line (before: a GTF ``gene_id "A B"`` went into the BED and bigBed names with its space)."""
    path = write(tmp_path / name, text)
    feature = "mRNA" if "transcript" in text and "gene\t" not in text else "gene"
    with pytest.raises(ChromaflowError) as exc:
        read_genes(str(path), feature)
    msg = str(exc.value)
    assert "\n" not in msg and str(path) in msg and "may not hold whitespace or control characters" in msg
    for n in needles:
        assert n in msg, msg


def test_percent_encoded_gff3_ids_without_whitespace_are_decoded(tmp_path):
    path = write(tmp_path / "a.gff3", "c\tt\tgene\t1\t10\t.\t+\t.\tID=A%3BB\n")
    assert [g.gene_id for g in read_genes(str(path))] == ["A;B"]


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("name", ["a.gtf", "a.gff3"])
def test_bom_and_crlf_are_accepted(tmp_path, name, gz):
    """Before: a byte-order mark gave 'line 1: 1 tab-separated columns, expected 9'."""
    text = MERGED if name.endswith("gtf") else "##gff-version 3\nchrA\tt\tgene\t2001\t2600\t.\t+\t.\tID=G1\n"
    plain = write(tmp_path / f"plain_{name}", text)
    data = b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode()
    odd = tmp_path / (name + (".gz" if gz else ""))
    odd.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    assert _genes(odd) == _genes(plain)


# ------------------------------------------------------------------------------------- the commands
def _bigwig(path, sizes):
    import pyBigWig

    bw = pyBigWig.open(str(path), "w")
    bw.addHeader(list(sizes.items()))
    for seqid, size in sizes.items():
        v = (np.arange(size) % 97).astype(np.float64)
        bw.addEntries(seqid, 0, values=v.tolist(), span=1, step=1)
    bw.close()
    return path


def _table(path):
    with open(path) as fh:
        return {r["gene_id"]: r for r in csv.DictReader(fh, delimiter="\t")}


def test_gene_accessibility_keeps_every_gene_and_counts_them(tmp_path):
    gtf = write(tmp_path / "m.gtf", MERGED)
    bw = _bigwig(tmp_path / "atac.bw", {"chrA": SIZE})
    out, bed, metrics = tmp_path / "g.tsv", tmp_path / "g.bed", tmp_path / "m.json"
    run_in_process(
        "gene-accessibility", "--annotation", gtf, "--bigwig", bw, "--out", out, "--bed", bed, "--metrics", metrics
    )
    rows = _table(out)
    assert sorted(rows) == ["G1", "G2", "MSTRG.1", "MSTRG.2"]
    # MSTRG.1: - strand, TSS at its last base (5800, 1-based): 1000 bp upstream lie after it, 200 bp from it on
    assert (rows["MSTRG.1"]["tss"], rows["MSTRG.1"]["window_start"], rows["MSTRG.1"]["window_end"]) == (
        "5799",
        "5600",
        "6800",
    )
    assert len(bed.read_text().splitlines()) == 4
    m = json.loads(metrics.read_text())
    assert (m["genes_read"], m["genes_kept"], m["genes_from_spans"], m["genes_not_kept"]) == (4, 4, 2, {})
    assert m["genes"] == 4 and m["other_gene_types"] == {}


def test_gene_accessibility_refuses_a_gtf_id_with_a_space(tmp_path):
    gtf = write(tmp_path / "s.gtf", MERGED.replace('"MSTRG.2"', '"MSTRG 2"'))
    bw = _bigwig(tmp_path / "atac.bw", {"chrA": SIZE})
    res = run_in_process("gene-accessibility", "--annotation", gtf, "--bigwig", bw, "--out", tmp_path / "g.tsv",
                         "--bed", tmp_path / "g.bed", check=False)  # fmt: skip
    assert_one_line_error(res, "gene-accessibility", f"{gtf} line 10", "gene_id 'MSTRG 2' holds a space")
    assert_nothing_left(tmp_path, {"s.gtf", "atac.bw"})


def test_gff3_gene_types_not_read_are_counted(tmp_path):
    text = (
        "##gff-version 3\nchrA\tt\tgene\t2001\t2600\t.\t+\t.\tID=G1\n"
        "chrA\tt\tncRNA_gene\t3001\t3100\t.\t+\t.\tID=N1\nchrA\tt\tpseudogene\t4001\t4100\t.\t-\t.\tID=P1\n"
    )
    gff = write(tmp_path / "e.gff3", text)
    bw = _bigwig(tmp_path / "atac.bw", {"chrA": SIZE})
    run_in_process("gene-accessibility", "--annotation", gff, "--bigwig", bw, "--out", tmp_path / "g.tsv",
                   "--metrics", tmp_path / "m.json")  # fmt: skip
    m = json.loads((tmp_path / "m.json").read_text())
    assert (m["genes_read"], m["genes_kept"], m["other_gene_types"]) == (1, 1, {"ncRNA_gene": 1, "pseudogene": 1})


def test_motif_prior_keeps_the_spanned_genes_as_targets(tmp_path):
    pytest.importorskip("MOODS")
    rng = np.random.default_rng(5)
    seq = "".join(rng.choice(list("ACGT"), SIZE))
    fa = write(tmp_path / "g.fa", ">chrA\n" + "\n".join(seq[i : i + 80] for i in range(0, SIZE, 80)) + "\n")
    motifs = write(tmp_path / "m.jaspar", ">M1 one\nA [ 9 0 0 1 ]\nC [ 0 9 0 1 ]\nG [ 0 0 9 1 ]\nT [ 1 1 1 7 ]\n")
    tf = write(tmp_path / "tf.tsv", "G1\tM1\n")
    out, metrics = tmp_path / "p.tsv", tmp_path / "m.json"
    run_in_process("motif-prior", "--fasta", fa, "--annotation", write(tmp_path / "m.gtf", MERGED), "--motifs",
                   motifs, "--tf-motifs", tf, "--out", out, "--metrics", metrics, "--p-value", "0.01")  # fmt: skip
    targets = [ln.split("\t")[1] for ln in out.read_text().splitlines()[1:]]
    assert targets == ["G2", "MSTRG.1", "MSTRG.2"]  # before: G2 alone
    m = json.loads(metrics.read_text())
    assert (m["genes_read"], m["genes_kept"], m["genes_from_spans"], m["genes_not_kept"]) == (4, 4, 2, {})


def test_gene_dataclass_tss_of_a_spanned_minus_gene():
    g = Gene(*EXPECTED[1])
    assert g.tss == 5799
