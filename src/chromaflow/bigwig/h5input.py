"""Reading a predictions h5 (FORMATS.md §4) for the conversion: validation, chromosome map, chunk reading.

Fast path (Predmoter's layout: chunks (1, L, 1), deflate only, integer dtype): the byte offset of every chunk
is taken once from HDF5's chunk index (``chunk_iter``), raw chunks are read with ``os.pread`` and inflated
with libdeflate (the ``deflate`` package; ~5x zlib, GIL released) in a thread pool, straight into small
integer buffers. Anything else (other chunking or filters, ``--experimental`` BAM means, values beyond
``EXACT_LIMIT``) goes through h5py and float32, exactly as Predmoter computes it.
"""

from __future__ import annotations

import os
import sys
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from ..utils.errors import ChromaflowError
from ..utils.inputs import open_h5_input
from ..genome import h5rows
from ..genome.h5rows import read_rows
from .tracks import EXACT_LIMIT


@dataclass
class Chrom:
    """One chromosome of a predictions file: its ``name``, ``size`` in bases and the file rows of its windows, ``plus``
    (ascending genome) and ``minus`` (element k covers the same window as ``plus[k]``)."""

    name: str
    size: int
    plus: np.ndarray  # file rows, ascending genome
    minus: np.ndarray  # file rows; element k covers the same window as plus[k]


def _decode(x) -> str:
    return bytes(x).decode("ascii", errors="replace")


def seqid_codes(seqids, block: int | None = None) -> tuple[np.ndarray, list[bytes]]:
    """Each row's seqid as an int32 code (codes numbered in order of first appearance) and the seqids by code.

    ``seqids``: an (N,) byte-string array or a one-row-chunked h5 dataset, read ``block`` rows at a time. The whole
    column is never held as strings: at 4 Gbp and L = 2000 it is 4 M rows of S50 (202 MB), and np.unique over it
    held three such copies, which made BIGWIG's and PEAKS' peak memory (844 MiB; issue 30)."""
    block = block or h5rows.ROW_BLOCK  # read at call time: the h5rows tests lower it
    n = seqids.shape[0]
    codes = np.empty(n, dtype=np.int32)
    index: dict[bytes, int] = {}
    for a in range(0, n, block):
        blk = read_rows(seqids, a, a + block)  # the shared one-row-chunk reader (it clamps the end)
        uniq, first, inverse = np.unique(blk, return_index=True, return_inverse=True)
        local = np.empty(len(uniq), dtype=np.int32)
        for u in np.argsort(first, kind="stable"):
            local[u] = index.setdefault(bytes(uniq[u]), len(index))
        codes[a : a + len(blk)] = local[inverse.reshape(-1)]
    return codes, list(index)


def chromosome_map(seqids, start_ends: np.ndarray, blacklist: set[str], path: str = "") -> list[Chrom]:
    """FORMATS §5.2: order of first appearance, size = max of start_ends, + rows in file order, − reversed."""
    codes, names = seqid_codes(seqids)
    return chromosome_map_codes(codes, names, start_ends, blacklist, path)


def chromosome_map_codes(
    codes: np.ndarray, names: list[bytes], start_ends: np.ndarray, blacklist: set[str], path: str = ""
) -> list[Chrom]:
    """:func:`chromosome_map` of rows given as :func:`seqid_codes` (codes in order of first appearance)."""
    rows_by = np.argsort(codes, kind="stable")  # rows grouped by seqid, file order within a group
    bounds = np.concatenate([[0], np.cumsum(np.bincount(codes, minlength=len(names)))])
    chroms = []
    for u, raw in enumerate(names):
        name = _decode(raw)
        if len(name.split()) != 1 or name != name.strip():
            raise ChromaflowError(
                f"{path}: data/seqids {name!r} holds whitespace, which would break the columns of "
                "chrom.sizes and bedGraph (Helixer keeps a header's tab in the id; make the h5 "
                "with chromaflow fasta2h5, which cuts the id at it)"
            )
        if name in blacklist:
            continue
        rows = rows_by[bounds[u] : bounds[u + 1]]
        se = start_ends[rows]
        is_plus = se[:, 0] <= se[:, 1]
        plus = rows[is_plus]
        minus = rows[~is_plus][::-1]
        if len(plus) != len(minus):
            raise ChromaflowError(
                f"{path}: data/seqids {name!r}: {len(plus)} plus-strand rows but {len(minus)} "
                "minus-strand rows; not a Helixer-layout predictions file"
            )
        if int(se.min()) < 0:
            raise ChromaflowError(f"{path}: data/start_ends of seqid {name!r} holds negative coordinates")
        chroms.append(Chrom(name=name, size=int(se.max()), plus=plus.astype(np.int64), minus=minus.astype(np.int64)))
    return chroms


def _check_dataset_name(path: str, name: str) -> None:
    """A dataset name becomes part of track file names and hub lines: no '/' (a file outside --outdir, or in a
    subfolder of it), no control character (a tab or line break would break trackDb lines)."""
    if "/" in name:
        raise ChromaflowError(f"{path}: dataset name {name!r} holds '/', which cannot be part of a track file name")
    if not name or any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        raise ChromaflowError(f"{path}: dataset name {name!r} is empty or holds a control character")


@dataclass(frozen=True)
class Source:
    """One source of a virtual dataset (``predict-merge --view``): rows ``start:stop`` of the view are the rows of
    dataset ``name`` in the file ``path``."""

    start: int
    stop: int
    path: str
    name: str


