"""Contributions files (``chromaflow attribute``'s layout, format chromaflow-contributions/1) with planted motifs, for
the discover-motifs tests (tests/interpret/test_discover.py) and the interpret stage's TF-MoDISco case
(benchmarks/stages/interpret.py): every region holds one instance of one planted JASPAR motif (sampled from its PPM)
whose bases carry the motif's log-odds as hypothetical contributions (as a model that reads the motif would give
them), and one instance of a decoy motif with no contribution at all; elsewhere small noise."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

FORMAT = "chromaflow-contributions/1"


def jaspar_ppm(matrix_id: str) -> np.ndarray:
    """(4, L) PPM, rows A C G T, of a motif in pyjaspar's bundled JASPAR (read here with pyjaspar itself)."""
    from pyjaspar import jaspardb

    m = jaspardb().fetch_motif_by_id(matrix_id)
    counts = np.array([[float(x) for x in m.counts[b]] for b in "ACGT"])
    return counts / counts.sum(axis=0, keepdims=True)


def planted(
    path: Path,
    planted_ids: list[str],
    decoy_id: str,
    n: int = 600,
    width: int = 200,
    seed: int = 0,
    shuffle: bool = False,
) -> dict:
    """Write the file; returns what was planted. ``shuffle``: the hypothetical rows are given to other regions (the
    contributions no longer sit on the motifs: a broken attribution)."""  # fmt: skip
    rng = np.random.default_rng(seed)
    ppms = {m: jaspar_ppm(m) for m in [*planted_ids, decoy_id]}
    seq = rng.integers(0, 4, (n, width))
    hyp = rng.normal(0.0, 0.02, (n, 4, width))
    sites = []
    for i in range(n):
        motif = planted_ids[i % len(planted_ids)]
        ppm = ppms[motif]
        w = ppm.shape[1]
        s = int(rng.integers(10, width // 2 - w))
        seq[i, s : s + w] = [rng.choice(4, p=ppm[:, k] / ppm[:, k].sum()) for k in range(w)]
        hyp[i, :, s : s + w] += np.log2((ppm + 0.01) / 0.25) / 4.0
        dppm = ppms[decoy_id]
        d = int(rng.integers(width // 2 + 5, width - dppm.shape[1] - 5))
        seq[i, d : d + dppm.shape[1]] = [rng.choice(4, p=dppm[:, k] / dppm[:, k].sum()) for k in range(dppm.shape[1])]
        sites.append((motif, s, d))
    onehot = np.eye(4, dtype=np.float32)[seq].transpose(0, 2, 1)  # N x 4 x W, A C G T
    if shuffle:
        hyp = hyp[rng.permutation(n)]
    with h5py.File(path, "w") as f:
        f.attrs.update({"format": FORMAT, "method": "planted", "dataset": "atacseq", "strand": "avg", "model": "none"})
        f.create_dataset("onehot", data=onehot)
        f.create_dataset("hypothetical", data=hyp.astype(np.float32))
        f.create_dataset("observed", data=(onehot * hyp).sum(axis=1).astype(np.float32))
    return {"sites": sites, "ppms": ppms}
