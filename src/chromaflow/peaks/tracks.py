"""The tracks peaks are called on, as merged runs per chromosome: a predictions h5 dataset through the bigwig
stage's reader and conversion (strand average, optional smoothing: exactly the track ``chromaflow bigwig`` writes),
or the intervals of a bigWig (pyBigWig), gaps filled with 0."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..bigwig.convert import Track, convert
from ..bigwig.h5input import PredictionsInput
from ..common import ChromaflowError, Progress
from .call import merge_runs


#: first 4 bytes of a bigWig (UCSC bbiFile.h bigWigSig), in the byte order of the writer
BIGWIG_MAGIC = 0x888FFC26


class _Collect:
    """A track writer that keeps the intervals in memory (a chromosome's runs arrive in order, in pieces)."""

    def __init__(self):
        self.parts: dict[str, list] = {}
        self.count = 0

    def write(self, chrom, starts, ends, vals) -> None:
        self.parts.setdefault(chrom, []).append((np.asarray(starts, np.int64).copy(), np.asarray(ends, np.int64).copy(),
                                                 np.asarray(vals, np.float32).copy()))
        self.count += len(starts)

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass

    def runs(self, chroms: list[tuple[str, int]]) -> dict[str, tuple]:
        out = {}
        for name, size in chroms:
            parts = self.parts.get(name, [])
            if parts:
                s, e, v = (np.concatenate(x) for x in zip(*parts))
            else:
                s = e = np.zeros(0, np.int64)
                v = np.zeros(0, np.float32)
            out[name] = merge_runs(s, e, v, size)
        return out


def h5_track(path: str, dataset: str | None, *, strand: str = "avg", window: int | None = None,
             experimental: bool = False, threads: int = 1, what: str = "--predictions"):
    """(chroms [(name, size)], {chrom: merged runs}, dataset) of one dataset of a predictions h5 (or, with
    ``experimental``, the measured evaluation/<dataset>_coverage of a genome h5)."""
    inp = PredictionsInput(path, experimental=experimental, datasets=[dataset] if dataset else None)
    try:
        if dataset is None:
            if len(inp.datasets) != 1:
                raise ChromaflowError(f"{path}: holds datasets {' '.join(inp.datasets)}; choose one with --dataset")
            dataset = inp.datasets[0]
        col = _Collect()
        track = Track(dataset, 0, strand, Path(path), writer=col)
        pool = ThreadPoolExecutor(threads, thread_name_prefix="peaks") if threads > 1 else None
        try:
            total = sum(c.size for c in inp.chroms)
            with Progress(total, f"peaks: reading {what}", "bp") as prog:
                convert(inp, [track], window=window, smoothing="exact", clip=True, pool=pool, prog=prog)
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
        chroms = [(c.name, c.size) for c in inp.chroms]
        return chroms, col.runs(chroms), dataset
    finally:
        inp.close()


def bigwig_track(path: str):
    """(chroms, {chrom: merged runs}) of a bigWig, in its chromosome order; regions without data are 0."""
    import os

    import pyBigWig

    if not os.path.isfile(path):
        raise ChromaflowError(f"{path}: bigWig does not exist or is not a file")
    with open(path, "rb") as fh:  # libBigWig prints its own lines on stderr for a non-bigWig: check the magic first
        magic = fh.read(4)
    if magic not in (BIGWIG_MAGIC.to_bytes(4, "little"), BIGWIG_MAGIC.to_bytes(4, "big")):
        raise ChromaflowError(f"{path}: not a bigWig file (no bigWig signature)")
    try:
        bw = pyBigWig.open(path)
    except RuntimeError:
        bw = None
    if bw is None or not bw.isBigWig():
        raise ChromaflowError(f"{path}: not a readable bigWig file")
    try:
        chroms = list(bw.chroms().items())
        out = {}
        for name, size in chroms:
            iv = bw.intervals(name) or ()
            a = np.array(iv, dtype=np.float64).reshape(-1, 3)
            try:
                out[name] = merge_runs(a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 2], size)
            except ValueError as exc:
                raise ChromaflowError(f"{path}: chromosome {name!r}: {exc}") from None
            if len(a) and not np.isfinite(a[:, 2]).all():
                raise ChromaflowError(f"{path}: chromosome {name!r} holds NaN or infinite values")
        return chroms, out
    finally:
        bw.close()
