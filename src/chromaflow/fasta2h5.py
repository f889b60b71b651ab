"""``chromaflow fasta2h5``: FASTA -> Helixer-layout genome HDF5 (FORMATS.md §1), fast.

Layout (identical to Helixer's ``fasta2h5.py``): ``data/X`` (N, L, 4) float16 one-hot in column order
C, A, T, G; ``data/seqids`` S50; ``data/species`` S25; ``data/start_ends`` int64. Per record of length n:
k = ceil(n / L) plus chunks in ascending order, then the k reverse-complemented minus chunks of the same
boundaries in descending order, padding (zeros) always at the end of a chunk. Minus rows store
``[end, start]``.

How it is fast:

* The FASTA is parsed in large blocks (:mod:`chromaflow.fasta`); a record is held as its raw bytes
  (1 byte/bp), never as float16.
* A byte is turned into a chunk's *already shuffled* bytes with two 256-entry uint32 lookup tables: HDF5's
  shuffle filter (element size 2) stores all low bytes of the chunk, then all high bytes, so
  ``LO[seq] || HI[seq]`` is exactly the shuffled chunk. Minus chunks use column-reversed tables on the
  reversed bytes.
* Chunks are deflated in a thread pool (every engine releases the GIL) and written in row order with
  HDF5 direct chunk writes (:mod:`chromaflow.chunkdeflate`). The default engine, ``onehot``, builds each
  data/X chunk's deflate stream straight from the base bytes (the shuffled float16 chunk is never
  materialised); ``--deflate zlib`` gives zlib level 4, byte-identical to Helixer's chunks. The level used
  is the one the file declares. ``--compression lzf`` uses h5py's own lzf filter (single-threaded).
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import numpy as np

from . import __version__
from . import chunkdeflate
from .common import ChromaflowError, Progress, StageMetrics, atomic_output, check_outputs, resolve_threads
from .fasta import DEFAULT_BLOCK, FastaReader
from .subseq import Job, cut, start_ends
from .subseq import chunk_codes as _chunk_codes

DEFAULT_L = 21384
#: longest accepted --subsequence-length (a chunk of data/X is 8 bytes per position: 8 MiB here)
MAX_L = 1 << 20
MAX_SPECIES_BYTES = 25
#: target number of bases per thread-pool task (records are batched / split to about this size)
TASK_BP = 1 << 20

# --------------------------------------------------------------------------------------------------
# lookup tables: byte -> float16 bit patterns of the 4 columns C, A, T, G
# --------------------------------------------------------------------------------------------------
_ONE, _HALF, _QUARTER, _THIRD = 0x3C00, 0x3800, 0x3400, 0x3548  # 1.0, 0.5, 0.25, float16(0.33)
_CODES = {  # symbol: (C, A, T, G)
    "C": (_ONE, 0, 0, 0), "A": (0, _ONE, 0, 0), "T": (0, 0, _ONE, 0), "G": (0, 0, 0, _ONE),
    "Y": (_HALF, 0, _HALF, 0), "R": (0, _HALF, 0, _HALF), "W": (0, _HALF, _HALF, 0),
    "S": (_HALF, 0, 0, _HALF), "K": (0, 0, _HALF, _HALF), "M": (_HALF, _HALF, 0, 0),
    "D": (0, _THIRD, _THIRD, _THIRD), "V": (_THIRD, _THIRD, 0, _THIRD),
    "H": (_THIRD, _THIRD, _THIRD, 0), "B": (_THIRD, 0, _THIRD, _THIRD),
    "N": (_QUARTER, _QUARTER, _QUARTER, _QUARTER),
}

#: (256, 4) uint16 float16 bit patterns; row 0 (and every non-IUPAC byte) is all zero = padding
LUT16 = np.zeros((256, 4), dtype=np.uint16)
for _sym, _cols in _CODES.items():
    LUT16[ord(_sym)] = _cols
    LUT16[ord(_sym.lower())] = _cols
LUT16_RC = np.ascontiguousarray(LUT16[:, ::-1])  # complement = reversed column order


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


def _encode_jobs_deflate(jobs: list[tuple], L: int, compress: Callable,
                         x_encoder: Callable | None = None) -> tuple[list[bytes], list[bytes]]:
    """Deflated chunks of data/X and data/start_ends for a batch of (seq, base, n, k, strand, j0, j1) jobs, in row order.

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
                out.append(x_encoder(seq[i * L - base:min((i + 1) * L, n) - base], strand < 0))
        else:
            _lut_chunks(seq, base, n, k, strand, j0, j1, L, compress, out)
        for row in _shuffled_start_ends(n, L, k, strand, j0, j1):
            se_out.append(compress(row))
    return out, se_out


