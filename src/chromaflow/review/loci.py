"""The loci of a review page, chosen from the tables the pipeline writes per assembly.

* **variants**: the rows of a ``variant-effect`` table (``<id>.effects.tsv.gz``) ranked as ``variant-effect --tracks``
  ranks them: the largest ``|delta_mean|`` of the strand average over the datasets first, ties in table order; a
  row without a finite value (a skipped variant) is never chosen;
* **peaks**: per narrowPeak file (one per dataset), its peaks by signalValue (column 7), largest first, ties in file
  order;
* **promoters**: the genes of a ``gene-accessibility`` table by the mean predicted coverage of one dataset (the
  first one by default) over their promoter window: the highest first, then the lowest (lowest first), a gene
  never in both.

Every locus is shown with ``flank`` bases either side (clipped to its sequence); the sequence must be one of the
FASTA's (its .fai). A malformed row is refused with one line naming the file and line.
"""

from __future__ import annotations

import gzip
import heapq
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..utils.errors import ChromaflowError

#: the strand-average delta columns of a variant-effect table: ``delta_mean_<dataset>_avg``
_DELTA = re.compile(r"delta_mean_(.+)_avg")
#: the per-dataset promoter means of a gene-accessibility table (not the ``_same_strand`` ones)
_MEAN = re.compile(r"mean_(.+)")


@dataclass(frozen=True)
class Locus:
    """One row of the page: a feature (0-based, end exclusive) and the window shown around it."""

    section: str  # "variant", "peak", "promoter high", "promoter low"
    rank: int  # 1-based, within the section (per file for peaks)
    name: str
    chrom: str
    start: int
    end: int
    score: float
    detail: str
    view_start: int = 0
    view_end: int = 0


def read_sizes(fai: str | Path) -> dict[str, int]:
    """Sequence lengths from a FASTA index (``.fai``), in file order."""
    sizes: dict[str, int] = {}
    for lineno, fields in _lines(fai):
        if len(fields) < 2 or not fields[1].isdigit():
            raise ChromaflowError(f"{fai} line {lineno}: not a FASTA index line (name<TAB>length<TAB>...)")
        sizes[fields[0]] = int(fields[1])
    if not sizes:
        raise ChromaflowError(f"{fai}: empty FASTA index")
    return sizes


