"""genie3 --prior-check (issue 29): the data-driven test of the prior before the weighted forest.

The correlation test (``--prior-check correlation``, the default before issue 56) is checked against scipy (ranks:
rankdata; Spearman: spearmanr; one target: the exact permutation distribution, permutation_test); the CLI keeps an
informative prior (the fixture's gold edges) and turns an uninformative one (the fixture prior of
test_genie3_prior.py, shuffled values) off, with the bytes of a run without --prior. With the default check (the
relabelling test, tests/genie3/test_genie3_prior_relabel.py) the decision is order-invariant and the same in every
target chunk."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from scipy import stats

from chromaflow.genie3 import expression
from chromaflow.genie3.prior import Prior
from chromaflow.genie3.prior_check import check_prior, ranks2
from helpers.cli import assert_one_line_error, run_in_process
from helpers.genie3_files import EXPR, REGS, base, uninformative_prior_rows
from helpers.genie3_files import gold_prior_rows as _gold_rows
from helpers.genie3_files import write_prior as _write_prior


@pytest.fixture(scope="module", autouse=True)
def _kernel(genie3_kernel):
    """The CLI tests need the fast engine's kernel (tests/genie3/conftest.py)."""


@pytest.fixture(scope="module")
def expr():
    return expression.read_expression(EXPR, "samples-x-genes")


def _genie3(tmp, *extra, expr_path=EXPR, regs=REGS, out="links.tsv.gz", check=True):
    args = base(tmp, "--threads", "1", *extra, out=out, trees=30, expression=expr_path, regulators=regs)
    return run_in_process(*args, check=check)


# ------------------------------------------------------------------------------------------ the statistic
def test_ranks_are_scipys_average_ranks():
    x = np.random.default_rng(1).integers(0, 6, size=(7, 40)).astype(np.float64)  # many ties
    x[3] = 2.0  # a constant row
    assert np.array_equal(ranks2(x), 2 * stats.rankdata(x, axis=1, method="average"))


def _one_target(seed, n=40, R=12, ties=False):
    """Genes T (the target) + R1..RR; the target depends on R1-R3; prior on T's regulators only."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(R, n))
    if ties:
        X = np.round(X, 0)
    t = X[0] + 0.7 * X[1] - 0.5 * X[2] + rng.normal(size=n)
    values = np.vstack([t, X]).astype(np.float32)
    genes = ["T"] + [f"R{i + 1}" for i in range(R)]
    return values, genes


@pytest.mark.parametrize("seed,ties", [(1, False), (2, True), (3, False)])
def test_one_target_is_the_permutation_test_of_spearman_squared(seed, ties):
    """One target stratum: z = (S - E S) / sd S of the exact permutation distribution (scipy.stats.permutation_test,
    every assignment enumerated) of the summed rho^2 (scipy.stats.spearmanr) of the supported regulators."""
    values, genes = _one_target(seed, ties=ties)
    R = len(genes) - 1
    sup = np.random.default_rng(seed + 10).random(R) < 0.4
    sup[0] = True
    prior = Prior(
        reg=np.arange(1, R + 1),
        tgt=np.zeros(R, dtype=np.int64),
        pi=sup.astype(float),
        layout="long",
        pairs_read=R,
        ignored=0,
        path="x",
    )
    got = check_prior(values, genes, np.arange(1, R + 1), prior)
    a = np.array([stats.spearmanr(values[0], values[i]).statistic ** 2 for i in range(1, R + 1)])
    ref = stats.permutation_test(
        (a[sup], a[~sup]),
        lambda x, y, axis: np.sum(x, axis=axis),
        permutation_type="independent",
        n_resamples=np.inf,
        alternative="greater",
        vectorized=True,
    )
    z = (np.sum(a[sup]) - ref.null_distribution.mean()) / ref.null_distribution.std()
    assert got["targets_tested"] == 1  # the regulators as targets: all pi 0.5, nothing to test
    assert got["z"] == pytest.approx(z, rel=1e-5)
    assert got["p"] == pytest.approx(stats.norm.sf(z), rel=1e-4)
    assert got["rho2_mean_supported"] == pytest.approx(a[sup].mean(), rel=1e-5)


def test_a_prior_constant_within_every_target_is_untestable_and_off(expr):
    """pi the same for all of a target's regulators changes no draw: no evidence either way -> off, p = 1."""
    G = expr.n_genes
    prior = Prior(
        reg=np.zeros(G - 1, dtype=np.int64),
        tgt=np.arange(1, G),
        pi=np.ones(G - 1),
        layout="long",
        pairs_read=G - 1,
        ignored=0,
        path="x",
    )
    got = check_prior(expr.values, expr.genes, np.array([0]), prior)
    assert got["decision"] == "off" and got["p"] == 1.0 and got["z"] is None and got["targets_tested"] == 0


