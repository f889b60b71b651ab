"""``chromaflow train``: train, resume or fine-tune a Predmoter-compatible model with PyTorch Lightning.

``--input-dir D`` holds ``D/train/*.h5`` and ``D/val/*.h5`` (genome h5 files with ``evaluation/<ds>_coverage``, from
``chromaflow add-coverage`` or Helixer), as in Predmoter. Writes ``<out>/last.ckpt``, ``<out>/best.ckpt`` (best by
``--ckpt-quantity``) and ``<out>/metrics.tsv``; every checkpoint loads in real Predmoter and in ``chromaflow predict``.

The command parses its options into :class:`~chromaflow.train.core.TrainOptions` and calls the core,
:func:`chromaflow.train.core.run`.
"""

from __future__ import annotations

import argparse

from ..utils.cli_options import add_run_options, options_from
from ..model.hparams import add_architecture_options
from ..model.options import add_device_option, add_precision_option
from .core import DATA_MODES, HEADS, QUANTITIES, TrainOptions
from .core import run as train

#: a stopped or failed training run keeps what it saved (checkpoints, metrics.tsv): it is what --resume continues
#: from, so the CLI does not remove this command's outputs on failure (chromaflow.cli.main)
KEEP_PARTIAL_OUTPUTS = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse), in four groups as --help shows them: data and outputs (input folder, output,
    start: new, ``--init`` or ``--resume``, datasets and data), the architecture of a new model, fine-tuning, and the
    trainer (devices, precision, checkpoint and early-stopping settings)."""
    _add_data_options(p.add_argument_group("data and outputs"))
    add_architecture_options(p.add_argument_group("model (new models; Predmoter's defaults)"), learning_rate=True)
    _add_finetune_options(p.add_argument_group("fine-tuning (--init)"))
    trainer = p.add_argument_group("trainer")
    _add_trainer_options(trainer)
    _add_checkpoint_options(trainer)


def _add_data_options(io) -> None:
    """Input folder, output folder, how the run starts (``--init``/``--resume``), datasets, data mode and workers,
    ``--metrics`` and ``--force`` (``io``: an argument group)."""
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
        choices=DATA_MODES,
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


def _add_finetune_options(f) -> None:
    """``--head`` and ``--freeze-encoder`` (``f``: an argument group)."""
    f.add_argument(
        "--head",
        choices=HEADS,
        default="keep",
        help="keep: output rows of datasets the checkpoint knows are kept, new datasets get new rows "
        "(default); reset: a new output layer",
    )
    f.add_argument(
        "--freeze-encoder",
        action="store_true",
        help="train only the up-sampling path and the output layer (down path and LSTMs frozen)",
    )


def _add_trainer_options(t) -> None:
    """Epochs, seed, batch size, device(s), precision, threads and synchronised BatchNorm (``t``: an argument
    group)."""
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


def _add_checkpoint_options(t) -> None:
    """Which checkpoints are kept and when training stops: ``--ckpt-quantity``, ``--save-top-k``,
    ``--stop-quantity``, ``--patience`` (``t``: an argument group)."""
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


def run(args: argparse.Namespace) -> int:
    """Run the command: train, resume or fine-tune the model on the input folder's h5 files, writing checkpoints and
    the epoch table into the output folder (:func:`chromaflow.train.core.run`); returns the exit status."""
    return train(options_from(args, TrainOptions))
