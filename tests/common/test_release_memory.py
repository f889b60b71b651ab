"""native.memory.release_free_memory: the C heap's free pages go back to the system (glibc malloc_trim), and the bigWig
converter (BIGWIG, PEAKS) calls it as it writes. Measured on BIGWIG over 3.5 Gbp: Python's traced memory was level
while RSS grew with what numpy had freed and glibc kept."""

from __future__ import annotations

import ctypes.util

import numpy as np
import pytest

from chromaflow.native import memory

GLIBC = (ctypes.util.find_library("c") or "").startswith("libc.so")


def _rss_kb() -> int:
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0])


@pytest.mark.skipif(not GLIBC, reason="glibc only (malloc_trim)")
def test_free_heap_pages_go_back_to_the_system():
    # 64 KB blocks come from the heap (below glibc's mmap threshold); one kept above the freed ones pins the heap's
    # top, so free() alone cannot shrink it
    blocks = [np.ones(8192) for _ in range(3000)]  # ~190 MB
    keep = np.ones(8192)
    del blocks
    before = _rss_kb()
    assert memory.release_free_memory() is True
    after = _rss_kb()
    assert before - after > 100_000, (before, after)
    del keep


def test_the_converter_releases_memory_as_it_writes(reference_dir, tmp_path, monkeypatch):
    from chromaflow.bigwig import convert

    calls = []
    monkeypatch.setattr(convert, "release_free_memory", lambda: calls.append(1))
    monkeypatch.setattr(convert, "RELEASE_BP", 50_000)
    from helpers.cli import run_in_process as run_cli

    run_cli(
        "bigwig",
        "--predictions",
        str(reference_dir / "predmoter" / "pred_data_1_predictions.h5"),
        "--outdir",
        str(tmp_path),
        "--basename",
        "pd1",
        "--no-browser-files",
    )
    assert len(calls) >= 2
