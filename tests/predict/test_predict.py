"""Predict stage against Predmoter's reference files: its predictions exactly (any batch size), the near ties and the
tie rule of the comparison, sharding + merge, the bf16 deviation in the metrics recomputed independently, and the
phases of a process's seconds in the metrics. The network's key rules and forward pass: test_predict_network.py; the
engine: test_predict_engine.py and test_predict_cuda_logic.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from chromaflow.model.checkpoint import build_model, load_checkpoint
from helpers.cli import run_in_process as run_cli
from helpers.predict_files import assert_same_file
from predict_shared import predmoter


# --------------------------------------------------------------------------------------------------
# acceptance: Predmoter's reference predictions, exactly
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("stem,batch", [("pred_data_1", "7"), ("pred_data_2", "120")])
def test_reference_predictions_exact(reference_dir, tmp_path, stem, batch):
    model = str(predmoter(reference_dir, "mini_model.ckpt"))
    out = tmp_path / f"{stem}_predictions.h5"
    run_cli(
        "predict",
        "--h5",
        str(predmoter(reference_dir, f"{stem}.h5")),
        "--model",
        model,
        "--out",
        str(out),
        "--batch-size",
        batch,
        "--device",
        "cpu",
        "--metrics",
        str(tmp_path / "m.json"),
    )
    ref = predmoter(reference_dir, f"{stem}_predictions.h5")
    assert_same_file(out, ref)
    with h5py.File(out) as f:
        assert f["prediction/model_name"].fillvalue == model.encode()
        assert f["data/species"].fillvalue == b"Species_artificialis_9"
    import json

    m = json.loads((tmp_path / "m.json").read_text())
    assert m["stage"] == "predict" and m["device"] == "cpu" and m["precision"] == "fp32"
    with h5py.File(predmoter(reference_dir, f"{stem}.h5")) as f:
        X = f["data/X"][()]
    assert m["subsequences"] == X.shape[0]
    assert m["bp"] == int((X.max(axis=2) != 0).sum())
    assert 0.0 <= m["data_wait_fraction"] <= 1.0


def test_near_ties_reproduced(reference_dir, tmp_path):
    """The 10 near-.5 positions come out as Predmoter's integers (in-process, batch 16)."""
    torch.set_num_threads(1)  # OpenMP spin-waiting makes 2 threads slow on a shared machine
    ckpt = load_checkpoint(predmoter(reference_dir, "mini_model.ckpt"))
    model = build_model(ckpt)
    rows = np.loadtxt(predmoter(reference_dir, "extra/pred_data_1_near_ties.tsv"), skiprows=1)
    wanted = sorted({int(r) for r in rows[:, 0]})
    with h5py.File(predmoter(reference_dir, "pred_data_1.h5")) as f:
        X = torch.from_numpy(f["data/X"][wanted].astype(np.float32))
    with torch.inference_mode():
        y = torch.exp(model(X))
    for row, pos, ds, raw, want in rows:
        got = float(y[wanted.index(int(row)), int(pos), int(ds)])
        assert abs(got - raw) < 2e-6
        assert int(torch.round(torch.tensor(got))) == int(want)


