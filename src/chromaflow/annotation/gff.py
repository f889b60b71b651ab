"""A streaming reader of the genes (or transcripts) of a GFF3 or GTF file, plain or gzip.

Written here rather than taken from gffutils / gtfparse / pyranges because only one feature type is needed, in
one pass and little memory, with every defect reported as one line naming the file and line: gffutils first builds
an SQLite database of every feature (minutes and GBs on a plant annotation), gtfparse reads GTF only. The reader is
tested against gffutils run side by side (tests/annotation/test_gff_reader.py).

Rules:

* The format comes from the name (``.gff``, ``.gff3`` -> GFF3; ``.gtf`` -> GTF; a ``.gz`` suffix is stripped),
  else from a ``##gff-version 3`` line or the first attribute column. A file named GFF3 whose attributes are in
  GTF syntax (``key "value";``) is refused, and the other way round: the gene ids would be wrong.
* ``feature="gene"``: GFF3 lines of type ``gene``; GTF lines of type ``gene``, or where a GTF has none, the span
  of all lines of each ``gene_id``. ``feature="mRNA"``: GFF3 ``mRNA`` (``transcript`` where there is no mRNA);
  GTF ``transcript`` lines, else the span of each ``transcript_id``.
* The id: GFF3 ``ID`` (percent-decoded), GTF ``gene_id`` / ``transcript_id``. A feature without one, a repeated
  id, a strand other than + or -, start < 1 or end < start are errors naming the line. The lines may come in any
  order; ``##FASTA`` ends the annotation part.
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from ..errors import ChromaflowError


@dataclass(frozen=True)
class Gene:
    """One gene (or transcript) of an annotation: its id, seqid, ``start`` and ``end`` (0-based, half-open), strand
    ('+' or '-') and the 1-based line of its feature."""

    gene_id: str
    seqid: str
    start: int  # 0-based, inclusive
    end: int  # 0-based, exclusive
    strand: str  # + or -
    line: int  # 1-based line of the feature (the first line of a GTF span)

    @property
    def tss(self) -> int:
        """0-based coordinate of the transcription start site (the first base on the gene's strand)."""
        return self.start if self.strand == "+" else self.end - 1


_GTF_ATTR = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_.]*)\s+"([^"]*)"\s*;?')


def format_from_name(path: str) -> str | None:
    """'gff3' or 'gtf' from the file name's extension (.gff3, .gff, .gtf, any case, optionally .gz); None for any
    other."""
    name = Path(path).name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    if name.endswith((".gff3", ".gff")):
        return "gff3"
    if name.endswith(".gtf"):
        return "gtf"
    return None


def _open_text(path: str):
    try:
        fh = open(path, "rb")
        magic = fh.read(2)
        fh.seek(0)
    except OSError as exc:
        raise ChromaflowError(f"{path}: cannot read annotation ({exc.strerror or exc})") from None
    if magic == b"\x1f\x8b":
        return gzip.open(fh, "rt", encoding="utf-8", newline=None)
    fh.close()
    return open(path, "rt", encoding="utf-8", newline=None)


def _gff3_attrs(text: str) -> dict[str, str]:
    out = {}
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        key, eq, value = part.partition("=")
        if eq:
            out[key.strip()] = value
    return out


def _gtf_attrs(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in _GTF_ATTR.finditer(text)}


def _looks_gtf(attrs: str) -> bool:
    return bool(_GTF_ATTR.match(attrs)) and "=" not in attrs.split(";")[0]


def read_genes(path: str, feature: str = "gene") -> list[Gene]:
    """The genes (``feature="gene"``) or transcripts (``"mRNA"``) of ``path``, in file order."""
    if feature not in ("gene", "mRNA"):
        raise ChromaflowError(f"--feature must be gene or mRNA (got {feature!r})")
    fmt = format_from_name(path)
    try:
        with _open_text(path) as fh:
            return _read(fh, path, fmt, feature)
    except UnicodeDecodeError:
        raise ChromaflowError(f"{path}: not a text annotation (not UTF-8 and not gzip)") from None
    except (OSError, EOFError) as exc:  # a truncated gzip member
        raise ChromaflowError(f"{path}: cannot read annotation ({getattr(exc, 'strerror', None) or exc})") from None


def _read(fh, path: str, fmt: str | None, feature: str) -> list[Gene]:
    # GFF3: the wanted types in order of preference; GTF: the line type, else spans of the id attribute
    gff_types = ("gene",) if feature == "gene" else ("mRNA", "transcript")
    gtf_type, gtf_key = ("gene", "gene_id") if feature == "gene" else ("transcript", "transcript_id")
    found: dict[str, list] = {t: [] for t in gff_types}
    spans: dict[str, list] = {}  # GTF: id -> [seqid, start, end, strand, line]
    gtf_lines: list = []
    checked = False
    for n, line in enumerate(fh, 1):
        if line.startswith("#"):
            if line.startswith("##FASTA"):
                break
            if fmt is None and line.startswith("##gff-version"):
                fmt = "gff3" if line.split()[1:2] and line.split()[1].startswith("3") else None
            continue
        if not line.strip():
            continue
        cols = line.rstrip("\n").split("\t")
        if len(cols) != 9:
            raise ChromaflowError(f"{path} line {n}: {len(cols)} tab-separated columns, expected 9 (GFF3/GTF)")
        if not checked:
            fmt = _settle_format(fmt, cols[8], path, n)
            checked = True
        ftype = cols[2]
        if fmt == "gff3":
            if ftype in found:
                found[ftype].append((n, cols))
            continue
        if ftype == gtf_type:
            gtf_lines.append((n, cols))
        elif not gtf_lines:
            attrs = _gtf_attrs(cols[8])
            gid = attrs.get(gtf_key)
            if gid:
                seqid, start, end, strand = _coords(cols, path, n)
                s = spans.get(gid)
                if s is None:
                    spans[gid] = [seqid, start, end, strand, n]
                else:
                    if s[0] != seqid or s[3] != strand:
                        raise ChromaflowError(
                            f"{path} line {n}: {gtf_key} {gid!r} is on {seqid} {strand} here but "
                            f"on {s[0]} {s[3]} at line {s[4]}"
                        )
                    s[1] = min(s[1], start)
                    s[2] = max(s[2], end)
    if fmt == "gff3":
        rows = next((found[t] for t in gff_types if found[t]), [])
        genes = [_gene(cols, _gff3_id(cols, path, n), path, n) for n, cols in rows]
    elif gtf_lines:
        genes = _gtf_genes(gtf_lines, gtf_type, gtf_key, path)
    else:
        genes = [Gene(gid, s[0], s[1], s[2], _strand(s[3], path, s[4]), s[4]) for gid, s in spans.items()]
    if not genes:
        what = " or ".join(gff_types) if fmt == "gff3" else f"{gtf_type} (or {gtf_key} attributes)"
        raise ChromaflowError(f"{path}: no {what} features (--feature {feature}) in the annotation")
    _check_unique(genes, path)
    return genes


