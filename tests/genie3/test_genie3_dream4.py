"""GENIE3 accuracy on DREAM4 size-100 multifactorial (read in place from ../shared/reference) and
agreement between the fast and the scikit-learn engines.

The reference values are the reference GENIE3 rows of dream4/ANCHORS.md (1000 trees, seed = network), read
at run time. Tolerances: ANCHORS.md shows the reference's own seed-to-seed differences on net 1 and its
differences from a published re-run are below 0.01 AUPR per network, so each network may differ by 0.02
AUROC/AUPR. Over the 5 networks x 2 seeds the mean must be within 0.007 AUPR / 0.006 AUROC of the reference
mean: the mean of one 5-network run of ours varies by sd 0.0020 AUPR from seed to seed (12 seeds measured),
so a correct engine fails with probability < 1e-3, while a systematic loss of 0.01 AUPR fails.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from scipy.stats import spearmanr

from chromaflow.genie3 import dream4, expression
from chromaflow.genie3.core import Options, compute_weights


@pytest.fixture(scope="module", autouse=True)
def _kernel(genie3_kernel):
    """Every test here needs the fast engine's kernel (tests/genie3/conftest.py)."""


def _anchors(reference_dir, method="reference GENIE3"):
    """{net: (AUROC, AUPR)} of `method` at 1000 trees, read from the per-network table of ANCHORS.md (in place:
    no reference figure is typed into this file)."""
    out = {}
    for line in (reference_dir / "dream4" / "ANCHORS.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 6 and cells[0] == method and cells[1].isdigit() and cells[3] == "1000":
            out.setdefault(int(cells[1]), (float(cells[4]), float(cells[5])))
    assert sorted(out) == [1, 2, 3, 4, 5], f"ANCHORS.md: {method} rows not found"
    return out


def _load(reference_dir, net):
    d = reference_dir / "dream4"
    expr = expression.read_expression(d / f"insilico_size100_{net}_multifactorial.tsv", "samples-x-genes")
    return expr, dream4.read_gold(d / f"DREAM4_GoldStandard_InSilico_Size100_multifactorial_{net}.tsv")


def _score(W, gold, genes):
    """AUROC, AUPR over the gold standard's 9,900 ordered pairs (the package's DREAM4 scorer)."""
    s = dream4.score(gold, dream4.matrix_weights(W, genes, genes))
    assert s["pairs"] == 9900
    return s["auroc"], s["aupr"]


def test_fast_engine_matches_reference_accuracy(reference_dir):
    """5 networks x 2 seeds at the reference's 1000 trees (about 20 CPU-s)."""
    ANCHOR = _anchors(reference_dir)
    ANCHOR_MEAN = np.mean([ANCHOR[n] for n in range(1, 6)], axis=0)
    aurocs, auprs, sums = [], [], []
    for net in range(1, 6):
        expr, gold = _load(reference_dir, net)
        assert expr.genes == [f"G{i}" for i in range(1, 101)]
        for seed in (net, net + 10):
            W, _ = compute_weights(
                expr.values,
                expr.genes,
                np.arange(100),
                np.arange(100),
                Options(n_trees=1000, seed=seed, engine="fast"),
                threads=2,
            )
            auroc, ap = _score(W, gold, expr.genes)
            assert abs(auroc - ANCHOR[net][0]) <= 0.02, (net, seed, auroc)
            assert abs(ap - ANCHOR[net][1]) <= 0.02, (net, seed, ap)
            aurocs.append(auroc)
            auprs.append(ap)
            sums.append(W.sum(axis=0))
    # the reference's unnormalised importances: each target sums to ~1 (0.935-1.047), the VIM to ~99
    sums = np.concatenate(sums)
    assert 0.9 < sums.min() and sums.max() < 1.1, (sums.min(), sums.max())
    assert 0.98 < sums.mean() < 0.995, sums.mean()  # E[bootstrap variance of y/std] = (n-1)/n = 0.99
    assert abs(np.mean(aurocs) - ANCHOR_MEAN[0]) <= 0.006, np.mean(aurocs)
    assert abs(np.mean(auprs) - ANCHOR_MEAN[1]) <= 0.007, np.mean(auprs)


@pytest.mark.parametrize("method,trees", [("RF", 2000), ("ET", 1000)])
def test_engines_agree(reference_dir, method, trees):
    """5 targets: fast vs sklearn importance ranking as close as fast vs fast with another seed
    (measured: RF/2000 trees 0.954 vs 0.956; ET/1000 trees 0.939 vs 0.924)."""
    expr, _ = _load(reference_dir, 1)
    targets = np.arange(0, 100, 20)
    regs = np.arange(100)

    def run(engine, seed):
        opts = Options(n_trees=trees, seed=seed, engine=engine, tree_method=method)
        return compute_weights(expr.values, expr.genes, regs, targets, opts, 2)[0]

    sk, f1, f2 = run("sklearn", 1), run("fast", 1), run("fast", 2)
    mask = np.ones(sk.shape, dtype=bool)
    mask[targets, np.arange(len(targets))] = False
    rho_engines = spearmanr(sk[mask], f1[mask])[0]
    rho_seeds = spearmanr(f1[mask], f2[mask])[0]
    assert rho_engines > 0.9, rho_engines
    assert rho_engines >= rho_seeds - 0.03, (rho_engines, rho_seeds)
    # same scale: unnormalised MDI of fully grown trees sums to ~1 per target in both engines
    np.testing.assert_allclose(sk.sum(axis=0), f1.sum(axis=0), atol=0.03)


@pytest.mark.parametrize("engine", ["fast", "sklearn"])
def test_tree_normalised_importance_is_scikit_learns(reference_dir, engine):
    """--importance tree-normalised = scikit-learn's feature_importances_ (arboreto's score): every target's
    column sums to 1; the fast engine ranks like scikit-learn's forest does (checked on 5 targets of net 1);
    the unnormalised default of the same seed grows the same trees, so its ranking is close but not equal."""
    targets = np.arange(0, 100, 20)
    opts = dict(n_trees=1000, seed=3, engine=engine)
    tn = _net1_weights(reference_dir, tuple(targets), importance="tree-normalised", **opts)
    np.testing.assert_allclose(tn.sum(axis=0), 1.0, rtol=1e-12)
    un = _net1_weights(reference_dir, tuple(targets), **opts)
    assert not np.allclose(un.sum(axis=0), 1.0, atol=1e-3)
    mask = np.ones(tn.shape, dtype=bool)
    mask[targets, np.arange(len(targets))] = False
    assert spearmanr(tn[mask], un[mask])[0] > 0.99
    if engine == "fast":
        # the [sklearn] case's own tree-normalised forest (same call): computed once in this module
        sk = _net1_weights(
            reference_dir, tuple(targets), importance="tree-normalised", n_trees=1000, seed=3, engine="sklearn"
        )
        assert spearmanr(sk[mask], tn[mask])[0] > 0.9


def _net1_weights(reference_dir, targets: tuple, **opts) -> np.ndarray:
    """compute_weights on net 1, all 100 regulators, 2 threads; a call made again with the same arguments is
    answered from the first (test_tree_normalised_importance_is_scikit_learns: the [fast] case compares with the
    forest the [sklearn] case grows, about 7 CPU-s grown once)."""
    return _net1_weights_once(reference_dir, targets, tuple(sorted(opts.items())))


@functools.lru_cache(maxsize=None)
def _net1_weights_once(reference_dir, targets: tuple, opts: tuple) -> np.ndarray:
    expr, _ = _load(reference_dir, 1)
    W = compute_weights(expr.values, expr.genes, np.arange(100), np.array(targets), Options(**dict(opts)), 2)[0]
    W.flags.writeable = False
    return W


def test_max_features_means_what_scikit_learn_means(reference_dir):
    """K (features tried per split) shapes how concentrated each target's importances are: the share of the
    top 3 regulators grows with K (measured on net 1: ~0.045 at K=1, ~0.086 at K=9, ~0.13 at K=30). The fast
    kernel must match scikit-learn's forest at each K within 8 % (seed-to-seed spread ~3 %), so a kernel that
    ignored K or tried a different number of features fails."""
    expr, _ = _load(reference_dir, 1)
    targets = np.arange(0, 100, 10)

    def top3(engine, mf):
        W = compute_weights(
            expr.values,
            expr.genes,
            np.arange(100),
            targets,
            Options(n_trees=200, seed=4, engine=engine, max_features=mf),
            2,
        )[0]
        return float((np.sort(W, axis=0)[::-1][:3].sum(axis=0) / W.sum(axis=0)).mean())

    shares = []
    for mf in ("1", "sqrt", "30"):
        fast, sk = top3("fast", mf), top3("sklearn", mf)
        assert abs(fast - sk) <= 0.08 * sk, (mf, fast, sk)
        shares.append(fast)
    assert shares[0] * 1.5 < shares[1] and shares[1] * 1.3 < shares[2], shares


def _forest_z_scores(
    reference_dir, net, targets, fast_max_features="sqrt", sk_trees=2000, fast_forests=20, fast_trees=500
):
    """Per (regulator, target): (scikit-learn's mean importance - the fast engine's) / its standard error.
    scikit-learn: one forest of `sk_trees`, the error from its per-tree importances; fast: `fast_forests`
    forests of `fast_trees` (seeds 1000...), the error from their spread. Also returns, over each target's 5
    strongest regulators (by scikit-learn's mean), the variance of the fast engine's forest means divided by
    that of `fast_trees` independent trees (scikit-learn's per-tree variance / `fast_trees`)."""
    from chromaflow.genie3.core import resolve_k
    from chromaflow.genie3.skengine import fit_forest, tree_unnormalised_mdi

    expr, _ = _load(reference_dir, net)
    F = np.stack(
        [
            compute_weights(
                expr.values,
                expr.genes,
                np.arange(100),
                targets,
                Options(n_trees=fast_trees, seed=1000 + s, engine="fast", max_features=fast_max_features),
                2,
            )[0]
            for s in range(fast_forests)
        ]
    )
    z, v_fast, v_iid = [], 0.0, 0.0
    for t, j in enumerate(targets):
        keep = np.flatnonzero(np.arange(100) != j)
        x = expr.values[j].astype(np.float64)
        rf = fit_forest(
            np.ascontiguousarray(expr.values[keep].T),
            x / np.std(x),
            sk_trees,
            resolve_k("sqrt", keep.size),
            "RF",
            random_state=int(j),
            n_jobs=2,
        )
        per = np.stack(list(tree_unnormalised_mdi(rf, keep.size)))
        f = F[:, keep, t]
        se2 = per.var(axis=0, ddof=1) / per.shape[0] + f.var(axis=0, ddof=1) / f.shape[0]
        z.append((per.mean(axis=0) - f.mean(axis=0)) / np.sqrt(se2))
        top = np.argsort(-per.mean(axis=0))[:5]
        v_fast += f[:, top].var(axis=0, ddof=1).sum()
        v_iid += per[:, top].var(axis=0, ddof=1).sum() / fast_trees
    return np.concatenate(z), v_fast / v_iid


def test_fast_importances_are_unbiased_estimates_of_scikit_learns(reference_dir):
    """The fast kernel grows scikit-learn's random forest in distribution, not only in rank order: for every
    (regulator, target) pair of 4 targets of net 3, scikit-learn's mean unnormalised importance (2,000 trees)
    and the fast engine's (20 x 500 trees) differ by a z-score that must look standard normal (396 pairs: mean
    within 0.25, sd 0.8-1.3, at most 2 beyond 4). Measured (about 40 s): kernel v9 mean -0.10, sd 1.03, none
    beyond 4, top-5 variance ratio 0.51 (kernel v8, no root balance: mean -0.13, sd 1.06, ratio 1.09 -- fails);
    at 10,000 trees on 10 targets (a dev run, docs/genie3.md) mean -0.02, sd 1.00, none beyond 4.
    Checked that it fails for a kernel without the bootstrap (mean 0.71, sd 2.39, 35 beyond 4) and one trying
    8 features per split instead of 9 (mean -0.36); 10 instead of 9 is too small a change for this size (mean
    0.13, sd 1.08) -- test_max_features_means_what_scikit_learn_means covers K. Why it matters: the DREAM4
    AUPR differences between us and arboreto (~0.002) are then seed noise and the importance normalisation,
    not a different forest."""
    z, var_ratio = _forest_z_scores(reference_dir, 3, np.array([5, 30, 55, 80]))
    assert abs(z.mean()) < 0.25 and 0.8 < z.std() < 1.3 and (np.abs(z) > 4).sum() <= 2, (
        z.mean(),
        z.std(),
        (np.abs(z) > 4).sum(),
    )
    # ... and with less noise where it matters: the balanced root candidates (kernel v9) make the strongest
    # regulators' importances vary less than independent trees' would (measured 0.4-0.7; kernel v8 without the
    # balance: 1.0-1.15). The z-scores above use the fast engine's own spread, so they stay standard normal.
    assert var_ratio < 0.8, var_ratio
