"""``genie3 --prior-check auto``: does the prior agree with the expression data at all?

A wrong prior costs accuracy even at small alpha (docs/genie3.md, "Prior"), so before the weighted forest the
prior is tested against the data, and where the data give no evidence that it is informative the run falls back to
alpha 0 (the bytes of a run without ``--prior``). Where there is evidence the prior is used at the alpha asked
for: ``--prior-alpha`` keeps DIOgene's meaning, an informative prior is never weakened.

The test (stratified by target, so that neither how predictable a target is nor how many prior entries it has
plays a part):

* association of each (regulator, target) pair: a_rt = rho_rt^2, Spearman's rho over the samples squared (the
  share of the target's rank variance a monotone function of the regulator explains: a univariate cousin of the
  forest's variance-decrease importance; order-invariant, cheap: one matrix product of centred ranks);
* per target t, over its candidate regulators r != t: the linear permutation statistic
  S_t = sum_r (pi_rt - mean_t pi) * (a_rt - mean_t a); under the null "the prior's values are assigned to the
  target's regulators independently of the data" (a within-target permutation) E S_t = 0 and
  Var S_t = sum_r (pi - mean pi)^2 * sum_r (a - mean a)^2 / (n_t - 1) (exact permutation moments). For a 0/1
  prior it compares the supported regulators' mean rho^2 with the others'; a continuous pi (accessibility-
  weighted) enters with its values. (The scores: on DREAM4 with a prior made from the gold standard, rho^2 gave
  z 3.7-6.8 over 15 network x prior draws, |rho| 2.6-5.2 and the ranks of |rho| (a stratified Wilcoxon test)
  0.65-3.5: the few true edges among many supported pairs stand out by their size, which ranks flatten);
* z = sum_t S_t / sqrt(sum_t Var S_t) (the targets as strata), one-sided p from the
  normal approximation, P(Z >= z). The prior is kept when p < the level (``--prior-check-level``, default 0.01).

Determinism: the centred ranks are integers (twice the average rank minus n + 1), so the float64 matrix product
is exact (every partial sum is an integer below 2^53 for n <= 65535 samples, the fast kernel's limit) whatever
the BLAS or the sample order; the per-target sums run in gene-name order and the totals are math.fsum's (exact).
The check reads the whole matrix and the whole prior, never a target chunk, so every ``--targets-chunk`` of a
run takes the same decision.
"""

from __future__ import annotations

import math

import numpy as np

#: the default level of the one-sided test (``--prior-check-level``)
LEVEL = 0.01
#: targets per block of the association matrix (memory: regulators x BLOCK float64 a few times)
BLOCK = 2048


def ranks2(x: np.ndarray) -> np.ndarray:
    """Twice the average rank (1-based, ties averaged) of each entry within its row: integers as float64.
    (What scipy.stats.rankdata(method="average") gives, times 2 -- tested against it; written here because
    importing scipy.stats costs ~0.8 s, far more than the whole check.)"""
    x = np.asarray(x)
    rows, n = x.shape
    order = np.argsort(x, axis=1, kind="stable")
    xs = np.take_along_axis(x, order, axis=1)
    pos = np.broadcast_to(np.arange(n, dtype=np.int64), (rows, n))
    first = np.ones((rows, n), dtype=bool)
    first[:, 1:] = xs[:, 1:] != xs[:, :-1]
    last = np.ones((rows, n), dtype=bool)
    last[:, :-1] = first[:, 1:]
    start = np.maximum.accumulate(np.where(first, pos, 0), axis=1)
    end = np.minimum.accumulate(np.where(last, pos, n)[:, ::-1], axis=1)[:, ::-1]
    out = np.empty((rows, n), dtype=np.float64)
    np.put_along_axis(out, order, (start + end + 2).astype(np.float64), axis=1)
    return out


