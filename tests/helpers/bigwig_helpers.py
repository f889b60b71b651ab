"""Test helpers for ``chromaflow bigwig``: read tracks; the smoothing ties and the tie-rule comparison are
:mod:`chromaflow.bigwig.ties` (shared with the benchmarks, independent of the converter)."""
from __future__ import annotations

import gzip
from pathlib import Path

from chromaflow.bigwig.ties import (BLOCK_BP, bg_intervals, compare_with_ties, predicted_blocks,  # noqa: F401
                                   smoothing_ties)


# --------------------------------------------------------------------------------------------------
# reading outputs
# --------------------------------------------------------------------------------------------------
def bg_text(path: Path) -> str:
    with gzip.open(path, "rb") as fh:
        return fh.read().decode()


def bw_intervals(path: Path) -> tuple[list[tuple[str, int]], dict[str, list[tuple[int, int, float]]]]:
    import pyBigWig

    bw = pyBigWig.open(str(path))
    try:
        chroms = list(bw.chroms().items())
        return chroms, {c: [tuple(x) for x in (bw.intervals(c) or [])] for c, _ in chroms}
    finally:
        bw.close()


def intervals(path: Path) -> dict[str, list[tuple[int, int, float]]]:
    path = Path(path)
    return bg_intervals(bg_text(path)) if path.name.endswith(".bg.gz") else bw_intervals(path)[1]
