"""The conversion behind ``chromaflow fasta2h5``: FASTA -> Helixer-layout genome HDF5 (FORMATS.md §1), fast.

Layout (identical to Helixer's ``fasta2h5.py``): ``data/X`` (N, L, 4) float16 one-hot in column order
C, A, T, G; ``data/seqids`` S50; ``data/species`` S25; ``data/start_ends`` int64. Per record of length n:
k = ceil(n / L) plus chunks in ascending order, then the k reverse-complemented minus chunks of the same
boundaries in descending order, padding (zeros) always at the end of a chunk. Minus rows store
``[end, start]``.

How it is fast:

* The FASTA is parsed in large blocks (:mod:`chromaflow.genome.fasta`); a record is held as its raw bytes
  (1 byte/bp), never as float16.
* A byte is turned into a chunk's *already shuffled* bytes with two 256-entry uint32 lookup tables: HDF5's
  shuffle filter (element size 2) stores all low bytes of the chunk, then all high bytes, so
  ``LO[seq] || HI[seq]`` is exactly the shuffled chunk. Minus chunks use column-reversed tables on the
  reversed bytes.
* Chunks are deflated in a thread pool (every engine releases the GIL) and written in row order with
  HDF5 direct chunk writes (:mod:`chromaflow.fasta2h5.deflate`). The default engine, ``onehot``, builds each
  data/X chunk's deflate stream straight from the base bytes (the shuffled float16 chunk is never
  materialised); ``--deflate zlib`` gives zlib level 4, byte-identical to Helixer's chunks. The level used
  is the one the file declares. ``--compression lzf`` uses h5py's own lzf filter (single-threaded).
"""

from __future__ import annotations

import datetime
import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, cast

import numpy as np

from .. import __version__
from ..utils.errors import ChromaflowError
from ..utils.progress import Progress
from ..genome import h5rows
from ..genome.encoding import DEFAULT_L, LUT16, LUT16_RC, check_length, check_species
from ..genome.fasta import DEFAULT_BLOCK, FastaReader
from ..genome.layout import Job, Layout, cut
from ..genome.layout import chunk_codes as _chunk_codes
from . import deflate as engines  # (the argument "deflate" is the ENGINE[:LEVEL] text)

#: target number of bases per thread-pool task (records are batched / split to about this size)
TASK_BP = 1 << 20


# --------------------------------------------------------------------------------------------------
# lookup tables: byte -> float16 bit patterns of the 4 columns C, A, T, G (genome.encoding.LUT16), packed
# --------------------------------------------------------------------------------------------------
def _pack_bytes(cols: np.ndarray) -> np.ndarray:
    """(256, 4) uint8 -> (256,) uint32 whose little-endian bytes are the 4 columns."""
    return np.ascontiguousarray(cols.astype(np.uint8)).view("<u4").reshape(256)


LO = _pack_bytes(LUT16 & 0xFF)
HI = _pack_bytes(LUT16 >> 8)
LO_RC = _pack_bytes(LUT16_RC & 0xFF)
HI_RC = _pack_bytes(LUT16_RC >> 8)
LUT64 = np.ascontiguousarray(LUT16.astype("<u2")).view("<u8").reshape(256)
LUT64_RC = np.ascontiguousarray(LUT16_RC.astype("<u2")).view("<u8").reshape(256)


def _shuffled_start_ends(n: int, L: int, k: int, strand: int, j0: int, j1: int) -> list[bytes]:
    """start_ends rows j0..j1-1 of one strand as HDF5 stores them after shuffle (element size 8): 16 bytes
    each, byte i of the first value followed by byte i of the second. Plain Python: jobs of small contigs
    have one row, where numpy's per-call overhead would dominate."""
    rows = []
    buf = bytearray(16)
    for j in range(j0, j1):
        i = j if strand > 0 else k - 1 - j
        start, end = i * L, min((i + 1) * L, n)
        first, second = (start, end) if strand > 0 else (end, start)
        buf[0::2] = first.to_bytes(8, "little", signed=True)
        buf[1::2] = second.to_bytes(8, "little", signed=True)
        rows.append(bytes(buf))
    return rows


