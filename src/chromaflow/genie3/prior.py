"""``genie3 --prior``: a regulator -> target prior (motif-prior's table) turned into split-candidate weights.

Two layouts, told apart by the header (docs/genie3.md "Prior"):

* long table: a header naming ``regulator``, ``target`` and ``prior`` columns (others, e.g. ``hits`` and
  ``accessibility``, ignored); one row per pair; pairs not listed are 0.5;
* matrix: any other header: its cells after the first are regulator names, each line a target name then one
  value per regulator (Inferelator's and DIOgene's targets x regulators layout).

Tab- or comma-separated (the header line decides), plain or gzip. NA, NaN or an empty cell is 0.5 (no
information). Genes absent from the expression matrix are ignored (a genome-wide prior names genes a filtered
matrix lacks); a prior of which no (regulator, target) pair is in the run is an error (wrong identifiers).

Weights, DIOgene's link from pi to the weight of a candidate (alpha in [0, 1]): pi = 1 -> 1 + sqrt(1 - (alpha-1)^2),
pi = 0.5 -> 1 - alpha, pi = 0 -> 1 - sqrt(1 - (alpha-1)^2); between those points linearly (a continuous pi, e.g.
an accessibility-weighted one). alpha = 0 gives every candidate weight 1: the run is the unweighted one.
"""

from __future__ import annotations

import gzip
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..utils.errors import ChromaflowError

NA = ("", "na", "nan", "n/a", "none", "null")
#: integer weights for the kernel: weight (in [0, 2]) x 2^30, floored, a positive weight never below 1
SCALE = float(1 << 30)


@dataclass
class Prior:
    """Sparse prior over gene indices of the expression: pi[k] of (reg[k], tgt[k]); every other pair 0.5."""

    reg: np.ndarray  # int64 gene indices
    tgt: np.ndarray  # int64 gene indices
    pi: np.ndarray  # float64 in [0, 1]
    layout: str  # "long" or "matrix"
    pairs_read: int  # value cells/rows read (NA included)
    ignored: int  # of them naming a gene absent from the expression
    path: str


def _open(path: Path):
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rt", encoding="utf-8", newline="") if gz else open(path, encoding="utf-8", newline="")


def _value(path: Path, ln: int, cell: str, what: str) -> float:
    c = cell.strip().strip('"')
    if c.lower() in NA:
        return 0.5
    try:
        v = float(c)
    except ValueError:
        raise ChromaflowError(f"{path}: line {ln}: {what}: prior {cell!r} is not a number or NA") from None
    if not (0.0 <= v <= 1.0):
        raise ChromaflowError(f"{path}: line {ln}: {what}: prior {cell!r} is outside [0, 1]")
    return v


def read_prior(path: str | Path, genes: list[str]) -> Prior:
    """Read a prior (either layout) against the expression's gene names (one-line errors naming file and line).

    Parameters
    ----------
    path : str or Path
        The prior table: a long table (regulator, target, prior columns) or a targets x regulators matrix, TSV or
        CSV, plain or gzip.
    genes : list of str
        The expression matrix's gene names, in its order (the indices of the returned pairs).

    Returns
    -------
    Prior
        The pairs whose value differs from 0.5 or is listed in a long table: ``reg`` and ``tgt`` (int64 gene
        indices) and ``pi`` (float64 in [0, 1]), each of shape (pairs,).
    """
    path = Path(path)
    if path.is_dir():
        raise ChromaflowError(f"{path}: is a directory, not a prior table")
    if not path.is_file():
        raise ChromaflowError(f"{path}: prior file not found")
    index = {g: i for i, g in enumerate(genes)}
    try:
        with _open(path) as fh:
            h = _header(path, fh)
            layout = "long" if "regulator" in h.low and "target" in h.low else "matrix"
            pairs = (_read_long if layout == "long" else _read_matrix)(path, fh, h, index)
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError, OSError) as exc:
        raise ChromaflowError(f"{path}: not a readable prior table ({type(exc).__name__}: {exc})") from None
    if pairs.read == 0:
        raise ChromaflowError(f"{path}: no prior values (header only)")
    if pairs.read == pairs.ignored:
        raise ChromaflowError(
            f"{path}: none of its {pairs.read} (regulator, target) pairs names two genes of the "
            f"expression matrix (different gene identifiers?)"
        )
    return Prior(
        reg=np.asarray(pairs.reg, dtype=np.int64),
        tgt=np.asarray(pairs.tgt, dtype=np.int64),
        pi=np.asarray(pairs.pi, dtype=np.float64),
        layout=layout,
        pairs_read=pairs.read,
        ignored=pairs.ignored,
        path=str(path),
    )


