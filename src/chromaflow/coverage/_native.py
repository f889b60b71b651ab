"""add-coverage's BAM counting kernel (``_bam.c``), compiled on first use against the htslib that pysam ships (its
headers, ``pysam.get_include()``; its library, ``libchtslib``, the same copy pysam loads) into ``$CHROMAFLOW_CACHE``,
loaded with ctypes (calls release the GIL).

Why C: the counting loop runs once per read; through pysam each read is a Python object and a loop turn (with its
CIGAR blocks as Python tuples), ~2 s of the benchmark's 1 M reads, against ~0.2 s for the same loop over htslib's
records. Without a compiler, without pysam's headers, or with ``CHROMAFLOW_COVERAGE_NO_CC=1``, :func:`load` returns
None and :func:`chromaflow.coverage.sources.count_bam_window` counts through pysam (tests check both give the same
arrays and the same errors).
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path

from chromaflow.native import build as cbuild

SOURCE = Path(__file__).with_name("_bam.c")
_state: dict = {}
_lock = threading.Lock()


def load():
    """The loaded library, or None (no compiler, no pysam headers or library, build failure, or disabled)."""
    with _lock:
        if "lib" not in _state:
            _state["lib"] = _build()
        return _state["lib"]


def _htslib() -> tuple[list[str], Path] | None:
    """(include directories, libchtslib path) of the installed pysam, or None."""
    try:
        import pysam
    except ImportError:
        return None
    libs = [Path(p) for p in pysam.get_libraries() if Path(p).name.startswith("libchtslib")]
    includes = [d for d in pysam.get_include() if (Path(d) / "htslib" / "sam.h").is_file()]
    if not libs or not includes:
        return None
    return includes, libs[0]


def _build():
    if os.environ.get("CHROMAFLOW_COVERAGE_NO_CC") == "1":
        return None
    found = _htslib()
    if found is None:
        return None
    includes, hts = found
    # pysam's include path is in the flags, so another pysam (another venv) builds its own copy; the library is
    # linked by its full path
    flags = ["-O2", "-fPIC", "-shared", "-std=gnu99", *(f"-I{d}" for d in includes)]
    try:
        so = cbuild.build(SOURCE, flags, "coverage-kernel", "libcfcoverage", libs=(str(hts),))
        lib = ctypes.CDLL(str(so))
    except (cbuild.BuildError, OSError):
        return None
    vp, i64 = ctypes.c_void_p, ctypes.c_int64
    lib.cf_bam_open.restype = vp
    lib.cf_bam_open.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    lib.cf_bam_close.restype = None
    lib.cf_bam_close.argtypes = [vp]
    lib.cf_bam_count.restype = ctypes.c_int
    lib.cf_bam_count.argtypes = [vp, ctypes.c_char_p, i64, i64, i64, vp, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.cf_bam_count.argtypes += [vp, vp, vp, vp]
    return lib
