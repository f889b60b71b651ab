"""Input parsing and output writing for the genie3 stages.

Every malformed input raises :class:`ChromaflowError` with a one-line message naming the file and the
line / column / gene at fault.
"""
from __future__ import annotations

import csv
import gzip
import hashlib
import io as _io
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..common import ChromaflowError, atomic_output

LAYOUTS = ("genes-x-samples", "samples-x-genes")
MIN_SAMPLES = 3
_NUMERIC = re.compile(r"^[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|nan|inf|infinity)$", re.I)


def looks_numeric(s: str) -> bool:
    return bool(_NUMERIC.match(s.strip()))


@dataclass
class Expression:
    """Expression matrix, gene-major float32 (genes x samples), with names."""

    values: np.ndarray  # (n_genes, n_samples) float32, C-contiguous
    genes: list[str]
    samples: list[str]
    path: str
    layout: str = ""  # as given (--layout)

    @property
    def n_genes(self) -> int:
        return self.values.shape[0]

    @property
    def n_samples(self) -> int:
        return self.values.shape[1]

    def fingerprint(self) -> str:
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
        raise ChromaflowError(f"{path}: the first column holds numbers, not gene names; with --layout genes-x-samples "
                              f"each line must start with a gene name (if genes are columns use --layout samples-x-genes)")
    return rows


def read_expression(path: str | Path, layout: str) -> Expression:
    """Read a TSV/CSV (optionally .gz) expression matrix in the stated ``layout``.

    samples-x-genes: the header names the genes; an optional first column of sample labels is
    recognised (header one field shorter than the rows, an empty corner cell, or non-numeric first
    column). genes-x-samples: the first column names the genes; the header names the samples (with or
    without a corner cell).
    """
    path = Path(path)
    _check_path(path, layout)
    header, hline, data_lines, labels, arrays, width = None, 0, [], [], [], None
    has_label = False
    for ln, r in _table_rows(path):
        if header is None:
            header, hline = r, ln
            continue
        if width is None:
            width = len(r)
            has_label, col_names = _columns(path, header, hline, r, ln)
        elif len(r) != width:
            raise ChromaflowError(f"{path}: line {ln}: {len(r)} fields, expected {width} "
                                  f"(as on line {data_lines[0]})")
        row = r[1:] if has_label else r
        try:
            with np.errstate(over="ignore"):  # 1e40 -> inf is reported below, not warned about
                arr = np.array(row, dtype=np.float32)
        except ValueError:
            for c, v in enumerate(row):
                try:
                    float(v)
                except ValueError:
                    what = "empty cell (missing value)" if v == "" else f"non-numeric value {v!r}"
                    raise ChromaflowError(
                        f"{path}: {_cell(layout, ln, r[0] if has_label else None, c + 1 + has_label, col_names[c])}"
                        f": {what}") from None
            raise ChromaflowError(f"{path}: line {ln}: unparsable numbers") from None
        if not np.isfinite(arr).all():
            c = int(np.flatnonzero(~np.isfinite(arr))[0])
            v = row[c]
            if v.strip().lower().lstrip("+-").startswith(("nan", "inf")):
                what = f"non-finite value {v!r} (NaN/inf are not allowed; impute or drop first)"
            else:
                what = f"value {v!r} overflows float32 (|x| must be below 3.4e38)"
            raise ChromaflowError(
                f"{path}: {_cell(layout, ln, r[0] if has_label else None, c + 1 + has_label, col_names[c])}"
                f": {what}")
        data_lines.append(ln)
        labels.append(r[0] if has_label else str(len(labels) + 1))
        arrays.append(arr)
    if header is None or not arrays:
        raise ChromaflowError(f"{path}: needs a header line and at least one data line")
    row_labels = labels
    mat = np.vstack(arrays)  # peak: the rows + the matrix (2 x float32 size), never Python floats per cell
    del arrays


    if layout == "samples-x-genes":
        genes, samples = list(col_names), row_labels
        if all(looks_numeric(g) for g in genes):
            raise ChromaflowError(
                f"{path}: line {hline}: the header holds numbers ({', '.join(genes[:3])}, ...), not gene names; "
                f"if genes are rows use --layout genes-x-samples, else add a header of gene names")
        values = np.ascontiguousarray(mat.T)
        del mat
        gene_axis = f"line {hline} (header)"
    else:
        if not has_label:
            raise ChromaflowError(
                f"{path}: the first column holds numbers, not gene names; with --layout genes-x-samples "
                f"each line must start with a gene name (if genes are columns use --layout samples-x-genes)")
        genes, samples = row_labels, list(col_names)
        values = np.ascontiguousarray(mat)
        gene_axis = "column 1"
    for i, g in enumerate(genes):
        if g == "":
            raise ChromaflowError(f"{path}: {gene_axis}: gene {i + 1} has an empty name")
        if looks_numeric(g):
            hint = ("genes-x-samples" if layout == "samples-x-genes" else "samples-x-genes")
            raise ChromaflowError(f"{path}: {gene_axis}: gene name {g!r} looks like a number; gene names must be "
                                  f"non-numeric labels (wrong layout? try --layout {hint})")
    seen: dict[str, int] = {}
    for i, g in enumerate(genes):
        if g in seen:
            raise ChromaflowError(f"{path}: {gene_axis}: duplicated gene name {g!r} (genes {seen[g] + 1} and {i + 1})")
        seen[g] = i
    # both axes carry text labels: the layout cannot be proven; flag the unusual shape
    if layout == "samples-x-genes" and has_label and not all(looks_numeric(x) for x in samples) \
            and len(samples) > 2 * len(genes):
        import sys
        print(f"chromaflow genie3: warning: {path}: {len(samples)} labelled rows (samples) but only {len(genes)} "
              f"gene columns; if rows are genes use --layout genes-x-samples", file=sys.stderr)
    if values.shape[1] < MIN_SAMPLES:
        k = values.shape[1]
        raise ChromaflowError(f"{path}: only {k} sample{'' if k == 1 else 's'}; GENIE3 needs at least {MIN_SAMPLES} "
                              f"(is --layout {layout} right?)")
    if values.shape[0] < 2:
        raise ChromaflowError(f"{path}: only {values.shape[0]} gene; GENIE3 needs at least 2 "
                              f"(is --layout {layout} right?)")
    const = values.min(axis=1) == values.max(axis=1)
    if const.all():
        raise ChromaflowError(f"{path}: every gene is constant across the samples (e.g. {genes[0]!r}); "
                              f"there is nothing to infer")
    return Expression(values=values, genes=genes, samples=samples, path=str(path), layout=layout)


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
        return (f"{line}{more}; all {listed} regulators are sample labels of it and none is a gene: the layout "
                f"looks swapped (wrong --layout?); try --layout {other}")
    return f"{line}{more}{' (it is a sample label: wrong --layout?)' if name in samples else ''}"


