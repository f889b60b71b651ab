"""The fast engine: a ~200-line C kernel (``_kernel.c``) compiled at run time with the system C compiler
into a cache directory and loaded with ctypes.

Why C: GENIE3 needs ~100k fully grown trees per 100-gene network; scikit-learn spends ~2.5 ms per tree,
mostly in per-tree Python/joblib overhead, and a numpy level-by-level formulation still needs dozens of
array passes per tree level. The kernel grows one target's trees in a single call (the GIL is released
while it runs, so targets run in parallel threads) and keeps no trees, only importances.

If no compiler is found or compilation fails, :func:`load_kernel` raises :class:`KernelUnavailable`; the
CLI then falls back to the scikit-learn engine with a warning.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

SOURCE = Path(__file__).with_name("_kernel.c")
CFLAGS = ["-O3", "-fPIC", "-shared", "-std=c99", "-fno-math-errno"]
_lib = None


class KernelUnavailable(RuntimeError):
    pass


def _cache_dir() -> Path:
    root = os.environ.get("CHROMAFLOW_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "chromaflow")
    return Path(root) / "genie3-kernel"


def _compiler() -> str | None:
    for cand in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cand and shutil.which(cand):
            return shutil.which(cand)
    return None


def library_path() -> Path:
    src = SOURCE.read_bytes()
    tag = hashlib.sha256(src + " ".join(CFLAGS).encode() + platform.machine().encode()).hexdigest()[:16]
    return _cache_dir() / f"libgenie3k-{tag}.so"


def load_kernel():
    """Compile (once, cached) and load the kernel; raise KernelUnavailable if that is impossible."""
    global _lib
    if _lib is not None:
        return _lib
    if os.environ.get("CHROMAFLOW_GENIE3_NO_CC") == "1":  # test hook: behave as if there were no compiler
        raise KernelUnavailable("disabled by CHROMAFLOW_GENIE3_NO_CC=1")
    so = library_path()
    if not so.exists():
        cc = _compiler()
        if cc is None:
            raise KernelUnavailable("no C compiler (cc/gcc/clang) on PATH")
        try:
            so.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".libgenie3k.", suffix=".so", dir=so.parent)
            os.close(fd)
            proc = subprocess.run([cc, *CFLAGS, "-o", tmp, str(SOURCE), "-lm"], capture_output=True, text=True)
            if proc.returncode != 0:
                os.unlink(tmp)
                first = (proc.stderr.strip().splitlines() or ["?"])[0]
                raise KernelUnavailable(f"compiling {SOURCE.name} with {cc} failed: {first}")
            os.replace(tmp, so)  # atomic: concurrent tasks may race, each rename is complete
        except OSError as exc:
            raise KernelUnavailable(f"cannot build the kernel in {so.parent}: {exc}") from None
    try:
        lib = ctypes.CDLL(str(so))
    except OSError as exc:
        raise KernelUnavailable(f"cannot load {so}: {exc}") from None
    lib.genie3_target.restype = ctypes.c_int
    lib.genie3_target.argtypes = [
        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
        ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_void_p,
    ]
    _lib = lib
    return lib


def sort_orders(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per gene: stable argsort of its samples (order[g, q] = sample at position q) and the inverse
    (pos[g, s] = position of sample s), both uint16 gene-major; values is genes x samples float32.
    Built in blocks of genes so the temporary int64 argsort stays small."""
    G, n = values.shape
    if n > 65535:
        raise KernelUnavailable(f"{n} samples: the fast kernel supports at most 65535")
    order = np.empty((G, n), dtype=np.uint16)
    pos = np.empty((G, n), dtype=np.uint16)
    ar = np.arange(n, dtype=np.uint16)
    step = max(1, (1 << 22) // max(n, 1))
    for a in range(0, G, step):
        o = np.argsort(values[a:a + step], axis=1, kind="stable")
        order[a:a + step] = o
        np.put_along_axis(pos[a:a + step], o, np.broadcast_to(ar, o.shape), axis=1)
    return order, pos


def target_importances(lib, values, order, pos, inputs: np.ndarray, y: np.ndarray, n_trees: int, K: int,
                       method: str, seed64: int) -> np.ndarray:
    n = y.shape[0]
    inputs = np.ascontiguousarray(inputs, dtype=np.int32)
    y = np.ascontiguousarray(y, dtype=np.float64)
    out = np.zeros(inputs.shape[0], dtype=np.float64)
    rc = lib.genie3_target(
        values.ctypes.data,
        order.ctypes.data if order is not None else None,
        pos.ctypes.data if pos is not None else None,
        n, inputs.ctypes.data, int(inputs.shape[0]), y.ctypes.data, int(n_trees), int(K),
        0 if method == "RF" else 1, ctypes.c_uint64(seed64), out.ctypes.data)
    if rc != 0:
        raise MemoryError(f"genie3 kernel failed (code {rc})")
    return out
