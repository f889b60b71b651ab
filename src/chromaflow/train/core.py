"""The core of ``chromaflow train`` (its command: cli_train.py): train, resume or fine-tune a Predmoter-compatible
model with PyTorch Lightning.

:class:`TrainOptions` holds the command's options and checks them once (:meth:`TrainOptions.validate`, one line
naming the option); :func:`run` validates them, checks the inputs and outputs and trains, so a caller from Python
gets the same checks and the same checkpoints as the command line. ``input_dir`` holds ``train/*.h5`` and
``val/*.h5`` (genome h5 files with ``evaluation/<ds>_coverage``); ``out`` gets ``last.ckpt``, ``best.ckpt`` (best by
``ckpt_quantity``) and ``metrics.tsv``.

Light imports only at the top: bad options fail before torch and Lightning are imported.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import statistics
import sys
import warnings
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from ..utils.cli_options import resolve_threads
from ..utils.errors import ChromaflowError
from ..utils.metrics import StageMetrics
from ..utils.outputs import check_outputs
from ..model.hparams import ARCHITECTURE, MODEL_TYPES
from ..model.options import check_device, check_precision
from ..utils.signals import Interrupted, handle_stop_signals

#: the metrics ``--ckpt-quantity`` and ``--stop-quantity`` choose from
QUANTITIES = ("avg_train_loss", "avg_train_accuracy", "avg_val_loss", "avg_val_accuracy")
#: ``--data-mode``: read chunks per batch (stream) or hold them compressed in RAM (ram)
DATA_MODES = ("stream", "ram")
#: ``--head``: keep the checkpoint's output rows (keep) or start a new output layer (reset)
HEADS = ("keep", "reset")


@dataclass
class TrainOptions:
    """What ``train`` reads, writes and how it trains: the command's options, one field each (``None`` where an option
    is not given; the architecture fields ``model_type`` ... ``dropout`` and ``learning_rate`` then come from
    Predmoter's defaults or the ``init``/``resume`` checkpoint). ``precision`` takes fp32/bf16/fp16 or Lightning's
    names. :meth:`validate` checks them once (one line naming the option); :func:`run` calls it, so a library caller
    gets the same checks as the command line."""

    input_dir: str
    out: str
    init: str | None = None
    resume: str | None = None
    datasets: list[str] | None = None
    blacklist: bool = False
    data_mode: str = "stream"
    num_workers: int | None = None
    metrics: str | None = None
    force: bool = False
    model_type: str | None = None
    cnn_layers: int | None = None
    filter_size: int | None = None
    kernel_size: int | None = None
    step: int | None = None
    up: int | None = None
    dilation: int | None = None
    lstm_layers: int | None = None
    hidden_size: int | None = None
    bnorm: bool | None = None
    dropout: float | None = None
    learning_rate: float | None = None
    head: str = "keep"
    freeze_encoder: bool = False
    epochs: int = 5
    seed: int = 0
    batch_size: int = 120
    device: str = "auto"
    devices: int = 1
    precision: str = "32"
    threads: int = 0
    sync_batchnorm: bool = True
    ckpt_quantity: str = "avg_val_accuracy"
    save_top_k: int = 1
    stop_quantity: str = "avg_train_loss"
    patience: int = 5

    def validate(self) -> None:
        """Check the options' own rules, in the command's order: counts >= 1, dropout and learning rate, what
        fine-tuning and resuming allow. ``precision`` is stored as Lightning's name (``fp32`` -> ``32``, as
        ``--precision`` does).

        Raises
        ------
        ChromaflowError
            One line naming the option at fault.
        """
        self._check_values()
        for name in ("epochs", "batch_size", "devices", "patience"):
            if getattr(self, name) < 1:
                raise ChromaflowError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if self.dropout is not None and not 0.0 <= self.dropout < 1.0:
            raise ChromaflowError(f"--dropout must be in [0, 1), got {self.dropout}")
        if self.learning_rate is not None and not self.learning_rate > 0:
            raise ChromaflowError(f"--learning-rate must be > 0, got {self.learning_rate}")
        if self.num_workers is not None and self.num_workers < 0:
            raise ChromaflowError(f"--num-workers must be >= 0, got {self.num_workers}")
        if self.resume and self.datasets:
            raise ChromaflowError("--datasets: a resumed run keeps the checkpoint's datasets")
        if (self.head != "keep" or self.freeze_encoder) and not self.init:
            raise ChromaflowError("--head/--freeze-encoder apply to fine-tuning (--init CKPT)")
        if self.datasets and len(set(self.datasets)) != len(self.datasets):
            raise ChromaflowError(f"--datasets lists a name twice: {' '.join(self.datasets)}")

    def _check_values(self) -> None:
        """What argparse checks on the command line (the choices, one of init and resume), for callers from
        Python."""
        if self.init and self.resume:
            raise ChromaflowError("--init and --resume: give one of them, not both")
        check_device(self.device)
        self.precision = check_precision(self.precision, training=True)
        choices: list[tuple[str, str, tuple[str, ...]]] = [
            ("--data-mode", self.data_mode, DATA_MODES),
            ("--head", self.head, HEADS),
            ("--ckpt-quantity", self.ckpt_quantity, QUANTITIES),
            ("--stop-quantity", self.stop_quantity, QUANTITIES),
        ]
        if self.model_type is not None:
            choices.append(("--model-type", self.model_type, MODEL_TYPES))
        for opt, value, allowed in choices:
            if value not in allowed:
                raise ChromaflowError(f"{opt} {value!r}: expected one of {', '.join(allowed)}")


# every architecture hyperparameter is an option (_check_architecture and _train read them by name)
assert set(ARCHITECTURE) <= {f.name for f in dataclasses.fields(TrainOptions)}


def _mode(quantity: str) -> str:
    """The direction of ``quantity`` that is better: max for accuracies, min for losses."""
    return "max" if quantity.endswith("accuracy") else "min"


def _check_outputs(options: TrainOptions) -> None:
    """The output rule (:func:`chromaflow.utils.outputs.check_outputs`); the checkpoints are left out: ``--resume
    OUT/last.ckpt`` is read before Lightning writes the next one."""
    h5s = glob.glob(os.path.join(options.input_dir, "*", "*.h5"))
    check_outputs(
        [("--metrics", options.metrics), ("--out", os.path.join(options.out, "metrics.tsv"))],
        [("--init", options.init), ("--resume", options.resume)] + [("--input-dir", p) for p in h5s],
        [("--out", options.out)],
    )


def cpu_has_native_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool | None:
    """True/False from the CPU flags (Linux x86); None where they cannot be read (then nothing is claimed)."""
    try:
        with open(cpuinfo) as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"avx512_bf16", "amx_bf16"})
    except OSError:
        return None
    return None


def _accelerator(options: TrainOptions) -> str:
    """Lightning's accelerator for ``options.device`` (gpu or cpu), checking what the machine has."""
    import torch

    if options.device == "cuda":
        if not torch.cuda.is_available():
            raise ChromaflowError("--device cuda: no CUDA device is available (use --device cpu)")
        if options.devices > torch.cuda.device_count():
            raise ChromaflowError(f"--devices {options.devices}: only {torch.cuda.device_count()} CUDA device(s)")
        return "gpu"
    if options.device == "auto" and torch.cuda.is_available():
        return "gpu"
    if options.precision == "16-mixed":  # on the CPU, given or chosen by --device auto
        raise ChromaflowError("--precision fp16 (16-mixed) needs a CUDA device (use bf16 on CPU)")
    return "cpu"


