"""benchmarks/gpu/ on a machine without a GPU: ``run`` refuses without CUDA (unless ``--quick``), the GPU stage's
output checks work on the CPU, its page (``benchmarks.stages.gpu.results_page``) judges the targets from the
measured numbers, and ``purelib_wheel.py`` retags pure wheels only."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import h5py
import pytest
import torch

from benchmarks.harness import gpu as tools
from benchmarks.stages import gpu as stage
from helpers.cli import run_in_process as run_cli


def test_gpu_benchmark_refuses_without_cuda_and_its_checks_work(repo_root, reference_dir, tmp_path):
    if not torch.cuda.is_available():
        proc = subprocess.run(
            [sys.executable, str(repo_root / "benchmarks" / "gpu" / "run"), "--workdir", str(tmp_path / "w")],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "no CUDA device" in proc.stderr and not (tmp_path / "w").exists()
    fa = reference_dir / "predmoter" / "pred_data.fa"
    ckpt = reference_dir / "predmoter" / "mini_model.ckpt"
    outs = {}
    for prec in ("fp32", "bf16"):
        out = tmp_path / f"{prec}.h5"
        run_cli(
            "predict",
            *("--fasta", fa, "--species", "S", "--model", ckpt, "--out", out),
            *("--precision", prec, "--metrics", tmp_path / f"{prec}.json"),
        )
        outs[prec] = out
    chk = tools.check_rows_on_cpu(fa, ckpt, outs["fp32"], [0, 5, 15], threads=1)
    assert chk["ok"] and chk["values"] == 3 * 21384 * 2 and chk["rows"] == [0, 5, 15]
    assert tools.spaced_rows(outs["fp32"], 3) == [0, 8, 15]  # first and last row of the 16 included
    bad = tmp_path / "bad.h5"  # the check can fail: one value changed in row 5
    shutil.copy(outs["fp32"], bad)
    with h5py.File(bad, "a") as f:
        f["prediction/predictions"][5, 100, 0] += 1
    chk = tools.check_rows_on_cpu(fa, ckpt, bad, [0, 5, 15], threads=1)
    assert not chk["ok"] and chk["unexpected"][0][:3] == [5, 100, 0]
    dev = tools.deviation(outs["bf16"], outs["fp32"])
    from chromaflow.predict.executors import bf16_supported

    if bf16_supported(torch.device("cpu")):
        assert dev["values"] == 16 * 21384 * 2 and 0 < dev["differ"] < dev["values"] // 50
    else:  # a CPU without bf16 in oneDNN: the engine falls back to fp32, so the deviation is none
        assert dev["values"] == 16 * 21384 * 2 and dev["differ"] == 0
    # every (row, dataset) chunk of the 16 rows sampled once; the changed value is in one of them
    assert tools.chunk_bytes_equal(outs["fp32"], bad) == {"chunks": 32, "identical": 31}
    runs = [
        {
            "contender": p,
            "repeat": 0,
            "exit": 0,
            "wall_s": 1.0,
            "cpu_s": 1.0,
            **stage.predict_fields(json.loads((tmp_path / f"{p}.json").read_text()), p),
        }
        for p in ("fp32", "bf16")
    ]
    case = {
        "stage": "gpu",
        "case": "predict_0.154Mbp",
        "params": {"mbp": 0.154, "records": 2, "deflate": "auto", "model_preset": "tiny", "device": _cpu_device()},
        "runs": runs,
        "agreement": {"ok": False, "fp32_vs_cpu": chk, "bf16_vs_fp32": dev},
    }
    res_dir = tmp_path / "gpu" / "results"
    res_dir.mkdir(parents=True)
    (res_dir / "x.json").write_text(json.dumps(_results([case])))
    md = stage.results_page(res_dir)
    assert "| fp32 | 1.0 |" in md and "**FAILED**" in md and f"{dev['differ']} of {dev['values']} differ" in md
    assert "## none (test) — 2000-01-01 00:00 UTC, host test" in md


def _cpu_device() -> dict:
    return {"gpu": "none (test)", "torch": torch.__version__, "cuda": None, "cudnn": None}


def _results(cases: list[dict]) -> dict:
    """A results file of benchmarks/run holding ``cases``."""
    return {
        "schema": "chromaflow-bench-run/1",
        "command": "benchmarks/run --stages gpu (CPU stand-in)",
        "first_started": "2000-01-01T00:00:00Z",
        "machine": {"host": "test", "cpu_model": "test", "usable_cpus": 2},
        "cases": cases,
    }


def test_gpu_results_page_judges_targets_from_the_measured_numbers(tmp_path):
    """The generated GPU page: end-to-end targets per run with the largest parts of the wall, the Predmoter
    ratios, and the training targets (ratio, loss-curve difference, data wait, utilisation) each judged on its
    own numbers (a renderer that mixed up runs or thresholds fails one of these). The run is a results file of the
    former benchmarks/gpu/run, read through the stage's converter."""
    phases = {
        "before_run": 0.5,
        "checks_imports": 4.0,
        "model_load": 0.1,
        "batch_size": 0.2,
        "setup": 0.2,
        "loop_and_drain": 3.0,
        "finish": 0.5,
    }

    def pred(prec, run, wall, loop_s, util):
        return {
            "precision": prec,
            "run": run,
            "wall_s": wall,
            "cpu_s": 1.0,
            "bp": 4e8,
            "bp_per_s_end_to_end": 4e8 / wall,
            "bp_per_s_loop": 4e8 / loop_s,
            "loop_s": loop_s,
            "batch_size": 64,
            "phases_s": phases,
            "gpu_devices": [{"utilization_mean_pct": util}],
        }

    def ours(epoch_s, loss, wait, util):
        return {
            "epoch_s": epoch_s,
            "wall_s": 30.0,
            "data_wait_fraction": wait,
            "curve": [{"avg_train_loss": loss, "data_wait_fraction": wait, "gpu_util_train_pct": util}],
        }

    result = {
        "command": "x",
        "started": "2000-01-01 00:00",
        "mbp": 200,
        "records": 8,
        "deflate": "auto",
        "machine": {"gpu": "G", "host": "h", "torch": "t", "cuda": "c", "cudnn": 1, "cpu": "c", "cores": 16},
        "precisions": [pred("fp32", "cached", 9.0, 2.5, 95.0), pred("bf16", "cached", 2.0, 1.0, 89.0)],
        "peer_predict": {
            "mbp": 25,
            "batch_size": 64,
            "reps": 1,
            "fasta2h5_wall_s": 1.0,
            "checks": {},
            "rows": [
                {"tool": "predmoter", "precision": "fp32", "wall_s": 40.0, "rep": 0, "bp_rows": 5e7},
                {"tool": "chromaflow", "precision": "fp32", "wall_s": 10.0, "rep": 0, "bp_rows": 5e7},
            ],
        },
        "train": {
            "chunks": {"train": 10, "val": 2},
            "length": 21384,
            "model": "default",
            "arch_args": [],
            "batch_size": 120,
            "epochs": 1,
            "runs": {
                "predmoter": {"epoch_s": 10.0, "wall_s": 20.0, "curve": [{"avg_train_loss": 1.0}]},
                "ours": ours(4.0, 1.01, 0.04, 90.0),
                "ours_ram": ours(6.0, 1.0, 0.06, 80.0),
            },
        },
    }
    res = tmp_path / "results"
    res.mkdir()
    (res / "r.json").write_text(json.dumps(result))
    md = stage.results_page(res)
    assert (
        "| fp32 ≥ 40 Mbp/s of rows end to end | cached | 44.4 Mbp/s | ✔ | checks + torch import 4.0 s, loop 2.5 s" in md
    )
    assert "| bf16 ≥ 180 Mbp/s of rows end to end | cached | 200.0 Mbp/s | ✔ |" in md
    assert "| fp32: mean GPU utilisation ≥ 90 % over the prediction | cached | 95 % | ✔ |" in md
    assert "| bf16: mean GPU utilisation ≥ 90 % over the prediction | cached | 89 % | ✘ |" in md
    assert "| chromaflow | fp32 | 10.0 | 5e+06 |" in md and "| 4.00× |" in md
    assert "| ≥ 2× Predmoter per epoch | 2.50× ✔ | 1.67× ✘ |" in md
    assert "| loss curve vs Predmoter: largest relative difference of avg_train_loss | 1.00% | 0.00% |" in md
    assert "| data wait < 5% (last epoch) | 4.0% ✔ | 6.0% ✘ |" in md
    assert "| GPU utilisation ≥ 90 % while training (last epoch) | 90 % ✔ | 80 % ✘ |" in md


