"""``genie3 --prior-check auto``: is the prior related to the data more than the same prior with its gene ids swapped?

The default prior check since issue 56. What a gate can know without a gold standard is whether a prior is
*related* to the expression at all; a prior whose gene ids were swapped (a wrong annotation, a mismatched genome
build, another species' ids) is not, and is the prior that costs accuracy (docs/genie3.md, "Prior"). So the null
hypothesis is exactly that prior: **the prior's regulator and target labels are assigned independently of the
data**. The test is Mantel's (1967) matrix-association test on a regulators x genes matrix, with its null drawn by
relabelling, as the swapped prior is made:

* association of each (regulator, target) pair: a = rho^2, Spearman's rho over the samples squared (the same
  score as the correlation test of :mod:`.prior_check`), fixed-point (round(rho^2 x 2^20)), self-pairs given their
  target's mean, then **double-centred** (the regulator's and the target's means taken out): what is left is how
  much more, or less, the pair is associated than its regulator and its target are on average. Without this, a
  relabelled prior whose many-target regulators land on regulators that vary little would look "related" (on the
  Arabidopsis nitrate set a prior with swapped ids scored z = -6.6 in the within-target test);
* the statistic T = sum over the prior's pairs of (pi - 0.5) x the centred association (pairs the prior omits are
  0.5 and add nothing): positive where the supported pairs are more associated than expected, negative where less;
* the null: B = 999 relabellings, each a random permutation of the regulators among the candidate regulators and
  of the targets among the genes (numpy PCG64 seeded by BLAKE2b("relabel", key = the run seed)), T recomputed;
* **two-sided** Monte Carlo p = min(1, 2 min(lo, hi)), lo = (1 + #{T_b <= T}) / (B + 1), hi likewise with >=. The
  prior is kept when p < the level (``--prior-check-level``, default 0.01). For a prior whose ids are swapped at
  random, T is one more draw of the null, so it is kept with probability <= the level, on any data (the test is
  exact: no normal approximation, no assumption on the targets' independence).

Why two-sided: the weighted forest (iRafNet's sampling weights, DIOgene's alpha) uses the prior well where direct
targets are *less* correlated with their TF than other genes are (feedback, co-regulation, a TF whose transcript
barely varies): on the Arabidopsis nitrate set (Varala et al. 2018, DIOgene's motif prior, DAP-seq edges) the
motif-supported pairs have lower rho^2 than the rest, yet the prior raises the AUPR by 0.05. Dependence in either
direction is evidence that the prior describes these genes; the one-sided correlation test (``--prior-check
correlation``) turned that prior off.

Determinism: the ranks' covariances are exact integers, rho^2 is rounded to integers of 2^-20, its sums are int64
(exact), the double-centred values are rounded again, the prior's values are integers of 2^-16, so every T is an
exact int64 sum whatever the CPU, the BLAS or the order of the files (genes, regulators and permutations are taken
in name order). It reads the whole matrix and prior, never a target chunk: every ``--targets-chunk`` decides alike.
Cost: one regulators x genes int32 matrix and B gathers of the prior's non-neutral pairs.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from .prior_check import BLOCK, RUNS_WITHOUT, centred_ranks, sig6

#: the default level of the two-sided test (``--prior-check-level``)
LEVEL = 0.01
#: relabellings of the null (p >= 1 / (B + 1); two-sided >= 0.002)
PERMUTATIONS = 999
#: fixed-point scales of the association (rho^2) and of the prior's values (pi - 0.5)
A_BITS, P_BITS = 20, 16


def check_prior_relabel(
    values: np.ndarray,
    genes: list[str],
    reg_idx: np.ndarray,
    prior,
    level: float = LEVEL,
    seed: int = 0,
    permutations: int = PERMUTATIONS,
) -> dict:
    """The relabelling test of ``prior`` on the expression.

    Parameters
    ----------
    values, genes, reg_idx, prior
        As :func:`chromaflow.genie3.prior_check.check_prior`'s: the expression (genes x samples), the genes' names,
        the candidate regulators' gene indices (R,) and the prior.
    level : float
        The level of the two-sided test, in (0, 1).
    seed : int
        The run seed (the relabellings' stream).
    permutations : int
        B, the relabellings of the null.

    Returns
    -------
    dict
        JSON-ready: ``gate`` "relabel", ``decision`` ("kept" or "off"), ``z`` ((T - mean of the null) / its sd: the
        effect in null sds, signed), ``p`` (two-sided Monte Carlo), ``direction`` ("higher" / "lower": the supported
        pairs' association against what relabelling gives), ``untestable`` (why nothing could be tested, in words,
        where ``z`` is None), ``level``, ``permutations``, ``pairs`` (regulator x target pairs), ``prior_pairs``
        (pairs whose value is not 0.5), ``supported_pairs`` (pi > 0.5), ``samples``, ``rho2_mean_supported`` /
        ``rho2_mean_other`` (effect sizes to read beside p).
    """
    genes = list(genes)
    names = np.array(genes, dtype=object)
    gorder = np.argsort(names, kind="stable")  # canonical: by name
    regs = np.asarray(sorted(np.asarray(reg_idx, dtype=np.int64).tolist(), key=lambda i: genes[i]), dtype=np.int64)
    R, G = len(regs), len(genes)
    A = _centred_association(np.asarray(values, dtype=np.float64), regs, gorder)
    rr, tt, dq, sup = _prior_entries(prior, regs, gorder, G)
    out = {
        "gate": "relabel",
        "level": level,
        "permutations": int(permutations),
        "pairs": A.n_all,
        "prior_pairs": int(len(dq)),
        "supported_pairs": int(sup.sum()),
        "samples": int(values.shape[1]),
    }
    out.update(_rho2_means(A.raw_mean_parts(rr, tt, sup)))
    why = _untestable(R, G, dq, A)
    if why:
        return {**out, "decision": "off", "z": None, "p": 1.0, "direction": None, "untestable": why}
    flat = A.centred.reshape(-1)
    obs = int(np.dot(dq, flat[rr * G + tt].astype(np.int64)))
    rng = np.random.default_rng(_stream(seed))
    null = np.empty(permutations, dtype=np.int64)
    # reused buffers, indices in range by construction (mode "clip" skips numpy's bounds buffering): ~0.5 ms a
    # relabelling per 100,000 prior pairs
    idx, tix, vals = (np.empty(len(dq), dtype=np.int64) for _ in range(3))
    for b in range(permutations):
        s, t = rng.permutation(R), rng.permutation(G)
        np.take(s * G, rr, out=idx, mode="clip")
        np.take(t, tt, out=tix, mode="clip")
        idx += tix
        vals[:] = flat.take(idx, mode="clip")
        null[b] = np.dot(dq, vals)  # int64: exact (|terms| < 2^37, fewer than 2^26 of them)
    return {**out, **_decide(obs, null, level)}


def _stream(seed: int) -> int:
    key = (int(seed) & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")
    return int.from_bytes(
        hashlib.blake2b(b"relabel", digest_size=8, key=key, person=b"chromaflow-g3l").digest(), "little"
    )


@dataclass
class _Association:
    """The fixed-point rho^2 of every (regulator, target) in name order, regulators x genes: ``centred`` (int32,
    double-centred), ``raw`` (int32; self-pairs hold their target's mean) and the sum and count of the valid pairs'
    raw values (self-pairs left out)."""

    centred: np.ndarray
    raw: np.ndarray
    raw_sum_all: int
    n_all: int

    def raw_mean_parts(self, rr: np.ndarray, tt: np.ndarray, sup: np.ndarray) -> tuple[int, int, int, int]:
        """(sum, count) of the raw fixed-point rho^2 of the supported pairs and of all other valid pairs."""
        G = self.raw.shape[1]
        s = int(self.raw.reshape(-1)[rr[sup] * G + tt[sup]].astype(np.int64).sum())
        n = int(sup.sum())
        return s, n, self.raw_sum_all - s, self.n_all - n


def _centred_association(values: np.ndarray, regs: np.ndarray, gorder: np.ndarray) -> _Association:
    """rho^2 of every regulator x gene (both in name order), fixed point; self-pairs valued at their target's mean of
    the others; then double-centred, exactly in integers up to the final rounding."""
    rk = centred_ranks(values)
    ss = np.einsum("ij,ij->i", rk, rk)  # integers, exact
    R, G = len(regs), len(gorder)
    raw = np.empty((R, G), dtype=np.int32)
    gpos = np.empty(values.shape[0], dtype=np.int64)
    gpos[gorder] = np.arange(G)
    self_r = np.arange(R)
    self_g = gpos[regs]
    for lo in range(0, G, BLOCK):
        tg = gorder[lo : lo + BLOCK]
        C = rk[regs] @ rk[tg].T  # exact integer covariances x n
        den = np.sqrt(np.outer(ss[regs], ss[tg]))
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = np.where(den > 0, C / den, 0.0)  # a constant gene: no association
        raw[:, lo : lo + len(tg)] = np.rint(rho * rho * (1 << A_BITS)).astype(np.int32)
    raw[self_r, self_g] = 0
    col = raw.sum(axis=0, dtype=np.int64)
    valid = np.full(G, R, dtype=np.int64)
    np.subtract.at(valid, self_g, 1)
    raw_sum_all, n_all = int(col.sum()), int(valid.sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        fill = np.where(valid > 0, np.rint(col / np.maximum(valid, 1)), 0).astype(np.int64)
    # in place: the effect sizes read raw only at the prior's pairs, never a self-pair, and the sums are taken
    raw[self_r, self_g] = fill[self_g]
    rs = raw.sum(axis=1, dtype=np.int64)
    cs = raw.sum(axis=0, dtype=np.int64)
    tot = int(rs.sum())
    centred = np.empty((R, G), dtype=np.int32)
    for lo in range(0, G, BLOCK):  # (q - row mean - column mean + grand mean), each an IEEE-rounded quotient
        blk = raw[:, lo : lo + BLOCK].astype(np.float64)
        blk -= (rs / G)[:, None]
        blk -= (cs[lo : lo + BLOCK] / R)[None, :]
        blk += tot / (R * G)
        centred[:, lo : lo + BLOCK] = np.rint(blk).astype(np.int32)
    return _Association(centred, raw, raw_sum_all, n_all)


def _prior_entries(prior, regs: np.ndarray, gorder: np.ndarray, G: int):
    """The prior's pairs among the candidate regulators whose value is not 0.5 and that are not self-pairs:
    (regulator position, target position) in name order, round((pi - 0.5) x 2^16) as int64, and pi > 0.5."""
    rpos = np.full(G, -1, dtype=np.int64)
    rpos[regs] = np.arange(len(regs))
    gpos = np.empty(G, dtype=np.int64)
    gpos[gorder] = np.arange(G)
    dq = np.rint((prior.pi - 0.5) * (1 << P_BITS)).astype(np.int64)
    keep = (rpos[prior.reg] >= 0) & (dq != 0) & (prior.reg != prior.tgt)
    rr, tt = rpos[prior.reg[keep]], gpos[prior.tgt[keep]]
    order = np.lexsort((tt, rr))  # name order: the same arrays whatever the file's order
    return rr[order], tt[order], dq[keep][order], prior.pi[keep][order] > 0.5


def _untestable(R: int, G: int, dq: np.ndarray, A: _Association) -> str | None:
    """Why the test can say nothing, in words (None where it can)."""
    if R < 2:
        return "one candidate regulator: relabelling cannot move the prior"
    if not len(dq):
        return "the prior gives no candidate pair a value other than 0.5 (it says nothing)"
    if not A.centred.any():
        return "the expression gives every pair the same association (constant genes?)"
    return None


def _decide(obs: int, null: np.ndarray, level: float) -> dict:
    """Two-sided Monte Carlo p of ``obs`` against the null draws, the decision, and z in null sds (exact sums)."""
    B = len(null)
    lo = (1 + int(np.count_nonzero(null <= obs))) / (B + 1)
    hi = (1 + int(np.count_nonzero(null >= obs))) / (B + 1)
    p = min(1.0, 2.0 * min(lo, hi))
    vals = [int(x) for x in null]
    mean = math.fsum(vals) / B
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in vals) / max(B - 1, 1))
    z = (obs - mean) / sd if sd > 0 else 0.0
    return {
        "decision": "kept" if p < level else "off",
        "z": sig6(z),
        "p": sig6(p),
        "direction": "higher" if obs > mean else "lower",
        "untestable": None,
    }


def _rho2_means(parts: tuple[int, int, int, int]) -> dict:
    s_sup, n_sup, s_oth, n_oth = parts
    scale = float(1 << A_BITS)
    return {
        "rho2_mean_supported": sig6(s_sup / n_sup / scale) if n_sup else None,
        "rho2_mean_other": sig6(s_oth / n_oth / scale) if n_oth else None,
    }


def relabel_line(check: dict, prior: str) -> str:
    """The one stderr line of the relabelling test: what it measured and decided (kept or off).

    Parameters
    ----------
    check : dict
        :func:`check_prior_relabel`'s result.
    prior : str
        The ``--prior`` file, named first in the line.

    Returns
    -------
    str
        One line, without the command's prefix.
    """
    if check["z"] is None:
        return f"{prior}: the prior check cannot test the prior: {check['untestable']}: {RUNS_WITHOUT}"
    what = (
        f"prior check (relabelling test): the prior's pairs are {check['direction']} in rho^2 than with its gene ids "
        f"swapped (z = {check['z']} null sds, two-sided p = {check['p']:.3g} over {check['permutations']} "
        "relabellings"
    )
    if check["decision"] == "kept":
        return f"{prior}: {what} < {check['level']:g}): prior kept"
    off = "no evidence that the prior is related to the expression"
    return f"{prior}: {what} >= {check['level']:g}): {off}: {RUNS_WITHOUT}"