# --------------------------------------------------------------------------------------------------
# sharding + merge
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("row_block", [None, 3], ids=["rows-at-once", "rows-in-blocks-of-3"])
def test_shards_merge_equal_unsharded(reference_dir, tmp_path, monkeypatch, row_block):
    """Blocks of 3 rows (genome.h5rows.ROW_BLOCK: seqids/start_ends are read and written a block at a time, bounding
    HDF5's per-chunk records) give the same files: blocks across shard boundaries and a partial last block."""
    if row_block:
        from chromaflow.genome import h5rows

        monkeypatch.setattr(h5rows, "ROW_BLOCK", row_block)
    model = str(predmoter(reference_dir, "mini_model.ckpt"))
    h5 = str(predmoter(reference_dir, "pred_data_1.h5"))
    shards = []
    for i in (3, 1, 2):
        p = tmp_path / f"s{i}.h5"
        run_cli("predict", "--h5", h5, "--model", model, "--out", str(p), "--shard", f"{i}/3", "--batch-size", "4")
        shards.append(p)
    with h5py.File(shards[1]) as f:  # shard 1 of 3 over 16 rows: rows 0-5
        assert (int(f.attrs["chromaflow_row_start"]), int(f.attrs["chromaflow_row_end"])) == (0, 5)
        assert f["prediction/predictions"].shape[0] == 5
    merged = tmp_path / "merged.h5"
    # the merge holds one shard file open at a time (each open file keeps HDF5 caches: 61 shards at once took
    # ~400 MB in the 1.2 Gbp scale run)
    opened, most = set(), [0]
    init, close = h5py.File.__init__, h5py.File.close

    def counting_init(self, name, *a, **k):
        init(self, name, *a, **k)
        if Path(str(name)) in shards:
            opened.add(id(self))
            most[0] = max(most[0], len(opened))

    def counting_close(self):
        opened.discard(id(self))
        close(self)

    with monkeypatch.context() as m:
        m.setattr(h5py.File, "__init__", counting_init)
        m.setattr(h5py.File, "close", counting_close)
        run_cli("predict-merge", "--out", str(merged), *map(str, shards), "--metrics", str(tmp_path / "mm.json"))
    assert most[0] == 1 and not opened
    ref = predmoter(reference_dir, "pred_data_1_predictions.h5")
    assert_same_file(merged, ref)
    # and the bytes of our unsharded run: the merge writes in its order (what the container test compares)
    whole = tmp_path / "whole.h5"
    run_cli("predict", "--h5", h5, "--model", model, "--out", str(whole), "--batch-size", "4")
    assert merged.read_bytes() == whole.read_bytes()
    with h5py.File(merged) as f:
        assert f["prediction/model_name"].fillvalue == model.encode()
        assert dict(f.attrs) == {}

    # incomplete / duplicated / mixed sets are refused, nothing written
    bad = tmp_path / "bad.h5"
    for args in ([shards[0], shards[1]], [shards[0], shards[1], shards[1]]):
        proc = run_cli("predict-merge", "--out", str(bad), *map(str, args), check=False)
        assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert not bad.exists()
    other = tmp_path / "o2.h5"  # shard 2 claiming another input
    shutil.copy(shards[2], other)
    with h5py.File(other, "a") as f:
        f.attrs["chromaflow_input_fingerprint"] = "0" * 64
    proc = run_cli("predict-merge", "--out", str(bad), str(shards[1]), str(other), str(shards[0]), check=False)
    assert proc.returncode != 0 and "different input" in proc.stderr
    assert not bad.exists()


# --------------------------------------------------------------------------------------------------
# exact except at documented near-ties (float64 forward pass), and the comparison can fail
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("stem", ["pred_data_1", "pred_data_2"])
def test_reference_predictions_tie_rule(reference_dir, tmp_path, stem):
    from chromaflow.predict.compare import compare_arrays, compare_files, near_ties

    model = predmoter(reference_dir, "mini_model.ckpt")
    ours = tmp_path / "ours.h5"
    run_cli("predict", "--h5", predmoter(reference_dir, f"{stem}.h5"), "--model", model, "--out", ours)
    ref = predmoter(reference_dir, f"{stem}_predictions.h5")
    with h5py.File(predmoter(reference_dir, f"{stem}.h5")) as f:
        X = f["data/X"][()]
    torch.set_num_threads(1)
    ties = near_ties(build_model(load_checkpoint(model)), X)
    cmp = compare_files(str(ours), str(ref), ties)
    assert cmp.ok, cmp.summary()
    assert 5 <= len(ties) <= 40  # 15 each for these files at TIE_EPS = 1e-5
    if stem == "pred_data_1":  # the shared list of near-.5 positions (float32, within 1e-5) is covered
        listed = np.loadtxt(predmoter(reference_dir, "extra/pred_data_1_near_ties.tsv"), skiprows=1)
        assert {(int(r), int(p), int(d)) for r, p, d, _, _ in listed} <= ties

    with h5py.File(ours) as f:
        got = f["prediction/predictions"][()]
    with h5py.File(ref) as f:
        want = f["prediction/predictions"][()]
    # corrupt one value in a copy, at a position that is no tie: named, and the comparison fails
    r, p, d = 3, 1000, 1
    assert (r, p, d) not in ties and got[r, p, d] >= 0
    bad = got.copy()
    bad[r, p, d] += 1
    c = compare_arrays(bad, want, ties)
    assert not c.ok and c.unexpected == [(r, p, d, int(got[r, p, d]) + 1, int(want[r, p, d]))]
    assert f"row {r} pos {p} dataset {d}" in c.summary()
    # ±1 at a near-tie is allowed and named; ±2 is not; padding must match exactly
    tr, tp, td = sorted(ties)[0]
    flip = got.copy()
    flip[tr, tp, td] += 1
    c = compare_arrays(flip, want, ties)
    assert c.ok and c.allowed == [(tr, tp, td, int(got[tr, tp, td]) + 1, int(want[tr, tp, td]))]
    flip[tr, tp, td] += 1
    assert not compare_arrays(flip, want, ties).ok
    pad = np.argwhere(want == -1)[0]
    padded = got.copy()
    padded[tuple(pad)] = 0
    assert not compare_arrays(padded, want, ties | {tuple(int(v) for v in pad)}).ok


