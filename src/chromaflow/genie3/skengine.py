"""The scikit-learn engine (correctness baseline): one RandomForestRegressor / ExtraTreesRegressor per
target, importances recomputed UNnormalised from the fitted trees (scikit-learn's
``feature_importances_`` is normalised per tree, GENIE3's is not)."""
from __future__ import annotations

import numpy as np


def per_tree_unnormalised_mdi(forest, n_features: int) -> np.ndarray:
    """(trees, features): per tree, the sum over nodes splitting on f of (w*imp - wL*impL - wR*impR) / w_root
    (a tree that is one leaf contributes a row of zeros)."""
    out = np.zeros((len(forest.estimators_), n_features), dtype=np.float64)
    for k, est in enumerate(forest.estimators_):
        t = est.tree_
        left, right = t.children_left, t.children_right
        internal = np.flatnonzero(left != -1)
        if internal.size == 0:
            continue
        w = t.weighted_n_node_samples
        imp = t.impurity
        l, r = left[internal], right[internal]
        dec = w[internal] * imp[internal] - w[l] * imp[l] - w[r] * imp[r]
        out[k] = np.bincount(t.feature[internal], weights=dec, minlength=n_features) / w[0]
    return out


def unnormalised_mdi(forest, n_features: int) -> np.ndarray:
    """Mean over trees of sum over nodes splitting on f of (w*imp - wL*impL - wR*impR) / w_root."""
    total = np.zeros(n_features, dtype=np.float64)
    for row in per_tree_unnormalised_mdi(forest, n_features):  # summed in tree order, as always
        total += row
    return total / max(len(forest.estimators_), 1)


def target_importances(X_in: np.ndarray, y: np.ndarray, n_trees: int, K: int, method: str,
                       random_state: int, n_jobs: int, importance: str = "unnormalised") -> np.ndarray:
    from sklearn.ensemble import ExtraTreesRegressor, RandomForestRegressor

    cls = RandomForestRegressor if method == "RF" else ExtraTreesRegressor
    forest = cls(n_estimators=n_trees, max_features=K, bootstrap=(method == "RF"),
                 random_state=random_state, n_jobs=n_jobs)
    forest.fit(X_in, y)
    if importance == "tree-normalised":
        return np.asarray(forest.feature_importances_, dtype=np.float64)
    return unnormalised_mdi(forest, X_in.shape[1])
