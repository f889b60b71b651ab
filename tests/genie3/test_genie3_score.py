"""The one DREAM4 scorer (chromaflow.genie3.dream4), on a hand-computed 4-pair gold standard.

gold: A→B 1, A→C 0, B→A 0, B→C 1; weights A→B .9, A→C .5, B→C .2, B→A not listed (0).
AUROC: of the 4 (positive, negative) pairs, .9>.5, .9>0 and .2>0 are ordered right, .2<.5 is not: 3/4.
AUPR (average precision): positives at ranks 1 and 3, precision 1/1 and 2/3: (1 + 2/3) / 2 = 5/6.
"""

from __future__ import annotations

import gzip

import pytest

from chromaflow.genie3 import dream4

GOLD = "A\tB\t1\nA\tC\t0\nB\tA\t0\nB\tC\t1\n"
LINKS = [("A", "B", 0.9), ("A", "C", 0.5), ("B", "C", 0.2)]


@pytest.mark.parametrize("fmt", ["chromaflow", "arboreto-csv", "blanks"])
def test_score_of_every_link_list_format_is_hand_computed(tmp_path, fmt):
    gold = tmp_path / "gold.tsv"
    gold.write_text(GOLD)
    if fmt == "chromaflow":  # gzip TSV with a header
        links = tmp_path / "links.tsv.gz"
        with gzip.open(links, "wt") as f:
            f.write("regulator\ttarget\tweight\n" + "".join(f"{a}\t{b}\t{w}\n" for a, b, w in LINKS))
    elif fmt == "arboreto-csv":  # quoted names, an index column, commas
        links = tmp_path / "links.csv"
        links.write_text(
            '"","TF","target","importance"\n' + "".join(f'{i},"{a}","{b}",{w}\n' for i, (a, b, w) in enumerate(LINKS))
        )
    else:
        links = tmp_path / "links.txt"
        links.write_text("".join(f"{a} {b} {w}\n" for a, b, w in LINKS))
    s = dream4.score_links(links, gold)
    assert s["auroc"] == pytest.approx(0.75) and s["aupr"] == pytest.approx(5 / 6)
    assert s["pairs"] == 4 and s["scored_links"] == 3


def test_matrix_weights_score_like_the_link_list():
    import numpy as np

    genes = ["A", "B", "C"]
    W = np.zeros((3, 3))
    for a, b, w in LINKS:
        W[genes.index(a), genes.index(b)] = w
    W[0, 0] = 5.0  # a self-link is never scored
    gold = {(a, b): int(v) for a, b, v in (line.split() for line in GOLD.splitlines())}
    s = dream4.score(gold, dream4.matrix_weights(W, genes, genes))
    assert s["auroc"] == pytest.approx(0.75) and s["aupr"] == pytest.approx(5 / 6) and s["pairs"] == 4
