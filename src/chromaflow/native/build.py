"""Compile a package C source into a shared library, once, cached by content (used by every C kernel).

``$CHROMAFLOW_CACHE/<subdir>/<stem>-<tag>.so`` (default cache root ``~/.cache/chromaflow``), where the tag hashes
the source, the flags and the machine type, so an edited source or other flags build anew and concurrent
builders (two pipeline tasks) each rename a complete file into place. Why not setuptools/cffi at install time:
the package is also run from a clone (``src/`` on PYTHONPATH, no build step) and in images whose final stage
has no compiler (they run ``python -m chromaflow.native.prebuild`` in a build stage instead).
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path


class BuildError(RuntimeError):
    """``kind`` is ``"no-compiler"``, ``"compile"`` (the compiler failed; first line of its message) or ``"os"``."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def cache_root() -> Path:
    """The cache folder: $CHROMAFLOW_CACHE, else ``~/.cache/chromaflow``."""
    return Path(os.environ.get("CHROMAFLOW_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "chromaflow"))


def compiler() -> str | None:
    """$CC, cc, gcc or clang: the first found on PATH."""
    for cand in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cand and shutil.which(cand):
            return shutil.which(cand)
    return None


def library_path(source: Path, flags: list[str], subdir: str, stem: str) -> Path:
    """Path of the cached library of ``source`` compiled with ``flags`` (under ``<cache>/<subdir>``, named
    ``<stem>-<hash>.so`` from the source, flags and machine); it may not be built yet."""
    tag = hashlib.sha256(source.read_bytes() + " ".join(flags).encode() + platform.machine().encode()).hexdigest()
    return cache_root() / subdir / f"{stem}-{tag[:16]}.so"


def build(source: Path, flags: list[str], subdir: str, stem: str, libs: tuple[str, ...] = ()) -> Path:
    """The cached library of ``source`` compiled with ``flags`` (built now if missing); raises BuildError."""
    so = library_path(source, flags, subdir, stem)
    if so.exists():
        return so
    cc = compiler()
    if cc is None:
        raise BuildError("no-compiler", "no C compiler (cc, gcc or clang) on PATH")
    try:
        so.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{stem}.", suffix=".so", dir=so.parent)
        os.close(fd)
        proc = subprocess.run([cc, *flags, "-o", tmp, str(source), *libs], capture_output=True, text=True)
        if proc.returncode != 0:
            os.unlink(tmp)
            first = (proc.stderr.strip().splitlines() or ["?"])[0]
            raise BuildError("compile", f"compiling {source.name} with {cc} failed: {first}")
        os.replace(tmp, so)  # atomic: concurrent builders may race, each rename is complete
    except OSError as exc:
        raise BuildError("os", f"cannot build {source.name} in {so.parent}: {exc}") from None
    return so
