"""Deflate engines for ``chromaflow fasta2h5``'s HDF5 direct chunk writes.

HDF5's deflate filter reads any standard zlib stream, so each chunk can be compressed by whichever deflate
implementation is fastest, in parallel threads, and written with ``write_direct_chunk``. An engine is a
name and a level (``ENGINE[:LEVEL]`` on the command line):

* ``onehot`` (level 1; the default ``auto`` picks it when it can be built): our deflate encoder for shuffled one-hot
float16 chunks
  (``_onehot_deflate.c``, compiled on first use with the system C compiler and cached, like the GENIE3
  kernel). It matches whole bases instead of bytes and never expands the chunk, so it is several times
  faster than zlib level 4 and gives a smaller file. Not byte-identical to zlib.
* ``zlib`` (level 4 by default): Python's zlib, exactly what h5py/HDF5 write for ``compression='gzip'``;
  at level 4 the chunks are byte-identical to Helixer's.
* ``libdeflate`` (level 4): the ``deflate`` package (libdeflate bindings); ``auto`` falls back to it when
  the onehot kernel cannot be built (no C compiler): about zlib level 4's size, ~2x its speed.
* ``isal`` (level 1): ISA-L. Fast, but ~30 % larger than zlib level 4 on this data, and ISA-L's output is not
  byte-reproducible: it may depend on the CPU's instruction set, and a chunk was once seen to deflate to other
  (valid) bytes in another process (tests/fasta2h5/test_fasta2h5.py). The values never differ.

The level each engine used is written into the dataset's deflate filter (cd_values) and, with the engine's
name, into the file's root attributes, so the file says how it was written.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import sys
import threading
import zlib
from pathlib import Path
from typing import Callable

import numpy as np

from ..native import build as cbuild
from ..utils.errors import ChromaflowError

ENGINES = ("onehot", "zlib", "libdeflate", "isal")
DEFAULT_LEVEL = {"onehot": 1, "zlib": 4, "libdeflate": 4, "isal": 1}
LEVELS = {"onehot": range(1, 10), "zlib": range(0, 10), "libdeflate": range(0, 10), "isal": range(0, 4)}

SOURCE = Path(__file__).with_name("_onehot_deflate.c")
CFLAGS = ["-O2", "-fPIC", "-shared", "-std=c99"]  # no -march=native / -ffast-math: same bytes on every CPU


class EngineUnavailable(ChromaflowError):
    """The onehot engine's kernel cannot be built or loaded (``auto`` then falls back to libdeflate)."""

    pass


def parse_engine(text: str, defaults: dict[str, int] | None = None, what: str = "") -> tuple[str, int]:
    """``"onehot"``, ``"zlib:6"`` ... -> (engine, level); a one-line error otherwise. ``"auto"`` is onehot
    where its kernel can be built and loaded, else libdeflate at level 4 (:func:`resolve_auto`).

    ``defaults``: the engines a caller accepts and the level each gets without ``:LEVEL`` (default: every engine,
    fasta2h5's levels); such a caller resolves ``auto`` itself. ``what`` qualifies "unknown engine" in the error."""
    name, _, lvl = str(text).partition(":")
    name = name.strip().lower()
    if name == "auto" and not lvl and defaults is None:
        return resolve_auto()
    defaults = DEFAULT_LEVEL if defaults is None else defaults
    if name not in defaults:
        raise ChromaflowError(
            f"--deflate {text!r}: unknown engine{what} (choose from auto, {', '.join(defaults)}, "
            "optionally with :LEVEL)"
        )
    if not lvl:
        return name, defaults[name]
    try:
        level = int(lvl)
    except ValueError:
        raise ChromaflowError(f"--deflate {text!r}: level must be an integer") from None
    if level not in LEVELS[name]:
        r = LEVELS[name]
        raise ChromaflowError(f"--deflate {text!r}: {name} levels are {r.start}..{r.stop - 1}")
    return name, level


#: why ``auto`` did not pick onehot (None when it did, or when auto was not used)
auto_fallback_reason: str | None = None


def resolve_auto() -> tuple[str, int]:
    """The engine and level of ``auto``: onehot where its kernel loads, else libdeflate (the reason noted in
    :data:`auto_fallback_reason`)."""
    global auto_fallback_reason
    try:
        load_kernel()
    except EngineUnavailable as exc:
        auto_fallback_reason = str(exc)
        return "libdeflate", DEFAULT_LEVEL["libdeflate"]
    return "onehot", DEFAULT_LEVEL["onehot"]


def engine_version(name: str) -> str:
    """The version text of engine ``name`` for the metrics: zlib's runtime, python-deflate's, isal's, or for onehot a
    hash of its C source."""
    if name == "zlib":
        return f"zlib {zlib.ZLIB_RUNTIME_VERSION}"
    if name == "libdeflate":
        import deflate

        return f"libdeflate (python-deflate {deflate.__version__})"
    if name == "isal":
        import isal

        return f"isal {isal.__version__}"
    return f"chromaflow onehot-deflate {hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]}"


def byte_compressor(name: str, level: int) -> Callable[[bytes], bytes | bytearray]:
    """A function compressing plain bytes to a zlib stream (for the small datasets and non-onehot X)."""
    if name in ("zlib", "onehot"):  # onehot only encodes data/X; small datasets use zlib at the same level
        return lambda buf: zlib.compress(buf, level)
    if name == "libdeflate":
        import deflate

        return lambda buf: deflate.zlib_compress(bytes(buf), level)
    if name == "isal":
        from isal import isal_zlib

        return lambda buf: isal_zlib.compress(buf, level)
    raise ChromaflowError(f"unknown deflate engine {name!r}")


