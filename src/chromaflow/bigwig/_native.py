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
#: -O3: the compiler vectorises the runs' flag pass (2.4 against 6.6 ms per 2.7 Mbp piece at -O2); no fast-math, so
#: floating-point results (the zoom sums) are the same as at -O2
CFLAGS = ["-O3", "-fPIC", "-shared", "-std=c99"]
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
    lib.cf_narrowpeak.restype = i64
    lib.cf_narrowpeak.argtypes = [ctypes.c_char_p, i64, ctypes.c_char_p, i64, vp, vp, i64, vp, vp, ctypes.c_char_p]
    lib.cf_narrowpeak.argtypes += [vp, vp, vp, i64, vp]
    lib.cf_peaks_new.restype = vp
    lib.cf_peaks_new.argtypes = [ctypes.c_int32, i64, i64]
    lib.cf_peaks_free.restype = None
    lib.cf_peaks_free.argtypes = [vp]
    lib.cf_peaks_feed.restype = ctypes.c_int
    lib.cf_peaks_feed.argtypes = [vp, vp, vp, i64]
    lib.cf_peaks_finish.restype = i64
    lib.cf_peaks_finish.argtypes = [vp, i64]
    lib.cf_peaks_take.restype = None
    lib.cf_peaks_take.argtypes = [vp, vp, vp, vp, vp, vp]
    lib.cf_chunk_index.restype = ctypes.c_int
    lib.cf_chunk_index.argtypes = [vp, i64, ctypes.c_int, i64, i64, i64, i64, vp, vp, vp]
    lib.cf_gather_chunks.restype = i64
    lib.cf_gather_chunks.argtypes = [ctypes.c_int, vp, i64, i64, vp]
    lib.cf_shuffle_lzf.restype = ctypes.c_int
    lib.cf_shuffle_lzf.argtypes = [vp, i64, i64, vp, vp, vp]
    lib.cf_lzf_compress.restype = ctypes.c_uint32
    lib.cf_lzf_compress.argtypes = [vp, i64, vp, i64]
    lib.cf_runs.restype = i64
    lib.cf_runs.argtypes = [vp, vp, i64, i64, i64, vp, vp, vp]
    lib.cf_take_i64.restype = i64
    lib.cf_take_i64.argtypes = [vp, i64, ctypes.c_int, vp]
    lib.cf_read_chunks.restype = i64
    lib.cf_read_chunks.argtypes = [i64, vp, vp, vp, vp, vp, vp, i64, i64, i64, vp, vp, vp]
    lib.cf_data_blocks.restype = i64
    lib.cf_data_blocks.argtypes = [i64, vp, vp, vp, i64, i64, vp, vp, i64, vp, vp, vp]
    lib.cf_track_i64.restype = None
    lib.cf_track_i64.argtypes = [vp, vp, i64, vp]
    lib.cf_smooth_runs.restype = i64
    lib.cf_smooth_runs.argtypes = [vp, i64, i64, i64, i64, i64, i64, i64, i64, vp, vp]
    lib.cf_zoom0.restype = i64
    lib.cf_zoom0.argtypes = [vp, vp, vp, i64, i64, vp, vp, vp, vp, vp, vp, vp, vp]
    return lib


class _Owned:
    """A libdeflate (de)compressor owned by one thread: freed when the thread ends (its thread-local storage lets go
    of it) or the process does."""

    def __init__(self, ptr, free):
        self.ptr, self.free = ptr, free

    def __del__(self):
        if self.ptr:
            self.free(self.ptr)
            self.ptr = None


_tls = threading.local()


def decompressor():
    """This thread's libdeflate decompressor (a pointer for the C kernels), allocated on its first use; None without
    libdeflate (:func:`libdeflate`)."""
    lz = libdeflate()
    if lz is None:
        return None
    own = getattr(_tls, "dec", None)
    if own is None:
        own = _tls.dec = _Owned(lz["alloc_decompressor"](), lz["free_decompressor"])
    return own.ptr


def compressor(level: int):
    """This thread's libdeflate compressor at ``level`` (a pointer for the C kernels), allocated on its first use;
    None without libdeflate."""
    lz = libdeflate()
    if lz is None:
        return None
    held = getattr(_tls, "comp", None)
    if held is None:
        held = _tls.comp = {}
    if level not in held:
        held[level] = _Owned(lz["alloc_compressor"](level), lz["free_compressor"])
    return held[level].ptr


def _h5py_symbol(module: str, name: str):
    """The address of the C function ``name`` exported by h5py's extension ``module`` (or a library it loaded:
    its HDF5), found once; None where it is not there."""
    with _lock:
        if (module, name) not in _state:
            try:
                import importlib

                ext = importlib.import_module(f"h5py.{module}")
                _state[(module, name)] = ctypes.cast(getattr(ctypes.CDLL(ext.__file__), name), ctypes.c_void_p).value
            except (ImportError, OSError, AttributeError):
                _state[(module, name)] = None
        return _state[(module, name)]


def h5_chunk_iter():
    """The address of HDF5's ``H5Dchunk_iter`` in the library h5py is built with (found through h5py's own extension
    module, so it is the copy already loaded), or None."""
    return _h5py_symbol("h5d", "H5Dchunk_iter")


def libdeflate():
    """{name: ctypes function} of libdeflate as exported by the ``deflate`` package's extension (its pinned
    dependency; the same library and version as its Python functions, so the same bytes): ``zlib_decompress``,
    ``alloc_decompressor``, ``zlib_compress``, ``alloc_compressor``, ``zlib_compress_bound``, and the addresses the C
    kernels call (``zlib_decompress_addr``, ``zlib_compress_addr``); None where the extension does not export them.
    Compressors and decompressors: :func:`compressor`, :func:`decompressor` (one per thread, freed with it)."""
    with _lock:
        if "libdeflate" not in _state:
            _state["libdeflate"] = _find_libdeflate()
        return _state["libdeflate"]


def _find_libdeflate():
    try:
        import deflate._deflate as ext  # type: ignore[import-not-found]  # a compiled module without stubs

        so = ctypes.CDLL(ext.__file__)
        fns = {
            name: getattr(so, f"libdeflate_{name}")
            for name in (
                "zlib_decompress",
                "alloc_decompressor",
                "free_decompressor",
                "zlib_compress",
                "alloc_compressor",
                "free_compressor",
                "zlib_compress_bound",
            )
        }
    except (ImportError, OSError, AttributeError):
        return None
    vp = ctypes.c_void_p
    fns["alloc_decompressor"].restype = vp
    fns["alloc_decompressor"].argtypes = []
    fns["alloc_compressor"].restype = vp
    fns["alloc_compressor"].argtypes = [ctypes.c_int]
    for free in ("free_decompressor", "free_compressor"):
        fns[free].restype = None
        fns[free].argtypes = [vp]
    fns["zlib_compress_bound"].restype = ctypes.c_size_t
    fns["zlib_compress_bound"].argtypes = [vp, ctypes.c_size_t]
    # the two the C kernels call, by address
    fns["zlib_decompress_addr"] = ctypes.cast(fns["zlib_decompress"], vp).value
    fns["zlib_compress_addr"] = ctypes.cast(fns["zlib_compress"], vp).value
    return fns
