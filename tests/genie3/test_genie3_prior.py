"""genie3 --prior (iRafNet's weighted split candidates), order invariance and --repeats (issue 29, parts 3-5)."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from chromaflow.genie3 import expression
from chromaflow.genie3.core import Options, compute_weights, repeat_seed
from chromaflow.genie3.prior import link_points, quantise, read_prior, weights_of
from helpers.cli import assert_nothing_left, assert_one_line_error, run_in_process

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "assets" / "test" / "genie3"
EXPR = FIX / "expression.tsv"
REGS = FIX / "regulators.txt"
TFS = ["TF1", "TF2", "TF3", "TF4", "TF5"]


@pytest.fixture(scope="module", autouse=True)
def _kernel(genie3_kernel):
    """Every test here needs the fast engine's kernel (tests/genie3/conftest.py)."""


@pytest.fixture(scope="module")
def expr():
    return expression.read_expression(EXPR, "samples-x-genes")


def _genie3(tmp, *extra, expr_path=EXPR, regs=REGS, out="links.tsv.gz", trees=40, check=True):
    args = [
        "genie3",
        "--expression",
        expr_path,
        "--layout",
        "samples-x-genes",
        "--n-trees",
        trees,
        "--out",
        tmp / out,
        "--threads",
        "1",
    ]
    if regs is not None:
        args += ["--regulators", regs]
    return run_in_process(*map(str, args), *map(str, extra), check=check)


def _links(path):
    with gzip.open(path, "rt") as fh:
        return [line.rstrip("\n").split("\t") for line in fh]


def _write_long(path, rows, sep="\t", gz=False, header=("regulator", "target", "prior", "hits", "accessibility")):
    text = sep.join(header) + "\n" + "".join(sep.join(map(str, r)) + "\n" for r in rows)
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        Path(path).write_text(text)
    return path


def _fixture_prior(expr):
    """TF1 and TF2 supported for the first half of the genes, TF5 excluded everywhere, TF3 NA, TF4 missing."""
    rows = []
    for i, g in enumerate(expr.genes):
        rows.append(("TF1", g, 1 if i < 10 else 0, 1, ""))
        rows.append(("TF2", g, 1 if i < 10 else 0, 2, ""))
        rows.append(("TF5", g, 0, 0, ""))
        rows.append(("TF3", g, "NA", "", ""))
    return rows


# ------------------------------------------------------------------------------------------ the link function
def test_link_function_is_diogenes():
    """DIOgene: pi=1 -> 1+sqrt(1-(a-1)^2), pi=0.5 -> 1-a, pi=0 -> 1-sqrt(1-(a-1)^2); linear between."""
    for a in (0.0, 0.25, 0.5, 1.0):
        s = (1 - (a - 1) ** 2) ** 0.5
        assert link_points(a) == pytest.approx((1 - s, 1 - a, 1 + s))
        assert weights_of(np.array([0.0, 0.5, 1.0]), a) == pytest.approx([1 - s, 1 - a, 1 + s])
        assert weights_of(np.array([0.75]), a)[0] == pytest.approx(((1 - a) + (1 + s)) / 2)
    assert set(quantise(weights_of(np.array([0, 0.3, 0.5, 1]), 0.0)).tolist()) == {1 << 30}  # alpha 0: all equal
    assert quantise(weights_of(np.array([0.0, 0.5, 1.0]), 1.0)).tolist() == [0, 0, 2 << 30]  # alpha 1: only pi=1
    assert quantise(np.array([1e-12]))[0] == 1  # a positive weight never rounds to "never drawn"


