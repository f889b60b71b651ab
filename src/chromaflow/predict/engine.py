"""Streaming prediction engine.

reader thread (contiguous h5 reads of whole batches → float32 tensors + padding mask, bounded queue)
→ model loop (inference_mode; optional bf16 autocast; CUDA OOM → halve the micro-batch and retry)
→ writer thread (int64 chunks compressed with zlib level 9 in a thread pool, written with HDF5 direct chunk
writes in row order). Memory stays bounded by the queue depths, never by the genome size.
"""
from __future__ import annotations

import contextlib
import queue
import sys
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import h5py
import numpy as np
import torch

from ..common import ChromaflowError, Progress

_DONE = object()


@dataclass
class EngineStats:
    rows: int = 0
    bp: int = 0            # non-padding positions predicted
    loop_s: float = 0.0
    wait_s: float = 0.0
    write_wait_s: float = 0.0
    final_batch: int = 0
    peak_gpu_bytes: int | None = None
    device: str = "cpu"
    precision: str = "fp32"
    streams: int = 1
    intra_threads: int = 1
    notes: list = field(default_factory=list)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda":
        if not torch.cuda.is_available():
            raise ChromaflowError("--device cuda requested but CUDA is not available (use --device cpu or auto)")
        return torch.device("cuda")
    if name == "cpu":
        return torch.device("cpu")
    raise ChromaflowError(f"unknown --device {name!r} (auto, cpu or cuda)")


def bf16_supported(device: torch.device) -> bool:
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    try:
        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except Exception:  # pragma: no cover - very old builds
        return False


