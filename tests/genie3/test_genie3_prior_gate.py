"""genie3 --prior-check prediction (issue 56): the prediction gate, the forest with the prior against the forest with
the prior's values permuted over each target's regulators, compared by their out-of-bag errors.

The kernel's out-of-bag rows leave the forest's bytes alone and agree with scikit-learn's OOB predictions; the
signed-rank test is scipy's; the CLI keeps the fixture's gold prior and drops an uninformative one (with the bytes of
the run without --prior, or of --prior-check off where kept), the same bytes twice, the same in chunks, a bounded
number of forests grown, one-line errors for bad options."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from chromaflow.genie3 import core, expression, fast
from chromaflow.genie3.network import NetworkOptions, run
from chromaflow.genie3.prior import Prior
from chromaflow.genie3.prior_gate import MIN_TARGETS, permuted_prior, sample_targets, signed_rank_test
from helpers.cli import assert_one_line_error, run_in_process
from helpers.genie3_files import EXPR, REGS, base, uninformative_prior_rows
from helpers.genie3_files import gold_prior_rows as _gold_rows
from helpers.genie3_files import write_prior as _write_prior


@pytest.fixture(scope="module", autouse=True)
def _kernel(genie3_kernel):
    """The gate needs the fast engine's kernel (tests/genie3/conftest.py)."""


@pytest.fixture(scope="module")
def expr():
    return expression.read_expression(EXPR, "samples-x-genes")


def _genie3(tmp, *extra, out="links.tsv.gz", check=True, trees=100):
    return run_in_process(*base(tmp, "--threads", "1", *extra, out=out, trees=trees), check=check)


# ------------------------------------------------------------------------------------------ the kernel's OOB rows
@pytest.mark.parametrize("importance", ["unnormalised", "tree-normalised"])
def test_oob_rows_leave_the_rf_forest_unchanged(expr, importance):
    regs, tg = np.arange(expr.n_genes), np.arange(expr.n_genes)
    o = core.Options(n_trees=50, importance=importance)
    plain, _ = core.compute_weights(expr.values, expr.genes, regs, tg, o, 1)
    oob = np.zeros((len(tg), 2))
    with_oob, _ = core.compute_weights(expr.values, expr.genes, regs, tg, o, 1, oob=oob)
    assert plain.tobytes() == with_oob.tobytes()
    assert np.all(oob[:, 1] == expr.n_samples) and np.all((oob[:, 0] > 0) & (oob[:, 0] < 2))


def test_oob_error_agrees_with_scikit_learns(expr):
    """The mean squared OOB error of y = x / sd per target, ours (600 trees) against scikit-learn's
    RandomForestRegressor(oob_score=True) with the same K (mean of 2 seeds): the same quantity within forest noise
    (measured: within 0.02 at 2000 trees on these targets)."""
    from sklearn.ensemble import RandomForestRegressor

    regs, tg = np.arange(expr.n_genes), np.arange(2)
    oob = np.zeros((len(tg), 2))
    core.compute_weights(expr.values, expr.genes, regs, tg, core.Options(n_trees=600), 1, oob=oob)
    for j in tg:
        X = np.delete(expr.values, j, axis=0).T.astype(np.float64)
        y = expr.values[j] / np.std(expr.values[j].astype(np.float64))
        ref = []
        for rs in (0, 1):
            m = RandomForestRegressor(600, max_features=int(math.sqrt(X.shape[1])), oob_score=True, random_state=rs)
            ref.append(np.mean((y - m.fit(X, y).oob_prediction_) ** 2))
        assert abs(oob[j, 0] - np.mean(ref)) < 0.04, (j, oob[j, 0], ref)


# ------------------------------------------------------------------------------------------ the statistic
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_signed_rank_test_is_scipys(seed):
    d = np.round(np.random.default_rng(seed).normal(0.1, 1, size=40), 1)  # ties and zeros
    d[:3] = 0.0
    got = signed_rank_test(d)
    ref = stats.wilcoxon(d, alternative="greater", zero_method="wilcox", correction=False, method="approx")
    assert got["n"] == np.count_nonzero(d) and got["p_better"] == pytest.approx(ref.pvalue, rel=1e-9)
    assert got["p_worse"] == pytest.approx(1 - ref.pvalue, rel=1e-9)


