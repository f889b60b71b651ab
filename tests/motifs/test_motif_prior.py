"""``chromaflow motif-prior`` end to end on Predmoter's test assembly and predictions: the prior against a
brute-force scan (Biopython's FASTA reader, numpy scores of MOODS's log-odds matrices), the accessibility weights
against Predmoter's own avg-strand bigWig (convert2coverage.py), and bad input."""

from __future__ import annotations

import csv
import gzip
import functools

import numpy as np
import pytest
from helpers.annotation_files import gff3_text, random_genes, write
from helpers.cli import assert_nothing_left, assert_one_line_error, chromaflow, run_in_process

pytestmark = pytest.mark.reference
pytest.importorskip("MOODS")

SIZES = {"Chrom1": 51321, "Chrom2": 102642}  # pred_data.fa
GENES = random_genes(31, SIZES, 40)
P = 1e-3
JASPAR = """>CF1.1 one
A [ 30  1  2 28  1  0 ]
C [  1 30  1  1  2 29 ]
G [  0  1 27  1 27  1 ]
T [  1  0  2  2  2  2 ]
>CF2.1 two
A [  2 25  1  1 30  0  3 ]
C [ 26  1  1 28  0  1  1 ]
G [  1  2 29  1  1 30  1 ]
T [  3  4  1  2  1  1 27 ]
>CF3.1 three
A [ 20  1  1  1 ]
C [  2 30  1  1 ]
G [  2  1 30  1 ]
T [  8  0  0 29 ]
"""
TF = "regulator\tmotif\nTFa\tCF1.1\nTFb\tCF2.1\nTFb\tCF3.1\nTFc\t\n"
cli = functools.partial(chromaflow, "motif-prior")


@pytest.fixture(scope="module")
def case(reference_dir, tmp_path_factory):
    d = reference_dir / "predmoter"
    if not (d / "pred_data.fa").exists():
        from helpers.environment import unavailable

        unavailable(f"{d}: Predmoter reference files missing")
    tmp = tmp_path_factory.mktemp("mp")
    c = {
        "dir": tmp,
        "fa": d / "pred_data.fa",
        "pred": d / "pred_data_1_predictions.h5",
        "bw": d / "converted" / "pred_data_1_atacseq_avg_strand.bw",
        "gff": write(tmp / "genes.gff3", gff3_text(GENES)),
        "motifs": write(tmp / "m.jaspar", JASPAR),
        "tf": write(tmp / "tf.tsv", TF),
        "regs": write(tmp / "regs.txt", "gene000\nTFa\n"),
    }
    base = [
        "motif-prior",
        "--fasta",
        c["fa"],
        "--annotation",
        c["gff"],
        "--motifs",
        c["motifs"],
        "--tf-motifs",
        c["tf"],
        "--regulators",
        c["regs"],
        "--p-value",
        P,
    ]
    run_in_process(*base, "--out", tmp / "plain.tsv.gz", "--matrix", tmp / "plain.matrix.tsv")
    run_in_process(*base, "--predictions", c["pred"], "--out", tmp / "pred.tsv")
    run_in_process(
        "gene-accessibility", "--annotation", c["gff"], "--predictions", c["pred"], "--out", tmp / "genes.tsv"
    )
    run_in_process(*base, "--accessibility", tmp / "genes.tsv", "--out", tmp / "table.tsv")
    run_in_process("gene-accessibility", "--annotation", c["gff"], "--bigwig", c["bw"], "--out", tmp / "genes_bw.tsv")
    c["base"] = base
    return c


