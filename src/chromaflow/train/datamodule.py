"""The LightningDataModule of training: ``<input_dir>/train/*.h5`` and ``<input_dir>/val/*.h5`` -> DataLoaders.

The files, their targets and chunk filters, the two data modes and the epoch-seeded sampler are in :mod:`.data`
(no Lightning there, so ``chromaflow evaluate`` starts without importing it); this module puts them together for
the Trainer, as Lightning's own examples split a ``LightningModule`` (:mod:`.module`) from its ``DataModule``.
"""

from __future__ import annotations

import os

import lightning as L
import numpy as np
import torch

from ..utils.cli_options import resolve_threads
from ..utils.errors import ChromaflowError
from .data import EpochSampler, FileInfo, InMemoryDataset, StreamingDataset, list_h5, scan_file


def auto_workers(devices: int, cpus: int | None = None, cap: int = 8) -> int:
    """DataLoader workers per device from the CPU allowance: (usable CPUs / devices) - 1, at most ``cap``
    (the rule LightlyTrain documents: leave one core per device for the training process)."""
    cpus = cpus or resolve_threads(0)
    return max(0, min(cap, cpus // max(1, devices) - 1))


class CoverageDataModule(L.LightningDataModule):
    """``<input_dir>/train/*.h5`` and ``<input_dir>/val/*.h5`` -> train/val DataLoaders (see module docstring)."""

    def __init__(
        self,
        input_dir: str,
        datasets: tuple[str, ...],
        *,
        batch_size: int = 120,
        seed: int = 0,
        data_mode: str = "stream",
        num_workers: int | None = None,
        blacklist: bool = False,
        devices: int = 1,
        pin_memory: bool = False,
    ):
        super().__init__()
        self.input_dir = input_dir
        self.datasets = tuple(datasets)
        self.batch_size = batch_size
        self.seed = seed
        self.data_mode = data_mode
        self.blacklist = blacklist
        self.num_workers = auto_workers(devices) if num_workers is None else num_workers
        self.pin_memory = pin_memory
        self.train_files: list[FileInfo] = []
        self.val_files: list[FileInfo] = []
        self.train_set: InMemoryDataset | StreamingDataset | None
        self.val_set: InMemoryDataset | StreamingDataset | None
        self.train_set = self.val_set = None  # set by setup()

    def scan(self) -> None:
        """Validate every file (cheap to call before the Trainer starts, so bad input fails before training)."""
        if self.train_files:
            return
        tr = [
            scan_file(p, self.datasets, blacklist=self.blacklist)
            for p in list_h5(os.path.join(self.input_dir, "train"), "train")
        ]
        va = [
            scan_file(p, self.datasets, blacklist=self.blacklist)
            for p in list_h5(os.path.join(self.input_dir, "val"), "val")
        ]
        lengths = {f.length for f in tr + va}
        if len(lengths) != 1:
            first = {f.length: f.path for f in tr + va}
            raise ChromaflowError(
                "training files have different chunk lengths: "
                + ", ".join(f"{p} L={n}" for n, p in sorted(first.items()))
            )
        for what, files in (("train", tr), ("val", va)):
            if sum(len(f.keep) for f in files) == 0:
                raise ChromaflowError(
                    f"{self.input_dir}/{what}: no chunk is left after the chunk filter"
                    f"{' and blacklist' if self.blacklist else ''}"
                )
        for d in self.datasets:
            if not any(d in f.datasets for f in tr):
                raise ChromaflowError(
                    f"{self.input_dir}/train: no training file holds dataset {d!r} (evaluation/{d}_coverage)"
                )
        self.train_files, self.val_files = tr, va

    @property
    def seq_len(self) -> int:
        """Row length of the training files (the files are scanned first)."""
        self.scan()
        return self.train_files[0].length

    def setup(self, stage: str | None = None) -> None:
        """Scan the files and make the training and validation datasets once: held in memory (``data_mode`` 'ram') or
        read from the files as needed."""
        self.scan()
        if self.train_set is not None:
            return
        if self.data_mode == "ram":
            self.train_set = InMemoryDataset(self.train_files, self.datasets)
            self.val_set = InMemoryDataset(self.val_files, self.datasets)
        else:
            self.train_set = StreamingDataset(self.train_files, self.datasets)
            self.val_set = StreamingDataset(self.val_files, self.datasets)

    def _rank_world(self) -> tuple[int, int]:
        trainer = getattr(self, "trainer", None)
        if trainer is None:
            return 0, 1
        return int(trainer.global_rank), int(trainer.world_size)

    def _loader(self, ds, shuffle: bool, pad: bool):
        rank, world = self._rank_world()
        trainer = getattr(self, "trainer", None)
        sampler = EpochSampler(
            len(ds),
            shuffle=shuffle,
            seed=self.seed,
            rank=rank,
            world=world,
            pad=pad,
            epoch_fn=_epoch_fn(trainer) if shuffle else None,
        )
        workers = self.num_workers
        return torch.utils.data.DataLoader(
            ds,
            batch_size=self.batch_size,
            sampler=sampler,
            num_workers=workers,
            pin_memory=self.pin_memory,
            persistent_workers=workers > 0,
            prefetch_factor=2 if workers > 0 else None,
            drop_last=False,
            collate_fn=_collate,
        )

    def train_dataloader(self):
        """The training loader: shuffled per epoch, split among the ranks, padded so that every rank runs the same
        number of steps."""
        return self._loader(self.train_set, shuffle=True, pad=True)

    def val_dataloader(self):
        """The validation loader: in file order, split among the ranks, not padded."""
        return self._loader(self.val_set, shuffle=False, pad=False)


def _epoch_fn(trainer):
    """Epochs the fit loop has processed = the index of the epoch about to run, also right when Lightning builds
    the first iterator of a resumed run (before its own set_epoch call)."""
    if trainer is None:
        return None
    return lambda: trainer.fit_loop.epoch_progress.current.processed


def _collate(items):
    xs = np.stack([x for x, _ in items])
    ys = np.stack([y for _, y in items])
    return torch.from_numpy(xs), torch.from_numpy(ys)
