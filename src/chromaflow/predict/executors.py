"""The executors: the model on a batch of rows, on the CPU (:class:`CpuExecutor`: concurrent streams of
micro-batches) or on a CUDA device (:class:`CudaExecutor`: pinned buffers, H2D on a copy stream, one-hot, model,
exp/round/−1 mask and the transfer cast on the compute stream, D2H of the smallest exact integer type, a few batches
in flight); both back off on out-of-memory. Also what they share: device and precision choice, the one-hot
:class:`Encoder`, the output rounding, the precision deviation sample and the run's :class:`EngineStats`."""

from __future__ import annotations

import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, cast

import numpy as np
import torch

from ..utils.errors import ChromaflowError
from .feed import ONEHOT_LUT, Batch, BufferPool

PRECISIONS = ("fp32", "bf16", "fp16")
#: integer types tried, smallest first, for copying predictions back from the device
TRANSFER_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64)
#: rows per model call on CPU (a stream runs its part of a batch in micro-batches of this size; measured:
#: see docs/predict.md "CPU performance")
CPU_MICRO = 4
#: batches in flight on a CUDA device (copy of the next, compute of the current, copy back of the previous)
CUDA_DEPTH = 2


@dataclass
class EngineStats:
    """What a prediction run's model loop measured and chose, for the metrics: rows and bp predicted, loop, wait and
    drain seconds, batch sizes (and how ``auto`` was resolved), device, precision, streams and threads, transfer types
    and bytes, GPU timing, the precision check and notes."""

    rows: int = 0
    bp: int = 0  # non-padding positions predicted
    loop_s: float = 0.0
    wait_s: float = 0.0  # host time the model loop waited for the feed
    write_wait_s: float = 0.0
    final_batch: int = 0  # rows per model call at the end (after any out-of-memory back-off)
    batch_size: int = 0  # rows per batch (as resolved; "auto" -> the probed size)
    batch_probe: list = field(default_factory=list)
    batch_probe_source: str | None = None  # "probe" or "cache" (--batch-size auto)
    drain_s: float = 0.0  # after the loop: writer and executor finishing their last batches
    peak_gpu_bytes: int | None = None
    device: str = "cpu"
    precision: str = "fp32"
    streams: int = 1
    intra_threads: int = 1
    transfer_dtypes: dict = field(default_factory=dict)  # dtype name -> batches copied back in it
    h2d_bytes: int = 0
    d2h_bytes: int = 0
    gpu_timing: dict | None = None  # from CUDA events
    precision_check: dict | None = None
    notes: list = field(default_factory=list)


# --------------------------------------------------------------------------------------------------
# device, precision
# --------------------------------------------------------------------------------------------------
class CudaRuntime:
    """The few CUDA runtime calls the CUDA executor makes, behind one object, so that tests on machines without
    a GPU can run the executor's logic (streams, events, pinned buffers, OOM back-off, transfer types) on the CPU
    with a stand-in (tests/predict/test_predict_cuda_logic.py ``fake_cuda``)."""

    Stream = staticmethod(lambda device=None: torch.cuda.Stream(device))
    Event = staticmethod(lambda enable_timing=False: torch.cuda.Event(enable_timing=enable_timing))
    stream = staticmethod(lambda s: torch.cuda.stream(s))
    synchronize = staticmethod(lambda device=None: torch.cuda.synchronize(device))
    empty_cache = staticmethod(lambda: torch.cuda.empty_cache())
    reset_peak_memory_stats = staticmethod(lambda device=None: torch.cuda.reset_peak_memory_stats(device))
    max_memory_allocated = staticmethod(lambda device=None: torch.cuda.max_memory_allocated(device))

    @staticmethod
    def pinned_empty(shape, dtype) -> torch.Tensor:
        """An uninitialised tensor of ``shape`` and ``dtype`` in pinned host memory."""
        return torch.empty(shape, dtype=dtype, pin_memory=True)

    @staticmethod
    def pin(t: torch.Tensor) -> torch.Tensor:
        """``t`` in pinned memory: itself if it is, a pinned copy otherwise."""
        return t if t.is_pinned() else t.pin_memory()

    @staticmethod
    def record_stream(t: torch.Tensor, stream) -> None:
        """Mark ``t`` as used by ``stream``, so that its memory is not reused before the stream's work on it is done."""
        t.record_stream(stream)