# ------------------------------------------------------------------------------------------ the CLI
def test_informative_prior_is_kept_and_uninformative_turned_off(tmp_path, expr):
    good = _write_prior(tmp_path / "good.tsv", _gold_rows())
    bad = _write_prior(tmp_path / "bad.tsv", uninformative_prior_rows(expr.genes))
    _genie3(tmp_path, out="plain.tsv.gz")
    corr = ("--prior-check", "correlation")
    p = _genie3(
        tmp_path,
        "--prior",
        good,
        *corr,
        "--summary",
        tmp_path / "g.json",
        "--metrics",
        tmp_path / "gm.json",
        out="good.tsv.gz",
    )
    assert p.stderr == ""  # kept: no warning
    _genie3(tmp_path, "--prior", good, "--prior-check", "off", out="good_off.tsv.gz")
    g = json.loads((tmp_path / "g.json").read_text())["prior_check"]
    assert "gate" not in g and g["decision"] == "kept" and g["p"] < 1e-4 and g["z"] > 3 and g["level"] == 0.01
    assert json.loads((tmp_path / "gm.json").read_text())["prior_check"] == "kept"
    # kept: the weighted forest at the alpha asked for (the bytes of --prior-check off), not plain GENIE3
    assert (tmp_path / "good.tsv.gz").read_bytes() == (tmp_path / "good_off.tsv.gz").read_bytes()
    assert (tmp_path / "good.tsv.gz").read_bytes() != (tmp_path / "plain.tsv.gz").read_bytes()
    p = _genie3(tmp_path, "--prior", bad, *corr, "--summary", tmp_path / "b.json", out="bad.tsv.gz")
    b = json.loads((tmp_path / "b.json").read_text())["prior_check"]
    assert b["decision"] == "off" and b["p"] >= 0.01
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("chromaflow genie3: warning: ") and str(bad) in lines[0]
    assert f"p = {b['p']:.3g}" in lines[0] and "--prior-check off" in lines[0]
    # off: the very bytes of a run without --prior; with --prior-check off the shuffled prior does act
    assert (tmp_path / "bad.tsv.gz").read_bytes() == (tmp_path / "plain.tsv.gz").read_bytes()
    _genie3(tmp_path, "--prior", bad, "--prior-check", "off", out="bad_off.tsv.gz")
    assert (tmp_path / "bad_off.tsv.gz").read_bytes() != (tmp_path / "plain.tsv.gz").read_bytes()
    # a level above the shuffled prior's p keeps it
    _genie3(
        tmp_path,
        "--prior",
        bad,
        *corr,
        "--prior-check-level",
        "0.999",
        "--summary",
        tmp_path / "b2.json",
        out="bad_kept.tsv.gz",
    )
    assert json.loads((tmp_path / "b2.json").read_text())["prior_check"]["decision"] == "kept"
    assert (tmp_path / "bad_kept.tsv.gz").read_bytes() == (tmp_path / "bad_off.tsv.gz").read_bytes()


def _permuted(tmp, expr, seed):
    rng = np.random.default_rng(seed)
    gp, sp = rng.permutation(expr.n_genes), rng.permutation(expr.n_samples)
    lines = ["\t".join(expr.genes[g] for g in gp)] + ["\t".join(f"{expr.values[g, s]:.7f}" for g in gp) for s in sp]
    (tmp / f"perm{seed}.tsv").write_text("\n".join(lines) + "\n")
    regs = [ln for ln in REGS.read_text().splitlines() if ln.strip()]
    (tmp / f"regs{seed}.txt").write_text("\n".join(regs[i] for i in rng.permutation(len(regs))) + "\n")
    rows = _gold_rows()
    _write_prior(tmp / f"prior{seed}.tsv", [rows[i] for i in rng.permutation(len(rows))])
    return tmp / f"perm{seed}.tsv", tmp / f"regs{seed}.txt", tmp / f"prior{seed}.tsv"