def _encode_jobs_deflate(
    jobs: list[tuple], L: int, compress: Callable, x_encoder: Callable | None = None
) -> tuple[list[bytes], list[bytes]]:
    """Deflated chunks of data/X and data/start_ends for a batch of (seq, base, n, k, strand, j0, j1) jobs, in row
    order.

    With ``x_encoder`` (the onehot engine) each X chunk is encoded straight from the row's bases. Otherwise X
    chunks are built already shuffled (low bytes, then high bytes) from the lookup tables and passed to
    ``compress``; only the valid bases of a padded row are looked up, its padding stays zero.
    """
    out: list[bytes] = []
    se_out: list[bytes] = []
    for seq, base, n, k, strand, j0, j1 in jobs:
        if x_encoder is not None:
            for j in range(j0, j1):
                i = j if strand > 0 else k - 1 - j  # genomic chunk of this row
                out.append(x_encoder(seq[i * L - base : min((i + 1) * L, n) - base], strand < 0))
        else:
            _lut_chunks(seq, base, n, k, strand, j0, j1, L, compress, out)
        for row in _shuffled_start_ends(n, L, k, strand, j0, j1):
            se_out.append(compress(row))
    return out, se_out


def _lut_chunks(
    seq: np.ndarray,
    base: int,
    n: int,
    k: int,
    strand: int,
    j0: int,
    j1: int,
    L: int,
    compress: Callable,
    out: list[bytes],
) -> None:
    r = n - (k - 1) * L
    padded_row = (k - 1 if strand > 0 else 0) if r < L else -1
    lo_t, hi_t = (LO, HI) if strand > 0 else (LO_RC, HI_RC)
    G = j1 - j0
    if j0 <= padded_row < j1:
        sh = np.zeros((G, 2, L), dtype="<u4")
        if strand > 0:  # padded row is the last one
            full, pr = (j0, j1 - 1), G - 1
        else:  # padded row is the first one
            full, pr = (1, j1), 0
        tail = seq[(k - 1) * L - base : n - base]
        idx = (tail if strand > 0 else tail[::-1]).astype(np.intp)
        np.take(lo_t, idx, out=sh[pr, 0, :r], mode="clip")
        np.take(hi_t, idx, out=sh[pr, 1, :r], mode="clip")
        fs = slice(1, G) if strand < 0 else slice(0, G - 1)
    else:
        sh = np.empty((G, 2, L), dtype="<u4")
        full, fs = (j0, j1), slice(0, G)
    if full[1] > full[0]:
        idx = _chunk_codes(seq, base, n, L, k, strand, full[0], full[1]).astype(np.intp)
        np.take(lo_t, idx, out=sh[fs, 0, :], mode="clip")
        np.take(hi_t, idx, out=sh[fs, 1, :], mode="clip")
    for g in range(G):
        out.append(compress(sh[g]))


def _encode_jobs_raw(jobs: list[tuple], L: int) -> np.ndarray:
    """Uncompressed float16 rows (as uint16) for a batch of jobs: (rows, L, 4)."""
    parts = []
    for seq, base, n, k, strand, j0, j1 in jobs:
        codes = _chunk_codes(seq, base, n, L, k, strand, j0, j1).astype(np.intp)
        parts.append(np.take(LUT64 if strand > 0 else LUT64_RC, codes, mode="clip"))
    arr = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return arr.view("<u2").reshape(-1, L, 4)


