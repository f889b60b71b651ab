"""The prediction engine on the CPU: out-of-memory halving and the bf16 fallback (simulated), ``--batch-size auto``
(probe, cache, fake OOM), the smallest exact transfer type, NVML metrics without a GPU. The CUDA executor's logic:
test_predict_cuda_logic.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.cli import run_in_process as run_cli
from helpers.predict_files import write_genome_h5
from predict_shared import engine_run


# --------------------------------------------------------------------------------------------------
# engine: OOM halving and bf16 fallback (simulated; no GPU here)
# --------------------------------------------------------------------------------------------------
class _Const(torch.nn.Module):
    """log-rate = 3 * first one-hot column (so exp → 1 or 20); raises CUDA OOM above ``limit`` rows."""

    def __init__(self, limit):
        super().__init__()
        self.limit = limit

    def forward(self, x):
        if x.shape[0] > self.limit:
            raise torch.cuda.OutOfMemoryError("simulated")
        return 3 * x[:, :, :1]


def test_oom_halves_batch_and_retries(tmp_path):
    X = write_genome_h5(tmp_path / "g.h5", 7, 16)
    stats, got = engine_run(tmp_path, _Const(limit=2), X, batch_size=7, precision="fp32", streams=1)
    assert stats.final_batch == 1 or stats.final_batch == 2
    assert any("OOM" in n for n in stats.notes)
    want = np.round(np.exp(3 * X[:, :, :1].astype(np.float32))).astype(np.int64)
    want[X.max(axis=2) == 0] = -1
    assert np.array_equal(got, want)


def test_bf16_fallback_message(tmp_path, monkeypatch, capsys):
    from chromaflow.predict import engine

    monkeypatch.setattr(engine, "bf16_supported", lambda device: False)
    X = write_genome_h5(tmp_path / "g.h5", 3, 16)
    stats, got = engine_run(tmp_path, _Const(limit=100), X, batch_size=2, precision="bf16", streams=2)
    assert stats.precision == "fp32"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bf16 not supported" in err[0]


# --------------------------------------------------------------------------------------------------
# --batch-size auto (fake OOM on CPU), transfer dtypes, NVML without a GPU
# --------------------------------------------------------------------------------------------------
def test_find_batch_size_power_then_bisect():
    from chromaflow.utils.errors import ChromaflowError
    from chromaflow.predict.probe import find_batch_size

    for limit in (1, 2, 5, 16, 37, 100, 1000, 3000):
        size, trials = find_batch_size(lambda b: b <= limit, start=16, limit=4096)
        assert size <= limit and limit - size <= max(1, size // 32), (limit, size)
        assert all(ok == (b <= limit) for b, ok in trials)
        assert len(trials) <= 20
    assert find_batch_size(lambda b: True, start=16, limit=4096)[0] == 4096
    with pytest.raises(ChromaflowError, match="batch of 1"):
        find_batch_size(lambda b: False)


def test_batch_size_cache_reuses_a_probe_and_keys_on_what_changes_it(tmp_path):
    """--batch-size auto keeps a probed size per model architecture, device, precision, L, D and limit; a second
    resolve of the same key probes nothing, another key probes, a damaged cache file is only a cache miss."""
    from chromaflow.predict.executors import EngineStats
    from chromaflow.predict.probe import batch_cache_key, resolve_batch_size

    cache = str(tmp_path / "c" / "batch-sizes.json")
    kw = dict(device=torch.device("cpu"), L=16, D=1, rows=80, probe_cpu=True, cache=cache)
    first, again, other = EngineStats(), EngineStats(), EngineStats()
    assert resolve_batch_size("auto", model=_Const(limit=37), precision="fp32", stats=first, **kw) == 37
    assert first.batch_probe_source == "probe" and len(first.batch_probe) == 8
    assert resolve_batch_size("auto", model=_Const(limit=37), precision="fp32", stats=again, **kw) == 37
    assert again.batch_probe_source == "cache" and again.batch_probe == [] and "probed earlier" in again.notes[0]
    assert resolve_batch_size("auto", model=_Const(limit=21), precision="bf16", stats=other, **kw) == 21
    assert other.batch_probe_source == "probe"  # another precision is another key
    key = batch_cache_key(_Const(limit=37), torch.device("cpu"), L=16, D=1, precision="fp32", limit=80)
    assert key != batch_cache_key(_Const(limit=37), torch.device("cpu"), L=32, D=1, precision="fp32", limit=80)
    assert key != batch_cache_key(torch.nn.Linear(2, 3), torch.device("cpu"), L=16, D=1, precision="fp32", limit=80)
    with open(cache, "w") as fh:
        fh.write("{not json")
    damaged = EngineStats()
    assert resolve_batch_size("auto", model=_Const(limit=37), precision="fp32", stats=damaged, **kw) == 37
    assert damaged.batch_probe_source == "probe" and not list((tmp_path / "c").glob("*.part"))


def test_batch_size_auto_with_fake_oom_on_cpu(tmp_path):
    from chromaflow.predict.executors import EngineStats
    from chromaflow.predict.probe import resolve_batch_size

    X = write_genome_h5(tmp_path / "g.h5", 80, 16)
    stats = EngineStats()
    size = resolve_batch_size(
        "auto",
        model=_Const(limit=37),
        device=torch.device("cpu"),
        L=16,
        D=1,
        precision="fp32",
        rows=80,
        stats=stats,
        probe_cpu=True,
    )
    assert size == 37
    assert stats.batch_probe == [
        [16, True],
        [32, True],
        [64, False],
        [48, False],
        [40, False],
        [36, True],
        [38, False],
        [37, True],
    ]
    run_stats, got = engine_run(tmp_path, _Const(limit=37), X, batch_size=size, precision="fp32", streams=1, micro=size)
    assert run_stats.final_batch == 37 and run_stats.batch_size == 37 and not run_stats.notes
    want = np.round(np.exp(3 * X[:, :, :1].astype(np.float32))).astype(np.int64)
    want[X.max(axis=2) == 0] = -1
    assert np.array_equal(got, want)
    # on CPU without probing: 120, capped at the rows to predict, and said so in the metrics
    out = tmp_path / "p.h5"
    ckpt = tmp_path / "t.ckpt"
    run_cli("make-test-model", "--out", ckpt)
    run_cli("predict", "--h5", tmp_path / "g.h5", "--model", ckpt, "--out", out, "--metrics", tmp_path / "m.json")
    import json

    m = json.loads((tmp_path / "m.json").read_text())
    assert m["batch_size_requested"] == "auto" and m["batch_size"] == 80
    assert any("batch size auto on CPU" in n for n in m["notes"])
    assert m["gpu"] == {"available": False, "reason": "no CUDA device used (CPU run)"}


def test_smallest_transfer_dtype():
    from chromaflow.predict.executors import smallest_int_dtype

    assert smallest_int_dtype(-1, 5) == torch.int8
    assert smallest_int_dtype(-1, 127) == torch.int8
    assert smallest_int_dtype(-1, 128) == torch.int16
    assert smallest_int_dtype(-129, 0) == torch.int16
    assert smallest_int_dtype(-1, 40000) == torch.int32
    assert smallest_int_dtype(-1, 2**40) == torch.int64


def test_nvml_metrics_degrade_without_gpu():
    from chromaflow.predict.gpumetrics import NvmlSampler

    with NvmlSampler(None) as s:
        pass
    assert s.result() == {"available": False, "reason": "no CUDA device used (CPU run)"}
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: tests/predict/test_predict_cuda.py checks real NVML samples")
    with NvmlSampler([0]) as s:
        pass
    res = s.result()
    assert res["available"] is False and res["reason"].startswith("NVML unavailable")


# --------------------------------------------------------------------------------------------------
# CPU streams: the first model call is made before the streams start
# --------------------------------------------------------------------------------------------------
def test_cpu_streams_start_after_one_call_in_the_constructing_thread():
    """torch sets some CPU kernels up on their first call, and two streams making it at once could compute exp with
    different routines (executors.start_streams: a rounded value off by 1 in ~7 % of fresh processes): the executor
    makes that call itself, in the thread that builds it, before any stream's; one stream needs none."""
    import threading

    from chromaflow.predict.executors import CpuExecutor, Encoder, EngineStats, PrecisionCheck
    from chromaflow.predict.feed import Batch
    from helpers.predict_helpers import ThreadRecorder

    X = np.zeros((8, 16, 4), np.float16)
    X[:, ::3, 0] = 1
    want = np.round(np.exp(3 * X[:, :, :1].astype(np.float32))).astype(np.int64)
    want[X.max(axis=2) == 0] = -1
    for streams in (1, 2):
        model = ThreadRecorder()
        ex = CpuExecutor(
            model,
            precision="fp32",
            threads=2,
            streams=streams,
            micro=2,
            L=16,
            D=1,
            encoder=Encoder(torch.device("cpu")),
            check=PrecisionCheck("fp32", 0),
            stats=EngineStats(),
        )
        built = list(model.threads)
        got = ex.run(Batch(row0=0, n=8, x=X))
        ex.close()
        assert np.array_equal(got, want)
        if streams == 1:
            assert built == [] and set(model.threads) == {threading.current_thread().name}
        else:
            assert built == [threading.current_thread().name]
            assert len(model.threads) == 5 and all(t.startswith("predict-stream") for t in model.threads[1:])
