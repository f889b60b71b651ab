"""``--batch-size auto``: the largest batch whose full pipeline step fits the device, found by measurement
(:func:`find_batch_size`, :func:`probe_batch_size`), and the cache of sizes probed earlier (:func:`batch_cache_path`)
that spares the probe next time."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from typing import Callable, cast

import numpy as np
import torch

from ..utils.errors import ChromaflowError
from .executors import (
    CUDA_DEPTH,
    CudaExecutor,
    EngineStats,
    Encoder,
    PrecisionCheck,
    autocast_dtype,
    configure_cuda_exact,
    cuda,
    rounded,
)
from .feed import Batch

#: largest batch --batch-size auto tries (an H100 is filled by 1-2 thousand rows of 21384 bp; more only costs
#: probing time and pinned memory)
AUTO_BATCH_MAX = 4096


def find_batch_size(
    fits: Callable[[int], bool], *, start: int = 16, limit: int = AUTO_BATCH_MAX, rel_tol: float = 1 / 32
) -> tuple[int, list]:
    """Largest batch size for which ``fits(b)`` is true (``fits`` returns False on out-of-memory), as Lightning's
    BatchSizeFinder does it: halve from ``start`` until one fits or double until one fails (or ``limit``), then
    bisect between the largest size that fitted and the smallest that did not until they are within ``rel_tol``.
    Returns (size, [(size tried, fitted), ...]); raises ChromaflowError if not even 1 fits."""
    trials: list[tuple[int, bool]] = []

    def attempt(b: int) -> bool:
        """``fits(b)``, noted in the trials."""
        ok = bool(fits(b))
        trials.append((b, ok))
        return ok

    b = max(1, min(start, limit))
    bad = None
    while not attempt(b):
        bad = b
        if b == 1:
            raise ChromaflowError("out of device memory even with a batch of 1 subsequence")
        b = max(1, b // 2)
    good = b
    while bad is None and good < limit:
        nxt = min(limit, good * 2)
        if attempt(nxt):
            good = nxt
        else:
            bad = nxt
    while bad is not None and bad - good > max(1, int(good * rel_tol)):
        mid = (good + bad) // 2
        if attempt(mid):
            good = mid
        else:
            bad = mid
    return good, trials


def _is_oom_error(exc: BaseException) -> bool:
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    # cuDNN / cuBLAS report allocation failures as plain RuntimeErrors
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("out of memory" in text.lower() or "ALLOC_FAILED" in text)


def probe_batch_size(
    model,
    device: torch.device,
    *,
    L: int,
    D: int,
    precision: str,
    limit: int,
    start: int = 16,
    executor: str | None = None,
) -> tuple[int, list]:
    """The largest batch whose full pipeline step fits, found with synthetic ACGT rows of length L: on CUDA
    ``CUDA_DEPTH`` batches in flight through :class:`CudaExecutor`; elsewhere one model call of the whole batch
    (used by tests with a model that fakes out-of-memory)."""
    enc = Encoder(device)

    def fits(b: int) -> bool:
        """Whether a batch of ``b`` synthetic ACGT rows runs without running out of memory (on CUDA: through the
        executor, without its halving back-off)."""
        codes = np.frombuffer(b"ACGT", dtype=np.uint8)[np.arange(b * L) % 4].reshape(b, L)
        strand = np.zeros(b, dtype=np.uint8)
        ex = None
        try:
            if (executor or device.type) == "cuda":
                ex = CudaExecutor(
                    model,
                    device,
                    precision=precision,
                    batch=b,
                    L=L,
                    D=D,
                    encoder=enc,
                    check=PrecisionCheck("fp32", 0),
                    stats=EngineStats(),
                )
                for _ in range(CUDA_DEPTH):
                    ex.submit(Batch(row0=0, n=b, codes=codes, strand=strand))
                while ex.pending():
                    ex.pop()
                return ex.micro == b  # an internal back-off means b itself did not fit
            amp = autocast_dtype(precision)
            with (
                torch.inference_mode(),
                torch.autocast(device_type=device.type, dtype=amp) if amp else contextlib.nullcontext(),
            ):
                x, pad = enc.codes(torch.from_numpy(codes), torch.from_numpy(strand))
                rounded(model(x), pad)
            return True
        except (torch.OutOfMemoryError, RuntimeError) as exc:
            if _is_oom_error(exc):
                return False
            raise
        finally:
            del ex
            if (executor or device.type) == "cuda":
                cuda.synchronize(device)
                cuda.empty_cache()

    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        return find_batch_size(fits, start=start, limit=limit)


def batch_cache_path() -> str | None:
    """Where ``--batch-size auto`` keeps the sizes it probed (``$CHROMAFLOW_CACHE/batch-sizes.json``, default
    ``~/.cache/chromaflow``); None when ``CHROMAFLOW_BATCH_CACHE=0``."""
    if os.environ.get("CHROMAFLOW_BATCH_CACHE", "1") == "0":
        return None
    root = os.environ.get("CHROMAFLOW_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "chromaflow")
    return os.path.join(root, "batch-sizes.json")


def batch_cache_key(model, device: torch.device, *, L: int, D: int, precision: str, limit: int) -> str:
    """What a probed size depends on: the architecture (parameter names and shapes, not the weights), the
    device (name and memory), torch and the pipeline depth, the row length, datasets, precision and limit."""
    arch = hashlib.sha256(
        repr([(n, tuple(p.shape), str(p.dtype)) for n, p in model.named_parameters()]).encode()
    ).hexdigest()[:16]
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        dev = [props.name, int(props.total_memory)]
    else:
        dev = [device.type]
    return json.dumps([arch, *dev, torch.__version__, CUDA_DEPTH, L, D, precision, limit])


def _read_batch_cache(path: str) -> dict:
    try:
        with open(path) as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):  # absent or damaged: probe again (the file is only a shortcut)
        return {}


def _write_batch_cache(path: str, key: str, size: int) -> None:
    """Add one entry, atomically (temporary name, then rename); a cache that cannot be written is skipped."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = _read_batch_cache(path)
        data[key] = int(size)
        fd, tmp = tempfile.mkstemp(prefix=".batch-sizes.", suffix=".part", dir=os.path.dirname(path))
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass


def resolve_batch_size(
    value: str | int,
    *,
    model,
    device: torch.device,
    L: int,
    D: int,
    precision: str,
    rows: int | None,
    stats: EngineStats,
    cpu_default: int = 120,
    probe_cpu: bool = False,
    cache: str | None = None,
) -> int:
    """An integer, or ``auto``: on CUDA the largest batch that fits (probed, see :func:`probe_batch_size`); on CPU
    ``cpu_default`` capped at the row count, because CPU memory cannot be probed safely (the kernel's OOM killer,
    not an exception, ends a process that asks for too much) and on CPU the batch size does not change the model
    calls (micro-batches). ``probe_cpu`` runs the probe on CPU anyway (tests, with a model that fakes OOM).

    ``cache`` (a JSON file, :func:`batch_cache_path`): a size probed earlier for the same key
    (:func:`batch_cache_key`) is used without probing (a probe costs seconds on a GPU); should it not fit now
    (another process holds device memory), the executor's out-of-memory back-off still splits the batch."""
    if value != "auto":
        return int(value)
    limit = max(1, min(rows or AUTO_BATCH_MAX, AUTO_BATCH_MAX))
    if device.type != "cuda" and not probe_cpu:
        size = min(cpu_default, limit)
        stats.notes.append(f"batch size auto on CPU: {size} (no device memory to probe)")
        return size
    if device.type == "cuda":
        configure_cuda_exact()
    model = model.to(device)
    key = batch_cache_key(model, device, L=L, D=D, precision=precision, limit=limit) if cache else None
    cached = _read_batch_cache(cache).get(key) if cache else None
    if isinstance(cached, int) and 1 <= cached <= limit:
        stats.batch_probe_source = "cache"
        stats.notes.append(f"batch size auto: {cached} (probed earlier for this model and device: {cache})")
        return cached
    size, trials = probe_batch_size(model, device, L=L, D=D, precision=precision, limit=limit)
    stats.batch_probe = [[b, ok] for b, ok in trials]
    stats.batch_probe_source = "probe"
    stats.notes.append(f"batch size auto: {size} (largest that fitted; tried {len(trials)} sizes)")
    if cache:
        _write_batch_cache(cache, cast(str, key), size)  # a key with a cache
    return size