def virtual_sources(ds, view_path: str) -> list[Source]:
    """The sources of the virtual dataset ``ds`` in row order, each found as HDF5 finds it (HDF5_VDS_PREFIX, then
    the view's folder) and checked: a missing source file would otherwise read as the fill value (-1, silently
    no signal), so it is a one-line error naming the view and the file. Sources must map whole rows."""
    import h5py

    out = []
    folder = os.path.dirname(os.path.abspath(view_path))
    prefixes = [p for p in os.environ.get("HDF5_VDS_PREFIX", "").split(os.pathsep) if p]
    for m in ds.virtual_sources():
        (a, *rest), (b, *rest_end) = m.vspace.get_select_bounds()
        if any(rest) or list(rest_end) != [n - 1 for n in ds.shape[1:]]:
            raise ChromaflowError(
                f"{view_path}: virtual dataset {ds.name} maps a source ({m.file_name}) to part of "
                f"a row; expected whole rows"
            )
        name = m.file_name
        found = (
            name
            if os.path.isabs(name)
            else next(
                (
                    c
                    for c in [os.path.join(p, name) for p in prefixes] + [os.path.join(folder, name)]
                    if os.path.isfile(c)
                ),
                None,
            )
        )
        if name == "." or (found and os.path.samefile(found, view_path)):
            found = view_path
        if not found or not os.path.isfile(found):
            raise ChromaflowError(
                f"{view_path}: {ds.name} is a view over {name}, which is missing (a view from "
                f"predict-merge --view needs its shards beside it)"
            )
        out.append(Source(int(a), int(b) + 1, found, m.dset_name))
    out.sort(key=lambda x: x.start)
    at = 0
    for x in out:
        if x.start != at:
            raise ChromaflowError(f"{view_path}: virtual dataset {ds.name} has no source for rows {at}-{x.start}")
        at = x.stop
    if at != ds.shape[0]:
        raise ChromaflowError(f"{view_path}: virtual dataset {ds.name} has no source for rows {at}-{ds.shape[0]}")
    for x in out:  # one source open at a time (each open file keeps HDF5 caches)
        try:
            f = h5py.File(x.path, "r")
        except OSError:
            raise ChromaflowError(f"{view_path}: {ds.name}'s source {x.path} is not a readable HDF5 file") from None
        with f:
            src = f.get(x.name)
            if src is None or not hasattr(src, "shape"):
                raise ChromaflowError(f"{view_path}: {ds.name}'s source {x.path} has no dataset {x.name}")
            if src.shape != (x.stop - x.start, *ds.shape[1:]) or src.dtype != ds.dtype:
                raise ChromaflowError(
                    f"{view_path}: {ds.name}'s source {x.path}:{x.name} has shape {src.shape} "
                    f"{src.dtype}, the view maps {(x.stop - x.start, *ds.shape[1:])} {ds.dtype}"
                )
    return out


class SourceRows:
    """The rows of a virtual dataset, read from its sources one file at a time (``ds[a:b]``, ``shape``, ``dtype``:
    what :func:`~chromaflow.genome.h5rows.read_rows` and :func:`seqid_codes` use). HDF5 reading through a view opens
    every source it touches and keeps it open with its caches; the shards' seqids and start_ends have one chunk per
    row, and their chunk indexes stayed in memory: 18 shards of 20,000 rows took 350 MB more to open than the merged
    file (1.2 Gbp in 61 shards: BIGWIG and PEAKS 1.4 GiB against 378 MiB)."""

    def __init__(self, ds, sources: list[Source]):
        self.shape, self.dtype, self.name = ds.shape, ds.dtype, ds.name
        self.sources = sources
        self._at: int | None = None
        self._fh: Any = None  # the open h5py.File of source self._at

    def _dataset(self, k: int):
        import h5py

        if self._at != k:
            self.close()
            self._fh = h5py.File(self.sources[k].path, "r")
            self._at = k
        return self._fh[self.sources[k].name]

    def __getitem__(self, key) -> np.ndarray:
        """``ds[a:b]``, or ``ds[rows, ...]`` with rows a slice or ascending row numbers and the other axes' keys
        as h5py takes them."""
        rows, rest = (key[0], key[1:]) if isinstance(key, tuple) else (key, ())
        if isinstance(rows, slice):
            a, b, _ = rows.indices(self.shape[0])
            if not rest:
                out = np.empty((max(b - a, 0), *self.shape[1:]), dtype=self.dtype)
                for k, x in enumerate(self.sources):
                    lo, hi = max(a, x.start), min(b, x.stop)
                    if lo < hi:
                        out[lo - a : hi - a] = self._dataset(k)[lo - x.start : hi - x.start]
                return out
            rows = np.arange(a, b)
        rows = np.asarray(rows, dtype=np.int64)
        parts = []
        for k, x in enumerate(self.sources):
            lo, hi = np.searchsorted(rows, [x.start, x.stop])
            if lo < hi:
                local = rows[lo:hi] - x.start
                sel = slice(int(local[0]), int(local[-1]) + 1) if local[-1] - local[0] + 1 == len(local) else local
                parts.append(self._dataset(k)[(sel,) + rest])
        if not parts:
            return self._dataset(0)[(slice(0, 0),) + rest]
        return np.concatenate(parts)

    def close(self) -> None:
        """Close the source file that is open, if any."""
        if self._fh is not None:
            self._fh.close()
        self._fh, self._at = None, None