@dataclass
class _Header:
    """The prior table's header line: its line number, text, separator (TAB if it has one, else comma) and cells
    (blanks and quotes stripped; ``low``: lower case)."""

    line: int
    text: str
    sep: str
    cols: list[str]
    low: list[str]


@dataclass
class _Pairs:
    """The (regulator, target, pi) triples kept so far (gene indices), with the counts of values read and of them
    naming a gene absent from the expression."""

    reg: list[int] = field(default_factory=list)
    tgt: list[int] = field(default_factory=list)
    pi: list[float] = field(default_factory=list)
    read: int = 0
    ignored: int = 0

    def add(self, r: int, t: int, v: float) -> None:
        """Keep the value ``v`` of regulator ``r`` -> target ``t``."""
        self.reg.append(r)
        self.tgt.append(t)
        self.pi.append(v)


def _header(path: Path, fh) -> _Header:
    """The header: the first line that is neither blank nor a # comment."""
    for hl, line in enumerate(fh, 1):
        if line.strip() and not line.startswith("#"):
            header = line.rstrip("\r\n")
            sep = "\t" if "\t" in header else ","
            cols = [c.strip().strip('"') for c in header.split(sep)]
            return _Header(hl, header, sep, cols, [c.lower() for c in cols])
    raise ChromaflowError(f"{path}: empty prior file (no header line)")


def _data_lines(fh, start: int):
    """(line number, line without its end) of the lines after the header, blank lines and # comments skipped."""
    for ln, line in enumerate(fh, start):
        s = line.rstrip("\r\n")
        if not s.strip() or s.startswith("#"):
            continue
        yield ln, s


def _read_long(path: Path, fh, h: _Header, index: dict[str, int]) -> _Pairs:
    """The rows of a long table (regulator, target, prior columns; a pair at most once)."""
    if "prior" not in h.low:
        raise ChromaflowError(
            f"{path}: line {h.line}: long prior table without a 'prior' column (header: {h.text[:80]!r})"
        )
    ir, it, ip = h.low.index("regulator"), h.low.index("target"), h.low.index("prior")
    need = max(ir, it, ip) + 1
    pairs = _Pairs()
    seen: dict[tuple[int, int], int] = {}
    for ln, s in _data_lines(fh, h.line + 1):
        f = s.split(h.sep)
        if len(f) < need:
            raise ChromaflowError(f"{path}: line {ln}: {len(f)} fields, the header has {len(h.cols)}")
        r, t = f[ir].strip().strip('"'), f[it].strip().strip('"')
        v = _value(path, ln, f[ip], f"{r} -> {t}")
        pairs.read += 1
        if r not in index or t not in index:
            pairs.ignored += 1
            continue
        key = (index[r], index[t])
        if key in seen:
            raise ChromaflowError(f"{path}: line {ln}: pair {r} -> {t} listed twice (first on line {seen[key]})")
        seen[key] = ln
        pairs.add(key[0], key[1], v)
    return pairs


