"""Scoring a network against a DREAM4 gold standard (the one scorer of the tests and the benchmarks).

A gold standard is DREAM4's TSV: ``regulator<TAB>target<TAB>0|1``, one line per ordered pair scored (size 100:
all 9,900 off-diagonal pairs). A network's score is AUROC and AUPR (average precision, scikit-learn's) over
exactly those pairs, a pair the network does not list scoring 0 (self-links are never scored).

    python -m chromaflow.genie3.dream4 LINKS GOLD      prints AUROC and AUPR
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path
from typing import Mapping

import numpy as np


def read_gold(path: str | Path) -> dict[tuple[str, str], int]:
    """{(regulator, target): 0 or 1} of a DREAM4 gold-standard TSV."""
    gold: dict[tuple[str, str], int] = {}
    with open(path) as fh:
        for line in fh:
            if line.strip():
                a, b, v = line.split()
                gold[(a, b)] = int(v)
    return gold


def read_links(path: str | Path) -> dict[tuple[str, str], float]:
    """{(regulator, target): weight} of a link list: ``chromaflow genie3``'s (gzip TSV with a header), arboreto's
    (``TF target importance``) or the reference GENIE3's; plain or gzip, tabs, commas or blanks, quoted names or
    not. The last three columns of a line are regulator, target and weight; a line whose weight is not a number
    (a header) is skipped."""
    pred: dict[tuple[str, str], float] = {}
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        for line in f:
            parts = line.rstrip("\n").replace(",", "\t").split("\t")
            if len(parts) < 3:
                parts = line.split()
            if len(parts) < 3:
                continue
            try:
                v = float(parts[-1])
            except ValueError:
                continue  # header
            pred[(parts[-3].strip('"'), parts[-2].strip('"'))] = v
    return pred


def score(gold: Mapping[tuple[str, str], int], weights: Mapping[tuple[str, str], float]) -> dict:
    """AUROC and AUPR of ``weights`` over the gold standard's pairs (missing pairs weigh 0); ``pairs`` scored and
    ``scored_links`` (how many of them the network lists)."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    keys = sorted(gold)
    y = np.array([gold[k] for k in keys])
    s = np.array([weights.get(k, 0.0) for k in keys], dtype=np.float64)
    return {
        "auroc": float(roc_auc_score(y, s)),
        "aupr": float(average_precision_score(y, s)),
        "pairs": len(keys),
        "scored_links": sum(k in weights for k in keys),
    }


def matrix_weights(W: np.ndarray, regulators: list[str], targets: list[str]) -> dict[tuple[str, str], float]:
    """{(regulator, target): W[i, j]} of a regulators x targets weight matrix."""
    return {(r, t): float(W[i, j]) for i, r in enumerate(regulators) for j, t in enumerate(targets)}


def score_links(links: str | Path, gold: str | Path) -> dict:
    """:func:`score` of a link-list file against a gold-standard file."""
    return score(read_gold(gold), read_links(links))


if __name__ == "__main__":
    res = score_links(sys.argv[1], sys.argv[2])
    print(f"AUROC {res['auroc']:.4f} AUPR {res['aupr']:.4f}")