def centred_ranks(values: np.ndarray) -> np.ndarray:
    """Per gene (row), 2 x the average rank of each sample minus (n + 1): integers, sum 0 (float64)."""
    return ranks2(values) - (values.shape[1] + 1)


def check_prior(values: np.ndarray, genes: list[str], reg_idx: np.ndarray, prior, level: float = LEVEL) -> dict:
    """The prior check of ``prior`` on the expression, over every gene as a target.

    Parameters
    ----------
    values : numpy.ndarray
        The expression, genes x samples (float32 or float64).
    genes : list of str
        The genes' names (the rows of ``values``).
    reg_idx : numpy.ndarray
        The candidate regulators' gene indices, shape (R,), integers.
    prior : chromaflow.genie3.prior.Prior
        The prior over gene indices (:func:`chromaflow.genie3.prior.read_prior`).
    level : float
        The level of the one-sided test, in (0, 1).

    Returns
    -------
    dict
        JSON-ready: ``decision`` ("kept" or "off"), ``z``, ``p`` (one-sided), ``untestable`` (why nothing could
        be tested, in words, where ``z`` is None: e.g. one regulator; else None), ``level``, ``targets_tested``
        (targets whose prior and data both vary over their regulators), ``pairs``, ``supported_pairs`` (pi > 0.5),
        ``samples`` and ``rho2_mean_supported`` / ``rho2_mean_other`` (mean rho^2 of supported and other pairs: an
        effect size to read beside p).
    """
    genes = list(genes)
    gorder = np.argsort(np.array(genes, dtype=object), kind="stable")  # canonical: by name
    regs = np.asarray(sorted(np.asarray(reg_idx, dtype=np.int64).tolist(), key=lambda i: genes[i]), dtype=np.int64)
    rk = centred_ranks(np.asarray(values, dtype=np.float64))
    ss = np.einsum("ij,ij->i", rk, rk)  # integers, exact
    # the prior's entries among the regulators: (row of regs, target gene, pi); 0.5 where the prior says nothing
    rpos = np.full(len(genes), -1, dtype=np.int64)
    rpos[regs] = np.arange(len(regs))
    keep = rpos[prior.reg] >= 0
    entries = (rpos[prior.reg[keep]], prior.tgt[keep], prior.pi[keep])
    totals = _Totals()
    for lo in range(0, len(gorder), BLOCK):
        tg = gorder[lo : lo + BLOCK]  # targets of this block, by name
        totals.add(*_block(rk, ss, regs, tg, entries, len(genes)))
    return totals.result(level, int(values.shape[1]))