class PredictionsInput:
    """An opened and validated predictions file (or, with ``experimental``, a training-style h5)."""

    def __init__(
        self,
        path: str,
        *,
        experimental: bool = False,
        datasets: list[str] | None = None,
        blacklist: set[str] | None = None,
    ):
        self.path = path
        self.experimental = experimental
        h5 = open_h5_input(path, "predictions file")
        self.h5 = h5
        try:
            self._validate(datasets, blacklist or set())
        except BaseException:
            h5.close()
            raise

    def close(self) -> None:
        """Close the HDF5 file."""
        self.h5.close()

    # ------------------------------------------------------------------ validation
    def _need(self, key: str):
        if key not in self.h5:
            kind = "training-style h5 (--experimental)" if self.experimental else "predictions file"
            raise ChromaflowError(f"{self.path}: not a {kind} (missing {key})")
        obj = self.h5[key]
        if not hasattr(obj, "shape"):
            raise ChromaflowError(f"{self.path}: {key} is a group, expected a dataset")
        return obj

    def _validate(self, datasets: list[str] | None, blacklist: set[str]) -> None:
        seqids, start_ends = self._check_rows()
        self.sources = {
            k: virtual_sources(self.h5[k], self.path)
            for k in ("data/seqids", "data/start_ends", "prediction/predictions")
            if k in self.h5 and getattr(self.h5[k], "is_virtual", False)
        }
        N = seqids.shape[0]
        avail = self._available(datasets)
        self.available = avail
        self.datasets = self._choose(datasets, avail)
        self._open_values(N, len(avail))
        self._map_chromosomes(seqids, start_ends, blacklist)

    def _check_rows(self):
        """data/seqids and data/start_ends, checked: present, shapes, dtypes, one row each per subsequence."""
        path = self.path
        need = ["data/seqids", "data/start_ends"] + (
            [] if self.experimental else ["prediction/predictions", "prediction/datasets"]
        )
        missing = [k for k in need if k not in self.h5]
        if missing:
            kind = "training-style h5 (--experimental)" if self.experimental else "predictions file"
            raise ChromaflowError(f"{path}: not a {kind} (missing {', '.join(missing)})")
        seqids = self._need("data/seqids")
        start_ends = self._need("data/start_ends")
        if seqids.ndim != 1 or seqids.dtype.kind != "S":
            raise ChromaflowError(
                f"{path}: data/seqids has shape {seqids.shape} and dtype {seqids.dtype}; "
                "expected (N,) fixed-length byte strings"
            )
        N = seqids.shape[0]
        if start_ends.ndim != 2 or start_ends.shape[1] != 2 or start_ends.dtype.kind not in "iu":
            raise ChromaflowError(
                f"{path}: data/start_ends has shape {start_ends.shape} and dtype "
                f"{start_ends.dtype}; expected (N, 2) integers"
            )
        if start_ends.shape[0] != N:
            raise ChromaflowError(f"{path}: data/start_ends has {start_ends.shape[0]} rows but data/seqids {N}")
        if N == 0:
            raise ChromaflowError(f"{path}: data/seqids is empty (no sequences to convert)")
        return seqids, start_ends

    def _available(self, datasets: list[str] | None) -> list[str]:
        """The dataset names the file holds (evaluation/<ds>_coverage with --experimental, else prediction/datasets)."""
        path = self.path
        if self.experimental:
            ev = self.h5.get("evaluation")
            avail = (
                sorted(k[: -len("_coverage")] for k in ev.keys() if k.endswith("_coverage"))
                if ev is not None and hasattr(ev, "keys")
                else []
            )
            if not avail:
                raise ChromaflowError(f"{path}: no evaluation/<dataset>_coverage datasets (not a training-style h5)")
            if not datasets:
                raise ChromaflowError(f"--experimental needs --datasets (available in {path}: {' '.join(avail)})")
            return avail
        names = self._need("prediction/datasets")
        if names.ndim != 1 or names.dtype.kind != "S":
            raise ChromaflowError(
                f"{path}: prediction/datasets has shape {names.shape} and dtype "
                f"{names.dtype}; expected (D,) byte strings"
            )
        # UTF-8 (ASCII in the Helixer layout): distinct non-ASCII names stay distinct in the track file names
        return [bytes(x).decode("utf-8", errors="replace") for x in names[()]]

    def _choose(self, datasets: list[str] | None, avail: list[str]) -> list[str]:
        """``--datasets`` (default: all available), checked against the file and as track file names."""
        path = self.path
        chosen = list(datasets) if datasets else list(avail)
        bad = [d for d in chosen if d not in avail]
        if bad:
            key = "evaluation/<ds>_coverage" if self.experimental else "prediction/datasets"
            raise ChromaflowError(f"{path}: dataset(s) {' '.join(bad)} not in {key} (available: {' '.join(avail)})")
        if len(set(chosen)) != len(chosen):
            raise ChromaflowError("--datasets names a dataset twice")
        for d in chosen:
            _check_dataset_name(path, d)
        return chosen

    def _open_values(self, N: int, n_avail: int) -> None:
        """The value datasets of the chosen datasets (dsets), their chunk length L and channel indices, checked."""
        chosen = self.datasets
        if self.experimental:
            self.dsets = [self.h5[f"evaluation/{d}_coverage"] for d in chosen]
            for d, ds in zip(chosen, self.dsets):
                self._check_values(ds, f"evaluation/{d}_coverage", N, None)
            self.L = int(self.dsets[0].shape[1])
            for d, ds in zip(chosen, self.dsets):
                if ds.shape[1] != self.L:
                    raise ChromaflowError(
                        f"{self.path}: evaluation/{d}_coverage has L = {ds.shape[1]}, "
                        f"evaluation/{chosen[0]}_coverage {self.L}"
                    )
            self.channels = list(range(len(chosen)))
        else:
            pred = self.h5["prediction/predictions"]
            self._check_values(pred, "prediction/predictions", N, n_avail)
            self.dsets = [pred]
            self.L = int(pred.shape[1])
            self.channels = [self.available.index(d) for d in chosen]

    def _map_chromosomes(self, seqids, start_ends, blacklist: set[str]) -> None:
        """The chromosome map (blacklisted seqids left out, a warning for those not in the file), rows checked
        to fit the chunk length."""
        path = self.path
        # a view's rows from its shards, one open at a time (through HDF5's view every shard stays open)
        # one unfiltered chunk per row (Predmoter's, Helixer's layout): the rows by pread (ChunkRows)
        if "data/seqids" in self.sources:
            seqids = SourceRows(seqids, self.sources["data/seqids"])
        else:
            seqids = chunk_rows(seqids, path) or seqids
        if "data/start_ends" in self.sources:
            start_ends = SourceRows(start_ends, self.sources["data/start_ends"])
        else:
            start_ends = chunk_rows(start_ends, path) or start_ends
        try:
            codes, names = seqid_codes(seqids)
            se = read_rows(start_ends).astype(np.int64, copy=False)
        finally:
            for x in (seqids, start_ends):
                if isinstance(x, (SourceRows, ChunkRows)):
                    x.close()
        present = {_decode(s) for s in names}
        absent = sorted(blacklist - present)
        if absent:
            print(
                f"chromaflow bigwig: WARNING: blacklisted seqid(s) not in {path}: {' '.join(absent)}", file=sys.stderr
            )
        self.chroms = chromosome_map_codes(codes, names, se, blacklist, path)
        if not self.chroms:
            raise ChromaflowError(f"{path}: nothing to convert: every seqid is blacklisted")
        for c in self.chroms:
            for rows in (c.plus, c.minus):
                w = np.abs(se[rows, 1] - se[rows, 0])
                if len(w) and int(w.max()) > self.L:
                    r = int(rows[np.argmax(w)])
                    raise ChromaflowError(
                        f"{path}: data/start_ends row {r} ({c.name}) spans {int(w.max())} bp, "
                        f"more than the chunk length L = {self.L}"
                    )

    def _check_values(self, ds, key: str, N: int, D: int | None) -> None:
        path = self.path
        if ds.ndim != 3:
            raise ChromaflowError(
                f"{path}: {key} has shape {ds.shape}; expected 3 dimensions "
                f"({'(N, L, D)' if D is not None else '(N, L, BAMs)'})"
            )
        # predictions are integers (Predmoter writes rounded predictions as int64); measured coverage is integer
        # read counts, or float32 where add-coverage read it from a bigWig (--bigwig)
        if ds.dtype.kind not in ("iu" if D is not None else "iuf"):
            raise ChromaflowError(
                f"{path}: {key} has dtype {ds.dtype}; expected integers (Predmoter writes rounded predictions as int64)"
                if D is not None
                else f"{path}: {key} has dtype {ds.dtype}; expected read counts (integers) or bigWig values (floats)"
            )
        if ds.shape[0] != N:
            raise ChromaflowError(f"{path}: {key} has {ds.shape[0]} rows but data/seqids {N}")
        if ds.shape[1] < 1 or ds.shape[2] < 1:
            raise ChromaflowError(f"{path}: {key} has shape {ds.shape}; no values")
        if D is not None and ds.shape[2] != D:
            raise ChromaflowError(f"{path}: {key} has {ds.shape[2]} channels but prediction/datasets names {D}")


