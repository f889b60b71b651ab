"""chromaflow genie3 / genie3-merge: parsing, errors, determinism, chunk merge, outputs (fast tests)."""

from __future__ import annotations

import bz2
import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from chromaflow.cli import main
from chromaflow.errors import ChromaflowError
from chromaflow.genie3 import expression, links
from chromaflow.sharding import part_bounds
from chromaflow.genie3.core import Options, compute_weights, resolve_k, target_seed, target_seeds
from chromaflow.genie3.skengine import unnormalised_mdi
from helpers.cli import chromaflow
from helpers.genie3_files import EXPR, REGS, adversarial_weights, base, lexsort_reference

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "assets" / "test" / "genie3"


def run_cli(argv, capsys=None):
    rc = main(argv)
    err = capsys.readouterr().err if capsys else ""
    return rc, err


def read_links(path):
    with gzip.open(path, "rt") as fh:
        return [line.rstrip("\n").split("\t") for line in fh]


# ------------------------------------------------------------------ options / seeding
def test_resolve_k_matches_python_reference():
    assert resolve_k("sqrt", 99) == 9  # floor, like the Python GENIE3 (MATLAB ceil = 10, R round = 10)
    assert resolve_k("sqrt", 4) == 2
    assert resolve_k("all", 99) == 99
    assert resolve_k("5", 3) == 3
    assert resolve_k("sqrt", 1) == 1


def test_chunk_bounds_cover_targets_once():
    for T in (1, 7, 20, 101):
        for n in (1, 2, 3, 7):
            spans = [part_bounds(i, n, T) for i in range(1, n + 1)]
            assert spans[0][0] == 0 and spans[-1][1] == T
            assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))


