"""glibc's malloc controls (ctypes): keep big temporaries in the heap, and give free heap pages back."""

from __future__ import annotations

from typing import Callable, Literal


_MALLOC_TUNED = False


def _libc():
    """The C library (ctypes), for glibc's malloc controls."""
    import ctypes
    import ctypes.util

    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def tune_malloc(single_arena: bool = True) -> bool:
    """Keep large temporary buffers in the heap instead of fresh ``mmap`` s (glibc only; a no-op elsewhere).

    glibc serves blocks above a (dynamic, <= 32 MiB) threshold with ``mmap`` and returns them with ``munmap``;
    every reuse then page-faults the whole block in again (the kernel zeroes each page). Stages that allocate
    the same big temporaries over and over (model activations, read blocks) spend a large share of their time
    in the kernel that way. This raises the mmap threshold to 1 GiB, stops heap trimming and (optionally) puts
    every thread in one arena, so freed blocks are reused without page faults. Memory freed stays in the
    process (RSS keeps its high-water mark). Returns True when the settings were applied.
    """
    global _MALLOC_TUNED
    if _MALLOC_TUNED:
        return True
    try:
        mallopt = _libc().mallopt
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return False
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8
    ok = mallopt(M_MMAP_THRESHOLD, 1 << 30) == 1 and mallopt(M_TRIM_THRESHOLD, (1 << 31) - 1) == 1
    if single_arena:
        ok = mallopt(M_ARENA_MAX, 1) == 1 and ok
    _MALLOC_TUNED = bool(ok)
    return _MALLOC_TUNED


_MALLOC_TRIM: Callable[[int], int] | Literal[False] | None = None


def release_free_memory() -> bool:
    """Give the C heap's free pages back to the system (glibc ``malloc_trim(0)``; a no-op elsewhere): memory that
    numpy freed stays in the process when blocks still in use sit above it (fragmentation). Measured on BIGWIG over
    3.5 Gbp of predictions: Python's traced memory level at 147 MB while RSS grew ~16 MB a minute; one call gave back
    73 MB. Returns True when glibc released something."""
    global _MALLOC_TRIM
    if _MALLOC_TRIM is None:
        try:
            _MALLOC_TRIM = _libc().malloc_trim
        except (OSError, AttributeError):  # pragma: no cover - not glibc
            _MALLOC_TRIM = False
    return bool(_MALLOC_TRIM and _MALLOC_TRIM(0))