# ------------------------------------------------------------------------------------------ reading
def test_both_layouts_and_compression_read_the_same(tmp_path, expr):
    rows = _fixture_prior(expr)
    ref = read_prior(_write_long(tmp_path / "p.tsv", rows), expr.genes)
    assert ref.layout == "long" and ref.ignored == 0
    got = {(int(r), int(t)): float(v) for r, t, v in zip(ref.reg, ref.tgt, ref.pi)}
    assert got[(expr.genes.index("TF3"), 0)] == 0.5  # NA -> 0.5
    assert got[(0, 5)] == 1.0 and got[(0, 15)] == 0.0
    gz = read_prior(_write_long(tmp_path / "p.csv.gz", rows, sep=",", gz=True), expr.genes)
    assert gz.layout == "long"
    assert {(int(r), int(t)): float(v) for r, t, v in zip(gz.reg, gz.tgt, gz.pi)} == got
    # the same prior as a targets x regulators matrix (TF4's column empty = 0.5)
    cols = ["TF1", "TF2", "TF3", "TF4", "TF5"]
    val = {(r, t): p for r, t, p, _, _ in rows}
    lines = ["\t" + "\t".join(cols)] + [
        g + "\t" + "\t".join(str(val.get((c, g), "")) for c in cols) for g in expr.genes
    ]
    (tmp_path / "m.tsv").write_text("\n".join(lines) + "\n")
    mat = read_prior(tmp_path / "m.tsv", expr.genes)
    assert mat.layout == "matrix"
    got_m = {(int(r), int(t)): float(v) for r, t, v in zip(mat.reg, mat.tgt, mat.pi)}
    assert got_m == {k: v for k, v in got.items() if v != 0.5}  # the matrix keeps only cells other than 0.5
    # and the links are the same bytes from either layout
    _genie3(tmp_path, "--prior", tmp_path / "p.tsv", "--prior-alpha", "0.5", "--prior-check", "off", out="a.tsv.gz")
    _genie3(tmp_path, "--prior", tmp_path / "m.tsv", "--prior-alpha", "0.5", "--prior-check", "off", out="b.tsv.gz")
    assert (tmp_path / "a.tsv.gz").read_bytes() == (tmp_path / "b.tsv.gz").read_bytes()


def test_genes_absent_from_the_expression_are_ignored_with_a_warning(tmp_path, expr):
    rows = _fixture_prior(expr) + [("NOTAGENE", "G1", 1, 1, ""), ("TF1", "NOTAGENE", 1, 1, "")]
    proc = _genie3(tmp_path, "--prior", _write_long(tmp_path / "p.tsv", rows), "--prior-alpha", "0.5")
    assert proc.returncode == 0
    assert "2 of its 82 prior values name genes absent from the expression matrix: ignored" in proc.stderr


