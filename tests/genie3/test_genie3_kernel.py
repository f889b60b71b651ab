"""The fast engine's C kernel: its fallback without a compiler, the same bytes from every build and thread count,
the early exit, and the unnormalised importance of the scikit-learn engine."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from chromaflow.genie3 import expression
from chromaflow.genie3.core import resolve_k, target_seeds
from chromaflow.genie3.skengine import unnormalised_mdi
from helpers.genie3_files import EXPR, base


def test_fast_engine_falls_back_without_compiler(tmp_path):
    env = dict(**__import__("os").environ, CHROMAFLOW_GENIE3_NO_CC="1")
    cmd = [sys.executable, "-m", "chromaflow", *base(tmp_path, "--n-trees", "5", "--metrics", str(tmp_path / "m.json"))]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "fast engine unavailable" in proc.stderr
    assert json.loads((tmp_path / "m.json").read_text())["engine"] == "sklearn"


def _kernel_weights(lib, X, trees=30, threads=1, method="RF", importance="unnormalised"):
    from chromaflow.genie3 import fast

    G = X.shape[0]
    regs, tg = np.arange(G), np.arange(min(G, 24))
    W = np.zeros((G, len(tg)))
    tables = fast.build_tables(X, regs) if method == "RF" else None
    seeds = target_seeds(5, [f"G{int(j)}" for j in tg])
    k = resolve_k("sqrt", G - 1)
    fast.run(lib, X, tables, regs, tg, seeds, trees, k, k, method, threads, W, importance=importance)
    return W


def test_kernel_bytes_do_not_depend_on_build_simd_or_threads():
    """Same bytes from the default build, the plain-C build (no SSE2 sorting network), an -O0 build, a build that
    walks 300-sample bitmaps through the summary word used above 1,024 samples, and any thread count -- on
    300 samples (sorting-network nodes, 5-word bitmaps, tied values) and on the fixture."""
    from chromaflow.genie3 import fast

    rng = np.random.default_rng(11)
    X300 = np.round(rng.normal(size=(40, 300)), 2).astype(np.float32)  # 2 decimals: many near-ties
    X30 = expression.read_expression(EXPR, "samples-x-genes").values
    base = fast.load_kernel()
    variants = [
        fast.load_kernel(("-DGENIE3_NO_SIMD",)),
        fast.load_kernel(("-O0",)),
        fast.load_kernel(("-DSUMMARY_ABOVE_WORDS=2",)),
    ]
    for X in (X300, X30):
        for method, imp in (("RF", "unnormalised"), ("RF", "tree-normalised"), ("ET", "unnormalised")):
            ref = _kernel_weights(base, X, method=method, importance=imp)
            assert ref.any()
            for lib in variants:
                assert _kernel_weights(lib, X, method=method, importance=imp).tobytes() == ref.tobytes()
            assert _kernel_weights(base, X, threads=3, method=method, importance=imp).tobytes() == ref.tobytes()


def test_early_exit_never_skips_a_better_split():
    """Nodes of 3..16 samples stop evaluating features once one offers the node's best possible partition. A
    check build goes on evaluating after each stop (the chosen split frozen, so the same bytes) and counts later
    features that beat the stop: none may, beyond rounding; and the shortcut must have been taken. Covers the
    sorting-network nodes (300 samples), the bitmap nodes (30 samples) and near-ties (2-decimal values)."""
    import ctypes

    from chromaflow.genie3 import fast

    rng = np.random.default_rng(3)
    X300 = np.round(rng.normal(size=(40, 300)), 2).astype(np.float32)
    X30 = expression.read_expression(EXPR, "samples-x-genes").values
    base, check = fast.load_kernel(), fast.load_kernel(("-DGENIE3_CHECK_EXIT",))
    stats = (ctypes.c_int64 * 3)()
    assert base.genie3_check_stats(stats) == -1
    for X in (X300, X30):
        before = (ctypes.c_int64 * 3)()
        assert check.genie3_check_stats(before) == 0
        ref = _kernel_weights(base, X)
        assert _kernel_weights(check, X).tobytes() == ref.tobytes()
        check.genie3_check_stats(stats)
        stops, beaten = stats[0] - before[0], stats[1] - before[1]
        assert stops > 1000, stops
        assert beaten == 0, f"{beaten} of {stops} early stops were beaten by a later feature"


def test_unnormalised_mdi_matches_sklearn_up_to_normalisation():
    from sklearn.ensemble import RandomForestRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 6)).astype(np.float32)
    y = X[:, 0] * 2 + X[:, 1] + rng.normal(0, 0.1, 60)
    rf = RandomForestRegressor(n_estimators=1, random_state=0, max_features=3).fit(X, y)
    imp = unnormalised_mdi(rf, 6)
    np.testing.assert_allclose(imp / imp.sum(), rf.feature_importances_, rtol=1e-10, atol=1e-12)
    # fully grown: total decrease = root impurity (variance of y)
    t = rf.estimators_[0].tree_
    assert imp.sum() == pytest.approx(t.impurity[0], rel=1e-9)