def _lines(path: str | Path) -> Iterator[tuple[int, list[str]]]:
    """(line number, tab-separated fields) of a text file, plain or gzip; blank and ``#`` lines skipped."""
    path = Path(path)
    if not path.is_file():
        raise ChromaflowError(f"{path}: does not exist or is not a file")
    with path.open("rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    opener = gzip.open if gz else open
    try:
        with opener(path, "rt", encoding="utf-8", newline="") as fh:  # type: ignore[operator]
            for lineno, line in enumerate(fh, 1):
                line = line.rstrip("\r\n")
                if line.strip() and not line.startswith("#"):
                    yield lineno, line.split("\t")
    except (UnicodeDecodeError, EOFError, gzip.BadGzipFile) as exc:
        raise ChromaflowError(f"{path}: not a readable text table ({exc})") from None


def _number(path, lineno: int, column: str, text: str, kind=float):
    """``text`` of ``column`` as ``kind``; NA/nan/empty as NaN for floats."""
    if kind is float and text.strip().lower() in ("", "na", "nan"):
        return math.nan
    try:
        return kind(text)
    except ValueError:
        raise ChromaflowError(f"{path} line {lineno}: {column} {text!r} is not a number") from None


def _table(path) -> tuple[list[str], Iterator[tuple[int, dict[str, str]]]]:
    """A headed TSV: its header and its rows as dicts (a row of another width is refused)."""
    rows = _lines(path)
    try:
        _, header = next(rows)
    except StopIteration:
        raise ChromaflowError(f"{path}: empty table (no header line)") from None

    def records():
        """(line number, {column: field}) per data row, each row checked against the header's width."""
        for lineno, fields in rows:
            if len(fields) != len(header):
                raise ChromaflowError(f"{path} line {lineno}: {len(fields)} fields, the header has {len(header)}")
            yield lineno, dict(zip(header, fields))

    return header, records()


def _need(path, header: list[str], columns: list[str], what: str) -> None:
    missing = [c for c in columns if c not in header]
    if missing:
        raise ChromaflowError(f"{path}: no {', '.join(missing)} column (not a {what} table)")


def _on_sequence(path, lineno: int, chrom: str, start: int, end: int, sizes: dict[str, int]) -> None:
    if chrom not in sizes:
        raise ChromaflowError(f"{path} line {lineno}: sequence {chrom!r} is not in the FASTA")
    if start < 0 or end < start or start > sizes[chrom]:
        raise ChromaflowError(f"{path} line {lineno}: {chrom}:{start}-{end} is outside {chrom} (0-{sizes[chrom]})")


def top_variants(path, n: int, sizes: dict[str, int]) -> list[Locus]:
    """The ``n`` strongest variants of a ``variant-effect`` table, as loci spanning their REF allele.

    Parameters
    ----------
    path
        The table (``<id>.effects.tsv.gz`` or plain); its ``delta_mean_<dataset>_avg`` columns rank the rows.
    n
        How many to keep.
    sizes
        Sequence lengths of the FASTA (:func:`read_sizes`); a row on another sequence is refused.

    Returns
    -------
    list of Locus
        Largest strand-average |delta_mean| over the datasets first, ties in table order; rows without a finite
        value are left out.
    """
    header, rows = _table(path)
    deltas = [c for c in header if _DELTA.fullmatch(c)]
    _need(path, header, ["CHROM", "POS", "REF", "ALT"], "chromaflow variant-effect")
    if not deltas:
        raise ChromaflowError(f"{path}: no delta_mean_<dataset>_avg column (not a chromaflow variant-effect table)")

    def scored():
        """Each row's locus with its score, checked against the FASTA's sequences as it is read."""
        for order, (lineno, row) in enumerate(rows):
            pos = _number(path, lineno, "POS", row["POS"], int)
            start, end = pos - 1, pos - 1 + max(1, len(row["REF"]))
            _on_sequence(path, lineno, row["CHROM"], start, end, sizes)
            values = [abs(_number(path, lineno, c, row[c])) for c in deltas]
            finite = [v for v in values if math.isfinite(v)]
            if finite:
                best = max(range(len(values)), key=lambda i: values[i] if math.isfinite(values[i]) else -1.0)
                yield -max(finite), order, row, start, end, _DELTA.fullmatch(deltas[best]).group(1)  # type: ignore[union-attr]

    loci = []  # the n best kept while the table streams by (a VCF's table may have millions of rows)
    for rank, (key, _order, row, start, end, ds) in enumerate(heapq.nsmallest(n, scored(), key=lambda t: t[:2]), 1):
        vid = row.get("ID", ".")
        label = vid if vid not in ("", ".") else f"{row['CHROM']}:{row['POS']}"
        detail = f"{row['REF']}>{row['ALT']}, |delta mean| {-key:.4g} ({ds})"
        loci.append(Locus("variant", rank, label, row["CHROM"], start, end, -key, detail))
    return loci


def _peaks(path, sizes: dict[str, int]) -> Iterator[tuple]:
    """(-signalValue, line order, fields, start, end, signalValue) of each peak of a narrowPeak file."""
    for order, (lineno, f) in enumerate(_lines(path)):
        if f[0] in ("track", "browser") or f[0].startswith(("track ", "browser ")):
            continue
        if len(f) < 10:
            raise ChromaflowError(f"{path} line {lineno}: {len(f)} fields, a narrowPeak line has 10")
        start = _number(path, lineno, "chromStart", f[1], int)
        end = _number(path, lineno, "chromEnd", f[2], int)
        _on_sequence(path, lineno, f[0], start, end, sizes)
        signal = _number(path, lineno, "signalValue", f[6])
        yield (-signal if math.isfinite(signal) else math.inf), order, f, start, end, signal


def top_peaks(paths: list[str], n: int, sizes: dict[str, int]) -> list[Locus]:
    """The strongest peaks of each narrowPeak file.

    Parameters
    ----------
    paths
        narrowPeak files (one per dataset; the dataset named after the file's name up to its first dot).
    n
        How many to keep per file.
    sizes
        Sequence lengths of the FASTA.

    Returns
    -------
    list of Locus
        Per file in the given order, signalValue largest first, ties in file order.
    """
    loci = []
    for path in paths:
        dataset = Path(path).name.split(".")[0]
        peaks = heapq.nsmallest(n, _peaks(path, sizes), key=lambda t: t[:2])
        for rank, (_k, _o, f, start, end, signal) in enumerate(peaks, 1):
            detail = f"{dataset}, signal {signal:.4g}, {end - start} bp"
            loci.append(Locus("peak", rank, f[3], f[0], start, end, signal, detail))
    return loci


def promoter_extremes(path, n: int, sizes: dict[str, int], dataset: str | None = None) -> list[Locus]:
    """The promoter windows of the most and the least accessible genes of a ``gene-accessibility`` table.

    Parameters
    ----------
    path
        The table (``<id>.gene_accessibility.tsv``).
    n
        How many genes of each end.
    sizes
        Sequence lengths of the FASTA.
    dataset
        Whose ``mean_<dataset>`` ranks the genes; None: the table's first.

    Returns
    -------
    list of Locus
        ``promoter high`` (highest first), then ``promoter low`` (lowest first, none of the high ones); ties in
        table order; genes without a finite mean are left out.
    """
    header, rows = _table(path)
    _need(path, header, ["gene_id", "seqid", "window_start", "window_end"], "chromaflow gene-accessibility")
    means = [m.group(1) for c in header if (m := _MEAN.fullmatch(c)) and not c.endswith("_same_strand")]
    if not means:
        raise ChromaflowError(f"{path}: no mean_<dataset> column (not a chromaflow gene-accessibility table)")
    if dataset is None:
        dataset = means[0]
    elif dataset not in means:
        raise ChromaflowError(f"--gene-dataset {dataset!r}: not a dataset of {path} ({', '.join(means)})")
    genes = []
    for order, (lineno, row) in enumerate(rows):
        start = _number(path, lineno, "window_start", row["window_start"], int)
        end = _number(path, lineno, "window_end", row["window_end"], int)
        _on_sequence(path, lineno, row["seqid"], start, end, sizes)
        value = _number(path, lineno, f"mean_{dataset}", row[f"mean_{dataset}"])
        if math.isfinite(value):
            genes.append((value, order, row, start, end))
    high = sorted(genes, key=lambda t: (-t[0], t[1]))[:n]
    taken = {t[1] for t in high}
    low = [t for t in sorted(genes, key=lambda t: (t[0], t[1])) if t[1] not in taken][:n]
    loci = []
    for section, chosen in (("promoter high", high), ("promoter low", low)):
        for rank, (value, _o, row, start, end) in enumerate(chosen, 1):
            detail = f"mean {dataset} {value:.4g}, TSS {row.get('tss', '?')} ({row.get('strand', '.')})"
            loci.append(Locus(section, rank, row["gene_id"], row["seqid"], start, end, value, detail))
    return loci


def with_views(loci: list[Locus], flank: int, sizes: dict[str, int]) -> list[Locus]:
    """``loci`` with their windows: ``flank`` bases either side of the feature, clipped to the sequence."""
    out = []
    for locus in loci:
        view_start = max(0, locus.start - flank)
        view_end = min(sizes[locus.chrom], max(locus.end, locus.start + 1) + flank)
        out.append(Locus(**{**locus.__dict__, "view_start": view_start, "view_end": view_end}))
    return out


def merged_windows(loci: list[Locus]) -> dict[str, list[tuple[int, int]]]:
    """The loci's windows per sequence, overlapping ones merged, sorted."""
    by_chrom: dict[str, list[tuple[int, int]]] = {}
    for locus in sorted(loci, key=lambda x: (x.chrom, x.view_start)):
        spans = by_chrom.setdefault(locus.chrom, [])
        if spans and locus.view_start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], locus.view_end))
        else:
            spans.append((locus.view_start, locus.view_end))
    return by_chrom