# ------------------------------------------------------------------------------------------ bad input
BAD = {
    "value above 1": ([("TF1", "G1", 1.5, 0, "")], None, ("line 2", "outside [0, 1]")),
    "not a number": ([("TF1", "G1", "yes", 0, "")], None, ("line 2", "'yes'", "not a number")),
    "pair twice": ([("TF1", "G1", 1, 0, ""), ("TF1", "G1", 0, 0, "")], None, ("line 3", "listed twice", "line 2")),
    "short row": ([("TF1", "G1")], None, ("line 2", "2 fields")),
    "no gene known": ([("A", "B", 1, 0, "")], None, ("none of its 1", "gene identifiers")),
    "no prior column": ([("TF1", "G1", 1)], ("regulator", "target", "score"), ("line 1", "'prior' column")),
    "header only": ([], None, ("no prior values",)),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_prior_is_one_line_and_writes_nothing(tmp_path, case):
    rows, header, needles = BAD[case]
    d = tmp_path / "in"
    d.mkdir()
    prior = _write_long(d / "p.tsv", rows, **({"header": header} if header else {}))
    out = tmp_path / "out"
    out.mkdir()
    proc = _genie3(out, "--prior", prior, "--prior-alpha", "0.5", "--summary", out / "s.json", check=False)
    assert_one_line_error(proc, "genie3", str(prior), *needles)
    assert_nothing_left(out)


@pytest.mark.parametrize(
    "extra,needles",
    [
        (["--prior-alpha", "0.5"], ("--prior-alpha needs --prior",)),
        (["--prior", "{p}", "--prior-alpha", "1.5"], ("must be in [0, 1]",)),
        (["--prior", "{p}", "--prior-alpha", "0.5", "--engine", "sklearn"], ("needs --engine fast",)),
        (["--prior", "{missing}"], ("prior file not found",)),
        (["--repeats", "0"], ("--repeats must be >= 1",)),
        (["--repeats", "3", "--top", "0"], ("--top >= 1",)),
    ],
)
def test_bad_options_are_one_line(tmp_path, expr, extra, needles):
    p = _write_long(tmp_path / "p.tsv", _fixture_prior(expr))
    extra = [e.format(p=p, missing=tmp_path / "nope.tsv") for e in extra]
    proc = _genie3(tmp_path, *extra, check=False)
    assert_one_line_error(proc, "genie3", *needles)
    assert not (tmp_path / "links.tsv.gz").exists()


# ------------------------------------------------------------------------------------------ alpha = 0
@pytest.mark.parametrize(
    "engine,method,importance",
    [("fast", "RF", "unnormalised"), ("fast", "ET", "tree-normalised"), ("sklearn", "RF", "unnormalised")],
)
def test_alpha_zero_gives_the_same_bytes_as_no_prior(tmp_path, expr, engine, method, importance):
    prior = _write_long(tmp_path / "p.tsv", _fixture_prior(expr))
    opts = ["--engine", engine, "--tree-method", method, "--importance", importance]
    trees = 10 if engine == "sklearn" else 40
    _genie3(tmp_path, *opts, out="plain.tsv.gz", trees=trees)
    _genie3(tmp_path, *opts, "--prior", prior, "--prior-alpha", "0", out="a0.tsv.gz", trees=trees)
    _genie3(
        tmp_path, *opts, "--prior", prior, "--prior-alpha", "0.5", "--prior-check", "off", out="a5.tsv.gz", trees=trees
    ) if engine == "fast" else None
    assert (tmp_path / "plain.tsv.gz").read_bytes() == (tmp_path / "a0.tsv.gz").read_bytes()
    if engine == "fast":  # and the prior does act at alpha > 0
        assert (tmp_path / "plain.tsv.gz").read_bytes() != (tmp_path / "a5.tsv.gz").read_bytes()


# ------------------------------------------------------------------------------------------ the weighted draw
def _noise(G=24, n=60, seed=3):
    return np.random.default_rng(seed).normal(size=(G, n)).astype(np.float32)


def _prior_obj(pairs, genes):
    from chromaflow.genie3.prior import Prior

    reg = np.array([genes.index(r) for r, _, _ in pairs], dtype=np.int64)
    tgt = np.array([genes.index(t) for _, t, _ in pairs], dtype=np.int64)
    pi = np.array([p for _, _, p in pairs], dtype=np.float64)
    return Prior(reg=reg, tgt=tgt, pi=pi, layout="long", pairs_read=len(pairs), ignored=0, path="-")


@pytest.mark.parametrize(
    "method,importance",
    [("RF", "unnormalised"), ("RF", "tree-normalised"), ("ET", "unnormalised"), ("ET", "tree-normalised")],
)
def test_candidates_are_drawn_in_proportion_to_the_weights(method, importance):
    """Noise data, one candidate per split (max-features 1): every split uses the drawn feature, and by symmetry
    each split's decrease has the same distribution whichever feature it is, so a feature's share of the
    importance estimates its share of the draws. At alpha 0.5, pi=1 weighs 1.866 and pi=0 0.134: the 6 favoured
    inputs must take 6*1.866 / (6*1.866 + 17*0.134) = 83 % of the importance (uniform draws: 26 %)."""
    X = _noise()
    genes = [f"g{i:02d}" for i in range(len(X))]
    target = 0
    fav = set(range(1, 7))
    pairs = [(genes[r], genes[target], 1.0 if r in fav else 0.0) for r in range(1, len(X))]
    opts = Options(n_trees=400, max_features="1", tree_method=method, importance=importance, prior_alpha=0.5)
    W, _ = compute_weights(X, genes, np.arange(len(X)), np.array([target]), opts, 1, prior=_prior_obj(pairs, genes))
    share = W[sorted(fav), 0].sum() / W[:, 0].sum()
    w0, _, w1 = link_points(0.5)
    expect = 6 * w1 / (6 * w1 + 17 * w0)
    assert abs(share - expect) < 0.05, (share, expect)


@pytest.mark.parametrize("method", ["RF", "ET"])
def test_candidates_are_drawn_without_replacement(method):
    """11 inputs, 10 candidates a node, one input favoured 400:1 (alpha 0.99: pi=1 weighs 1.99, pi=0 0.005).
    Without replacement it is one candidate among the 10 and the others still compete: its importance share
    stays near the unweighted one (~1/11; a little above, as the first drawn it wins the ties of 2-sample
    nodes). Drawn with replacement, the 10 draws would nearly all be it, and its share near 1."""
    X = _noise(G=12, n=60)
    genes = [f"g{i:02d}" for i in range(len(X))]
    pairs = [(genes[r], genes[0], 1.0 if r == 1 else 0.0) for r in range(1, len(X))]
    base = dict(n_trees=300, max_features="10", tree_method=method)
    plain, _ = compute_weights(X, genes, np.arange(12), np.array([0]), Options(**base), 1)
    W, _ = compute_weights(
        X, genes, np.arange(12), np.array([0]), Options(**base, prior_alpha=0.99), 1, prior=_prior_obj(pairs, genes)
    )
    share, plain_share = W[1, 0] / W[:, 0].sum(), plain[1, 0] / plain[:, 0].sum()
    assert plain_share < share < 0.3, (share, plain_share)
    assert np.count_nonzero(W[1:, 0]) == 11


def test_alpha_one_keeps_only_supported_regulators_and_falls_back_to_uniform():
    """alpha 1: target 0 has 2 supported inputs (fewer than K = 4): only they get importance; target 1 has none
    (every input pi = 0 or NA): its forest is the unweighted one, byte for byte (the documented fallback)."""
    X = _noise()
    genes = [f"g{i:02d}" for i in range(len(X))]
    R = np.arange(len(X))
    pairs = [(genes[r], genes[0], 1.0 if r in (5, 9) else 0.0) for r in range(1, len(X))]
    pairs += [(genes[r], genes[1], 0.0) for r in range(0, 10)]
    for method in ("RF", "ET"):
        opts = Options(n_trees=50, tree_method=method, prior_alpha=1.0)
        W, _ = compute_weights(X, genes, R, np.array([0, 1, 2]), opts, 1, prior=_prior_obj(pairs, genes))
        plain, _ = compute_weights(X, genes, R, np.array([0, 1, 2]), Options(n_trees=50, tree_method=method), 1)
        assert set(np.flatnonzero(W[:, 0])) == {5, 9}
        assert W[:, 0].sum() > 0.5
        assert np.array_equal(W[:, 1], plain[:, 1])
        assert np.array_equal(W[:, 2], plain[:, 2])  # no prior entry: weights all equal, unweighted


# ------------------------------------------------------------------------------------------ order invariance
def _permuted_copy(tmp, expr, seed):
    """The fixture with its gene columns and sample rows shuffled, and the regulators file shuffled."""
    rng = np.random.default_rng(seed)
    gp = rng.permutation(expr.n_genes)
    sp = rng.permutation(expr.n_samples)
    lines = ["\t".join(expr.genes[g] for g in gp)]
    for s in sp:
        lines.append("\t".join(f"{expr.values[g, s]:.7f}" for g in gp))
    (tmp / "perm.tsv").write_text("\n".join(lines) + "\n")
    regs = [ln for ln in REGS.read_text().splitlines() if ln.strip()]
    (tmp / "regs.txt").write_text("\n".join(regs[i] for i in rng.permutation(len(regs))) + "\n")
    return tmp / "perm.tsv", tmp / "regs.txt"


@pytest.fixture(scope="module")
def canon(tmp_path_factory, expr):
    """The fixture rewritten with the same %.7f cells (so permuted copies hold the same float32 values)."""
    d = tmp_path_factory.mktemp("canon")
    lines = ["\t".join(expr.genes)] + [
        "\t".join(f"{expr.values[g, s]:.7f}" for g in range(expr.n_genes)) for s in range(expr.n_samples)
    ]
    (d / "e.tsv").write_text("\n".join(lines) + "\n")
    return d / "e.tsv"


@pytest.mark.parametrize(
    "engine,extra",
    [
        ("fast", []),
        ("fast", ["--tree-method", "ET"]),
        ("sklearn", []),
        ("fast", ["--prior", "PRIOR", "--prior-alpha", "0.5", "--prior-check", "off"]),
        ("fast", ["--repeats", "3", "--top", "10"]),
    ],
)
def test_permuted_inputs_give_the_same_links(tmp_path, expr, canon, engine, extra):
    prior = _write_long(tmp_path / "p.tsv", _fixture_prior(expr))
    extra = [str(prior) if e == "PRIOR" else e for e in extra]
    trees = 8 if engine == "sklearn" else 30
    _genie3(tmp_path, "--engine", engine, *extra, expr_path=canon, out="ref.tsv.gz", trees=trees)
    for seed in (1, 2):
        e2, r2 = _permuted_copy(tmp_path, expr, seed)
        _genie3(tmp_path, "--engine", engine, *extra, expr_path=e2, regs=r2, out=f"p{seed}.tsv.gz", trees=trees)
        assert (tmp_path / f"p{seed}.tsv.gz").read_bytes() == (tmp_path / "ref.tsv.gz").read_bytes()


@pytest.mark.parametrize(
    "extra", [[], ["--prior", "PRIOR", "--prior-alpha", "1", "--prior-check", "off", "--repeats", "2", "--top", "10"]]
)
def test_chunked_permuted_run_equals_one_run(tmp_path, expr, canon, extra):
    """genie3-plan + 3 chunks of a permuted matrix + genie3-merge == one run on the original order."""
    prior = _write_long(tmp_path / "p.tsv", _fixture_prior(expr))
    extra = [str(prior) if e == "PRIOR" else e for e in extra]
    _genie3(tmp_path, *extra, expr_path=canon, out="one.tsv.gz", regs=None)
    e2, _ = _permuted_copy(tmp_path, expr, 7)
    run_in_process(
        "genie3-plan",
        "--expression",
        str(e2),
        "--layout",
        "samples-x-genes",
        "--chunk-size",
        "7",
        "--out",
        str(tmp_path / "plan.json"),
    )
    assert json.loads((tmp_path / "plan.json").read_text())["chunks"] == 3
    parts = []
    for i in (1, 2, 3):
        _genie3(tmp_path, *extra, "--targets-chunk", f"{i}/3", expr_path=e2, out=f"part{i}.npz", regs=None)
        parts.append(str(tmp_path / f"part{i}.npz"))
    top = ["--top", "10"] if "--top" in extra else []  # the merge writes the link list: it takes --top
    run_in_process("genie3-merge", *parts, *top, "--out", str(tmp_path / "merged.tsv.gz"))
    assert (tmp_path / "merged.tsv.gz").read_bytes() == (tmp_path / "one.tsv.gz").read_bytes()


# ------------------------------------------------------------------------------------------ --repeats
def test_repeats_one_is_the_plain_run(tmp_path):
    _genie3(tmp_path, out="plain.tsv.gz")
    _genie3(tmp_path, "--repeats", "1", out="r1.tsv.gz")
    assert (tmp_path / "plain.tsv.gz").read_bytes() == (tmp_path / "r1.tsv.gz").read_bytes()


def test_repeats_columns_against_separate_runs(tmp_path):
    """R = 3, top 15: each repeat is the plain run at the documented derived seed (BLAKE2b("repeat r", key =
    seed, person chromaflow-g3r); repeat 0 = the seed), run here as separate commands; importance, confidence and
    mean_rank are recomputed from those three link lists."""
    seed, R, top = 4, 3, 15
    seeds = [seed] + [
        int.from_bytes(
            hashlib.blake2b(
                f"repeat {r}".encode(), digest_size=8, key=seed.to_bytes(8, "little"), person=b"chromaflow-g3r"
            ).digest(),
            "little",
        )
        for r in (1, 2)
    ]
    assert [repeat_seed(seed, r) for r in range(3)] == seeds
    ranks, imps = [], []
    for r, s in enumerate(seeds):
        _genie3(tmp_path, "--seed", s, out=f"rep{r}.tsv.gz")
        rows = _links(tmp_path / f"rep{r}.tsv.gz")[1:]
        ranks.append({(a, b): i + 1 for i, (a, b, _) in enumerate(rows)})
        imps.append({(a, b): float(v) for a, b, v in rows})
    _genie3(
        tmp_path,
        "--seed",
        seed,
        "--repeats",
        R,
        "--top",
        top,
        "--summary",
        tmp_path / "s.json",
        "--plot",
        tmp_path / "p.png",
        out="rep.tsv.gz",
    )
    got = _links(tmp_path / "rep.tsv.gz")
    assert got[0] == ["regulator", "target", "importance", "confidence", "mean_rank"]
    assert len(got) - 1 == len(ranks[0])
    mean_imp = []
    for a, b, v, c, m in got[1:]:
        k = (a, b)
        assert float(v) == pytest.approx(sum(i[k] for i in imps) / R, rel=1e-7, abs=1e-12)
        assert float(c) == pytest.approx(sum(rk[k] <= top for rk in ranks) / R)
        assert float(m) == pytest.approx(sum(rk[k] for rk in ranks) / R)
        mean_imp.append(float(v))
    assert mean_imp == sorted(mean_imp, reverse=True)
    st = json.loads((tmp_path / "s.json").read_text())["stability"]
    top_conf = [float(c) for _, _, _, c, _ in got[1 : top + 1]]
    assert st["repeats"] == R and st["top_n"] == top
    assert st["top_links_mean_confidence"] == pytest.approx(np.mean(top_conf))
    assert st["top_links_in_every_repeat"] == sum(c == 1.0 for c in top_conf)
    assert sum(st["top_links_confidence_counts"].values()) == top
    from PIL import Image

    assert Image.open(tmp_path / "p.png").size == (1500, 400)  # the third panel: top-link stability


def test_weighted_kernel_bytes_do_not_depend_on_build_or_threads():
    """The weighted draw (alias table, rejection, scan) is integer arithmetic: the same bytes from the default
    build, the plain-C build and an -O0 build, on 1 and 3 threads, RF and ET."""
    from chromaflow.genie3 import fast
    from chromaflow.genie3.core import target_seeds

    rng = np.random.default_rng(5)
    X = np.round(rng.normal(size=(30, 120)), 2).astype(np.float32)
    regs, tg = np.arange(30), np.arange(12)
    q = quantise(weights_of(rng.choice([0.0, 0.5, 1.0, 0.8], size=(30, 12)), 0.7))
    seeds = target_seeds(9, [f"g{j}" for j in tg])
    builds = [fast.load_kernel(), fast.load_kernel(("-DGENIE3_NO_SIMD",)), fast.load_kernel(("-O0",))]
    for method in ("RF", "ET"):
        tables = fast.build_tables(X, regs) if method == "RF" else None
        outs = []
        for lib, threads in [(builds[0], 1), (builds[0], 3), (builds[1], 2), (builds[2], 1)]:
            W = np.zeros((30, len(tg)))
            fast.run(lib, X, tables, regs, tg, seeds, 20, 5, 5, method, threads, W, prior=q)
            outs.append(W)
        plain = np.zeros((30, len(tg)))
        fast.run(builds[0], X, tables, regs, tg, seeds, 20, 5, 5, method, 1, plain)
        assert not np.array_equal(outs[0], plain)
        for W in outs[1:]:
            assert W.tobytes() == outs[0].tobytes()


def test_out_may_not_overwrite_the_prior(tmp_path, expr):
    prior = _write_long(tmp_path / "p.tsv", _fixture_prior(expr))
    before = prior.read_bytes()
    proc = _genie3(tmp_path, "--prior", prior, out="p.tsv", check=False)
    assert_one_line_error(proc, "genie3", "--out", "--prior")
    assert prior.read_bytes() == before