# --------------------------------------------------------------------------------------------------
# precision deviation and the phases of the process in the metrics
# --------------------------------------------------------------------------------------------------
def test_bf16_deviation_in_metrics_matches_independent_count(reference_dir, tmp_path):
    """The metrics' deviation figures are exactly what running the sampled rows both ways gives."""
    import json

    from chromaflow.predict.executors import bf16_supported

    if not bf16_supported(torch.device("cpu")):
        pytest.skip("this CPU has no bf16 support in oneDNN (the engine would fall back to fp32)")
    model_path = predmoter(reference_dir, "mini_model.ckpt")
    run_cli(
        "predict",
        "--h5",
        predmoter(reference_dir, "pred_data_1.h5"),
        "--model",
        model_path,
        "--out",
        tmp_path / "b.h5",
        "--precision",
        "bf16",
        "--batch-size",
        "2",
        "--precision-check-rows",
        "8",
        "--metrics",
        tmp_path / "m.json",
    )
    got = json.loads((tmp_path / "m.json").read_text())["precision_check"]
    rows = [0, 1, 2, 3, 4, 5, 8, 9]  # rows 0-1 of batches 0, 1, 2, 4 (batch size 2)
    torch.set_num_threads(1)
    model = build_model(load_checkpoint(model_path))
    with h5py.File(predmoter(reference_dir, "pred_data_1.h5")) as f:
        X = torch.from_numpy(f["data/X"][rows].astype(np.float32))
    values = differ = max_abs = 0
    with torch.inference_mode():
        for i in range(len(rows)):  # one row per model call, as the two streams run them
            x = X[i : i + 1]
            a = torch.exp(model(x))
            with torch.autocast("cpu", dtype=torch.bfloat16):
                b = torch.exp(model(x).float())
            keep = (x.amax(2) != 0)[0]
            d = (torch.round(a) - torch.round(b)).abs()[0][keep]
            values += d.numel()
            differ += int((d != 0).sum())
            max_abs = max(max_abs, int(d.max()))
    assert got["rows_sampled"] == 8 and got["values"] == values
    assert got["differ"] == differ and got["max_abs"] == max_abs
    assert got["fraction"] == pytest.approx(differ / values)
    assert 0 < differ < values  # bf16 is not exact on this model (0.2 % of values, FORMATS §3 ties and more)


def test_predict_metrics_give_the_phases_of_the_process(tmp_path, reference_dir):
    """phases_s: where a process's seconds go (start-up before the stage, imports, model load, batch size,
    set-up, loop and drain, finish), each >= 0 and together no more than the process lived."""
    import json
    import time

    ref = reference_dir / "predmoter"
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "chromaflow",
            "predict",
            "--h5",
            ref / "pred_data_1.h5",
            "--model",
            ref / "mini_model.ckpt",
            "--out",
            tmp_path / "p.h5",
            "--metrics",
            tmp_path / "m.json",
        ],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr
    m = json.loads((tmp_path / "m.json").read_text())
    ph = m["phases_s"]
    assert set(ph) == {"before_run", "checks_imports", "model_load", "batch_size", "setup", "loop_and_drain", "finish"}
    assert all(v >= 0 for v in ph.values()) and sum(ph.values()) <= wall
    assert ph["loop_and_drain"] >= m["loop_s"] and m["drain_s"] >= 0 and ph["before_run"] > 0
