"""The inputs of the genie3 stages: the expression matrix (TSV/CSV, optionally gzip, either layout) and the
regulators file.

Every malformed input raises :class:`ChromaflowError` with a one-line message naming the file and the
line / column / gene at fault; what is only suspicious (a layout that may be swapped) is returned as warnings
(:attr:`Expression.warnings`) for the CLI to print.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..utils.errors import ChromaflowError

LAYOUTS = ("genes-x-samples", "samples-x-genes")
MIN_SAMPLES = 3
_NUMERIC = re.compile(r"^[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|nan|inf|infinity)$", re.I)


def looks_numeric(s: str) -> bool:
    """Whether ``s`` (surrounding blanks ignored) reads as a number: decimal or exponent notation, or nan / inf /
    infinity (any case)."""
    return bool(_NUMERIC.match(s.strip()))


@dataclass
class Expression:
    """Expression matrix, gene-major float32 (genes x samples), with names."""

    values: np.ndarray  # (n_genes, n_samples) float32, C-contiguous
    genes: list[str]
    samples: list[str]
    path: str
    layout: str = ""  # as given (--layout)
    warnings: list[str] = field(default_factory=list)  # one line each, for the CLI to print

    @property
    def n_genes(self) -> int:
        """Rows of the matrix: the genes."""
        return self.values.shape[0]

    @property
    def n_samples(self) -> int:
        """Columns of the matrix: the samples."""
        return self.values.shape[1]

    def fingerprint(self) -> str:
        """SHA-256 (hex) of the gene names and the matrix's values: the same genes in the same order with the same
        values give the same fingerprint."""
        h = hashlib.sha256()
        h.update("\n".join(self.genes).encode())
        h.update(b"\0")
        h.update(np.ascontiguousarray(self.values).tobytes())
        return h.hexdigest()


_MAGIC = {b"BZh": "bzip2", b"\xfd7zXZ": "xz", b"\x28\xb5\x2f\xfd": "zstd", b"PK\x03\x04": "zip"}


def _open_text(path: Path):
    """Plain or gzip text (recognised by its magic bytes, whatever the name); other compressions -> error.
    A UTF-8 byte order mark (Excel's "CSV UTF-8") is skipped."""
    with open(path, "rb") as fh:
        head = fh.read(6)
    if head[:2] == b"\x1f\x8b":
        return gzip.open(path, "rt", newline="", encoding="utf-8-sig")
    for magic, kind in _MAGIC.items():
        if head.startswith(magic):
            raise ChromaflowError(f"{path}: {kind}-compressed; expression tables may be plain or gzip (.gz) only")
    return open(path, "r", newline="", encoding="utf-8-sig")


def _cell(layout: str, line: int, row_label: str | None, col: int, col_name: str) -> str:
    """'line L (gene/sample 'x'), column C (sample/gene 'y')' for error messages."""
    row_kind, col_kind = ("sample", "gene") if layout == "samples-x-genes" else ("gene", "sample")
    row = f" ({row_kind} {row_label!r})" if row_label is not None else ""
    return f"line {line}{row}, column {col} ({col_kind} {col_name!r})"


def _sniff_delimiter(path: Path, first_line: str) -> str:
    name = str(path).lower().removesuffix(".gz")
    if name.endswith(".csv"):
        return ","
    if name.endswith((".tsv", ".txt", ".tab")):
        return "\t" if "\t" in first_line or "," not in first_line else ","
    if "\t" in first_line:
        return "\t"
    if "," in first_line:
        return ","
    raise ChromaflowError(f"{path}: cannot tell the delimiter (expected TAB- or comma-separated values)")


def _columns(path: Path, header: list[str], hline: int, first: list[str], ln: int) -> tuple[bool, list[str]]:
    """(has a label column, names of the data columns) from the header and the first data line."""
    width = len(first)
    if len(header) == width - 1:
        has_label, col_names = True, header
    elif len(header) == width:
        has_label = header[0] == "" or not looks_numeric(first[0])
        col_names = header[1:] if has_label else header
    else:
        raise ChromaflowError(f"{path}: line {hline}: header has {len(header)} fields but data line {ln} has {width}")
    if not col_names:
        raise ChromaflowError(f"{path}: no data columns")
    return has_label, list(col_names)


def _check_path(path: Path, layout: str) -> None:
    if layout not in LAYOUTS:
        raise ChromaflowError(f"--layout must be one of {', '.join(LAYOUTS)} (got {layout!r})")
    if path.is_dir():
        raise ChromaflowError(f"{path}: is a directory, not an expression table")
    if not path.is_file():
        raise ChromaflowError(f"{path}: expression file not found")


def _table_rows(path: Path):
    """(line number, cells stripped) of each non-blank line of a TSV/CSV table (plain or gzip, delimiter sniffed
    from line 1), streamed; unreadable text and malformed CSV become one-line ChromaflowErrors naming the file."""
    try:
        with _open_text(path) as fh:
            first = fh.readline()
            if not first.strip():
                raise ChromaflowError(f"{path}: line 1: empty file or empty header")
            delim = _sniff_delimiter(path, first)
            fh.seek(0)
            reader = csv.reader(fh, delimiter=delim)
            for r in reader:  # one row of strings in memory at a time
                r = [c.strip() for c in r]
                if any(r):
                    yield reader.line_num, r
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError) as exc:
        raise ChromaflowError(f"{path}: not a readable text table ({exc})") from None
    except csv.Error as exc:
        raise ChromaflowError(f"{path}: malformed CSV/TSV ({exc})") from None


