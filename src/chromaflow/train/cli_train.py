"""``chromaflow train``: train, resume or fine-tune a Predmoter-compatible model with PyTorch Lightning.

``--input-dir D`` holds ``D/train/*.h5`` and ``D/val/*.h5`` (genome h5 files with ``evaluation/<ds>_coverage``, from
``chromaflow add-coverage`` or Helixer), as in Predmoter. Writes ``<out>/last.ckpt``, ``<out>/best.ckpt`` (best by
``--ckpt-quantity``) and ``<out>/metrics.tsv``; every checkpoint loads in real Predmoter and in ``chromaflow predict``.
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import sys
import warnings
from typing import Any, NamedTuple

from ..cli_options import add_run_options, resolve_threads
from ..errors import ChromaflowError
from ..metrics import StageMetrics
from ..outputs import check_outputs
from ..model.hparams import ARCHITECTURE, add_architecture_options
from ..model.options import add_device_option, add_precision_option
from ..signals import Interrupted, handle_stop_signals

QUANTITIES = ("avg_train_loss", "avg_train_accuracy", "avg_val_loss", "avg_val_accuracy")


# One function on purpose (issue 28): a flat list of argparse declarations in the order --help shows them, one
# group after the other; split into helpers it would only be harder to read against the help text.
def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): input folder and output, start (new, ``--init``, ``--resume``), datasets and
    data, fine-tuning, architecture, training, checkpoint and early-stopping settings, devices and precision."""
    io = p.add_argument_group("data and outputs")
    io.add_argument("--input-dir", required=True, help="folder with train/*.h5 and val/*.h5")
    io.add_argument("--out", required=True, help="output folder: last.ckpt, best.ckpt, metrics.tsv")
    start = io.add_mutually_exclusive_group()
    start.add_argument(
        "--init",
        metavar="CKPT",
        help="fine-tune: start from this checkpoint's weights (architecture from it; new optimizer, epoch 0)",
    )
    start.add_argument(
        "--resume",
        metavar="CKPT",
        help="resume an interrupted run exactly (weights, optimizer, epoch, "
        "callbacks); --epochs is the total, as in Predmoter",
    )
    io.add_argument(
        "--datasets",
        nargs="+",
        default=None,
        help="datasets (evaluation/<name>_coverage) the model predicts, in output order (default: "
        "atacseq h3k4me3, or the --init/--resume checkpoint's)",
    )
    io.add_argument("--blacklist", action="store_true", help="drop chunks with data/blacklist == 0 (Predmoter -bl)")
    io.add_argument(
        "--data-mode",
        choices=("stream", "ram"),
        default="stream",
        help="stream: read chunks from the h5 files per batch (constant memory, default); ram: hold all "
        "chunks in RAM compressed (faster epochs, RAM ~ 1.5 byte per bp)",
    )
    io.add_argument(
        "--num-workers",
        type=int,
        default=None,
        help="DataLoader workers per device (default: GPU: usable CPUs / devices - 1, at most 8; CPU: 0)",
    )
    add_run_options(io, metrics=True, force="start afresh even if --out already holds checkpoints")

    add_architecture_options(p.add_argument_group("model (new models; Predmoter's defaults)"), learning_rate=True)

    f = p.add_argument_group("fine-tuning (--init)")
    f.add_argument(
        "--head",
        choices=("keep", "reset"),
        default="keep",
        help="keep: output rows of datasets the checkpoint knows are kept, new datasets get new rows "
        "(default); reset: a new output layer",
    )
    f.add_argument(
        "--freeze-encoder",
        action="store_true",
        help="train only the up-sampling path and the output layer (down path and LSTMs frozen)",
    )

    t = p.add_argument_group("trainer")
    t.add_argument("--epochs", type=int, default=5, help="maximum epochs in total (default 5)")
    t.add_argument("--seed", type=int, default=0, help="seed for initial weights, data order and dropout (default 0)")
    t.add_argument("--batch-size", type=int, default=120, help="chunks per batch and device (default 120)")
    add_device_option(t)
    t.add_argument("--devices", type=int, default=1, help="devices; > 1 trains with DDP (gloo on CPU, NCCL on GPUs)")
    add_precision_option(
        t,
        training=True,
        help="fp32 (default, exact) or mixed precision: bf16 on CPU/GPU, fp16 on GPU only (Lightning's 32, "
        "bf16-mixed, 16-mixed are the same choices)",
    )
    add_run_options(t, threads="torch threads per process (default: CPUs / devices)")
    t.add_argument(
        "--sync-batchnorm",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --devices > 1, BatchNorm statistics over all processes' batches, so N devices x batch B "
        "compute what 1 device x batch N*B would (default on; CPU: gloo all-reduce, GPU: "
        "torch SyncBatchNorm)",
    )
    t.add_argument(
        "--ckpt-quantity",
        choices=QUANTITIES,
        default="avg_val_accuracy",
        help="metric that picks best.ckpt (default avg_val_accuracy, as Predmoter)",
    )
    t.add_argument(
        "--save-top-k",
        type=int,
        default=1,
        help="1 (default): best.ckpt; k > 1 or -1: the k best (all) as epoch=E-<quantity>=V.ckpt",
    )
    t.add_argument(
        "--stop-quantity",
        choices=QUANTITIES,
        default="avg_train_loss",
        help="early-stopping metric (default avg_train_loss, as Predmoter)",
    )
    t.add_argument("--patience", type=int, default=5, help="early-stopping patience in epochs (default 5)")