def _lut_chunks(seq: np.ndarray, base: int, n: int, k: int, strand: int, j0: int, j1: int, L: int,
                compress: Callable, out: list[bytes]) -> None:
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
        tail = seq[(k - 1) * L - base:n - base]
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
def convert(fasta: str, out_path: str | os.PathLike, species: str, L: int = DEFAULT_L, *,
            compression: str = "gzip", deflate: str = "auto", threads: int = 1,
            read_block: int = DEFAULT_BLOCK, task_bp: int = TASK_BP, progress: bool | None = None,
            input_path_attr: str | None = None) -> dict:
    """Write the Helixer-layout h5 of ``fasta`` to ``out_path`` (which is created/truncated).

    ``deflate`` is ``ENGINE[:LEVEL]`` (:mod:`chromaflow.chunkdeflate`; only used with gzip). Returns counts:
    bp, records, subsequences, and the deflate engine and level used. ``read_block`` and ``task_bp`` only change
    how the work is cut into pieces, never the result.
    """
    import h5py

    check_subsequence_length(L)
    sp = species.encode("utf-8")
    if not species or not species.isascii():
        raise ChromaflowError(f"--species {species!r}: must be a non-empty ASCII string")
    if len(sp) > MAX_SPECIES_BYTES:
        raise ChromaflowError(f"--species {species!r} is {len(sp)} bytes long; the Helixer layout stores at most"
                              f" {MAX_SPECIES_BYTES} (S25)")
    if compression not in ("gzip", "lzf"):
        raise ChromaflowError(f"unknown --compression {compression!r}")
    direct = compression == "gzip"
    engine, level = chunkdeflate.parse_engine(deflate)
    compress = chunkdeflate.byte_compressor(engine, level) if direct else None
    x_encoder = None
    if direct and engine == "onehot":
        x_encoder = chunkdeflate.OnehotEncoder(LUT16, LUT16_RC, L, level)
    chunks_per_task = max(1, task_bp // L)
    size = os.path.getsize(fasta)

    seqid_rows: list[tuple[bytes, int]] = []  # (seqid, number of rows)
    se_parts: list[np.ndarray] = []
    n_rows = 0
    bp = 0
    records = 0

    with h5py.File(out_path, "w") as f, Progress(size, "fasta2h5", "B", enabled=progress) as bar, \
            ThreadPoolExecutor(max_workers=threads) as pool:
        g = f.create_group("data")
        # the deflate level the chunks are really written with (HDF5 itself never compresses them)
        comp = dict(compression="gzip", compression_opts=level) if direct else dict(compression="lzf")
        X = g.create_dataset("X", shape=(0, L, 4), maxshape=(None, L, 4), chunks=(1, L, 4), dtype="<f2",
                             shuffle=True, **comp)
        d_species = g.create_dataset("species", shape=(0,), maxshape=(None,), chunks=(1,), dtype="S25", **comp)
        d_seqids = g.create_dataset("seqids", shape=(0,), maxshape=(None,), chunks=(1,), dtype="S50", **comp)
        d_se = g.create_dataset("start_ends", shape=(0, 2), maxshape=(None, 2), chunks=(1, 2), dtype="<i8",
                                shuffle=True, **comp)

        cap = 0
        pending: deque = deque()  # (first row, rows, future, seqid chunks, input position)
        max_pending = 2 * threads + 2
        batch: list[tuple] = []
        batch_rows = 0
        batch_row0 = 0
        # progress = input bytes whose chunks have been written (not merely read)
        read_pos = [0, 0]  # [bytes read so far, bytes shown on the bar]

        def on_progress(pos: int) -> None:
            read_pos[0] = pos

        dsets = (X, d_species, d_seqids, d_se)
        sp_chunk = compress(np.array(sp, dtype="S25").tobytes()) if direct else None

        def drain_one() -> None:
            nonlocal cap
            row0, rows, fut, seqid_chunks, pos = pending.popleft()
            res = fut.result()
            if row0 + rows > cap:
                cap = max(row0 + rows, 2 * cap)
                for d in dsets if direct else (X,):
                    d.resize((cap,) + d.shape[1:])
            if direct:
                xs, ses = res
                w_x, w_se = X.id.write_direct_chunk, d_se.id.write_direct_chunk
                w_sp, w_id = d_species.id.write_direct_chunk, d_seqids.id.write_direct_chunk
                for i in range(rows):
                    row = row0 + i
                    w_x((row, 0, 0), xs[i])
                    w_sp((row,), sp_chunk)
                    w_id((row,), seqid_chunks[i])
                    w_se((row, 0), ses[i])
            else:
                X[row0:row0 + rows] = res.view("<f2")
            if pos > read_pos[1]:
                bar.update(pos - read_pos[1])
                read_pos[1] = pos

        def submit() -> None:
            nonlocal batch, batch_rows, batch_row0, batch_ids
            if not batch:
                return
            if direct:
                fut = pool.submit(_encode_jobs_deflate, batch, L, compress, x_encoder)
            else:
                fut = pool.submit(_encode_jobs_raw, batch, L)
            pending.append((batch_row0, batch_rows, fut, batch_ids, read_pos[0]))
            batch_row0 += batch_rows
            batch, batch_rows, batch_ids = [], 0, []
            while len(pending) > max_pending:
                drain_one()

        batch_ids: list[bytes] = []

        def add_jobs(seq: np.ndarray, base: int, n: int, k: int, strand: int, j0: int, j1: int,
                     id_chunk: bytes | None) -> None:
            nonlocal batch_rows
            j = j0
            while j < j1:
                take = min(j1 - j, chunks_per_task - batch_rows)
                batch.append((seq, base, n, k, strand, j, j + take))
                batch_rows += take
                if direct:
                    batch_ids.extend([id_chunk] * take)
                j += take
                if batch_rows >= chunks_per_task:
                    submit()

        # Rows come from the shared cutting (chromaflow.subseq.cut): plus-strand jobs as soon as a segment of a
        # record is complete, the minus strand once the record's length is known; RecordEnd closes a record.
        id_cache: tuple[str, bytes | None] = ("", None)
        for job in cut(FastaReader(fasta, block_size=read_block, on_progress=on_progress).pieces(), L,
                       chunks_per_task):
            if id_cache[0] != job.seqid:
                id_chunk = compress(np.array(job.seqid.encode("ascii"), dtype="S50").tobytes()) if direct else None
                id_cache = (job.seqid, id_chunk)
            if isinstance(job, Job):
                add_jobs(job.seq, job.base, job.n, job.k, job.strand, job.j0, job.j1, id_cache[1])
                continue
            n, k = job.n, job.k
            if not direct:
                se_parts.append(start_ends(n, L))
                seqid_rows.append((job.seqid.encode("ascii"), 2 * k))
            n_rows += 2 * k
            bp += n
            records += 1
        submit()
        while pending:
            drain_one()
        if direct:
            if n_rows != cap:
                for d in dsets:
                    d.resize((n_rows,) + d.shape[1:])
        else:
            # lzf: the three small datasets in one h5py write each (HDF5 applies the filters itself)
            if n_rows != cap:
                X.resize((n_rows, L, 4))
            for d in (d_species, d_seqids, d_se):
                d.resize((n_rows,) + d.shape[1:])
            d_species[:] = np.full(n_rows, sp, dtype="S25")
            d_seqids[:] = np.repeat(np.array([s for s, _ in seqid_rows], dtype="S50"),
                                    [c for _, c in seqid_rows])
            d_se[:] = np.concatenate(se_parts)

        f.attrs["tool"] = "chromaflow fasta2h5"
        f.attrs["chromaflow_version"] = __version__
        f.attrs["input_path"] = str(fasta if input_path_attr is None else input_path_attr)
        f.attrs["timestamp"] = str(datetime.datetime.now())
        f.attrs["subsequence_length"] = np.int64(L)
        f.attrs["species"] = species
        if direct:
            f.attrs["compression"] = f"gzip level {level} (shuffle + deflate; chunks deflated by {engine})"
            f.attrs["deflate_engine"] = engine
            f.attrs["deflate_level"] = np.int64(level)
            f.attrs["deflate_implementation"] = chunkdeflate.engine_version(engine)
        else:
            f.attrs["compression"] = compression
    return {"bp": bp, "records": records, "subsequences": n_rows,
            "deflate": f"{engine}:{level}" if direct else None}


def check_subsequence_length(L: int) -> None:
    if L < 1 or L > MAX_L:
        raise ChromaflowError(f"--subsequence-length {L}: must be between 1 and {MAX_L:,} "
                              f"(Predmoter's is {DEFAULT_L})")


# --------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fasta", required=True, help="input FASTA (plain, gzip or bgzip; detected by content)")
    p.add_argument("--species", required=True, help="species name stored on every row (ASCII, <= 25 bytes)")
    p.add_argument("--out", required=True, help="output .h5 (written atomically)")
    p.add_argument("--subsequence-length", type=int, default=DEFAULT_L, metavar="L",
                   help=f"chunk length L (default {DEFAULT_L})")
    p.add_argument("--compression", choices=("gzip", "lzf"), default="gzip",
                   help="HDF5 filter after shuffle (default gzip, as Helixer)")
    p.add_argument("--deflate", default="auto", metavar="ENGINE[:LEVEL]",
                   help="deflate engine for the gzip chunks; the level used is the one the file declares. "
                        "auto (default): onehot if it can be built, else libdeflate. onehot (level 1): our "
                        "encoder for one-hot chunks, several times less CPU than zlib level 4 and a smaller "
                        "file; compiled with the system C compiler on first use. zlib (level 4): chunk bytes "
                        "identical to Helixer's, slowest. libdeflate (level 4): about Helixer's size, ~2x zlib's "
                        "speed. isal (level 1): fast, larger file. Measured speed and size: docs/fasta2h5.md")
    p.add_argument("--threads", type=int, default=0, help="compression threads (default: all usable CPUs)")
    p.add_argument("--metrics", default=None, help="write a metrics JSON here")
    p.add_argument("--force", action="store_true", help="overwrite an existing --out")


def check_input(path: str) -> None:
    """The FASTA path must name a readable regular file: one line naming it otherwise."""
    if not path or not os.path.exists(path):
        raise ChromaflowError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ChromaflowError(f"{path}: is a directory, not a FASTA file")
    try:
        with open(path, "rb"):
            pass
    except PermissionError:
        raise ChromaflowError(f"{path}: permission denied (the FASTA file is not readable)") from None
    except OSError as exc:
        raise ChromaflowError(f"{path}: cannot open ({exc.strerror or exc})") from None


def run(args: argparse.Namespace) -> int:
    threads = resolve_threads(args.threads)
    out = Path(args.out)
    check_subsequence_length(args.subsequence_length)
    if args.compression == "gzip":
        engine, level = chunkdeflate.parse_engine(args.deflate)
        if chunkdeflate.auto_fallback_reason and args.deflate.strip().lower() == "auto":
            print(f"chromaflow fasta2h5: warning: {chunkdeflate.auto_fallback_reason}; using libdeflate level "
                  f"{level} (same file size, slower)", file=sys.stderr)
        args.deflate = f"{engine}:{level}"
    check_input(args.fasta)
    check_outputs([("--out", out), ("--metrics", args.metrics)], [("--fasta", args.fasta)])
    if out.exists() and not args.force:
        raise ChromaflowError(f"{out}: output exists (use --force to overwrite)")
    with StageMetrics("fasta2h5", args.metrics, threads=threads) as m:
        with atomic_output(out, force=args.force) as tmp:
            counts = convert(args.fasta, tmp, args.species, args.subsequence_length,
                             compression=args.compression, deflate=args.deflate, threads=threads,
                             input_path_attr=args.fasta)
        m.set(**counts, compression=args.compression, subsequence_length=args.subsequence_length,
              output_bytes=out.stat().st_size)
    return 0
