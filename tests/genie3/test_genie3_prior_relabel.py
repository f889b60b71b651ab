"""genie3 --prior-check auto (issue 56): the relabelling test, the default prior check.

The statistic and its p are checked against a plain float reference (scipy's Spearman, numpy's double centring, the
same relabellings); a prior whose ids are swapped is kept at most at the test's level; a prior whose supported pairs
are *less* associated than chance (the Arabidopsis nitrate case of issue 56) is kept, where the one-sided
correlation test turns it off; the CLI keeps the fixture's gold prior (the bytes of --prior-check off) and turns an
uninformative one off (the bytes of no prior), with one line each saying what it measured; untestable priors say why.
Order invariance and the decision of target chunks: tests/genie3/test_genie3_prior_check.py (default check)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from chromaflow.genie3 import expression
from chromaflow.genie3.prior import Prior
from chromaflow.genie3.prior_check import check_prior
from chromaflow.genie3.prior_relabel import _stream, check_prior_relabel
from helpers.cli import run_in_process
from helpers.genie3_files import EXPR, REGS, base, uninformative_prior_rows
from helpers.genie3_files import gold_prior_rows as _gold_rows
from helpers.genie3_files import write_prior as _write_prior


@pytest.fixture(scope="module", autouse=True)
def _kernel(genie3_kernel):
    """The CLI tests need the fast engine's kernel (tests/genie3/conftest.py)."""


@pytest.fixture(scope="module")
def expr():
    return expression.read_expression(EXPR, "samples-x-genes")


@pytest.fixture(scope="module")
def regs(expr):
    return np.array(expression.read_regulators(REGS, expr))


def _prior(reg, tgt, pi) -> Prior:
    reg, tgt = np.asarray(reg, dtype=np.int64), np.asarray(tgt, dtype=np.int64)
    return Prior(reg=reg, tgt=tgt, pi=np.asarray(pi, dtype=float), layout="long", pairs_read=len(reg), ignored=0,
                 path="x")  # fmt: skip


def _reference(values, genes, reg_idx, prior, seed, B):
    """T and its relabelled null in plain float64: scipy's Spearman rho^2 for every regulator x gene (both in name
    order), self-pairs at their gene's mean, double-centred; T = sum (pi - 0.5) x centred, the same relabellings."""
    order = np.argsort(np.array(genes, dtype=object), kind="stable")
    regs = sorted(reg_idx.tolist(), key=lambda i: genes[i])
    with np.errstate(invalid="ignore", divide="ignore"):  # the constant gene: nan, no association
        rho = stats.spearmanr(values, axis=1).statistic
    A = np.nan_to_num(rho[np.ix_(regs, order)]) ** 2
    gpos = np.empty(len(genes), dtype=int)
    gpos[order] = np.arange(len(genes))
    selfs = (np.arange(len(regs)), gpos[regs])
    A[selfs] = np.nan
    A[selfs] = np.nanmean(A, axis=0)[selfs[1]]
    A = A - A.mean(axis=1, keepdims=True) - A.mean(axis=0, keepdims=True) + A.mean()
    P = np.zeros_like(A)
    rpos = {g: i for i, g in enumerate(regs)}
    for r, t, v in zip(prior.reg, prior.tgt, prior.pi):
        if int(r) in rpos and r != t:
            P[rpos[int(r)], gpos[t]] = v - 0.5
    obs = float((P * A).sum())
    rng = np.random.default_rng(_stream(seed))
    null = []
    for _ in range(B):
        s, t = rng.permutation(len(regs)), rng.permutation(len(genes))
        null.append(float((P * A[np.ix_(s, t)]).sum()))
    return obs, np.array(null)


@pytest.mark.parametrize("seed,ties", [(1, False), (2, True)])
def test_statistic_and_p_are_the_float_reference(seed, ties):
    """Random data (with ties, a constant gene), a continuous prior with 0.5 and NA-like cells, regulators out of name
    order: z within fixed-point rounding of the reference, p and the decision exactly its Monte Carlo p."""
    rng = np.random.default_rng(seed)
    G, n, B = 40, 25, 199
    X = rng.normal(size=(G, n))
    X[5:25] += 0.8 * X[[0, 1, 2, 3, 4] * 4]  # five regulators drive 20 targets
    if ties:
        X = np.round(X, 1)
    X[30] = 1.0
    genes = [f"g{(i * 7) % G:02d}" for i in range(G)]  # file order differs from name order
    reg_idx = np.array([4, 0, 3, 1, 2, 30, 33], dtype=np.int64)
    pr, pt = np.meshgrid(reg_idx, np.arange(G), indexing="ij")
    pi = np.round(rng.random(pr.size), 2)
    pi[rng.random(pr.size) < 0.3] = 0.5
    prior = _prior(pr.ravel(), pt.ravel(), pi)
    got = check_prior_relabel(X.astype(np.float32), genes, reg_idx, prior, level=0.05, seed=seed, permutations=B)
    obs, null = _reference(X.astype(np.float32).astype(np.float64), genes, reg_idx, prior, seed, B)
    assert got["z"] == pytest.approx((obs - null.mean()) / null.std(ddof=1), rel=1e-3, abs=1e-3)
    lo, hi = (1 + np.sum(null <= obs)) / (B + 1), (1 + np.sum(null >= obs)) / (B + 1)
    assert got["p"] == pytest.approx(min(1.0, 2 * min(lo, hi)), rel=1e-5)
    assert got["decision"] == ("kept" if got["p"] < 0.05 else "off")
    assert got["direction"] == ("higher" if obs > null.mean() else "lower")
    assert got["prior_pairs"] == int(np.sum((pi != 0.5) & (pr.ravel() != pt.ravel())))