# --------------------------------------------------------------------------------------------------
# conversion
# --------------------------------------------------------------------------------------------------
class _ChunkWriter:
    """Batches the row jobs of :func:`chromaflow.genome.layout.cut` into thread-pool tasks of about ``task_bp``
    bases and writes their results in row order: gzip as HDF5 direct chunk writes of the four datasets (data/X
    chunks, the species and seqid chunks, the shuffled start_ends chunks), lzf as h5py writes of data/X only (the
    small datasets are written at the end, :func:`_write_small_lzf`). At most ``2 * threads + 2`` tasks wait; the
    datasets grow by doubling and :meth:`finish` cuts them to the rows written."""

    def __init__(
        self,
        datasets: tuple,
        pool: ThreadPoolExecutor,
        threads: int,
        L: int,
        chunks_per_task: int,
        compress: Callable | None,
        x_encoder: Callable | None,
        species_chunk: bytes | bytearray | None,
        bar: Progress,
    ):
        self.X, self.d_species, self.d_seqids, self.d_se = self.datasets = datasets
        self.direct = compress is not None  # gzip: direct chunk writes
        self.pool, self.L, self.chunks_per_task = pool, L, chunks_per_task
        self.compress, self.x_encoder, self.species_chunk, self.bar = compress, x_encoder, species_chunk, bar
        self.max_pending = 2 * threads + 2
        self.pending: deque = deque()  # (first row, rows, future, seqid chunks, input position)
        self.batch: list[tuple] = []
        self.batch_ids: list[bytes | None] = []  # seqid chunks, not None when direct
        self.batch_rows = 0
        self.batch_row0 = 0
        self.cap = 0
        # progress = input bytes whose chunks have been written (not merely read)
        self.read_pos = 0  # bytes read so far
        self.shown = 0  # bytes shown on the bar

    def on_progress(self, pos: int) -> None:
        """Note the input position ``pos`` (bytes) the reader has reached; the bar shows it once the chunks read so
        far are written."""
        self.read_pos = pos

    def add(self, job: Job, id_chunk: bytes | None) -> None:
        """Rows j0..j1-1 of one strand of a record, cut into the current and next batches."""
        j = job.j0
        while j < job.j1:
            take = min(job.j1 - j, self.chunks_per_task - self.batch_rows)
            self.batch.append((job.seq, job.base, job.n, job.k, job.strand, j, j + take))
            self.batch_rows += take
            if self.direct:
                self.batch_ids.extend([id_chunk] * take)
            j += take
            if self.batch_rows >= self.chunks_per_task:
                self.submit()

    def submit(self) -> None:
        """Hand the current batch to the pool for encoding (and compression, for direct chunk writes) and start a new
        one; past ``max_pending`` batches in flight, the oldest is written first."""
        if not self.batch:
            return
        fut: Future[Any]
        if self.direct:  # compress is set for direct chunk writes
            fut = self.pool.submit(
                _encode_jobs_deflate, self.batch, self.L, cast(Callable, self.compress), self.x_encoder
            )
        else:
            fut = self.pool.submit(_encode_jobs_raw, self.batch, self.L)
        self.pending.append((self.batch_row0, self.batch_rows, fut, self.batch_ids, self.read_pos))
        self.batch_row0 += self.batch_rows
        self.batch, self.batch_rows, self.batch_ids = [], 0, []
        while len(self.pending) > self.max_pending:
            self._drain_one()

    def _drain_one(self) -> None:
        row0, rows, fut, seqid_chunks, pos = self.pending.popleft()
        res = fut.result()
        if row0 + rows > self.cap:
            self.cap = max(row0 + rows, 2 * self.cap)
            for d in self.datasets if self.direct else (self.X,):
                d.resize((self.cap,) + d.shape[1:])
        if self.direct:
            xs, ses = res
            w_x, w_se = self.X.id.write_direct_chunk, self.d_se.id.write_direct_chunk
            w_sp, w_id = self.d_species.id.write_direct_chunk, self.d_seqids.id.write_direct_chunk
            for i in range(rows):
                row = row0 + i
                w_x((row, 0, 0), xs[i])
                w_sp((row,), self.species_chunk)
                w_id((row,), seqid_chunks[i])
                w_se((row, 0), ses[i])
        else:
            self.X[row0 : row0 + rows] = res.view("<f2")
        if pos > self.shown:
            self.bar.update(pos - self.shown)
            self.shown = pos

    def finish(self, n_rows: int) -> None:
        """Submit the last batch, write every pending task, and cut the datasets written so far to ``n_rows``."""
        self.submit()
        while self.pending:
            self._drain_one()
        if n_rows != self.cap:
            for d in self.datasets if self.direct else (self.X,):
                d.resize((n_rows,) + d.shape[1:])


