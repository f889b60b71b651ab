"""Window statistics of predicted coverage: sum and max over 0-based half-open windows of each chromosome.

Predictions are read through the bigwig stage's reader (:class:`~chromaflow.bigwig.h5input.PredictionsInput`,
:class:`~chromaflow.bigwig.h5input.ChunkReader`, the same pieces and padding rules), so a window's values are
exactly those of the ``avg`` / ``+`` / ``-`` tracks ``chromaflow bigwig`` writes: the strand average is the
rounded half-to-even mean Predmoter's converter computes. Pieces are streamed; a window that crosses pieces is
accumulated across them, so memory stays at one piece whatever the chromosome's length.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..utils.errors import ChromaflowError
from .windows import GeneWindows

STRANDS = ("avg", "+", "-")
#: the first 4 bytes of a bigWig file (0x888FFC26, little endian)
BIGWIG_MAGIC = bytes.fromhex("26fc8f88")


@dataclass
class WindowStats:
    """Per dataset and strand: sum (int64/float64) and max over each window; n = window length."""

    n: np.ndarray
    sums: dict  # (dataset, strand) -> array
    maxs: dict


def _accumulate(
    v: np.ndarray, off: int, starts: np.ndarray, ends: np.ndarray, sums: np.ndarray, maxs: np.ndarray
) -> None:
    """Add the part of each window inside v (genome [off, off + len(v))) to sums / maxs."""
    n = len(v)
    if not n or not len(starts):
        return
    a = np.clip(starts - off, 0, n)
    b = np.clip(ends - off, 0, n)
    sel = np.nonzero(b > a)[0]
    if not len(sel):
        return
    a, b = a[sel], b[sel]
    cs = np.zeros(n + 1, dtype=np.float64 if v.dtype.kind == "f" else np.int64)
    np.cumsum(v, out=cs[1:])
    sums[sel] += cs[b] - cs[a]
    # max over [a, b): reduceat over the interleaved bounds (a sentinel element keeps b == n a valid index)
    ext = np.concatenate([v, v[-1:]])
    idx = np.empty(2 * len(a), dtype=np.int64)
    idx[0::2], idx[1::2] = a, b
    m = np.maximum.reduceat(ext, idx)[0::2]
    maxs[sel] = np.maximum(maxs[sel], m)


def predictions_window_stats(
    path: str, windows: dict[str, tuple[np.ndarray, np.ndarray]], strands=STRANDS
) -> tuple[list[str], dict]:
    """Sums and maxima of every window of ``windows`` ({seqid: (starts, ends)}) in the predictions h5 ``path``:
    (datasets, {seqid: WindowStats}). Seqids of ``windows`` must be in the file (checked by the caller)."""
    from ..bigwig.convert import BLOCK_BP, PIECE_CHUNKS, pieces, track_vector
    from ..bigwig.h5input import ChunkReader

    inp = open_predictions(path)
    try:
        chroms = [c for c in inp.chroms if c.name in windows]
        reader = ChunkReader(inp, None, min(max(1, BLOCK_BP // inp.L), PIECE_CHUNKS))
        need = {
            c: ("avg" in strands or "+" in strands, "avg" in strands or "-" in strands)
            for c in range(len(inp.datasets))
        }
        out = {}
        try:
            cur, offset = None, 0
            for chrom, j, e, _, _ in pieces(chroms, max(1, BLOCK_BP // inp.L), PIECE_CHUNKS):
                if chrom is not cur:
                    cur, offset = chrom, 0
                    starts, ends = windows[chrom.name]
                    st = WindowStats(ends - starts, {}, {})
                    for d in inp.datasets:
                        for s in strands:
                            st.sums[(d, s)] = np.zeros(len(starts), dtype=np.int64)
                            st.maxs[(d, s)] = np.full(len(starts), np.iinfo(np.int64).min, dtype=np.int64)
                    out[chrom.name] = st
                data = reader.load(chrom.plus[j:e], chrom.minus[j:e], need)
                length = None
                for c, d in enumerate(inp.datasets):
                    piece = data[c]
                    if not piece.exact:  # values beyond 2**23: Predmoter's float32 arithmetic
                        for key in st.sums:
                            if st.sums[key].dtype != np.float64:
                                st.sums[key] = st.sums[key].astype(np.float64)
                                st.maxs[key] = st.maxs[key].astype(np.float64)
                    for s in strands:
                        v = track_vector(piece, s)
                        if length is not None and len(v) != length:
                            raise ChromaflowError(f"{path}: seqid {chrom.name!r}: strands differ in length")
                        length = len(v)
                        _accumulate(v, offset, starts, ends, st.sums[(d, s)], st.maxs[(d, s)])
                    piece.release()
                offset += length or 0
        finally:
            reader.close()
        return list(inp.datasets), out
    finally:
        inp.close()


def open_predictions(path: str):
    """The predictions file at ``path`` opened and validated (:class:`~chromaflow.bigwig.h5input.PredictionsInput`);
    the caller closes it."""
    from ..bigwig.h5input import PredictionsInput

    return PredictionsInput(path)


def predictions_sizes(path: str) -> dict[str, int]:
    """{seqid: size} of the chromosomes of a predictions file."""
    inp = open_predictions(path)
    try:
        return {c.name: c.size for c in inp.chroms}
    finally:
        inp.close()


def bigwig_sizes(path: str) -> dict[str, int]:
    """{chromosome: size} of a bigWig."""
    bw = _open_bigwig(path)
    try:
        return dict(bw.chroms())
    finally:
        bw.close()


def _open_bigwig(path: str):
    import pyBigWig

    try:
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise ChromaflowError(f"{path}: cannot read bigWig ({exc.strerror or exc})") from None
    if magic not in (BIGWIG_MAGIC, BIGWIG_MAGIC[::-1]):  # checked here: libBigWig prints its own lines to stderr
        raise ChromaflowError(f"{path}: not a bigWig file")
    bw = None
    try:
        bw = pyBigWig.open(path)
    except RuntimeError:
        pass
    if bw is None or not bw.isBigWig():
        raise ChromaflowError(f"{path}: not a bigWig file")
    return bw


def bigwig_window_stats(path: str, windows: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict:
    """{seqid: (sums, maxs)} of one bigWig over each window; bases the track does not cover count as 0."""
    bw = _open_bigwig(path)
    out = {}
    try:
        sizes = bw.chroms()
        for seqid, (starts, ends) in windows.items():
            if seqid not in sizes:
                raise ChromaflowError(f"{path}: seqid {seqid!r} is not in the bigWig")
            size = sizes[seqid]
            sums = np.zeros(len(starts))
            maxs = np.zeros(len(starts))
            for i, (s, e) in enumerate(zip(starts.tolist(), ends.tolist())):
                if e > size:
                    raise ChromaflowError(f"{path}: window {seqid}:{s}-{e} ends past {seqid} ({size} bp in the bigWig)")
                v = np.nan_to_num(np.asarray(bw.values(seqid, s, e, numpy=True), dtype=np.float64), nan=0.0)
                sums[i] = v.sum()
                maxs[i] = v.max() if len(v) else 0.0
            out[seqid] = (sums, maxs)
    finally:
        bw.close()
    return out


# ---------------------------------------------------------------------------- the per-gene table and BED
def _fmt_num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.4f}"


def percentile(values: np.ndarray) -> np.ndarray:
    """100 x (number of other values strictly lower) / (n - 1); 100 for a single value."""
    n = len(values)
    if n == 1:
        return np.array([100.0])
    lower = np.searchsorted(np.sort(values, kind="stable"), values, side="left")
    return 100.0 * lower / (n - 1)


def predictions_columns(gw: GeneWindows, path: str, extra: dict[str, tuple[np.ndarray, np.ndarray]] | None = None):
    """{column: values} of every dataset (avg and same strand) from a predictions h5; with ``extra``
    ({seqid: (starts, ends)} of more windows, e.g. motif hits), also their avg-strand means per dataset."""
    groups = gw.by_seqid()
    windows = {}
    for seqid, idx in groups.items():
        s, e = gw.start[idx], gw.end[idx]
        if extra and seqid in extra:
            s, e = np.concatenate([s, extra[seqid][0]]), np.concatenate([e, extra[seqid][1]])
        windows[seqid] = (s, e)
    datasets, stats = predictions_window_stats(path, windows)
    n = len(gw.genes)
    plus = np.array([g.strand == "+" for g in gw.genes])
    cols: dict[str, np.ndarray] = {}
    extra_means: dict[str, dict[str, np.ndarray]] = {d: {} for d in datasets}
    for d in datasets:
        mean = {s: np.zeros(n) for s in ("avg", "+", "-")}
        mx = {s: np.zeros(n) for s in ("avg", "+", "-")}
        for seqid, idx in groups.items():
            st = stats[seqid]
            k = len(idx)
            for s in ("avg", "+", "-"):
                mean[s][idx] = st.sums[(d, s)][:k] / st.n[:k]
                mx[s][idx] = st.maxs[(d, s)][:k]
            if extra and seqid in extra:
                extra_means[d][seqid] = st.sums[(d, "avg")][k:] / st.n[k:]
        same_mean = np.where(plus, mean["+"], mean["-"])
        same_max = np.where(plus, mx["+"], mx["-"])
        cols[f"mean_{d}"], cols[f"max_{d}"], cols[f"percentile_{d}"] = mean["avg"], mx["avg"], percentile(mean["avg"])
        cols[f"mean_{d}_same_strand"], cols[f"max_{d}_same_strand"] = same_mean, same_max
        cols[f"percentile_{d}_same_strand"] = percentile(same_mean)
    return datasets, cols, extra_means


def bigwig_columns(gw: GeneWindows, paths: list[str]):
    """The dataset names (one per bigWig, from its file name) and the table's columns {``mean_<d>``, ``max_<d>``,
    ``percentile_<d>``: (genes,) float64} over each gene's window; ChromaflowError if two files give one name."""
    groups = gw.by_seqid()
    windows = {seqid: (gw.start[idx], gw.end[idx]) for seqid, idx in groups.items()}
    n = len(gw.genes)
    datasets, cols = [], {}
    for path in paths:
        d = bigwig_dataset_name(path)
        if d in datasets:
            raise ChromaflowError(f"--bigwig: two files give the dataset name {d!r}")
        datasets.append(d)
        stats = bigwig_window_stats(path, windows)
        mean, mx = np.zeros(n), np.zeros(n)
        for seqid, idx in groups.items():
            sums, maxs = stats[seqid]
            mean[idx] = sums / (gw.end[idx] - gw.start[idx])
            mx[idx] = maxs
        cols[f"mean_{d}"], cols[f"max_{d}"], cols[f"percentile_{d}"] = mean, mx, percentile(mean)
    return datasets, cols


