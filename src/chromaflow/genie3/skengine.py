"""The scikit-learn engine (correctness baseline): one RandomForestRegressor / ExtraTreesRegressor per
target, importances recomputed UNnormalised from the fitted trees (scikit-learn's
``feature_importances_`` is normalised per tree, GENIE3's is not)."""

from __future__ import annotations

import numpy as np


def tree_unnormalised_mdi(forest, n_features: int):
    """Per tree, in tree order, the vector over features f of the sum over nodes splitting on f of
    (w*imp - wL*impL - wR*impR) / w_root (a tree that is one leaf: zeros). A generator, so the mean below
    never holds trees x features at once (1000 x 30,000 doubles would be 240 MB per target)."""
    for est in forest.estimators_:
        t = est.tree_
        left, right = t.children_left, t.children_right
        internal = np.flatnonzero(left != -1)
        if internal.size == 0:
            yield np.zeros(n_features, dtype=np.float64)
            continue
        w = t.weighted_n_node_samples
        imp = t.impurity
        lo, hi = left[internal], right[internal]  # the left and right children
        dec = w[internal] * imp[internal] - w[lo] * imp[lo] - w[hi] * imp[hi]
        yield np.bincount(t.feature[internal], weights=dec, minlength=n_features) / w[0]


def unnormalised_mdi(forest, n_features: int) -> np.ndarray:
    """Mean over trees of sum over nodes splitting on f of (w*imp - wL*impL - wR*impR) / w_root."""
    total = np.zeros(n_features, dtype=np.float64)
    for row in tree_unnormalised_mdi(forest, n_features):  # summed in tree order, as always
        total += row
    return total / max(len(forest.estimators_), 1)


def fit_forest(X_in: np.ndarray, y: np.ndarray, n_trees: int, K: int, method: str, random_state: int, n_jobs: int):
    """scikit-learn's forest of one target: RF (bootstrap) or ET (none), K features per split."""
    from sklearn.ensemble import ExtraTreesRegressor, RandomForestRegressor

    cls = RandomForestRegressor if method == "RF" else ExtraTreesRegressor
    forest = cls(
        n_estimators=n_trees, max_features=K, bootstrap=(method == "RF"), random_state=random_state, n_jobs=n_jobs
    )
    return forest.fit(X_in, y)


def target_importances(
    X_in: np.ndarray,
    y: np.ndarray,
    n_trees: int,
    K: int,
    method: str,
    random_state: int,
    n_jobs: int,
    importance: str = "unnormalised",
) -> np.ndarray:
    """Importances of every input regulator for one target ``y`` from a scikit-learn forest (:func:`fit_forest`):
    (n_regulators,) float64, unnormalised MDI (:func:`unnormalised_mdi`) or, for ``importance`` 'tree-normalised',
    scikit-learn's ``feature_importances_``."""
    forest = fit_forest(X_in, y, n_trees, K, method, random_state, n_jobs)
    if importance == "tree-normalised":
        return np.asarray(forest.feature_importances_, dtype=np.float64)
    return unnormalised_mdi(forest, X_in.shape[1])