def convert(
    fasta: str,
    out_path: str | os.PathLike,
    species: str,
    L: int = DEFAULT_L,
    *,
    compression: str = "gzip",
    deflate: str = "auto",
    threads: int = 1,
    read_block: int = DEFAULT_BLOCK,
    task_bp: int = TASK_BP,
    progress: bool | None = None,
    input_path_attr: str | None = None,
) -> dict:
    """Write the Helixer-layout h5 of ``fasta`` to ``out_path`` (which is created/truncated).

    ``deflate`` is ``ENGINE[:LEVEL]`` (:mod:`chromaflow.fasta2h5.deflate`; only used with gzip). Returns counts:
    bp, records, subsequences, and the deflate engine and level used. ``read_block`` and ``task_bp`` only change
    how the work is cut into pieces, never the result.
    """
    import h5py

    check_length(L)
    sp = check_species(species)
    if compression not in ("gzip", "lzf"):
        raise ChromaflowError(f"unknown --compression {compression!r}")
    direct = compression == "gzip"
    engine, level = engines.parse_engine(deflate)
    compress = engines.byte_compressor(engine, level) if direct else None
    x_encoder = engines.OnehotEncoder(LUT16, LUT16_RC, L, level) if direct and engine == "onehot" else None
    chunks_per_task = max(1, task_bp // L)
    with (
        h5py.File(out_path, "w") as f,
        Progress(os.path.getsize(fasta), "fasta2h5", "B", enabled=progress) as bar,
        ThreadPoolExecutor(max_workers=threads) as pool,
    ):
        datasets = _create_datasets(f, L, direct, level)
        sp_chunk = cast(Callable, compress)(np.array(sp, dtype="S25").tobytes()) if direct else None  # set if direct
        writer = _ChunkWriter(datasets, pool, threads, L, chunks_per_task, compress, x_encoder, sp_chunk, bar)
        layout = _write_rows(fasta, L, read_block, chunks_per_task, writer, compress, sp)
        writer.finish(layout.n_rows)
        if not direct:  # lzf: the three small datasets in one h5py write each (HDF5 applies the filters itself)
            _write_small_lzf(datasets, layout)
        _write_attrs(
            f,
            fasta if input_path_attr is None else input_path_attr,
            L,
            species,
            (engine, level) if direct else None,
            compression,
        )
    return {
        "bp": layout.bp,
        "records": len(layout.records),
        "subsequences": layout.n_rows,
        "deflate": f"{engine}:{level}" if direct else None,
    }


def _create_datasets(f, L: int, direct: bool, level: int) -> tuple:
    """data/X, data/species, data/seqids, data/start_ends, empty and resizable, chunked one row each."""
    g = f.create_group("data")
    # the deflate level the chunks are really written with (HDF5 itself never compresses them)
    comp = dict(compression="gzip", compression_opts=level) if direct else dict(compression="lzf")
    X = g.create_dataset(
        "X", shape=(0, L, 4), maxshape=(None, L, 4), chunks=(1, L, 4), dtype="<f2", shuffle=True, **comp
    )
    d_species = g.create_dataset("species", shape=(0,), maxshape=(None,), chunks=(1,), dtype="S25", **comp)
    d_seqids = g.create_dataset("seqids", shape=(0,), maxshape=(None,), chunks=(1,), dtype="S50", **comp)
    d_se = g.create_dataset(
        "start_ends", shape=(0, 2), maxshape=(None, 2), chunks=(1, 2), dtype="<i8", shuffle=True, **comp
    )
    return X, d_species, d_seqids, d_se


def _write_rows(
    fasta: str,
    L: int,
    read_block: int,
    chunks_per_task: int,
    writer: _ChunkWriter,
    compress: Callable | None,
    species: bytes,
) -> Layout:
    """Every row of the FASTA handed to ``writer``; returns the records read (seqid, bases).

    Rows come from the shared cutting (chromaflow.genome.layout.cut): plus-strand jobs as soon as a segment of a
    record is complete, the minus strand once the record's length is known; RecordEnd closes a record."""
    records: list[tuple[str, int]] = []
    id_cache: tuple[str, bytes | None] = ("", None)
    for job in cut(
        FastaReader(fasta, block_size=read_block, on_progress=writer.on_progress).pieces(), L, chunks_per_task
    ):
        if id_cache[0] != job.seqid:
            id_chunk = compress(np.array(job.seqid.encode("ascii"), dtype="S50").tobytes()) if compress else None
            id_cache = (job.seqid, id_chunk)
        if isinstance(job, Job):
            writer.add(job, id_cache[1])
        else:
            records.append((job.seqid, job.n))
    return Layout(records, L, species)


def _write_small_lzf(datasets: tuple, layout: Layout) -> None:
    """data/species, data/seqids and data/start_ends of an lzf file (one-row chunks: ROW_BLOCK rows per write)."""
    _, d_species, d_seqids, d_se = datasets
    n_rows = layout.n_rows
    for d in (d_species, d_seqids, d_se):
        d.resize((n_rows,) + d.shape[1:])
    block = h5rows.ROW_BLOCK
    species = np.full(min(n_rows, block), layout.species, dtype="S25")
    for a, (ids, se) in zip(range(0, n_rows, block), layout.row_blocks(block)):
        d_species[a : a + len(ids)] = species[: len(ids)]
        d_seqids[a : a + len(ids)] = ids
        d_se[a : a + len(ids)] = se


def _write_attrs(f, input_path, L: int, species: str, deflated: tuple[str, int] | None, compression: str) -> None:
    f.attrs["tool"] = "chromaflow fasta2h5"
    f.attrs["chromaflow_version"] = __version__
    f.attrs["input_path"] = str(input_path)
    f.attrs["timestamp"] = str(datetime.datetime.now())
    f.attrs["subsequence_length"] = np.int64(L)
    f.attrs["species"] = species
    if deflated:
        engine, level = deflated
        f.attrs["compression"] = f"gzip level {level} (shuffle + deflate; chunks deflated by {engine})"
        f.attrs["deflate_engine"] = engine
        f.attrs["deflate_level"] = np.int64(level)
        f.attrs["deflate_implementation"] = engines.engine_version(engine)
    else:
        f.attrs["compression"] = compression