def bigwig_dataset_name(path: str) -> str:
    """The dataset name of a bigWig: its file name without ``.bw``, ``.bigwig`` or ``.bigWig``."""
    name = Path(path).name
    for ext in (".bw", ".bigwig", ".bigWig"):
        if name.endswith(ext):
            return name[: -len(ext)]
    return name


def table_text(gw: GeneWindows, cols: dict[str, np.ndarray]) -> str:
    """The per-gene TSV: gene_id, seqid, strand, tss, window_start, window_end, then ``cols`` (percentiles with 2
    decimals, other values as integers where whole, else with 4)."""
    head = ["gene_id", "seqid", "strand", "tss", "window_start", "window_end", *cols]
    lines = ["\t".join(head)]
    values = [
        [(f"{x:.2f}" if k.startswith("percentile_") else _fmt_num(x)) for x in v.tolist()] for k, v in cols.items()
    ]
    for i, g in enumerate(gw.genes):
        lines.append(
            "\t".join(
                [
                    g.gene_id,
                    g.seqid,
                    g.strand,
                    str(gw.tss[i]),
                    str(gw.start[i]),
                    str(gw.end[i]),
                    *(v[i] for v in values),
                ]
            )
        )
    return "\n".join(lines) + "\n"


def bed_text(gw: GeneWindows, pct: np.ndarray) -> str:
    """BED6 of the windows: score = round(10 x percentile) (BED scores are integers 0-1000)."""
    score = np.rint(10 * pct).astype(int).tolist()
    return "".join(
        f"{g.seqid}\t{gw.start[i]}\t{gw.end[i]}\t{g.gene_id}\t{score[i]}\t{g.strand}\n" for i, g in enumerate(gw.genes)
    )


#: UCSC's autoSql of BED6 (a hub's "type bigBed 6" expects it)
BED6_AUTOSQL = """table bed6
"Browser extensible data: the promoter windows of chromaflow gene-accessibility"
    (
    string chrom;      "Reference sequence chromosome or scaffold"
    uint   chromStart; "Start position in chromosome"
    uint   chromEnd;   "End position in chromosome"
    string name;       "Gene id"
    uint   score;      "10 x the promoter accessibility percentile of the first dataset (0-1000)"
    char[1] strand;    "+ or -"
    )
"""


def write_bigbed(path: Path, sizes: dict[str, int], bed: str) -> None:
    """The BED6 text as a bigBed 6 (bigwig/bigbedfile.py; rows sorted by chromosome name bytes then start, as
    bigBed wants them: the same sort its chromosome list has)."""
    from ..bigwig.bigbedfile import write_bigbed as write

    rows = [ln.split("\t", 3) for ln in bed.splitlines()]
    rows.sort(key=lambda r: (r[0].encode(), int(r[1]), int(r[2]), r[3]))
    write(path, list(sizes.items()), lambda: ((r[0], int(r[1]), int(r[2]), r[3]) for r in rows), BED6_AUTOSQL, 6, 6)