# --------------------------------------------------------------------------------------------------
# chunk reading
# --------------------------------------------------------------------------------------------------
class Piece:
    """Track inputs of one piece for one channel: plus / minus as (rows, L) arrays in ascending genome order.

    ``dirty``: some value is −1 (padding, to remove). ``exact``: int32 arrays with values in [−1, EXACT_LIMIT),
    where integer arithmetic equals Predmoter's float32 arithmetic; otherwise float32 arrays computed the way
    Predmoter computes them.
    """

    __slots__ = ("plus", "minus", "dirty", "exact", "_buffers", "_owned")

    def __init__(self, plus, minus, dirty, exact, buffers=None):
        self.plus = plus
        self.minus = minus
        self.dirty = dirty
        self.exact = exact
        self._buffers = buffers  # the reader's BufferPool for the int32 arrays (None: plain arrays)
        self._owned = [x for x in (plus, minus) if x is not None] if buffers is not None else []

    def scratch(self, n: int) -> np.ndarray | None:
        """An int32 array of n elements returned to the pool with the piece (None without a pool)."""
        if self._buffers is None:
            return None
        a = self._buffers.get(n)
        self._owned.append(a)
        return a

    def release(self) -> None:
        """Give the piece's int32 arrays back to the pool (where it has one) and drop ``plus`` and ``minus``."""
        if self._buffers is not None:
            self._buffers.put(self._owned)
        self._owned = []
        self.plus = self.minus = None


