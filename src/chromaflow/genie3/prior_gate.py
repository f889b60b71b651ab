"""``genie3 --prior-check prediction``: does the prior make the model predict better than chance? (the prediction gate)

On a deterministic sample of targets the gate grows two forests per target, with the run's trees, options and
per-target seeds: one with the prior, one with a null prior, the same prior values permuted at random over the
target's candidate regulators (:func:`permuted_prior`: the same weights, hence the same pressure on the forest, given
to regulators chosen without regard to the data). It compares how well each predicts the samples it did not see:
out-of-bag (OOB) rows, the samples a tree's bootstrap left out, routed down that tree (Breiman 2001; the kernel
returns them, ``_kernel.c``). Per target t, e_t = the mean squared OOB error of the scaled target y = x / sd(x)
(variance 1: the share of the target's variance the forest fails to predict), and d_t = e_t(permuted) - e_t(prior):
positive where the prior's regulators predict better than random ones given the same weights.

Why a permuted prior and not "no prior": a prior at alpha > 0 forces the forest onto its regulators, and direct
regulators are seldom the best predictors of a target, so a forest with an informative motif prior may predict worse
than the plain one while ranking the true edges better (measured on yeast, docs/genie3.md "Prior check"); against the
permuted prior both forests bear the same constraint and only the prior's information differs.

The test: Wilcoxon's signed-rank test of the d_t over the sampled targets (zeros left out: targets whose two forests
are identical), normal approximation with the tie correction. Null hypothesis: the prior's values are assigned to
each target's regulators independently of the data (then the two forests are exchangeable and the d_t symmetric
about 0). The prior is kept when the one-sided p = P(Z >= z) < the level (``--prior-check-level``, default 0.01);
otherwise the run falls back to alpha 0 (the bytes of a run without ``--prior``).

Cost: the sampled targets are grown twice; with RF, when the prior is kept, the run takes the sampled targets' prior
forests from the gate (the same bytes: the OOB rows add no random draw), so a run pays 1 + S/G forests per gene
(S sampled of G genes) when the prior is kept and 1 + 2 S/G when it is not; ET's gate forests are bagged (the only
way to have OOB rows) and never reused: 1 + 2 S/G.

Sample: the non-constant targets whose prior values differ over their candidate regulators (the others grow the same
forest either way), ordered by BLAKE2b(gene name, key = the run seed, person ``chromaflow-g3g``), the first
max(ceil(fraction x genes), 30) of them (all, if fewer). It depends on the whole matrix and prior, never on a
``--targets-chunk``, so every chunk takes the same decision (each chunk pays the gate).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from .prior_check import RUNS_WITHOUT, sig6

#: the default level of the one-sided test (``--prior-check-level``)
LEVEL = 0.01
#: the default share of the genes sampled as gate targets (``--prior-check-targets``)
FRACTION = 0.1
#: gate targets at least (all of them where fewer differ)
MIN_TARGETS = 30


@dataclass
class Gate:
    """What the gate grew and decided.

    Attributes
    ----------
    result : dict
        JSON-ready (:func:`gate_prior`).
    targets : numpy.ndarray
        The sampled targets' gene indices, shape (S,), int64, ascending.
    weights : numpy.ndarray or None
        The importances of the kept model (with the prior when kept, else without) of ``targets``, regulators x S
        float64, reusable by the run (RF only; None for ET, whose gate forests are bagged).
    errors : numpy.ndarray or None
        The OOB errors of ``targets`` with the permuted prior (column 0) and with the prior (column 1), S x 2.
    """

    result: dict
    targets: np.ndarray
    weights: np.ndarray | None
    errors: np.ndarray | None = None


def differing_targets(prior, reg_idx: np.ndarray, n_genes: int) -> np.ndarray:
    """The targets whose prior values differ over their candidate regulators (0.5 where the prior says nothing).

    Parameters
    ----------
    prior : chromaflow.genie3.prior.Prior
        The prior over gene indices.
    reg_idx : numpy.ndarray
        The candidate regulators' gene indices, shape (R,).
    n_genes : int
        The number of genes (every gene is a target).

    Returns
    -------
    numpy.ndarray
        Gene indices, ascending, int64.
    """
    is_reg = np.zeros(n_genes, dtype=bool)
    is_reg[np.asarray(reg_idx, dtype=np.int64)] = True
    keep = is_reg[prior.reg] & (prior.reg != prior.tgt)
    tgt, pi = prior.tgt[keep], prior.pi[keep]
    n_cand = np.full(n_genes, int(is_reg.sum()), dtype=np.int64) - is_reg  # candidates of each target
    n_entries = np.bincount(tgt, minlength=n_genes)
    lo = np.full(n_genes, np.inf)
    hi = np.full(n_genes, -np.inf)
    np.minimum.at(lo, tgt, pi)
    np.maximum.at(hi, tgt, pi)
    partial = n_entries < n_cand  # some candidates are 0.5 (not listed)
    lo = np.where(partial, np.minimum(lo, 0.5), lo)
    hi = np.where(partial, np.maximum(hi, 0.5), hi)
    return np.flatnonzero((n_cand >= 2) & (hi > lo)).astype(np.int64)


def sample_targets(genes: list[str], candidates: np.ndarray, seed: int, fraction: float) -> np.ndarray:
    """The gate's targets: ``candidates`` ordered by BLAKE2b(name, key = seed, person ``chromaflow-g3g``), the first
    max(ceil(fraction x genes), MIN_TARGETS) (all where fewer); gene indices, ascending (int64)."""
    key = (int(seed) & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")
    n = min(len(candidates), max(math.ceil(fraction * len(genes)), MIN_TARGETS))
    digest = [
        hashlib.blake2b(genes[int(g)].encode(), digest_size=8, key=key, person=b"chromaflow-g3g").digest()
        for g in candidates
    ]
    order = sorted(range(len(candidates)), key=lambda i: digest[i])
    return np.sort(np.asarray(candidates, dtype=np.int64)[order[:n]])


def signed_rank_test(d: np.ndarray) -> dict:
    """Wilcoxon's signed-rank test of ``d`` (zeros left out, ties averaged), normal approximation with the tie
    correction.

    Parameters
    ----------
    d : numpy.ndarray
        Paired differences, shape (m,), float64.

    Returns
    -------
    dict
        ``n`` (non-zero differences), ``w_plus`` (the positive differences' rank sum), ``z`` (None where n is 0 or
        every rank ties) and the one-sided ``p_better`` = P(Z >= z) and ``p_worse`` = P(Z <= z) (1.0 where z is
        None).
    """
    from .prior_check import ranks2

    d = np.asarray(d, dtype=np.float64)
    d = d[d != 0]
    n = len(d)
    out: dict = {"n": n, "w_plus": None, "z": None, "p_better": 1.0, "p_worse": 1.0}
    if n == 0:
        return out
    r2 = ranks2(np.abs(d)[None, :])[0]  # twice the average ranks: integers
    w_plus = math.fsum(r2[d > 0].tolist()) / 2.0
    _, counts = np.unique(np.abs(d), return_counts=True)
    var = n * (n + 1) * (2 * n + 1) / 24.0 - math.fsum(((counts**3 - counts) / 48.0).tolist())
    out["w_plus"] = w_plus
    if var <= 0:
        return out
    z = (w_plus - n * (n + 1) / 4.0) / math.sqrt(var)
    out.update(z=z, p_better=0.5 * math.erfc(z / math.sqrt(2.0)), p_worse=0.5 * math.erfc(-z / math.sqrt(2.0)))
    return out


def gate_prior(expr, reg_idx: np.ndarray, prior, opts, threads: int, level: float, fraction: float) -> Gate:
    """The prediction gate of ``prior`` (module docstring): grow the sampled targets' forests with and without it and
    test the OOB errors' differences.

    Parameters
    ----------
    expr : chromaflow.genie3.expression.Expression
        The expression (``values`` genes x samples, ``genes``).
    reg_idx : numpy.ndarray
        The candidate regulators' gene indices, shape (R,).
    prior : chromaflow.genie3.prior.Prior
        The prior; ``opts.prior_alpha`` > 0 is its weight.
    opts : chromaflow.genie3.core.Options
        The run's options (fast engine; the forests are the run's: trees, method, K, seed).
    threads : int
        Kernel threads.
    level : float
        The one-sided test's level, in (0, 1).
    fraction : float
        The share of the genes sampled, in (0, 1].

    Returns
    -------
    Gate
        The decision and statistics (``result``: ``gate`` "prediction", ``decision`` kept/off, ``z``, ``p`` (=
        ``p_worse``, the decision's), ``p_better``, ``level``, ``targets_sampled``, ``targets_tested`` (non-zero
        differences), ``targets_improved``, ``targets_worsened``, ``oob_error_mean_plain`` / ``_prior``,
        ``oob_error_median_change``, ``forests_grown``, ``trees_grown``, ``untestable``), the sampled targets and
        the kept model's importances of them.
    """
    from .core import compute_weights

    cand = differing_targets(prior, reg_idx, len(expr.genes))
    vals = expr.values[cand]
    cand = cand[vals.min(axis=1) < vals.max(axis=1)] if len(cand) else cand  # constant targets: no forest
    tg = sample_targets(expr.genes, cand, opts.seed, fraction)
    quiet = lambda msg: None  # noqa: E731 -- the run itself warns
    errs, W = [], []
    for use in (prior, permuted_prior(prior, expr.genes, reg_idx, tg, opts.seed)):
        e = np.zeros((len(tg), 2), dtype=np.float64)
        w, _ = compute_weights(expr.values, expr.genes, reg_idx, tg, opts, threads, warn=quiet, prior=use, oob=e)
        errs.append(e[:, 0])
        W.append(w)
    result = _result(errs[1], errs[0], level, len(tg), opts.n_trees)
    keep = result["decision"] == "kept" and opts.tree_method == "RF"
    return Gate(result=result, targets=tg, weights=W[0] if keep else None, errors=np.stack([errs[1], errs[0]], 1))


def permuted_prior(prior, genes: list[str], reg_idx: np.ndarray, targets: np.ndarray, seed: int):
    """The null model's prior: for each target of ``targets``, the prior's values (0.5 where it says nothing) over its
    candidate regulators (``reg_idx`` minus the target, in name order) permuted at random, so the same weights go to
    regulators chosen without regard to the data.

    Parameters
    ----------
    prior : chromaflow.genie3.prior.Prior
        The prior over gene indices.
    genes : list of str
        The genes' names.
    reg_idx : numpy.ndarray
        The candidate regulators' gene indices, shape (R,).
    targets : numpy.ndarray
        The targets permuted, gene indices, shape (S,).
    seed : int
        The run seed; each target's permutation is numpy's PCG64 seeded by BLAKE2b(name, key = seed, person
        ``chromaflow-g3p``): order-invariant, independent of the other targets.

    Returns
    -------
    chromaflow.genie3.prior.Prior
        Entries for ``targets`` only (every (candidate, target) pair listed).
    """
    from .prior import Prior

    key = (int(seed) & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")
    regs = np.asarray(sorted(np.asarray(reg_idx, dtype=np.int64).tolist(), key=lambda i: genes[i]), dtype=np.int64)
    rpos = np.full(len(genes), -1, dtype=np.int64)
    rpos[regs] = np.arange(len(regs))
    tpos = np.full(len(genes), -1, dtype=np.int64)
    tpos[targets] = np.arange(len(targets))
    sel = (rpos[prior.reg] >= 0) & (tpos[prior.tgt] >= 0)
    P = np.full((len(regs), len(targets)), 0.5)
    P[rpos[prior.reg[sel]], tpos[prior.tgt[sel]]] = prior.pi[sel]
    out_r, out_t, out_p = [], [], []
    for j, t in enumerate(np.asarray(targets, dtype=np.int64).tolist()):
        c = np.flatnonzero(regs != t)
        digest = hashlib.blake2b(genes[t].encode(), digest_size=8, key=key, person=b"chromaflow-g3p").digest()
        perm = np.random.default_rng(int.from_bytes(digest, "little")).permutation(len(c))
        out_r.append(regs[c])
        out_t.append(np.full(len(c), t, dtype=np.int64))
        out_p.append(P[c[perm], j])
    cat = lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dtype=dt)  # noqa: E731
    pairs = int(sum(len(x) for x in out_r))
    return Prior(
        reg=cat(out_r, np.int64),
        tgt=cat(out_t, np.int64),
        pi=cat(out_p, np.float64),
        layout="permuted",
        pairs_read=pairs,
        ignored=0,
        path=f"{prior.path} (permuted within targets)",
    )


def _result(e0: np.ndarray, e1: np.ndarray, level: float, sampled: int, trees: int) -> dict:
    """The gate's JSON-ready result from the OOB errors with the permuted prior (``e0``) and with the prior (``e1``),
    shape (S,)."""
    ok = np.isfinite(e0) & np.isfinite(e1)
    d = e0[ok] - e1[ok]
    t = signed_rank_test(d)
    untestable = None
    if sampled == 0:
        untestable = "the prior gives every candidate regulator of each target the same value (or one regulator)"
    elif t["z"] is None:
        untestable = "the forests with the prior and with it permuted predict every sampled target alike"
    p = t["p_better"]
    return {
        "gate": "prediction",
        "decision": "kept" if (t["z"] is not None and p < level) else "off",
        "z": sig6(t["z"]),
        "p": sig6(p),
        "untestable": untestable,
        "level": level,
        "targets_sampled": int(sampled),
        "targets_tested": int(t["n"]),
        "targets_improved": int(np.count_nonzero(d > 0)),
        "targets_worsened": int(np.count_nonzero(d < 0)),
        "oob_error_mean_permuted": sig6(math.fsum(e0[ok].tolist()) / max(int(ok.sum()), 1)),
        "oob_error_mean_prior": sig6(math.fsum(e1[ok].tolist()) / max(int(ok.sum()), 1)),
        "oob_error_median_change": sig6(float(np.median(-d))) if len(d) else None,
        "forests_grown": 2 * int(sampled),
        "trees_grown": 2 * int(sampled) * int(trees),
    }


def gate_line(result: dict, prior: str) -> str:
    """The line on stderr of a gate's decision: what it measured (the OOB errors, the targets, z and p) and what it
    decided.

    Parameters
    ----------
    result : dict
        :func:`gate_prior`'s ``result``.
    prior : str
        The ``--prior`` file, named first in the line.

    Returns
    -------
    str
        One line, without the command's prefix.
    """
    r = result
    if r["z"] is None:
        return f"{prior}: prior check (prediction gate): cannot test the prior: {r['untestable']}: {RUNS_WITHOUT}"
    measured = (
        f"prior check (prediction gate): out-of-bag error of {r['targets_sampled']} sampled targets "
        f"{r['oob_error_mean_prior']:.4g} with the prior, {r['oob_error_mean_permuted']:.4g} with its values "
        f"permuted over each target's regulators ({r['targets_improved']} better, {r['targets_worsened']} worse; "
        f"Wilcoxon z = {r['z']:.3g}, one-sided p = {r['p']:.3g}"
    )
    if r["decision"] == "kept":
        return f"{prior}: {measured} < {r['level']:g}): prior kept"
    off = "no evidence that the prior predicts better than chance"
    return f"{prior}: {measured} >= {r['level']:g}): {off}: {RUNS_WITHOUT}"
