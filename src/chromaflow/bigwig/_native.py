"""C kernels of the bigwig stage (``_kernels.c``: bedGraph formatting, runs, exact smoothing), compiled on first
use with the system C compiler into ``$CHROMAFLOW_CACHE`` (default ``~/.cache/chromaflow``) and loaded with ctypes
(calls release the GIL).

Why C: these are per-base loops. numpy needs 5–10 array passes for each (avg, compare, nonzero, gather;
cumulative sums, a division and a tie fix-up per position), C one pass without divisions; on 200 Mbp of
predictions that is most of the conversion's CPU time. Portable flags only (no -march=native, no fast-math) and
integer arithmetic only: the same results on every machine. Without a compiler (or with
``CHROMAFLOW_BIGWIG_NO_CC=1``) :func:`load` returns None and the numpy versions are used; tests check that both
give identical output.
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path

from chromaflow.native import build as cbuild

SOURCE = Path(__file__).with_name("_kernels.c")
CFLAGS = ["-O2", "-fPIC", "-shared", "-std=c99"]
_state: dict = {}
_lock = threading.Lock()


def load():
    """The loaded library, or None (no compiler, build failure, or disabled)."""
    with _lock:
        if "lib" in _state:
            return _state["lib"]
        _state["lib"] = lib = _build()
        return lib


def _build():
    if os.environ.get("CHROMAFLOW_BIGWIG_NO_CC") == "1":
        return None
    try:
        so = cbuild.build(SOURCE, CFLAGS, "bigwig-kernel", "libcfbigwig")
    except cbuild.BuildError:
        return None
    try:
        lib = ctypes.CDLL(str(so))
    except OSError:
        return None
    vp = ctypes.c_void_p
    lib.cf_bedgraph.restype = ctypes.c_int64
    lib.cf_bedgraph.argtypes = [
        ctypes.c_char_p,
        ctypes.c_int64,
        vp,
        vp,
        vp,
        ctypes.c_char_p,
        vp,
        vp,
        ctypes.c_int64,
        ctypes.c_int32,
        vp,
    ]
    i64 = ctypes.c_int64
    lib.cf_runs.restype = i64
    lib.cf_runs.argtypes = [vp, vp, i64, i64, vp, vp, vp]
    lib.cf_track_i64.restype = None
    lib.cf_track_i64.argtypes = [vp, vp, i64, vp]
    lib.cf_smooth_runs.restype = i64
    lib.cf_smooth_runs.argtypes = [vp, i64, i64, i64, i64, i64, i64, i64, i64, vp, vp]
    lib.cf_zoom0.restype = i64
    lib.cf_zoom0.argtypes = [vp, vp, vp, i64, i64, vp, vp, vp, vp, vp, vp, vp, vp]
    return lib
