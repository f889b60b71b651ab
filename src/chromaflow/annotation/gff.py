"""A streaming reader of the genes (or transcripts) of a GFF3 or GTF file, plain or gzip.

Written here rather than taken from gffutils / gtfparse / pyranges because only one feature type is needed, in
one pass and little memory, with every defect reported as one line naming the file and line: gffutils first builds
an SQLite database of every feature (minutes and GBs on a plant annotation), gtfparse reads GTF only. The reader is
tested against gffutils run side by side (tests/annotation/test_gff_reader.py).

Rules:

* The format comes from the name (``.gff``, ``.gff3`` -> GFF3; ``.gtf`` -> GTF; a ``.gz`` suffix is stripped),
  else from a ``##gff-version 3`` line or the first attribute column. A file named GFF3 whose attributes are in
  GTF syntax (``key "value";``) is refused, and the other way round: the gene ids would be wrong.
* ``feature="gene"``: GFF3 lines of type ``gene``; GTF lines of type ``gene``, and every ``gene_id`` without a
  gene line (all of them in a GTF without gene lines; StringTie's loci merged into a reference GTF) as the span of
  its other lines (its transcripts and exons: the lowest start, the highest end, their strand; lines of one such
  id on two seqids or strands are an error naming the id and both lines). ``feature="mRNA"``: GFF3 ``mRNA``
  (``transcript`` where there is no mRNA); GTF ``transcript`` lines, and every ``transcript_id`` without one as
  the span of its lines. No gene is dropped: one that cannot be tabulated is an error.
* The id: GFF3 ``ID`` (percent-decoded), GTF ``gene_id`` / ``transcript_id`` (as written: GTF has no
  percent-encoding). One rule for both: an id may not hold whitespace or control characters (they would break
  the TSV and BED columns the ids go into). A feature without an id, a repeated id, a strand other than + or -,
  start < 1 or end < start are errors naming the line. The lines may come in any order; ``##FASTA`` ends the
  annotation part. A UTF-8 byte-order mark and CRLF line ends are accepted.
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from ..utils.errors import ChromaflowError


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
    # utf-8-sig: a byte-order mark (a Windows editor's) is skipped, as in sheets and matrices
    if magic == b"\x1f\x8b":
        return gzip.open(fh, "rt", encoding="utf-8-sig", newline=None)
    fh.close()
    return open(path, "rt", encoding="utf-8-sig", newline=None)


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


def read_genes(path: str, feature: str = "gene", counts: dict | None = None) -> list[Gene]:
    """The genes (``feature="gene"``) or transcripts (``"mRNA"``) of an annotation, in the order of their lines.

    Parameters
    ----------
    path : str
        A GFF3 or GTF file, plain or gzip (the rules: this module's docstring).
    feature : str
        ``"gene"`` or ``"mRNA"``.
    counts : dict, optional
        Filled, when given, for the metrics: ``genes_read`` (the genes returned), ``genes_from_spans`` (GTF ids
        without a gene (transcript) line, tabulated from the span of their lines) and ``other_gene_types``
        ({type: lines} of GFF3 gene-like types that are not ``gene``, e.g. Ensembl's ``ncRNA_gene``: not read).

    Returns
    -------
    list of Gene
        Every gene of the annotation; one that cannot be tabulated raises a one-line
        :class:`~chromaflow.utils.errors.ChromaflowError` naming the file and line, none is dropped.
    """
    if feature not in ("gene", "mRNA"):
        raise ChromaflowError(f"--feature must be gene or mRNA (got {feature!r})")
    fmt = format_from_name(path)
    try:
        with _open_text(path) as fh:
            reader = _Reader(path, fmt, feature)
            for n, line in enumerate(fh, 1):
                if not reader.add(n, line):
                    break
            genes = reader.genes()
    except UnicodeDecodeError:
        raise ChromaflowError(f"{path}: not a text annotation (not UTF-8 and not gzip)") from None
    except (OSError, EOFError) as exc:  # a truncated gzip member
        raise ChromaflowError(f"{path}: cannot read annotation ({getattr(exc, 'strerror', None) or exc})") from None
    if counts is not None:
        counts.update(
            genes_read=len(genes),
            genes_from_spans=reader.from_spans,
            other_gene_types=dict(sorted(reader.other.items())),
        )
    return genes


class _Span:
    """The lines of one GTF id seen so far: seqid, 0-based start, end, strand, first line, and the first line that
    disagrees with the first on seqid or strand (``conflict``: (line, seqid, strand), or None)."""

    __slots__ = ("seqid", "start", "end", "strand", "line", "conflict")

    def __init__(self, seqid: str, start: int, end: int, strand: str, line: int):
        self.seqid, self.start, self.end, self.strand, self.line = seqid, start, end, strand, line
        self.conflict: tuple[int, str, str] | None = None

    def add(self, seqid: str, start: int, end: int, strand: str, line: int) -> None:
        """Widen the span by one line, noting the first line on another seqid or strand."""
        if (seqid != self.seqid or strand != self.strand) and self.conflict is None:
            self.conflict = (line, seqid, strand)
        self.start, self.end = min(self.start, start), max(self.end, end)


class _Reader:
    """One pass over the lines of an annotation (:meth:`add`), then its genes (:meth:`genes`)."""

    def __init__(self, path: str, fmt: str | None, feature: str):
        self.path, self.fmt, self.feature = path, fmt, feature
        # GFF3: the wanted types in order of preference; GTF: the line type and the id attribute
        self.gff_types = ("gene",) if feature == "gene" else ("mRNA", "transcript")
        self.gtf_type, self.gtf_key = ("gene", "gene_id") if feature == "gene" else ("transcript", "transcript_id")
        self.found: dict[str, list] = {t: [] for t in self.gff_types}
        self.other: dict[str, int] = {}  # GFF3 gene-like types that are not read
        self.gtf_lines: list = []  # GTF lines of gtf_type: (line number, columns)
        self.spans: dict[str, _Span] = {}  # GTF: id -> the span of its other lines
        self.have_line: set[str] = set()  # GTF: the ids of the gtf_type lines so far
        self.checked = False
        self.from_spans = 0
        self.key_re = re.compile(r'(?:^|;)\s*' + self.gtf_key + r'\s+"([^"]*)"')

    def add(self, n: int, line: str) -> bool:
        """Take line ``n``; False at ``##FASTA`` (the end of the annotation part)."""
        if line.startswith("#"):
            if line.startswith("##FASTA"):
                return False
            if self.fmt is None and line.startswith("##gff-version"):
                self.fmt = "gff3" if line.split()[1:2] and line.split()[1].startswith("3") else None
            return True
        if not line.strip():
            return True
        cols = line.rstrip("\n").split("\t")
        if len(cols) != 9:
            raise ChromaflowError(f"{self.path} line {n}: {len(cols)} tab-separated columns, expected 9 (GFF3/GTF)")
        if not self.checked:
            self.fmt = _settle_format(self.fmt, cols[8], self.path, n)
            self.checked = True
        ftype = cols[2]
        if self.fmt == "gff3":
            if ftype in self.found:
                self.found[ftype].append((n, cols))
            elif self.feature == "gene" and (ftype.endswith("_gene") or ftype == "pseudogene"):
                self.other[ftype] = self.other.get(ftype, 0) + 1
        elif ftype == self.gtf_type:
            self.gtf_lines.append((n, cols))
            m = self.key_re.search(cols[8])
            if m:
                self.have_line.add(m.group(1))
        else:
            m = self.key_re.search(cols[8])  # only the id: every exon line passes here
            gid = m.group(1) if m else None
            if gid and gid not in self.have_line:  # a gene line seen already decides (spans are for the others)
                seqid, start, end, strand = _coords(cols, self.path, n)
                s = self.spans.get(gid)
                if s is None:
                    self.spans[gid] = _Span(seqid, start, end, strand, n)
                else:
                    s.add(seqid, start, end, strand, n)
        return True

    def genes(self) -> list[Gene]:
        """The genes read, in the order of their (first) lines; a one-line error where there are none."""
        if self.fmt == "gff3":
            rows = next((self.found[t] for t in self.gff_types if self.found[t]), [])
            genes = [_gene(cols, _gff3_id(cols, self.path, n), self.path, n) for n, cols in rows]
        else:
            genes = _gtf_genes(self.gtf_lines, self.gtf_type, self.gtf_key, self.path)
            spanned = self._span_genes({g.gene_id for g in genes})
            self.from_spans = len(spanned)
            genes = sorted(genes + spanned, key=lambda g: g.line)
        if not genes:
            what = (
                " or ".join(self.gff_types) if self.fmt == "gff3" else f"{self.gtf_type} (or {self.gtf_key} attributes)"
            )
            raise ChromaflowError(f"{self.path}: no {what} features (--feature {self.feature}) in the annotation")
        _check_unique(genes, self.path)
        return genes

    def _span_genes(self, have_line: set[str]) -> list[Gene]:
        """The GTF ids without a line of their own, each as the span of its lines."""
        out = []
        for gid, s in self.spans.items():
            if gid in have_line:
                continue
            if s.conflict is not None:
                n, seqid, strand = s.conflict
                raise ChromaflowError(
                    f"{self.path} line {n}: {self.gtf_key} {gid!r} has no {self.gtf_type} line and its lines "
                    f"disagree: on {seqid} {strand} here but on {s.seqid} {s.strand} at line {s.line}; "
                    f"give it a {self.gtf_type} line or fix its lines"
                )
            _check_id(gid, self.gtf_key, self.path, s.line)
            out.append(Gene(gid, s.seqid, s.start, s.end, _strand(s.strand, self.path, s.line), s.line))
        return out


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
        _check_id(gid, gtf_key, path, n)
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
    _check_id(gid, "ID", path, n)
    return gid


_NAMED = {" ": "a space", "\t": "a tab", "\r": "a carriage return", "\n": "a line feed"}


def _check_id(gid: str, what: str, path: str, n: int) -> None:
    """The id rule of GFF3 (after percent-decoding) and GTF alike: no whitespace, no control characters."""
    bad = next((c for c in gid if c.isspace() or not c.isprintable()), None)
    if bad is not None:
        name = _NAMED.get(bad) or f"the {'whitespace' if bad.isspace() else 'control'} character U+{ord(bad):04X}"
        raise ChromaflowError(
            f"{path} line {n}: {what} {gid!r} holds {name}; an id may not hold whitespace or control characters "
            "(they would break the TSV and BED columns it goes into)"
        )


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