# --------------------------------------------------------------------------------------------------
# outputs
# --------------------------------------------------------------------------------------------------
class _GzipMembers:
    """Write text as a sequence of gzip members (a valid .gz file: readers concatenate members), each
    compressed in one call by libdeflate (the pinned ``deflate`` package) -- about 8x faster than the gzip
    module at level 6 and smaller. No file name or time stamp: identical text gives identical bytes.

    A member is cut at the first ``write`` that brings the text to >= MEMBER bytes, so the bytes depend only on
    the text and the sequence of writes, never on ``threads``: with threads > 1 members are compressed on a
    thread pool (libdeflate runs outside the GIL for most of a call) while the caller produces the next ones,
    and written in order; at most 2 x threads members wait in memory."""

    LEVEL = 4
    MEMBER = 4 << 20  # bytes of text per member

    def __init__(self, fh, threads: int = 1):
        self.fh = fh
        self.buf: list[bytes] = []
        self.size = 0
        self.threads = max(1, int(threads))
        self.pool = None
        self.pending: list = []

    def write(self, data: bytes) -> None:
        self.buf.append(data)
        self.size += len(data)
        if self.size >= self.MEMBER:
            self.flush()

    def flush(self) -> None:
        if not self.buf:
            return
        import deflate

        data = b"".join(self.buf)
        self.buf, self.size = [], 0
        if self.threads == 1:
            self.fh.write(deflate.gzip_compress(data, self.LEVEL))
            return
        if self.pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(self.threads, thread_name_prefix="chromaflow-gzip")
        self.pending.append(self.pool.submit(deflate.gzip_compress, data, self.LEVEL))
        while len(self.pending) > 2 * self.threads:
            self.fh.write(self.pending.pop(0).result())

    def close(self) -> None:
        """Flush, write every pending member, stop the pool."""
        try:
            self.flush()
            while self.pending:
                self.fh.write(self.pending.pop(0).result())
        finally:
            if self.pool is not None:
                self.pool.shutdown(wait=True, cancel_futures=True)
                self.pool = None