def count_genes(path: str | Path, layout: str) -> int:
    """Number of genes of an expression table, by the same delimiter and label rules as
    :func:`read_expression` but without parsing the values (for planning target chunks; the genie3 task
    itself validates the table). samples-x-genes reads only the first two lines."""
    path = Path(path)
    _check_path(path, layout)
    header, hline, has_label, rows = None, 0, False, 0
    for ln, r in _table_rows(path):
        if header is None:
            header, hline = r, ln
            continue
        if rows == 0:
            has_label, col_names = _columns(path, header, hline, r, ln)
            if layout == "samples-x-genes":
                return len(col_names)
        rows += 1
    if header is None or rows == 0:
        raise ChromaflowError(f"{path}: needs a header line and at least one data line")
    if not has_label:
        raise _numeric_first_column(path)
    return rows


def _numeric_first_column(path: Path) -> ChromaflowError:
    return ChromaflowError(
        f"{path}: the first column holds numbers, not gene names; with --layout genes-x-samples "
        f"each line must start with a gene name (if genes are columns use --layout "
        f"samples-x-genes)"
    )


@dataclass
class _Table:
    """The data lines of an expression table as read, before the layout gives them a meaning."""

    values: np.ndarray  # (data lines, data columns) float32
    labels: list[str]  # first cell of each data line, or its number ("1", "2", ...) without a label column
    columns: list[str]  # names of the data columns (from the header)
    has_label: bool  # the data lines start with a label column
    header_line: int


def read_expression(path: str | Path, layout: str) -> Expression:
    """Read a TSV/CSV (optionally .gz) expression matrix in the stated ``layout``.

    samples-x-genes: the header names the genes; an optional first column of sample labels is
    recognised (header one field shorter than the rows, an empty corner cell, or non-numeric first
    column). genes-x-samples: the first column names the genes; the header names the samples (with or
    without a corner cell). A layout that reads either way but looks swapped gives a line in ``warnings``.
    """
    path = Path(path)
    _check_path(path, layout)
    table = _read_table(path, layout)
    genes, samples, values, gene_axis = _orient(path, layout, table)
    _check_gene_names(path, layout, genes, gene_axis)
    warnings = _layout_warnings(path, layout, table.has_label, genes, samples)
    _check_shape(path, layout, values, genes)
    return Expression(values=values, genes=genes, samples=samples, path=str(path), layout=layout, warnings=warnings)