def test_target_seed_is_the_documented_name_derivation():
    """docs/genie3.md: a target's 64-bit seed = the first 8 bytes (little-endian) of BLAKE2b(name, key = run seed
    as 8 little-endian bytes, person chromaflow-g3) -- computed here with hashlib, independently of the code."""
    import hashlib

    for seed, g in ((0, "G1"), (0, "TF3"), (1, "TF3"), (7, "AT1G01010"), (2**63 + 5, "x\u00e9")):
        key = (seed & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")
        h = hashlib.blake2b(g.encode(), digest_size=8, key=key, person=b"chromaflow-g3").digest()
        assert target_seed(seed, g) == int.from_bytes(h, "little")
    names = [f"G{i}" for i in range(1000)]
    many = target_seeds(0, names)
    assert len(set(many.tolist())) == 1000
    assert target_seeds(0, ["G500", "G3"]).tolist() == [many[500], many[3]]  # position plays no part
    assert target_seed(1, "G3") != target_seed(0, "G3") and target_seed(0, "G4") != target_seed(0, "G3")


# ------------------------------------------------------------------ parsing
def test_read_fixture_both_layouts(tmp_path):
    e = expression.read_expression(EXPR, "samples-x-genes")
    assert e.values.shape == (20, 30) and e.genes[:2] == ["TF1", "TF2"]
    # transpose to genes x samples CSV with a corner cell
    p = tmp_path / "gxs.csv"
    lines = ["gene," + ",".join(f"S{i}" for i in range(30))]
    lines += [g + "," + ",".join(f"{v:.7f}" for v in row) for g, row in zip(e.genes, e.values)]
    p.write_text("\n".join(lines) + "\n")
    e2 = expression.read_expression(p, "genes-x-samples")
    assert e2.genes == e.genes
    np.testing.assert_array_equal(e2.values, e.values)


def _cli(*argv, env=None):
    """The real command line in a subprocess (checks exit code, stderr and 'no traceback')."""
    proc = chromaflow(*argv, env=env)
    return proc.returncode, proc.stderr


# (file name, content (str or bytes), layout, expected fragment of the one-line error)
BAD_EXPRESSION = [
    ("empty.tsv", "", "samples-x-genes", "line 1: empty file or empty header"),
    ("blank.tsv", "\n\n", "samples-x-genes", "line 1: empty file or empty header"),
    ("header_only.tsv", '"A"\t"B"\n', "samples-x-genes", "needs a header line and at least one data line"),
    ("one_gene.tsv", '"A"\n1\n2\n3\n', "samples-x-genes", "only 1 gene; GENIE3 needs at least 2"),
    ("one_sample.tsv", '"A"\t"B"\t"C"\n1\t2\t3\n', "samples-x-genes", "only 1 sample; GENIE3 needs at least 3"),
    ("two_samples.tsv", '"A"\t"B"\n1\t2\n2\t3\n', "samples-x-genes", "only 2 samples; GENIE3 needs at least 3"),
    ("one_gene_gxs.tsv", "gene\tS1\tS2\tS3\nG1\t1\t2\t3\n", "genes-x-samples", "only 1 gene"),
    (
        "all_constant.tsv",
        '"A"\t"B"\n1\t5\n1\t5\n1\t5\n',
        "samples-x-genes",
        "every gene is constant across the samples",
    ),
    (
        "nan.tsv",
        '"A"\t"B"\n1\tNaN\n2\t3\n3\t1\n',
        "samples-x-genes",
        "line 2, column 2 (gene 'B'): non-finite value 'NaN'",
    ),
    (
        "inf.tsv",
        '"A"\t"B"\n1\t2\n2\t-inf\n3\t1\n',
        "samples-x-genes",
        "line 3, column 2 (gene 'B'): non-finite value '-inf'",
    ),
    (
        "overflow.tsv",
        '"A"\t"B"\n1\t2\n2\t3\n1e40\t1\n',
        "samples-x-genes",
        "line 4, column 1 (gene 'A'): value '1e40' overflows float32",
    ),
    (
        "text.tsv",
        '"A"\t"B"\n1\tx\n2\t3\n3\t1\n',
        "samples-x-genes",
        "line 2, column 2 (gene 'B'): non-numeric value 'x'",
    ),
    (
        "text_labelled.tsv",
        'sample\tA\tB\nS1\t1\t2\nS2\t2\tNA\nS3\t3\t1\n',
        "samples-x-genes",
        "line 3 (sample 'S2'), column 3 (gene 'B'): non-numeric value 'NA'",
    ),
    (
        "text_gxs.csv",
        "gene,S1,S2,S3\nG1,1,2,3\nG2,4,five,6\n",
        "genes-x-samples",
        "line 3 (gene 'G2'), column 3 (sample 'S2'): non-numeric value 'five'",
    ),
    (
        "empty_cell.csv",
        "gene,S1,S2,S3\nG1,1,,3\nG2,4,5,6\n",
        "genes-x-samples",
        "line 2 (gene 'G1'), column 3 (sample 'S2'): empty cell (missing value)",
    ),
    (
        "dup.tsv",
        '"A"\t"B"\t"A"\n1\t2\t3\n2\t3\t4\n3\t1\t2\n',
        "samples-x-genes",
        "line 1 (header): duplicated gene name 'A' (genes 1 and 3)",
    ),
    (
        "dup_gxs.tsv",
        "gene\tS1\tS2\tS3\nG1\t1\t2\t3\nG2\t3\t2\t1\nG1\t5\t5\t6\n",
        "genes-x-samples",
        "column 1: duplicated gene name 'G1' (genes 1 and 3)",
    ),
    ("ragged.tsv", '"A"\t"B"\n1\t2\t3\n2\t3\n', "samples-x-genes", "line 3: 2 fields, expected 3"),
    (
        "numbers_header.tsv",
        "1\t2\t3\n0.1\t0.2\t0.3\n0.2\t0.3\t0.4\n0.5\t0.1\t0.2\n",
        "samples-x-genes",
        "use --layout genes-x-samples",
    ),
    ("numbers_first_col.tsv", "a\tb\n0.1\t0.2\n", "genes-x-samples", "samples-x-genes"),
    ("binary.tsv", b"\x00\xff\xfe\x00\x81" * 20, "samples-x-genes", "not a readable text table"),
    (
        "truncated.tsv.gz",
        gzip.compress(b'"A"\t"B"\n' + b"1.5\t2.25\n" * 400)[:40],
        "samples-x-genes",
        "not a readable text table",
    ),
    (
        "compressed.tsv.bz2",
        bz2.compress(b'"A"\t"B"\n1\t2\n'),
        "samples-x-genes",
        "bzip2-compressed; expression tables may be plain or gzip (.gz) only",
    ),
]


@pytest.mark.parametrize("name,content,layout,fragment", BAD_EXPRESSION, ids=[b[0] for b in BAD_EXPRESSION])
def test_bad_expression_one_line_error_nothing_written(tmp_path, name, content, layout, fragment):
    p = tmp_path / name
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    out = tmp_path / "out"
    out.mkdir()
    rc, err = _cli(
        "genie3",
        "--expression",
        p,
        "--layout",
        layout,
        "--out",
        out / "links.tsv.gz",
        "--weights",
        out / "w.tsv.gz",
        "--summary",
        out / "s.json",
        "--metrics",
        out / "m.json",
    )
    assert rc == 1, err
    assert err.startswith(f"chromaflow genie3: error: {p}: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert fragment in err, err
    assert list(out.iterdir()) == []  # nothing left behind, not even a temporary file


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_expression_path_missing_or_directory(tmp_path, kind):
    p = tmp_path / "expr.tsv"
    if kind == "directory":
        p.mkdir()
    rc, err = _cli("genie3", "--expression", p, "--layout", "samples-x-genes", "--out", tmp_path / "o.tsv.gz")
    assert rc == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert f"{p}: " + ("expression file not found" if kind == "missing" else "is a directory") in err
    assert not (tmp_path / "o.tsv.gz").exists()


@pytest.mark.parametrize(
    "content,fragment",
    [
        ("TF1\n# comment\n\nNOPE\n", "line 4: regulator 'NOPE' is not a gene of"),
        ("TF1\nNOPE\nALSO_NOT\n", "line 2: regulator 'NOPE' is not a gene of"),
        ("TF1\nTF1\n", "line 2: regulator 'TF1' listed twice (first on line 1)"),
        ("# only comments\n\n", "no regulator names"),
        ("", "no regulator names"),
    ],
)
def test_bad_regulators_one_line_error(tmp_path, content, fragment):
    r = tmp_path / "regs.txt"
    r.write_text(content)
    out = tmp_path / "out"
    out.mkdir()
    rc, err = _cli(
        "genie3",
        "--expression",
        EXPR,
        "--layout",
        "samples-x-genes",
        "--regulators",
        r,
        "--out",
        out / "o.tsv.gz",
        "--metrics",
        out / "m.json",
    )
    assert rc == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"chromaflow genie3: error: {r}: ") and fragment in err, err
    if "ALSO_NOT" in content:
        assert "and 1 more" in err
    assert list(out.iterdir()) == []


def test_regulator_that_is_a_sample_label_hints_at_the_layout(tmp_path):
    p = tmp_path / "labelled.tsv"
    p.write_text("sample\tA\tB\tC\nS1\t1\t2\t3\nS2\t2\t3\t1\nS3\t3\t1\t2\n")
    r = tmp_path / "regs.txt"
    r.write_text("S2\n")
    rc, err = _cli(
        "genie3", "--expression", p, "--layout", "samples-x-genes", "--regulators", r, "--out", tmp_path / "o.tsv.gz"
    )
    assert rc == 1 and "regulator 'S2' is not a gene" in err and "wrong --layout?" in err


NAMED_GENES_X_SAMPLES = "gene\tS1\tS2\tS3\tS4\nTF1\t1\t2\t3\t5\nTF2\t2\t3\t1\t4\nG1\t3\t1\t2\t2\n"


@pytest.mark.parametrize(
    "given,other", [("samples-x-genes", "genes-x-samples"), ("genes-x-samples", "samples-x-genes")]
)
def test_regulators_found_only_among_the_samples_mean_a_swapped_layout(tmp_path, given, other):
    """Both axes carry names, so the matrix reads either way; regulators that are all sample labels and none a gene
    show the layout is swapped: one line naming the layout to use (the matrix is written so that ``other`` is right)."""
    rows = [ln.split("\t") for ln in NAMED_GENES_X_SAMPLES.splitlines()]
    if other == "samples-x-genes":  # transpose: genes are the columns
        rows = [list(r) for r in zip(*rows)]
    p = tmp_path / "named.tsv"
    p.write_text("".join("\t".join(r) + "\n" for r in rows))
    r = tmp_path / "regs.txt"
    r.write_text("TF1\nTF2\n")
    rc, err = _cli("genie3", "--expression", p, "--layout", given, "--regulators", r, "--out", tmp_path / "o.tsv.gz")
    assert rc == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"chromaflow genie3: error: {r}: line 1: regulator 'TF1' is not a gene of {p}"), err
    assert (
        f"all 2 regulators are sample labels of it and none is a gene: the layout looks swapped (wrong --layout?); "
        f"try --layout {other}"
    ) in err, err
    assert sorted(x.name for x in tmp_path.iterdir()) == ["named.tsv", "regs.txt"]
    rc, err = _cli(
        "genie3",
        "--expression",
        p,
        "--layout",
        other,
        "--regulators",
        r,
        "--n-trees",
        "5",
        "--out",
        tmp_path / "o.tsv.gz",
    )
    assert rc == 0, err


