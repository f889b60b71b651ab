"""The CUDA executor's logic on the CPU: a stand-in for the CUDA runtime (streams and events as no-ops / clocks,
pinned memory as plain memory): transfer types, OOM back-off, event timings, the batch probe and the FASTA route. On
a GPU, tests/predict/test_predict_cuda.py runs the real thing."""

from __future__ import annotations

import contextlib

import h5py
import numpy as np
import pytest
import torch

from chromaflow.model.checkpoint import build_model, load_checkpoint
from helpers.predict_files import write_genome_h5
from helpers.predict_helpers import ScaledModel
from predict_shared import engine_run, predmoter


class _FakeEvent:
    def __init__(self, enable_timing=False):
        self.t = None

    def record(self, stream=None):
        import time

        self.t = time.perf_counter()

    def synchronize(self):
        assert self.t is not None

    def elapsed_time(self, other):
        return (other.t - self.t) * 1000.0


class _FakeStream:
    def wait_stream(self, other):
        pass


@pytest.fixture
def fake_cuda(monkeypatch):
    from chromaflow.predict import executors

    rt = executors.cuda
    monkeypatch.setattr(rt, "Stream", lambda device=None: _FakeStream())
    monkeypatch.setattr(rt, "Event", lambda enable_timing=False: _FakeEvent(enable_timing))
    monkeypatch.setattr(rt, "stream", lambda s: contextlib.nullcontext())
    for name in ("synchronize", "reset_peak_memory_stats"):
        monkeypatch.setattr(rt, name, lambda device=None: None)
    monkeypatch.setattr(rt, "empty_cache", lambda: None)
    monkeypatch.setattr(rt, "max_memory_allocated", lambda device=None: 0)
    monkeypatch.setattr(rt, "pinned_empty", lambda shape, dtype: torch.empty(shape, dtype=dtype))
    monkeypatch.setattr(rt, "pin", lambda t: t)
    monkeypatch.setattr(rt, "record_stream", lambda t, s: None)
    return rt


def test_cuda_runtime_calls_reach_torch_cuda(monkeypatch):
    """Each of the runtime's plain calls forwards to torch.cuda's function of the same name (a GPU run once
    found reset_peak_memory_stats calling itself; the executor tests above replace these calls)."""
    from chromaflow.predict.executors import CudaRuntime

    rt = CudaRuntime()
    for name in (
        "synchronize",
        "reset_peak_memory_stats",
        "max_memory_allocated",
        "empty_cache",
        "Stream",
        "Event",
        "stream",
    ):
        seen = []
        monkeypatch.setattr(torch.cuda, name, lambda *a, _n=name, **k: seen.append((_n, a, k)) or 7)
        args = {"Event": (), "empty_cache": (), "stream": ("s",)}.get(name, ("cuda:0",))
        assert getattr(rt, name)(*args) == 7, name
        assert seen and seen[0][0] == name, name


@pytest.mark.parametrize(
    "scale,limit,dtypes,d2h",
    [(12.0, 100, {"int64": 2, "int32": 1}, 2 * 96 * 1 + 2 * 96 * 8 + 96 * 4), (3.0, 2, {"int8": 3}, 3 * 96 * 1)],
)
def test_cuda_executor_logic_on_cpu(tmp_path, fake_cuda, scale, limit, dtypes, d2h):
    """Transfer types widen without loss (int8 first; exp(12) needs int32: the two batches already in flight in
    int8 are copied again as int64, the next one comes back as int32), an OOM halves the batch, CUDA-event
    timings are gathered, results are exact."""
    X = write_genome_h5(tmp_path / "g.h5", 9, 32)
    stats, got = engine_run(tmp_path, ScaledModel(scale, limit), X, batch_size=3, precision="fp32", executor="cuda")
    want = np.round(np.exp(scale * X[:, :, :1].astype(np.float32))).astype(np.int64)
    want[X.max(axis=2) == 0] = -1
    assert np.array_equal(got, want)
    assert stats.transfer_dtypes == dtypes
    assert stats.final_batch == (1 if limit == 2 else 3)  # 3 rows did not fit: 3 // 2 = 1 row per call
    assert (limit == 2) == any("CUDA OOM" in n for n in stats.notes)
    t = stats.gpu_timing
    assert t["micro_batches"] == (9 if limit == 2 else 3) and 0.0 <= t["data_wait_fraction"] <= 1.0
    # float16 rows of the h5 route (3 batches of 3 x 32 x 4 x 2 bytes); the batch that ran out of memory twice
    assert stats.h2d_bytes == 768 * (4 if limit == 2 else 3)
    assert stats.d2h_bytes == d2h


def test_cuda_batch_probe_logic_on_cpu(fake_cuda):
    from chromaflow.predict.probe import probe_batch_size

    size, trials = probe_batch_size(
        ScaledModel(1.0, limit=37), torch.device("cpu"), L=16, D=1, precision="fp32", limit=4096, executor="cuda"
    )
    assert size == 37 and trials[-1] == (37, True)


def test_cuda_executor_fasta_route_logic_on_cpu(reference_dir, tmp_path, fake_cuda):
    """The FASTA route through the CUDA executor (codes + strand flags, one-hot by table, grown output) gives
    Predmoter's predictions."""
    from chromaflow.predict import engine, h5io
    from chromaflow.predict.executors import pinned_pool
    from chromaflow.predict.feed import FastaFeed
    from chromaflow.predict.writer import PredictionWriter

    torch.set_num_threads(1)  # the model runs in this thread here (on a GPU it would not load the CPU)
    model = build_model(load_checkpoint(predmoter(reference_dir, "mini_model.ckpt")))
    pool = pinned_pool(5, 5, 21384, pin=True)
    feed = FastaFeed(str(predmoter(reference_dir, "pred_data.fa")), 21384, 5, pool, reader="process")
    got_meta = []
    with h5py.File(tmp_path / "o.h5", "w") as out:
        dset = h5io.create_predictions(
            out,
            n_rows=0,
            length=21384,
            datasets=["atacseq", "h3k4me3"],
            species0=b"Species_artificialis_9",
            model_name="m",
            seqids=np.zeros(0, "S50"),
            start_ends=np.zeros((0, 2), np.int64),
        )
        writer = PredictionWriter(dset, 0, pool_threads=2, depth=2, grow=True)
        stats = engine.predict_feed(
            model,
            feed,
            writer,
            n_rows=None,
            batch_size=5,
            device=torch.device("cpu"),
            precision="fp32",
            threads=1,
            on_batch=lambda b: got_meta.append(b),
            release=lambda b: pool.release(b.slot),
            executor="cuda",
        )
        h5io.finalize_rows(
            out,
            seqids=np.array([s for b in got_meta for s in b.seqids], dtype="S50"),
            start_ends=np.concatenate([b.start_ends for b in got_meta]),
        )
    assert stats.rows == 16 and stats.transfer_dtypes == {"int8": 4}
    with h5py.File(tmp_path / "o.h5") as f, h5py.File(predmoter(reference_dir, "pred_data_1_predictions.h5")) as g:
        for name in ("data/seqids", "data/start_ends", "prediction/predictions"):
            assert np.array_equal(f[name][()], g[name][()]), name
