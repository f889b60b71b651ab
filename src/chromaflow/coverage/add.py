"""Add read coverage to a genome h5, atomically, streaming per genomic window, in parallel.

Output (Helixer's ``add_ngs_coverage.py`` layout, FORMATS.md §7.1, so either tool's files work everywhere):

* ``evaluation/<prefix>_coverage`` and ``evaluation/<prefix>_spliced_coverage``: (N, L, B) int64 (float32 for
  bigWig input), chunks (1, L, 1), maxshape (None, L, None), shuffle + lzf, fill value -1; -1 at padding and in
  rows that were not computed (rows of another ``--species``);
* ``evaluation/<prefix>_meta/bam_files``: (B,) S512, fill ``b''``, maxshape (None,), the paths as typed, in
  column order (a path given twice on one command line counts once). A second run with the same prefix appends
  columns, as Helixer does.

How it differs from Helixer's tool (its defects, FORMATS.md §7.1):

* **Atomic.** Every input is validated first (BAM sorted and indexed, every seqid present with the genome's
  length, mapped reads present); then the h5 is copied to a temporary name beside it, the copy is updated and
  renamed over the original only when everything succeeded. A crash, Ctrl-C or bad read leaves the user's file
  byte-for-byte unchanged. No folder is ever created in the working directory.
* **Streaming.** Coverage is computed per genomic window (``window_bp``, default 16 chunks of both strands) and
  written at once; memory depends on the window, not on the genome or record size.
* **Parallel.** Windows are counted *and compressed* in worker processes (``--threads``): each worker filters its
  rows as the output's pipeline would (HDF5's shuffle, then LZF with h5py's bytes, in C: :func:`_shuffle_lzf`; an
  in-memory HDF5 dataset where the C kernels are not built) and returns the raw compressed chunks, which the main
  process stores with HDF5 direct chunk writes (no second compression). Results are
  consumed in task order with a bounded number in flight, so the file is byte-identical for any thread count.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
from collections import deque
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from ..utils.errors import ChromaflowError
from ..utils.inputs import open_h5_input
from ..utils.outputs import atomic_output
from ..utils.progress import Progress
from .layout import GenomeLayout, Unit, cut_rows, plan_units, read_layout
from .sources import CountOptions, bigwig_window, check_bam, check_bigwig, count_bam_window, open_bam

#: default genomic window per task: 16 chunks of the default L (both strands: 32 rows). 64 chunks before the C
#: counting kernel: with it, a window's arrays (~100 bytes a bp) were the run's memory, page-faulted in and out of
#: cache; 16 chunks: 5 x 10 Mbp / 1 M reads 3.2 -> 2.3 s and 215 -> 120 MB, 5 x 2 Mbp 1.1 -> 0.66 s (--threads 1)
DEFAULT_WINDOW_BP = 16 * 21384
PATH_BYTES = 512


@dataclass
class AddResult:
    """What :func:`add_coverage` did: rows and bp covered, the coverage columns written, reads counted per source,
    tasks per source (``units``), and whether the columns were appended to existing ones."""

    rows: int = 0
    bp: int = 0
    columns: list[int] = field(default_factory=list)
    reads_counted: dict[str, int] = field(default_factory=dict)
    units: int = 0
    appended: bool = False


# --------------------------------------------------------------------------------------------------
# worker side (runs in the main process for --threads 1)
# --------------------------------------------------------------------------------------------------
_SOURCES: dict[str, Any] = {}  # HtsBam, pysam.AlignmentFile or pyBigWig file, by path
_ZERO_CHUNKS: dict[tuple[str, int, int], tuple[int, bytes]] = {}


def _open_source(kind: str, path: str, index: str | None = None):
    src = _SOURCES.get(path)
    if src is None:
        if kind == "bam":
            src = open_bam(path, index)
        else:
            import pyBigWig

            src = pyBigWig.open(path)
        _SOURCES[path] = src
    return src


def close_sources() -> None:
    """Close the BAM and bigWig files this process opened for its tasks (errors are ignored) and forget them."""
    for src in _SOURCES.values():
        try:
            src.close()
        except Exception:  # pragma: no cover - closing is best effort
            pass
    _SOURCES.clear()


def _compress(rows: np.ndarray, valid: list[int], dtype: str) -> list[tuple[int, bytes]]:
    """Raw chunks (filter_mask, bytes) of ``rows`` (n, L) as the output dataset stores them (shuffle + lzf).

    HDF5's shuffle and LZF with h5py's bytes in one C call (:func:`_shuffle_lzf`) for int64 rows, else an in-memory
    HDF5 file with the output's exact creation properties, so the bytes are what h5py would have written; rows that
    are all zero (valid part) reuse one cached chunk per valid length.
    """
    import h5py

    n, length = rows.shape
    out: list[tuple[int, bytes] | None] = [None] * n
    todo, zero = [], set()
    for i in range(n):
        if rows[i, : valid[i]].any():
            todo.append(i)
        else:
            key = (dtype, length, valid[i])
            cached = _ZERO_CHUNKS.get(key)
            if cached is None:
                todo.append(i)
                zero.add(i)
            else:
                out[i] = cached
    # in C where it can (the same filters, the same bytes: tests/coverage), else through an in-memory HDF5 file
    if todo and not (dtype == "int64" and length and _shuffle_lzf(rows, todo, out)):
        with h5py.File(io.BytesIO(), "w") as f:
            d = f.create_dataset(
                "c",
                shape=(len(todo), length, 1),
                dtype=dtype,
                chunks=(1, length, 1),
                compression="lzf",
                shuffle=True,
                fillvalue=-1,
            )
            d[:, :, 0] = rows[todo]
            for j, i in enumerate(todo):
                mask, data = d.id.read_direct_chunk((j, 0, 0))
                out[i] = (mask, bytes(data))
    for i in zero:
        _ZERO_CHUNKS[(dtype, length, valid[i])] = cast("tuple[int, bytes]", out[i])  # set above
    return out  # type: ignore[return-value]


def _shuffle_lzf(rows: np.ndarray, todo: list[int], out: list) -> bool:
    """Fill ``out[i]`` for the rows ``todo`` of the int64 ``rows`` with the (filter mask, bytes) the output's
    pipeline stores, in one C call (``bigwig/_kernels.c`` cf_shuffle_lzf: HDF5's shuffle, then an LZF encoder that
    writes h5py's bytes, its match search 8 bytes at a time); rows that are all zero are cached as :func:`_compress`
    does. False where the C kernels are not built (the in-memory HDF5 file does it)."""
    from ..bigwig import _native

    lib = _native.load()
    if lib is None:
        return False
    sel = np.ascontiguousarray(rows[todo], dtype=np.int64)
    n, length = sel.shape
    buf = np.empty(n * length * 8, np.uint8)
    sizes = np.empty(n, np.int64)
    masks = np.empty(n, np.uint32)
    if lib.cf_shuffle_lzf(sel.ctypes.data, n, length, buf.ctypes.data, sizes.ctypes.data, masks.ctypes.data):
        return False
    step = length * 8
    for j, i in enumerate(todo):
        out[i] = (int(masks[j]), buf[j * step : j * step + int(sizes[j])].tobytes())
    return True


@dataclass
class Task:
    """One unit of work: count one source (a BAM or bigWig at ``path``, column ``col``) over one :class:`Unit`'s rows
    (``start_ends``: (n_rows, 2), in unit order) with the counting options; ``raw``: return arrays instead of
    compressed chunks; ``dtype`` of the coverage; ``index``: the BAM index, if given."""

    unit: Unit
    col: int
    kind: str  # "bam" | "bigwig"
    path: str
    length: int
    start_ends: np.ndarray  # rows of the unit only: (n_rows, 2), in unit order
    record_lengths: dict[str, int]
    opt: CountOptions
    raw: bool  # return arrays instead of compressed chunks (existing dataset with other filters)
    dtype: str
    index: str | None = None  # explicit BAM index (else <bam>.bai / .csi beside it)


def run_task(task: Task):
    """Count one window of one source and return (rows, cov chunks, spliced chunks, reads counted, bp)."""
    src = _open_source(task.kind, task.path, task.index)
    length = task.length
    n = task.unit.n_rows
    cov = np.empty((n, length), dtype=task.dtype)
    spl = np.empty((n, length), dtype=task.dtype)
    rows: list[int] = []
    valid: list[int] = []
    counted = 0
    i = 0
    # start_ends of the unit's rows, indexed by position within the unit
    for seg in task.unit.segments:
        if task.kind == "bam":
            arrs, c = count_bam_window(
                src, task.path, seg.seqid, seg.lo, seg.hi, task.record_lengths[seg.seqid], task.opt
            )
        else:
            arrs, c = bigwig_window(src, task.path, seg.seqid, seg.lo, seg.hi, task.opt)
        counted += c
        k = len(seg.rows)
        se = task.start_ends[i : i + k]
        local = _LocalSeg(seg.lo, np.arange(k))
        cut_rows(local, se, length, arrs[0], arrs[1], cov[i : i + k])
        cut_rows(local, se, length, arrs[2], arrs[3], spl[i : i + k])
        rows.extend(seg.rows.tolist())
        valid.extend(np.abs(se[:, 1] - se[:, 0]).tolist())
        i += k
    if task.raw:
        return rows, cov, spl, counted, task.unit.bp
    return rows, _compress(cov, valid, task.dtype), _compress(spl, valid, task.dtype), counted, task.unit.bp


@dataclass
class _LocalSeg:
    lo: int
    rows: np.ndarray


def _worker_init() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and terminates the pool


# --------------------------------------------------------------------------------------------------
# main side
# --------------------------------------------------------------------------------------------------
def _dedupe(paths: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for p in paths:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def _existing(fh, h5: str, prefix: str, layout: GenomeLayout, dtype: str) -> tuple[int, bool]:
    """Columns already present for ``prefix`` (0 if none) and whether raw chunks can be written directly."""
    names = [
        f"evaluation/{prefix}_coverage",
        f"evaluation/{prefix}_spliced_coverage",
        f"evaluation/{prefix}_meta/bam_files",
    ]
    present = [n in fh for n in names]
    if not any(present):
        return 0, True
    if not all(present):
        have = ", ".join(n for n, p in zip(names, present) if p)
        raise ChromaflowError(
            f"{h5}: only {have} exist for prefix {prefix!r}; the prefix is half-made, use another --prefix"
        )
    direct = True
    cols = None
    for n in names[:2]:
        d = fh[n]
        if d.ndim != 3 or d.shape[:2] != (layout.n_rows, layout.length):
            raise ChromaflowError(f"{h5}: {n} has shape {d.shape}, expected ({layout.n_rows}, {layout.length}, B)")
        if d.maxshape[2] is not None:
            raise ChromaflowError(
                f"{h5}: {n} cannot grow along its last axis (maxshape {d.maxshape}); use another --prefix"
            )
        if np.dtype(d.dtype) != np.dtype(dtype):
            raise ChromaflowError(
                f"{h5}: {n} holds {d.dtype} values, this input gives {dtype} "
                f"({'bigWig' if dtype == 'float32' else 'BAM'}); use another --prefix"
            )
        if (
            d.chunks != (1, layout.length, 1)
            or d.compression != "lzf"
            or not d.shuffle
            or d.fletcher32
            or d.scaleoffset is not None
        ):
            direct = False
        cols = d.shape[2] if cols is None else cols
        if d.shape[2] != cols:
            raise ChromaflowError(
                f"{h5}: {prefix}_coverage and {prefix}_spliced_coverage have different numbers of columns"
            )
    if fh[names[2]].shape != (cols,):
        raise ChromaflowError(f"{h5}: {names[2]} has {fh[names[2]].shape[0]} entries for {cols} coverage columns")
    return int(cast(int, cols)), direct  # cols: set by the first of names[:2]


def add_coverage(
    h5: str,
    prefix: str,
    paths: list[str],
    kind: str,
    opt: CountOptions,
    *,
    threads: int = 1,
    species: str | None = None,
    window_bp: int = DEFAULT_WINDOW_BP,
    progress: bool | None = None,
    out: str | None = None,
    indexes: list[str] | None = None,
) -> AddResult:
    """Add coverage of ``paths`` (BAMs or bigWigs) to ``h5`` under ``prefix``; see the module docstring.

    With ``out`` the result goes to that new file (the input is left untouched); otherwise ``h5`` is replaced.
    """
    paths, index_of = _check_arguments(prefix, paths, indexes)
    dtype = "int64" if kind == "bam" else "float32"
    layout, col0, direct = _read_target(h5, prefix, dtype)
    rows = _species_rows(h5, layout, species)
    needed = _needed_lengths(layout, rows)
    _check_sources(kind, paths, needed, index_of)
    if kind == "bam":
        from . import _native

        _native.load()  # built (first use) and loaded here, before the workers fork, so they share it

    units = plan_units(layout, rows, window_bp)
    result = AddResult(
        rows=int(rows.size), columns=list(range(col0, col0 + len(paths))), units=len(units), appended=col0 > 0
    )
    result.reads_counted = {p: 0 for p in paths}
    tasks = _make_tasks(
        layout, units, paths, kind, needed, opt, col0=col0, raw=not direct, dtype=dtype, index_of=index_of
    )
    total_bp = sum(u.bp for u in units) * len(paths)
    _run_tasks(
        h5,
        out or h5,
        tasks,
        result,
        threads=threads,
        total_bp=total_bp,
        progress=progress,
        label=f"add-coverage {prefix}",
        prepare=lambda f: _prepare(f, prefix, layout, col0, paths, dtype),
    )
    return result


def _needed_lengths(layout: GenomeLayout, rows: np.ndarray) -> dict[str, int]:
    """{seqid: record length} of the records ``rows`` (row indices into ``layout``) lie on, in row order."""
    needed: dict[str, int] = {}
    for s in layout.seqids[rows].tolist():
        needed.setdefault(s, layout.record_lengths[s])
    return needed


def _check_sources(kind: str, paths: list[str], needed: dict[str, int], index_of: dict[str, str]) -> None:
    """Every BAM (sorted, indexed, with reads) or bigWig holds the ``needed`` records with their lengths."""
    for p in paths:
        if kind == "bam":
            check_bam(p, needed, index_of.get(p))
        else:
            check_bigwig(p, needed)


def _make_tasks(
    layout: GenomeLayout,
    units: list[Unit],
    paths: list[str],
    kind: str,
    needed: dict[str, int],
    opt: CountOptions,
    *,
    col0: int,
    raw: bool,
    dtype: str,
    index_of: dict[str, str],
) -> list[Task]:
    """One :class:`Task` per (unit, source), unit by unit, sources in column order (``col0`` on)."""
    tasks = []
    for unit in units:
        unit_rows = np.concatenate([s.rows for s in unit.segments])
        se = layout.start_ends[unit_rows]
        for j, p in enumerate(paths):
            tasks.append(
                Task(
                    unit=unit,
                    col=col0 + j,
                    kind=kind,
                    path=p,
                    length=layout.length,
                    start_ends=se,
                    record_lengths={s.seqid: needed[s.seqid] for s in unit.segments},
                    opt=opt,
                    raw=raw,
                    dtype=dtype,
                    index=index_of.get(p),
                )
            )
    return tasks


def _check_arguments(prefix: str, paths: list[str], indexes: list[str] | None) -> tuple[list[str], dict[str, str]]:
    """The paths without repeats and each one's explicit index, after the checks of --prefix, --bam-index and
    the path lengths."""
    if not prefix or "/" in prefix or prefix.strip() != prefix:
        raise ChromaflowError(f"--prefix {prefix!r}: expected a plain name such as atacseq")
    if indexes is not None and len(indexes) != len(paths):
        raise ChromaflowError(f"--bam-index: {len(indexes)} index file(s) for {len(paths)} BAM file(s)")
    index_of = dict(zip(paths, indexes)) if indexes is not None else {}
    paths = _dedupe(paths)
    for p in paths:
        if len(p.encode()) > PATH_BYTES:
            raise ChromaflowError(f"{p[:60]}...: path longer than {PATH_BYTES} bytes cannot be stored in bam_files")
    return paths, index_of


def _read_target(h5: str, prefix: str, dtype: str) -> tuple[GenomeLayout, int, bool]:
    """The genome h5's layout, and the columns already there for ``prefix`` and whether to write raw chunks."""
    fh = open_h5_input(h5, "genome h5")
    try:
        try:
            layout = read_layout(fh, h5)
            col0, direct = _existing(fh, h5, prefix, layout, dtype)
        except (KeyError, ValueError, RuntimeError) as exc:
            raise ChromaflowError(f"{h5}: corrupt or unexpected HDF5 content ({str(exc).splitlines()[0]})") from None
    finally:
        fh.close()
    return layout, col0, direct


def _species_rows(h5: str, layout: GenomeLayout, species: str | None) -> np.ndarray:
    """The rows to compute: all, or those of ``--species``."""
    if species is None:
        return np.arange(layout.n_rows)
    if layout.species is None:
        raise ChromaflowError(f"{h5}: --species given but the file has no data/species")
    rows = np.flatnonzero(layout.species == species)
    if rows.size == 0:
        found = ", ".join(sorted(set(layout.species.tolist()))[:5])
        raise ChromaflowError(f"{h5}: no rows of species {species!r} (the file has {found})")
    return rows


def _run_tasks(
    h5: str,
    target: str,
    tasks: list[Task],
    result: AddResult,
    *,
    threads: int,
    total_bp: int,
    progress: bool | None,
    label: str,
    prepare,
) -> None:
    """Copy ``h5`` to a temporary file, store every task's result (counts into ``result``) in the two datasets
    ``prepare(file)`` makes there, and put the file in place as ``target`` (atomic: all or nothing)."""
    import h5py

    mode = stat.S_IMODE(os.stat(h5).st_mode)
    pool = _Pool(threads, len(tasks))  # forked before the output file is opened
    try:
        with atomic_output(target, mode=mode) as tmp:
            shutil.copyfile(h5, tmp)
            with h5py.File(tmp, "r+") as f:
                cov_ds, spl_ds = prepare(f)
                with Progress(total_bp, label, "bp", enabled=progress) as bar:
                    for task, res in pool.run(tasks):
                        rows_w, cov, spl, counted, bp = res
                        result.reads_counted[task.path] += counted
                        _store(cov_ds, rows_w, task.col, cov, task.raw)
                        _store(spl_ds, rows_w, task.col, spl, task.raw)
                        result.bp += bp
                        bar.update(bp)
    finally:
        pool.close()


def _prepare(f, prefix: str, layout: GenomeLayout, col0: int, paths: list[str], dtype: str):
    n, length, b = layout.n_rows, layout.length, len(paths)
    grp = f.require_group("evaluation")
    names = [f"{prefix}_coverage", f"{prefix}_spliced_coverage"]
    encoded = np.array([p.encode() for p in paths], dtype=f"S{PATH_BYTES}")
    if col0 == 0:
        dsets = [
            grp.create_dataset(
                nm,
                shape=(n, length, b),
                dtype=dtype,
                chunks=(1, length, 1),
                maxshape=(None, length, None),
                compression="lzf",
                shuffle=True,
                fillvalue=np.array(-1, dtype=dtype),
            )
            for nm in names
        ]
        meta = grp.require_group(f"{prefix}_meta")
        bf = meta.create_dataset("bam_files", shape=(b,), maxshape=(None,), dtype=f"S{PATH_BYTES}", fillvalue=b"")
        bf[:] = encoded
    else:
        dsets = [grp[nm] for nm in names]
        for d in dsets:
            d.resize(col0 + b, axis=2)
        bf = grp[f"{prefix}_meta/bam_files"]
        bf.resize((col0 + b,))
        bf[col0:] = encoded
    return dsets


def _store(ds, rows: list[int], col: int, data, raw: bool) -> None:
    if raw:
        for i, r in enumerate(rows):
            ds[r, :, col] = data[i]
        return
    wdc = ds.id.write_direct_chunk
    for r, (mask, chunk) in zip(rows, data):
        wdc((r, 0, col), chunk, mask)


class _Pool:
    """Runs tasks in order: inline for one thread, else in forked worker processes with at most 2 x workers
    results in flight (bounded memory), yielding results in task order (output independent of the count).

    Fork (not spawn): the ``chromaflow`` launchers run the CLI at import time, which spawn would re-run. The pool
    is created before the output h5 is opened, so no child inherits an open HDF5 file it could touch.
    """

    def __init__(self, threads: int, n_tasks: int):
        self.workers = min(threads, n_tasks)
        self.ex = None
        if self.workers > 1:
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor
            import signal

            # The executor forks its workers at the first submit: do that here, before the output h5 is opened,
            # and with SIGINT blocked, so a Ctrl-C that lands during the fork is delivered afterwards as a normal
            # KeyboardInterrupt (inside the fork hooks it was printed as "Exception ignored" and lost: the run
            # went on to the end and exited 0).
            old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            try:
                self.ex = ProcessPoolExecutor(
                    max_workers=self.workers, mp_context=mp.get_context("fork"), initializer=_worker_init
                )
                self.ex.submit(os.getpid).result()
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)

    def run(self, tasks: list[Task]):
        """(task, :func:`run_task` result) of every task, in task order: inline, or in the workers with at most 2 x
        workers tasks in flight."""
        if self.ex is None:
            for t in tasks:
                yield t, run_task(t)
            return
        pending: deque = deque()
        it = iter(tasks)
        for t in it:
            pending.append((t, self.ex.submit(run_task, t)))
            if len(pending) >= 2 * self.workers:
                break
        while pending:
            t, fut = pending.popleft()
            res = fut.result()
            nxt = next(it, None)
            if nxt is not None:
                pending.append((nxt, self.ex.submit(run_task, nxt)))
            yield t, res

    def close(self) -> None:
        """Close this process's sources and shut the workers down, cancelling tasks not yet started."""
        close_sources()
        if self.ex is not None:
            self.ex.shutdown(wait=True, cancel_futures=True)
