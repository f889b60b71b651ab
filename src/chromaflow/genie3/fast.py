"""The fast engine: a C kernel (``_kernel.c``) compiled at run time with the system C compiler into a cache
directory and loaded with ctypes.

Why C: GENIE3 grows ~100k fully grown trees per 100-gene network and p x 1000 trees for p genes;
scikit-learn spends ~2.5 ms per tree, mostly per-tree Python/joblib overhead plus a comparison sort per node
and feature. The kernel grows all trees of many targets in one call on its own threads (the GIL is released
while it runs), keeps no trees, only importances, and finds splits without sorting (see the header of
``_kernel.c``).

If no compiler is found or compilation fails, :func:`load_kernel` raises :class:`KernelUnavailable`; ``genie3``
(:mod:`chromaflow.genie3.network`) then falls back to the scikit-learn engine with a warning.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import cast
from pathlib import Path

import numpy as np

from chromaflow.native import build as cbuild

SOURCE = Path(__file__).with_name("_kernel.c")
#: No -march/-ffast-math: the same bytes on every x86-64 CPU. -ffp-contract=off: never fuse a*b+c into an
#: FMA (that changes results and would depend on the compiler's target).
CFLAGS = ["-O3", "-fPIC", "-shared", "-std=c99", "-fno-math-errno", "-ffp-contract=off", "-pthread"]
FEATURE_THRESHOLD = np.float32(1e-7)  # scikit-learn's: values closer than this are never separated
_lib = None


class KernelUnavailable(RuntimeError):
    """The random-forest kernel cannot be used (no compiler, a failed build, too many samples): ``genie3`` falls
    back to the scikit-learn engine."""

    pass


def library_path(extra_flags: tuple[str, ...] = ()) -> Path:
    """Path of the cached kernel library for this source, flags (CFLAGS and ``extra_flags``) and machine; it may not be
    built yet."""
    return cbuild.library_path(SOURCE, [*CFLAGS, *extra_flags], "genie3-kernel", "libgenie3k")


def build(extra_flags: tuple[str, ...] = ()) -> Path:
    """Compile the kernel (cached by source, flags and machine) and return the library path."""
    try:
        return cbuild.build(SOURCE, [*CFLAGS, *extra_flags], "genie3-kernel", "libgenie3k", libs=("-lm",))
    except cbuild.BuildError as exc:
        raise KernelUnavailable(str(exc)) from None


def _load(so: Path):
    try:
        lib = ctypes.CDLL(str(so))
    except OSError as exc:
        raise KernelUnavailable(f"cannot load {so}: {exc}") from None
    lib.genie3_run.restype = ctypes.c_int
    lib.genie3_run.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,  # values, pos, lims, slot
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_int,  # n, regs, R
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.c_void_p,  # targets, T, seeds
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,  # trees, K_in, K_out, method, tree_norm
        ctypes.c_int,  # threads
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.c_void_p,  # out, ldo, status
        ctypes.c_void_p,
        ctypes.c_int64,  # prior weights, ldw
        ctypes.c_void_p,
        ctypes.c_int,  # out-of-bag errors (or NULL), bag
    ]
    lib.genie3_kernel_version.restype = ctypes.c_int
    lib.genie3_check_stats.restype = ctypes.c_int
    lib.genie3_check_stats.argtypes = [ctypes.c_void_p]
    return lib


def load_kernel(extra_flags: tuple[str, ...] = ()):
    """Compile (once, cached) and load the kernel; raise KernelUnavailable if that is impossible.

    ``extra_flags`` (tests only) builds a variant, e.g. ``("-DGENIE3_NO_SIMD",)``; it is not cached in
    the module."""
    global _lib
    if os.environ.get("CHROMAFLOW_GENIE3_NO_CC") == "1":  # test hook: behave as if there were no compiler
        raise KernelUnavailable("disabled by CHROMAFLOW_GENIE3_NO_CC=1")
    if extra_flags:
        return _load(build(extra_flags))
    if _lib is None:
        _lib = _load(build())
    return _lib


@dataclass
class Tables:
    """Split-search tables of the random-forest kernel over the regulators (row r = regulator r).

    pos[r, s]: rank of sample s in regulator r's stable order (uint16). slot[r]: -1 when no two values of
    the regulator are within FEATURE_THRESHOLD of each other, else a row of lims: lims[slot[r], s] = the
    last rank whose value is <= value(s) + FEATURE_THRESHOLD (float32 arithmetic, as scikit-learn)."""

    pos: np.ndarray
    lims: np.ndarray
    slot: np.ndarray

    @property
    def nbytes(self) -> int:
        """Bytes of the three tables together."""
        return self.pos.nbytes + self.lims.nbytes + self.slot.nbytes


def build_tables(values: np.ndarray, rows: np.ndarray) -> Tables:
    """Tables for ``values[rows]`` (genes x samples float32), built in blocks of rows so that the int64
    argsort temporaries stay small. Memory: 2 bytes per cell, plus 2 bytes per cell of rows with near-ties."""
    n = values.shape[1]
    if n > 65535:
        raise KernelUnavailable(f"{n} samples: the fast kernel supports at most 65535")
    R = len(rows)
    pos = np.empty((R, n), dtype=np.uint16)
    slot = np.full(R, -1, dtype=np.int32)
    lim_rows: list[np.ndarray] = []
    ar = np.arange(n, dtype=np.uint16)
    step = max(1, (1 << 22) // max(n, 1))
    for a in range(0, R, step):
        block = values[rows[a : a + step]]
        order = np.argsort(block, axis=1, kind="stable")
        np.put_along_axis(pos[a : a + step], order, np.broadcast_to(ar, order.shape), axis=1)
        sv = np.take_along_axis(block, order, axis=1)
        thr = sv + FEATURE_THRESHOLD  # float32 + float32 -> float32, as the kernel and scikit-learn
        near = (sv[:, 1:] <= thr[:, :-1]).any(axis=1)
        for i in np.flatnonzero(near):
            lim_by_rank = np.searchsorted(sv[i], thr[i], side="right").astype(np.int64) - 1
            slot[a + i] = len(lim_rows)
            lim_rows.append(lim_by_rank[pos[a + i]].astype(np.uint16))
    lims = np.vstack(lim_rows) if lim_rows else np.zeros((0, n), dtype=np.uint16)
    return Tables(pos=pos, lims=np.ascontiguousarray(lims), slot=slot)


def _ptr(a: np.ndarray | None):
    return None if a is None or a.size == 0 else a.ctypes.data


def run(
    lib,
    values: np.ndarray,
    tables: Tables | None,
    regs: np.ndarray,
    targets: np.ndarray,
    seeds: np.ndarray,
    n_trees: int,
    k_in: int,
    k_out: int,
    method: str,
    threads: int,
    out: np.ndarray,
    importance: str = "unnormalised",
    prior: np.ndarray | None = None,
    oob: np.ndarray | None = None,
) -> np.ndarray:
    """Grow the forests of ``targets`` (gene indices) on ``threads`` threads; write importances into
    ``out`` (R x T float64, C-contiguous, or a column block of such an array) and return the per-target
    status (0 grown, 1 constant target, 2 no inputs). ``prior``: R x T uint32 integer weights of the split
    candidates (iRafNet's weighted draw; 0 = never drawn), or None for uniform draws. ``oob``: None, or a T x 2
    float64 C-contiguous array that receives each target's out-of-bag mean squared error of the scaled target
    (NaN where none) and the number of samples predicted; with it ET's trees are bootstrapped too (the prior gate's
    forests), RF's trees and importances are those of the run without it."""
    T = len(targets)
    if T == 0:
        return np.zeros(0, dtype=np.int32)
    values, regs, targets, seeds, prior = _kernel_arrays(values, regs, targets, seeds, out, prior)
    status = np.zeros(T, dtype=np.int32)
    rf = method == "RF"
    if rf and tables is None:
        raise ValueError("the RF kernel needs tables")
    rc = lib.genie3_run(
        values.ctypes.data,
        _ptr(cast(Tables, tables).pos) if rf else None,
        _ptr(cast(Tables, tables).lims) if rf else None,
        _ptr(cast(Tables, tables).slot) if rf else None,
        values.shape[1],
        regs.ctypes.data,
        len(regs),
        targets.ctypes.data,
        T,
        seeds.ctypes.data,
        int(n_trees),
        int(k_in),
        int(k_out),
        0 if rf else 1,
        1 if importance == "tree-normalised" else 0,
        int(threads),
        out.ctypes.data,
        ctypes.c_int64(out.strides[0] // 8),
        status.ctypes.data,
        None if prior is None else prior.ctypes.data,
        ctypes.c_int64(T),
        None if oob is None else _oob_array(oob, T).ctypes.data,
        0 if oob is None or rf else 1,
    )
    if rc != 0:
        raise ValueError(f"genie3 kernel rejected its arguments (code {rc})")
    if (status < 0).any():
        raise MemoryError("genie3 kernel: out of memory for its per-thread scratch")
    return status


def _oob_array(oob: np.ndarray, T: int) -> np.ndarray:
    """``oob`` checked: T x 2 float64, C-contiguous (ValueError)."""
    if oob.dtype != np.float64 or oob.shape != (T, 2) or not oob.flags.c_contiguous:
        raise ValueError("oob must be a C-contiguous T x 2 float64 array")
    return oob


def _kernel_arrays(values, regs, targets, seeds, out: np.ndarray, prior):
    """The kernel's arrays, C-contiguous in its types (values float32, regs and targets int32, seeds uint64, prior
    uint32), and ``out`` and ``prior`` checked against the R x T shape (ValueError)."""
    values = np.ascontiguousarray(values, dtype=np.float32)
    regs = np.ascontiguousarray(regs, dtype=np.int32)
    targets = np.ascontiguousarray(targets, dtype=np.int32)
    seeds = np.ascontiguousarray(seeds, dtype=np.uint64)
    T = len(targets)
    if out.dtype != np.float64 or out.strides[1] != 8 or out.shape != (len(regs), T):
        raise ValueError("out must be an R x T float64 array with unit column stride")
    if prior is not None:
        prior = np.ascontiguousarray(prior, dtype=np.uint32)
        if prior.shape != (len(regs), T):
            raise ValueError("prior must be an R x T uint32 array")
    return values, regs, targets, seeds, prior
