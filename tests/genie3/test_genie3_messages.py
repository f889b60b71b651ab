"""genie3's warnings in words (issue 54): a constant regulator is named as a regulator ("it cannot be chosen by any
split; its links are 0", not "incoming importances are all 0"), and a prior check that can test nothing (one
regulator) says why instead of printing ``z = None``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from chromaflow.genie3 import expression
from chromaflow.genie3.core import Options, compute_weights
from chromaflow.genie3.prior import Prior
from chromaflow.genie3.prior_check import check_prior, off_warning
from helpers.cli import run_in_process

FIX = Path(__file__).resolve().parents[2] / "assets" / "test" / "genie3"
EXPR = FIX / "expression.tsv"
W = "chromaflow genie3: warning: "


@pytest.fixture(scope="module", autouse=True)
def _kernel(genie3_kernel):
    """The fast engine's kernel (tests/genie3/conftest.py)."""


def _regulator_line(gene):
    return f"regulator {gene!r} is constant over the samples: it cannot be chosen by any split; its links are 0"


@pytest.mark.parametrize("engine", ["fast", "sklearn"])
def test_a_constant_regulator_is_named_as_one_even_outside_the_targets(engine):
    """TF1 (a target too) and TF2 (not among this chunk's targets) constant: one regulator line each, TF1 not again
    as a target; G3, a constant target only, keeps its target line. Before: only 'target gene 'TF1' ... incoming
    importances are all 0', nothing for TF2."""
    e = expression.read_expression(EXPR, "samples-x-genes")
    vals = e.values.copy()
    vals[0], vals[1], vals[7] = 0.5, 2.0, 1.0  # TF1, TF2, G3
    said: list[str] = []
    W_, info = compute_weights(vals, e.genes, np.arange(5), np.arange(0, 20, 1)[np.arange(20) != 1],
                               Options(n_trees=10, engine=engine), 1, warn=said.append)  # fmt: skip
    assert [s for s in said if "constant" in s] == [
        _regulator_line("TF1"),
        _regulator_line("TF2"),
        "target gene 'G3' is constant across samples: its incoming importances are all 0",
    ]
    assert info["constant_targets"] == ["TF1", "G3"] and info["constant_regulators"] == ["TF1", "TF2"]
    assert np.all(W_[:2] == 0)  # never split on


def test_more_than_ten_constant_regulators_are_counted_in_one_line():
    rng = np.random.default_rng(0)
    vals = rng.random((14, 12)).astype(np.float32)
    vals[:12] = 3.0  # R00..R11 constant
    genes = [f"R{i:02d}" for i in range(12)] + ["A", "B"]
    said: list[str] = []
    compute_weights(vals, genes, np.arange(12), np.array([12, 13]), Options(n_trees=5), 1, warn=said.append)
    assert said[:10] == [_regulator_line(f"R{i:02d}") for i in range(10)]
    assert said[10] == "2 more regulators are constant over the samples (not listed): their links are 0"


def test_a_prior_check_with_one_regulator_says_why_it_tests_nothing():
    """Before: 'no evidence that the prior agrees with the expression (prior check: z = None, ...)'."""
    e = expression.read_expression(EXPR, "samples-x-genes")
    G = e.n_genes
    prior = Prior(reg=np.zeros(G - 1, dtype=np.int64), tgt=np.arange(1, G), pi=np.linspace(0, 1, G - 1),
                  layout="long", pairs_read=G - 1, ignored=0, path="p.tsv")  # fmt: skip
    got = check_prior(e.values, e.genes, np.array([0]), prior)
    assert got["decision"] == "off" and got["z"] is None
    assert got["untestable"] == "no target has two or more candidate regulators to compare (one regulator?)"
    line = off_warning(got, "p.tsv", 0.01)
    assert line == (
        "p.tsv: the prior check cannot test the prior: no target has two or more candidate regulators to compare "
        "(one regulator?): running without it (alpha 0, the links of a run without --prior); --prior-check off uses "
        "it anyway"
    )


def test_a_testable_check_has_no_reason_and_keeps_its_line():
    got = {"z": 0.5, "p": 0.308538, "untestable": None}
    assert off_warning(got, "p.tsv", 0.01) == (
        "p.tsv: no evidence that the prior agrees with the expression (prior check: z = 0.5, one-sided p = 0.309 "
        ">= 0.01): running without it (alpha 0, the links of a run without --prior); --prior-check off uses it anyway"
    )


def test_the_reason_names_a_prior_constant_within_each_target():
    e = expression.read_expression(EXPR, "samples-x-genes")
    G = e.n_genes
    prior = Prior(reg=np.zeros(G - 1, dtype=np.int64), tgt=np.arange(1, G), pi=np.ones(G - 1), layout="long",
                  pairs_read=G - 1, ignored=0, path="x")  # fmt: skip
    got = check_prior(e.values, e.genes, np.arange(5), prior)  # TF1 supported for every target, the others 0.5
    assert got["z"] is not None  # varies: testable
    flat = Prior(reg=np.repeat(np.arange(5), G), tgt=np.tile(np.arange(G), 5), pi=np.ones(5 * G), layout="long",
                 pairs_read=5 * G, ignored=0, path="x")  # fmt: skip
    got = check_prior(e.values, e.genes, np.arange(5), flat)
    assert got["z"] is None
    assert got["untestable"] == "the prior gives every candidate regulator of each target the same value"


def test_the_cli_with_one_regulator_and_a_prior_prints_the_reason(tmp_path):
    regs = tmp_path / "one.txt"
    regs.write_text("TF1\n")
    prior = tmp_path / "p.tsv"
    prior.write_text("regulator\ttarget\tprior\n" + "".join(f"TF1\tG{i}\t{i % 2}\n" for i in range(1, 16)))
    res = run_in_process("genie3", "--expression", EXPR, "--layout", "samples-x-genes", "--regulators", regs,
                         "--prior", prior, "--n-trees", 5, "--threads", 1, "--out", tmp_path / "l.tsv.gz")  # fmt: skip
    lines = [ln for ln in res.stderr.splitlines() if "prior" in ln]
    assert lines == [
        f"{W}{prior}: the prior check cannot test the prior: one candidate regulator: relabelling cannot move the "
        "prior: running without it (alpha 0, the links of a run without --prior); --prior-check off uses it anyway"
    ]
    assert "z = None" not in res.stderr