def test_missing_output_directory_fails_before_any_work(tmp_path):
    rc, err = _cli(*base(tmp_path), "--plot", tmp_path / "nodir" / "p.png")
    assert rc == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert f"{tmp_path / 'nodir'}: output directory does not exist" in err
    assert not (tmp_path / "links.tsv.gz").exists()  # the link list was not written either


def _fixture_as(tmp_path, name: str, sep: str, compress: bool) -> Path:
    rows = [line.split("\t") for line in EXPR.read_text().splitlines()]
    text = "\n".join(sep.join(r) for r in rows) + "\n"
    p = tmp_path / name
    p.write_bytes(gzip.compress(text.encode(), mtime=0) if compress else text.encode())
    return p


@pytest.mark.parametrize(
    "name,sep,compress",
    [("e.tsv.gz", "\t", True), ("e.csv", ",", False), ("e.csv.gz", ",", True), ("e.txt", ",", False)],
)
def test_gzip_and_csv_inputs_give_the_same_links(tmp_path, name, sep, compress):
    p = _fixture_as(tmp_path, name, sep, compress)
    e = expression.read_expression(p, "samples-x-genes")
    ref = expression.read_expression(EXPR, "samples-x-genes")
    assert e.genes == ref.genes
    np.testing.assert_array_equal(e.values, ref.values)
    assert main(base(tmp_path, "--n-trees", "20", out="ref.tsv.gz")) == 0
    argv = base(tmp_path, "--n-trees", "20", out="alt.tsv.gz")
    argv[argv.index("--expression") + 1] = str(p)
    assert main(argv) == 0
    assert (tmp_path / "alt.tsv.gz").read_bytes() == (tmp_path / "ref.tsv.gz").read_bytes()


BOM = b"\xef\xbb\xbf"


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_utf8_bom_is_accepted_in_matrix_and_regulators(tmp_path, compress):
    """A UTF-8 BOM (Excel's 'CSV UTF-8') before the matrix or the regulator list changes nothing: before, the first
    regulator was '\\ufeffTF1' (not a gene) and the first gene of a samples-x-genes matrix '\\ufeff"TF1"'."""
    pack = (lambda b: gzip.compress(b, mtime=0)) if compress else (lambda b: b)
    expr = tmp_path / ("bom.tsv.gz" if compress else "bom.tsv")
    expr.write_bytes(pack(BOM + EXPR.read_bytes()))
    regs = tmp_path / ("regs.txt.gz" if compress else "regs.txt")
    regs.write_bytes(pack(BOM + REGS.read_bytes()))
    ref = expression.read_expression(EXPR, "samples-x-genes")
    e = expression.read_expression(expr, "samples-x-genes")
    assert e.genes == ref.genes
    assert expression.count_genes(expr, "samples-x-genes") == len(ref.genes)
    assert expression.read_regulators(regs, e) == expression.read_regulators(REGS, ref)
    assert main(base(tmp_path, "--n-trees", "20", out="ref.tsv.gz")) == 0
    argv = base(tmp_path, "--n-trees", "20", out="links_bom.tsv.gz")
    argv[argv.index("--expression") + 1] = str(expr)
    argv[argv.index("--regulators") + 1] = str(regs)
    assert main(argv) == 0
    assert (tmp_path / "links_bom.tsv.gz").read_bytes() == (tmp_path / "ref.tsv.gz").read_bytes()


