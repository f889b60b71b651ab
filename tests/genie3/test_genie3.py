"""chromaflow genie3 end to end: input parsing and its one-line errors (through the real command line), constant
genes, and the run's determinism and byte-identical chunk merge. Options and seeding: test_genie3_options.py; the
outputs: test_genie3_outputs.py; the fast kernel: test_genie3_kernel.py; ranking and writing links:
test_genie3_links.py."""

from __future__ import annotations

import bz2
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from chromaflow.cli import main
from chromaflow.utils.errors import ChromaflowError
from chromaflow.genie3 import expression
from chromaflow.genie3.core import Options, compute_weights
from helpers.cli import chromaflow
from helpers.genie3_files import EXPR, REGS, base


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


def test_constant_genes_cli_warns_and_scores_zero(tmp_path):
    """Decision: a constant gene is not an error (real matrices have some); as a target its incoming scores
    are 0, as a regulator it is never split on (0 outgoing); one warning line per constant gene, a constant
    regulator's saying so."""
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
    warnings = [line for line in err.splitlines() if " is constant " in line]
    assert warnings == [  # the regulator named as such, once (it is a target too), in words (issue 54)
        "chromaflow genie3: warning: regulator 'TF1' is constant over the samples: it cannot be chosen by any split; "
        "its links are 0",
        "chromaflow genie3: warning: target gene 'G3' is constant across samples: its incoming importances are all 0",
    ]
    with gzip.open(w, "rt") as fh:
        table = [line.rstrip("\n").split("\t") for line in fh]
    genes = table[0][1:]
    W = {row[0]: np.array(row[1:], dtype=float) for row in table[1:]}
    assert np.all(W["TF1"] == 0)  # never split on
    assert all(W[r][genes.index("G3")] == 0 for r in W)  # a constant target gets nothing
    assert W["TF2"][genes.index("G5")] > 0  # the others are scored


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