def _read_matrix(path: Path, fh, h: _Header, index: dict[str, int]) -> _Pairs:
    """The rows of a targets x regulators matrix (a target per line at most once; values of 0.5 not kept)."""
    names = h.cols[1:]
    if not names:
        raise ChromaflowError(
            f"{path}: line {h.line}: neither a long table (columns regulator, target, "
            f"prior) nor a targets x regulators matrix (no regulator columns)"
        )
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ChromaflowError(f"{path}: line {h.line}: regulator column {sorted(dup)[0]!r} appears twice")
    ridx = [index.get(n, -1) for n in names]
    pairs = _Pairs()
    rows_seen: dict[str, int] = {}
    for ln, s in _data_lines(fh, h.line + 1):
        f = s.split(h.sep)
        if len(f) != len(h.cols):
            raise ChromaflowError(f"{path}: line {ln}: {len(f)} fields, the header has {len(h.cols)}")
        t = f[0].strip().strip('"')
        if t in rows_seen:
            raise ChromaflowError(f"{path}: line {ln}: target {t!r} listed twice (first on line {rows_seen[t]})")
        rows_seen[t] = ln
        ti = index.get(t, -1)
        for j, cell in enumerate(f[1:]):
            v = _value(path, ln, cell, f"{names[j]} -> {t}")
            pairs.read += 1
            if ti < 0 or ridx[j] < 0:
                pairs.ignored += 1
                continue
            if v != 0.5:
                pairs.add(ridx[j], ti, v)
    return pairs


def link_points(alpha: float) -> tuple[float, float, float]:
    """Weights of pi = 0, 0.5 and 1 (DIOgene's link)."""
    s = math.sqrt(max(0.0, 1.0 - (alpha - 1.0) ** 2))
    return 1.0 - s, 1.0 - alpha, 1.0 + s


def weights_of(pi: np.ndarray, alpha: float) -> np.ndarray:
    """Candidate weights of prior values ``pi`` (piecewise linear through the three points of link_points)."""
    w0, wh, w1 = link_points(alpha)
    pi = np.asarray(pi, dtype=np.float64)
    lo = w0 + (wh - w0) * (pi / 0.5)
    hi = wh + (w1 - wh) * ((pi - 0.5) / 0.5)
    return np.where(pi <= 0.5, lo, hi)


def quantise(w: np.ndarray) -> np.ndarray:
    """Integer kernel weights: floor(w * 2^30), at least 1 where w > 0 (0 stays 0: never a candidate)."""
    w = np.asarray(w, dtype=np.float64)
    q = np.floor(w * SCALE)
    q = np.where(w > 0, np.maximum(q, 1.0), 0.0)
    return q.astype(np.uint32)


class PriorWeights:
    """The kernel's uint32 weights of any block of targets, for a fixed regulator order (gene indices)."""

    def __init__(self, prior: Prior, alpha: float, reg_idx: np.ndarray):
        self.alpha = float(alpha)
        self.reg_idx = np.asarray(reg_idx, dtype=np.int64)
        self.default = quantise(weights_of(np.array([0.5]), alpha))[0]
        rpos = np.full(max(int(self.reg_idx.max(initial=-1)), int(prior.reg.max(initial=-1))) + 1, -1, dtype=np.int64)
        rpos[self.reg_idx] = np.arange(len(self.reg_idx))
        keep = rpos[prior.reg] >= 0 if len(prior.reg) else np.zeros(0, dtype=bool)
        self.rows = rpos[prior.reg[keep]]
        self.tgt = prior.tgt[keep]
        self.q = quantise(weights_of(prior.pi[keep], alpha))
        order = np.argsort(self.tgt, kind="stable")
        self.rows, self.tgt, self.q = self.rows[order], self.tgt[order], self.q[order]

    def block(self, targets: np.ndarray) -> np.ndarray:
        """R x len(targets) uint32: the default (pi = 0.5) weight, the prior's entries filled in."""
        targets = np.asarray(targets, dtype=np.int64)
        out = np.full((len(self.reg_idx), len(targets)), self.default, dtype=np.uint32)
        for j, g in enumerate(targets.tolist()):
            a, b = np.searchsorted(self.tgt, [g, g + 1])
            out[self.rows[a:b], j] = self.q[a:b]
        return out