class BufferPool:
    """Reused int32 buffers of one capacity (the largest piece); smaller requests get a view of one.

    Block-sized numpy arrays (tens to hundreds of MB) would otherwise be fresh memory each time: numpy asks for
    transparent huge pages, and the kernel's zeroing of those pages cost more CPU than the conversion itself.
    """

    def __init__(self, capacity: int, keep: int = 12):
        self.capacity = capacity
        self.keep = keep
        self._free: list[np.ndarray] = []
        self._lock = threading.Lock()

    def get(self, n: int) -> np.ndarray:
        """An int32 array of ``n`` elements: a view of a free pooled buffer (a new one if none is free), or a fresh
        array when ``n`` exceeds the capacity."""
        if n > self.capacity:
            return np.empty(n, dtype=np.int32)
        with self._lock:
            buf = self._free.pop() if self._free else None
        if buf is None:
            buf = np.empty(self.capacity, dtype=np.int32)
        return buf[:n]

    def put(self, arrays) -> None:
        """Return ``arrays`` (or the buffers they view) to the pool: only 1-D int32 buffers of the pool's capacity are
        kept, at most ``keep`` of them."""
        with self._lock:
            for a in arrays:
                base = a if a.base is None else a.base
                if (
                    isinstance(base, np.ndarray)
                    and base.ndim == 1
                    and base.dtype == np.int32
                    and len(base) == self.capacity
                    and len(self._free) < self.keep
                ):
                    self._free.append(base)


#: work smaller than this many bp (a piece's chunks to read, a piece's tracks to compute) is done in the calling
#: thread, not shared out to the pool: handing a contig of a few kbp to the workers cost more than its work (20,000
#: contigs of 1-20 kbp: ~1 ms a contig a track, mostly thread hand-offs and the GIL passed back and forth; issue 30)
POOL_MIN_BP = 65_536


