"""The committed inputs of the nf-test module specs (tests/data/nftest/, made by tests/helpers/nftest/fixtures.py)
are what the modules make: the checkpoint equals make_test_model's snapshot of MAKE_TEST_MODEL's output, the
predictions equal predict's snapshot of PREDICT's unsharded asmA. Each reference is recorded by the real module in
its own spec, so a change to either module fails here until the fixtures are made again."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers.environment import ROOT

FIXTURES = ROOT / "tests" / "data" / "nftest"
DIGEST = ROOT / "tests" / "helpers" / "nftest" / "digest.py"


def _digest(kind: str, path) -> dict:
    p = subprocess.run([sys.executable, str(DIGEST), kind, str(path)], capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


def _snapshot(module: str, test: str) -> list:
    snap = json.loads((ROOT / "modules" / "local" / module / "tests" / "main.nf.test.snap").read_text())
    return snap[test]["content"]


def test_the_checkpoint_is_make_test_models_output():
    want = _snapshot("make_test_model", "seed 0 -> tiny checkpoint (weights and hyperparameters snapshotted)")[0]
    assert _digest("ckpt", FIXTURES / "chromaflow_tiny_seed0.ckpt") == want


def test_the_predictions_are_predicts_output_for_asmA():
    # the PREDICT spec's first task: asmA unsharded, from its genome h5
    want = _snapshot(
        "predict",
        "h5 unsharded (<id>_predictions.h5) and shard 2 of 2 (values snapshotted); the FASTA route with and without "
        "PREDICT_PLAN's index: the same predictions as the h5 shard",
    )[0]
    assert _digest("h5", FIXTURES / "asmA_predictions.h5") == want


def test_specs_read_the_fixtures_instead_of_making_them():
    """Only make_test_model's spec runs MAKE_TEST_MODEL; PREDICT runs in the specs of the modules that take its
    shards or test it (predict, predict_merge), not in those that only read asmA's predictions."""
    for spec in sorted(ROOT.glob("modules/local/*/tests/main.nf.test")):
        text = spec.read_text()
        module = spec.parent.parent.name
        if module != "make_test_model":
            assert 'run("MAKE_TEST_MODEL")' not in text, spec
        if module in ("bigwig", "peaks", "gene_accessibility"):
            assert 'run("PREDICT")' not in text and "asmA_predictions.h5" in text, spec