cuda = CudaRuntime()


def resolve_device(name: str) -> torch.device:
    """The torch device of ``--device``: 'cpu', 'cuda' (ChromaflowError without CUDA) or 'auto' (CUDA where available,
    else CPU); ChromaflowError for any other name."""
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
    """Whether ``device`` computes in bfloat16: CUDA's own check, on CPU oneDNN's (False where the check is missing)."""
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


def autocast_dtype(precision: str) -> torch.dtype | None:
    """The autocast dtype of ``precision``: None for 'fp32', bfloat16 for 'bf16', float16 for 'fp16' (KeyError
    otherwise)."""
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


# --------------------------------------------------------------------------------------------------
# one-hot on the device, output rounding
# --------------------------------------------------------------------------------------------------
class Encoder:
    """Builds the model input where the model runs: codes -> float32 one-hot through :data:`ONEHOT_LUT`."""

    def __init__(self, device: torch.device):
        self.lut = torch.from_numpy(ONEHOT_LUT).to(device)

    def codes(self, codes: torch.Tensor, strand: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """The one-hot input of ``codes`` ((n, L) base codes) and its padding mask: (x, codes == 0), x float32 of shape
        (n, L, 4) looked up in the table (row ``256 + code`` for rows whose ``strand`` is 1)."""
        idx = codes.to(torch.int32)
        if strand is not None:
            idx = idx + strand.to(torch.int32).mul_(256).unsqueeze(1)
        # a gather of table rows (index_select: ~4 ns/bp on one CPU core, 6x less than advanced indexing)
        x = self.lut.index_select(0, idx.reshape(-1)).view(*codes.shape, 4)
        return x, codes == 0

    @staticmethod
    def floats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """An already one-hot input ``x`` (n, L, 4) as float32 and its padding mask, the positions whose four columns
        are all 0 (N, 0.25 each, is not padding)."""
        x = x.to(torch.float32)
        return x, x.amax(dim=2) == 0  # padding = all four columns 0; N (0.25) is not masked


def smallest_int_dtype(lo: int, hi: int) -> torch.dtype:
    """The smallest of int8/16/32/64 that holds every value in [lo, hi] exactly."""
    for dt in TRANSFER_DTYPES:
        if torch.iinfo(dt).min <= lo and hi <= torch.iinfo(dt).max:
            return dt
    return torch.int64


def rounded(y: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
    """round_half_to_even(exp(y)) as int64, −1 at padding (FORMATS.md §3)."""
    out = torch.round(torch.exp(y.float())).to(torch.int64)  # torch.round: half to even
    out[pad] = -1
    return out


# --------------------------------------------------------------------------------------------------
# precision deviation: a deterministic sample of rows run in fp32 as well
# --------------------------------------------------------------------------------------------------
class PrecisionCheck:
    """For bf16/fp16: rows 0..per_batch-1 of batches 0, 1, 2, 4, 8, 16, ... (up to ``max_rows`` rows in all)
    are also run in fp32; the rounded values are compared (fraction that differ, max |Δ|) and so are the raw
    exp() values (max and mean |Δ|). Padding positions are excluded."""

    def __init__(self, precision: str, max_rows: int, per_batch: int = 8):
        self.enabled = precision != "fp32" and max_rows > 0
        self.precision = precision
        self.max_rows, self.per_batch = max_rows, per_batch
        self.lock = threading.Lock()
        self.rows = self.values = self.differ = self.max_abs = 0
        self.raw_max = 0.0
        self.raw_sum = 0.0

    def rows_for(self, batch_index: int, n: int) -> int:
        """Rows of batch ``batch_index`` (of ``n`` rows) to check in fp32: up to ``per_batch`` for batch 0 and the
        powers of two, within ``max_rows`` in all; 0 otherwise or when disabled."""
        if not self.enabled or self.rows >= self.max_rows:
            return 0
        if batch_index and batch_index & (batch_index - 1):
            return 0
        return min(n, self.per_batch, self.max_rows - self.rows)

    def add(self, low: torch.Tensor, ref: torch.Tensor, pad: torch.Tensor) -> None:
        """``low``/``ref``: raw model outputs (log-rate) of the same rows in the low precision and in fp32."""
        el, er = torch.exp(low.float()), torch.exp(ref.float())
        keep = ~pad
        d_raw = (el - er).abs()[keep]
        d_int = (torch.round(el) - torch.round(er)).abs()[keep]
        with self.lock:
            self.rows += int(pad.shape[0])
            self.values += int(d_int.numel())
            self.differ += int((d_int != 0).sum())
            if d_int.numel():
                self.max_abs = max(self.max_abs, int(d_int.max()))
                self.raw_max = max(self.raw_max, float(d_raw.max()))
                self.raw_sum += float(d_raw.double().sum())

    def result(self) -> dict | None:
        """The check's summary for the metrics (rows and values compared, how many differ, max and mean deviations,
        which rows were sampled); None when disabled."""
        if not self.enabled:
            return None
        return {
            "precision": self.precision,
            "reference": "fp32 on the same device",
            "rows_sampled": self.rows,
            "values": self.values,
            "differ": self.differ,
            "fraction": (self.differ / self.values) if self.values else None,
            "max_abs": self.max_abs,
            "raw_max_abs": self.raw_max,
            "raw_mean_abs": (self.raw_sum / self.values) if self.values else None,
            "sample": f"rows 0..{self.per_batch - 1} of batches 0, 1, 2, 4, 8, ... (<= {self.max_rows} rows)",
        }


# --------------------------------------------------------------------------------------------------
# CPU streams (predict's CPU executor, variant-effect's predictor)
# --------------------------------------------------------------------------------------------------
def start_streams(streams: int, intra: int, prefix: str, first_call: Callable[[], object]) -> ThreadPoolExecutor:
    """A pool of ``streams`` threads of ``intra`` torch threads each, started after ``first_call()`` has run in this
    thread (its result is discarded).

    ``first_call`` is one call of what the streams run (encoder, model, exp) on zeros: torch sets some CPU kernels up
    on their first call, and when two streams made that first call at once one of them could compute exp with another
    routine, a whole micro-batch ~2e-6 off (exp(0.70696336) = 2.0278287 instead of 2.0278242), and a rounded
    prediction moved by 1: a sharded run then differed from an unsharded one. Measured with torch 2.13 on fresh
    processes whose two streams start together: predictions unlike a one-stream run's in 42 of 600 without the first
    call, in 0 of 600 with it (docs/predict.md). Its cost: one call of a micro-batch of at most 2 rows per pool."""
    first_call()
    return ThreadPoolExecutor(
        max_workers=streams, thread_name_prefix=prefix, initializer=lambda: torch.set_num_threads(intra)
    )


# --------------------------------------------------------------------------------------------------
# CPU executor
# --------------------------------------------------------------------------------------------------
class CpuExecutor:
    """Each batch is split into ``streams`` contiguous parts run concurrently (torch releases the GIL), each with
    ``threads // streams`` intra-op threads, in micro-batches of ``micro`` rows (small activations stay in cache
    and in the heap). One-hot, exp/round and the −1 mask happen per micro-batch.

    The loop's interface is :class:`CudaExecutor`'s (``submit``, ``pending``, ``pop``, ``depth``): a CPU batch is
    done when ``submit`` returns, so one is in flight at most."""

    depth = 1

    def __init__(
        self,
        model,
        *,
        precision: str,
        threads: int,
        streams: int,
        micro: int,
        L: int,
        D: int,
        encoder: Encoder,
        check: PrecisionCheck,
        stats: EngineStats,
    ):
        self.model, self.precision, self.encoder, self.check, self.stats = model, precision, encoder, check, stats
        self.L, self.D = L, D
        self.streams = max(1, streams)
        self.intra = max(1, threads // self.streams)
        self.micro = max(1, micro)
        self.lock = threading.Lock()
        self.amp = autocast_dtype(precision)
        self.pool = (
            start_streams(self.streams, self.intra, "predict-stream", self._first_call) if self.streams > 1 else None
        )
        self.index = 0
        self.done: list[tuple[Batch, np.ndarray]] = []

    def _first_call(self) -> None:
        """Both encoders, the model, exp and round on ``min(2, micro)`` rows of zeros (:func:`start_streams`; one per
        executor: one per assembly of a PREDICT_GROUP task, ~2 % of a 1 Mbp assembly's rows)."""
        k = min(2, self.micro)
        with torch.inference_mode():
            self.encoder.floats(torch.zeros(k, self.L, 4, dtype=torch.float16))
            x, pad = self.encoder.codes(torch.zeros(k, self.L, dtype=torch.uint8), torch.zeros(k, dtype=torch.uint8))
            rounded(self._forward(x), pad)

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.amp is None:
            return self.model(x)
        with torch.autocast(device_type="cpu", dtype=self.amp):
            return self.model(x)

    def _part(self, batch: Batch, p0: int, p1: int, out: np.ndarray, n_check: int) -> None:
        with torch.inference_mode():  # thread-local, so entered here
            i = p0
            while i < p1:
                micro = self.micro
                j = min(p1, i + micro)
                try:
                    if batch.codes is not None:  # a FASTA batch: codes and strands; else an h5 batch: x
                        x, pad = self.encoder.codes(
                            torch.from_numpy(batch.codes[i:j]), torch.from_numpy(cast(np.ndarray, batch.strand)[i:j])
                        )
                    else:
                        x, pad = self.encoder.floats(torch.from_numpy(cast(np.ndarray, batch.x)[i:j]))
                    y = self._forward(x)
                except torch.OutOfMemoryError:
                    with self.lock:
                        if micro == 1:
                            raise ChromaflowError("out of memory even with a batch of 1 subsequence") from None
                        if self.micro == micro:
                            self.micro = max(1, micro // 2)
                            self.stats.notes.append(f"OOM: micro-batch reduced to {self.micro}")
                            print(
                                f"chromaflow predict: out of memory, retrying with {self.micro} rows per model call",
                                file=sys.stderr,
                            )
                    continue
                out[i:j] = rounded(y, pad).numpy()
                if i < n_check:
                    k = min(j, n_check) - i
                    self.check.add(y[:k], self.model(x[:k]), pad[:k])
                i = j

    def run(self, batch: Batch) -> np.ndarray:
        """Predict one batch now: (n, L, D) int64, split among the streams when there is a pool; the checked rows are
        also run in fp32."""
        n = batch.n
        n_check = self.check.rows_for(self.index, n)
        self.index += 1
        out = np.empty((n, self.L, self.D), dtype=np.int64)
        if self.pool is None or n == 1:
            self._part(batch, 0, n, out, n_check)
        else:
            step = -(-n // min(self.streams, n))
            futs = [self.pool.submit(self._part, batch, j, min(n, j + step), out, n_check) for j in range(0, n, step)]
            for f in futs:
                f.result()
        return out

    def submit(self, batch: Batch) -> None:
        """Predict ``batch`` at once (:meth:`run`) and keep the result for :meth:`pop`."""
        self.done.append((batch, self.run(batch)))

    def pending(self) -> int:
        """Batches done and not yet popped."""
        return len(self.done)

    def pop(self) -> tuple[Batch, np.ndarray]:
        """The oldest finished (batch, predictions)."""
        return self.done.pop(0)

    def close(self) -> None:
        """Shut the stream pool down, waiting for its work."""
        if self.pool is not None:
            self.pool.shutdown(wait=True)


# --------------------------------------------------------------------------------------------------
# CUDA executor
# --------------------------------------------------------------------------------------------------
@dataclass
class _InFlight:
    batch: Batch
    done: Any  # torch.cuda.Event after the D2H copies
    minmax: torch.Tensor  # pinned (2,) int64: min, max of the batch's predictions
    out: torch.Tensor  # pinned view holding the values in ``dtype``
    dtype: torch.dtype
    y64: torch.Tensor  # device int64 values (used if they did not fit ``dtype``)
    events: list  # (begin, model start, model end, end) CUDA events per micro-batch
    slot: int = -1  # pinned output slot


class CudaExecutor:
    """Pinned host buffers, H2D on a copy stream, compute on a compute stream, D2H of the smallest integer
    type that held the previous batch's values (checked against the batch's exact min/max, so never lossy),
    ``depth`` batches in flight. On out-of-memory the micro-batch is halved and the batch retried."""

    def __init__(
        self,
        model,
        device: torch.device,
        *,
        precision: str,
        batch: int,
        L: int,
        D: int,
        encoder: Encoder,
        check: PrecisionCheck,
        stats: EngineStats,
        depth: int = CUDA_DEPTH,
    ):
        self.model, self.device, self.encoder, self.check, self.stats = model, device, encoder, check, stats
        self.amp = autocast_dtype(precision)
        self.L, self.D = L, D
        self.micro = batch
        self.depth = max(1, depth)
        self.copy_stream = cuda.Stream(device)
        self.compute_stream = cuda.Stream(device)
        self.inflight: list[_InFlight] = []
        self.dtype_idx = 0
        slots = self.depth + 1
        # pinned output slots, sized for int8 at first and grown when a wider type is needed (rare)
        self.out_slots = [cuda.pinned_empty(batch * L * D, torch.uint8) for _ in range(slots)]
        self.free_out = list(range(slots))
        self.index = 0
        self.timeline: list = []

    def _forward(self, x):
        if self.amp is None:
            return self.model(x)
        with torch.autocast(device_type="cuda", dtype=self.amp):
            return self.model(x)

    def _launch(self, batch: Batch, slot: int) -> _InFlight:
        n, L, D = batch.n, self.L, self.D
        dev = self.device
        with cuda.stream(self.copy_stream):
            src: tuple[torch.Tensor, ...]
            if batch.codes is not None:  # a FASTA batch: codes and strands; else an h5 batch: x
                src = (torch.from_numpy(batch.codes[:n]), torch.from_numpy(cast(np.ndarray, batch.strand)[:n]))
            else:
                t = torch.from_numpy(batch.x)
                src = (cuda.pin(t),)
            dsrc = [s.to(dev, non_blocking=True) for s in src]
            self.stats.h2d_bytes += sum(s.numel() * s.element_size() for s in src)
        n_check = self.check.rows_for(self.index, n)
        cs = self.compute_stream
        cs.wait_stream(self.copy_stream)
        events = []
        with cuda.stream(cs):
            for s in dsrc:
                cuda.record_stream(s, cs)
            y64 = torch.empty((n, L, D), dtype=torch.int64, device=dev)
            for i in range(0, n, self.micro):
                j = min(n, i + self.micro)
                ev = [cuda.Event(enable_timing=True) for _ in range(4)]
                ev[0].record(cs)
                if batch.codes is not None:
                    x, pad = self.encoder.codes(dsrc[0][i:j], dsrc[1][i:j])
                else:
                    x, pad = self.encoder.floats(dsrc[0][i:j])
                ev[1].record(cs)
                y = self._forward(x)
                ev[2].record(cs)
                y64[i:j] = rounded(y, pad)
                if i < n_check:
                    k = min(j, n_check) - i
                    self.check.add(y[:k], self.model(x[:k]), pad[:k])
                ev[3].record(cs)
                events.append(ev)
                del x, pad, y
            minmax = (
                torch.stack([y64.min(), y64.max()]) if y64.numel() else torch.zeros(2, dtype=torch.int64, device=dev)
            )
            mm_host = cuda.pinned_empty(2, torch.int64)
            mm_host.copy_(minmax, non_blocking=True)
            dtype = TRANSFER_DTYPES[self.dtype_idx]
            nbytes = n * L * D * dtype.itemsize
            if self.out_slots[slot].numel() < nbytes:  # free: its previous batch was popped
                self.out_slots[slot] = cuda.pinned_empty(nbytes, torch.uint8)
            out = self.out_slots[slot][:nbytes].view(dtype).view(n, L, D)
            out.copy_(y64.to(dtype), non_blocking=True)
            self.stats.d2h_bytes += nbytes
            done = cuda.Event()
            done.record(cs)
        return _InFlight(batch, done, mm_host, out, dtype, y64, events, slot)

    def submit(self, batch: Batch) -> None:
        """Launch ``batch`` on the device into a free output slot; on CUDA out-of-memory the micro-batch is halved and
        the launch retried (ChromaflowError once a batch of 1 does not fit)."""
        slot = self.free_out.pop()
        while True:
            try:
                item = self._launch(batch, slot)
                break
            except torch.OutOfMemoryError:
                cuda.synchronize(self.device)
                cuda.empty_cache()
                if self.micro == 1:
                    raise ChromaflowError("CUDA out of memory even with a batch of 1 subsequence") from None
                self.micro = max(1, self.micro // 2)
                self.stats.notes.append(f"CUDA OOM: batch reduced to {self.micro}")
                print(f"chromaflow predict: CUDA out of memory, retrying with batch size {self.micro}", file=sys.stderr)
        self.index += 1
        self.inflight.append(item)

    def pending(self) -> int:
        """Batches launched and not yet popped."""
        return len(self.inflight)

    def pop(self) -> tuple[Batch, np.ndarray]:
        """The oldest launched batch and its predictions as a numpy array, waiting for its copy back: in the transfer
        type if the batch's min/max fit it, else as int64 from the device; the next batch's transfer type is the
        smallest that holds this one's range."""
        item = self.inflight.pop(0)
        item.done.synchronize()
        lo, hi = (int(v) for v in item.minmax)
        fits = torch.iinfo(item.dtype).min <= lo and hi <= torch.iinfo(item.dtype).max
        if fits:
            arr = item.out.numpy().copy()  # the pinned slot is reused; the writer widens to int64 in its pool
            name = str(item.dtype).replace("torch.", "")
        else:
            arr = item.y64.cpu().numpy()
            self.stats.d2h_bytes += arr.nbytes
            name = "int64"
        self.stats.transfer_dtypes[name] = self.stats.transfer_dtypes.get(name, 0) + 1
        # the smallest type that holds this batch's range is used for the next one
        self.dtype_idx = TRANSFER_DTYPES.index(smallest_int_dtype(lo, hi))
        self.timeline.extend(item.events)
        self.free_out.append(item.slot)
        return item.batch, arr

    def timing(self) -> dict | None:
        """Compute-stream timeline from CUDA events: model time, busy time, idle gaps (= waiting for data)."""
        if not self.timeline:
            return None
        cuda.synchronize(self.device)
        model_ms = sum(ev[1].elapsed_time(ev[2]) for ev in self.timeline)
        busy_ms = sum(ev[0].elapsed_time(ev[3]) for ev in self.timeline)
        span_ms = self.timeline[0][0].elapsed_time(self.timeline[-1][3])
        idle_ms = max(0.0, span_ms - busy_ms)
        return {
            "source": "cuda events on the compute stream",
            "model_s": model_ms / 1000,
            "busy_s": busy_ms / 1000,
            "span_s": span_ms / 1000,
            "idle_s": idle_ms / 1000,
            "data_wait_fraction": idle_ms / span_ms if span_ms > 0 else 0.0,
            "model_fraction": model_ms / span_ms if span_ms > 0 else 0.0,
            "micro_batches": len(self.timeline),
        }

    def close(self) -> None:
        """Forget the batches in flight."""
        self.inflight.clear()


def pinned_pool(slots: int, batch: int, L: int, pin: bool) -> BufferPool:
    """Feed buffers; page-locked when they are copied to a CUDA device."""
    if not pin:
        return BufferPool(slots, batch, L)
    types = {np.uint8: torch.uint8}
    return BufferPool(slots, batch, L, alloc=lambda shape, dtype: cuda.pinned_empty(shape, types[dtype]).numpy())
