"""The two inputs of ``chromaflow predict`` behind one interface: a Helixer-layout genome h5 (:class:`H5Source`) or
a FASTA cut as ``fasta2h5`` cuts it (:class:`FastaSource`). The command asks a source for its row length and
species, its row count and fingerprint (a shard needs both before predicting), the rows of its shard, a feed of
batches and what the metrics say about it; it never asks which source it has.

Light imports only at the top: the command checks its input before it imports torch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, cast

import numpy as np

from ..utils.errors import ChromaflowError
from ..utils.sharding import part_bounds
from ..genome.h5rows import read_rows

if TYPE_CHECKING:
    from ..genome.faidx import FastaIndex
    from ..genome.layout import Layout
    from .feed import BufferPool, FastaFeed, IndexedFastaFeed


class InputSource:
    """What every source has and does. Attributes: ``kind`` (the metrics' ``input``), ``path``, ``L`` (row
    length), ``species0`` (the species stored in data/species), ``n_total`` (rows of the whole input; None where
    they are known only once predicted: a FASTA predicted whole). ``on_batch``/``release``: called with each batch
    in row order / once the device holds its contents (None where a source needs neither)."""

    kind: str
    path: str
    L: int
    species0: bytes
    n_total: int | None = None
    on_batch: Callable[[Any], None] | None = None
    release: Callable[[Any], None] | None = None

    def prepare(self, cfg, *, sharded: bool) -> None:
        """Check the row length against the model (``cfg``: its ModelConfig); learn what a shard needs."""
        raise NotImplementedError

    def shard_range(self, shard: tuple[int, int] | None) -> tuple[int, int | None]:
        """Rows [start, end) to predict: all of them (end None while unknown), or shard I of N."""
        if shard is None:
            return 0, self.n_total
        return part_bounds(*shard, cast(int, self.n_total))  # known to a shard (prepare)

    def rows(self, start: int, end: int | None) -> tuple[np.ndarray, np.ndarray]:
        """seqids and start_ends of rows [start, end), as far as they are known before predicting."""
        raise NotImplementedError

    def fingerprint(self) -> str:
        """The input's fingerprint (shard files of one input carry the same, predict-merge checks it)."""
        raise NotImplementedError

    def feed(self, batch: int, start: int, end: int | None, *, threads: int, device, num_workers: int):
        """The feed of rows [start, end) in batches of ``batch`` (an object with ``batches(stop)`` and ``L``)."""
        raise NotImplementedError

    def finish(self, out) -> None:
        """After the loop, in the open predictions file ``out``: complete or check the rows (nothing by default)."""

    def metrics(self) -> dict:
        """The source's own fields of the metrics JSON (none by default)."""
        return {}

    def close(self) -> None:
        """Release the input (nothing by default)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class H5Source(InputSource):
    """``--h5``: a Helixer-layout genome h5 (opened and validated here)."""

    kind = "h5"

    def __init__(self, path: str):
        from . import h5io

        self.path = path
        self.fh, info = h5io.open_input(path)
        self.L, self.species0, self.n_total = info.length, info.species0, info.n_rows
        self._fingerprint = info.fingerprint

    def prepare(self, cfg, *, sharded: bool) -> None:
        """Check the h5's row length against the model's; the h5's rows and fingerprint are known already."""
        cfg.check_length(self.L, self.path)

    def rows(self, start: int, end: int | None) -> tuple[np.ndarray, np.ndarray]:
        """``data/seqids`` and ``data/start_ends`` of rows [start, end) of the h5."""
        return (read_rows(self.fh["data/seqids"], start, end), read_rows(self.fh["data/start_ends"], start, end))

    def fingerprint(self) -> str:
        """The h5's input fingerprint, computed when it was opened."""
        return self._fingerprint

    def feed(self, batch: int, start: int, end: int | None, *, threads: int, device, num_workers: int):
        """An :class:`H5Feed` of rows [start, end) of ``data/X`` as float rows, inflating with ``threads`` threads."""
        from .feed import H5Feed

        # an h5's row count is known: its range has an end
        return H5Feed(
            self.fh["data/X"], self.path, batch, row_start=start, row_end=cast(int, end), threads=threads, mode="x"
        )

    def close(self) -> None:
        """Close the h5 file."""
        self.fh.close()