def test_permuted_prior_keeps_each_targets_values(expr):
    """The null prior gives each sampled target the same multiset of values over its regulators, not the same
    assignment; the sample is the first targets by a seeded hash, whatever the order of the candidates."""
    rows = _gold_rows()
    gi = {g: i for i, g in enumerate(expr.genes)}
    prior = Prior(
        reg=np.array([gi[r] for r, _, _ in rows]),
        tgt=np.array([gi[t] for _, t, _ in rows]),
        pi=np.ones(len(rows)),
        layout="long",
        pairs_read=len(rows),
        ignored=0,
        path="p",
    )
    regs = np.array([gi[r] for r in REGS.read_text().split()])
    tg = sample_targets(expr.genes, np.arange(expr.n_genes), 0, 0.15)
    assert len(tg) == min(expr.n_genes, MIN_TARGETS)
    assert np.array_equal(tg, sample_targets(expr.genes, np.arange(expr.n_genes)[::-1], 0, 0.15))
    perm = permuted_prior(prior, expr.genes, regs, tg, 0)
    moved = 0
    for t in tg:
        ones_t = int(np.sum(prior.tgt == t))
        orig = sorted([1.0] * ones_t + [0.5] * (len(regs) - (t in regs) - ones_t))
        assert sorted(perm.pi[perm.tgt == t].tolist()) == orig
        ones = set(perm.reg[(perm.tgt == t) & (perm.pi == 1)].tolist())
        moved += ones != set(prior.reg[prior.tgt == t].tolist())
    assert moved > 0


# ------------------------------------------------------------------------------------------ the CLI
def test_gate_keeps_the_gold_prior_and_drops_an_uninformative_one(tmp_path, expr):
    good = _write_prior(tmp_path / "good.tsv", _gold_rows())
    bad = _write_prior(tmp_path / "bad.tsv", uninformative_prior_rows(expr.genes))
    _genie3(tmp_path, out="plain.tsv.gz")
    gate = ("--prior-check", "prediction")
    p = _genie3(tmp_path, "--prior", good, *gate, "--summary", tmp_path / "g.json", out="good.tsv.gz")
    g = json.loads((tmp_path / "g.json").read_text())["prior_check"]
    assert g["gate"] == "prediction" and g["decision"] == "kept" and g["p"] < 0.01 and g["z"] > 2.33
    assert g["oob_error_mean_prior"] < g["oob_error_mean_permuted"]
    lines = p.stderr.strip().splitlines()  # kept: one line saying what was measured and decided
    assert len(lines) == 1 and "prior kept" in lines[0] and f"z = {g['z']:.3g}" in lines[0]
    _genie3(tmp_path, "--prior", good, "--prior-check", "off", out="good_off.tsv.gz")
    assert (tmp_path / "good.tsv.gz").read_bytes() == (tmp_path / "good_off.tsv.gz").read_bytes()
    p = _genie3(tmp_path, "--prior", bad, *gate, "--summary", tmp_path / "b.json", out="bad.tsv.gz")
    b = json.loads((tmp_path / "b.json").read_text())["prior_check"]
    assert b["decision"] == "off" and b["p"] >= 0.01
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("chromaflow genie3: warning: ") and str(bad) in lines[0]
    assert f"p = {b['p']:.3g}" in lines[0] and "--prior-check off" in lines[0]
    assert (tmp_path / "bad.tsv.gz").read_bytes() == (tmp_path / "plain.tsv.gz").read_bytes()


