"""The CUDA path of ``chromaflow predict``, where a CUDA device exists (skipped, with the reason, elsewhere).

Checks: fp32 on the GPU equals the CPU path and Predmoter's reference except ±1 at the documented near-ties
(both routes: h5 and FASTA), bf16 writes its measured deviation, predictions come back in the smallest exact
integer type (and a batch whose values do not fit falls back to int64 without loss), NVML utilisation/memory and
CUDA-event timings are in the metrics, --batch-size auto probes, and an out-of-memory halves the batch.
"""

from __future__ import annotations

import json
import threading

import h5py
import numpy as np
import pytest
import torch

from helpers.cli import run_in_process as run_cli
from helpers.predict_files import write_genome_h5
from helpers.predict_helpers import ScaledModel

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA device here (torch.cuda.is_available() is False): the GPU path is tested where one exists; "
    "benchmarks/gpu/run measures it",
)

SPECIES = "Species_artificialis_9"


def _ties(reference_dir, stem):
    from chromaflow.model.checkpoint import build_model, load_checkpoint
    from chromaflow.predict.compare import near_ties

    with h5py.File(reference_dir / "predmoter" / f"{stem}.h5") as f:
        X = f["data/X"][()]
    return near_ties(build_model(load_checkpoint(reference_dir / "predmoter" / "mini_model.ckpt")), X)


@pytest.mark.parametrize("route", ["h5", "fasta"])
def test_cuda_fp32_equals_reference_tie_only(reference_dir, tmp_path, route):
    from chromaflow.predict.compare import compare_files

    ref = reference_dir / "predmoter"
    out = tmp_path / "gpu.h5"
    src = ["--h5", ref / "pred_data_1.h5"] if route == "h5" else ["--fasta", ref / "pred_data.fa", "--species", SPECIES]
    run_cli(
        "predict",
        *src,
        "--model",
        ref / "mini_model.ckpt",
        "--out",
        out,
        "--device",
        "cuda",
        "--metrics",
        tmp_path / "m.json",
    )
    cmp = compare_files(str(out), str(ref / "pred_data_1_predictions.h5"), _ties(reference_dir, "pred_data_1"))
    assert cmp.ok, cmp.summary()
    m = json.loads((tmp_path / "m.json").read_text())
    assert m["device"].startswith("cuda") and m["precision"] == "fp32"
    assert m["transfer_dtypes"] == {"int8": m["transfer_dtypes"]["int8"]}  # values -1..4 fit int8
    assert m["h2d_bytes"] > 0 and m["d2h_bytes"] > 0
    assert m["peak_gpu_bytes"] > 0
    t = m["gpu_timing"]
    assert t["source"].startswith("cuda events") and 0.0 <= t["data_wait_fraction"] <= 1.0 and t["model_s"] > 0
    assert m["data_wait_fraction"] == t["data_wait_fraction"]
    gpu = m["gpu"]
    if gpu["available"]:
        d = gpu["devices"][0]
        assert d["samples"] >= 1 and 0 <= d["utilization_max_pct"] <= 100
        assert 0 < d["memory_used_max_bytes"] <= d["memory_total_bytes"]
    else:  # NVML may be missing in a container even where CUDA works: the reason is recorded
        assert gpu["reason"].startswith("NVML unavailable")
    if route == "fasta":
        assert m["reader"] == "process"
        assert m["batch_size_requested"] == "auto" and m["batch_probe"]


def test_cuda_bf16_deviation_and_cpu_agreement(reference_dir, tmp_path):
    from chromaflow.predict.executors import bf16_supported

    if not bf16_supported(torch.device("cuda")):
        pytest.skip("this GPU has no bf16")
    ref = reference_dir / "predmoter"
    run_cli(
        "predict",
        "--h5",
        ref / "pred_data_1.h5",
        "--model",
        ref / "mini_model.ckpt",
        "--out",
        tmp_path / "b.h5",
        "--device",
        "cuda",
        "--precision",
        "bf16",
        "--batch-size",
        "8",
        "--metrics",
        tmp_path / "m.json",
    )
    pc = json.loads((tmp_path / "m.json").read_text())["precision_check"]
    # 16 rows in batches of 8: rows 0..7 of batches 0 and 1 are also run in fp32
    assert pc["precision"] == "bf16" and pc["rows_sampled"] == 16 and pc["values"] > 0
    assert 0.0 <= pc["fraction"] < 0.05 and pc["max_abs"] <= 2