class FastaSource(InputSource):
    """``--fasta``: rows cut as ``fasta2h5`` cuts them, read while predicting. The rows' seqids and start_ends are
    collected from the batches and written at the end; a shard needs the layout first (row count, fingerprint, its
    rows) and the rows read while predicting must be the layout's. A shard takes the layout from the FASTA's index
    (``<fasta>.fai``, and ``.gzi`` for bgzip, as ``predict-plan`` makes them) and reads only its own rows through it
    (:mod:`chromaflow.genome.faidx`); without an index (or ``--index none``) it scans the whole FASTA for the layout
    and then streams it from the start, skipping the rows before its own."""

    kind = "fasta"

    def __init__(self, path: str, species: str, L: int, reader: str, index: str = "auto"):
        self.path, self.species, self.L, self.reader = path, species, L, reader
        self.use_index = index != "none"
        self.species0 = species.encode("ascii")
        self.layout: Layout | None
        self.index: FastaIndex | None
        self.layout = self.index = None
        self.collected: list = []
        self._rows: tuple[np.ndarray, np.ndarray] | None
        self._feed: FastaFeed | None
        self._pool: BufferPool | None
        self._rows = self._feed = self._pool = None
        self._scanned = 0  # bytes of the file read by the layout scan

    def prepare(self, cfg, *, sharded: bool) -> None:
        """Check ``--subsequence-length`` against the model's; for a shard, learn the layout (row count, fingerprint,
        rows) from the FASTA's index where there is one and it is used, else by scanning the whole FASTA."""
        import os

        from ..genome import faidx
        from ..genome.layout import scan_layout

        cfg.check_length(self.L, f"{self.path} (--subsequence-length)")
        if not sharded:  # read once from the start: the layout is learnt while predicting
            return
        if self.use_index and os.path.exists(faidx.default_paths(self.path)[0]):
            self.index = faidx.read_index(self.path)
            self.layout = self.index.layout(self.L, self.species0)
        else:  # the row count and fingerprint are needed before predicting: one scan
            self.layout = scan_layout(self.path, self.L, self.species0)
            self._scanned = os.path.getsize(self.path)
        self.n_total = self.layout.n_rows

    def rows(self, start: int, end: int | None) -> tuple[np.ndarray, np.ndarray]:
        """The seqids (S50) and start_ends ((n, 2) int64) of rows [start, end) from the layout (a shard); empty without
        a layout (the rows are collected while predicting)."""
        if self.layout is not None:
            self._rows = self.layout.rows(start, end)  # the shard's rows only, not the genome's
        else:
            self._rows = (np.zeros(0, "S50"), np.zeros((0, 2), np.int64))
        return self._rows

    def fingerprint(self) -> str:
        """The fingerprint of the FASTA's layout (learnt in :meth:`prepare`, so for a shard only)."""
        return cast("Layout", self.layout).fingerprint()  # a shard's (prepare)

    def feed(self, batch: int, start: int, end: int | None, *, threads: int, device, num_workers: int):
        """The feed of rows [start, end): through the FASTA's index where :meth:`prepare` read one, else streamed by a
        thread or a child process (``reader`` 'auto': the child process on CUDA); its code buffers are pinned on CUDA.
        """
        from .executors import pinned_pool
        from .feed import FastaFeed

        use_cuda = device.type == "cuda"
        if self.index is not None:
            from .feed import IndexedFastaFeed

            self.reader = "index"
            self._pool = pinned_pool(max(1, num_workers) + 3 + (2 if use_cuda else 0), batch, self.L, pin=use_cuda)
            # an index is read for a shard (prepare): its range has an end
            self._feed = IndexedFastaFeed(
                self.index, self.L, batch, self._pool, row_start=start, row_end=cast(int, end)
            )
            return self._feed
        if self.reader == "auto":
            self.reader = "process" if use_cuda else "thread"
        depth = max(1, num_workers)
        self._pool = pinned_pool(depth + 3 + (2 if use_cuda else 0), batch, self.L, pin=use_cuda)
        self._feed = FastaFeed(self.path, self.L, batch, self._pool, row_start=start, row_end=end, reader=self.reader)
        return self._feed

    def on_batch(self, batch) -> None:
        """Collect the batch's seqids and start_ends (they are written or checked by :meth:`finish`)."""
        self.collected.append((batch.seqids, batch.start_ends))

    def release(self, batch) -> None:
        """Give the batch's code buffer back to the feed's pool."""
        cast("BufferPool", self._pool).release(batch.slot)  # the feed's (feed)

    def finish(self, out) -> None:
        """Write the collected rows' seqids and start_ends into ``out`` (a FASTA predicted whole), or check that they
        are the layout's rows (a shard; ChromaflowError if the file changed)."""
        from . import h5io

        got_ids = [s for ids, _ in self.collected for s in ids]
        got_se = np.concatenate([se for _, se in self.collected]) if self.collected else np.zeros((0, 2), np.int64)
        seqids, start_ends = cast("tuple[np.ndarray, np.ndarray]", self._rows)  # rows() came first
        if self.layout is None:
            h5io.finalize_rows(out, seqids=np.array(got_ids, dtype="S50"), start_ends=got_se)
        elif not (np.array_equal(got_se, start_ends) and list(seqids) == got_ids):
            raise ChromaflowError(
                f"{self.path}: rows changed between the layout scan and prediction "
                "(was the file modified while it was read?)"
            )

    def metrics(self) -> dict:
        """The FASTA route's fields; ``index`` says how the input was read ('fai': through the index, 'scan': from
        the start), ``fasta_bytes_read`` how many bytes of the file on disk that took (None where the child-process
        reader read them), ``records_touched`` the records whose bases were read."""
        import os

        assert self._feed is not None  # metrics of a run: the feed ran
        records = self._feed.records if self.layout is None else self.layout.records
        size = os.path.getsize(self.path)
        read: int | None
        extra: dict[str, Any]
        if self.index is not None:
            indexed = cast("IndexedFastaFeed", self._feed)  # the feed through the index (feed())
            read, touched = indexed.read.disk_bytes, len(indexed.read.records)
            extra = dict(index_files=[os.path.basename(p) for p in self.index.files], bases_fetched=indexed.read.bases)
        else:
            streamed = self._feed.streamed
            read = None if streamed is None else self._scanned + streamed
            touched, extra = len(records) if self._scanned else len(self._feed.records), {}
        return dict(
            fasta=self.path,
            species=self.species,
            subsequence_length=self.L,
            reader=self.reader,
            records=len(records),
            index="fai" if self.index is not None else "scan",
            fasta_bytes=size,
            fasta_bytes_read=read,
            records_touched=touched,
            **extra,
        )

    def close(self) -> None:
        """Close the FASTA index, if one was read."""
        if self.index is not None:
            self.index.close()


def open_source(args) -> InputSource:
    """The source the checked arguments name (``--fasta`` or ``--h5``)."""
    if args.fasta is not None:
        return FastaSource(args.fasta, args.species, args.subsequence_length, args.reader, args.index)
    return H5Source(args.h5)