def self_mask(reg_idx: np.ndarray, tgt_idx: np.ndarray) -> np.ndarray:
    """Boolean R x T matrix, True where regulator == target (self-links, never reported)."""
    return reg_idx[:, None] == tgt_idx[None, :]


def _name_order(names: list[str]) -> np.ndarray:
    """Indices of ``names`` in (byte-order) sorted order, ties (never, names are unique) by position."""
    return np.argsort(np.array(names, dtype=object), kind="stable")


def ranked_links(W: np.ndarray, reg_names: list[str], tgt_names: list[str], reg_idx: np.ndarray,
                 tgt_idx: np.ndarray, limit: int = 0):
    """Order of the (regulator, target) pairs of W (R x T), self-links excluded; the first ``limit``
    (0 = all).

    Sort key: importance descending, then regulator name, then target name (byte order) - a total,
    deterministic order. Returns (rows, cols) index arrays into W. With a limit only the entries >= the
    limit-th largest value are sorted (exact: every tie at the cut is included before sorting).

    How (the order is exactly that of ``np.lexsort((target rank, regulator rank, -value))``, ~6x faster at
    25 M pairs): the candidate pairs are first listed in (regulator name, target name) order, so that one
    stable sort by value (:func:`_order_desc`) gives the whole order.
    """
    R, T = W.shape
    rord = _name_order(reg_names)
    cord = _name_order(tgt_names)
    rrank = np.empty(R, dtype=np.int64)
    rrank[rord] = np.arange(R)
    trank = np.empty(T, dtype=np.int64)
    trank[cord] = np.arange(T)
    # self-links at their positions in name order (at most one per regulator)
    tpos = {int(g): j for j, g in enumerate(tgt_idx)}
    selfs = np.array(sorted(int(rrank[i]) * T + int(trank[tpos[int(g)]]) for i, g in enumerate(reg_idx)
                            if int(g) in tpos), dtype=np.int64)
    n_self = len(selfs)
    if limit and 0 < limit < R * T - n_self:
        # only the candidates (entries >= the cut) are ordered, read in place: listed in name order but given
        # by their own flat positions in W (ties keep list order, so the name order still breaks them)
        flat = W.ravel()
        k = min(limit + n_self, R * T)  # self entries could be among the k largest; never more than n_self
        cand = _entries_at_or_above_kth(flat, k)
        rows, cols = np.divmod(cand, T)
        key = rrank[rows] * T + trank[cols]                # unique: any sort gives the same order
        keep = ~np.isin(key, selfs)
        cand = cand[keep][np.argsort(key[keep])]
        return _order_desc(flat, cand, T, np.arange(R), np.arange(T), min(limit, len(cand)))
    identity = np.array_equal(rord, np.arange(R)) and np.array_equal(cord, np.arange(T))
    wp = (W if identity else W[np.ix_(rord, cord)]).ravel()  # W in name order: position = rrank * T + trank
    if n_self:
        keep = np.ones(R * T, dtype=bool)
        keep[selfs] = False
        nk = np.flatnonzero(keep)
        del keep
    else:
        nk = None                                          # every pair, in name order
    n = R * T if nk is None else len(nk)
    return _order_desc(wp, nk, T, rord, cord, min(limit, n) if limit and limit > 0 else n)


#: values per block when the --max-links candidates are found (memory: about 2 blocks of float64, not R x T)
LIMIT_BLOCK = 1 << 22


def _entries_at_or_above_kth(flat: np.ndarray, k: int) -> np.ndarray:
    """Positions (ascending) of the values >= the k-th largest of ``flat``, found block by block: the k largest
    seen so far are kept and merged with the next block (``np.partition``'s order, NaN largest), so memory stays
    at max(k, LIMIT_BLOCK) values instead of a copy of the whole matrix (7.2 GB at 30,000 x 30,000) and an R x T
    boolean mask. Same positions as ``np.flatnonzero(flat >= np.partition(flat, n - k)[n - k])``."""
    n = len(flat)
    block = max(LIMIT_BLOCK, k)
    top = flat[:0]
    for a in range(0, n, block):
        merged = np.concatenate([top, flat[a:a + block]])
        top = np.partition(merged, len(merged) - k)[len(merged) - k:] if len(merged) > k else merged
    thr = np.partition(top, 0)[0] if len(top) > 1 else top[0]
    return np.concatenate([np.flatnonzero(flat[a:a + block] >= thr) + a for a in range(0, n, block)])


