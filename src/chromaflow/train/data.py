"""Training data: Predmoter's targets, masks and chunk filters (FORMATS.md §7.2): files, datasets and the sampler.

The LightningDataModule that wraps them for the Trainer is in :mod:`.datamodule`; this module imports no Lightning, so
``chromaflow evaluate`` (which reads the same files the same way) starts without it (importing Lightning costs
~3.5 CPU-s over torch: torch._dynamo, torchmetrics, scipy.signal).

Per file (a genome h5 with ``evaluation/<dataset>_coverage``, from ``chromaflow add-coverage`` or Helixer):

* **chunk filter**: a chunk is dropped when the maximum of the C column of ``data/X`` equals 0.25 (Predmoter's
  all-N gap filter; literally "has an N and no C"); with ``blacklist=True`` chunks whose ``data/blacklist`` is 0 are
  dropped too;
* **target** of dataset d: the mean over the replicate axis of ``evaluation/<d>_coverage``, rounded to 2 decimals,
  float32;
* **filler**: a dataset the model predicts but the file lacks is filled with -3 (rows starting with -3 are dropped
  from the loss when the model has more than one dataset). Unlike Predmoter the filler has the file's L, not a
  hard-coded 21384;
* padding positions (all-zero X) are masked in the loss and metric by the model (not here).

Two data modes:

* ``stream`` (default): each item is read from its h5 when the batch is built, by DataLoader workers; memory is
  constant whatever the number or size of the files (only the row index is held);
* ``ram``: every kept chunk is read once and held in RAM, compressed: X as one byte per position (an index into
  the file's table of distinct one-hot rows) and targets as integer hundredths, both deflated (isal). Items are
  decoded on the fly; no HDF5 reads after set-up.

Order: :class:`EpochSampler` draws the permutation of epoch e from a generator seeded with (seed, e), so the data
order depends only on the seed and the epoch: a resumed run sees exactly the batches an uninterrupted run sees,
and with N devices rank r takes every N-th index of the same permutation (padded like DistributedSampler).
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..utils.errors import ChromaflowError
from ..utils.inputs import open_h5_input

FILLER = -3.0
N_FILTER = 0.25


@dataclass
class FileInfo:
    """What :func:`scan_file` learnt of one training h5: its path, rows, row length, the model datasets it holds with
    their ``replicates``, the kept row indices (``keep``, (k,) int64) and how many rows the N filter and the
    blacklist dropped."""

    path: str
    n_rows: int
    length: int
    datasets: tuple[str, ...]  # the model datasets this file holds
    replicates: dict[str, int]
    keep: np.ndarray  # kept row indices
    dropped_n: int = 0
    dropped_blacklist: int = 0


def list_h5(folder: str, what: str) -> list[str]:
    """The ``*.h5`` files of ``folder``, sorted; ChromaflowError if the folder is missing or holds none (``what``:
    'train' or 'val', for the message)."""
    if not os.path.isdir(folder):
        raise ChromaflowError(f"{folder}: {what} folder does not exist (expected <input-dir>/{what}/*.h5)")
    files = sorted(glob.glob(os.path.join(folder, "*.h5")))
    if not files:
        raise ChromaflowError(f"{folder}: no *.h5 files in the {what} folder")
    return files


def coverage_datasets(fh) -> dict[str, int]:
    """Dataset name -> number of replicate columns, for every ``evaluation/<name>_coverage`` in an open file."""
    out: dict[str, int] = {}
    ev = fh.get("evaluation")
    if ev is None:
        return out
    for key in ev.keys():
        if key.endswith("_coverage") and not key.endswith("_spliced_coverage"):
            d = ev[key]
            if getattr(d, "ndim", 0) == 3:
                out[key[: -len("_coverage")]] = int(d.shape[2])
    return out


def scan_file(
    path: str, model_datasets: tuple[str, ...], *, blacklist: bool, block_rows: int = 64, require_all: bool = False
) -> FileInfo:
    """Validate one h5 and compute its kept rows (chunk filter, optional blacklist)."""
    fh = open_h5_input(path, "training h5")
    with fh:
        if "data/X" not in fh:
            raise ChromaflowError(f"{path}: dataset data/X is missing (not a genome h5?)")
        X = fh["data/X"]
        if X.ndim != 3 or X.shape[2] != 4:
            raise ChromaflowError(f"{path}: data/X has shape {X.shape}, expected (N, L, 4)")
        n, length = int(X.shape[0]), int(X.shape[1])
        have = coverage_datasets(fh)
        present = tuple(d for d in model_datasets if d in have)
        if not present:
            raise ChromaflowError(
                f"{path}: holds none of the model's datasets {', '.join(model_datasets)} "
                f"(it has: {', '.join(sorted(have)) or 'no evaluation/<name>_coverage'}; "
                f"add them with chromaflow add-coverage)"
            )
        if require_all and len(present) != len(model_datasets):
            missing = [d for d in model_datasets if d not in have]
            raise ChromaflowError(f"{path}: lacks evaluation/{missing[0]}_coverage")
        for d in present:
            shape = fh[f"evaluation/{d}_coverage"].shape
            if shape[:2] != (n, length) or shape[2] < 1:
                raise ChromaflowError(f"{path}: evaluation/{d}_coverage has shape {shape}, expected ({n}, {length}, B)")
        keep = np.ones(n, dtype=bool)
        for a in range(0, n, block_rows):
            col_c = X[a : a + block_rows, :, 0]
            keep[a : a + block_rows] = col_c.max(axis=1) != np.float16(N_FILTER)
        dropped_n = int((~keep).sum())
        dropped_bl = 0
        if blacklist and "data/blacklist" in fh:
            bl = np.asarray(fh["data/blacklist"][()]).reshape(-1)
            if bl.shape != (n,):
                raise ChromaflowError(f"{path}: data/blacklist has shape {bl.shape}, expected ({n},)")
            drop = keep & (bl == 0)
            dropped_bl = int(drop.sum())
            keep &= bl != 0
    return FileInfo(
        path=path,
        n_rows=n,
        length=length,
        datasets=present,
        replicates={d: have[d] for d in present},
        keep=np.flatnonzero(keep),
        dropped_n=dropped_n,
        dropped_blacklist=dropped_bl,
    )


def target_from_coverage(cov: np.ndarray) -> np.ndarray:
    """(..., L, B) replicate counts -> (..., L) float32 target: mean over B rounded to 2 decimals (Predmoter)."""
    return np.around(cov.mean(axis=-1), 2).astype(np.float32)


# --------------------------------------------------------------------------------------------------
# datasets
# --------------------------------------------------------------------------------------------------
class _Base(torch.utils.data.Dataset):
    def __init__(self, files: list[FileInfo], model_datasets: tuple[str, ...]):
        self.files = files
        self.model_datasets = tuple(model_datasets)
        self.length = files[0].length if files else 0
        # global index -> (file index, row); kept as two compact arrays
        self.file_of = (
            np.concatenate([np.full(len(f.keep), i, dtype=np.int32) for i, f in enumerate(files)])
            if files
            else np.zeros(0, np.int32)
        )
        self.row_of = np.concatenate([f.keep for f in files]).astype(np.int64) if files else np.zeros(0, np.int64)

    def __len__(self) -> int:
        return int(self.row_of.size)

    @property
    def bp(self) -> int:
        """Bases of the kept rows: rows x row length."""
        return len(self) * self.length


class StreamingDataset(_Base):
    """Reads X and coverage of one chunk per item from its h5 (handles opened lazily per process)."""

    def __init__(self, files: list[FileInfo], model_datasets: tuple[str, ...]):
        super().__init__(files, model_datasets)
        self._handles: dict[int, Any] = {}  # open h5py.File by file index
        self._pid: int | None = None

    def _fh(self, i: int):
        import h5py

        if self._pid != os.getpid():  # never reuse a handle across fork
            self._handles = {}
            self._pid = os.getpid()
        fh = self._handles.get(i)
        if fh is None:
            fh = h5py.File(self.files[i].path, "r")
            self._handles[i] = fh
        return fh

    def __getitem__(self, idx: int):
        fi, row = int(self.file_of[idx]), int(self.row_of[idx])
        fh = self._fh(fi)
        info = self.files[fi]
        x = fh["data/X"][row]
        y = np.full((self.length, len(self.model_datasets)), FILLER, dtype=np.float32)
        for j, d in enumerate(self.model_datasets):
            if d in info.replicates:
                y[:, j] = target_from_coverage(fh[f"evaluation/{d}_coverage"][row])
        return np.ascontiguousarray(x, dtype=np.float16), y

    def close(self) -> None:
        """Close the h5 files this dataset opened."""
        for fh in self._handles.values():
            try:
                fh.close()
            except Exception:  # pragma: no cover
                pass
        self._handles = {}


class InMemoryDataset(_Base):
    """Holds every kept chunk in RAM, compressed (see the module docstring); decodes per item."""

    def __init__(self, files: list[FileInfo], model_datasets: tuple[str, ...], progress=None):
        super().__init__(files, model_datasets)
        import h5py
        import isal.isal_zlib as zlib_fast

        self._z = zlib_fast
        self.items: list[tuple[bytes, bytes, bytes]] = []  # (table, codes, targets)
        self.nbytes = 0
        for info in files:
            with h5py.File(info.path, "r") as fh:
                X = fh["data/X"]
                covs = {d: fh[f"evaluation/{d}_coverage"] for d in info.replicates}
                for row in info.keep.tolist():
                    x = np.ascontiguousarray(X[row], dtype=np.float16)
                    patterns, codes = np.unique(x.view(np.uint64).reshape(-1), return_inverse=True)
                    if patterns.size > 256:
                        raise ChromaflowError(
                            f"{info.path}: row {row} of data/X has {patterns.size} distinct "
                            f"one-hot rows (> 256); use --data-mode stream"
                        )
                    hund = np.full((self.length, len(self.model_datasets)), int(FILLER * 100), dtype=np.int32)
                    for j, d in enumerate(self.model_datasets):
                        if d in covs:
                            # integer hundredths of the Predmoter target (exact: decoded as k / 100 in float64)
                            hund[:, j] = np.rint(np.around(covs[d][row].mean(axis=-1), 2) * 100).astype(np.int32)
                    item = (
                        patterns.tobytes(),
                        zlib_fast.compress(codes.astype(np.uint8).tobytes(), 1),
                        zlib_fast.compress(hund.tobytes(), 1),
                    )
                    self.items.append(item)
                    self.nbytes += sum(len(b) for b in item)
                    if progress is not None:
                        progress.update(1)

    def __getitem__(self, idx: int):
        table, codes, hund = self.items[idx]
        patterns = np.frombuffer(table, dtype=np.uint64)
        c = np.frombuffer(self._z.decompress(codes), dtype=np.uint8)
        x = patterns[c].view(np.float16).reshape(self.length, 4)
        k = np.frombuffer(self._z.decompress(hund), dtype=np.int32).reshape(self.length, len(self.model_datasets))
        y = (k.astype(np.float64) / 100.0).astype(np.float32)
        return x, y


class EpochSampler(torch.utils.data.Sampler):
    """Permutation of epoch e from ``torch.Generator().manual_seed(seed * 1_000_003 + e)`` (or the identity when
    not shuffling); rank r of w takes indices r, r+w, ... of the permutation, padded to a multiple of w when
    ``pad`` (training under DDP), so every rank runs the same number of steps."""

    def __init__(
        self, n: int, *, shuffle: bool, seed: int, rank: int = 0, world: int = 1, pad: bool = True, epoch_fn=None
    ):
        self.n, self.shuffle, self.seed = n, shuffle, int(seed)
        self.rank, self.world, self.pad = rank, world, pad
        self.epoch = 0
        # the epoch read when an epoch's iteration starts: after a resume Lightning 2.6 creates the first iterator
        # (and its workers prefetch) before it calls set_epoch, so set_epoch alone would replay epoch 0's order
        self.epoch_fn = epoch_fn

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch whose permutation :meth:`indices` gives (the ``epoch_fn``, where given, overrides it)."""
        self.epoch = int(epoch)

    def indices(self) -> list[int]:
        """This rank's indices for the current epoch (read from ``epoch_fn`` where given): the epoch's permutation
        (or 0..n-1), padded by repeating it to a multiple of the ranks when ``pad``, then every ``world``-th from
        ``rank``."""
        if self.epoch_fn is not None:
            self.epoch = int(self.epoch_fn())
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
            order = torch.randperm(self.n, generator=g).tolist()
        else:
            order = list(range(self.n))
        if self.world > 1:
            if self.pad and order and len(order) % self.world:
                extra = self.world - len(order) % self.world
                order = order + (order * (extra // len(order) + 1))[:extra]
            order = order[self.rank :: self.world]
        return order

    def __iter__(self):
        idx = self.indices()
        if os.environ.get("CHROMAFLOW_DEBUG_SAMPLER"):
            print(f"sampler epoch={self.epoch} shuffle={self.shuffle} {idx[:6]}", flush=True)
        return iter(idx)

    def __len__(self) -> int:
        if self.world <= 1:
            return self.n
        if self.pad:
            return -(-self.n // self.world)
        return len(range(self.rank, self.n, self.world))
