"""Cutting FASTA records into Helixer subsequences (FORMATS.md §1.5): the one implementation shared by
``chromaflow fasta2h5`` and ``chromaflow predict --fasta``.

For a record of length n and chunk length L, k = ceil(n / L): the k plus rows cover [i·L, min((i+1)·L, n)) in
ascending order, then the k minus rows cover the same intervals in descending order, each the reverse complement of
its plus row. Padding (byte 0 = :data:`PAD`) is always at the end of a row. Plus rows store start_ends
``[start, end]``, minus rows ``[end, start]``.

Rows are handled as **uint8 base codes** (1 byte per base): the FASTA bytes themselves (any case, IUPAC), padding
0. A minus row is held as the *reversed, not complemented* bytes plus its strand; complementing is a column
reversal of the one-hot encoding (C,A,T,G → G,T,A,C), done by whoever encodes (fasta2h5's reverse-complement
lookup tables, the predict engine's second lookup table). :data:`~chromaflow.genome.encoding.COMPLEMENT` maps a byte
to its complement byte for
consumers that want complemented bytes.

:func:`cut` turns the streaming pieces of :class:`chromaflow.genome.fasta.FastaReader` into :class:`Job` s (consecutive
rows of one strand of one record, in file row order) and :class:`RecordEnd` markers, holding only the current
record in memory.
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Iterator, NamedTuple

import numpy as np

from .encoding import PAD


def n_chunks(n: int, L: int) -> int:
    """Rows per strand of a record of n bases: ceil(n / L)."""
    return -(-n // L)


def start_ends(n: int, L: int) -> np.ndarray:
    """(2k, 2) int64 start_ends of one record: k plus rows ``[start, end]`` then k minus rows ``[end, start]``."""
    k = n_chunks(n, L)
    starts = np.arange(k, dtype=np.int64) * L
    ends = np.minimum(starts + L, n)
    se = np.empty((2 * k, 2), dtype=np.int64)
    se[:k, 0], se[:k, 1] = starts, ends
    se[k:, 0], se[k:, 1] = ends[::-1], starts[::-1]
    return se


def chunk_codes(seq: np.ndarray, base: int, n: int, L: int, k: int, strand: int, j0: int, j1: int) -> np.ndarray:
    """Bytes of rows j0..j1-1 of one strand of a record, as a (j1-j0, L) uint8 array incl. padding.

    ``seq`` holds the record's bases from genomic position ``base`` on (a segment of the record).
    Plus row j covers [j·L, min((j+1)·L, n)); minus row j is plus chunk k-1-j, reversed (not complemented).
    Only one row per strand can be short: the last plus row and the first minus row, each padded at its end.
    Full plus rows are returned as a view of ``seq`` (no copy).
    """
    G = j1 - j0
    r = n - (k - 1) * L  # length of the short chunk, 1..L
    if strand > 0:
        sub = seq[j0 * L - base : min(j1 * L, n) - base]
        if sub.size == G * L:
            return sub.reshape(G, L)
        codes = np.full(G * L, PAD, dtype=np.uint8)
        codes[: sub.size] = sub
        return codes.reshape(G, L)
    lo = (k - j1) * L - base
    hi = min((k - j0) * L, n) - base
    rev = seq[lo:hi][::-1]
    if j0 == 0 and r < L:
        codes = np.full(G * L, PAD, dtype=np.uint8)
        codes[:r] = rev[:r]
        codes[L:] = rev[r:]
        return codes.reshape(G, L)
    return np.ascontiguousarray(rev).reshape(G, L)


def rows_into(
    out: np.ndarray, seq: np.ndarray, base: int, n: int, L: int, k: int, strand: int, j0: int, j1: int
) -> None:
    """Write rows j0..j1-1 (as :func:`chunk_codes`) into ``out`` ((j1-j0, L) uint8) with one copy, no temporaries."""
    G = j1 - j0
    flat = out.reshape(G * L)
    if strand > 0:
        sub = seq[j0 * L - base : min(j1 * L, n) - base]
        flat[: sub.size] = sub
        if sub.size < G * L:
            flat[sub.size :] = PAD
        return
    lo = (k - j1) * L - base
    hi = min((k - j0) * L, n) - base
    rev = seq[lo:hi][::-1]
    r = n - (k - 1) * L
    if j0 == 0 and r < L:
        flat[:r] = rev[:r]
        flat[r:L] = PAD
        flat[L:] = rev[r:]
    else:
        flat[:] = rev


class Job(NamedTuple):
    """Rows j0..j1-1 of one strand (+1 / -1) of record ``seqid``; ``seq`` holds its bases from ``base`` on."""

    seqid: str
    seq: np.ndarray
    base: int
    n: int  # bases of the record known so far (exact for these rows)
    k: int  # rows per strand implied by n (exact for these rows)
    strand: int
    j0: int
    j1: int


class RecordEnd(NamedTuple):
    """All 2k rows of record ``seqid`` (n bases) have been yielded as jobs."""

    seqid: str
    n: int
    k: int


def cut(pieces: Iterable, L: int, segment_rows: int) -> Iterator[Job | RecordEnd]:
    """Jobs for every row of every record, in file row order, from FastaReader pieces.

    A record's bases are cut into segments of multiples of L (about ``segment_rows`` rows each); plus-strand jobs
    are yielded as soon as a segment is complete (only full chunks before the record's end), the minus strand once
    the record length n (hence the chunk boundaries) is known. ``segment_rows`` never changes the rows, only how
    they are grouped into jobs.
    """
    seg_bp = max(1, segment_rows) * L
    segs: list[tuple[int, np.ndarray]] = []  # (genomic start, bases) of the current record
    parts: list[bytes] = []
    plen = 0
    base = 0
    for piece in pieces:
        if piece.seq:
            parts.append(piece.seq)
            plen += len(piece.seq)
        if not piece.last and plen < seg_bp:
            continue
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        cut_at = plen if piece.last else (plen // L) * L
        seg = np.frombuffer(data, dtype=np.uint8, count=cut_at)
        parts = [data[cut_at:]] if cut_at < plen else []
        plen -= cut_at
        n = base + cut_at
        # not last: only full chunks so far, so k and n are exact for these rows
        k = n_chunks(n, L) if piece.last else n // L
        yield Job(piece.seqid, seg, base, n, k, 1, base // L, n_chunks(base + cut_at, L))
        segs.append((base, seg))
        base += cut_at
        if not piece.last:
            continue
        for sbase, sseq in reversed(segs):
            i0, i1 = sbase // L, n_chunks(sbase + sseq.size, L)
            yield Job(piece.seqid, sseq, sbase, n, k, -1, k - i1, k - i0)
        yield RecordEnd(piece.seqid, n, k)
        segs, parts, plen, base = [], [], 0, 0


# --------------------------------------------------------------------------------------------------
# layout of a whole FASTA (for sharding the FASTA route and for the pipeline's shard count)
# --------------------------------------------------------------------------------------------------
class Layout(NamedTuple):
    """The row layout of a FASTA: its ``records`` as (seqid, bases) in file order, the subsequence length ``L`` and the
    ``species`` tag. Every record gives ceil(bases / L) plus rows then as many minus rows."""

    records: list[tuple[str, int]]  # (seqid, bases)
    L: int
    species: bytes

    @property
    def n_rows(self) -> int:
        """Rows of the whole FASTA, both strands."""
        return sum(2 * n_chunks(n, self.L) for _, n in self.records)

    @property
    def bp(self) -> int:
        """Bases of all records together."""
        return sum(n for _, n in self.records)

    def row_index(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(first row of every record and the row count last, record names as S50, record lengths): what
        :meth:`rows` needs, computed once per call or passed in by a caller asking for many slices."""
        lengths = np.fromiter((n for _, n in self.records), np.int64, len(self.records))
        counts = 2 * (-(-lengths // self.L))
        off = np.concatenate([np.zeros(1, np.int64), np.cumsum(counts)])
        return off, np.array([s.encode("ascii") for s, _ in self.records], dtype="S50"), lengths

    def rows(
        self, start: int = 0, end: int | None = None, index: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """seqids (S50) and start_ends (int64) of rows [start, end), computed for those rows only: memory follows
        the rows asked for and the record count, not the genome (a 4 Gbp genome has 4 M rows at L = 2,000, whose
        whole arrays take 264 MB). ``index``: :meth:`row_index`."""
        off, names, lengths = self.row_index() if index is None else index
        n = int(off[-1])
        start = max(0, start)
        end = n if end is None else min(end, n)
        if start >= end:
            return np.zeros(0, "S50"), np.zeros((0, 2), np.int64)
        j = np.arange(start, end, dtype=np.int64)
        rec = np.searchsorted(off, j, "right") - 1  # the record of each row (records without rows never match)
        local = j - off[rec]
        size = lengths[rec]
        k = -(-size // self.L)
        plus = local < k
        c = np.where(plus, local, 2 * k - 1 - local)  # minus row j is plus chunk 2k-1-j, reversed
        s = c * self.L
        e = np.minimum(s + self.L, size)
        return names[rec], np.stack([np.where(plus, s, e), np.where(plus, e, s)], axis=1)

    def row_blocks(self, block: int = 1 << 16, index: tuple | None = None):
        """:meth:`rows` of every row, ``block`` rows at a time (``index``: :meth:`row_index`, if the caller has it)."""
        index = self.row_index() if index is None else index
        for a in range(0, int(index[0][-1]), block):
            yield self.rows(a, a + block, index)

    def summary(self) -> dict:
        """What the row-counting commands report of a FASTA (``fasta-layout``, ``predict-plan --fasta``)."""
        return {"subsequence_length": self.L, "records": len(self.records), "bp": self.bp, "subsequences": self.n_rows}

    def fingerprint(self) -> str:
        """The same SHA-256 as ``predict``'s input fingerprint of the fasta2h5 file of this FASTA
        (:func:`input_fingerprint` over the rows, hashed block by block: seqids of every row, then start_ends)."""
        index = self.row_index()  # once: the row count and both passes use it
        h = hashlib.sha256()
        h.update(f"{int(index[0][-1])}:{self.L}:".encode())
        for ids, _ in self.row_blocks(index=index):
            h.update(ids.tobytes())
        for _, se in self.row_blocks(index=index):
            h.update(se.astype("<i8", copy=False).tobytes())
        h.update(self.species)
        return h.hexdigest()


def input_fingerprint(n: int, length: int, seqids: np.ndarray, start_ends_: np.ndarray, species0: bytes) -> str:
    """SHA-256 over N, L, seqids (S50), start_ends (<i8) and species[0]: identifies the rows of an input."""
    h = hashlib.sha256()
    h.update(f"{n}:{length}:".encode())
    h.update(np.asarray(seqids, dtype="S50").tobytes())
    h.update(np.asarray(start_ends_, dtype="<i8").tobytes())
    h.update(species0)
    return h.hexdigest()


def scan_layout(fasta: str, L: int, species: bytes = b"") -> Layout:
    """Record ids and lengths of ``fasta`` (one validating pass of the reader, nothing kept but lengths)."""
    from .fasta import FastaReader

    records: list[tuple[str, int]] = []
    n = 0
    for piece in FastaReader(fasta).pieces():
        n += len(piece.seq)
        if piece.last:
            records.append((piece.seqid, n))
            n = 0
    return Layout(records, L, species)