# --------------------------------------------------------------------------------------------------
# the onehot kernel
# --------------------------------------------------------------------------------------------------
_lib = None
_lib_lock = threading.Lock()


def library_path() -> Path:
    """Path of the cached onehot kernel library for this source, CFLAGS and machine; it may not be built yet."""
    return cbuild.library_path(SOURCE, CFLAGS, "onehot-deflate", "libonehotdeflate")


def load_kernel():
    """Compile (once, cached by source hash) and load the onehot encoder, or raise EngineUnavailable."""
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        if sys.byteorder != "little":
            raise EngineUnavailable("the onehot deflate engine needs a little-endian CPU; use --deflate zlib")
        if os.environ.get("CHROMAFLOW_NO_CC") == "1":  # test hook: behave as if there were no compiler
            raise EngineUnavailable("onehot deflate engine disabled by CHROMAFLOW_NO_CC=1")
        try:
            so = cbuild.build(SOURCE, CFLAGS, "onehot-deflate", "libonehotdeflate")
        except cbuild.BuildError as exc:
            if exc.kind == "no-compiler":
                raise EngineUnavailable(
                    "the onehot deflate engine needs a C compiler (cc, gcc or clang) on PATH;"
                    " install one or use --deflate libdeflate"
                ) from None
            raise EngineUnavailable(f"the onehot deflate engine: {exc}") from None
        try:
            lib = ctypes.CDLL(str(so))
        except OSError as exc:
            raise EngineUnavailable(f"cannot load {so}: {exc}") from None
        lib.chf_onehot_ws_size.restype = ctypes.c_size_t
        lib.chf_onehot_ws_size.argtypes = [ctypes.c_size_t]
        lib.chf_onehot_bound.restype = ctypes.c_size_t
        lib.chf_onehot_bound.argtypes = [ctypes.c_size_t]
        lib.chf_onehot_deflate.restype = ctypes.c_size_t
        lib.chf_onehot_deflate.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_size_t,
        ]
        _lib = lib
        return lib


def unit_tables(lut16: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From a (256, 4) uint16 float16-pattern table: byte -> unit id of its 4 low bytes / 4 high bytes,
    and the (n_units, 4) bytes of each unit. Units are shared between the tables of both strands."""
    return _UNITS.tables(lut16)


class _Units:
    def __init__(self) -> None:
        self.patterns: dict[bytes, int] = {}

    def ids(self, cols: np.ndarray) -> np.ndarray:
        """(256,) uint8: the unit id of each byte's row of ``cols`` ((256, 4) bytes), new units numbered as they are
        first seen."""
        out = np.zeros(256, dtype=np.uint8)
        for b in range(256):
            key = bytes(cols[b].astype(np.uint8))
            if key not in self.patterns:
                self.patterns[key] = len(self.patterns)
            out[b] = self.patterns[key]
        return out

    def tables(self, lut16: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:func:`unit_tables` of ``lut16``; ChromaflowError past 255 distinct units."""
        lo, hi = self.ids(lut16 & 0xFF), self.ids(lut16 >> 8)
        if len(self.patterns) > 255:
            raise ChromaflowError("too many distinct one-hot patterns for the onehot engine")
        units = np.zeros((len(self.patterns), 4), dtype=np.uint8)
        for key, i in self.patterns.items():
            units[i] = np.frombuffer(key, dtype=np.uint8)
        return lo, hi, units


_UNITS = _Units()


class OnehotEncoder:
    """Compress data/X chunks from base bytes: ``encoder(seq_bytes, reverse, L) -> zlib stream``.

    ``seq_bytes`` (uint8 array, C-contiguous) holds the row's valid bases in genomic order; ``reverse``
    selects the minus strand (bases read backwards through the complement tables); positions after
    ``len(seq_bytes)`` are padding. Thread-safe: each thread gets its own workspace; the GIL is released
    while a chunk is encoded (ctypes).
    """

    def __init__(self, lut16: np.ndarray, lut16_rc: np.ndarray, L: int, level: int):
        self.lib = load_kernel()
        self.L = int(L)
        self.level = int(level)
        lo, hi, _ = unit_tables(lut16)
        lo_rc, hi_rc, units = unit_tables(lut16_rc)
        self._tables = (lo, hi, lo_rc, hi_rc, np.ascontiguousarray(units))
        self.n_units = units.shape[0]
        self.ws_size = int(self.lib.chf_onehot_ws_size(self.L))
        self.bound = int(self.lib.chf_onehot_bound(self.L))
        self._local = threading.local()

    def __call__(self, seq: np.ndarray, reverse: bool) -> bytes:
        loc = self._local
        if getattr(loc, "ws", None) is None:
            loc.ws = np.empty(self.ws_size, dtype=np.uint8)
            loc.out = np.empty(self.bound, dtype=np.uint8)
        lo, hi, lo_rc, hi_rc, units = self._tables
        seq = np.ascontiguousarray(seq, dtype=np.uint8)
        n = int(seq.size)
        if n > self.L:
            raise ValueError("row longer than L")
        size = self.lib.chf_onehot_deflate(
            seq.ctypes.data if n else None,
            n,
            self.L,
            1 if reverse else 0,
            (lo_rc if reverse else lo).ctypes.data,
            (hi_rc if reverse else hi).ctypes.data,
            units.ctypes.data,
            self.n_units,
            self.level,
            loc.ws.ctypes.data,
            loc.out.ctypes.data,
            self.bound,
        )
        if size == 0:  # cannot happen with the bound above; never write a truncated chunk
            raise ChromaflowError("onehot deflate: output buffer too small")
        return loc.out[:size].tobytes()