def _block(rk, ss, regs, tg, entries, n_genes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the targets ``tg`` of a block: rho^2 of each (regulator, target), the prior's values (0.5 where it says
    nothing) and the valid pairs (no self-pairs); three regulators x targets arrays (float64, float64, bool)."""
    pr, pt, pv = entries
    C = rk[regs] @ rk[tg].T  # exact integer covariances x n
    den = np.sqrt(np.outer(ss[regs], ss[tg]))
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(den > 0, C / den, 0.0)  # a constant gene: no association
    a2 = rho * rho
    valid = regs[:, None] != tg[None, :]  # no self-pairs
    P = np.full((len(regs), len(tg)), 0.5)
    tpos = np.full(n_genes, -1, dtype=np.int64)
    tpos[tg] = np.arange(len(tg))
    sel = tpos[pt] >= 0
    P[pr[sel], tpos[pt[sel]]] = pv[sel]
    return a2, P, valid


class _Totals:
    """The per-target statistics S_t and Var S_t of the blocks so far, and the rho^2 sums of supported and other
    pairs (exact sums: math.fsum, in gene-name order)."""

    def __init__(self) -> None:
        self.S_parts: list[float] = []
        self.V_parts: list[float] = []
        self.tested = self.pairs = 0
        self.sum_sup = self.sum_oth = 0.0
        self.n_sup = self.n_oth = 0
        self.compared = self.prior_varies = 0  # targets with 2+ candidate regulators; those where the prior varies

    def add(self, a2: np.ndarray, P: np.ndarray, valid: np.ndarray) -> None:
        """Add a block's targets (the columns of :func:`_block`'s arrays)."""
        m = valid.sum(axis=0).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            abar = np.where(valid, a2, 0.0).sum(axis=0) / m
            pbar = np.where(valid, P, 0.0).sum(axis=0) / m
        a = np.where(valid, a2 - abar, 0.0)
        c = np.where(valid, P - pbar, 0.0)
        S = (c * a).sum(axis=0)
        V = np.where(m > 1, (c * c).sum(axis=0) * (a * a).sum(axis=0) / np.maximum(m - 1, 1), 0.0)
        self.compared += int(np.count_nonzero(m > 1))
        self.prior_varies += int(np.count_nonzero((m > 1) & ((c * c).sum(axis=0) > 0)))
        self.S_parts.extend(S[V > 0].tolist())
        self.V_parts.extend(V[V > 0].tolist())
        self.tested += int(np.count_nonzero(V > 0))
        self.pairs += int(valid.sum())
        sup = valid & (P > 0.5)
        oth = valid & ~(P > 0.5)
        self.sum_sup += math.fsum(a2[sup].tolist())
        self.sum_oth += math.fsum(a2[oth].tolist())
        self.n_sup += int(sup.sum())
        self.n_oth += int(oth.sum())

    def untestable(self) -> str:
        """Why no target could be tested (the statistic's variance is 0 over all of them), in words."""
        if not self.compared:
            return "no target has two or more candidate regulators to compare (one regulator?)"
        if not self.prior_varies:
            return "the prior gives every candidate regulator of each target the same value"
        return "the expression gives every candidate regulator of each target the same association (constant genes)"

    def result(self, level: float, n: int) -> dict:
        """The test over all targets (the strata) and the check's JSON-ready result (:func:`check_prior`)."""
        Vt = math.fsum(self.V_parts)
        if Vt > 0:
            z = math.fsum(self.S_parts) / math.sqrt(Vt)
            p = 0.5 * math.erfc(z / math.sqrt(2.0))
        else:  # the prior is constant over every target's regulators (or the data are): nothing to test
            z, p = None, 1.0
        return {
            "decision": "kept" if p < level else "off",
            "z": sig6(z),
            "p": sig6(p),
            "untestable": None if z is not None else self.untestable(),
            "level": level,
            "targets_tested": self.tested,
            "pairs": self.pairs,
            "supported_pairs": self.n_sup,
            "samples": int(n),
            "rho2_mean_supported": sig6(self.sum_sup / self.n_sup) if self.n_sup else None,
            "rho2_mean_other": sig6(self.sum_oth / self.n_oth) if self.n_oth else None,
        }


def off_warning(check: dict, prior: str, level: float) -> str:
    """The warning line of a check that turned the prior off (``decision`` "off"): the evidence it lacked, or, where
    nothing could be tested (``z`` None), why in words.

    Parameters
    ----------
    check : dict
        :func:`check_prior`'s result.
    prior : str
        The ``--prior`` file, named first in the line.
    level : float
        The test's level.

    Returns
    -------
    str
        One line, without the command's prefix.
    """
    if check["z"] is None:
        why = f"the prior check cannot test the prior: {check['untestable']}"
    else:
        why = (
            f"no evidence that the prior agrees with the expression (prior check: z = {check['z']}, one-sided "
            f"p = {check['p']:.3g} >= {level:g})"
        )
    return f"{prior}: {why}: {RUNS_WITHOUT}"


#: the end of every check's line that turns a prior off (the three checks say it alike)
RUNS_WITHOUT = "running without it (alpha 0, the links of a run without --prior); --prior-check off uses it anyway"


def sig6(x):
    """6 significant digits (the checks' JSON and lines; a decision uses the unrounded p); None stays None."""
    return None if x is None else float(f"{x:.6g}")