def test_purelib_wheel_retags_pure_wheels_and_refuses_compiled_ones(repo_root, tmp_path):
    import importlib.util
    import zipfile

    spec = importlib.util.spec_from_file_location(
        "purelib_wheel", repo_root / "benchmarks" / "gpu" / "purelib_wheel.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    src = tmp_path / "pkg-1.0-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(src, "w") as z:
        z.writestr("pkg/__init__.py", "X = 1\n")
        z.writestr(
            "pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n"
        )
        z.writestr("pkg-1.0.dist-info/RECORD", "pkg/__init__.py,sha256=bad,1\n")
    (tmp_path / "out").mkdir()
    out = mod.retag(src, tmp_path / "out")
    assert out.name == "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(out) as z:
        wheel = z.read("pkg-1.0.dist-info/WHEEL").decode()
        record = z.read("pkg-1.0.dist-info/RECORD").decode()
    assert "Tag: py3-none-any" in wheel and "Root-Is-Purelib: true" in wheel and "cp311" not in wheel
    assert "pkg/__init__.py,sha256=Crrh4K5yghbuRJk8Wjp1X4scOH2Uf8TE9yyrDkqEIUs,6" in record  # sha256 of "X = 1\n"
    compiled = tmp_path / "c-1.0-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(compiled, "w") as z:
        z.writestr("c/_x.so", b"\x7fELF")
        z.writestr("c-1.0.dist-info/WHEEL", "Tag: cp311-cp311-linux_x86_64\n")
    with pytest.raises(SystemExit, match="compiled code"):
        mod.retag(compiled, tmp_path / "out")
