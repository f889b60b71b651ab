"""Inputs of the peaks tests: predicted-coverage tracks with peaks, written as a Predmoter-layout predictions h5
(or a genome h5 with measured evaluation/<ds>_coverage), and the strand average as a bedGraph for MACS3."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np


def peaky_track(rng: np.random.Generator, n: int, n_peaks: int) -> np.ndarray:
    """Integer coverage: background 0-4 and bumps of height 5-200 and width 20-800 bp."""
    x = rng.integers(0, 5, n).astype(np.float64)
    for _ in range(n_peaks):
        c, w, h = rng.integers(0, n), rng.integers(20, 800), rng.integers(5, 200)
        lo, hi = max(0, c - 2 * w), min(n, c + 2 * w)
        i = np.arange(lo, hi)
        x[lo:hi] += h * np.exp(-0.5 * ((i - c) / (w / 2)) ** 2)
    return np.rint(x).astype(np.int64)


def strands(seed: int, sizes: dict[str, int]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(plus, minus) tracks per chromosome: minus = plus shifted a little plus noise (strands differ)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, n in sizes.items():
        p = peaky_track(rng, n, max(1, n // 4000))
        m = np.clip(np.roll(p, 7) + rng.integers(-2, 3, n), 0, None)
        out[name] = (p, m)
    return out


def write_h5(
    path: Path,
    tracks: dict[str, tuple[np.ndarray, np.ndarray]],
    L: int,
    dataset: str = "atacseq",
    observed: bool = False,
) -> Path:
    """Predmoter layout: plus rows ascending, then minus rows descending (start_ends reversed, values reversed),
    the last chunk of a chromosome padded with -1. ``observed``: a genome h5 with evaluation/<dataset>_coverage
    (one BAM) instead of prediction/predictions."""
    seqids, se, rows = [], [], []
    for name, (p, m) in tracks.items():
        n = len(p)
        starts = list(range(0, n, L))
        plus, minus = [], []
        for s in starts:
            e = min(s + L, n)
            a = np.full(L, -1, np.int64)
            a[: e - s] = p[s:e]
            plus.append((name, (s, e), a))
            b = np.full(L, -1, np.int64)
            b[: e - s] = m[s:e][::-1]
            minus.append((name, (e, s), b))
        for row in plus + minus[::-1]:
            seqids.append(row[0].encode())
            se.append(row[1])
            rows.append(row[2])
    with h5py.File(path, "w") as h5:
        h5.create_dataset("data/seqids", data=np.array(seqids, dtype="S50"))
        h5.create_dataset("data/start_ends", data=np.array(se, dtype=np.int64))
        values = np.stack(rows)[:, :, None]
        if observed:
            h5.create_dataset(f"evaluation/{dataset}_coverage", data=values.astype(np.int32))
        else:
            h5.create_dataset("prediction/predictions", data=values, chunks=(1, L, 1), compression="gzip")
            h5.create_dataset("prediction/datasets", data=np.array([dataset.encode()], dtype="S25"))
    return path


def strand_average(p: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Predmoter's strand average: round half to even of the float mean."""
    return np.rint((p + m) / 2.0).astype(np.int64)


def write_bedgraph(path: Path, tracks: dict[str, np.ndarray]) -> Path:
    """One line per run of equal values, every base covered."""
    with open(path, "w") as fh:
        for name, v in tracks.items():
            cut = np.flatnonzero(np.diff(v)) + 1
            s = np.concatenate([[0], cut])
            e = np.concatenate([cut, [len(v)]])
            fh.write("".join(f"{name}\t{a}\t{b}\t{int(v[a])}\n" for a, b in zip(s, e)))
    return path
