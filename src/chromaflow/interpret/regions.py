"""The regions ``chromaflow attribute`` explains: a BED (3+ columns) or narrowPeak file, plain or gzip.

Each region is a half-open interval [start, end) on a record; its centre is the narrowPeak summit (column 10, an
offset from start) where the file gives one (>= 0), else floor((start + end) / 2). ``#``, ``track`` and ``browser``
lines are skipped. Every bad line is one error naming the file and its line.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass

from ..utils.errors import ChromaflowError


@dataclass(frozen=True)
class Region:
    """One region: its ``chrom``, 0-based half-open ``start``/``end``, ``name`` (column 4, else chrom:start-end),
    ``centre`` (the summit or the midpoint), the 1-based ``line`` it came from and its ``score``: a narrowPeak's
    signalValue (column 7), else a BED score (column 5), NaN where the file gives none (``--top`` ranks by it)."""

    chrom: str
    start: int
    end: int
    name: str
    centre: int
    line: int
    score: float = float("nan")


def _open(path: str):
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rt", encoding="utf-8") if gz else open(path, encoding="utf-8")


def _int(path: str, ln: int, cell: str, what: str) -> int:
    try:
        return int(cell)
    except ValueError:
        raise ChromaflowError(f"{path}: line {ln}: {what} {cell!r} is not an integer") from None


def _region(path: str, ln: int, cols: list[str]) -> Region:
    if len(cols) < 3:
        raise ChromaflowError(f"{path}: line {ln}: expected at least 3 tab-separated columns (chrom, start, end)")
    chrom = cols[0]
    start, end = _int(path, ln, cols[1], "start"), _int(path, ln, cols[2], "end")
    if start < 0 or end <= start:
        raise ChromaflowError(f"{path}: line {ln}: region {chrom}:{start}-{end} is empty or negative")
    name = cols[3] if len(cols) > 3 and cols[3] not in ("", ".") else f"{chrom}:{start}-{end}"
    centre = (start + end) // 2
    if len(cols) >= 10:  # narrowPeak: column 10 is the summit's offset from start, -1 where none was called
        summit = _int(path, ln, cols[9], "summit offset (column 10)")
        if summit >= 0:
            if start + summit >= end:
                raise ChromaflowError(f"{path}: line {ln}: summit offset {summit} lies outside the region")
            centre = start + summit
    return Region(chrom, start, end, name, centre, ln, _score(cols[6] if len(cols) >= 10 else cols[4:5]))


def _score(cell) -> float:
    """A score cell (or an empty list: none) as a float; NaN where it is absent or not a number (BED allows '.')."""
    if isinstance(cell, list):
        cell = cell[0] if cell else ""
    try:
        return float(cell)
    except ValueError:
        return float("nan")


def top_regions(regions: list[Region], n: int) -> list[Region]:
    """The ``n`` regions of highest score (ties and NaN scores: file order, NaN last), back in file order; all of
    them when ``n`` is 0 or at least their number."""
    if n <= 0 or n >= len(regions):
        return regions
    ranked = sorted(
        range(len(regions)),
        key=lambda i: (-regions[i].score if regions[i].score == regions[i].score else float("inf"), i),
    )
    return [regions[i] for i in sorted(ranked[:n])]


def read_regions(path: str) -> list[Region]:
    """The regions of ``path`` in file order.

    Parameters
    ----------
    path : str
        BED or narrowPeak, tab-separated, plain or gzip (by content).

    Returns
    -------
    list of Region
        At least one region (an empty file is an error).
    """
    out: list[Region] = []
    try:
        with _open(path) as fh:
            for ln, line in enumerate(fh, 1):
                text = line.rstrip("\r\n")
                if not text.strip() or text.startswith(("#", "track", "browser")):
                    continue
                out.append(_region(path, ln, text.split("\t")))
    except UnicodeDecodeError:
        raise ChromaflowError(f"{path}: not a text BED/narrowPeak file (not UTF-8)") from None
    except (OSError, EOFError) as exc:
        raise ChromaflowError(f"{path}: unreadable ({exc})") from None
    if not out:
        raise ChromaflowError(f"{path}: no regions (an empty BED/narrowPeak file)")
    return out


def check_against(regions: list[Region], lengths: dict[str, int], path: str, source: str) -> None:
    """Every region on a record of the genome and inside it (one line naming the region's line otherwise).

    Parameters
    ----------
    regions : list of Region
        :func:`read_regions`' regions.
    lengths : dict
        Record name -> length of the genome (FASTA or genome h5).
    path, source : str
        The regions file and the genome file, named in the message.
    """
    for r in regions:
        n = lengths.get(r.chrom)
        if n is None:
            raise ChromaflowError(f"{path}: line {r.line}: {r.chrom} is not a record of {source}")
        if r.end > n:
            raise ChromaflowError(
                f"{path}: line {r.line}: region {r.chrom}:{r.start}-{r.end} ends past the end of {r.chrom} ({n} bp)"
            )