class ChunkReader:
    """Reads the predictions of a :class:`PredictionsInput` as :class:`Piece` objects (:meth:`load`): straight from the
    file's chunks (pread and inflate) where its datasets allow it, through h5py otherwise. ``pool``: threads for the
    reads (None: inline); ``piece_chunks``: chunks per piece, which sizes the buffers."""

    def __init__(self, inp: PredictionsInput, pool: ThreadPoolExecutor | None, piece_chunks: int = 1):
        self.inp = inp
        self.pool = pool
        self.L = inp.L
        self.channels = inp.channels
        self.fast = False
        self._fd: int | None = None
        self._fds: list[int] | None = None  # a view's source files, by self._source_of[row]
        self._rows: SourceRows | None = None  # h5py's path over a view: its predictions, a shard at a time
        self.buffers = BufferPool(piece_chunks * inp.L)
        self._native_read: Any = False  # the C batch reader (_native_reader), built at the first load
        if not inp.experimental and os.environ.get("CHROMAFLOW_BIGWIG_READER") != "h5py":
            self._setup_fast(inp.dsets[0])

    def close(self) -> None:
        """Close the file descriptors and the h5py reader this reader opened."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        for fd in self._fds or ():
            os.close(fd)
        self._fds = None
        if self._rows is not None:
            self._rows.close()
            self._rows = None

    @staticmethod
    def _fast_filters(d, L: int):
        """The dataset's filter ids if its chunks suit the fast path (chunks (1, L, 1), deflate or none, little
        endian), else None."""
        try:
            plist = d.id.get_create_plist()
            filters = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]
        except Exception:  # pragma: no cover - exotic h5py builds
            return None
        if d.chunks != (1, L, 1) or filters not in ([1], []) or d.dtype.byteorder == ">":
            return None
        return filters

    def _setup_fast(self, d) -> None:
        if d.is_virtual:
            self._setup_virtual(d)
            return
        filters = self._fast_filters(d, self.L)
        if filters is None:
            return
        self.dtype = d.dtype.newbyteorder("<")
        self.fill = d.fillvalue
        self.nbytes = self.L * d.dtype.itemsize
        N, _, D = d.shape
        # 16 bytes a chunk (a chunk's stored size fits 32 bits: at most L values), 8 M chunks at 4 Gbp and L = 2000
        # the fast path's chunk index: None again when a view's sources do not suit it (_setup_virtual)
        self.offset: np.ndarray | None = np.full((N, D), -1, dtype=np.int64)
        self.size: np.ndarray | None = np.zeros((N, D), dtype=np.uint32)
        self.mask: np.ndarray | None = np.zeros((N, D), dtype=np.uint32)
        try:
            self._index_chunks(d, 0)
            self._fd = os.open(self.inp.path, os.O_RDONLY)
            self._check_address(d, self._fd, 0, N)
            self._direct = None
        except Exception:  # old h5py (no chunk_iter), user block, ...: HDF5 reads each raw chunk
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            self._direct = d.id
        self.filtered = filters == [1]
        self.fast = True

    def _index_chunks(self, d, row0: int) -> None:
        """Every written chunk's file offset, stored size and filter mask, at its row + ``row0``."""
        assert self.offset is not None and self.size is not None and self.mask is not None
        n = d.shape[0]
        if native_chunk_index(d, *(a[row0 : row0 + n] for a in (self.offset, self.size, self.mask))):
            return

        def visit(ci):
            """Record one chunk's file offset, stored size and filter mask at its row (+ ``row0``) and channel."""
            r, _, c = ci.chunk_offset
            self.offset[row0 + r, c] = ci.byte_offset
            self.size[row0 + r, c] = ci.size
            self.mask[row0 + r, c] = ci.filter_mask

        d.id.chunk_iter(visit)

    def _check_address(self, d, fd: int, row0: int, row1: int) -> None:
        """The addresses are file offsets for a file without a user block: check the first written chunk of rows
        ``row0:row1`` (the dataset's own rows from 0) against HDF5 (argwhere listed every one: 129 MB at 8 M
        chunks)."""
        assert self.offset is not None and self.size is not None  # called once the chunks are indexed
        D = self.offset.shape[1]
        flat = self.offset[row0:row1].reshape(-1)
        first = int(np.argmax(flat >= 0))
        if len(flat) and flat[first] >= 0:
            r, c = divmod(first, D)
            _, raw = d.id.read_direct_chunk((int(r), 0, int(c)))
            if os.pread(fd, int(self.size[row0 + r, c]), int(self.offset[row0 + r, c])) != bytes(raw):
                raise ValueError("chunk address mismatch")

    def _setup_virtual(self, d) -> None:
        """A view (``predict-merge --view``): the fast path over its sources, each shard file's chunks indexed at
        its rows in the view and read from its own descriptor; h5py's path when a source does not suit it."""
        import h5py

        sources = self.inp.sources.get(d.name[1:]) or virtual_sources(d, self.inp.path)
        N, _, D = d.shape
        self.offset = np.full((N, D), -1, dtype=np.int64)
        self.size = np.zeros((N, D), dtype=np.uint32)
        self.mask = np.zeros((N, D), dtype=np.uint32)
        self._source_of: np.ndarray | None = np.empty(N, dtype=np.int32)
        fds: list[int] = []
        kinds = set()
        try:
            for k, src in enumerate(sources):
                with h5py.File(src.path, "r") as f:
                    sd = f[src.name]
                    filters = self._fast_filters(sd, self.L)
                    if filters is None or sd.fillvalue != d.fillvalue:
                        raise ValueError("source not suited to the fast path")
                    kinds.add((tuple(filters), sd.dtype.str))
                    self._index_chunks(sd, src.start)
                    fds.append(os.open(src.path, os.O_RDONLY))
                    self._check_address(sd, fds[-1], src.start, src.stop)
                self._source_of[src.start : src.stop] = k
            if len(kinds) != 1:
                raise ValueError("sources differ in filters or type")
        except Exception:
            for fd in fds:
                os.close(fd)
            self.offset = self.size = self.mask = self._source_of = None
            return
        ((filters, dtype),) = kinds
        self.dtype = np.dtype(dtype).newbyteorder("<")
        self.fill = d.fillvalue
        self.nbytes = self.L * self.dtype.itemsize
        self._fds = fds
        self._direct = None
        self.filtered = list(filters) == [1]
        self.fast = True

    def _raw(self, row: int, ch: int):
        """(bytes, filter mask) of one chunk, or None if it was never written (fill value)."""
        if self._direct is not None:
            try:
                mask, raw = self._direct.read_direct_chunk((row, 0, ch))
            except Exception:
                return None
            return raw, mask
        assert self.offset is not None and self.size is not None and self.mask is not None  # the fast path's index
        off = int(self.offset[row, ch])
        if off < 0:
            return None
        # one file (its descriptor is open), or a view's sources (by _source_of)
        fd = cast(int, self._fd) if self._fds is None else self._fds[cast(np.ndarray, self._source_of)[row]]
        return os.pread(fd, int(self.size[row, ch]), off), int(self.mask[row, ch])

    # ------------------------------------------------------------------ pieces
    def load(
        self, plus_rows: np.ndarray, minus_rows: np.ndarray, need: dict[int, tuple[bool, bool]]
    ) -> dict[int, Piece]:
        """Pieces for the channels in ``need`` ({channel index: (plus wanted, minus wanted)})."""
        if self.fast:
            out = self._load_fast(plus_rows, minus_rows, need)
            if out is not None:
                return out
        return self._load_h5py(plus_rows, minus_rows, need)

    def _fast_jobs(self, plus_rows, minus_rows, need):
        """Output buffers ({channel index: (plus, minus) int32 arrays of shape (m, L) or None}) and one job per
        chunk to read: (channel index, buffer, row in buffer, file row, channel, reversed, address of the row)."""
        m = len(plus_rows)
        L = self.L
        bufs = {}
        jobs = []
        for c, (wp, wm) in need.items():
            ch = self.channels[c]
            P = self.buffers.get(m * L).reshape(m, L) if wp else None
            M = self.buffers.get(m * L).reshape(m, L) if wm else None
            bufs[c] = (P, M)
            pa, ma = (X.ctypes.data if X is not None else 0 for X in (P, M))
            for i in range(m):
                if wp:
                    jobs.append((c, P, i, int(plus_rows[i]), ch, False, pa + 4 * L * i))
                if wm:
                    jobs.append((c, M, i, int(minus_rows[i]), ch, True, ma + 4 * L * i))
        return bufs, jobs

    def _load_fast(self, plus_rows, minus_rows, need):
        L = self.L
        bufs, jobs = self._fast_jobs(plus_rows, minus_rows, need)
        dtype = self.dtype
        nbytes = self.nbytes
        filtered = self.filtered
        inflate = _inflater(nbytes, self.inp.path)
        fill = self.fill
        take = _take_kernel(dtype)

        def work(batch):
            """Inflate and store a batch of chunks; (ok, channels holding padding)."""
            padded = set()
            for c, dst, i, row, ch, rev, _ in batch:
                got = self._raw(row, ch)
                if got is None:
                    a = np.full(L, fill, dtype=dtype)
                else:
                    raw, mask = got
                    data = raw if (not filtered or mask & 1) else inflate(raw, row, ch)
                    if len(data) != nbytes:
                        raise ChromaflowError(
                            f"{self.inp.path}: prediction/predictions row {row}: chunk holds "
                            f"{len(data)} bytes, expected {nbytes}"
                        )
                    a = np.frombuffer(data, dtype=dtype)
                # one OR pass proves 0 <= values < EXACT_LIMIT (a negative value sets the sign bit); for int64 chunks
                # the C kernel stores them in the same pass
                if take is not None:
                    bits = take(a.ctypes.data, L, rev, dst[i].ctypes.data)
                else:
                    bits = int(np.bitwise_or.reduce(a))
                if not 0 <= bits < EXACT_LIMIT:
                    if int(a.min()) < -1 or int(a.max()) >= EXACT_LIMIT:
                        return False, padded  # caller falls back to the float32 path
                    padded.add(c)  # -1: padding (removed later)
                if take is None:
                    dst[i] = a[::-1] if rev else a
            return True, padded

        if self._native_read is False:  # built once per reader: the file's descriptors and chunk tables are fixed
            self._native_read = self._native_reader(dtype)
        native = self._native_read
        if native is not None:
            python_work = work

            def work(batch):  # noqa: F811  # the same batch in one C call; Python's per chunk where that fails
                """Read, inflate and store a batch of chunks in C (_kernels.c cf_read_chunks); (ok, channels
                holding padding), or the Python loop's result where a chunk could not be read or inflated there
                (it raises the error naming the chunk)."""
                status = native(batch)
                if status is None:
                    return python_work(batch)
                if (status == 2).any():
                    return False, set()
                return True, {job[0] for job, st in zip(batch, status.tolist()) if st == 1}

        step = max(1, min(16, len(jobs) // (4 * (self.pool._max_workers if self.pool else 1)) or 1))
        batches = [jobs[k : k + step] for k in range(0, len(jobs), step)]
        if self.pool is not None and len(batches) > 1 and len(jobs) * L >= POOL_MIN_BP:
            res = list(self.pool.map(work, batches))
        else:
            res = [work(b) for b in batches]
        if not all(ok for ok, _ in res):  # values outside [-1, EXACT_LIMIT): Predmoter's float32 arithmetic
            self.buffers.put([X for P, M in bufs.values() for X in (P, M) if X is not None])
            return None
        padded = set().union(*(p for _, p in res))
        return {c: Piece(P, M, c in padded, True, self.buffers) for c, (P, M) in bufs.items()}

    def _native_reader(self, dtype):
        """``read(batch)`` → per-chunk status (uint8: 0 clean, 1 padding, 2 outside [-1, EXACT_LIMIT)) or None where
        a chunk could not be read or inflated to L values: the C batch reader (``_kernels.c`` cf_read_chunks) over
        this file's chunk index, or None (no C kernels or libdeflate, not int64, chunks read through HDF5, or
        ``CHROMAFLOW_LIBDEFLATE=0``: zlib in Python)."""
        from . import _native

        suits = np.dtype(dtype) == np.dtype("<i8") and self._direct is None
        lib = _native.load() if suits and os.environ.get("CHROMAFLOW_LIBDEFLATE", "1") != "0" else None
        lz = _native.libdeflate() if lib is not None else None
        if lib is None or lz is None:
            return None
        dec_addr = lz["zlib_decompress_addr"]
        offset, size, mask = cast(np.ndarray, self.offset), cast(np.ndarray, self.size), cast(np.ndarray, self.mask)
        fds = np.array(self._fds if self._fds is not None else [self._fd], dtype=np.int32)
        src = self._source_of if self._fds is not None else None
        L, fill, filtered = self.L, int(self.fill), self.filtered

        def read(batch):
            rows = np.fromiter((job[3] for job in batch), np.int64, len(batch))
            chans = np.fromiter((job[4] for job in batch), np.int64, len(batch))
            n = len(batch)
            cols = (
                fds[src[rows]] if src is not None else np.full(n, fds[0], np.int32),
                offset[rows, chans],
                size[rows, chans],
                (filtered & ((mask[rows, chans] & 1) == 0)).astype(np.uint8),
                np.fromiter((job[5] for job in batch), np.uint8, n),
                np.fromiter((job[6] for job in batch), np.uint64, n),
            )
            status = np.zeros(n, np.uint8)
            failed = lib.cf_read_chunks(
                n,
                *(a.ctypes.data for a in cols),
                L,
                fill,
                EXACT_LIMIT,
                dec_addr,
                _native.decompressor(),
                status.ctypes.data,
            )
            return status if failed < 0 else None

        return read

    def _load_h5py(self, plus_rows, minus_rows, need):
        """Generic path: h5py reads, float32 values exactly as Predmoter computes them (FORMATS §5.3)."""
        out = {}
        for c, (wp, wm) in need.items():
            P = self._read_rows(c, plus_rows) if wp else None
            M = self._read_rows(c, minus_rows)[:, ::-1] if wm else None
            dirty = any(X is not None and bool((X < 0).any()) for X in (P, M))
            out[c] = Piece(P, M, dirty, False)
        return out

    def _read_rows(self, c: int, rows: np.ndarray) -> np.ndarray:
        srt = np.sort(rows)
        inv = np.argsort(np.argsort(rows))
        m = len(rows)
        sel = slice(int(srt[0]), int(srt[-1]) + 1) if m and srt[-1] - srt[0] + 1 == m else srt
        if self.inp.experimental:
            a = np.asarray(self.inp.dsets[c][sel]).astype(np.float32)
            return np.rint(a.mean(axis=-1, dtype=np.float32))[inv]
        ds = self.inp.dsets[0]
        if "prediction/predictions" in self.inp.sources:  # a view: its shards one at a time, as its rows are read
            if self._rows is None:
                self._rows = SourceRows(ds, self.inp.sources["prediction/predictions"])
            ds = self._rows
        a = np.asarray(ds[sel, :, self.channels[c]])
        return a.astype(np.float32)[inv]


def native_chunk_index(d, offset: np.ndarray, size: np.ndarray, mask: np.ndarray) -> bool:
    """Fill the (rows, columns) tables ``offset``, ``size`` and ``mask`` (C-contiguous int64, uint32, uint32) with the
    file address, stored size and filter mask of every written chunk of ``d`` (chunk row d's row / chunks[0], column
    its last index / chunks[-1]) through HDF5's H5Dchunk_iter and a C callback (``_kernels.c`` cf_chunk_index); False
    where that cannot run or failed (then fill them with h5py's ``chunk_iter``)."""
    from . import _native

    lib = _native.load()
    it = _native.h5_chunk_iter() if lib is not None else None
    if it is None or d.chunks is None or not all(a.flags.c_contiguous for a in (offset, size, mask)):
        return False
    from h5py._objects import phil  # h5py's lock: HDF5 is called here outside h5py

    rows = -(-d.shape[0] // d.chunks[0])
    if offset.shape[0] != rows:
        return False
    with phil:
        status = lib.cf_chunk_index(
            it,
            d.id.id,
            len(d.shape),
            d.chunks[0],
            d.chunks[-1],
            rows,
            offset.shape[1],
            offset.ctypes.data,
            size.ctypes.data,
            mask.ctypes.data,
        )
    return status >= 0


class ChunkRows:
    """Rows of an h5 dataset that stores each row as its own unfiltered chunk (Predmoter's and Helixer's
    ``data/seqids`` and ``data/start_ends``), read with one pread per row from the chunk index in one C call
    (``_kernels.c`` cf_gather_chunks): HDF5 looks each such chunk up, ~6 us a row. Sliced like the dataset
    (``rows[a:b]``); :func:`chunk_rows` makes one where the dataset suits."""

    def __init__(self, ds, fd: int, offsets: np.ndarray, lib):
        self.ds, self.fd, self.offsets, self.lib = ds, fd, offsets, lib
        self.shape, self.dtype = ds.shape, ds.dtype

    def __getitem__(self, key) -> np.ndarray:
        a, b, step = key.indices(self.shape[0]) if isinstance(key, slice) else (0, 0, 0)
        if step != 1 or b < a:
            return self.ds[key]
        out = np.empty((b - a, *self.shape[1:]), dtype=self.dtype)
        offs = np.ascontiguousarray(self.offsets[a:b])
        if self.lib.cf_gather_chunks(self.fd, offs.ctypes.data, b - a, out[:1].nbytes, out.ctypes.data) >= 0:
            return self.ds[a:b]  # a row never written (fill value) or a short read: HDF5 reads it
        return out

    def close(self) -> None:
        """Close the file descriptor."""
        os.close(self.fd)


def chunk_rows(ds, path: str) -> ChunkRows | None:
    """A :class:`ChunkRows` over ``ds`` of the file at ``path``, or None where the dataset is not one unfiltered chunk
    per row of a little-endian fixed-size type, or its chunk addresses are not the file's offsets."""
    from . import _native

    lib = _native.load()
    try:
        n = ds.shape[0]
        if lib is None or ds.chunks != (1, *ds.shape[1:]) or ds.dtype.byteorder == ">" or ds.dtype.hasobject or not n:
            return None
        if ds.id.get_create_plist().get_nfilters():
            return None
        offsets = np.full((n, 1), -1, np.int64)
        size, mask = np.zeros((n, 1), np.uint32), np.zeros((n, 1), np.uint32)
        if not native_chunk_index(ds, offsets, size, mask) or offsets[0, 0] < 0:
            return None
        fd = os.open(path, os.O_RDONLY)
    except Exception:  # pragma: no cover - exotic datasets: HDF5 reads them
        return None
    rows = ChunkRows(ds, fd, offsets.reshape(-1), lib)
    if not np.array_equal(rows[0:1], ds[0:1]):  # a user block or another driver: addresses are not offsets
        rows.close()
        return None
    return rows


def _take_kernel(dtype):
    """The C kernel that copies an int64 chunk into an int32 row (reversed or not) and returns the OR of its values
    (``_kernels.c`` cf_take_i64), or None (another dtype, or no C kernels: numpy does both)."""
    if np.dtype(dtype) != np.dtype("<i8"):
        return None
    from . import _native

    lib = _native.load()
    return None if lib is None else lib.cf_take_i64


def _inflater(nbytes: int, path: str):
    """zlib-format inflate of one chunk: libdeflate (``deflate`` package) or zlib (CHROMAFLOW_LIBDEFLATE=0)."""
    use_libdeflate = os.environ.get("CHROMAFLOW_LIBDEFLATE", "1") != "0"
    if use_libdeflate:
        try:
            import deflate
        except ImportError:  # pragma: no cover - pinned dependency
            use_libdeflate = False
    if use_libdeflate:

        def inflate(raw, row, ch):
            """Inflate one chunk with libdeflate; on failure, with zlib, whose error names the chunk."""
            try:
                return deflate.zlib_decompress(raw, nbytes)
            except Exception:  # corrupt or wrong size: zlib's message is clearer
                return _zlib_inflate(raw, row, ch, path)

        return inflate
    return lambda raw, row, ch: _zlib_inflate(raw, row, ch, path)


def _zlib_inflate(raw, row, ch, path):
    try:
        return zlib.decompress(raw)
    except zlib.error as exc:
        raise ChromaflowError(f"{path}: prediction/predictions row {row} channel {ch}: corrupt chunk ({exc})") from None