def _mode(quantity: str) -> str:
    return "max" if quantity.endswith("accuracy") else "min"


def _check_args(args) -> None:
    for name in ("epochs", "batch_size", "devices", "patience"):
        if getattr(args, name) < 1:
            raise ChromaflowError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.dropout is not None and not 0.0 <= args.dropout < 1.0:
        raise ChromaflowError(f"--dropout must be in [0, 1), got {args.dropout}")
    if args.learning_rate is not None and not args.learning_rate > 0:
        raise ChromaflowError(f"--learning-rate must be > 0, got {args.learning_rate}")
    if args.num_workers is not None and args.num_workers < 0:
        raise ChromaflowError(f"--num-workers must be >= 0, got {args.num_workers}")
    if args.resume and args.datasets:
        raise ChromaflowError("--datasets: a resumed run keeps the checkpoint's datasets")
    if (args.head != "keep" or args.freeze_encoder) and not args.init:
        raise ChromaflowError("--head/--freeze-encoder apply to fine-tuning (--init CKPT)")
    if args.datasets and len(set(args.datasets)) != len(args.datasets):
        raise ChromaflowError(f"--datasets lists a name twice: {' '.join(args.datasets)}")


def _check_outputs(args) -> None:
    """The output rule (:func:`chromaflow.outputs.check_outputs`); the checkpoints are left out: ``--resume
    OUT/last.ckpt`` is read before Lightning writes the next one."""
    h5s = glob.glob(os.path.join(args.input_dir, "*", "*.h5"))
    check_outputs(
        [("--metrics", args.metrics), ("--out", os.path.join(args.out, "metrics.tsv"))],
        [("--init", args.init), ("--resume", args.resume)] + [("--input-dir", p) for p in h5s],
        [("--out", args.out)],
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


def _accelerator(args) -> str:
    import torch

    if args.device == "cuda":
        if not torch.cuda.is_available():
            raise ChromaflowError("--device cuda: no CUDA device is available (use --device cpu)")
        if args.devices > torch.cuda.device_count():
            raise ChromaflowError(f"--devices {args.devices}: only {torch.cuda.device_count()} CUDA device(s)")
        return "gpu"
    if args.device == "auto" and torch.cuda.is_available():
        return "gpu"
    if args.precision == "16-mixed":  # on the CPU, given or chosen by --device auto
        raise ChromaflowError("--precision fp16 (16-mixed) needs a CUDA device (use bf16 on CPU)")
    return "cpu"


#: a stopped or failed training run keeps what it saved (checkpoints, metrics.tsv): it is what --resume continues
#: from, so the CLI does not remove this command's outputs on failure (chromaflow.cli.main)
KEEP_PARTIAL_OUTPUTS = True


def _check_architecture(args, cfg) -> None:
    """With --resume/--init the architecture is the checkpoint's: an architecture option may be given (a pipeline
    retry passes the run's options again) only with the checkpoint's own value; another value is refused."""
    for name in ARCHITECTURE:
        given = getattr(args, name)
        if given is not None and given != getattr(cfg, name):
            raise ChromaflowError(
                f"--{name.replace('_', '-')} {given}: the architecture comes from the "
                f"{'--init' if args.init else '--resume'} checkpoint, which has "
                f"{getattr(cfg, name)}"
            )


def run(args: argparse.Namespace) -> int:
    """Run the command: train, resume or fine-tune the model on the input folder's h5 files, writing checkpoints and
    the epoch table into the output folder; returns the exit status."""
    _check_args(args)
    child = os.environ.get("LOCAL_RANK", "0") != "0"  # a DDP worker process started by Lightning
    out = args.out
    if not child:
        if os.path.exists(out) and not os.path.isdir(out):
            raise ChromaflowError(f"{out}: --out exists and is not a folder")
        if os.path.exists(os.path.join(out, "last.ckpt")) and not (args.resume or args.force):
            raise ChromaflowError(
                f"{out}: holds a previous run (last.ckpt); use --resume {out}/last.ckpt to continue "
                f"it or --force to start afresh"
            )
        _check_outputs(args)
    accel = _accelerator(args)
    if accel == "cpu" and args.precision == "bf16-mixed" and not child and cpu_has_native_bf16() is False:
        print(
            "chromaflow train: warning: --precision bf16-mixed on a CPU without native bf16 (avx512_bf16 / amx_bf16) "
            "is several times slower than 32 (docs/training.md §5); use it on GPUs",
            file=sys.stderr,
        )
    workers = args.num_workers
    from .datamodule import auto_workers

    if workers is None:
        # GPUs: workers feed the device (LightlyTrain's rule: CPUs per device - 1). CPU training: the cores are
        # the compute; reading a chunk costs ~1 % of its training step, so loading stays in the training process
        workers = auto_workers(args.devices) if accel == "gpu" else 0
    threads = args.threads or max(1, resolve_threads(0) // args.devices)
    with StageMetrics(
        "train",
        None if child else args.metrics,
        threads=threads,
        device=accel,
        devices=args.devices,
        batch_size=args.batch_size,
        num_workers=workers,
        precision=args.precision,
        data_mode=args.data_mode,
        seed=args.seed,
    ) as metrics:
        summary = _train(args, accel, workers, threads, child)
        metrics.set(**summary)
    return 0


def _train(args, accel: str, workers: int, threads: int, child: bool) -> dict:
    import lightning as L
    import torch

    from .datamodule import CoverageDataModule
    from .module import PredmoterModule

    torch.set_num_threads(threads)
    for message in (".*does not have many workers.*", ".*sync_dist=True.*", ".*LeafSpec.*"):
        warnings.filterwarnings("ignore", message)
    base = _base_checkpoint(args)
    datasets = tuple(args.datasets or (base.config.datasets if base is not None else ("atacseq", "h3k4me3")))
    dm = CoverageDataModule(
        args.input_dir,
        datasets,
        batch_size=args.batch_size,
        seed=args.seed,
        data_mode=args.data_mode,
        num_workers=workers,
        blacklist=args.blacklist,
        devices=args.devices,
        pin_memory=accel == "gpu",
    )
    dm.scan()  # every input is validated before anything trains
    L.seed_everything(args.seed, workers=True, verbose=False)
    module = PredmoterModule.for_training(
        datasets,
        dm.seq_len,
        seed=args.seed,
        base=base,
        options={k: getattr(args, k) for k in (*ARCHITECTURE, "learning_rate")},
    )
    notes = module.fine_tune(base, head=args.head, freeze_encoder=args.freeze_encoder) if args.init else []
    sync_bn = args.devices > 1 and args.sync_batchnorm and module.cfg.bnorm
    if sync_bn and accel == "cpu":
        module.sync_batchnorm_on_cpu()
    cb = _callbacks(args, dm.seq_len)
    trainer = L.Trainer(
        accelerator=accel,
        devices=args.devices,
        strategy="ddp" if args.devices > 1 else "auto",
        precision=args.precision,
        max_epochs=args.epochs,
        deterministic=True,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        use_distributed_sampler=False,
        sync_batchnorm=sync_bn and accel == "gpu",
        callbacks=list(cb),
        default_root_dir=args.out,
    )
    _fit(trainer, module, dm, args.resume, cb.stopper, args.out)
    if not trainer.is_global_zero:
        return {}
    return _summary(trainer, module, dm, cb, quantity=args.ckpt_quantity, notes=notes)


def _base_checkpoint(args):
    """The --resume/--init checkpoint (its architecture checked against the options given), or None."""
    from ..model.checkpoint import load_checkpoint

    if not (args.resume or args.init):
        return None
    base = load_checkpoint(args.resume or args.init)
    _check_architecture(args, base.config)
    return base


class _Callbacks(NamedTuple):
    """The run's callbacks, in the order the Trainer gets them."""

    throughput: Any
    best: Any
    stop: Any
    table: Any
    stopper: Any


def _callbacks(args, seq_len: int) -> _Callbacks:
    from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

    from .callbacks import EpochTable, StopOnSignal, ThroughputCallback

    out, quantity = args.out, args.ckpt_quantity
    if args.save_top_k == 1:
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
            save_top_k=args.save_top_k,
            save_last=True,
            auto_insert_metric_name=False,
        )
    stop = EarlyStopping(
        monitor=args.stop_quantity,
        mode=_mode(args.stop_quantity),
        patience=args.patience,
        min_delta=0.0,
        check_on_train_epoch_end=True,
    )
    throughput = ThroughputCallback(seq_len)
    table = EpochTable(
        os.path.join(out, "metrics.tsv"), throughput, resumed_epochs=base_epoch(args.resume) if args.resume else None
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
    :class:`~chromaflow.signals.Interrupted` (exit 128 + signal), naming the checkpoint to resume from. Lightning
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