def _read_table(path: Path, layout: str) -> _Table:
    """Every data line parsed as float32, all of one width; one line of text in memory at a time."""
    labels: list[str]
    col_names: list[str]
    header, hline, data_lines, labels, arrays, width = None, 0, [], [], [], None
    has_label, col_names = False, []
    for ln, r in _table_rows(path):
        if header is None:
            header, hline = r, ln
            continue
        if width is None:
            width = len(r)
            has_label, col_names = _columns(path, header, hline, r, ln)
        elif len(r) != width:
            raise ChromaflowError(f"{path}: line {ln}: {len(r)} fields, expected {width} (as on line {data_lines[0]})")
        arrays.append(_parse_line(path, layout, ln, r, has_label, col_names))
        data_lines.append(ln)
        labels.append(r[0] if has_label else str(len(labels) + 1))
    if header is None or not arrays:
        raise ChromaflowError(f"{path}: needs a header line and at least one data line")
    mat = np.vstack(arrays)  # peak: the rows + the matrix (2 x float32 size), never Python floats per cell
    return _Table(values=mat, labels=labels, columns=list(col_names), has_label=has_label, header_line=hline)


def _parse_line(path: Path, layout: str, ln: int, r: list[str], has_label: bool, col_names: list[str]) -> np.ndarray:
    """The numbers of one data line as float32; a cell that is not a finite float32 is named in the error."""
    row = r[1:] if has_label else r
    label = r[0] if has_label else None
    try:
        with np.errstate(over="ignore"):  # 1e40 -> inf is reported below, not warned about
            arr = np.array(row, dtype=np.float32)
    except ValueError:
        for c, v in enumerate(row):
            try:
                float(v)
            except ValueError:
                what = "empty cell (missing value)" if v == "" else f"non-numeric value {v!r}"
                where = _cell(layout, ln, label, c + 1 + has_label, col_names[c])
                raise ChromaflowError(f"{path}: {where}: {what}") from None
        raise ChromaflowError(f"{path}: line {ln}: unparsable numbers") from None
    if not np.isfinite(arr).all():
        c = int(np.flatnonzero(~np.isfinite(arr))[0])
        v = row[c]
        if v.strip().lower().lstrip("+-").startswith(("nan", "inf")):
            what = f"non-finite value {v!r} (NaN/inf are not allowed; impute or drop first)"
        else:
            what = f"value {v!r} overflows float32 (|x| must be below 3.4e38)"
        raise ChromaflowError(f"{path}: {_cell(layout, ln, label, c + 1 + has_label, col_names[c])}: {what}")
    return arr


def _orient(path: Path, layout: str, table: _Table) -> tuple[list[str], list[str], np.ndarray, str]:
    """(genes, samples, gene-major values, where the gene names stand) of a table in ``layout``."""
    if layout == "samples-x-genes":
        genes = table.columns
        if all(looks_numeric(g) for g in genes):
            raise ChromaflowError(
                f"{path}: line {table.header_line}: the header holds numbers ({', '.join(genes[:3])}, ...), not "
                f"gene names; if genes are rows use --layout genes-x-samples, else add a header of gene names"
            )
        values = np.ascontiguousarray(table.values.T)
        table.values = values  # the row-major matrix is no longer needed: drop it now (peak memory)
        return genes, table.labels, values, f"line {table.header_line} (header)"
    if not table.has_label:
        raise _numeric_first_column(path)
    return table.labels, table.columns, np.ascontiguousarray(table.values), "column 1"


def _check_gene_names(path: Path, layout: str, genes: list[str], gene_axis: str) -> None:
    for i, g in enumerate(genes):
        if g == "":
            raise ChromaflowError(f"{path}: {gene_axis}: gene {i + 1} has an empty name")
        if looks_numeric(g):
            hint = "genes-x-samples" if layout == "samples-x-genes" else "samples-x-genes"
            raise ChromaflowError(
                f"{path}: {gene_axis}: gene name {g!r} looks like a number; gene names must be "
                f"non-numeric labels (wrong layout? try --layout {hint})"
            )
    seen: dict[str, int] = {}
    for i, g in enumerate(genes):
        if g in seen:
            raise ChromaflowError(f"{path}: {gene_axis}: duplicated gene name {g!r} (genes {seen[g] + 1} and {i + 1})")
        seen[g] = i


