"""Streaming prediction engine.

feed (background thread: FASTA rows as uint8 codes, or h5 rows; bounded queue, reusable buffers)
→ executor (CPU: K concurrent streams of micro-batches; CUDA: pinned buffers, H2D on a copy stream, one-hot,
model, exp/round/−1 mask and the transfer cast on the compute stream, D2H of the smallest exact integer type,
a few batches in flight; both back off on out-of-memory)
→ writer (background thread: int64 chunks compressed (``--deflate``; zlib level 9 by default) in a thread pool,
written with HDF5 direct chunk writes in row order).

Memory stays bounded by the queue depths and the batch size, never by the genome size. Every subsequence is
computed independently (eval mode), so batch and micro-batch sizes do not change what a row is.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, cast

import h5py
import numpy as np
import torch

from ..utils.errors import ChromaflowError
from ..utils.progress import Progress
from .executors import (
    CPU_MICRO,
    PRECISIONS,
    CpuExecutor,
    CudaExecutor,
    EngineStats,
    Encoder,
    PrecisionCheck,
    bf16_supported,
    configure_cuda_exact,
    cuda,
)
from .feed import Batch, H5Feed, Prefetcher, count_bp
from .writer import PredictionWriter


def predict_feed(
    model: torch.nn.Module,
    feed,
    writer: PredictionWriter,
    *,
    n_rows: int | None,
    batch_size: int,
    device: torch.device,
    precision: str,
    threads: int,
    streams: int = 1,
    micro: int = CPU_MICRO,
    num_workers: int = 2,
    check_rows: int = 64,
    progress: bool | None = None,
    on_batch: Callable[[Batch], None] | None = None,
    stats: EngineStats | None = None,
    release: Callable[[Batch], None] | None = None,
    executor: str | None = None,
) -> EngineStats:
    """Run ``feed`` (an object with ``batches(stop)``) through the model into ``writer``.

    ``on_batch(batch)`` sees every batch in row order (the FASTA route collects seqids/start_ends there);
    ``release(batch)`` gives a batch's buffer back once the device has its contents. ``executor`` ("cuda" or
    "cpu") overrides the choice made from ``device`` (tests run the CUDA executor's logic on the CPU).
    """
    stats = stats or EngineStats()
    precision = _usable_precision(precision, device, stats)
    stats.device, stats.precision, stats.batch_size = str(device), precision, batch_size
    use_cuda = (executor or device.type) == "cuda"
    model = model.to(device)
    if use_cuda:
        configure_cuda_exact()
        cuda.reset_peak_memory_stats(device)
    check = PrecisionCheck(precision, check_rows)
    ex = _executor(
        model,
        device,
        use_cuda,
        precision=precision,
        batch_size=batch_size,
        threads=threads,
        streams=streams,
        micro=micro,
        L=feed.L,
        D=int(writer.dset.shape[2]),
        check=check,
        stats=stats,
    )
    pf = Prefetcher(feed, depth=max(1, num_workers))
    # n_rows None: an unsharded FASTA route learns its rows as it reads them (a count, no bar)
    bar = Progress(n_rows, "predict", unit=" subseq", enabled=progress)
    _loop(feed, pf, ex, writer, bar, stats, on_batch, _emitter(writer, bar, stats, release))
    _raise_writer_error(writer)
    stats.final_batch = ex.micro
    stats.precision_check = check.result()
    if use_cuda:
        stats.gpu_timing = ex.timing()
        stats.peak_gpu_bytes = int(cuda.max_memory_allocated(device))
    return stats


def _emitter(
    writer: PredictionWriter, bar: Progress, stats: EngineStats, release: Callable[[Batch], None] | None
) -> Callable[[Batch, np.ndarray], None]:
    """The loop's ``emit(batch, arr)``: hands one predicted batch to the writer."""

    def emit(batch: Batch, arr: np.ndarray) -> None:
        """Hand one predicted batch to the writer: release its input buffer, count its rows and the time waited for the
        writer, advance the progress bar."""
        if release:
            release(batch)
        stats.rows += batch.n
        stats.write_wait_s += writer.put((batch.row0, arr))
        bar.update(batch.n)

    return emit


def _loop(
    feed,
    pf: Prefetcher,
    ex,
    writer: PredictionWriter,
    bar: Progress,
    stats: EngineStats,
    on_batch: Callable[[Batch], None] | None,
    emit: Callable[[Batch, np.ndarray], None],
) -> None:
    """Start the reader and the writer, run the batches (:func:`_run_batches`), then stop and drain everything, also
    when the loop failed; the loop's and the drain's seconds go into ``stats``."""
    pf.start()
    writer.start()
    t_loop = time.perf_counter()
    try:
        _run_batches(pf, ex, stats, on_batch, emit)
    finally:
        t_end = time.perf_counter()
        stats.loop_s = t_end - t_loop
        pf.close()
        writer.finish()
        ex.close()
        bar.close()
        if isinstance(feed, H5Feed):
            feed.close()
        stats.drain_s = time.perf_counter() - t_end


def _raise_writer_error(writer: PredictionWriter) -> None:
    """The writer thread's error, if it had one, as a ChromaflowError (one line)."""
    if writer.error is not None:
        err = writer.error
        if isinstance(err, ChromaflowError):
            raise err
        raise ChromaflowError(f"writing predictions failed: {err}") from None


def _usable_precision(precision: str, device: torch.device, stats: EngineStats) -> str:
    """``precision``, or fp32 (said on stderr and in the notes) where bf16 is not supported."""
    if precision not in PRECISIONS:
        raise ChromaflowError(f"unknown --precision {precision!r} ({', '.join(PRECISIONS)})")
    if precision == "bf16" and not bf16_supported(device):
        print("chromaflow predict: bf16 not supported on this hardware, using fp32", file=sys.stderr)
        stats.notes.append("bf16 unsupported: fell back to fp32")
        return "fp32"
    return precision


def _executor(
    model,
    device: torch.device,
    use_cuda: bool,
    *,
    precision: str,
    batch_size: int,
    threads: int,
    streams: int,
    micro: int,
    L: int,
    D: int,
    check: PrecisionCheck,
    stats: EngineStats,
):
    encoder = Encoder(device)
    if use_cuda:
        ex: CudaExecutor | CpuExecutor = CudaExecutor(
            model, device, precision=precision, batch=batch_size, L=L, D=D, encoder=encoder, check=check, stats=stats
        )
        stats.streams, stats.intra_threads = 1, threads
        return ex
    streams = max(1, min(streams, batch_size))
    ex = CpuExecutor(
        model,
        precision=precision,
        threads=threads,
        streams=streams,
        micro=min(micro, batch_size),
        L=L,
        D=D,
        encoder=encoder,
        check=check,
        stats=stats,
    )
    stats.streams, stats.intra_threads = ex.streams, ex.intra
    return ex


def _run_batches(
    pf: Prefetcher,
    ex,
    stats: EngineStats,
    on_batch: Callable[[Batch], None] | None,
    emit: Callable[[Batch, np.ndarray], None],
) -> None:
    """Batches from the prefetcher through the executor (``ex.depth`` in flight), each finished one to ``emit``."""
    while True:
        t0 = time.perf_counter()
        batch = pf.get()
        stats.wait_s += time.perf_counter() - t0
        if batch is None:
            break
        if on_batch is not None:
            on_batch(batch)
        stats.bp += _count_bp(batch)
        ex.submit(batch)
        while ex.pending() > ex.depth - 1:
            emit(*ex.pop())
    while ex.pending():
        emit(*ex.pop())


def _count_bp(batch: Batch) -> int:
    if batch.bp is not None:
        return batch.bp
    if batch.codes is not None:
        return int(np.count_nonzero(batch.codes[: batch.n]))
    return count_bp(cast(np.ndarray, batch.x))  # an h5 batch: its float rows


def run_prediction(
    model: torch.nn.Module,
    X: h5py.Dataset,
    out_dset: h5py.Dataset,
    *,
    row_start: int,
    row_end: int,
    batch_size: int,
    device: torch.device,
    precision: str,
    threads: int,
    num_workers: int,
    streams: int = 1,
    micro: int = CPU_MICRO,
    check_rows: int = 64,
    progress: bool | None = None,
    h5_mode: str = "x",
    executor: str | None = None,
) -> EngineStats:
    """Predict rows [row_start, row_end) of ``X`` into ``out_dset`` (rows shifted by ``row_start``)."""
    feed = H5Feed(
        X,
        X.file.filename,
        max(1, batch_size),
        row_start=row_start,
        row_end=row_end,
        threads=max(1, threads),
        mode=h5_mode,
    )
    writer = PredictionWriter(out_dset, row_start, pool_threads=max(1, threads), depth=2)
    return predict_feed(
        model,
        feed,
        writer,
        n_rows=row_end - row_start,
        batch_size=max(1, batch_size),
        device=device,
        precision=precision,
        threads=threads,
        streams=streams,
        micro=micro,
        num_workers=num_workers,
        check_rows=check_rows,
        progress=progress,
        executor=executor,
    )