def _check_architecture(options, cfg) -> None:
    """With --resume/--init the architecture is the checkpoint's: an architecture option may be given (a pipeline
    retry passes the run's options again) only with the checkpoint's own value; another value is refused."""
    for name in ARCHITECTURE:
        given = getattr(options, name)
        if given is not None and given != getattr(cfg, name):
            raise ChromaflowError(
                f"--{name.replace('_', '-')} {given}: the architecture comes from the "
                f"{'--init' if options.init else '--resume'} checkpoint, which has "
                f"{getattr(cfg, name)}"
            )


def run(options: TrainOptions) -> int:
    """Train, resume or fine-tune the model on the h5 files of ``options.input_dir``.

    Parameters
    ----------
    options : TrainOptions
        The run's options; validated here (:meth:`TrainOptions.validate`).

    Returns
    -------
    int
        The exit status (0). Checkpoints (``last.ckpt``, ``best.ckpt`` or the ``save_top_k`` best) and the epoch
        table ``metrics.tsv`` are written into ``options.out``; a bad option, input or output raises a one-line
        :class:`~chromaflow.utils.errors.ChromaflowError` before anything trains.
    """
    options.validate()
    child = os.environ.get("LOCAL_RANK", "0") != "0"  # a DDP worker process started by Lightning
    if not child:
        _check_out_folder(options)
        _check_outputs(options)
    accel = _accelerator(options)
    if accel == "cpu" and options.precision == "bf16-mixed" and not child and cpu_has_native_bf16() is False:
        print(
            "chromaflow train: warning: --precision bf16-mixed on a CPU without native bf16 (avx512_bf16 / amx_bf16) "
            "is several times slower than 32 (docs/training.md §5); use it on GPUs",
            file=sys.stderr,
        )
    workers = options.num_workers
    from .datamodule import auto_workers

    if workers is None:
        # GPUs: workers feed the device (LightlyTrain's rule: CPUs per device - 1). CPU training: the cores are
        # the compute; reading a chunk costs ~1 % of its training step, so loading stays in the training process
        workers = auto_workers(options.devices) if accel == "gpu" else 0
    threads = options.threads or max(1, resolve_threads(0) // options.devices)
    with StageMetrics(
        "train",
        None if child else options.metrics,
        threads=threads,
        device=accel,
        devices=options.devices,
        batch_size=options.batch_size,
        num_workers=workers,
        precision=options.precision,
        data_mode=options.data_mode,
        seed=options.seed,
    ) as metrics:
        summary = _train(options, accel, workers, threads, child)
        metrics.set(**summary)
    return 0


def _check_out_folder(options: TrainOptions) -> None:
    """``out`` is a folder (or not there yet) without a previous run's ``last.ckpt``, unless resuming or forced."""
    out = options.out
    if os.path.exists(out) and not os.path.isdir(out):
        raise ChromaflowError(f"{out}: --out exists and is not a folder")
    if os.path.exists(os.path.join(out, "last.ckpt")) and not (options.resume or options.force):
        raise ChromaflowError(
            f"{out}: holds a previous run (last.ckpt); use --resume {out}/last.ckpt to continue "
            f"it or --force to start afresh"
        )


def _train(options: TrainOptions, accel: str, workers: int, threads: int, child: bool) -> dict:
    """Build the data, the model and the Trainer, and fit; the summary of the metrics JSON (rank 0; others: {})."""
    import lightning as L
    import torch

    from .datamodule import CoverageDataModule
    from .module import PredmoterModule

    torch.set_num_threads(threads)
    for message in (".*does not have many workers.*", ".*sync_dist=True.*", ".*LeafSpec.*"):
        warnings.filterwarnings("ignore", message)
    base = _base_checkpoint(options)
    datasets = tuple(options.datasets or (base.config.datasets if base is not None else ("atacseq", "h3k4me3")))
    dm = CoverageDataModule(
        options.input_dir,
        datasets,
        batch_size=options.batch_size,
        seed=options.seed,
        data_mode=options.data_mode,
        num_workers=workers,
        blacklist=options.blacklist,
        devices=options.devices,
        pin_memory=accel == "gpu",
    )
    dm.scan()  # every input is validated before anything trains
    L.seed_everything(options.seed, workers=True, verbose=False)
    module = PredmoterModule.for_training(
        datasets,
        dm.seq_len,
        seed=options.seed,
        base=base,
        options={k: getattr(options, k) for k in (*ARCHITECTURE, "learning_rate")},
    )
    notes = module.fine_tune(base, head=options.head, freeze_encoder=options.freeze_encoder) if options.init else []
    sync_bn = options.devices > 1 and options.sync_batchnorm and module.cfg.bnorm
    if sync_bn and accel == "cpu":
        module.sync_batchnorm_on_cpu()
    cb = _callbacks(options, dm.seq_len)
    trainer = L.Trainer(
        accelerator=accel,
        devices=options.devices,
        strategy="ddp" if options.devices > 1 else "auto",
        precision=cast(Any, options.precision),  # Lightning's name (validate), a str to the type checker
        max_epochs=options.epochs,
        deterministic=True,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        use_distributed_sampler=False,
        sync_batchnorm=sync_bn and accel == "gpu",
        callbacks=list(cb),
        default_root_dir=options.out,
    )
    _fit(trainer, module, dm, options.resume, cb.stopper, options.out)
    if not trainer.is_global_zero:
        return {}
    return _summary(trainer, module, dm, cb, quantity=options.ckpt_quantity, notes=notes)


def _base_checkpoint(options: TrainOptions):
    """The --resume/--init checkpoint (its architecture checked against the options given), or None."""
    from ..model.checkpoint import load_checkpoint

    path = options.resume or options.init
    if not path:
        return None
    base = load_checkpoint(path)
    _check_architecture(options, base.config)
    return base


class _Callbacks(NamedTuple):
    """The run's callbacks, in the order the Trainer gets them."""

    throughput: Any
    best: Any
    stop: Any
    table: Any
    stopper: Any


def _callbacks(options: TrainOptions, seq_len: int) -> _Callbacks:
    """The run's checkpoint, early-stopping, throughput, epoch-table and stop-signal callbacks."""
    from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

    from .callbacks import EpochTable, StopOnSignal, ThroughputCallback

    out, quantity = options.out, options.ckpt_quantity
    if options.save_top_k == 1:
        best = ModelCheckpoint(
            dirpath=out,
            filename="best",
            monitor=quantity,
            mode=_mode(quantity),
            save_top_k=1,
            save_last=True,
            auto_insert_metric_name=False,
            enable_version_counter=False,
        )
    else:
        best = ModelCheckpoint(
            dirpath=out,
            filename="epoch={epoch}-" + quantity + "={" + quantity + ":.4f}",
            monitor=quantity,
            mode=_mode(quantity),
            save_top_k=options.save_top_k,
            save_last=True,
            auto_insert_metric_name=False,
        )
    stop = EarlyStopping(
        monitor=options.stop_quantity,
        mode=_mode(options.stop_quantity),
        patience=options.patience,
        min_delta=0.0,
        check_on_train_epoch_end=True,
    )
    throughput = ThroughputCallback(seq_len)
    table = EpochTable(
        os.path.join(out, "metrics.tsv"),
        throughput,
        resumed_epochs=base_epoch(options.resume) if options.resume else None,
    )
    return _Callbacks(throughput, best, stop, table, StopOnSignal())


def _summary(trainer, module, dm, cb: _Callbacks, *, quantity: str, notes: list) -> dict:
    """The metrics JSON's fields of a finished run (rank 0)."""
    epochs = cb.throughput.epochs
    rates = [e["samples_per_s"] for e in epochs]
    bp_rates = [e["bp_per_s"] for e in epochs]
    waits = [e["data_wait_fraction"] for e in epochs]
    trained = sum(e["train_samples"] for e in epochs)
    history = {r["epoch"]: r for r in module.epoch_log}
    per_epoch = [{**history.get(e["epoch"], {}), **e} for e in epochs]
    best, seq_len = cb.best, dm.seq_len
    best_path = best.best_model_path or ""
    return {
        "subsequences": trained,
        "bp": trained * seq_len,
        "seq_len": seq_len,
        "epochs_run": len(epochs),
        "epochs": per_epoch,
        "train_samples_per_s": statistics.median(rates) if rates else None,
        "train_bp_per_s": statistics.median(bp_rates) if bp_rates else None,
        "data_wait_fraction": statistics.fmean(waits) if waits else None,
        "train_chunks": len(dm.train_set),
        "val_chunks": len(dm.val_set),
        "train_files": len(dm.train_files),
        "val_files": len(dm.val_files),
        "best_checkpoint": os.path.basename(best_path) if best_path else None,
        "best_score": float(best.best_model_score) if best.best_model_score is not None else None,
        "monitor": quantity,
        "model": dict(module.hparams),
        "datasets": list(dm.datasets),
        "stopped_early": bool(cb.stop.stopped_epoch),
        "notes": notes,
        "final_epoch": int(trainer.current_epoch),
    }


def _fit(trainer, module, dm, resume: str | None, stopper, out: str) -> None:
    """``trainer.fit``; a stop signal ends it at the next batch end (StopOnSignal) and becomes
    :class:`~chromaflow.utils.signals.Interrupted` (exit 128 + signal), naming the checkpoint to resume from. Lightning
    ends a run that got SIGTERM during validation with SystemExit(None), i.e. exit 0: that becomes the same."""
    import torch

    from ..model.checkpoint import numpy_safe_globals
    from .callbacks import SignalStop

    handle_stop_signals(stopper.request)
    try:
        with torch.serialization.safe_globals(numpy_safe_globals()):
            trainer.fit(module, datamodule=dm, ckpt_path=resume, weights_only=True)
    except (SignalStop, SystemExit):
        if stopper.signum is None:
            raise
    if stopper.signum is not None:
        last = os.path.join(out, "last.ckpt")
        note = (
            f"continue with --resume {last} (epoch {base_epoch(last)} done)"
            if os.path.exists(last)
            else "no epoch was completed, nothing to resume"
        )
        raise Interrupted(stopper.signum, note)


def base_epoch(path: str) -> int:
    """The epoch count stored in a checkpoint (epochs completed)."""
    import torch

    from ..model.checkpoint import numpy_safe_globals

    with torch.serialization.safe_globals(numpy_safe_globals()):
        obj = torch.load(path, map_location="cpu", weights_only=True)
    return int(obj.get("epoch", -1)) + 1
