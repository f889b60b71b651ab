"""Numeric-kernel variants of numpy/OpenBLAS that other machines would get (issue 14 §1), for subprocess runs.

``OPENBLAS_CORETYPE`` picks OpenBLAS's kernels (Haswell = AVX2-only machines, Sandybridge = AVX, SkylakeX where
the CPU has AVX-512); ``NPY_DISABLE_CPU_FEATURES`` turns numpy's AVX-512 / AVX2 dispatch off. ``applied()``
keeps the variants that really change something in a child process, so a test built on them cannot pass
vacuously.
"""

from __future__ import annotations

import os
import subprocess
import sys

_VARS = ("OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES")


def features() -> dict[str, bool]:
    from numpy._core._multiarray_umath import __cpu_features__

    return dict(__cpu_features__)


def variants() -> list[tuple[str, dict[str, str]]]:
    f = features()
    out = [
        ("default", {}),
        ("openblas-Haswell", {"OPENBLAS_CORETYPE": "Haswell"}),
        ("openblas-Sandybridge", {"OPENBLAS_CORETYPE": "Sandybridge"}),
    ]
    if f.get("AVX512F"):
        out.append(("openblas-SkylakeX", {"OPENBLAS_CORETYPE": "SkylakeX"}))
    # numpy >= 2.4 groups its dispatch targets (X86_V4 = AVX-512, X86_V3 = AVX2/FMA); older numpy names them
    groups = [
        ["AVX512_ICL", "X86_V4"],
        ["AVX512_ICL", "X86_V4", "X86_V3"],
        ["AVX512_ICL", "AVX512_SKX", "AVX512F"],
        ["AVX512_ICL", "AVX512_SKX", "AVX512F", "AVX2", "FMA3"],
    ]
    if not f.get("AVX512F"):  # an AVX2-only CPU (e.g. an EPYC without AVX-512): its variant turns AVX2/FMA off
        groups += [["X86_V3"], ["AVX2", "FMA3"]]
    for names in groups:
        have = [n for n in names if f.get(n)]
        if have and len(have) == len([n for n in names if n in f]):
            out.append(("numpy-no-" + "-".join(have), {"NPY_DISABLE_CPU_FEATURES": " ".join(have)}))
    return out


def env(extra: dict[str, str]) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in _VARS}
    e.update(extra)
    return e


def effective(extra: dict[str, str]) -> tuple[frozenset, str | None]:
    """What the child's numpy runs: (the dispatch features it has turned off, the OpenBLAS core type or None
    when numpy cannot tell)."""
    code = (
        "import numpy, io, contextlib\n"
        "from numpy._core._multiarray_umath import __cpu_features__ as f\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        "    numpy.show_runtime()\n"
        "arch = [l.split(':')[1].strip(\" ',\") for l in buf.getvalue().splitlines() if \"'architecture'\" in l]\n"
        "print(' '.join(sorted(k for k, v in f.items() if not v)))\n"
        "print(arch[0] if arch else '')\n"
    )
    off, arch = subprocess.run(
        [sys.executable, "-c", code], env=env(extra), capture_output=True, text=True, check=True
    ).stdout.split("\n")[:2]
    return frozenset(off.split()), arch or None


def applied() -> list[tuple[str, dict[str, str]]]:
    """``[("default", {}), ...]``: the variants in effect in a child process. Asserts that at least two of them
    run other kernels than the default, and that a numpy SIMD variant applies where the CPU has AVX2."""
    base = effective({})
    vs = [("default", {})]
    changed = 0
    for name, extra in variants()[1:]:
        off, arch = effective(extra)
        if "NPY_DISABLE_CPU_FEATURES" in extra:
            if not set(extra["NPY_DISABLE_CPU_FEATURES"].split()) <= off:
                continue  # names this numpy cannot turn off (e.g. pre-2.4 names on numpy 2.4)
        elif arch is not None:
            assert arch == extra["OPENBLAS_CORETYPE"], (name, arch)
        vs.append((name, extra))
        changed += (off, arch) != base
    if features().get("AVX2"):
        assert any("NPY_DISABLE_CPU_FEATURES" in e for _, e in vs), "no numpy SIMD variant could be applied"
    assert changed >= 2  # not vacuous: at least two variants run other kernels than the default
    return vs
