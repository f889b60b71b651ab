"""Seeded synthetic training files in the genome-h5 layout (Helixer datasets + ``evaluation/<ds>_coverage``).

The coverage is a function of the sequence (a smoothed GC signal, scaled per dataset, plus Poisson noise), so a
model can learn it and losses fall over epochs. Written with h5py directly (fast); the layout is what
``chromaflow fasta2h5`` + ``chromaflow add-coverage`` write: plus rows then minus rows per record, padding at the
end of a chunk, -1 coverage at padding. Used by the tests and by benchmarks that need training data of a given
size without reads (the GPU benchmark); the reads route is ``add-coverage``.
"""

from __future__ import annotations

import numpy as np

# one-hot columns C, A, T, G
_ONEHOT = np.eye(4, dtype=np.float16)


def make_file(
    path: str,
    *,
    records: dict[str, int],
    length: int,
    datasets: dict[str, int],
    seed: int,
    species: str = "sp",
    n_chunk_record: str | None = None,
    blacklist: list[int] | None = None,
    scale: dict[str, float] | None = None,
) -> int:
    """Write ``path``; ``datasets`` maps a dataset name to its number of replicates. Returns the row count.

    ``n_chunk_record``: a record made of N (0.25 in every column) so its chunks are dropped by the chunk filter.
    ``blacklist``: per-row 0/1 values for data/blacklist (length must match the row count).
    """
    rng = np.random.default_rng(seed)
    covs: dict[str, list[np.ndarray]]
    X, seqids, se, covs = [], [], [], {d: [] for d in datasets}
    for name, n in records.items():
        x, cov_plus, cov_minus = _record(rng, n, datasets, scale, name == n_chunk_record)
        for row, start_end, cov in _record_rows(x, cov_plus, cov_minus, length, datasets):
            X.append(row)
            seqids.append(name)
            se.append(start_end)
            for d, c in cov.items():
                covs[d].append(c)
    _write(path, X, seqids, se, covs, length=length, datasets=datasets, species=species, blacklist=blacklist)
    return len(X)


def _record(rng, n: int, datasets: dict[str, int], scale: dict[str, float] | None, all_n: bool):
    """A random record of n bp (one-hot, or all N): its sequence and per-dataset (n, replicates) coverage of the
    plus and the minus strand, Poisson around a smoothed GC signal."""
    base = rng.integers(0, 4, n)
    x = _ONEHOT[base]
    if all_n:
        x = np.full((n, 4), 0.25, dtype=np.float16)
    gc = ((base == 0) | (base == 3)).astype(np.float64)
    signal = np.convolve(gc, np.ones(25) / 25, mode="same")
    cov_plus = {}
    cov_minus = {}
    for d, reps in datasets.items():
        s = (scale or {}).get(d, 6.0)
        lam = np.exp(s * (signal - 0.5)) * 2
        cov_plus[d] = rng.poisson(lam, (reps, n)).T
        cov_minus[d] = rng.poisson(lam[::-1] * 0.8, (reps, n)).T[::-1]
    return x, cov_plus, cov_minus


def _record_rows(x: np.ndarray, cov_plus: dict, cov_minus: dict, length: int, datasets: dict[str, int]):
    """(X row, start_end, {dataset: coverage row}) of one record's chunks: the plus strand in order, then the
    minus strand (reverse complement) from the record's end; padding is 0 in X and -1 in the coverage."""
    n = len(x)
    bounds = [(a, min(a + length, n)) for a in range(0, n, length)]
    for a, b in bounds:
        row = np.zeros((length, 4), np.float16)
        row[: b - a] = x[a:b]
        yield row, (a, b), {d: _padded(cov_plus[d][a:b], length, reps) for d, reps in datasets.items()}
    comp = x[::-1][:, [3, 2, 1, 0]]  # reverse complement in column order C, A, T, G: C<->G, A<->T
    for a, b in reversed(bounds):
        row = np.zeros((length, 4), np.float16)
        row[: b - a] = comp[n - b : n - a]
        yield row, (b, a), {d: _padded(cov_minus[d][a:b][::-1], length, reps) for d, reps in datasets.items()}


def _padded(values: np.ndarray, length: int, reps: int) -> np.ndarray:
    c = np.full((length, reps), -1, np.int64)
    c[: len(values)] = values
    return c


def _write(
    path: str,
    X: list,
    seqids: list,
    se: list,
    covs: dict,
    *,
    length: int,
    datasets: dict[str, int],
    species: str,
    blacklist: list[int] | None,
) -> None:
    import h5py

    n_rows = len(X)
    with h5py.File(path, "w") as f:
        f.create_dataset(
            "data/X",
            data=np.stack(X),
            chunks=(1, length, 4),
            compression="gzip",
            shuffle=True,
            maxshape=(None, length, 4),
        )
        f.create_dataset("data/seqids", data=np.array(seqids, dtype="S50"))
        f.create_dataset("data/species", data=np.array([species] * n_rows, dtype="S25"))
        f.create_dataset("data/start_ends", data=np.array(se, dtype=np.int64))
        if blacklist is not None:
            assert len(blacklist) == n_rows
            f.create_dataset("data/blacklist", data=np.array(blacklist, dtype=np.int32))
        for d, rows in covs.items():
            f.create_dataset(
                f"evaluation/{d}_coverage",
                data=np.stack(rows),
                chunks=(1, length, 1),
                compression="lzf",
                shuffle=True,
                fillvalue=-1,
                maxshape=(None, length, None),
            )
            f.create_dataset(
                f"evaluation/{d}_meta/bam_files",
                data=np.array([f"{d}_{i}.bam" for i in range(datasets[d])], dtype="S512"),
            )


def make_input_dir(
    root,
    *,
    length: int = 1000,
    train_files: int = 2,
    seed: int = 0,
    datasets: dict[str, int] | None = None,
    record_bp: int = 3000,
) -> None:
    """``root/train/t{i}.h5`` and ``root/val/v0.h5``: each 2 records of ``record_bp`` (6 chunks per record at L=1000
    incl. both strands)."""
    import os

    datasets = datasets or {"atacseq": 2, "h3k4me3": 1}
    os.makedirs(os.path.join(root, "train"), exist_ok=True)
    os.makedirs(os.path.join(root, "val"), exist_ok=True)
    for i in range(train_files):
        make_file(
            os.path.join(root, "train", f"t{i}.h5"),
            records={"c1": record_bp, "c2": record_bp},
            length=length,
            datasets=datasets,
            seed=seed + i,
        )
    make_file(
        os.path.join(root, "val", "v0.h5"),
        records={"c1": record_bp, "c2": record_bp // 2},
        length=length,
        datasets=datasets,
        seed=seed + 100,
    )