def _layout_warnings(path: Path, layout: str, has_label: bool, genes: list[str], samples: list[str]) -> list[str]:
    """Both axes carry text labels: the layout cannot be proven; flag the unusual shape."""
    if (
        layout == "samples-x-genes"
        and has_label
        and not all(looks_numeric(x) for x in samples)
        and len(samples) > 2 * len(genes)
    ):
        return [
            f"{path}: {len(samples)} labelled rows (samples) but only {len(genes)} gene columns; if rows are "
            f"genes use --layout genes-x-samples"
        ]
    return []


def _check_shape(path: Path, layout: str, values: np.ndarray, genes: list[str]) -> None:
    """Enough samples and genes, and not every gene constant."""
    if values.shape[1] < MIN_SAMPLES:
        k = values.shape[1]
        raise ChromaflowError(
            f"{path}: only {k} sample{'' if k == 1 else 's'}; GENIE3 needs at least {MIN_SAMPLES} "
            f"(is --layout {layout} right?)"
        )
    if values.shape[0] < 2:
        raise ChromaflowError(
            f"{path}: only {values.shape[0]} gene; GENIE3 needs at least 2 (is --layout {layout} right?)"
        )
    const = values.min(axis=1) == values.max(axis=1)
    if const.all():
        raise ChromaflowError(
            f"{path}: every gene is constant across the samples (e.g. {genes[0]!r}); there is nothing to infer"
        )


def read_regulators(path: str | Path, expr: Expression) -> list[int]:
    """Regulator names, one per line (blank lines and '#' comments ignored) -> gene indices (file order)."""
    path = Path(path)
    if path.is_dir():
        raise ChromaflowError(f"{path}: is a directory, not a regulators file")
    if not path.is_file():
        raise ChromaflowError(f"{path}: regulators file not found")
    index = {g: i for i, g in enumerate(expr.genes)}
    out: list[int] = []
    seen: dict[str, int] = {}
    unknown: list[tuple[int, str]] = []
    try:
        with _open_text(path) as fh:
            lines = fh.read().splitlines()
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError) as exc:
        raise ChromaflowError(f"{path}: not a readable text file of regulator names ({exc})") from None
    for ln, line in enumerate(lines, 1):
        name = line.split("#", 1)[0].strip().strip('"').strip("'")
        if not name:
            continue
        if "\t" in name or "," in name:
            name = re.split(r"[\t,]", name)[0].strip().strip('"')
        if name in seen:
            raise ChromaflowError(f"{path}: line {ln}: regulator {name!r} listed twice (first on line {seen[name]})")
        seen[name] = ln
        if name not in index:
            unknown.append((ln, name))
            continue
        out.append(index[name])
    if unknown:
        raise ChromaflowError(_unknown_regulators(path, expr, unknown, len(seen)))
    if not out:
        raise ChromaflowError(f"{path}: no regulator names")
    return out


def _unknown_regulators(path: Path, expr: Expression, unknown: list[tuple[int, str]], listed: int) -> str:
    """The one line for regulators that are not genes. When every regulator listed is a sample label and none a
    gene, the matrix (both axes named, so it reads either way) was given in the other layout: say which to use."""
    ln, name = unknown[0]
    line = f"{path}: line {ln}: regulator {name!r} is not a gene of {expr.path}"
    more = f" and {len(unknown) - 1} more" if len(unknown) > 1 else ""
    samples = set(expr.samples)
    if len(unknown) == listed and all(n in samples for _, n in unknown) and expr.layout in LAYOUTS:
        other = LAYOUTS[1 - LAYOUTS.index(expr.layout)]
        return (
            f"{line}{more}; all {listed} regulators are sample labels of it and none is a gene: the layout "
            f"looks swapped (wrong --layout?); try --layout {other}"
        )
    return f"{line}{more}{' (it is a sample label: wrong --layout?)' if name in samples else ''}"
