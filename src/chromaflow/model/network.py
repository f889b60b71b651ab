"""Predmoter-compatible network (``cnn``, ``hybrid``, ``bi-hybrid``) rebuilt from ``hyper_parameters``.

Written from the specification in FORMATS.md §2.4–2.7 (no Predmoter code). The module tree uses
``down_layer_list`` / ``lstm_layer_list`` / ``up_layer_list`` / ``out`` so that ``state_dict()`` keys,
shapes and list indices (including the shifts caused by BatchNorm and Dropout) equal Predmoter's.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from ..utils.errors import ChromaflowError
from .hparams import HPARAM_KEYS, MODEL_TYPES


@dataclass(frozen=True)
class ModelConfig:
    """The hyper-parameters of a Predmoter network: architecture (``model_type`` 'cnn', 'hybrid' or 'bi-hybrid';
    convolution and LSTM sizes, batch norm, dropout), the ``datasets`` it predicts, input size, sequence length and
    learning rate; ``extra``: other keys, not compared."""

    model_type: str
    cnn_layers: int
    filter_size: int
    kernel_size: int
    step: int
    up: int
    dilation: int
    lstm_layers: int
    hidden_size: int
    bnorm: bool
    dropout: float
    datasets: tuple[str, ...]
    input_size: int = 4
    seq_len: int = 21384
    learning_rate: float = 0.001
    extra: dict = field(default_factory=dict, compare=False)

    @classmethod
    def from_hparams(cls, hp: dict[str, Any], where: str = "checkpoint") -> "ModelConfig":
        """Build from a checkpoint's ``hyper_parameters``, checking every key's type (one line naming the key).

        Parameters
        ----------
        hp : dict
            The checkpoint's ``hyper_parameters`` (Predmoter's 16 keys, :data:`~.hparams.HPARAM_KEYS`;
            ``learning_rate``, ``seq_len`` and ``output_size`` may be absent).
        where : str
            What the error messages name (the checkpoint's path).

        Returns
        -------
        ModelConfig
            The configuration, validated (:meth:`validate`).
        """
        missing = [k for k in HPARAM_KEYS if k not in hp and k not in ("learning_rate", "seq_len", "output_size")]
        if missing:
            raise ChromaflowError(f"{where}: hyper_parameters lack {', '.join(missing)}")
        read = _HparamReader(hp, where)
        model_type, bnorm, datasets = read.model_type(), read.bnorm(), read.datasets()
        cfg = cls(
            model_type=model_type,
            cnn_layers=read.integer("cnn_layers"),
            filter_size=read.integer("filter_size"),
            kernel_size=read.integer("kernel_size"),
            step=read.integer("step"),
            up=read.integer("up"),
            dilation=read.integer("dilation"),
            lstm_layers=read.integer("lstm_layers"),
            hidden_size=read.integer("hidden_size"),
            bnorm=bnorm,
            dropout=read.real("dropout"),
            datasets=datasets,
            input_size=read.integer("input_size"),
            seq_len=read.integer("seq_len", 21384),
            learning_rate=read.real("learning_rate", 0.001),
        )
        cfg.validate(where)
        if "output_size" in hp and read.integer("output_size") != len(cfg.datasets):
            raise ChromaflowError(
                f"{where}: hyper_parameters output_size {hp['output_size']} != number of datasets {len(cfg.datasets)}"
            )
        return cfg

    def validate(self, where: str = "checkpoint") -> None:
        """Raise ChromaflowError (naming ``where``) for hyper-parameters the network cannot be built from: an unknown
        model type, input size other than 4, sizes below 1, LSTM layers missing or negative, dropout outside [0, 1), no
        datasets, step 1 with an even kernel, or a negative padding."""
        if self.model_type not in MODEL_TYPES:
            raise ChromaflowError(
                f"{where}: unknown model_type {self.model_type!r} (expected one of {', '.join(MODEL_TYPES)})"
            )
        if self.input_size != 4:
            raise ChromaflowError(f"{where}: input_size {self.input_size} is not 4")
        for name in ("cnn_layers", "filter_size", "kernel_size", "step", "up", "dilation", "hidden_size"):
            if getattr(self, name) < 1:
                raise ChromaflowError(f"{where}: hyper_parameter {name} must be >= 1, got {getattr(self, name)}")
        if self.model_type != "cnn" and self.lstm_layers < 1:
            raise ChromaflowError(f"{where}: lstm_layers must be >= 1 for model_type {self.model_type}")
        if self.lstm_layers < 0:
            raise ChromaflowError(f"{where}: hyper_parameter lstm_layers must be >= 0, got {self.lstm_layers}")
        if not 0.0 <= self.dropout < 1.0:
            raise ChromaflowError(f"{where}: hyper_parameter dropout must be in [0, 1), got {self.dropout}")
        if self.seq_len < 1:
            raise ChromaflowError(f"{where}: hyper_parameter seq_len must be >= 1, got {self.seq_len}")
        if not self.datasets:
            raise ChromaflowError(f"{where}: hyper_parameters list no datasets")
        if self.step == 1 and self.kernel_size % 2 == 0:
            raise ChromaflowError(f"{where}: step 1 with an even kernel_size is not supported (as in Predmoter)")
        if self.conv_padding() < 0 or self.transposed_padding() < 0:
            raise ChromaflowError(
                f"{where}: kernel_size {self.kernel_size}, step {self.step}, dilation "
                f"{self.dilation} give a negative padding"
            )

    # --- derived geometry (FORMATS.md §2.4) ------------------------------------------------------
    @property
    def downsample(self) -> int:
        """Factor the down layers shorten a sequence by: step ** cnn_layers."""
        return self.step**self.cnn_layers

    def filters(self) -> list[int]:
        """Input channels of each down layer: [4, f, f*up, ...] (n entries)."""
        out = [self.input_size]
        for layer in range(1, self.cnn_layers):
            out.append(self.filter_size * self.up ** (layer - 1))
        return out

    def out_channels(self, layer: int) -> int:
        """Output channels of down layer ``layer`` (0-based): filter_size * up ** layer."""
        return self.filter_size * self.up**layer

    @property
    def c_last(self) -> int:
        """Output channels of the last down layer."""
        return self.out_channels(self.cnn_layers - 1)

    @property
    def width(self) -> int:
        """Channels after the down layers and LSTMs: the last down layer's for 'cnn', hidden_size for 'hybrid', twice it
        for 'bi-hybrid'."""
        return {"cnn": self.c_last, "hybrid": self.hidden_size, "bi-hybrid": 2 * self.hidden_size}[self.model_type]

    def conv_padding(self) -> int:
        """Padding of the down convolutions: ceil((dilation * (kernel_size - 1) + 1 - step) / 2)."""
        d, k, s = self.dilation, self.kernel_size, self.step
        return math.ceil((d * (k - 1) + 1 - s) / 2)

    def output_padding(self) -> int:
        """``output_padding`` of the transposed convolutions (0 or 1), from dilation, kernel size and step."""
        d, k, s = self.dilation, self.kernel_size, self.step
        if d % 2 == 0 and k % 2 == 0:
            return 1 if (s + k) % 2 == 0 else 0
        return 0 if (s + k) % 2 == 0 else 1

    def transposed_padding(self) -> int:
        """Padding of the transposed convolutions: (dilation * (kernel_size - 1) + output_padding + 1 - step) / 2,
        truncated."""
        d, k, s = self.dilation, self.kernel_size, self.step
        return int((d * (k - 1) + self.output_padding() + 1 - s) / 2)  # trunc, not floor

    def check_length(self, length: int, where: str) -> None:
        """Raise ChromaflowError (naming ``where``) if ``length`` is not a multiple of :attr:`downsample`."""
        if length % self.downsample != 0:
            raise ChromaflowError(
                f"{where}: chunk length L={length} is not divisible by step**cnn_layers = "
                f"{self.step}**{self.cnn_layers} = {self.downsample}"
            )

    def hparams(self) -> dict[str, Any]:
        """The configuration as a checkpoint's ``hyper_parameters`` (``output_size`` is the number of datasets)."""
        return {
            "model_type": self.model_type,
            "cnn_layers": self.cnn_layers,
            "filter_size": self.filter_size,
            "kernel_size": self.kernel_size,
            "step": self.step,
            "up": self.up,
            "dilation": self.dilation,
            "lstm_layers": self.lstm_layers,
            "hidden_size": self.hidden_size,
            "bnorm": self.bnorm,
            "dropout": self.dropout,
            "learning_rate": self.learning_rate,
            "seq_len": self.seq_len,
            "input_size": self.input_size,
            "output_size": len(self.datasets),
            "datasets": list(self.datasets),
        }


class _HparamReader:
    """Typed reads of a checkpoint's ``hyper_parameters`` ``hp``: each value checked, a wrong one a one-line
    ChromaflowError naming ``where`` and the key."""

    def __init__(self, hp: dict[str, Any], where: str):
        self.hp, self.where = hp, where

    def bad(self, key: str, want: str) -> ChromaflowError:
        """The ChromaflowError for hyper-parameter ``key`` whose value is not ``want``."""
        v = self.hp[key]
        return ChromaflowError(
            f"{self.where}: hyper_parameters[{key!r}] is {v!r} ({type(v).__name__}), expected {want}"
        )

    def integer(self, key: str, default: int | None = None) -> int:
        """Hyper-parameter ``key`` as an int (``default`` when absent and given); ChromaflowError for a bool or a
        non-integer."""
        if key not in self.hp and default is not None:
            return default
        v = self.hp[key]
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise self.bad(key, "an integer")
        return int(v)

    def real(self, key: str, default: float | None = None) -> float:
        """Hyper-parameter ``key`` as a float (``default`` when absent and given); ChromaflowError for a bool, a
        non-number or a non-finite value."""
        if key not in self.hp and default is not None:
            return default
        v = self.hp[key]
        if (
            isinstance(v, (bool, np.bool_))
            or not isinstance(v, (int, float, np.integer, np.floating))
            or not math.isfinite(float(v))
        ):
            raise self.bad(key, "a finite number")
        return float(v)

    def model_type(self) -> str:
        """``model_type``: a string (whether a known one: :meth:`ModelConfig.validate`)."""
        model_type = self.hp["model_type"]
        if not isinstance(model_type, str):
            raise self.bad("model_type", f"one of {', '.join(MODEL_TYPES)}")
        return model_type

    def bnorm(self) -> bool:
        """``bnorm``: True or False (numpy's bool too)."""
        bnorm = self.hp["bnorm"]
        if not isinstance(bnorm, (bool, np.bool_)):
            raise self.bad("bnorm", "True or False")
        return bool(bnorm)

    def datasets(self) -> tuple[str, ...]:
        """``datasets``: a list (or tuple) of non-empty track names."""
        datasets = self.hp["datasets"]
        if (
            isinstance(datasets, (str, bytes))
            or not isinstance(datasets, (list, tuple))
            or not all(isinstance(d, str) and d for d in datasets)
        ):
            raise self.bad("datasets", "a list of track names")
        return tuple(datasets)


class PredmoterNet(nn.Module):
    """U-Net (+ optional (Bi)LSTMs) with Predmoter's module layout; input (B, L, 4) → log-rate (B, L, D)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        k, s, d = cfg.kernel_size, cfg.step, cfg.dilation
        pad, tpad, opad = cfg.conv_padding(), cfg.transposed_padding(), cfg.output_padding()
        filters = cfg.filters()

        self.down_layer_list = nn.ModuleList()
        for layer in range(cfg.cnn_layers):
            out_ch = cfg.out_channels(layer)
            self.down_layer_list.append(nn.Conv1d(filters[layer], out_ch, k, stride=s, padding=pad, dilation=d))
            if cfg.bnorm:
                self.down_layer_list.append(nn.BatchNorm1d(out_ch))

        self.lstm_layer_list = nn.ModuleList()
        if cfg.model_type != "cnn":
            for m in range(cfg.lstm_layers):
                self.lstm_layer_list.append(
                    nn.LSTM(
                        input_size=cfg.c_last if m == 0 else cfg.width,
                        hidden_size=cfg.hidden_size,
                        num_layers=1,
                        batch_first=True,
                        bidirectional=cfg.model_type == "bi-hybrid",
                    )
                )
                if cfg.dropout > 0 and m < cfg.lstm_layers - 1:
                    self.lstm_layer_list.append(nn.Dropout(cfg.dropout))

        self.up_layer_list = nn.ModuleList()
        in_ch = cfg.width
        for layer in range(cfg.cnn_layers, 0, -1):
            out_ch = filters[layer - 1]
            self.up_layer_list.append(
                nn.ConvTranspose1d(in_ch, out_ch, k, stride=s, padding=tpad, output_padding=opad, dilation=d)
            )
            if cfg.bnorm:
                self.up_layer_list.append(nn.BatchNorm1d(out_ch))
            in_ch = out_ch

        self.out = nn.Linear(cfg.input_size, len(cfg.datasets))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Log-rates (B, L, D) of one-hot input ``x`` (B, L, 4); ChromaflowError if the layers do not give back length
        L."""
        length = x.shape[1]
        h = x.transpose(1, 2)
        for module in self.down_layer_list:
            h = module(h)
            if isinstance(module, nn.Conv1d):
                h = torch.relu(h)
        if len(self.lstm_layer_list):
            h = h.transpose(1, 2)
            for module in self.lstm_layer_list:
                if isinstance(module, nn.LSTM):
                    h = module(h)[0]
                # Dropout: identity in eval mode
            h = h.transpose(1, 2)
        for module in self.up_layer_list:
            h = module(h)
            if isinstance(module, nn.ConvTranspose1d):
                h = torch.relu(h)
        if h.shape[2] != length:
            raise ChromaflowError(f"model output length {h.shape[2]} != input length {length}")
        return self.out(h.transpose(1, 2))


def expected_state_shapes(cfg: ModelConfig) -> "OrderedDict[str, tuple[int, ...]]":
    """Key → shape of Predmoter's state_dict for ``cfg`` (FORMATS.md §2.7), in module order."""
    return OrderedDict((k, tuple(v.shape)) for k, v in PredmoterNet(cfg).state_dict().items())