def _order_desc(wp: np.ndarray, nk: np.ndarray | None, T: int, rord: np.ndarray, cord: np.ndarray,
                nout: int) -> tuple[np.ndarray, np.ndarray]:
    """Elements i with value ``wp[nk[i]]`` (``nk`` None: ``wp[i]``) in stable order of value descending (ties
    keep i's order; -0.0 == 0.0); the first ``nout``, as (rord[position // T], cord[position % T]) of their
    positions nk[i]. The C radix sort of ``_links.c`` (~5x faster than ``np.lexsort`` at 25 M values);
    ``np.lexsort`` without a compiler, for non-finite values or 2^32 positions and more. Both give the same
    order (tests compare them)."""
    wp = np.ascontiguousarray(wp, dtype=np.float64)
    rord = np.ascontiguousarray(rord, dtype=np.int64)
    cord = np.ascontiguousarray(cord, dtype=np.int64)
    pos = None if nk is None else np.ascontiguousarray(nk, dtype=np.int64)
    m = len(wp) if pos is None else len(pos)
    lib = _links_lib()
    # only the values that are sorted need to be finite (the --max-links path sorts a few candidates of W)
    finite = np.isfinite(wp).all() if pos is None else np.isfinite(wp[pos]).all()
    if lib is not None and 0 < m and len(wp) <= (1 << 32) and finite:
        rows = np.empty(nout, dtype=np.int64)
        cols = np.empty(nout, dtype=np.int64)
        if lib.genie3_order_desc(wp.ctypes.data, None if pos is None else pos.ctypes.data, m, T, rord.ctypes.data,
                                 cord.ctypes.data, nout, rows.ctypes.data, cols.ctypes.data) == 0:
            return rows, cols
    if pos is None:
        pos = np.arange(len(wp), dtype=np.int64)
    order = pos[np.lexsort((np.arange(m), -(wp[pos] + 0.0)))][:nout]
    r, c = np.divmod(order, T)
    return rord[r], cord[c]


_LINKS_LIB: dict = {}


def _links_lib():
    """The C link formatter (``_links.c``, compiled once into the cache), or None without a compiler, with
    CHROMAFLOW_GENIE3_NO_CC=1 (tests), or when the C locale's decimal point is not '.'."""
    if "lib" not in _LINKS_LIB:
        import ctypes
        import locale
        import os

        from chromaflow.native import build as cbuild

        lib = None
        if os.environ.get("CHROMAFLOW_GENIE3_NO_CC") != "1" and locale.localeconv()["decimal_point"] == ".":
            try:
                so = cbuild.build(Path(__file__).with_name("_links.c"), ["-O2", "-fPIC", "-shared", "-std=c99"],
                                  "genie3-kernel", "libgenie3links")
                lib = ctypes.CDLL(str(so))
                lib.genie3_format_links.restype = ctypes.c_int64
                lib.genie3_order_desc.restype = ctypes.c_int
                lib.genie3_order_desc.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                                  ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                                  ctypes.c_void_p, ctypes.c_void_p]
                lib.genie3_format_links.argtypes = [ctypes.c_void_p] * 7 + [ctypes.c_int64, ctypes.c_void_p,
                                                                           ctypes.c_int64]
            except (cbuild.BuildError, OSError):
                lib = None
        _LINKS_LIB["lib"] = lib
    return _LINKS_LIB["lib"]


def _name_table(names: list[str]) -> tuple[bytes, np.ndarray]:
    enc = [n.encode() for n in names]
    off = np.zeros(len(enc) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in enc], out=off[1:])
    return b"".join(enc), off


