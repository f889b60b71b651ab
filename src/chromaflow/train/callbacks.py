"""Callbacks: per-epoch throughput and data-wait, and the per-epoch metrics table written beside the checkpoints."""

from __future__ import annotations

import math
import os
import time

import lightning as L

from ..utils.outputs import write_text_atomic
from ..utils.progress import Progress


class SignalStop(Exception):
    """Raised by :class:`StopOnSignal` (an Exception, not a KeyboardInterrupt: Lightning ends the fit quietly and
    re-raises it)."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum


class StopOnSignal(L.Callback):
    """SIGTERM, SIGINT or SIGHUP during training (:meth:`request`, from
    :func:`chromaflow.utils.signals.handle_stop_signals`) ends the fit at the end of the current batch, never inside an
    optimizer step or a checkpoint write, by raising :class:`SignalStop`. ``<out>/last.ckpt`` stays the one of the
    last completed epoch, which ``--resume`` continues exactly (a mid-epoch checkpoint would not: the data order
    and the per-epoch callbacks start at epoch boundaries)."""

    def __init__(self):
        self.signum: int | None = None

    def request(self, signum: int) -> None:
        """Ask for the fit to stop at the end of the current batch (called from the signal handler)."""
        self.signum = signum

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        """Raise :class:`SignalStop` once a stop was requested."""
        if self.signum is not None:
            raise SignalStop(self.signum)


class ThroughputCallback(L.Callback):
    """Per training epoch: wall seconds, samples, samples/s, bp/s and the fraction of the epoch spent waiting for
    data (time between the end of one step and the start of the next, plus before the first step)."""

    def __init__(self, seq_len: int, progress: bool | None = None):
        self.seq_len = seq_len
        self.epochs: list[dict] = []
        self.progress = progress
        self._bar = None

    def on_train_epoch_start(self, trainer, pl_module):
        """Start the epoch's clocks and counters, and its progress bar on rank 0."""
        self._t0 = time.perf_counter()
        self._t0_unix = time.time()
        self._last = self._t0
        self._wait = 0.0
        self._samples = 0
        if trainer.is_global_zero:
            total = trainer.num_training_batches
            total = total if isinstance(total, int) or (isinstance(total, float) and math.isfinite(total)) else 0
            self._bar = Progress(max(total, 1), f"epoch {trainer.current_epoch}", " batches", enabled=self.progress)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        """Count the time since the last step ended as waiting for data."""
        now = time.perf_counter()
        self._wait += now - self._last

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        """Count the batch's samples, note when its step ended and advance the progress bar."""
        self._samples += int(batch[0].shape[0])
        self._last = time.perf_counter()
        if self._bar is not None:
            self._bar.update(1)

    def on_validation_start(self, trainer, pl_module):
        """Note where the epoch's training part ended (not for the sanity check)."""
        if trainer.sanity_checking:
            return
        self._train_end = time.perf_counter()

    def on_train_epoch_end(self, trainer, pl_module):
        """Append the epoch's timing to :attr:`epochs` (epoch, training and validation seconds, samples, samples/s,
        bp/s, data-wait fraction, wall-clock bounds of training) and close its progress bar."""
        end = time.perf_counter()
        train_end = getattr(self, "_train_end", None) or end
        train_s = max(train_end - self._t0, 1e-9)
        samples = self._samples * max(1, trainer.world_size)  # every rank runs the same number of samples
        self.epochs.append(
            {
                "epoch": int(trainer.current_epoch),
                "epoch_s": end - self._t0,
                "train_s": train_s,
                "val_s": end - train_end,
                "train_samples": samples,
                "samples_per_s": samples / train_s,
                "bp_per_s": samples * self.seq_len / train_s,
                "data_wait_fraction": self._wait / train_s,
                # wall-clock bounds of the training part (for GPU samples taken by another process, e.g. NVML)
                "train_start_unix": self._t0_unix,
                "train_end_unix": self._t0_unix + train_s,
            }
        )
        self._train_end = None
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class EpochTable(L.Callback):
    """Writes ``<out>/metrics.tsv`` (one row per epoch: losses, accuracies, per-dataset values, timing) after every
    epoch, on rank 0, atomically; like Predmoter's ``metrics.log`` but tab-separated and with more columns.
    ``resumed_epochs``: a resumed run (that many epochs done) continues the table's rows of those epochs."""

    def __init__(self, path: str, throughput: ThroughputCallback, resumed_epochs: int | None = None):
        self.path = path
        self.throughput = throughput
        self.resumed_epochs = resumed_epochs

    def setup(self, trainer, pl_module, stage):
        """Make the module call :meth:`write` after every epoch; for a resumed run, first take back the table's rows
        of the epochs already done."""
        if self.resumed_epochs is not None:
            pl_module.epoch_log = [
                r for r in resume_history(self.path) if r.get("epoch", 1 << 30) < self.resumed_epochs
            ]
        if self.write not in pl_module.epoch_listeners:
            pl_module.epoch_listeners.append(self.write)

    def write(self, trainer, pl_module):
        """Called by the module once the epoch's row exists (module hooks run after plain callbacks')."""
        if not trainer.is_global_zero:
            return
        rows = []
        timing = {e["epoch"]: e for e in self.throughput.epochs}
        for r in pl_module.epoch_log:
            t = timing.get(r["epoch"])
            if t is None:  # an epoch from before a --resume: keep the timing it was written with
                row = dict(r)
                for k in ("epoch_s", "samples_per_s", "data_wait_fraction"):
                    row.setdefault(k, math.nan)
                rows.append(row)
            else:
                rows.append({**r, **{k: t[k] for k in ("epoch_s", "samples_per_s", "data_wait_fraction")}})
        if not rows:
            return
        cols = list(rows[0])
        lines = ["\t".join(cols)] + ["\t".join(_fmt(r.get(c)) for c in cols) for r in rows]
        write_text_atomic(self.path, "\n".join(lines) + "\n")


def _fmt(v) -> str:
    if isinstance(v, float):
        return repr(v)
    return str(v)


def resume_history(path: str) -> list[dict]:
    """Rows of an existing metrics.tsv (to continue it after --resume)."""
    if not os.path.exists(path):
        return []
    with open(path) as fh:
        lines = fh.read().splitlines()
    if not lines:
        return []
    cols = lines[0].split("\t")
    out = []
    for line in lines[1:]:
        vals = line.split("\t")
        row: dict[str, int | float | str] = {}
        for c, v in zip(cols, vals):
            try:
                row[c] = int(v) if c == "epoch" else float(v)
            except ValueError:
                row[c] = v
        out.append(row)
    return out