def test_gate_is_deterministic_and_the_same_in_chunks(tmp_path):
    good = _write_prior(tmp_path / "good.tsv", _gold_rows())
    gate = ("--prior", good, "--prior-check", "prediction")
    for name in ("a", "b"):
        _genie3(tmp_path, *gate, "--summary", tmp_path / f"{name}.json", out=f"{name}.tsv.gz")
    assert (tmp_path / "a.tsv.gz").read_bytes() == (tmp_path / "b.tsv.gz").read_bytes()
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    for i in (1, 2):
        _genie3(tmp_path, *gate, "--targets-chunk", f"{i}/2", out=f"part{i}.npz")
    run_in_process(
        "genie3-merge", "--out", tmp_path / "m.tsv.gz", "--summary", tmp_path / "m.json",
        tmp_path / "part1.npz", tmp_path / "part2.npz",
    )  # fmt: skip
    assert (tmp_path / "m.tsv.gz").read_bytes() == (tmp_path / "a.tsv.gz").read_bytes()
    assert json.loads((tmp_path / "m.json").read_text()) == json.loads((tmp_path / "a.json").read_text())


def _random_set(tmp: Path, genes: int, samples: int, regs: int, informative: bool):
    """A random expression (samples x genes) whose first genes are the regulators and, when ``informative``, every
    other gene driven by one regulator named by the prior (pi 1; the other regulators 0)."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(samples, genes))
    names = [f"G{i:03d}" for i in range(genes)]
    driver = rng.integers(0, regs, size=genes)
    if informative:
        X[:, regs:] += 2 * X[:, driver[regs:]]
    (tmp / "e.tsv").write_text("\t".join(names) + "\n" + "".join("\t".join(f"{v:.5f}" for v in r) + "\n" for r in X))
    (tmp / "r.txt").write_text("".join(f"{n}\n" for n in names[:regs]))
    rows = [(names[r], names[t], int(driver[t] == r)) for t in range(regs, genes) for r in range(regs)]
    return tmp / "e.tsv", tmp / "r.txt", _write_prior(tmp / "p.tsv", rows)


@pytest.mark.parametrize("informative", [True, False], ids=["kept", "off"])
def test_gate_cost_is_counted_in_forests(tmp_path, monkeypatch, informative):
    """The forests grown (targets through the kernel, counted): a plain run grows one per gene; the gate samples
    S = max(ceil(0.1 x genes), 30) targets and grows two forests each; a kept RF prior takes its S forests from the
    gate: genes + S in all (1.1x at 400 genes), an off one genes + 2 S (1.2x)."""
    e, r, p = _random_set(tmp_path, 400, 24, 8, informative)
    grown = []
    real = fast.run

    def counting(lib, values, tables, regs, targets, *a, **k):
        grown.append(len(targets))
        return real(lib, values, tables, regs, targets, *a, **k)

    monkeypatch.setattr(fast, "run", counting)
    o = NetworkOptions(
        expression=str(e), layout="samples-x-genes", regulators=str(r), n_trees=20, threads=1, prior=str(p),
        prior_check="prediction", out=str(tmp_path / "l.tsv"), summary=str(tmp_path / "s.json"),
    )  # fmt: skip
    run(o)
    check = json.loads((tmp_path / "s.json").read_text())["prior_check"]
    S = check["targets_sampled"]
    assert S == math.ceil(0.1 * 400) and check["trees_grown"] == 2 * S * 20
    assert check["decision"] == ("kept" if informative else "off")
    assert sum(grown) == 400 + (S if informative else 2 * S) <= 1.2 * 400


@pytest.mark.parametrize(
    "extra,needles",
    [
        (["--prior", "{p}", "--prior-check", "prediction", "--prior-check-targets", "0"], ("--prior-check-targets",)),
        (["--prior", "{p}", "--prior-check", "prediction", "--prior-check-targets", "1.5"], ("must be in (0, 1]",)),
        (["--prior", "{p}", "--prior-check-targets", "0.5"], ("--prior-check-targets needs", "prediction")),
        (["--prior", "{p}", "--prior-check", "prediction", "--prior-check-level", "0"], ("--prior-check-level",)),
    ],
)
def test_bad_gate_options_are_one_line(tmp_path, extra, needles):
    p = _write_prior(tmp_path / "p.tsv", _gold_rows())
    proc = _genie3(tmp_path, *[x.format(p=p) for x in extra], check=False)
    assert_one_line_error(proc, "genie3", *needles)
    assert not (tmp_path / "links.tsv.gz").exists()