def test_count_genes_agrees_with_the_reader(tmp_path):
    """count_genes (chunk planning) = the reader's gene count, for every format and both layouts."""
    e = expression.read_expression(EXPR, "samples-x-genes")
    gxs = tmp_path / "gxs.csv.gz"
    lines = ["gene," + ",".join(f"S{i}" for i in range(30))]
    lines += [g + "," + ",".join(f"{v:.7f}" for v in row) for g, row in zip(e.genes, e.values)]
    gxs.write_bytes(gzip.compress(("\n".join(lines) + "\n\n").encode()))
    labelled = tmp_path / "labelled.tsv"
    rows = EXPR.read_text().splitlines()
    labelled.write_text("\n".join(["sample\t" + rows[0]] + [f"S{i}\t{r}" for i, r in enumerate(rows[1:])]) + "\n")
    cases = [
        (EXPR, "samples-x-genes"),
        (gxs, "genes-x-samples"),
        (labelled, "samples-x-genes"),
        (_fixture_as(tmp_path, "e.tsv.gz", "\t", True), "samples-x-genes"),
        (_fixture_as(tmp_path, "e.csv", ",", False), "samples-x-genes"),
    ]
    for p, layout in cases:
        assert expression.count_genes(p, layout) == len(expression.read_expression(p, layout).genes) == 20, p
    with pytest.raises(ChromaflowError, match="the first column holds numbers"):
        expression.count_genes(EXPR, "genes-x-samples")
    with pytest.raises(ChromaflowError, match="empty file"):
        (tmp_path / "empty.tsv").write_text("")
        expression.count_genes(tmp_path / "empty.tsv", "samples-x-genes")


def test_constant_genes_cli_warns_and_scores_zero(tmp_path):
    """Decision: a constant gene is not an error (real matrices have some); as a target its incoming scores
    are 0, as a regulator it is never split on (0 outgoing); one warning line per constant target."""
    rows = [line.split("\t") for line in EXPR.read_text().splitlines()]
    for r in rows[1:]:
        r[7] = "0.5"  # G3 constant
        r[0] = "1"  # TF1 constant (a regulator)
    p = tmp_path / "const.tsv"
    p.write_text("\n".join("\t".join(r) for r in rows) + "\n")
    w = tmp_path / "w.tsv.gz"
    rc, err = _cli(
        "genie3",
        "--expression",
        p,
        "--layout",
        "samples-x-genes",
        "--regulators",
        REGS,
        "--n-trees",
        "30",
        "--out",
        tmp_path / "o.tsv.gz",
        "--weights",
        w,
    )
    assert rc == 0, err
    warnings = [line for line in err.splitlines() if "constant across samples" in line]
    assert [("'TF1'" in x, "'G3'" in x) for x in warnings] == [(True, False), (False, True)]
    with gzip.open(w, "rt") as fh:
        table = [line.rstrip("\n").split("\t") for line in fh]
    genes = table[0][1:]
    W = {row[0]: np.array(row[1:], dtype=float) for row in table[1:]}
    assert np.all(W["TF1"] == 0)  # never split on
    assert all(W[r][genes.index("G3")] == 0 for r in W)  # a constant target gets nothing
    assert W["TF2"][genes.index("G5")] > 0  # the others are scored


def test_bad_options(tmp_path, capsys):
    rc, err = run_cli(base(tmp_path, "--max-features", "zero"), capsys)
    assert rc == 1 and "--max-features" in err
    rc, err = run_cli(base(tmp_path, "--targets-chunk", "3/2"), capsys)
    assert rc == 1 and "--targets-chunk" in err


# ------------------------------------------------------------------ outputs
def test_links_format_ranked_and_recovers_fixture_network(tmp_path):
    assert main(base(tmp_path, "--n-trees", "300", "--weights", str(tmp_path / "w.tsv.gz"))) == 0
    rows = read_links(tmp_path / "links.tsv.gz")
    assert rows[0] == ["regulator", "target", "importance"]
    body = rows[1:]
    assert len(body) == 5 * 20 - 5  # 5 regulators x 20 targets minus 5 self-links
    assert all(a != b for a, b, _ in body)
    vals = [float(v) for _, _, v in body]
    assert vals == sorted(vals, reverse=True)
    gold = {tuple(line.split("\t")[:2]) for line in (FIX / "gold.tsv").read_text().splitlines()}
    top = {(a, b) for a, b, _ in body[: len(gold)]}
    assert len(top & gold) >= 0.6 * len(gold)  # the simulated edges dominate the top of the list
    w = read_links(tmp_path / "w.tsv.gz")
    assert w[0][0] == "regulator" and len(w) == 6 and len(w[0]) == 21


def test_deterministic_and_thread_independent(tmp_path):
    assert main(base(tmp_path, "--threads", "1", out="a.tsv.gz")) == 0
    assert main(base(tmp_path, "--threads", "2", out="b.tsv.gz")) == 0
    assert main(base(tmp_path, "--threads", "2", "--seed", "7", out="c.tsv.gz")) == 0
    a, b, c = ((tmp_path / f).read_bytes() for f in ("a.tsv.gz", "b.tsv.gz", "c.tsv.gz"))
    assert a == b
    assert a != c