def configure_cuda_exact() -> None:
    """Exact fp32 on CUDA: no TF32 anywhere."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


class _Reader(threading.Thread):
    def __init__(self, X: h5py.Dataset, row_start: int, row_end: int, batch: int, depth: int, pin: bool):
        super().__init__(name="predict-reader", daemon=True)
        self.X, self.row_start, self.row_end, self.batch, self.pin = X, row_start, row_end, batch, pin
        self.q: queue.Queue = queue.Queue(maxsize=max(1, depth))
        self.stop = threading.Event()

    def _put(self, item) -> bool:
        while not self.stop.is_set():
            try:
                self.q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run(self) -> None:
        try:
            for a in range(self.row_start, self.row_end, self.batch):
                b = min(a + self.batch, self.row_end)
                try:
                    x16 = self.X[a:b]
                except (OSError, ValueError, RuntimeError) as exc:
                    raise ChromaflowError(f"{self.X.file.filename}: cannot read data/X rows {a}-{b - 1} "
                                          f"(corrupt or truncated file: {str(exc).splitlines()[0]})") from None
                x = torch.from_numpy(x16).to(torch.float32)
                pad = x.amax(dim=2) == 0  # padding = all four columns 0; N (0.25) is not masked
                if self.pin:
                    x = x.pin_memory()
                if not self._put((a, x, pad)):
                    return
            self._put(_DONE)
        except BaseException as exc:  # handed to the model loop
            self._put(exc)


class _Writer(threading.Thread):
    """Compresses (zlib 9 = HDF5 deflate 9, no shuffle) in a pool and writes chunks directly, in order."""

    def __init__(self, dset: h5py.Dataset, row_offset: int, pool_threads: int, depth: int):
        super().__init__(name="predict-writer", daemon=True)
        self.dset, self.row_offset = dset, row_offset
        self.q: queue.Queue = queue.Queue(maxsize=max(1, depth))
        self.pool = ThreadPoolExecutor(max_workers=max(1, pool_threads), thread_name_prefix="predict-zlib")
        self.error: BaseException | None = None

    @staticmethod
    def _compress(col: np.ndarray) -> bytes:
        return zlib.compress(np.ascontiguousarray(col, dtype="<i8").tobytes(), 9)

    def run(self) -> None:
        try:
            while True:
                item = self.q.get()
                if item is _DONE:
                    break
                a, arr = item
                n, _, d = arr.shape
                futures = [((a - self.row_offset + r, 0, j), self.pool.submit(self._compress, arr[r, :, j]))
                           for r in range(n) for j in range(d)]
                for offset, fut in futures:
                    self.dset.id.write_direct_chunk(offset, fut.result(), 0)
        except BaseException as exc:
            self.error = exc
            # drain so the producer never blocks forever
            with contextlib.suppress(Exception):
                while self.q.get(timeout=0.5) is not _DONE:
                    pass
        finally:
            self.pool.shutdown(wait=True)

    def put(self, item) -> float:
        t0 = time.perf_counter()
        while True:
            if self.error is not None:
                raise self.error
            try:
                self.q.put(item, timeout=0.1)
                return time.perf_counter() - t0
            except queue.Full:
                if not self.is_alive():
                    raise self.error or ChromaflowError("prediction writer stopped unexpectedly")


def run_prediction(model: torch.nn.Module, X: h5py.Dataset, out_dset: h5py.Dataset, *, row_start: int,
                   row_end: int, batch_size: int, device: torch.device, precision: str, threads: int,
                   num_workers: int, streams: int = 1, progress: bool | None = None) -> EngineStats:
    """Predict rows [row_start, row_end) of ``X`` into ``out_dset`` (rows shifted by ``row_start``).

    On CPU each batch is split into ``streams`` parts run concurrently (torch releases the GIL), each with
    ``threads // streams`` intra-op threads. Each subsequence is computed independently, so the split does
    not change the arithmetic of a subsequence beyond the ~1e-6 batch-size effect of the kernels.
    """
    stats = EngineStats(device=str(device), precision=precision)
    model = model.to(device)
    use_cuda = device.type == "cuda"
    if use_cuda:
        configure_cuda_exact()
        torch.cuda.reset_peak_memory_stats(device)
        streams = 1
    streams = max(1, min(streams, batch_size))
    use_bf16 = precision == "bf16"
    if use_bf16 and not bf16_supported(device):
        print("chromaflow predict: bf16 not supported on this hardware, using fp32", file=sys.stderr)
        stats.precision = "fp32"
        stats.notes.append("bf16 unsupported: fell back to fp32")
        use_bf16 = False
    state = {"micro": max(1, batch_size)}
    intra = max(1, threads // streams)

    def forward(x: torch.Tensor) -> torch.Tensor:
        """Model → exp → round half to even → int64, for one part of a batch (runs in a stream thread)."""
        torch.set_num_threads(intra)
        outs = []
        i = 0
        with torch.inference_mode():  # thread-local, so entered here
            while i < x.shape[0]:
                micro = state["micro"]
                try:
                    xb = x[i:i + micro].to(device, non_blocking=True)
                    ctx = torch.autocast(device_type=device.type, dtype=torch.bfloat16) if use_bf16 \
                        else contextlib.nullcontext()
                    with ctx:
                        y = model(xb)
                    y = torch.round(torch.exp(y.float())).to(torch.int64)  # torch.round: half to even
                    outs.append(y.cpu() if use_cuda else y)
                except torch.cuda.OutOfMemoryError:
                    xb = y = None
                    torch.cuda.empty_cache()
                    if micro == 1:
                        raise ChromaflowError("CUDA out of memory even with a batch of 1 subsequence") from None
                    state["micro"] = max(1, micro // 2)
                    stats.notes.append(f"CUDA OOM: batch reduced to {state['micro']}")
                    print(f"chromaflow predict: CUDA out of memory, retrying with batch size {state['micro']}",
                          file=sys.stderr)
                    continue
                i += micro
        return outs[0] if len(outs) == 1 else torch.cat(outs)

    pool = ThreadPoolExecutor(max_workers=streams, thread_name_prefix="predict-stream") if streams > 1 else None
    reader = _Reader(X, row_start, row_end, max(1, batch_size), depth=max(1, num_workers), pin=use_cuda)
    writer = _Writer(out_dset, row_start, pool_threads=max(1, threads), depth=2)
    reader.start()
    writer.start()
    bar = Progress(row_end - row_start, "predict", unit=" subseq", enabled=progress)
    t_loop = time.perf_counter()
    try:
        while True:
            t0 = time.perf_counter()
            item = reader.q.get()
            stats.wait_s += time.perf_counter() - t0
            if item is _DONE:
                break
            if isinstance(item, BaseException):
                raise item
            a, x, pad = item
            n = x.shape[0]
            if pool is None or n == 1:
                y = forward(x)
            else:
                step = -(-n // min(streams, n))
                parts = [pool.submit(forward, x[j:j + step]) for j in range(0, n, step)]
                y = torch.cat([f.result() for f in parts])
            with torch.inference_mode():
                y[pad] = -1
            stats.rows += n
            stats.bp += int((~pad).sum())
            stats.write_wait_s += writer.put((a, y.numpy()))
            bar.update(n)
    finally:
        stats.loop_s = time.perf_counter() - t_loop
        reader.stop.set()
        with contextlib.suppress(BaseException):
            writer.put(_DONE)  # loops until queued or the writer has died
        writer.join()
        reader.join(timeout=5)
        if pool is not None:
            pool.shutdown(wait=True)
        bar.close()
    if writer.error is not None:
        err = writer.error
        if isinstance(err, ChromaflowError):
            raise err
        raise ChromaflowError(f"writing predictions failed: {err}") from None
    stats.final_batch = state["micro"]
    stats.streams = streams
    stats.intra_threads = intra
    if use_cuda:
        stats.peak_gpu_bytes = int(torch.cuda.max_memory_allocated(device))
    return stats
