"""The LightningModule: Predmoter's network, loss, metric and optimiser, saving Predmoter-loadable checkpoints.

Checkpoint compatibility (FORMATS.md §2): ``hyper_parameters`` holds exactly Predmoter's 16 constructor keys
(``save_hyperparameters`` of this ``__init__``), and ``state_dict`` holds the network's keys *without* a prefix
(``down_layer_list.0.weight`` ...): the network lives in ``self.net`` but :meth:`state_dict` /
:meth:`load_state_dict` present it unprefixed, so real Predmoter (``-m predict --model ours.ckpt``) and
``chromaflow.model.checkpoint.load_checkpoint`` both load our files, and we load theirs.
"""

from __future__ import annotations

import math

import lightning as L
import numpy as np
import torch

from ..utils.errors import ChromaflowError
from ..model.hparams import hparams_for
from ..model.network import ModelConfig, PredmoterNet
from .losses import EpochMeans, row_stats

MONITORED = ("avg_train_loss", "avg_train_accuracy", "avg_val_loss", "avg_val_accuracy")


def epoch_seed(seed: int, epoch: int) -> int:
    """The RNG seed of epoch ``epoch`` (dropout): a function of (seed, epoch) only, so resuming is exact."""
    return int(np.random.SeedSequence([int(seed), int(epoch)]).generate_state(1, dtype=np.uint32)[0])


