"""Shared by the genie3 tests: the test expression data, the CLI argument list of a plain run, and the ranked-links
specification with its adversarial weights."""

from __future__ import annotations

import numpy as np

from helpers.environment import ROOT

FIX = ROOT / "assets" / "test" / "genie3"
EXPR = FIX / "expression.tsv"
REGS = FIX / "regulators.txt"


def base(tmp_path, *extra, out="links.tsv.gz", trees=50, expression=EXPR, regulators=REGS):
    """The CLI argument list (strings) of a plain run on ``expression`` (the test matrix), ``trees`` trees, writing
    ``tmp_path / out``; ``regulators`` None: every gene may regulate."""
    args = ["genie3", "--expression", str(expression), "--layout", "samples-x-genes"]
    if regulators is not None:
        args += ["--regulators", str(regulators)]
    return [*args, "--n-trees", str(trees), "--out", str(tmp_path / out), *map(str, extra)]


def lexsort_reference(W, reg_names, tgt_names, reg_idx, tgt_idx, limit=0):
    """The specification of ranked_links, written plainly: every non-self pair, sorted by (-value, regulator
    name, target name) with np.lexsort; the first ``limit``."""
    rows, cols = np.divmod(np.arange(W.size), W.shape[1])
    keep = reg_idx[rows] != tgt_idx[cols]
    rows, cols = rows[keep], cols[keep]
    rrank = np.argsort(np.argsort(np.array(reg_names, dtype=object), kind="stable"), kind="stable")
    trank = np.argsort(np.argsort(np.array(tgt_names, dtype=object), kind="stable"), kind="stable")
    order = np.lexsort((trank[cols], rrank[rows], -(W[rows, cols] + 0.0)))
    if limit:
        order = order[:limit]
    return rows[order], cols[order]


def adversarial_weights(rng, R, T):
    """Weights with the cases a fast sort gets wrong: exact ties (zeros, repeated values), values one ulp
    apart, -0.0 next to 0.0, subnormals, huge and negative values."""
    W = rng.random((R, T)) * rng.random((R, T)) ** 3
    n = R * T
    W.flat[rng.integers(0, n, n // 3)] = 0.0
    i = rng.integers(0, n, n // 5)
    W.flat[i] = np.nextafter(W.flat[i[::-1]], 1.0)
    W.flat[rng.integers(0, n, n // 10 + 1)] = 0.123456789012345
    for v in (-0.0, 5e-324, 1e-300, 1e300, -1e-5):
        W.flat[rng.integers(0, n, 3)] = v
    return W


def write_prior(path, rows):
    """A prior TSV (regulator, target, prior) of ``rows`` at ``path`` (the prior check's and the gate's tests)."""
    path.write_text("regulator\ttarget\tprior\n" + "".join(f"{r}\t{t}\t{v}\n" for r, t, v in rows))
    return path


def gold_prior_rows():
    """The fixture's gold edges (all of them 1) as prior rows: an informative prior (unlisted pairs are 0.5)."""
    return [ln.split("\t")[:2] + ["1"] for ln in FIX.joinpath("gold.tsv").read_text().splitlines() if ln.strip()]


def uninformative_prior_rows(genes, seed=0):
    """As many pi = 1 pairs as the gold prior, at (TF, gene) pairs drawn at random from the fixture's regulators and
    ``genes``: no signal, the same density."""
    tfs = [ln for ln in REGS.read_text().splitlines() if ln.strip()]
    pairs = [(r, t) for r in tfs for t in genes if t != r]
    pick = np.random.default_rng(seed).choice(len(pairs), size=len(gold_prior_rows()), replace=False)
    return [(*pairs[i], 1) for i in sorted(pick)]
