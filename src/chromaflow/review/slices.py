"""The page's tracks, cut to the loci's windows in formats igv-reports embeds.

igv-reports (1.17) embeds bed, bedGraph, wig, gff/gtf, vcf and bam/cram tracks, sliced to each locus; it has no
reader for bigWig (its track types have none) or narrowPeak. So each bigWig is read with pyBigWig over the loci's
windows only and written as a bedGraph of those windows (a few kb per locus, whatever the genome's size), and a
narrowPeak becomes a BED6 (its name and score; the signal columns would be read as BED's thickStart/thickEnd).
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from ..utils.errors import ChromaflowError
from .loci import Locus, _lines

#: ``<rank>_<CHROM>_<POS>_<row>.<dataset>.<ref|alt>.bw``, the names variant-effect --tracks writes
VARIANT_TRACK = re.compile(r"(\d+)_(.+)_(\d+)_(\d+)\.(.+)\.(ref|alt)\.bw")


def _open_bigwig(path: str | Path):
    import pyBigWig

    if not Path(path).is_file():
        raise ChromaflowError(f"{path}: does not exist or is not a file")
    try:
        bw = pyBigWig.open(str(path))
    except RuntimeError:
        bw = None
    if bw is None or not bw.isBigWig():
        raise ChromaflowError(f"{path}: not a bigWig file")
    return bw


def bigwig_intervals(path: str | Path, windows: dict[str, list[tuple[int, int]]]) -> list[tuple[str, int, int, float]]:
    """The (chrom, start, end, value) intervals of a bigWig inside ``windows`` (clipped to them), in window order;
    a sequence the bigWig does not have gives none."""
    bw = _open_bigwig(path)
    try:
        chroms = bw.chroms()
        out = []
        for chrom, spans in windows.items():
            if chrom not in chroms:
                continue
            for s, e in spans:
                e = min(e, chroms[chrom])
                if e <= s:
                    continue
                for a, b, v in bw.intervals(chrom, s, e) or ():
                    if math.isfinite(v):
                        out.append((chrom, max(a, s), min(b, e), v))
        return out
    finally:
        bw.close()


def write_bedgraph(path: str | Path, intervals: list[tuple[str, int, int, float]]) -> None:
    """``intervals`` as a bedGraph (no track line: igv-reports' track config names the track)."""
    with open(path, "w", encoding="utf-8") as fh:
        for chrom, s, e, v in intervals:
            fh.write(f"{chrom}\t{s}\t{e}\t{v:.6g}\n")


def narrowpeak_to_bed(src: str | Path, dest: str | Path) -> None:
    """A narrowPeak's peaks as BED6 (chrom, start, end, name, score, strand)."""
    with open(dest, "w", encoding="utf-8") as fh:
        for lineno, f in _lines(src):
            if f[0].startswith(("track", "browser")):
                continue
            if len(f) < 6:
                raise ChromaflowError(f"{src} line {lineno}: {len(f)} fields, a narrowPeak line has 10")
            fh.write("\t".join(f[:6]) + "\n")


def _subtract(span: tuple[int, int], taken: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of ``span`` outside every interval of ``taken``."""
    parts = [span]
    for ts, te in taken:
        parts = [p for s, e in parts for p in ((s, min(e, ts)), (max(s, te), e)) if p[0] < p[1]]
    return parts


def variant_intervals(paths: list[str], variants: list[Locus]) -> dict[tuple[str, str], list]:
    """The variant tracks of the page's variants, joined into one set of intervals per (dataset, allele).

    Parameters
    ----------
    paths
        The ref and alt bigWigs of ``variant-effect --tracks`` (``<rank>_<CHROM>_<POS>_<row>.<dataset>.<allele>.bw``;
        another name is refused). Tracks of variants not on the page are left out.
    variants
        The page's variant loci, strongest first, with their windows.

    Returns
    -------
    dict
        ``(dataset, allele) -> [(chrom, start, end, value), ...]`` sorted: each variant's window less the windows of
        stronger variants (where two windows overlap, the stronger variant's values are shown).
    """
    files: dict[tuple[str, int], list[tuple[str, str, str]]] = {}
    for path in paths:
        m = VARIANT_TRACK.fullmatch(os.path.basename(path))
        if m is None:
            raise ChromaflowError(
                f"{path}: not a variant-effect --tracks bigWig name (<rank>_<CHROM>_<POS>_<row>.<dataset>.<ref|alt>.bw)"
            )
        _rank, chrom, pos, _row, dataset, allele = m.groups()
        files.setdefault((chrom, int(pos)), []).append((dataset, allele, path))
    out: dict[tuple[str, str], list] = {}
    taken: dict[str, list[tuple[int, int]]] = {}
    for v in variants:  # strongest first
        mine = files.get((v.chrom, v.start + 1), [])
        spans = _subtract((v.view_start, v.view_end), taken.get(v.chrom, []))
        for dataset, allele, path in sorted(mine, key=lambda t: (t[0], t[1] == "alt")):
            out.setdefault((dataset, allele), []).extend(bigwig_intervals(path, {v.chrom: spans}))
        if mine:
            taken.setdefault(v.chrom, []).append((v.view_start, v.view_end))
    return {k: sorted(iv) for k, iv in out.items()}