class PredmoterModule(L.LightningModule):
    """Predmoter's ``bi-hybrid`` / ``hybrid`` / ``cnn`` network trained with Poisson NLL on log-rates and Adam."""

    def __init__(
        self,
        model_type: str,
        cnn_layers: int,
        filter_size: int,
        kernel_size: int,
        step: int,
        up: int,
        dilation: int,
        lstm_layers: int,
        hidden_size: int,
        bnorm: bool,
        dropout: float,
        learning_rate: float,
        seq_len: int,
        input_size: int,
        output_size: int,
        datasets: list,
    ):
        super().__init__()
        self.save_hyperparameters()
        self.cfg = ModelConfig.from_hparams(dict(self.hparams), where="model")
        self.cfg.check_length(int(seq_len), "model")
        self.net = PredmoterNet(self.cfg)
        self.datasets = tuple(self.cfg.datasets)
        self.seed = 0
        self.frozen_prefixes: tuple[str, ...] = ()
        self._train_means: EpochMeans | None = None
        self._val_means: EpochMeans | None = None
        self._last_val: dict[str, float] | None = None  # the last validation epoch's means, for the epoch row
        self.epoch_log: list[dict] = []  # per-epoch metrics (every rank holds the reduced values)
        self.epoch_listeners: list = []  # called with (trainer, module) after each epoch's row is added

    # --- construction for a training run ------------------------------------------------------------
    @classmethod
    def for_training(cls, datasets, seq_len: int, *, seed: int, options: dict, base=None) -> "PredmoterModule":
        """The module a run trains: a new model from ``options`` (the architecture options and learning_rate; None
        = Predmoter's default), or with ``base`` (the --init/--resume checkpoint) the base's architecture, with
        ``datasets``, ``seq_len`` and, when given, options' learning_rate. ``seed`` seeds each epoch's dropout."""
        if base is not None:
            hp = base.config.hparams()
            hp["seq_len"] = seq_len
            hp["datasets"] = list(datasets)
            hp["output_size"] = len(datasets)
            if options.get("learning_rate") is not None:
                hp["learning_rate"] = options["learning_rate"]
        else:
            hp = hparams_for(options, datasets, seq_len)
        try:
            module = cls(**hp)
        except (ValueError, RuntimeError) as exc:
            raise ChromaflowError(f"model: {exc}") from None
        module.seed = seed
        return module

    def fine_tune(self, base, *, head: str, freeze_encoder: bool) -> list[str]:
        """Start from ``base``'s weights (:func:`chromaflow.train.finetune.init_from`), optionally with the encoder
        (down path and LSTMs) frozen; returns notes for the metrics."""
        from .finetune import init_from

        notes = init_from(self, base, head=head)
        if freeze_encoder:
            self.freeze_prefixes(("down_layer_list", "lstm_layer_list"))
            notes.append("encoder frozen (down_layer_list, lstm_layer_list)")
        return notes

    def sync_batchnorm_on_cpu(self) -> None:
        """BatchNorm statistics over all DDP processes on CPU (gloo; :mod:`chromaflow.train.syncbn`); on GPUs the
        Trainer's ``sync_batchnorm`` does it."""
        from .syncbn import convert

        convert(self.net)

    # --- checkpoint layout: the network's keys, unprefixed ------------------------------------------
    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        """The network's state_dict, its keys without a ``net.`` prefix (the checkpoint layout)."""
        return self.net.state_dict(destination=destination, prefix=prefix, keep_vars=keep_vars)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Load ``state_dict`` (the network's keys, without a ``net.`` prefix) into the network."""
        return self.net.load_state_dict(state_dict, strict=strict, assign=assign)

    # --- model ---------------------------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The network's log-rates (B, L, D) of one-hot input ``x`` (B, L, 4)."""
        return self.net(x)

    def freeze_prefixes(self, prefixes: tuple[str, ...]) -> None:
        """Freeze the parameters under ``prefixes`` (e.g. down_layer_list, lstm_layer_list); their BatchNorms keep
        their running statistics (eval mode) while the rest trains."""
        self.frozen_prefixes = tuple(prefixes)
        for name, p in self.net.named_parameters():
            if name.startswith(self.frozen_prefixes):
                p.requires_grad_(False)

    def _apply_frozen_modes(self) -> None:
        if not self.frozen_prefixes:
            return
        for name, m in self.net.named_modules():
            if name.startswith(self.frozen_prefixes) and isinstance(m, (torch.nn.BatchNorm1d, torch.nn.Dropout)):
                m.eval()

    def configure_optimizers(self):
        """Adam over the parameters that are not frozen, at the configured learning rate."""
        params = [p for p in self.parameters() if p.requires_grad]
        return torch.optim.Adam(params, lr=self.hparams.learning_rate)

    # --- training / validation -----------------------------------------------------------------------
    def _stats(self, batch, with_pearson=True):
        x, y = batch
        x = x.to(torch.float32)
        y = y.to(torch.float32)
        p = self(x).to(torch.float32)
        loss_rows, pearson, used = row_stats(p, y, x, with_pearson=with_pearson)
        return loss_rows, pearson, used

    def on_train_epoch_start(self) -> None:
        """Seed the RNG for this epoch (:func:`epoch_seed`), start the epoch's training means and keep frozen
        BatchNorm and Dropout layers in eval mode."""
        torch.manual_seed(epoch_seed(self.seed, self.current_epoch))
        self._train_means = EpochMeans(self.datasets, self.device)
        self._apply_frozen_modes()

    def training_step(self, batch, batch_idx):
        """The batch's loss: the mean Poisson NLL over the rows that count (a zero that keeps the graph when none
        do); the per-row statistics go into the epoch's means."""
        loss_rows, pearson, used = self._stats(batch)
        self._train_means.add(loss_rows, pearson, used)
        n_used = used.sum()
        if n_used == 0:  # only filler rows: nothing to learn from, keep the graph
            return (loss_rows * 0).sum()
        return (loss_rows * used).sum() / n_used

    def on_validation_epoch_start(self) -> None:
        """Start the epoch's validation means."""
        self._val_means = EpochMeans(self.datasets, self.device)

    def validation_step(self, batch, batch_idx):
        """Add the batch's per-row loss and Pearson correlation to the validation means."""
        loss_rows, pearson, used = self._stats(batch)
        self._val_means.add(loss_rows, pearson, used)

    def _reduce(self, means: EpochMeans) -> dict[str, float]:
        sums = means.sums
        if self.trainer is not None and self.trainer.world_size > 1:
            sums = self.trainer.strategy.reduce(sums.clone(), reduce_op="sum")
        return means.result(sums)

    def on_validation_epoch_end(self) -> None:
        """Log the epoch's validation loss and accuracy (summed over the processes), overall and per dataset, and
        keep them for the epoch's row; nothing during the sanity check."""
        if self.trainer.sanity_checking or self._val_means is None:
            return
        res = self._reduce(self._val_means)
        self._last_val = res
        self.log("avg_val_loss", res["loss"], sync_dist=False, rank_zero_only=False)
        self.log("avg_val_accuracy", res["accuracy"], sync_dist=False, rank_zero_only=False)
        for d in self.datasets:
            self.log(f"{d}_avg_val_loss", res[f"{d}_loss"])
            self.log(f"{d}_avg_val_accuracy", res[f"{d}_accuracy"])

    def on_train_epoch_end(self) -> None:
        """Log the epoch's training loss and accuracy, append the epoch's row (with the validation values, NaN where
        none) to ``epoch_log`` and call the epoch listeners."""
        assert self._train_means is not None  # set at the epoch start (on_train_epoch_start)
        res = self._reduce(self._train_means)
        self.log("avg_train_loss", res["loss"])
        self.log("avg_train_accuracy", res["accuracy"])
        val = getattr(self, "_last_val", None) or {}
        row = {
            "epoch": int(self.current_epoch),
            "avg_train_loss": res["loss"],
            "avg_train_accuracy": res["accuracy"],
            "avg_val_loss": val.get("loss", math.nan),
            "avg_val_accuracy": val.get("accuracy", math.nan),
        }
        for d in self.datasets:
            row[f"{d}_avg_train_loss"] = res[f"{d}_loss"]
            row[f"{d}_avg_val_loss"] = val.get(f"{d}_loss", math.nan)
            row[f"{d}_avg_val_accuracy"] = val.get(f"{d}_accuracy", math.nan)
        self.epoch_log.append(row)
        self._last_val = None
        for listener in self.epoch_listeners:
            listener(self.trainer, self)