def test_permuted_inputs_give_the_same_check_and_links(tmp_path, expr):
    """Genes, samples, regulators and prior rows permuted: the same links and the same summary (decision, z, p)."""
    lines = ["\t".join(expr.genes)] + [
        "\t".join(f"{expr.values[g, s]:.7f}" for g in range(expr.n_genes)) for s in range(expr.n_samples)
    ]
    (tmp_path / "canon.tsv").write_text("\n".join(lines) + "\n")
    prior = _write_prior(tmp_path / "prior.tsv", _gold_rows())
    _genie3(
        tmp_path,
        "--prior",
        prior,
        "--summary",
        tmp_path / "ref.json",
        expr_path=tmp_path / "canon.tsv",
        out="ref.tsv.gz",
    )
    assert json.loads((tmp_path / "ref.json").read_text())["prior_check"]["decision"] == "kept"
    for seed in (1, 2):
        e, r, p = _permuted(tmp_path, expr, seed)
        _genie3(
            tmp_path, "--prior", p, "--summary", tmp_path / f"s{seed}.json", expr_path=e, regs=r, out=f"p{seed}.tsv.gz"
        )
        assert (tmp_path / f"p{seed}.tsv.gz").read_bytes() == (tmp_path / "ref.tsv.gz").read_bytes()
        assert (
            json.loads((tmp_path / f"s{seed}.json").read_text())["prior_check"]
            == json.loads((tmp_path / "ref.json").read_text())["prior_check"]
        )


@pytest.mark.parametrize("kind", ["good", "bad"])
def test_every_chunk_takes_the_decision_of_the_whole_run(tmp_path, expr, kind):
    rows = _gold_rows() if kind == "good" else uninformative_prior_rows(expr.genes)
    prior = _write_prior(tmp_path / "prior.tsv", rows)
    _genie3(tmp_path, "--prior", prior, "--summary", tmp_path / "one.json", out="one.tsv.gz", regs=None)
    parts = []
    for i in (1, 2, 3):
        _genie3(tmp_path, "--prior", prior, "--targets-chunk", f"{i}/3", out=f"part{i}.npz", regs=None)
        parts.append(str(tmp_path / f"part{i}.npz"))
    with np.load(parts[0]) as z:
        first = json.loads(str(z["meta"]))["prior_check"]
    for p in parts[1:]:
        with np.load(p) as z:
            assert json.loads(str(z["meta"]))["prior_check"] == first
    run_in_process(
        "genie3-merge", *parts, "--out", str(tmp_path / "merged.tsv.gz"), "--summary", str(tmp_path / "merged.json")
    )
    assert (tmp_path / "merged.tsv.gz").read_bytes() == (tmp_path / "one.tsv.gz").read_bytes()
    assert json.loads((tmp_path / "merged.json").read_text()) == json.loads((tmp_path / "one.json").read_text())
    assert first["decision"] == ("kept" if kind == "good" else "off")
    # a part of a run that skipped the check is not merged with these
    _genie3(tmp_path, "--prior", prior, "--prior-check", "off", "--targets-chunk", "3/3", out="other3.npz", regs=None)
    p = run_in_process(
        "genie3-merge", *parts[:2], str(tmp_path / "other3.npz"), "--out", str(tmp_path / "m2.tsv.gz"), check=False
    )
    assert_one_line_error(p, "genie3-merge", "prior_check differs")


@pytest.mark.parametrize(
    "extra,needles",
    [
        (["--prior-check-level", "0.05"], ("--prior-check-level needs --prior",)),
        (["--prior", "{p}", "--prior-check", "off", "--prior-check-level", "0.05"], ("needs --prior with",)),
        (["--prior", "{p}", "--prior-check-level", "1"], ("must be in (0, 1)",)),
    ],
)
def test_bad_check_options_are_one_line(tmp_path, extra, needles):
    p = _write_prior(tmp_path / "p.tsv", _gold_rows())
    proc = _genie3(tmp_path, *[e.format(p=p) for e in extra], check=False)
    assert_one_line_error(proc, "genie3", *needles)
    assert not (tmp_path / "links.tsv.gz").exists()


def test_alpha_zero_skips_the_check(tmp_path, expr):
    bad = _write_prior(tmp_path / "bad.tsv", uninformative_prior_rows(expr.genes))
    p = _genie3(tmp_path, "--prior", bad, "--prior-alpha", "0", "--summary", tmp_path / "s.json")
    assert p.stderr == "" and "prior_check" not in json.loads((tmp_path / "s.json").read_text())
    with gzip.open(tmp_path / "links.tsv.gz", "rt") as fh:
        assert fh.readline().startswith("regulator")