def _settle_format(fmt: str | None, attrs: str, path: str, n: int) -> str:
    """The format, from the name's (``fmt``), else from the first feature line's attribute column ``attrs`` (line
    ``n``); a name whose format the attributes contradict is refused."""
    gtf_like = _looks_gtf(attrs)
    if fmt is None:
        return "gtf" if gtf_like else "gff3"
    if fmt == "gff3" and gtf_like:
        raise ChromaflowError(
            f"{path} line {n}: attributes in GTF syntax (key \"value\";) in a file named "
            "GFF3; name it .gtf (or .gtf.gz) if it is GTF"
        )
    if fmt == "gtf" and "=" in attrs.split(";")[0] and not gtf_like:
        raise ChromaflowError(
            f"{path} line {n}: attributes in GFF3 syntax (key=value) in a file named GTF; name it .gff3 if it is GFF3"
        )
    return fmt


def _gtf_genes(lines: list, gtf_type: str, gtf_key: str, path: str) -> list[Gene]:
    """The genes of the GTF ``gtf_type`` lines ((line number, columns) each), their id the ``gtf_key`` attribute."""
    genes = []
    for n, cols in lines:
        gid = _gtf_attrs(cols[8]).get(gtf_key)
        if not gid:
            raise ChromaflowError(f"{path} line {n}: {gtf_type} line without a {gtf_key} attribute")
        genes.append(_gene(cols, gid, path, n))
    return genes


def _check_unique(genes: list[Gene], path: str) -> None:
    """Every id once: a repeat is an error naming its line and the first."""
    seen: dict[str, int] = {}
    for g in genes:
        if g.gene_id in seen:
            raise ChromaflowError(
                f"{path} line {g.line}: id {g.gene_id!r} repeats the feature of line {seen[g.gene_id]}"
            )
        seen[g.gene_id] = g.line


def _gff3_id(cols: list[str], path: str, n: int) -> str:
    gid = _gff3_attrs(cols[8]).get("ID")
    if not gid:
        raise ChromaflowError(f"{path} line {n}: {cols[2]} feature without an ID attribute")
    gid = unquote(gid)
    if any(c.isspace() for c in gid):
        raise ChromaflowError(f"{path} line {n}: ID {gid!r} holds whitespace, which would break the TSV columns")
    return gid


def _coords(cols: list[str], path: str, n: int):
    try:
        start, end = int(cols[3]), int(cols[4])
    except ValueError:
        raise ChromaflowError(f"{path} line {n}: start {cols[3]!r} / end {cols[4]!r} are not integers") from None
    if start < 1 or end < start:
        raise ChromaflowError(f"{path} line {n}: start {start}, end {end}: need 1 <= start <= end (1-based, inclusive)")
    return cols[0], start - 1, end, cols[6]


def _strand(strand: str, path: str, n: int) -> str:
    if strand not in ("+", "-"):
        raise ChromaflowError(f"{path} line {n}: strand {strand!r}; a TSS needs + or -")
    return strand


def _gene(cols: list[str], gid: str, path: str, n: int) -> Gene:
    seqid, start, end, strand = _coords(cols, path, n)
    return Gene(gid, seqid, start, end, _strand(strand, path, n), n)


def check_against_sizes(genes: list[Gene], sizes: dict[str, int], path: str, source: str) -> None:
    """Every gene on a sequence of ``sizes`` (from ``source``) and inside it."""
    for g in genes:
        size = sizes.get(g.seqid)
        if size is None:
            raise ChromaflowError(
                f"{path} line {g.line}: {g.gene_id}: seqid {g.seqid!r} is not in {source} "
                f"(it has {', '.join(list(sizes)[:5])}{', ...' if len(sizes) > 5 else ''})"
            )
        if g.end > size:
            raise ChromaflowError(
                f"{path} line {g.line}: {g.gene_id} ends at {g.end}, past the end of {g.seqid} ({size} bp in {source})"
            )


def tss_windows(genes: list[Gene], sizes: dict[str, int], upstream: int, downstream: int):
    """(tss, window_start, window_end) per gene: ``upstream`` bp before the TSS and ``downstream`` bp from it on,
    on the gene's strand, 0-based half-open, clipped at the record's ends."""
    out = []
    for g in genes:
        t = g.tss
        if g.strand == "+":
            s, e = t - upstream, t + downstream
        else:
            s, e = t + 1 - downstream, t + 1 + upstream
        out.append((t, max(0, s), min(sizes[g.seqid], e)))
    return out
