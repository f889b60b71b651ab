"""Motif inputs from other tools (issue 54): RNA alphabets (U read as T) and lower-case letters in MEME and JASPAR
files, and a UTF-8 byte-order mark with CRLF line ends in every text input of ``motif-prior`` (motif file, TF-motif
table, regulators list, accessibility table): the same motifs, the same prior bytes."""

from __future__ import annotations

import pytest
from helpers.annotation_files import write
from helpers.cli import run_in_process
from helpers.motif_files import JASPAR, MEME

from chromaflow.motifs.motifs import load_motifs, read_tf_motifs

BOM = "\ufeff"


def _same(a, b):
    assert [(m.id, m.name, m.counts.tolist()) for m in a] == [(m.id, m.name, m.counts.tolist()) for m in b]


def _variant(text: str, name: str) -> str:
    """The motif text as another tool writes it."""
    if name == "rna":
        return text.replace("ACGT", "ACGU").replace("T 0.25", "U 0.25").replace("\nT [", "\nU [")
    if name == "rna_lower":
        text = text.replace("ALPHABET= ACGT", "ALPHABET= acgu").replace("T 0.25", "U 0.25")
        for b in "ACGT":
            text = text.replace(f"\n{b} [", f"\n{'u' if b == 'T' else b.lower()} [")
        return text
    if name == "dna_lower":
        return text.replace("ALPHABET= ACGT", "ALPHABET= acgt").replace("\nA [", "\na [").replace("\nT [", "\nt [")
    assert name == "bom_crlf"
    return BOM + text.replace("\n", "\r\n")


@pytest.mark.parametrize("variant", ["rna", "rna_lower", "dna_lower", "bom_crlf"])
@pytest.mark.parametrize("fmt", ["jaspar", "meme"])
def test_motif_file_variants_read_as_the_dna_file(tmp_path, fmt, variant):
    """Before: MEME ``ALPHABET= ACGU`` gave "malformed motif file ('T')", lower case "Only parsing of DNA and RNA
    motifs is implemented", JASPAR ``U [`` rows "could not convert string to float: 'U'", a JASPAR file with a
    byte-order mark "not a JASPAR ... or MEME ... motif file"."""
    text = JASPAR if fmt == "jaspar" else MEME
    dna = write(tmp_path / f"dna.{fmt}", text)
    odd = tmp_path / f"odd.{fmt}"
    odd.write_bytes(_variant(text, variant).encode())
    assert odd.read_bytes() != dna.read_bytes()
    _same(load_motifs(str(odd)), load_motifs(str(dna)))


def test_tf_table_with_a_byte_order_mark(tmp_path):
    """Before: the header became a TF named '\\ufeffregulator' whose motif 'motif' is not among the --motifs."""
    motifs = load_motifs(str(write(tmp_path / "m.jaspar", JASPAR)))
    t = tmp_path / "tf.tsv"
    t.write_bytes((BOM + "regulator\tmotif\r\nTF1\tCF1.1\r\nTF2\tbeta\r\n").encode())
    assert read_tf_motifs(str(t), motifs) == {"TF1": [0], "TF2": [1]}


@pytest.mark.parametrize("odd", ["fa", "gff3", "jaspar", "tf", "regs", "acc", "all"])
def test_motif_prior_inputs_with_bom_and_crlf_give_the_same_bytes(tmp_path, odd):
    """A text input of motif-prior (each, then all) with a byte-order mark and CRLF: the prior and its matrix are the
    bytes of the plain inputs' (before: the --regulators list gave a regulator named '\\ufeffTF9', the accessibility
    table was 'not a gene-accessibility table', the FASTA 'first line does not start with '>'')."""
    pytest.importorskip("MOODS")
    import numpy as np

    rng = np.random.default_rng(3)
    seq = "".join(rng.choice(list("ACGT"), 6000))
    genes = "".join(
        f"c\tt\tgene\t{s}\t{s + 300}\t.\t{st}\t.\tID={g}\n"
        for g, s, st in [("TF1", 500, "+"), ("TF2", 2000, "-"), ("G1", 3500, "+"), ("G2", 5000, "-")]
    )
    plain = {
        "fa": ">c\n" + "\n".join(seq[i : i + 60] for i in range(0, len(seq), 60)) + "\n",
        "gff3": "##gff-version 3\n" + genes,
        "jaspar": JASPAR,
        "tf": "regulator\tmotif\nTF1\tCF1.1\nTF2\tCF2.1\n",
        "regs": "TF9\nTF1\n",
        "acc": "gene_id\tpercentile_atac\nTF1\t10\nTF2\t20\nG1\t30\nG2\t90\n",
    }
    outs = {}
    for kind in ("plain", "odd"):
        d = tmp_path / kind
        d.mkdir()
        paths = {}
        for key, text in plain.items():
            paths[key] = d / f"in.{key}"
            bom = kind == "odd" and odd in (key, "all")
            paths[key].write_bytes((BOM + text.replace("\n", "\r\n")).encode() if bom else text.encode())
        out, matrix = d / "prior.tsv", d / "matrix.tsv"
        run_in_process("motif-prior", "--fasta", paths["fa"], "--annotation", paths["gff3"], "--motifs",
                       paths["jaspar"], "--tf-motifs", paths["tf"], "--regulators", paths["regs"], "--accessibility",
                       paths["acc"], "--out", out, "--matrix", matrix, "--p-value", "0.005")  # fmt: skip
        outs[kind] = (out.read_bytes(), matrix.read_bytes())
    assert outs["odd"] == outs["plain"]
    regs = {ln.split("\t")[0] for ln in outs["plain"][0].decode().splitlines()[1:]}
    assert regs == {"TF1", "TF2", "TF9"}