def _rows(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


@pytest.fixture(scope="module")
def expected_hits(case):
    """{(TF, gene): [(start, end), ...]} by brute force: every window position of each motif (forward or reverse
    complement) scoring >= MOODS's threshold for P, the window of gene-accessibility's table."""
    import MOODS.tools
    from Bio import SeqIO

    seqs = {r.id: str(r.seq).upper() for r in SeqIO.parse(str(case["fa"]), "fasta")}
    counts = np.array([sum(s.count(b) for s in seqs.values()) for b in "ACGT"], dtype=float) + 1
    bg = (counts / counts.sum()).tolist()
    from chromaflow.motifs.motifs import load_motifs

    mats = {m.id: m.counts for m in load_motifs(str(case["motifs"]))}
    code = {k: np.frombuffer(v.encode(), np.uint8) for k, v in seqs.items()}
    lut = np.full(256, -1)
    for i, b in enumerate(b"ACGT"):
        lut[b] = i
    windows = {
        r["gene_id"]: (r["seqid"], int(r["window_start"]), int(r["window_end"]))
        for r in _rows(case["dir"] / "genes.tsv")
    }
    hits: dict = {}
    for tf, motifs in (("TFa", ["CF1.1"]), ("TFb", ["CF2.1", "CF3.1"])):
        for gene, (seqid, s, e) in windows.items():
            found = []
            for mid in motifs:
                lo = np.array(MOODS.tools.log_odds(mats[mid].tolist(), bg, 1.0))
                th = MOODS.tools.threshold_from_p(lo.tolist(), bg, P)
                L = lo.shape[1]
                w = np.lib.stride_tricks.sliding_window_view(lut[code[seqid][s:e]], L)
                ok = (w >= 0).all(axis=1)
                wi = np.where(w < 0, 0, w)
                f = lo[wi, np.arange(L)].sum(axis=1)
                r = lo[::-1, ::-1][wi, np.arange(L)].sum(axis=1)
                pos = np.nonzero(ok & ((f >= th - 1e-9) | (r >= th - 1e-9)))[0]
                found += [(s + int(p), s + int(p) + L) for p in pos]
            hits[(tf, gene)] = found
    return hits


def test_plain_prior_equals_brute_force(case, expected_hits):
    rows = _rows(case["dir"] / "plain.tsv.gz")
    assert list(rows[0]) == ["regulator", "target", "prior", "hits", "accessibility"]
    genes = sorted(g[0] for g in GENES)
    # regulators: the TF table's and --regulators', sorted; every gene a target except the regulator itself
    assert [(r["regulator"], r["target"]) for r in rows] == [
        (reg, g) for reg in ["TFa", "TFb", "TFc", "gene000"] for g in genes if g != reg
    ]
    n_hit = 0
    for r in rows:
        if r["regulator"] in ("TFc", "gene000"):
            assert (r["prior"], r["hits"], r["accessibility"]) == ("NA", "0", "NA")
            continue
        exp = expected_hits[(r["regulator"], r["target"])]
        assert int(r["hits"]) == len(exp), r
        assert r["prior"] == ("1" if exp else "0")
        n_hit += bool(exp)
    assert 5 < n_hit < 75, "the motifs are chosen to hit some windows and miss others"


def test_matrix_is_the_long_table(case):
    rows = _rows(case["dir"] / "plain.tsv.gz")
    with open(case["dir"] / "plain.matrix.tsv") as fh:
        m = list(csv.reader(fh, delimiter="\t"))
    assert m[0] == ["target", "TFa", "TFb", "TFc", "gene000"]
    cell = {(row[0], reg): v for row in m[1:] for reg, v in zip(m[0][1:], row[1:])}
    assert len(m) - 1 == len(GENES)
    for r in rows:
        assert cell[(r["target"], r["regulator"])] == r["prior"]
    assert cell[("gene000", "gene000")] == "NA"


def test_predictions_weight_equals_predmoter_track(case, expected_hits):
    """a = share of the genes whose window mean (Predmoter's avg bigWig) is below the hit's mean (same bigWig);
    prior = 1 - prod(1 - a)."""
    import pyBigWig

    gene_means = np.sort([float(r["mean_pred_data_1_atacseq_avg_strand"]) for r in _rows(case["dir"] / "genes_bw.tsv")])
    windows = {r["gene_id"]: r["seqid"] for r in _rows(case["dir"] / "genes.tsv")}
    bw = pyBigWig.open(str(case["bw"]))
    checked = 0
    for r in _rows(case["dir"] / "pred.tsv"):
        if r["regulator"] not in ("TFa", "TFb"):
            continue
        hits = expected_hits[(r["regulator"], r["target"])]
        if not hits:
            assert (r["prior"], r["accessibility"]) == ("0", "NA")
            continue
        seqid = windows[r["target"]]
        a = [
            min(
                1.0,
                np.searchsorted(gene_means, np.mean(bw.values(seqid, s, e)) - 1e-9, side="left")
                / (len(gene_means) - 1),
            )
            for s, e in hits
        ]
        assert float(r["prior"]) == pytest.approx(1 - np.prod(1 - np.array(a)), abs=1e-6), r
        assert float(r["accessibility"]) == pytest.approx(np.mean(a), abs=1e-6)
        checked += 1
    assert checked > 5


def test_closed_chromatin_counts_less(case):
    plain = {(r["regulator"], r["target"]): r for r in _rows(case["dir"] / "plain.tsv.gz")}
    weighted = _rows(case["dir"] / "pred.tsv")
    lower = 0
    for r in weighted:
        p = plain[(r["regulator"], r["target"])]
        assert r["hits"] == p["hits"]
        if p["prior"] == "NA":
            assert r["prior"] == "NA"
            continue
        assert float(r["prior"]) <= float(p["prior"])
        lower += float(r["prior"]) < float(p["prior"])
    assert lower > 0


def test_table_weight(case):
    pct = {r["gene_id"]: float(r["percentile_atacseq"]) / 100 for r in _rows(case["dir"] / "genes.tsv")}
    for r in _rows(case["dir"] / "table.tsv"):
        if r["prior"] == "NA":
            continue
        n = int(r["hits"])
        assert float(r["prior"]) == pytest.approx(1 - (1 - pct[r["target"]]) ** n, abs=1e-6)


def test_shuffled_annotation_same_bytes(case, tmp_path):
    gff = write(tmp_path / "s.gff3.gz", gff3_text(GENES, shuffle_seed=9), gz=True)
    base = [a if a != case["gff"] else gff for a in case["base"]]
    run_in_process(*base, "--out", tmp_path / "plain.tsv.gz")
    assert (tmp_path / "plain.tsv.gz").read_bytes() == (case["dir"] / "plain.tsv.gz").read_bytes()


def _bad(case, tmp_path, *args):
    out = tmp_path / "out"
    out.mkdir()
    proc = cli(*args, "--out", out / "p.tsv.gz", "--matrix", out / "m.tsv")
    assert_nothing_left(out)
    return proc


def test_seqid_absent_from_fasta(case, tmp_path):
    gff = write(tmp_path / "g.gff3", gff3_text([("g1", "Chrom1", 10, 500, "+"), ("g2", "chrX", 10, 500, "-")]))
    proc = _bad(
        case,
        tmp_path,
        "--fasta",
        case["fa"],
        "--annotation",
        gff,
        "--motifs",
        case["motifs"],
        "--tf-motifs",
        case["tf"],
    )
    assert_one_line_error(proc, "motif-prior", str(gff), "line 5", "'chrX'", "not in")


def test_predictions_of_another_assembly(case, tmp_path):
    fa = write(tmp_path / "other.fa", ">Chrom1\n" + "ACGT" * 20000 + "\n>Chrom2\n" + "ACGT" * 30000 + "\n")
    gff = write(tmp_path / "g.gff3", gff3_text([("g1", "Chrom1", 10, 500, "+")]))
    proc = _bad(
        case,
        tmp_path,
        "--fasta",
        fa,
        "--annotation",
        gff,
        "--motifs",
        case["motifs"],
        "--tf-motifs",
        case["tf"],
        "--predictions",
        case["pred"],
    )
    assert_one_line_error(proc, "motif-prior", "'Chrom1'", "51321 bp", "80000 bp", "another assembly")


def test_unknown_motif_in_tf_table(case, tmp_path):
    tf = write(tmp_path / "tf.tsv", "TFa\tCF1.1\nTFb\tMA9999.9\n")
    proc = _bad(
        case,
        tmp_path,
        "--fasta",
        case["fa"],
        "--annotation",
        case["gff"],
        "--motifs",
        case["motifs"],
        "--tf-motifs",
        tf,
    )
    assert_one_line_error(proc, "motif-prior", str(tf), "line 2", "'MA9999.9'")


def test_accessibility_table_of_other_genes(case, tmp_path):
    tab = write(tmp_path / "acc.tsv", "gene_id\tpercentile_atacseq\ngene000\t50\n")
    proc = _bad(
        case,
        tmp_path,
        "--fasta",
        case["fa"],
        "--annotation",
        case["gff"],
        "--motifs",
        case["motifs"],
        "--tf-motifs",
        case["tf"],
        "--accessibility",
        tab,
    )
    assert_one_line_error(proc, "motif-prior", str(tab), "no row for gene 'gene", "39 missing")


def _learned_files(tmp_path):
    """The three test motifs as discover-motifs' outputs: motifs.meme (pattern names) and a matches table."""
    from chromaflow.motifs.motifs import load_motifs

    names = ["pos_patterns.pattern_0", "pos_patterns.pattern_1", "neg_patterns.pattern_0"]
    text = "MEME version 5\n\nALPHABET= ACGT\n\nstrands: + -\n\n"
    text += "Background letter frequencies\nA 0.25 C 0.25 G 0.25 T 0.25\n"
    for name, m in zip(names, load_motifs(str(write(tmp_path / "m.jaspar", JASPAR)))):
        ppm = (m.counts / m.counts.sum(axis=0)).T
        text += f"\nMOTIF {name}\nletter-probability matrix: alength= 4 w= {len(ppm)} nsites= 30 E= 0\n"
        text += "".join(" ".join(f"{v:.6f}" for v in row) + "\n" for row in ppm)
    head = "motif\tmetacluster\tn_seqlets\trank\tjaspar_id\tjaspar_name\ttf_family\ttf_class\tpvalue\tqvalue\n"
    rows = [
        (names[0], "bHLH", "0.001"),
        (names[0], "Type II", "0.5"),  # not significant: TFc (Type II) gets no motif
        (names[1], "WRKY", "0.01"),
        (names[2], "WRKY;MYB", "0.02"),
    ]
    table = head + "".join(f"{n}\tpos\t30\t1\tMA0.1\tx\t{f}\tc\t0.0001\t{q}\n" for n, f, q in rows)
    return write(tmp_path / "motifs.meme", text), write(tmp_path / "matches.tsv", table), names


def test_learned_motifs_through_families_equal_the_same_map_given_directly(case, tmp_path):
    meme, matches, names = _learned_files(tmp_path)
    families = write(tmp_path / "fam.tsv", "regulator\tfamily\nTFa\tbHLH\nTFb\twrky\nTFc\tType  II\nTFd\tMYB\n")
    direct = write(tmp_path / "tf.tsv", f"TFa\t{names[0]}\nTFb\t{names[1]}\nTFb\t{names[2]}\nTFc\t\nTFd\t{names[2]}\n")
    common = ["--fasta", case["fa"], "--annotation", case["gff"], "--motifs", meme, "--p-value", P]
    run_in_process("motif-prior", *common, "--tf-families", families, "--matches", matches, "--out", tmp_path / "a.tsv")
    run_in_process("motif-prior", *common, "--tf-motifs", direct, "--out", tmp_path / "b.tsv")
    # TFc's family (Type II) matches no motif below q 0.05: 0 for every target (no site of its family among the
    # learned motifs), where the direct map (no motif) says NA; every other row the same
    rows, direct_rows = _rows(tmp_path / "a.tsv"), _rows(tmp_path / "b.tsv")
    assert [r for r in rows if r["regulator"] != "TFc"] == [r for r in direct_rows if r["regulator"] != "TFc"]
    assert {(r["prior"], r["hits"]) for r in rows if r["regulator"] == "TFc"} == {("0", "0")}
    assert {r["prior"] for r in direct_rows if r["regulator"] == "TFc"} == {"NA"}
    assert {r["prior"] for r in rows if r["regulator"] in ("TFa", "TFb", "TFd")} == {"0", "1"}


def test_no_learned_motif_gives_every_tf_na_and_says_so(case, tmp_path):
    """discover-motifs writes a MEME file without a motif (and a matches table without a row) when the model learned
    none: with --tf-families every TF with a family gets prior 0 (NA without one) and one line says why; as the
    sheet's motifs (--tf-motifs) such a file is still an error."""
    meme, _, _ = _learned_files(tmp_path)
    empty = write(tmp_path / "empty.meme", meme.read_text().split("\nMOTIF", 1)[0] + "\n")
    head = write(tmp_path / "none.tsv", (tmp_path / "matches.tsv").read_text().splitlines()[0] + "\n")
    families = write(tmp_path / "fam.tsv", "TFa\tbHLH\nTFb\tWRKY\nTFc\tNA\n")
    common = ["--fasta", case["fa"], "--annotation", case["gff"], "--motifs", empty]
    proc = chromaflow("motif-prior", *common, "--tf-families", families, "--matches", head, "--out", tmp_path / "a.tsv")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("holds no motif (none learned): every TF's prior is 0 (NA without a family)") == 1
    rows = _rows(tmp_path / "a.tsv")
    assert {r["regulator"] for r in rows} == {"TFa", "TFb", "TFc"}
    assert {r["prior"] for r in rows if r["regulator"] != "TFc"} == {"0"}
    assert {r["prior"] for r in rows if r["regulator"] == "TFc"} == {"NA"}
    direct = write(tmp_path / "tf.tsv", "TFa\tpattern_0\n")
    proc = _bad(case, tmp_path, *common, "--tf-motifs", direct)
    assert_one_line_error(proc, "motif-prior", str(empty), "no motifs in the file")


@pytest.mark.parametrize(
    "extra, needles",
    [
        (["--tf-families", "FAM"], ["--tf-families and --matches"]),
        (["--tf-families", "FAM", "--matches", "BADMATCH"], ["BADMATCH", "line 2", "'pattern_9'", "not among"]),
        (["--tf-families", "FAM", "--matches", "MATCHES", "--max-qvalue", "2"], ["--max-qvalue"]),
    ],
)
def test_learned_motifs_bad_input(case, tmp_path, extra, needles):
    meme, matches, _ = _learned_files(tmp_path)
    files = {
        "FAM": str(write(tmp_path / "fam.tsv", "TFa\tbHLH\n")),
        "MATCHES": str(matches),
        "BADMATCH": str(
            write(tmp_path / "bad.tsv", matches.read_text().splitlines()[0] + "\n" + "pattern_9\t" * 9 + "0\n")
        ),
    }
    extra = [files.get(e, e) for e in extra]
    proc = _bad(case, tmp_path, "--fasta", case["fa"], "--annotation", case["gff"], "--motifs", meme, *extra)
    assert_one_line_error(proc, "motif-prior", *[files.get(n, n) for n in needles])
