"""Same predictions under other CPU kernels of the same libraries (issue 14): torch's ATen dispatch level, oneDNN's
ISA cap (convolutions and the LSTM run in oneDNN), OpenBLAS core types and numpy's SIMD features. Each run must
equal Predmoter's reference file except ±1 at the documented near-ties (float64 forward pass, TIE_EPS), and the
runs must agree with each other the same way. Every variant runs ``chromaflow predict`` in a subprocess with the
variable set, so the library reads it at start-up."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import h5py
import numpy as np
import pytest
import torch


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _numpy_disable() -> str | None:
    """numpy's dispatchable SIMD features this CPU has (disabling them selects numpy's baseline loops)."""
    m = np._core._multiarray_umath
    feats = [f for f in m.__cpu_dispatch__ if m.__cpu_features__.get(f)]
    return " ".join(feats) or None


def variants() -> list[tuple[str, dict]]:
    flags = _cpu_flags()
    out = [
        ("baseline", {}),
        ("ATEN_CPU_CAPABILITY=default", {"ATEN_CPU_CAPABILITY": "default"}),
        ("ONEDNN_MAX_CPU_ISA=SSE41", {"ONEDNN_MAX_CPU_ISA": "SSE41"}),
        ("OPENBLAS_CORETYPE=Haswell", {"OPENBLAS_CORETYPE": "Haswell"}),
        ("OPENBLAS_CORETYPE=Prescott", {"OPENBLAS_CORETYPE": "Prescott"}),
    ]
    if "avx2" in flags:
        out += [
            ("ATEN_CPU_CAPABILITY=avx2", {"ATEN_CPU_CAPABILITY": "avx2"}),
            ("ONEDNN_MAX_CPU_ISA=AVX2", {"ONEDNN_MAX_CPU_ISA": "AVX2"}),
        ]
    if "avx512f" in flags:
        out += [("ATEN_CPU_CAPABILITY=avx512", {"ATEN_CPU_CAPABILITY": "avx512"})]
    dis = _numpy_disable()
    if dis:
        out.append((f"NPY_DISABLE_CPU_FEATURES={dis}", {"NPY_DISABLE_CPU_FEATURES": dis}))
    return out


@pytest.mark.parametrize("stem", ["pred_data_1", "pred_data_2"])
def test_predictions_identical_or_tie_only_across_kernels(reference_dir, tmp_path, stem):
    from chromaflow.model.checkpoint import build_model, load_checkpoint
    from chromaflow.predict.compare import compare_arrays, near_ties

    ref_dir = reference_dir / "predmoter"
    model = ref_dir / "mini_model.ckpt"
    h5 = ref_dir / f"{stem}.h5"
    runs = variants() if stem == "pred_data_1" else variants()[:3]  # the second file: fewer, to bound the time

    def go(item):
        name, env = item
        out = tmp_path / f"{abs(hash(name))}.h5"
        proc = subprocess.run(
            [sys.executable, "-m", "chromaflow", "predict", "--h5", str(h5), "--model", str(model), "--out", str(out)],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, (name, proc.stderr)
        with h5py.File(out) as f:
            return name, f["prediction/predictions"][()]

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(pool.map(go, runs))
    with h5py.File(h5) as f:
        X = f["data/X"][()]
    with h5py.File(ref_dir / f"{stem}_predictions.h5") as f:
        ref = f["prediction/predictions"][()]
    torch.set_num_threads(1)
    ties = near_ties(build_model(load_checkpoint(model)), X)
    base = results["baseline"]
    for name, got in results.items():
        c = compare_arrays(got, ref, ties)
        assert c.ok, (name, "vs reference", c.summary())
        c = compare_arrays(got, base, ties)
        assert c.ok, (name, "vs baseline", c.summary())
