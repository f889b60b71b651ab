"""The options of every command that runs a model, declared once: ``--device``, ``--precision``, and for the
inference commands (``predict``, ``variant-effect``) ``--model`` and ``--batch-size``; and the checks argparse makes
of them on the command line, for a core's options given from Python (:func:`check_device`, :func:`check_precision`,
:func:`check_batch_size`).

One ``--device`` default (``auto``: CUDA where one is visible, else the CPU; the pipeline's ``--predict_device`` and
``--train_device`` default to it too) and one ``--precision`` vocabulary (``fp32`` exact, ``bf16``, ``fp16``).
``train`` also takes Lightning's names of the same three (``32``, ``bf16-mixed``, ``16-mixed``) as it did before:
for training they mean Lightning's mixed-precision plugins (fp32 master weights, autocast in the forward pass), which is
what ``bf16``/``fp16`` select there (:data:`LIGHTNING_PRECISION`); for inference they mean autocast of the forward pass.
"""

from __future__ import annotations

import argparse

from ..utils.errors import ChromaflowError

#: where a model runs: auto = CUDA if available, else the CPU
DEVICES = ("auto", "cpu", "cuda")
#: the precision vocabulary of every command that runs a model
PRECISIONS = ("fp32", "bf16", "fp16")
#: train's Lightning precision plugin for each --precision (train accepts these names too)
LIGHTNING_PRECISION = {"fp32": "32", "bf16": "bf16-mixed", "fp16": "16-mixed"}


def batch_size_arg(text: str) -> str | int:
    """argparse type of ``--batch-size``: an integer >= 1 or ``auto``."""
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1 or 'auto', got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1 or 'auto', got {text!r}")
    return value


def check_device(device: str) -> None:
    """Check ``device`` (a core's ``device`` option given from Python) as argparse's choices check ``--device``.

    Raises
    ------
    ChromaflowError
        One line naming ``--device`` unless ``device`` is one of :data:`DEVICES`.
    """
    if device not in DEVICES:
        raise ChromaflowError(f"--device {device!r}: expected one of {', '.join(DEVICES)}")


def check_precision(precision: str, *, training: bool = False) -> str:
    """Check ``precision`` (a core's ``precision`` option given from Python) as argparse checks ``--precision``.

    Parameters
    ----------
    precision : str
        One of :data:`PRECISIONS`; with ``training`` also Lightning's names (:data:`LIGHTNING_PRECISION`).
    training : bool
        Check and store it as ``train`` does (:func:`add_precision_option` with ``training``).

    Returns
    -------
    str
        ``precision``; with ``training`` Lightning's name of it (``fp32`` -> ``32``).

    Raises
    ------
    ChromaflowError
        One line naming ``--precision`` for any other value.
    """
    if training:
        precision = LIGHTNING_PRECISION.get(precision, precision)
        if precision in LIGHTNING_PRECISION.values():
            return precision
    elif precision in PRECISIONS:
        return precision
    raise ChromaflowError(f"--precision {precision!r}: expected one of {', '.join(PRECISIONS)}")


def check_batch_size(batch_size: int | str) -> None:
    """Check ``batch_size`` (a core's option given from Python) as :func:`batch_size_arg` checks ``--batch-size``.

    Raises
    ------
    ChromaflowError
        One line naming ``--batch-size`` unless ``batch_size`` is an integer >= 1 or ``auto``.
    """
    if batch_size == "auto":
        return
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ChromaflowError(f"--batch-size: expected an integer >= 1 or 'auto', got {batch_size!r}")


def add_device_option(p) -> None:
    """``--device auto|cpu|cuda`` (default auto) on ``p``, a parser or an argument group."""
    p.add_argument(
        "--device", choices=DEVICES, default="auto", help="auto = cuda if available, else cpu (default auto)"
    )


def add_precision_option(p, *, help: str, training: bool = False) -> None:
    """``--precision fp32|bf16|fp16`` (default fp32) on ``p``; ``training``: Lightning's names are accepted too and
    ``--precision`` is stored as Lightning's name (:data:`LIGHTNING_PRECISION`)."""
    if training:
        # argparse converts first, then checks the choices: fp32/bf16/fp16 become Lightning's names
        p.add_argument(
            "--precision",
            type=lambda text: LIGHTNING_PRECISION.get(text, text),
            choices=(*PRECISIONS, *LIGHTNING_PRECISION.values()),
            default="32",
            metavar="{fp32,bf16,fp16}",
            help=help,
        )
    else:
        p.add_argument("--precision", choices=PRECISIONS, default="fp32", help=help)


def add_inference_options(p, *, model_help: str, batch_help: str, precision_help: str) -> None:
    """``--model`` (required), ``--batch-size N|auto`` (default auto), ``--device`` and ``--precision``: the options
    ``predict`` and ``variant-effect`` share."""
    p.add_argument("--model", required=True, help=model_help)
    p.add_argument("--batch-size", type=batch_size_arg, default="auto", help=batch_help)
    add_device_option(p)
    add_precision_option(p, help=precision_help)
