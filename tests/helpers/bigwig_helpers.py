"""Test helpers for ``chromaflow bigwig``: read tracks; the smoothing ties and the tie-rule comparison are
:mod:`chromaflow.bigwig.ties` (shared with the benchmarks, independent of the converter)."""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path

import numpy as np

from chromaflow.bigwig.bigwigfile import RECORD

# re-exported for the tests (from helpers.bigwig_helpers import ...)
from chromaflow.bigwig.ties import (  # noqa: F401
    BLOCK_BP,
    bg_intervals,
    compare_with_ties,
    predicted_blocks,
    smoothing_ties,
)


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


def zoom_levels(path: Path):
    """(total summary, [(reduction, records)]) of a bigWig or bigBed, read straight from the file (every zoom
    block inflated)."""
    b = path.read_bytes()
    nz = struct.unpack_from("<H", b, 6)[0]
    so = struct.unpack_from("<Q", b, 0x2C)[0]
    levels = []
    for z in range(nz):
        red, _, zdo, zio = struct.unpack_from("<IIQQ", b, 64 + 24 * z)
        nb = struct.unpack_from("<I", b, zdo)[0]
        pos = zdo + 4
        recs = []
        for _ in range(nb):  # the blocks follow each other
            d = zlib.decompressobj()
            recs.append(np.frombuffer(d.decompress(b[pos:]), dtype=RECORD))
            pos = len(b) - len(d.unused_data)
        levels.append((red, np.concatenate(recs)))
    return struct.unpack_from("<Qdddd", b, so), levels