def _run(tmp_path, model, X, batch):
    from chromaflow.predict import engine, h5io

    with h5py.File(tmp_path / "g.h5") as f, h5py.File(tmp_path / "o.h5", "w") as out:
        dset = h5io.create_predictions(
            out,
            n_rows=X.shape[0],
            length=X.shape[1],
            datasets=["a"],
            species0=b"s",
            model_name="m",
            seqids=f["data/seqids"][()],
            start_ends=f["data/start_ends"][()],
        )
        stats = engine.run_prediction(
            model,
            f["data/X"],
            dset,
            row_start=0,
            row_end=X.shape[0],
            batch_size=batch,
            device=torch.device("cuda"),
            precision="fp32",
            threads=1,
            num_workers=1,
        )
    with h5py.File(tmp_path / "o.h5") as f:
        return stats, f["prediction/predictions"][()]


def test_cuda_transfer_dtype_widens_without_loss(tmp_path):
    from chromaflow.predict.executors import CUDA_DEPTH

    X = write_genome_h5(tmp_path / "g.h5", 9, 32)
    stats, got = _run(tmp_path, ScaledModel(12.0), X, batch=3)  # exp(12) = 162755: needs int32
    want = np.round(np.exp(12.0 * X[:, :, :1].astype(np.float32))).astype(np.int64)
    want[X.max(axis=2) == 0] = -1
    assert np.array_equal(got, want)
    # the batches already in flight in int8 (CUDA_DEPTH of them) did not fit: copied again as int64; the next
    # one comes back as int32 (as tests/predict/test_predict_cuda_logic.py checks with a stand-in runtime on the CPU)
    assert stats.transfer_dtypes == {"int64": CUDA_DEPTH, "int32": 3 - CUDA_DEPTH}


def test_cuda_oom_halves_batch(tmp_path):
    X = write_genome_h5(tmp_path / "g.h5", 7, 32)
    stats, got = _run(tmp_path, ScaledModel(3.0, limit=2), X, batch=7)
    want = np.round(np.exp(3.0 * X[:, :, :1].astype(np.float32))).astype(np.int64)
    want[X.max(axis=2) == 0] = -1
    assert np.array_equal(got, want)
    assert stats.final_batch <= 2 and any("OOM" in n for n in stats.notes)


def test_cuda_batch_probe_with_fake_oom():
    from chromaflow.predict.executors import EngineStats
    from chromaflow.predict.probe import resolve_batch_size

    stats = EngineStats()
    size = resolve_batch_size(
        "auto",
        model=ScaledModel(1.0, limit=37),
        device=torch.device("cuda"),
        L=32,
        D=1,
        precision="fp32",
        rows=1000,
        stats=stats,
    )
    assert size == 37 and stats.batch_probe[-1] == [37, True]


def test_cuda_batch_size_cache_same_predictions(reference_dir, tmp_path, monkeypatch):
    """A second process on the same GPU takes the probed batch size from the cache (no probe) and writes the
    same predictions."""
    monkeypatch.setenv("CHROMAFLOW_CACHE", str(tmp_path / "cache"))
    ref = reference_dir / "predmoter"
    got = []
    for i in range(2):
        out, m = tmp_path / f"o{i}.h5", tmp_path / f"m{i}.json"
        run_cli(
            "predict",
            "--h5",
            ref / "pred_data_1.h5",
            "--model",
            ref / "mini_model.ckpt",
            "--out",
            out,
            "--device",
            "cuda",
            "--metrics",
            m,
        )
        got.append((json.loads(m.read_text()), out))
    (m0, o0), (m1, o1) = got
    assert m0["batch_probe_source"] == "probe" and m0["batch_probe"]
    assert m1["batch_probe_source"] == "cache" and m1["batch_probe"] is None
    assert m1["batch_size"] == m0["batch_size"]
    with h5py.File(o0) as a, h5py.File(o1) as b:
        assert np.array_equal(a["prediction/predictions"][:], b["prediction/predictions"][:])


def test_pinned_feed_buffers(reference_dir):
    from chromaflow.predict.executors import pinned_pool
    from chromaflow.predict.feed import FastaFeed

    pool = pinned_pool(3, 4, 21384, pin=True)
    assert torch.from_numpy(pool.codes[0]).is_pinned()
    feed = FastaFeed(str(reference_dir / "predmoter" / "pred_data.fa"), 21384, 4, pool, reader="process")
    n = 0
    for b in feed.batches(threading.Event()):
        assert torch.from_numpy(b.codes).is_pinned()
        n += b.n
        pool.release(b.slot)
    assert n == 16
