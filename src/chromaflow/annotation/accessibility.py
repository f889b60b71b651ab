"""Window statistics of predicted coverage: sum and max over 0-based half-open windows of each chromosome.

Predictions are read through the bigwig stage's reader (:class:`~chromaflow.bigwig.h5input.PredictionsInput`,
:class:`~chromaflow.bigwig.h5input.ChunkReader`, the same pieces and padding rules), so a window's values are
exactly those of the ``avg`` / ``+`` / ``-`` tracks ``chromaflow bigwig`` writes: the strand average is the
rounded half-to-even mean Predmoter's converter computes. Pieces are streamed; a window that crosses pieces is
accumulated across them, so memory stays at one piece whatever the chromosome's length.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ChromaflowError

STRANDS = ("avg", "+", "-")
#: the first 4 bytes of a bigWig file (0x888FFC26, little endian)
BIGWIG_MAGIC = bytes.fromhex("26fc8f88")


@dataclass
class WindowStats:
    """Per dataset and strand: sum (int64/float64) and max over each window; n = window length."""

    n: np.ndarray
    sums: dict  # (dataset, strand) -> array
    maxs: dict


def _accumulate(v: np.ndarray, off: int, starts: np.ndarray, ends: np.ndarray, sums: np.ndarray,
                maxs: np.ndarray) -> None:
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


def predictions_window_stats(path: str, windows: dict[str, tuple[np.ndarray, np.ndarray]],
                             strands=STRANDS) -> tuple[list[str], dict]:
    """Sums and maxima of every window of ``windows`` ({seqid: (starts, ends)}) in the predictions h5 ``path``:
    (datasets, {seqid: WindowStats}). Seqids of ``windows`` must be in the file (checked by the caller)."""
    from ..bigwig.convert import BLOCK_BP, PIECE_CHUNKS, pieces, track_vector
    from ..bigwig.h5input import ChunkReader

    inp = open_predictions(path)
    try:
        chroms = [c for c in inp.chroms if c.name in windows]
        reader = ChunkReader(inp, None, min(max(1, BLOCK_BP // inp.L), PIECE_CHUNKS))
        need = {c: ("avg" in strands or "+" in strands, "avg" in strands or "-" in strands)
                for c in range(len(inp.datasets))}
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
    from ..bigwig.h5input import PredictionsInput

    return PredictionsInput(path)


def predictions_sizes(path: str) -> dict[str, int]:
    inp = open_predictions(path)
    try:
        return {c.name: c.size for c in inp.chroms}
    finally:
        inp.close()


def bigwig_sizes(path: str) -> dict[str, int]:
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