@pytest.mark.parametrize("engine", ["fast", "sklearn"])
def test_chunked_merge_is_byte_identical(tmp_path, engine):
    common = ["--engine", engine, "--n-trees", "20"]
    assert (
        main(
            base(
                tmp_path,
                *common,
                "--weights",
                str(tmp_path / "w1.tsv.gz"),
                "--summary",
                str(tmp_path / "s1.json"),
                "--plot",
                str(tmp_path / "p1.png"),
                out="single.tsv.gz",
            )
        )
        == 0
    )
    parts = []
    for i in (1, 2, 3):
        parts.append(str(tmp_path / f"part{i}.npz"))
        assert main(base(tmp_path, *common, "--targets-chunk", f"{i}/3", out=f"part{i}.npz")) == 0
    assert (
        main(
            [
                "genie3-merge",
                "--out",
                str(tmp_path / "merged.tsv.gz"),
                "--weights",
                str(tmp_path / "w2.tsv.gz"),
                "--summary",
                str(tmp_path / "s2.json"),
                "--plot",
                str(tmp_path / "p2.png"),
                "--metrics",
                str(tmp_path / "m.json"),
                *reversed(parts),
            ]
        )
        == 0
    )
    for a, b in (
        ("single.tsv.gz", "merged.tsv.gz"),
        ("w1.tsv.gz", "w2.tsv.gz"),
        ("s1.json", "s2.json"),
        ("p1.png", "p2.png"),
    ):
        assert (tmp_path / a).read_bytes() == (tmp_path / b).read_bytes(), a
    m = json.loads((tmp_path / "m.json").read_text())
    assert m["stage"] == "genie3-merge" and m["targets"] == 20 and m["parts"] == 3


def test_merge_rejects_bad_part_sets(tmp_path, capsys):
    for i in (1, 2):
        assert main(base(tmp_path, "--n-trees", "5", "--targets-chunk", f"{i}/2", out=f"p{i}.npz")) == 0
    assert main(base(tmp_path, "--n-trees", "5", "--seed", "3", "--targets-chunk", "2/2", out="q2.npz")) == 0
    out = str(tmp_path / "m.tsv.gz")
    rc, err = run_cli(["genie3-merge", "--out", out, str(tmp_path / "p1.npz")], capsys)
    assert rc == 1 and "chunk(s) 2/2 missing" in err
    rc, err = run_cli(["genie3-merge", "--out", out, str(tmp_path / "p1.npz"), str(tmp_path / "p1.npz")], capsys)
    assert rc == 1 and "given twice" in err
    rc, err = run_cli(["genie3-merge", "--out", out, str(tmp_path / "p1.npz"), str(tmp_path / "q2.npz")], capsys)
    assert rc == 1 and "options differs" in err
    junk = tmp_path / "junk.npz"
    junk.write_text("not a part")
    rc, err = run_cli(["genie3-merge", "--out", out, str(junk)], capsys)
    assert rc == 1 and "not a chromaflow genie3 part file" in err


def test_summary_plot_metrics(tmp_path):
    w = tmp_path / "w.tsv.gz"
    assert (
        main(
            base(
                tmp_path,
                "--summary",
                str(tmp_path / "s.json"),
                "--plot",
                str(tmp_path / "p.png"),
                "--top",
                "10",
                "--metrics",
                str(tmp_path / "m.json"),
                "--weights",
                str(w),
                "--threads",
                "2",
            )
        )
        == 0
    )
    listed = read_links(tmp_path / "links.tsv.gz")[1:]
    with gzip.open(w, "rt") as fh:
        table = [line.rstrip("\n").split("\t") for line in fh]
    targets = table[0][1:]
    W = np.array([row[1:] for row in table[1:]], dtype=float)
    regs = [row[0] for row in table[1:]]
    off = np.array([[r != t for t in targets] for r in regs])
    # the summary's numbers, recomputed from the link list and the weight matrix it was made from
    s = json.loads((tmp_path / "s.json").read_text())
    assert (s["edges"], s["edges_written"], s["top_n"]) == (95, 95, 10)
    assert s["edges_nonzero"] == int(np.count_nonzero(W[off]))
    deg: dict[str, int] = {}
    for a, _, _ in listed[:10]:
        deg[a] = deg.get(a, 0) + 1
    assert [(d["regulator"], d["out_degree"]) for d in s["top_regulators_by_out_degree_in_top_n"]] == sorted(
        deg.items(), key=lambda kv: (-kv[1], kv[0])
    )
    assert s["top_n_min_importance"] == pytest.approx(float(listed[9][2]), rel=1e-8)
    tot = {r: W[i][off[i]].sum() for i, r in enumerate(regs)}
    assert [d["regulator"] for d in s["top_regulators_by_total_weight"]] == sorted(tot, key=lambda r: (-tot[r], r))
    for d in s["top_regulators_by_total_weight"]:
        assert d["total_weight"] == pytest.approx(tot[d["regulator"]], rel=1e-7)
    for q, v in s["importance_quantiles"].items():
        assert v == pytest.approx(np.quantile(W[off], float(q)), rel=1e-7)
    assert s["options"] == {
        "tree_method": "RF",
        "max_features": "sqrt",
        "n_trees": 50,
        "seed": 0,
        "engine": "fast",
        "importance": "unnormalised",
    }
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    m = json.loads((tmp_path / "m.json").read_text())
    assert (m["stage"], m["genes"], m["samples"], m["regulators"], m["targets"]) == ("genie3", 20, 30, 5, 20)
    assert (m["trees"], m["engine"], m["engine_requested"], m["tree_method"], m["threads"]) == (
        50,
        "fast",
        "fast",
        "RF",
        2,
    )
    assert (m["max_features"], m["seed"], m["chunk"], m["constant_targets"]) == ("sqrt", 0, None, 0)
    assert m["importance"] == "unnormalised"
    assert 0 < m["compute_s"] <= m["wall_s"] and m["cpu_s"] > 0
    assert 0 < m["compute_cpu_s"] <= m["cpu_s"]  # tree growing's CPU (the scale stage's cost model)
    assert m["targets_per_s"] == pytest.approx(20 / m["compute_s"], rel=1e-3)
    assert 10e6 < m["peak_rss_bytes"] < 4e9


