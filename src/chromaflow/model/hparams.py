"""The hyperparameter table of Predmoter's network, its defaults and presets, and the architecture options.

One place for what was written four times: the 16 keys Predmoter stores in ``hyper_parameters`` (FORMATS.md §2.4),
Predmoter's command-line defaults, the architecture presets of ``make-test-model``, and the command-line options
that set an architecture (``train`` for a new model, ``make-test-model``: :func:`add_architecture_options`).
"""

from __future__ import annotations

import argparse
from typing import Any

MODEL_TYPES = ("cnn", "hybrid", "bi-hybrid")
#: the 16 keys Predmoter always stores in ``hyper_parameters``
HPARAM_KEYS = (
    "model_type",
    "cnn_layers",
    "filter_size",
    "kernel_size",
    "step",
    "up",
    "dilation",
    "lstm_layers",
    "hidden_size",
    "bnorm",
    "dropout",
    "learning_rate",
    "seq_len",
    "input_size",
    "output_size",
    "datasets",
)

#: the architecture: the hyperparameters a command-line option sets (the first 11 keys, in Predmoter's order)
ARCHITECTURE = HPARAM_KEYS[:11]
assert ARCHITECTURE[-1] == "dropout"

#: Predmoter's CLI defaults (Predmoter.py --help), used for a new model
PREDMOTER_DEFAULTS: dict[str, Any] = dict(
    model_type="bi-hybrid",
    cnn_layers=1,
    filter_size=64,
    kernel_size=9,
    step=2,
    up=2,
    dilation=1,
    lstm_layers=1,
    hidden_size=128,
    bnorm=True,
    dropout=0.0,
    learning_rate=0.001,
    seq_len=21384,
    input_size=4,
    datasets=("atacseq", "h3k4me3"),
)

#: architecture presets; options given on the command line override them
PRESETS: dict[str, dict[str, Any]] = {
    # small and fast: tests and the pipeline's test profile
    "tiny": dict(
        model_type="bi-hybrid",
        cnn_layers=1,
        filter_size=8,
        kernel_size=9,
        step=2,
        up=2,
        dilation=1,
        lstm_layers=1,
        hidden_size=8,
        bnorm=True,
        dropout=0.0,
    ),
    # the architecture of Predmoter's released bi-hybrid models (FORMATS.md §2.9: 3 conv + 3 transposed conv,
    # 2 BiLSTM, 6 batch norms, dropout between the LSTMs; 1,534,358 parameters with 2 datasets)
    "release-bihybrid": dict(
        model_type="bi-hybrid",
        cnn_layers=3,
        filter_size=64,
        kernel_size=9,
        step=2,
        up=2,
        dilation=1,
        lstm_layers=2,
        hidden_size=128,
        bnorm=True,
        dropout=0.3,
    ),
    # Predmoter's command-line defaults (FORMATS.md §2.7: 210,390 parameters with 2 datasets)
    "predmoter-default": {k: PREDMOTER_DEFAULTS[k] for k in ARCHITECTURE},
}


def add_architecture_options(p, *, learning_rate: bool = False, preset: bool = False) -> None:
    """Add ``--model-type``, ``--cnn-layers`` ... ``--dropout`` (:data:`ARCHITECTURE`) to ``p`` (a parser or an
    argument group), each defaulting to None: the command fills in what is not given (``train``: Predmoter's
    defaults, :data:`PREDMOTER_DEFAULTS`; ``make-test-model``, ``preset=True``: its ``--preset``, :data:`PRESETS`).
    ``learning_rate``: also ``--learning-rate`` (``train``)."""

    def default(key: str) -> str:
        """The help text's default of option ``key``: the preset's, or Predmoter's default value."""
        return "default: the --preset's" if preset else f"default {PREDMOTER_DEFAULTS[key]}"

    p.add_argument("--model-type", choices=MODEL_TYPES, default=None, help=default("model_type"))
    for key in ARCHITECTURE[1:-2]:
        p.add_argument(f"--{key.replace('_', '-')}", type=int, default=None, help=default(key))
    p.add_argument(
        "--bnorm",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="default: the --preset's" if preset else "default on",
    )
    p.add_argument("--dropout", type=float, default=None, help=default("dropout"))
    if learning_rate:
        p.add_argument(
            "--learning-rate",
            type=float,
            default=None,
            help=f"Adam learning rate (default {PREDMOTER_DEFAULTS['learning_rate']})",
        )


def hparams_for(cfg_overrides: dict, datasets, seq_len: int) -> dict:
    """Predmoter's 16 hyper_parameters for a new model: Predmoter's defaults, overridden by ``cfg_overrides``."""
    hp: dict[str, Any] = dict(PREDMOTER_DEFAULTS)
    hp.update({k: v for k, v in cfg_overrides.items() if v is not None})
    hp["datasets"] = list(datasets)
    hp["output_size"] = len(hp["datasets"])
    hp["seq_len"] = int(seq_len)
    hp["input_size"] = 4
    return {k: hp[k] for k in HPARAM_KEYS}
