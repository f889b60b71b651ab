"""Safe loading (and writing) of Predmoter-layout checkpoints.

Loading never unpickles arbitrary code: ``torch.load(weights_only=True)`` with an allow-list of exactly the
numpy globals Predmoter/Lightning checkpoints reference for their saved RNG states (FORMATS.md §2.1).
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import zipfile
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import torch

from ..utils.errors import ChromaflowError
from .hparams import HPARAM_KEYS
from .network import ModelConfig, PredmoterNet


def numpy_safe_globals() -> list:
    """(object, pickled name) pairs for the numpy globals in Lightning RNG-state pickles."""
    import numpy as np

    try:
        multiarray = np._core.multiarray  # type: ignore[attr-defined]  # numpy >= 2 (private module, no stubs)
    except AttributeError:  # pragma: no cover - numpy 1.x
        multiarray = np.core.multiarray  # type: ignore[attr-defined]  # numpy 1.x
    allowed: list = [
        (multiarray._reconstruct, "numpy.core.multiarray._reconstruct"),
        (multiarray._reconstruct, "numpy._core.multiarray._reconstruct"),
        np.ndarray,
        np.dtype,
    ]
    # numpy >= 1.25 pickles dtypes through their classes (numpy.dtypes.UInt32DType, ...)
    dtypes = getattr(np, "dtypes", None)
    if dtypes is not None:
        for name in ("UInt32DType", "Int64DType", "Float64DType", "UInt8DType"):
            cls = getattr(dtypes, name, None)
            if cls is not None:
                allowed.append(cls)
    return allowed


@dataclass
class Checkpoint:
    """A loaded checkpoint: its ``path``, the network's :class:`ModelConfig`, the ``state_dict``, the file's SHA-256."""

    path: str
    config: ModelConfig
    state_dict: "OrderedDict[str, torch.Tensor]"
    sha256: str

    @property
    def datasets(self) -> tuple[str, ...]:
        """The datasets the network predicts, in output order."""
        return self.config.datasets


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """Load ``path`` safely and validate its top-level layout; raises :class:`ChromaflowError`."""
    path = str(path)
    if not os.path.exists(path):
        raise ChromaflowError(f"{path}: checkpoint does not exist")
    if not os.path.isfile(path):
        raise ChromaflowError(f"{path}: checkpoint is not a regular file")
    if not zipfile.is_zipfile(path):
        raise ChromaflowError(f"{path}: not a PyTorch zip checkpoint (no zip archive)")
    try:
        with torch.serialization.safe_globals(numpy_safe_globals()):
            obj = torch.load(path, map_location="cpu", weights_only=True, mmap=False)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ChromaflowError(f"{path}: refused to unpickle (not a plain weights checkpoint): {first}") from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, ValueError, KeyError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ChromaflowError(f"{path}: cannot read checkpoint: {first}") from None
    if not isinstance(obj, dict):
        raise ChromaflowError(f"{path}: not a Predmoter checkpoint (top level is {type(obj).__name__}, not a dict)")
    for key in ("state_dict", "hyper_parameters"):
        if key not in obj:
            raise ChromaflowError(f"{path}: not a Predmoter checkpoint (missing top-level key {key!r})")
    hp = obj["hyper_parameters"]
    if not isinstance(hp, dict):
        raise ChromaflowError(f"{path}: hyper_parameters is {type(hp).__name__}, not a dict")
    cfg = ModelConfig.from_hparams(hp, where=path)
    sd = obj["state_dict"]
    if not isinstance(sd, dict) or not all(isinstance(v, torch.Tensor) for v in sd.values()):
        raise ChromaflowError(f"{path}: state_dict is not a mapping of tensors")
    check_state_dict(sd, cfg, path)
    return Checkpoint(path=path, config=cfg, state_dict=OrderedDict(sd), sha256=_sha256(path))


def _short(keys: list[str], n: int = 4) -> str:
    return ", ".join(keys[:n]) + (f" (+{len(keys) - n} more)" if len(keys) > n else "")


def check_state_dict(sd: dict, cfg: ModelConfig, where: str) -> None:
    """Require the exact key set and shapes implied by ``cfg`` (FORMATS.md §2.7)."""
    expected = {k: tuple(v.shape) for k, v in PredmoterNet(cfg).state_dict().items()}
    missing = [k for k in expected if k not in sd]
    unexpected = [k for k in sd if k not in expected]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing {len(missing)} key(s): {_short(missing)}")
        if unexpected:
            parts.append(f"unexpected {len(unexpected)} key(s): {_short(unexpected)}")
        raise ChromaflowError(
            f"{where}: state_dict does not match hyper_parameters "
            f"({cfg.model_type}, {cfg.cnn_layers} cnn, {cfg.lstm_layers} lstm): " + "; ".join(parts)
        )
    for k, shape in expected.items():
        if tuple(sd[k].shape) != shape:
            raise ChromaflowError(f"{where}: state_dict {k} has shape {tuple(sd[k].shape)}, expected {shape}")


def build_model(ckpt: Checkpoint) -> PredmoterNet:
    """The :class:`PredmoterNet` of ``ckpt`` with its weights loaded (strictly), in eval mode and without gradients."""
    model = PredmoterNet(ckpt.config)
    model.load_state_dict(ckpt.state_dict, strict=True)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


# --------------------------------------------------------------------------------------------------
# test checkpoints (make-test-model)
# --------------------------------------------------------------------------------------------------
def make_test_state_dict(cfg: ModelConfig, seed: int) -> "OrderedDict[str, torch.Tensor]":
    """Seeded random weights (meaningless) with plausible BatchNorm running statistics.

    Every tensor is drawn from one ``torch.Generator`` seeded with ``seed`` in state_dict order, so the same
    seed and configuration always give identical weights.
    """
    gen = torch.Generator().manual_seed(int(seed))
    model = PredmoterNet(cfg)
    out: "OrderedDict[str, torch.Tensor]" = OrderedDict()
    modules = dict(model.named_modules())
    for key, ref in model.state_dict().items():
        mod_name, _, leaf = key.rpartition(".")
        mod = modules[mod_name]
        if leaf == "num_batches_tracked":
            out[key] = torch.tensor(100, dtype=torch.int64)
            continue
        if isinstance(mod, torch.nn.BatchNorm1d):
            if leaf == "weight":
                t = 0.75 + 0.5 * torch.rand(ref.shape, generator=gen)
            elif leaf == "bias":
                t = 0.2 * torch.rand(ref.shape, generator=gen) - 0.1
            elif leaf == "running_mean":
                t = 0.5 * torch.rand(ref.shape, generator=gen)  # post-ReLU activations are >= 0
            else:  # running_var
                t = 0.25 + 0.75 * torch.rand(ref.shape, generator=gen)
        else:
            if isinstance(mod, torch.nn.LSTM):
                fan_in = mod.hidden_size
            elif isinstance(mod, torch.nn.ConvTranspose1d):
                fan_in = mod.out_channels * mod.kernel_size[0]
            elif isinstance(mod, torch.nn.Conv1d):
                fan_in = mod.in_channels * mod.kernel_size[0]
            else:  # Linear
                fan_in = mod.in_features
            bound = 1.0 / fan_in**0.5
            if isinstance(mod, torch.nn.Linear):
                # the head maps to log-coverage: a wider spread and a log(2) offset make exp() land on
                # several integers (1-4), so tests and the test profile see varied, position-dependent tracks
                bound = 1.5
            t = (2 * torch.rand(ref.shape, generator=gen) - 1) * bound
            if isinstance(mod, torch.nn.Linear) and leaf == "bias":
                t = t * 0.2 + 0.7
        out[key] = t.to(torch.float32).contiguous()
    return out


def write_test_checkpoint(
    path: str | os.PathLike, cfg: ModelConfig, seed: int, state_dict: "OrderedDict[str, torch.Tensor] | None" = None
) -> None:
    """torch.save a Predmoter/Lightning-layout checkpoint (zip) with seeded meaningless weights (or ``state_dict``:
    weights a test set by hand, e.g. a motif detector for ``variant-effect``).

    Byte-reproducible: the archive is serialised in memory, so its zip records are named ``archive/...`` (as in
    Predmoter's files) instead of after the (temporary) output file name; torch writes fixed zip timestamps. Same
    configuration and seed -> the same bytes.
    """
    hp = cfg.hparams()
    assert set(hp) == set(HPARAM_KEYS)
    obj = {
        "epoch": 0,
        "global_step": 0,
        "pytorch-lightning_version": "2.0.2",
        "state_dict": make_test_state_dict(cfg, seed) if state_dict is None else state_dict,
        "loops": {},
        "callbacks": {},
        "optimizer_states": [],
        "lr_schedulers": [],
        "hparams_name": "kwargs",
        "hyper_parameters": hp,
    }
    buf = io.BytesIO()
    torch.save(obj, buf)
    Path(path).write_bytes(buf.getvalue())
