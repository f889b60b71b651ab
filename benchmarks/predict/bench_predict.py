#!/usr/bin/env python3
"""Benchmark ``chromaflow predict`` against a naive baseline, end to end (process start-up included).

Comparisons with real Predmoter, side by side, are made by ``benchmarks/run --stages predict``.

Model: the full-size, release-like architecture (bi-hybrid, 3 cnn layers 64/128/256, kernel 9, step 2, up 2,
2 BiLSTM layers hidden 128, dropout 0.3, bnorm, 2 datasets) with seeded random weights (make-test-model).
Input: a synthetic Helixer-layout genome h5 with N subsequences of L = 21384 (random one-hot).

Runs, each as a fresh process, interleaved (naive, chromaflow fp32, chromaflow bf16) for --repeats rounds:
* naive: load all of data/X into RAM, predict batch by batch in one thread, write int64 with h5py gzip 9
  (like Predmoter, without Lightning);
* chromaflow predict --precision fp32 (exact) and --precision bf16.
It records wall, CPU seconds (user+sys of the child), load average and checks fp32 == naive exactly, and the
bf16 deviation. Also the bf16 deviation of mini_model on pred_data_1 (against Predmoter's file).

usage: python benchmarks/predict/bench_predict.py [--rows 24] [--repeats 2] [--batch-size 120] [--workdir DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
REF = (ROOT / ".." / "shared" / "reference" / "predmoter").resolve()
L = 21384

NAIVE = r'''
import sys, time, h5py, numpy as np, torch
from chromaflow.predict.checkpoint import load_checkpoint, build_model
h5, ckpt, out, bs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
torch.set_num_threads(int(sys.argv[5]))
model = build_model(load_checkpoint(ckpt))
with h5py.File(h5, "r") as f:
    X = f["data/X"][()]                      # whole genome in RAM (float16)
    seqids, se, sp0 = f["data/seqids"][()], f["data/start_ends"][()], f["data/species"][0]
n, length = X.shape[:2]
with h5py.File(out, "w") as o:
    o.create_dataset("data/species", shape=(n,), dtype="S50", chunks=(1,), maxshape=(None,), fillvalue=sp0)
    o.create_dataset("data/seqids", data=seqids.astype("S50"), chunks=(1,), maxshape=(None,))
    o.create_dataset("data/start_ends", data=se.astype("int64"), chunks=(1, 2), maxshape=(None, 2))
    p = o.create_dataset("prediction/predictions", shape=(n, length, 2), dtype="int64", chunks=(1, length, 1),
                         maxshape=(None, length, None), compression="gzip", compression_opts=9, fillvalue=-1)
    with torch.inference_mode():
        for a in range(0, n, bs):
            x = torch.from_numpy(X[a:a + bs].astype(np.float32))
            y = np.round(torch.exp(model(x)).numpy()).astype(np.int64)
            y[x.numpy().max(axis=2) == 0] = -1
            p[a:a + bs] = y                  # h5py gzip 9, single thread
'''


def make_inputs(work: Path, rows: int) -> tuple[Path, Path]:
    sys.path.insert(0, str(ROOT / "src"))
    from chromaflow.predict.checkpoint import write_test_checkpoint
    from chromaflow.predict.model import ModelConfig

    ckpt = work / "fullsize.ckpt"
    if not ckpt.exists():
        cfg = ModelConfig(model_type="bi-hybrid", cnn_layers=3, filter_size=64, kernel_size=9, step=2, up=2,
                          dilation=1, lstm_layers=2, hidden_size=128, bnorm=True, dropout=0.3,
                          datasets=("atacseq", "h3k4me3"))
        write_test_checkpoint(ckpt, cfg, seed=0)
    h5 = work / f"genome_{rows}.h5"
    if not h5.exists():
        rng = np.random.default_rng(0)
        with h5py.File(h5, "w") as f:
            X = f.create_dataset("data/X", shape=(rows, L, 4), dtype="f2", chunks=(1, L, 4), maxshape=(None, L, 4),
                                 compression="gzip", compression_opts=4, shuffle=True)
            for r in range(rows):
                x = np.zeros((L, 4), np.float16)
                x[np.arange(L), rng.integers(0, 4, L)] = 1
                if r % 2 == 1 and r == rows - 1:
                    x[L // 3:] = 0  # one padded tail
                X[r] = x
            f.create_dataset("data/seqids", data=np.array([b"chr1"] * rows, "S50"), chunks=(1,), maxshape=(None,))
            f.create_dataset("data/species", data=np.array([b"Synthetica"] * rows, "S25"), chunks=(1,), maxshape=(None,))
            f.create_dataset("data/start_ends", data=np.array([[i * L, (i + 1) * L] for i in range(rows)], np.int64),
                             chunks=(1, 2), maxshape=(None, 2))
    return h5, ckpt


def timed(cmd: list[str]) -> dict:
    load0 = os.getloadavg()[0]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr}")
    return {"wall_s": round(wall, 2), "cpu_s": round((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), 2),
            "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2)}


def deviation(a: Path, b: Path) -> dict:
    with h5py.File(a) as fa, h5py.File(b) as fb:
        pa, pb = fa["prediction/predictions"], fb["prediction/predictions"]
        diff = n = maxd = 0
        for r in range(pa.shape[0]):
            x, y = pa[r], pb[r]
            d = np.abs(x - y)
            diff += int((d != 0).sum())
            n += d.size
            maxd = max(maxd, int(d.max()))
    return {"values": n, "differ": diff, "fraction": diff / n, "max_abs": maxd}


def raw_bf16_deviation(h5: Path, ckpt: Path, rows: int) -> dict:
    """Float-level bf16-vs-fp32 deviation of exp(model(x)) on the first ``rows`` subsequences."""
    import torch

    from chromaflow.predict.checkpoint import build_model, load_checkpoint

    torch.set_num_threads(1)
    model = build_model(load_checkpoint(ckpt))
    with h5py.File(h5) as f:
        x = torch.from_numpy(f["data/X"][:rows].astype(np.float32))
    with torch.inference_mode():
        a = torch.exp(model(x))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            b = torch.exp(model(x).float())
    d = (a - b).abs()
    return {"subsequences": rows, "fp32_exp_min": float(a.min()), "fp32_exp_max": float(a.max()),
            "max_abs_exp": float(d.max()), "mean_abs_exp": float(d.mean()),
            "rounded_differ_fraction": float((torch.round(a) != torch.round(b)).float().mean())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=24, help="subsequences of 21384 bp (default 24)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=120)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--json", default=None, help="write results here")
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench_predict_"))
    work.mkdir(parents=True, exist_ok=True)
    h5, ckpt = make_inputs(work, args.rows)
    py = sys.executable
    runs: dict[str, list] = {"naive": [], "fp32": [], "fp32_streams1": [], "bf16": []}
    for rep in range(args.repeats):
        for name in runs:
            out = work / f"{name}_{rep}.h5"
            out.unlink(missing_ok=True)
            if name == "naive":
                cmd = [py, "-c", NAIVE, str(h5), str(ckpt), str(out), str(args.batch_size), str(args.threads)]
            else:
                cmd = [py, "-m", "chromaflow", "predict", "--h5", str(h5), "--model", str(ckpt), "--out", str(out),
                       "--batch-size", str(args.batch_size), "--threads", str(args.threads),
                       "--precision", name.split("_")[0], "--device", "cpu", "--metrics", str(work / f"{name}_{rep}.json")]
                if name == "fp32_streams1":
                    cmd += ["--streams", "1"]
            res = timed(cmd)
            if name != "naive":
                m = json.loads((work / f"{name}_{rep}.json").read_text())
                res.update(stage_wall_s=round(m["wall_s"], 2), data_wait_fraction=round(m["data_wait_fraction"], 4),
                           peak_rss_mb=round(m["peak_rss_bytes"] / 2**20))
            res["kbp_per_s"] = round(args.rows * L / res["wall_s"] / 1000, 1)
            runs[name].append(res)
            print(name, rep, res, flush=True)
    result = {"rows": args.rows, "bp": args.rows * L, "batch_size": args.batch_size, "threads": args.threads,
              "nproc": os.cpu_count(), "runs": runs}
    best = {k: min(r["wall_s"] for r in v) for k, v in runs.items()}
    best_cpu = {k: min(r["cpu_s"] for r in v) for k, v in runs.items()}
    result["speedup_wall_fp32_vs_naive"] = round(best["naive"] / best["fp32"], 3)
    result["speedup_cpu_fp32_vs_naive"] = round(best_cpu["naive"] / best_cpu["fp32"], 3)
    result["speedup_wall_bf16_vs_fp32"] = round(best["fp32"] / best["bf16"], 3)
    result["fp32_equals_naive"] = deviation(work / "fp32_0.h5", work / "naive_0.h5")["differ"] == 0
    result["fp32_streams1_equals_naive"] = deviation(work / "fp32_streams1_0.h5", work / "naive_0.h5")["differ"] == 0
    result["bf16_vs_fp32_fullsize"] = deviation(work / "bf16_0.h5", work / "fp32_0.h5")
    result["bf16_vs_fp32_fullsize_raw"] = raw_bf16_deviation(h5, ckpt, rows=min(4, args.rows))
    if (REF / "pred_data_1.h5").exists():
        out = work / "mini_bf16.h5"
        out.unlink(missing_ok=True)
        subprocess.run([py, "-m", "chromaflow", "predict", "--h5", str(REF / "pred_data_1.h5"), "--model",
                        str(REF / "mini_model.ckpt"), "--out", str(out), "--precision", "bf16", "--device", "cpu"],
                       check=True)
        result["bf16_vs_reference_mini_pred_data_1"] = deviation(out, REF / "pred_data_1_predictions.h5")
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
