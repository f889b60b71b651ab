"""Seeded benchmark inputs, each written by its own process (``python -m harness.gen KIND ...``) so the harness
stays small. Every generator is deterministic: same arguments, same bytes.

    fasta OUT TOTAL_BP RECORDS SEED          random ACGT, 60-column lines (chromaflow.report.sweep.write_random_fasta)
    expression OUT GENES SAMPLES SEED GOLD   synthetic genes x samples TSV (DREAM4-like layout: samples x genes)
                                             and its true regulator -> target edges (GOLD, DREAM4 gold format)
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def fasta(out: str, total_bp: str, records: str, seed: str) -> None:
    from chromaflow.report.sweep import write_random_fasta

    tmp = Path(out + ".tmp")
    write_random_fasta(tmp, int(total_bp), int(seed), records=int(records))
    tmp.replace(out)


def expression(out: str, genes: str, samples: str, seed: str, gold: str) -> None:
    """Samples x genes TSV with a header of gene names (the DREAM4 layout every tool here reads), where each
    non-regulator gene is a noisy function of two regulators (the first 10 % of genes). GOLD lists every ordered
    pair (regulator, target) with 1 for a true edge, as DREAM4's gold standards do."""
    G, S = int(genes), int(samples)
    rng = np.random.default_rng(int(seed))
    n_reg = max(2, G // 10)
    R = rng.uniform(0, 1, size=(n_reg, S))
    parents = np.stack([rng.choice(n_reg, 2, replace=False) for _ in range(G)])
    X = 0.6 * R[parents[:, 0]] + 0.4 * R[parents[:, 1]] ** 2 + rng.normal(0, 0.05, (G, S))
    X[:n_reg] = R
    names = [f"G{i + 1}" for i in range(G)]
    tmp = Path(out + ".tmp")
    with open(tmp, "w") as f:
        f.write("\t".join(f'"{n}"' for n in names) + "\n")
        for s in range(S):
            f.write("\t".join(f"{v:.6f}" for v in X[:, s]) + "\n")
    tmp.replace(out)
    edges = {(int(p), g) for g in range(n_reg, G) for p in parents[g]}
    tmp = Path(gold + ".tmp")
    with open(tmp, "w") as f:
        for a in range(G):
            for b in range(G):
                if a != b:
                    f.write(f"{names[a]}\t{names[b]}\t{1 if (a, b) in edges else 0}\n")
    tmp.replace(gold)


if __name__ == "__main__":
    {"fasta": fasta, "expression": expression}[sys.argv[1]](*sys.argv[2:])