def _relabelled(prior: Prior, regs: np.ndarray, G: int, rng) -> Prior:
    """``prior`` with its gene ids swapped: regulators among the regulators, targets among the genes."""
    rmap = np.arange(G)
    rmap[regs] = regs[rng.permutation(len(regs))]
    tmap = rng.permutation(G)
    return _prior(rmap[prior.reg], tmap[prior.tgt], prior.pi)


def test_a_prior_with_swapped_ids_is_kept_at_most_at_the_level(expr, regs):
    """200 relabellings of the gold prior at level 0.05: kept about 5 % of the time (binomial: <= 20 of 200 with
    probability > 0.999 when the true rate is 0.05), the gold prior itself kept."""
    ids = {g: i for i, g in enumerate(expr.genes)}
    rows = _gold_rows()
    gold = _prior([ids[r] for r, _, _ in rows], [ids[t] for _, t, _ in rows], [1.0] * len(rows))
    check = lambda p, s: check_prior_relabel(expr.values, expr.genes, regs, p, 0.05, s, 99)  # noqa: E731
    assert check(gold, 0)["decision"] == "kept"
    rng = np.random.default_rng(7)
    kept = sum(check(_relabelled(gold, regs, expr.n_genes, rng), s)["decision"] == "kept" for s in range(200))
    assert 1 <= kept <= 20, kept


def test_a_prior_of_less_associated_pairs_is_kept_where_the_correlation_test_drops_it():
    """The supported pairs are those a target associates with *less* than its other regulators (issue 56's
    Arabidopsis set: direct targets are not a TF's most correlated genes): dependence on the data all the same, so
    the two-sided relabelling test keeps the prior (direction 'lower'); the one-sided correlation test turns it off."""
    rng = np.random.default_rng(3)
    R, G, n = 12, 150, 40
    X = rng.normal(size=(G, n))
    X[R:] += 0.9 * X[rng.integers(0, R, G - R)]  # each target driven by one regulator
    genes = [f"g{i:03d}" for i in range(G)]
    reg_idx = np.arange(R)
    rho2 = stats.spearmanr(X, axis=1).statistic[:R] ** 2
    rows, cols = [], []
    for t in range(R, G):  # per target: the 3 regulators least associated with it
        for r in np.argsort(rho2[:, t])[:3]:
            rows.append(r)
            cols.append(t)
    prior = _prior(rows, cols, [1.0] * len(rows))
    got = check_prior_relabel(X, genes, reg_idx, prior, seed=0)
    assert got["decision"] == "kept" and got["direction"] == "lower" and got["z"] < -3
    assert got["rho2_mean_supported"] < got["rho2_mean_other"]
    assert check_prior(X, genes, reg_idx, prior)["decision"] == "off"


def test_untestable_priors_say_why(expr, regs):
    one = check_prior_relabel(expr.values, expr.genes, regs[:1], _prior([regs[0]], [10], [1.0]))
    assert one["decision"] == "off" and one["z"] is None and one["untestable"].startswith("one candidate regulator")
    flat = check_prior_relabel(expr.values, expr.genes, regs, _prior(regs, regs[::-1], [0.5] * len(regs)))
    assert flat["z"] is None and flat["untestable"].startswith("the prior gives no candidate pair a value")


def _genie3(tmp, *extra, out="links.tsv.gz"):
    return run_in_process(*base(tmp, "--threads", "1", *extra, out=out, trees=30))


def test_cli_keeps_the_gold_prior_and_turns_an_uninformative_one_off_with_one_line_each(tmp_path, expr):
    good = _write_prior(tmp_path / "good.tsv", _gold_rows())
    bad = _write_prior(tmp_path / "bad.tsv", uninformative_prior_rows(expr.genes))
    _genie3(tmp_path, out="plain.tsv.gz")
    p = _genie3(tmp_path, "--prior", good, "--summary", tmp_path / "g.json", "--metrics", tmp_path / "gm.json",
                out="good.tsv.gz")  # fmt: skip
    g = json.loads((tmp_path / "g.json").read_text())["prior_check"]
    assert g["gate"] == "relabel" and g["decision"] == "kept" and g["p"] < 0.01 and g["direction"] == "higher"
    m = json.loads((tmp_path / "gm.json").read_text())
    assert m["prior_check"] == "kept" and m["prior_check_gate"] == "relabel"
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"chromaflow genie3: {good}: prior check (relabelling test)")
    assert f"z = {g['z']}" in lines[0] and lines[0].endswith("prior kept")
    _genie3(tmp_path, "--prior", good, "--prior-check", "off", out="good_off.tsv.gz")
    assert (tmp_path / "good.tsv.gz").read_bytes() == (tmp_path / "good_off.tsv.gz").read_bytes()
    p = _genie3(tmp_path, "--prior", bad, "--summary", tmp_path / "b.json", out="bad.tsv.gz")
    b = json.loads((tmp_path / "b.json").read_text())["prior_check"]
    assert b["decision"] == "off" and b["p"] >= 0.01
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"chromaflow genie3: warning: {bad}: prior check")
    assert f"p = {b['p']:.3g}" in lines[0] and "--prior-check off uses it anyway" in lines[0]
    assert (tmp_path / "bad.tsv.gz").read_bytes() == (tmp_path / "plain.tsv.gz").read_bytes()
