"""Score a chromaflow genie3 link list against a DREAM4 gold standard (all 9,900 ordered pairs, missing = 0).

usage: python score.py LINKS.tsv.gz GOLD.tsv  -> prints AUROC AUPR(AP)
"""
from __future__ import annotations

import gzip
import sys

import numpy as np
from sklearn.metrics import average_precision_score, roc_auc_score


def score(links_path: str, gold_path: str) -> tuple[float, float]:
    gold: dict[tuple[str, str], int] = {}
    with open(gold_path) as fh:
        for line in fh:
            a, b, v = line.split()
            gold[(a, b)] = int(v)
    pred: dict[tuple[str, str], float] = {}
    with gzip.open(links_path, "rt") as fh:
        next(fh)
        for line in fh:
            a, b, v = line.rstrip("\n").split("\t")
            pred[(a, b)] = float(v)
    keys = sorted(gold)
    y = np.array([gold[k] for k in keys])
    s = np.array([pred.get(k, 0.0) for k in keys])
    return float(roc_auc_score(y, s)), float(average_precision_score(y, s))


if __name__ == "__main__":
    auroc, aupr = score(sys.argv[1], sys.argv[2])
    print(f"AUROC {auroc:.4f} AUPR {aupr:.4f}")
