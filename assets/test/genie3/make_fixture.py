#!/usr/bin/env python3
"""Regenerate the genie3 test fixture (deterministic): a 20-gene network with 5 regulators (TF1..TF5)
and 15 targets (G1..G15), 30 multifactorial samples.

Each target has 1-2 regulators; expression = sigmoid-ish response of its regulators + noise. Writes
  expression.tsv   samples x genes (quoted header, like DREAM4), 30 samples
  regulators.txt   the 5 regulator names
  gold.tsv         true edges REG<TAB>TARGET<TAB>1
Run: python make_fixture.py   (numpy only; output is byte-stable for a given numpy major version)
"""

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def main() -> None:
    rng = np.random.default_rng(20261122)
    n_samples, regs = 30, [f"TF{i}" for i in range(1, 6)]
    targets = [f"G{i}" for i in range(1, 16)]
    tf = rng.uniform(0.05, 1.0, size=(n_samples, len(regs)))
    edges, cols = [], []
    for t, name in enumerate(targets):
        k = 1 + (t % 2)
        parents = sorted(rng.choice(len(regs), size=k, replace=False).tolist())
        signal = np.zeros(n_samples)
        for p in parents:
            sign = 1.0 if rng.random() < 0.7 else -1.0
            signal += sign * tf[:, p] ** 2 / (0.25 + tf[:, p] ** 2)
            edges.append((regs[p], name))
        cols.append(0.5 + 0.4 * signal + rng.normal(0, 0.03, n_samples))
    X = np.column_stack([tf, np.column_stack(cols)])
    X = np.clip(X, 0, None)
    genes = regs + targets
    with open(HERE / "expression.tsv", "w") as fh:
        fh.write("\t".join(f'"{g}"' for g in genes) + "\n")
        for row in X:
            fh.write("\t".join(f"{v:.7f}" for v in row) + "\n")
    (HERE / "regulators.txt").write_text("\n".join(regs) + "\n")
    with open(HERE / "gold.tsv", "w") as fh:
        for a, b in sorted(edges):
            fh.write(f"{a}\t{b}\t1\n")


if __name__ == "__main__":
    main()