def write_links(path: str | Path, W: np.ndarray, reg_names: list[str], tgt_names: list[str],
                rows: np.ndarray, cols: np.ndarray, threads: int = 1) -> int:
    """Write the gzip TSV link list ``regulator<TAB>target<TAB>importance`` (header line, %.9g) for the
    ranked pairs (rows, cols) of W.

    Lines are formatted in C (``_links.c``) on ``threads`` threads, members compressed on ``threads`` threads;
    the bytes are the same as the pure-Python path's (used without a compiler) and do not depend on
    ``threads``. ``path`` is written directly: the caller passes a temporary (report.finish_outputs)."""
    step = 1 << 16
    lib = _links_lib()
    with open(path, "wb") as fh:
        gz = _GzipMembers(fh, threads)
        try:
            gz.write(b"regulator\ttarget\timportance\n")
            if lib is None:
                regs = np.array(reg_names, dtype=object)
                tgts = np.array(tgt_names, dtype=object)
                for s in range(0, len(rows), step):
                    r, c = rows[s:s + step], cols[s:s + step]
                    v = W[r, c]
                    lines = [f"{a}\t{b}\t{x:.9g}\n" for a, b, x in zip(regs[r], tgts[c], v.tolist())]
                    gz.write("".join(lines).encode())
            else:
                _write_links_c(lib, gz, W, reg_names, tgt_names, rows, cols, step, threads)
        finally:
            gz.close()
    return len(rows)


def _write_links_c(lib, gz, W, reg_names, tgt_names, rows, cols, step, threads) -> None:
    rb, roff = _name_table(reg_names)
    tb, toff = _name_table(tgt_names)
    per_line = int(np.diff(roff).max(initial=0) + np.diff(toff).max(initial=0)) + 2 + 32
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    cols = np.ascontiguousarray(cols, dtype=np.int64)

    def fmt(s: int) -> bytes:
        r, c = rows[s:s + step], cols[s:s + step]
        v = np.ascontiguousarray(W[r, c], dtype=np.float64)
        cap = per_line * len(r)
        out = np.empty(cap, dtype=np.uint8)
        n = lib.genie3_format_links(rb, roff.ctypes.data, tb, toff.ctypes.data, r.ctypes.data, c.ctypes.data,
                                    v.ctypes.data, len(r), out.ctypes.data, cap)
        if n < 0:
            raise RuntimeError("link formatting overflowed its buffer")  # cannot happen: cap is an upper bound
        return out[:n].tobytes()

    starts = list(range(0, len(rows), step))
    if threads <= 1:
        for s in starts:
            gz.write(fmt(s))
        return
    from concurrent.futures import ThreadPoolExecutor

    window = 4 * threads
    with ThreadPoolExecutor(threads, thread_name_prefix="chromaflow-links") as ex:
        for i in range(0, len(starts), window):
            for text in ex.map(fmt, starts[i:i + window]):
                gz.write(text)


def write_weights(path: str | Path, W: np.ndarray, reg_names: list[str], tgt_names: list[str]) -> None:
    """Full weight matrix as gzip TSV: rows = regulators, columns = targets, corner cell 'regulator'; ``path`` is
    written directly (a temporary of report.finish_outputs)."""
    with open(path, "wb") as fh:
        gz = _GzipMembers(fh)
        gz.write(("regulator\t" + "\t".join(tgt_names) + "\n").encode())
        for i, name in enumerate(reg_names):
            gz.write((name + "\t" + "\t".join(f"{x:.9g}" for x in W[i].tolist()) + "\n").encode())
        gz.close()


PART_FORMAT = "chromaflow-genie3-part/1"


def write_part(path: str | Path, W: np.ndarray, meta: dict) -> None:
    """A target-chunk result: .npz with the float64 weight columns and a JSON metadata string."""
    meta = dict(meta, format=PART_FORMAT)
    buf = _io.BytesIO()
    np.savez_compressed(buf, weights=np.ascontiguousarray(W, dtype=np.float64),
                        meta=np.array(json.dumps(meta, sort_keys=True)))
    with atomic_output(path) as tmp:
        tmp.write_bytes(buf.getvalue())


def read_part(path: str | Path) -> tuple[np.ndarray, dict]:
    path = Path(path)
    if not path.is_file():
        raise ChromaflowError(f"{path}: part file not found")
    try:
        with np.load(path, allow_pickle=False) as z:
            W = z["weights"]
            meta = json.loads(str(z["meta"]))
    except Exception as exc:  # noqa: BLE001 - any unreadable file is a user error here
        raise ChromaflowError(f"{path}: not a chromaflow genie3 part file ({type(exc).__name__}: {exc})") from None
    if meta.get("format") != PART_FORMAT:
        raise ChromaflowError(f"{path}: not a chromaflow genie3 part file (format {meta.get('format')!r})")
    return W, meta