def test_constant_genes(tmp_path, capsys):
    e = expression.read_expression(EXPR, "samples-x-genes")
    vals = e.values.copy()
    vals[0] = 0.5  # TF1 constant (regulator: never split on)
    vals[7] = 1.0  # G3 constant (target: all-zero column + warning)
    for engine in ("fast", "sklearn"):
        W, info = compute_weights(vals, e.genes, np.arange(5), np.arange(20), Options(n_trees=100, engine=engine), 1)
        assert info["constant_targets"] == ["TF1", "G3"]  # TF1 is a target too
        assert np.all(W[:, 7] == 0)
        assert np.all(W[0] == 0)
        # every other target is explained by the 4 varying regulators: fully grown trees spend the whole
        # (bootstrap) variance of y/std, ~(n-1)/n, unnormalised
        sums = np.delete(W.sum(axis=0), [0, 7])
        assert np.all((0.8 < sums) & (sums < 1.1)), (engine, sums)
        assert 0.93 < sums.mean() < 0.995, (engine, sums.mean())  # (n-1)/n = 0.967; 1.0 if normalised
    assert "constant across samples" in capsys.readouterr().err


def test_fast_engine_falls_back_without_compiler(tmp_path):
    env = dict(**__import__("os").environ, CHROMAFLOW_GENIE3_NO_CC="1")
    cmd = [sys.executable, "-m", "chromaflow", *base(tmp_path, "--n-trees", "5", "--metrics", str(tmp_path / "m.json"))]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "fast engine unavailable" in proc.stderr
    assert json.loads((tmp_path / "m.json").read_text())["engine"] == "sklearn"


def _kernel_weights(lib, X, trees=30, threads=1, method="RF", importance="unnormalised"):
    from chromaflow.genie3 import fast

    G = X.shape[0]
    regs, tg = np.arange(G), np.arange(min(G, 24))
    W = np.zeros((G, len(tg)))
    tables = fast.build_tables(X, regs) if method == "RF" else None
    seeds = target_seeds(5, [f"G{int(j)}" for j in tg])
    k = resolve_k("sqrt", G - 1)
    fast.run(lib, X, tables, regs, tg, seeds, trees, k, k, method, threads, W, importance=importance)
    return W


def test_kernel_bytes_do_not_depend_on_build_simd_or_threads():
    """Same bytes from the default build, the plain-C build (no SSE2 sorting network), an -O0 build, a build that
    walks 300-sample bitmaps through the summary word used above 1,024 samples, and any thread count -- on
    300 samples (sorting-network nodes, 5-word bitmaps, tied values) and on the fixture."""
    from chromaflow.genie3 import fast

    rng = np.random.default_rng(11)
    X300 = np.round(rng.normal(size=(40, 300)), 2).astype(np.float32)  # 2 decimals: many near-ties
    X30 = expression.read_expression(EXPR, "samples-x-genes").values
    base = fast.load_kernel()
    variants = [
        fast.load_kernel(("-DGENIE3_NO_SIMD",)),
        fast.load_kernel(("-O0",)),
        fast.load_kernel(("-DSUMMARY_ABOVE_WORDS=2",)),
    ]
    for X in (X300, X30):
        for method, imp in (("RF", "unnormalised"), ("RF", "tree-normalised"), ("ET", "unnormalised")):
            ref = _kernel_weights(base, X, method=method, importance=imp)
            assert ref.any()
            for lib in variants:
                assert _kernel_weights(lib, X, method=method, importance=imp).tobytes() == ref.tobytes()
            assert _kernel_weights(base, X, threads=3, method=method, importance=imp).tobytes() == ref.tobytes()


def test_early_exit_never_skips_a_better_split():
    """Nodes of 3..16 samples stop evaluating features once one offers the node's best possible partition. A
    check build goes on evaluating after each stop (the chosen split frozen, so the same bytes) and counts later
    features that beat the stop: none may, beyond rounding; and the shortcut must have been taken. Covers the
    sorting-network nodes (300 samples), the bitmap nodes (30 samples) and near-ties (2-decimal values)."""
    import ctypes

    from chromaflow.genie3 import fast

    rng = np.random.default_rng(3)
    X300 = np.round(rng.normal(size=(40, 300)), 2).astype(np.float32)
    X30 = expression.read_expression(EXPR, "samples-x-genes").values
    base, check = fast.load_kernel(), fast.load_kernel(("-DGENIE3_CHECK_EXIT",))
    stats = (ctypes.c_int64 * 3)()
    assert base.genie3_check_stats(stats) == -1
    for X in (X300, X30):
        before = (ctypes.c_int64 * 3)()
        assert check.genie3_check_stats(before) == 0
        ref = _kernel_weights(base, X)
        assert _kernel_weights(check, X).tobytes() == ref.tobytes()
        check.genie3_check_stats(stats)
        stops, beaten = stats[0] - before[0], stats[1] - before[1]
        assert stops > 1000, stops
        assert beaten == 0, f"{beaten} of {stops} early stops were beaten by a later feature"


