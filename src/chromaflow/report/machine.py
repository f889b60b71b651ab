"""The machine record: the one description of this machine that the benchmark report (``benchmark.json``), the
benchmark harness (``benchmarks/run``: every results file and case record) and the per-stage benchmark scripts
write. Reads ``/proc`` and ``/etc/os-release`` where they exist (Linux) and falls back on :mod:`platform`.
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

from .. import __version__

#: the CPU flags that change library kernels (numpy, torch/oneDNN, zlib-ng/isal, the onehot kernel)
FLAGS_OF_INTEREST = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_bf16",
    "avx512_vnni",
    "amx_bf16",
    "sha_ni",
)

#: environment variables that change which kernels the libraries pick
KERNEL_ENV = ("OPENBLAS_CORETYPE", "ATEN_CPU_CAPABILITY", "NPY_DISABLE_CPU_FEATURES", "OMP_NUM_THREADS")


def _lines(path: str) -> list[str]:
    try:
        return Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return []


def _first(lines: list[str], prefix: str, sep: str = ":") -> str | None:
    """The value after ``sep`` of the first line starting with ``prefix``, stripped; None if there is none."""
    for line in lines:
        if line.startswith(prefix):
            return line.split(sep, 1)[1].strip()
    return None


def memory_bytes() -> int | None:
    """Total memory of this machine in bytes (/proc/meminfo, else psutil); None when unknown."""
    total = _first(_lines("/proc/meminfo"), "MemTotal:")
    if total:
        return int(total.split()[0]) * 1024
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception:  # noqa: BLE001 - no psutil, no /proc: unknown
        return None


def usable_cpus() -> int | None:
    """CPUs this process may run on (its affinity mask; the CPU count where there is none), None when unknown."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count()


def gpu_info() -> list[dict]:
    """The NVIDIA GPUs nvidia-smi lists (name, memory, driver); empty without nvidia-smi."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        res = subprocess.run(
            [smi, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in res.stdout.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 2:
            gpus.append({"name": cells[0], "memory": cells[1], "driver": cells[2] if len(cells) > 2 else None})
    return gpus


def machine_info() -> dict:
    """Host, CPU model, the SIMD flags that change library kernels, logical and usable CPUs, memory, OS, kernel,
    Python, the kernel-choosing environment variables, chromaflow's version and the GPUs."""
    cpuinfo = _lines("/proc/cpuinfo")
    flags = set((_first(cpuinfo, "flags") or "").split())
    info: dict[str, Any] = {
        "host": socket.gethostname(),
        "cpu_model": _first(cpuinfo, "model name") or platform.processor() or platform.machine() or "unknown",
        "cpu_flags": sorted(f for f in FLAGS_OF_INTEREST if f in flags),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": usable_cpus(),
        "memory_bytes": memory_bytes(),
        "os": (_first(_lines("/etc/os-release"), "PRETTY_NAME=", "=") or "").strip('"') or platform.platform(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "env": {k: os.environ[k] for k in KERNEL_ENV if k in os.environ},
        "chromaflow": __version__,
        "gpus": gpu_info(),
    }
    return info