def test_unnormalised_mdi_matches_sklearn_up_to_normalisation():
    from sklearn.ensemble import RandomForestRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 6)).astype(np.float32)
    y = X[:, 0] * 2 + X[:, 1] + rng.normal(0, 0.1, 60)
    rf = RandomForestRegressor(n_estimators=1, random_state=0, max_features=3).fit(X, y)
    imp = unnormalised_mdi(rf, 6)
    np.testing.assert_allclose(imp / imp.sum(), rf.feature_importances_, rtol=1e-10, atol=1e-12)
    # fully grown: total decrease = root impurity (variance of y)
    t = rf.estimators_[0].tree_
    assert imp.sum() == pytest.approx(t.impurity[0], rel=1e-9)


def test_layout_warning_when_labelled_rows_outnumber_gene_columns(tmp_path, capsys):
    rng = np.random.default_rng(0)
    p = tmp_path / "gxs.tsv"
    lines = ["\t".join(f"S{i}" for i in range(10))]
    lines += [f"gene{g}\t" + "\t".join(f"{v:.4f}" for v in rng.random(10)) for g in range(40)]
    p.write_text("\n".join(lines) + "\n")
    e = expression.read_expression(p, "samples-x-genes")  # cannot be proven wrong: warn, do not fail
    assert e.n_genes == 10
    assert capsys.readouterr().err == ""  # the reader returns the warning; the CLIs print it
    assert e.warnings == [
        f"{p}: 40 labelled rows (samples) but only 10 gene columns; if rows are genes use --layout genes-x-samples"
    ]
    assert expression.read_expression(p, "genes-x-samples").warnings == []
    assert expression.read_expression(p, "genes-x-samples").n_genes == 40
    for argv in (["genie3-plan"], ["genie3", "--n-trees", "2", "--out", tmp_path / "l.tsv.gz"]):
        rc, err = _cli(*argv, "--expression", p, "--layout", "samples-x-genes")
        assert rc == 0 and err == f"chromaflow genie3: warning: {e.warnings[0]}\n", err


def test_max_links_is_the_head_of_the_full_list(tmp_path):
    assert main(base(tmp_path, out="all.tsv.gz")) == 0
    assert (
        main(
            base(tmp_path, "--max-links", "17", "--summary", str(tmp_path / "s.json"), "--top", "30", out="head.tsv.gz")
        )
        == 0
    )
    full, head = read_links(tmp_path / "all.tsv.gz"), read_links(tmp_path / "head.tsv.gz")
    assert head == full[:18]
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["edges"] == 95 and s["edges_written"] == 17 and s["top_n"] == 30


def test_ranked_links_ties_by_names():
    W = np.array([[0.0, 0.5, 0.5], [0.5, 0.0, 0.2]])
    rows, cols = links.ranked_links(W, ["B", "A"], ["B", "A", "C"], np.array([0, 1]), np.array([0, 1, 2]))
    pairs = [(["B", "A"][r], ["B", "A", "C"][c]) for r, c in zip(rows, cols)]
    assert pairs == [("A", "B"), ("B", "A"), ("B", "C"), ("A", "C")]
    rows2, cols2 = links.ranked_links(W, ["B", "A"], ["B", "A", "C"], np.array([0, 1]), np.array([0, 1, 2]), limit=2)
    assert list(zip(rows2, cols2)) == list(zip(rows, cols))[:2]


@pytest.mark.parametrize("block", [1 << 22, 5], ids=["one-block", "blocks-of-5"])
@pytest.mark.parametrize("native", [True, False], ids=["C", "numpy"])
def test_ranked_links_match_a_lexsort_of_the_specification(native, block, monkeypatch):
    """ranked_links (C radix sort of the values in name order, or its np.lexsort fallback) gives exactly the
    order of a plain lexsort over (-value, regulator name, target name), with and without self-links and a
    limit, on weights full of ties and near-ties; with a limit its candidates are found block by block (blocks
    of 5 values: many merges, ties across block edges)."""
    monkeypatch.setattr(links, "LIMIT_BLOCK", block)
    if not native:
        monkeypatch.setitem(links.LINKS_KERNEL, "lib", None)
    elif links.links_kernel() is None:
        pytest.skip("no C compiler")
    rng = np.random.default_rng(7)
    for trial in range(40):
        R, T = int(rng.integers(1, 40)), int(rng.integers(1, 60))
        W = adversarial_weights(rng, R, T)
        G = max(R, T) + int(rng.integers(0, 4))
        names = [f"g{int(rng.integers(0, 10**6))}_{k}" for k in range(G)]
        reg_idx = rng.choice(G, R, replace=False)  # unsorted: name order differs from index order
        tgt_idx = rng.choice(G, T, replace=False) if trial % 4 else np.sort(rng.choice(G, T, replace=False))
        rn, tn = [names[k] for k in reg_idx], [names[k] for k in tgt_idx]
        for limit in (0, 1, 7, int(rng.integers(1, R * T + 2))):
            got = links.ranked_links(W, rn, tn, reg_idx, tgt_idx, limit)
            want = lexsort_reference(W, rn, tn, reg_idx, tgt_idx, limit)
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), (trial, limit)


def test_max_links_candidates_need_no_copy_of_the_matrix(monkeypatch):
    """The --max-links candidates: the same positions as a partition of the whole matrix (NaN, ties, the largest
    values at either end, blocks of 1,000), and ranked_links with a limit allocates far less than the matrix (the
    earlier np.partition copied all of W, and the cut an R x T mask)."""
    import tracemalloc

    rng = np.random.default_rng(11)
    monkeypatch.setattr(links, "LIMIT_BLOCK", 1000)
    for case in range(3):
        flat = np.round(rng.random(20_000), 3)  # many ties
        if case == 2:
            flat[rng.integers(0, flat.size, 50)] = np.nan
        flat[[0, -1][case % 2]] = 2.0 + case
        for k in (1, 2, 17, 1000, 1001, 19_999, 20_000):
            want = np.flatnonzero(flat >= np.partition(flat, flat.size - k)[flat.size - k])
            assert np.array_equal(links.entries_at_or_above_kth(flat, k), want), (case, k)
    W = rng.random((2000, 2000))
    names = [f"g{i}" for i in range(2000)]
    monkeypatch.setattr(links, "LIMIT_BLOCK", 1 << 16)
    tracemalloc.start()
    rows, cols = links.ranked_links(W, names, names, np.arange(2000), np.arange(2000), limit=100)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(rows) == 100 and W[rows[0], cols[0]] == max(W[i, j] for i in range(2000) for j in range(2000) if i != j)
    assert peak < W.nbytes // 8


def test_link_writer_bytes_match_python_formatting(tmp_path, monkeypatch):
    """The C formatter ('%.9g' of the C library) writes the same bytes as Python's f"{x:.9g}" on edge cases
    (exponent switch points, subnormals, exact rounding ties at 9 digits, -0.0, non-ASCII names), and the file
    does not depend on the number of threads; the text is checked against Python's formatting line by line."""
    if links.links_kernel() is None:
        pytest.skip("no C compiler")
    rng = np.random.default_rng(3)
    edge = [
        0.0,
        -0.0,
        1e-4,
        9.99999999e-5,
        0.0001,
        123456789.0,
        1234567890.0,
        999999999.5,
        1234567885.0,
        1234567895.0,
        0.5,
        2.5e-7,
        5e-324,
        2.2250738585072014e-308,
        1.7976931348623157e308,
        1 / 3,
        2 / 3,
        0.1,
        1e16,
        1e-5,
        12345678.85,
        0.00012345678950000001,
        -7.25,
    ]
    vals = np.concatenate(
        [edge, rng.random(3000) * 10.0 ** rng.integers(-12, 12, 3000), np.nextafter(np.round(rng.random(500), 9), 2.0)]
    )
    R = 40
    T = -(-len(vals) // R)
    W = np.zeros(R * T)
    W[: len(vals)] = vals
    W = W.reshape(R, T)
    reg = [f"TF{k}_α" for k in range(R)]
    tgt = [f"gene{k}-β" for k in range(T)]
    rows, cols = np.divmod(np.arange(R * T), T)
    links.write_links(tmp_path / "c1.tsv.gz", W, reg, tgt, rows, cols, threads=1)
    links.write_links(tmp_path / "c3.tsv.gz", W, reg, tgt, rows, cols, threads=3)
    monkeypatch.setitem(links.LINKS_KERNEL, "lib", None)
    links.write_links(tmp_path / "py.tsv.gz", W, reg, tgt, rows, cols, threads=1)
    c1 = (tmp_path / "c1.tsv.gz").read_bytes()
    assert c1 == (tmp_path / "py.tsv.gz").read_bytes() == (tmp_path / "c3.tsv.gz").read_bytes()
    lines = gzip.decompress(c1).decode().splitlines()
    assert lines[0] == "regulator\ttarget\timportance"
    assert lines[1:] == [f"{reg[r]}\t{tgt[c]}\t{W[r, c]:.9g}" for r, c in zip(rows, cols)]


def test_link_list_members_do_not_depend_on_threads(tmp_path, monkeypatch):
    """A link list of several gzip members (MEMBER made small: one per formatted block) is byte-identical for 1, 2
    and 5 threads."""
    monkeypatch.setattr(links.GzipMembers, "MEMBER", 1 << 12)
    rng = np.random.default_rng(5)
    W = rng.random((60, 5000))
    names = [f"g{k}" for k in range(5000)]
    rows, cols = links.ranked_links(W, names[:60], names, np.arange(60), np.arange(5000))
    blobs = []
    for t in (1, 2, 5):
        links.write_links(tmp_path / f"{t}.tsv.gz", W, names[:60], names, rows, cols, threads=t)
        blobs.append((tmp_path / f"{t}.tsv.gz").read_bytes())
    assert blobs[0] == blobs[1] == blobs[2]
    assert blobs[0].count(b"\x1f\x8b\x08\x00\x00\x00\x00\x00") >= 5  # header + one member per 65,536 lines
    assert len(gzip.decompress(blobs[0]).splitlines()) == 60 * 5000 - 60 + 1


def test_same_bytes_under_other_numeric_kernels(tmp_path):
    """Issue 14 §1: the links (default engine, both importance modes) are byte-identical when numpy/OpenBLAS run
    the kernels of other machines (OpenBLAS core types, numpy's SIMD dispatch off): the expression scaling and
    the ranking are done in numpy before and after the C kernel."""
    import platform

    from helpers import kernel_variants

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the kernel variants are x86-64 ones")
    ref: dict[str, bytes] = {}
    for name, extra in kernel_variants.applied():
        for imp in ("unnormalised", "tree-normalised"):
            out = tmp_path / f"{name}-{imp}.tsv.gz"
            argv = base(tmp_path, "--importance", imp, "--threads", "2")
            argv[argv.index("--out") + 1] = str(out)
            r = subprocess.run(
                [sys.executable, "-m", "chromaflow", *argv],
                env=kernel_variants.env(extra),
                capture_output=True,
                text=True,
            )
            assert r.returncode == 0, r.stderr
            got = out.read_bytes()
            assert ref.setdefault(imp, got) == got, f"{imp} links differ under {name} ({extra})"
    assert ref["unnormalised"] != ref["tree-normalised"]
