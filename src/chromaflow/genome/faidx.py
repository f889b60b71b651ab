"""FASTA indexes (samtools ``.fai``, and ``.gzi`` for bgzip): the layout of a FASTA without reading it, and its rows
read by position, so that a prediction shard reads only its own part of the file.

The index is made by htslib through pysam (``pysam.faidx``, samtools' own code). htslib's rules are not our reader's
(:mod:`chromaflow.genome.fasta`): it takes the record id after leading blanks (``> chr1`` is ``chr1``; ours is an
error), drops a duplicate id and an empty record without an error, accepts ids of any length and bytes, and
refuses lines of different lengths inside a record, blank lines inside a record and plain (non-bgzip) gzip. So an
index is used only where it gives **exactly** the reader's records:

* :func:`plan_index` (``predict-plan --fasta``) makes the index where there is none (temporary names, renamed only
  once verified) and **verifies** it, a made one and one found beside the FASTA alike, with one pass of the reader:
  every record's id, length and every base fetched through the index must equal what the reader reads. A FASTA
  the reader refuses gives the reader's one-line error. A FASTA htslib refuses (or where it differs from the
  reader) falls back to the scan, and the plan says why (``"index": "scan"``, ``"index_reason"``). An index found
  beside the FASTA that does not match it is an error (it is stale or not this file's; it is not overwritten).
* :func:`read_index` (``predict --fasta --shard``) trusts an index only after cheap checks, documented in
  docs/predict.md: every line of the ``.fai`` well-formed with 5 fields, every id valid by the reader's rules and
  unique, every record's bytes inside the file and after the previous record's, the ``.gzi``'s blocks inside the
  compressed file, each header line of a record the shard reads holding that record's id; and each base fetched is
  checked to be there (no short read) and an IUPAC code. Not checked there: the bases of records the shard does not
  read, and whether a foreign index's lines agree with the reader's rules everywhere (that is the plan's
  verification: run ``predict-plan`` on a FASTA whose index was made elsewhere).

Rows of a shard are fetched in windows of a few Mbp (:func:`indexed_jobs`), never a whole record.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import struct
from typing import TYPE_CHECKING, Iterator, NamedTuple, cast

import numpy as np

from ..utils.errors import ChromaflowError
from ..utils.outputs import atomic_outputs
from .fasta import _ALLOWED, _ID, MAX_HEADER_BYTES, MAX_ID_BYTES, FastaReader
from .layout import Job, Layout, n_chunks

if TYPE_CHECKING:
    import re

    import pysam

#: bytes that are not an IUPAC code: deleting the IUPAC codes (either case) from fetched bases leaves only these
_IUPAC = _ALLOWED[2:]
#: bases fetched per window when a shard reads through the index (a 300 Mbp record is never fetched whole)
WINDOW_BP = 8 << 20


def compression(path: str) -> str:
    """``plain``, ``bgzf`` (bgzip: gzip members with the BGZF extra field) or ``gzip`` (any other gzip), by content."""
    with open(path, "rb") as fh:
        head = fh.read(16)
    if head[:2] != b"\x1f\x8b":
        return "plain"
    # BGZF: FLG.FEXTRA set, XLEN >= 6, first subfield 'BC' of length 2 (SAM spec, section 4.1)
    if len(head) >= 16 and head[3] & 4 and head[12:14] == b"BC" and head[14:16] == b"\x02\x00":
        return "bgzf"
    return "gzip"


def default_paths(fasta: str) -> tuple[str, str]:
    """samtools' names of the index files beside ``fasta``: ``<fasta>.fai`` and ``<fasta>.gzi``."""
    return f"{fasta}.fai", f"{fasta}.gzi"


class IndexRecord(NamedTuple):
    """One line of a samtools ``.fai`` index: a record's name, length in bases, byte offset (uncompressed) of its first
    base, bases per full line and bytes per full line (line end included)."""

    name: str
    length: int  # bases
    offset: int  # byte offset (uncompressed) of the first base
    linebases: int  # bases per full line
    linewidth: int  # bytes per full line, line end included

    def byte_of(self, pos: int) -> int:
        """Uncompressed byte offset of base ``pos`` (0-based) of this record."""
        return self.offset + (pos // self.linebases) * self.linewidth + pos % self.linebases

    @property
    def end(self) -> int:
        """Uncompressed byte offset just past the record's last base."""
        return self.byte_of(self.length - 1) + 1


class FastaIndex:
    """A FASTA and its index: ``records`` in file order, ``kind`` ('plain' or 'bgzf'), the ``.gzi`` blocks."""

    def __init__(
        self,
        fasta: str,
        fai: str,
        gzi: str | None,
        records: list[IndexRecord],
        kind: str,
        blocks: list[tuple[int, int]] | None = None,
    ):
        self.fasta, self.fai, self.gzi, self.records, self.kind = fasta, fai, gzi, records, kind
        self.blocks = blocks or [(0, 0)]  # (compressed, uncompressed) offset of each BGZF block start
        self._ublock = [u for _, u in self.blocks]
        self._fa = None
        self._bgzf: pysam.BGZFile | None = None

    def layout(self, L: int, species: bytes = b"") -> Layout:
        """The :class:`Layout` of this FASTA's records (names and lengths in file order) at subsequence length ``L``."""
        return Layout([(r.name, r.length) for r in self.records], L, species)

    @property
    def files(self) -> list[str]:
        """The index files in use: the ``.fai``, then the ``.gzi`` where there is one."""
        return [self.fai] + ([self.gzi] if self.gzi else [])

    # ---------------------------------------------------------------------------------------------
    def _open(self):
        if self._fa is None:
            import pysam

            pysam.set_verbosity(0)  # htslib's own messages on stderr would break the one-line error rule
            self._fa = pysam.FastaFile(
                self.fasta, filepath_index=self.fai, filepath_index_compressed=self.gzi if self.kind == "bgzf" else None
            )
        return self._fa

    def fetch(self, rec: IndexRecord, a: int, b: int) -> bytes:
        """Bases [a, b) of ``rec`` as the index addresses them (htslib: from the byte of base a on, the next b - a
        printable bytes); short or unreadable reads give '' (the caller reports them)."""
        try:
            return self._open().fetch(rec.name, a, b).encode("ascii")
        except (UnicodeError, ValueError, KeyError, OSError):
            return b""

    def disk_range(self, u0: int, u1: int) -> tuple[int, int]:
        """The bytes [a, b) of the file on disk that hold uncompressed bytes [u0, u1) (whole BGZF blocks for bgzip)."""
        if self.kind != "bgzf":
            return u0, u1
        i = bisect.bisect_right(self._ublock, u0) - 1
        j = bisect.bisect_left(self._ublock, u1)
        return self.blocks[i][0], self.blocks[j][0] if j < len(self.blocks) else os.path.getsize(self.fasta)

    def read_raw(self, u0: int, u1: int) -> bytes:
        """Uncompressed bytes [u0, u1) of the FASTA itself (line breaks and headers included)."""
        if self.kind != "bgzf":
            with open(self.fasta, "rb") as fh:
                return os.pread(fh.fileno(), u1 - u0, u0)
        if self._bgzf is None:
            import pysam

            self._bgzf = pysam.BGZFile(self.fasta, "rb")  # type: ignore[call-arg]  # pysam stub: index has a default
        i = bisect.bisect_right(self._ublock, u0) - 1
        c, u = self.blocks[i]
        self._bgzf.seek((c << 16) | (u0 - u))  # a BGZF virtual offset: block start << 16 | offset in the block
        return self._bgzf.read(u1 - u0)

    def header_id(self, i: int) -> str | None:
        """The reader's id of the header line just before record ``i``'s first base (None: no header line there)."""
        off = self.records[i].offset
        span = 4096
        while True:
            a = max(0, off - span)
            chunk = self.read_raw(a, off)
            if not chunk.endswith(b"\n"):
                return None
            nl = chunk.rfind(b"\n", 0, len(chunk) - 1)
            if nl >= 0 or a == 0:
                line = chunk[nl + 1 : -1]
                break
            if span > MAX_HEADER_BYTES:
                return None
            span *= 16
        if not line.startswith(b">"):
            return None
        return cast("re.Match[bytes]", _ID.match(line[1:].rstrip(b" \t\r\v\f"))).group().decode("ascii", "replace")

    def close(self) -> None:
        """Close the open FASTA handles (errors on closing are ignored); a later read opens them again."""
        for f in (self._fa, self._bgzf):
            if f is not None:
                with contextlib.suppress(Exception):
                    f.close()
        self._fa = self._bgzf = None


# --------------------------------------------------------------------------------------------------
# reading an index (the cheap checks)
# --------------------------------------------------------------------------------------------------
def _read_gzi(gzi: str, fasta: str) -> list[tuple[int, int]]:
    err = f"{gzi}: not a bgzip index (.gzi) of {fasta}"
    with open(gzi, "rb") as fh:
        data = fh.read()
    if len(data) < 8:
        raise ChromaflowError(f"{err}: {len(data)} bytes")
    (n,) = struct.unpack_from("<Q", data)
    if len(data) != 8 + 16 * n:
        raise ChromaflowError(f"{err}: {len(data)} bytes for {n} blocks")
    pairs = np.frombuffer(data, dtype="<u8", offset=8).reshape(n, 2).astype(np.int64)
    size = os.path.getsize(fasta)
    if n and (np.any(np.diff(pairs, axis=0) <= 0) or pairs[0, 0] <= 0 or pairs[-1, 0] >= size):
        raise ChromaflowError(f"{err}: its blocks are not inside the file ({size:,} bytes) in order")
    return [(0, 0)] + [(int(c), int(u)) for c, u in pairs]


def _check_id(name: str, where: str) -> None:
    raw = name.encode("utf-8", "surrogateescape")
    if not raw:
        raise ChromaflowError(f"{where}: empty record id")
    if not raw.isascii() or any(c < 0x21 or c == 0x7F for c in raw):
        raise ChromaflowError(f"{where}: record id {name!r} is not printable ASCII")
    if len(raw) > MAX_ID_BYTES:
        raise ChromaflowError(
            f"{where}: record id {name!r} is {len(raw)} bytes long; the Helixer layout stores at"
            f" most {MAX_ID_BYTES} (S50)"
        )


def read_index(fasta: str, fai: str | None = None, gzi: str | None = None) -> FastaIndex:
    """The index of ``fasta`` (default names beside it), after the cheap checks; one-line error naming the index
    file and the record where a check fails."""
    dfai, dgzi = default_paths(fasta)
    fai, gzi = fai or dfai, gzi or dgzi
    kind = compression(fasta)
    if kind == "gzip":
        raise ChromaflowError(
            f"{fasta}: gzip, not bgzip: it cannot be read through the index {fai} (not its index: a plain gzip "
            f"cannot have one): recompress with bgzip (gzip -dc {fasta} | bgzip -c > fixed.fa.gz) and run "
            "predict-plan again, or scan it with --index none"
        )
    blocks = None
    if kind == "bgzf":
        if not os.path.isfile(gzi):
            raise ChromaflowError(f"{gzi}: bgzip FASTA {fasta} has a .fai but no .gzi index beside it")
        blocks = _read_gzi(gzi, fasta)
    records: list[IndexRecord] = []
    seen: dict[str, int] = {}
    with open(fai, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            where = f"{fai}: line {lineno}"
            fields = line.rstrip(b"\r\n").split(b"\t")
            if len(fields) != 5 or not all(f.isdigit() for f in fields[1:]):
                raise ChromaflowError(
                    f"{where}: not a FASTA index line (name, length, offset, line bases, line bytes; tab-separated)"
                )
            name = fields[0].decode("utf-8", "surrogateescape")
            _check_id(name, where)
            if name in seen:
                raise ChromaflowError(f"{where}: duplicate record id {name!r} (first on line {seen[name]})")
            seen[name] = lineno
            rec = IndexRecord(name, *(int(f) for f in fields[1:]))
            if rec.length < 1 or rec.linebases < 1 or rec.linewidth <= rec.linebases:
                raise ChromaflowError(
                    f"{where}: record {name!r}: {rec.length} bases, {rec.linebases} bases in"
                    f" {rec.linewidth} bytes per line: not a record the FASTA reader reads"
                )
            # a header ('>' + id + line end) between the previous record's last base and this one's first
            first = records[-1].end + len(name) + 3 if records else len(name) + 2  # '\n>' id '\n'
            if rec.offset < first:
                raise ChromaflowError(
                    f"{where}: record {name!r} starts at byte {rec.offset:,}, inside the previous"
                    " record or its header: the index is not this FASTA's"
                )
            records.append(rec)
    if not records:
        raise ChromaflowError(f"{fai}: empty FASTA index")
    idx = FastaIndex(fasta, fai, gzi if kind == "bgzf" else None, records, kind, blocks)
    size = _uncompressed_size(idx)
    if records[-1].end > size:
        last = records[-1]
        raise ChromaflowError(
            f"{fai}: record {last.name!r} ({last.length:,} bases from byte {last.offset:,}) ends"
            f" past the end of {fasta} ({size:,} bytes): the index is stale or not this file's; delete it"
        )
    return idx


def _uncompressed_size(idx: FastaIndex) -> int:
    if idx.kind != "bgzf":
        return os.path.getsize(idx.fasta)
    c, u = idx.blocks[-1]
    try:
        return u + len(idx.read_raw(u, u + (1 << 17)))  # the last block holds at most 64 KiB
    except (OSError, ValueError) as exc:
        raise ChromaflowError(f"{idx.gzi}: its last block (byte {c:,}) cannot be read from {idx.fasta}: {exc}")


# --------------------------------------------------------------------------------------------------
# making and verifying an index (the plan)
# --------------------------------------------------------------------------------------------------
class _Refused(Exception):
    """The index cannot be used for this FASTA; the message says why (the plan falls back to the scan)."""


def _build(fasta: str, fai: str, gzi: str | None) -> None:
    import pysam

    prev = pysam.set_verbosity(0)  # htslib's own messages would break the one-line error rule
    try:
        args = [fasta, "--fai-idx", fai] + (["--gzi-idx", gzi] if gzi else [])
        pysam.faidx(*args)
    except pysam.utils.SamtoolsError:
        raise _Refused(
            "htslib's faidx refused the FASTA (lines of different lengths inside a record, a blank line"
            " inside a record, or a header without bases)"
        ) from None
    finally:
        pysam.set_verbosity(prev)


#: WHITE[byte]: a byte that may end a sequence line (trailing whitespace and the line break: the reader drops them)
WHITE = np.zeros(256, dtype=bool)
WHITE[list(b" \t\r\v\f\n")] = True
#: bases checked per read of the raw file in :func:`verify`
_VERIFY_BP = 4 << 20


def _check_lines(idx: FastaIndex, rec: IndexRecord, pos: int, seq: bytes) -> str | None:
    """Bases [pos, pos + len(seq)) of ``rec`` lie in the file exactly where the index's arithmetic puts them
    (:meth:`IndexRecord.byte_of`): the bytes there are ``seq``, and every other byte of each line is whitespace
    ending in a line break. Then any fetch through the index starts on the right byte and reads ``seq``."""
    lb, lw = rec.linebases, rec.linewidth
    line = np.arange(lw) < lb  # True on a line's base columns
    for s in range(0, len(seq), _VERIFY_BP):
        sub = seq[s : s + _VERIFY_BP]
        p = pos + s
        u0, u1 = rec.byte_of(p), rec.byte_of(p + len(sub) - 1) + 1
        raw = np.frombuffer(idx.read_raw(u0, u1), dtype=np.uint8)
        c0 = p % lb  # column of the first byte
        mask = np.resize(np.roll(line, -c0), raw.size)
        if raw.size != u1 - u0 or not np.array_equal(raw[mask], np.frombuffer(sub, dtype=np.uint8)):
            return f"record {rec.name!r}: bases {p:,}-{p + len(sub):,} are not where the index puts them"
        if not WHITE[raw[~mask]].all() or not (raw[(lw - 1 - c0) % lw :: lw] == 0x0A).all():
            return f"record {rec.name!r}: a line near base {p:,} is not {lb} bases and a line break in {lw} bytes"
    return None


def verify(idx: FastaIndex) -> str | None:
    """One pass of the reader over the FASTA: None if the index holds the reader's records (ids, order, lengths) and
    puts every base where the reader reads it (:func:`_check_lines`), else the first difference. The reader's
    errors are raised as they are."""
    records = iter(idx.records)
    rec, pos = None, 0
    for piece in FastaReader(idx.fasta).pieces():
        if rec is None:
            rec, pos = next(records, None), 0
            if rec is None or rec.name != piece.seqid:
                return f"record {piece.seqid!r} (line {piece.line}) is " + (
                    "not in the index" if rec is None else f"{rec.name!r} in the index"
                )
        n = len(piece.seq)
        if pos + n > rec.length:
            return f"record {rec.name!r}: more than the index's {rec.length:,} bases"
        why = _check_lines(idx, rec, pos, piece.seq)
        if why is not None:
            return why
        pos += n
        if piece.last:
            if pos != rec.length:
                return f"record {rec.name!r}: {pos:,} bases, {rec.length:,} in the index"
            rec = None
    extra = next(records, None)
    return None if extra is None else f"record {extra.name!r} of the index is not in the FASTA"


def plan_index(fasta: str, *, use: bool = True) -> tuple[FastaIndex | None, dict]:
    """The index the plan lays a FASTA out from: ``(index, fields)``, index None where the plan scans instead;
    ``fields``: ``index`` ('fai' or 'scan'), ``index_files``, ``index_reason`` (why scan)."""
    if not use:
        return None, {"index": "scan", "index_reason": "--index none"}
    kind = compression(fasta)
    if kind == "gzip":
        return None, {"index": "scan", "index_reason": "gzip (not bgzip) FASTA cannot be indexed"}
    if _starts_with_bom(fasta, kind):
        return None, {
            "index": "scan",
            "index_reason": "a UTF-8 byte-order mark before the first header (htslib's faidx refuses it)",
        }
    gzi: str | None
    fai, gzi = default_paths(fasta)
    gzi = gzi if kind == "bgzf" else None
    if os.path.exists(fai):  # found beside the FASTA: verified, never overwritten
        idx = read_index(fasta, fai, gzi)
        try:
            why = verify(idx)
        finally:
            idx.close()
        if why is not None:
            raise ChromaflowError(
                f"{fai}: FASTA index does not match {fasta} ({why}): it is stale or not made by"
                " this FASTA's rules; delete it (predict-plan makes a new one) or use --index none"
            )
        return idx, {"index": "fai", "index_files": _names(idx.files)}
    try:
        with atomic_outputs([fai, gzi]) as (tfai, tgzi):
            _build(fasta, str(tfai), None if tgzi is None else str(tgzi))
            try:
                idx = read_index(fasta, str(tfai), None if tgzi is None else str(tgzi))
            except ChromaflowError as exc:  # e.g. an id the reader refuses: the scan gives the reader's error
                raise _Refused(str(exc).replace(str(tfai), fai)) from None
            try:
                why = verify(idx)
            finally:
                idx.close()
            if why is not None:
                raise _Refused(f"the FASTA index differs from the reader: {why}")
    except _Refused as exc:
        return None, {"index": "scan", "index_reason": str(exc)}
    except PermissionError as exc:
        return None, {"index": "scan", "index_reason": f"cannot write the index beside the FASTA: {exc.strerror}"}
    idx = read_index(fasta, fai, gzi)
    return idx, {"index": "fai", "index_files": _names(idx.files)}


def _starts_with_bom(fasta: str, kind: str) -> bool:
    """Whether the (uncompressed) text of ``fasta`` starts with a UTF-8 byte-order mark (the reader skips it)."""
    import gzip

    with gzip.open(fasta, "rb") if kind == "bgzf" else open(fasta, "rb") as fh:
        return fh.read(3) == b"\xef\xbb\xbf"


def _names(paths: list[str]) -> list[str]:
    return [os.path.basename(p) for p in paths]


# --------------------------------------------------------------------------------------------------
# a shard's rows through the index
# --------------------------------------------------------------------------------------------------
class ReadStats:
    """What a shard read through the index: records touched, bases fetched, and the byte ranges of the file on disk
    that hold them (whole BGZF blocks for bgzip; :attr:`disk_bytes` counts a byte read twice once)."""

    def __init__(self):
        self.records: set[str] = set()
        self.bases = 0
        self.ranges: list[tuple[int, int]] = []

    @property
    def disk_bytes(self) -> int:
        """Bytes of the file on disk covered by :attr:`ranges`, overlapping ranges counted once."""
        total, reach = 0, 0
        for a, b in sorted(self.ranges):
            a = max(a, reach)
            if b > a:
                total += b - a
                reach = b
        return total


def _canonical_error(idx: FastaIndex, rec: IndexRecord, a: int, b: int, what: str) -> ChromaflowError:
    """The reader's own error where the FASTA is defective, else: the index does not address this FASTA."""
    for _ in FastaReader(idx.fasta).pieces():
        pass
    return ChromaflowError(
        f"{idx.fasta}: record {rec.name!r} bases {a:,}-{b:,} read through {idx.fai} {what}: the"
        " FASTA changed since it was indexed, or the index is not its own; delete the index"
    )


def _fetch_checked(idx: FastaIndex, rec: IndexRecord, a: int, b: int, stats: ReadStats) -> np.ndarray:
    seq = idx.fetch(rec, a, b)
    if len(seq) != b - a:
        raise _canonical_error(idx, rec, a, b, f"gave {len(seq):,} bases")
    bad = seq.translate(None, _IUPAC)
    if bad:
        raise _canonical_error(idx, rec, a, b, f"hold {bad[:1]!r}, not an IUPAC code")
    stats.bases += b - a
    stats.ranges.append(idx.disk_range(rec.byte_of(a), rec.byte_of(b - 1) + 1))
    return np.frombuffer(seq, dtype=np.uint8)


def indexed_jobs(
    idx: FastaIndex, L: int, start: int, end: int, stats: ReadStats, window_bp: int = WINDOW_BP
) -> Iterator[Job]:
    """:class:`~chromaflow.genome.layout.Job` s for rows [start, end) in file row order, read through the index in
    windows of about ``window_bp`` bases (whole rows), skipping every record before the first row unread."""
    W = max(1, window_bp // L)
    row = 0
    for i, rec in enumerate(idx.records):
        n = rec.length
        k = n_chunks(n, L)
        if row + 2 * k <= start:
            row += 2 * k
            continue
        if row >= end:
            break
        if rec.name not in stats.records:  # cheap: the header line before the first base names this record
            got = idx.header_id(i)
            if got != rec.name:
                raise ChromaflowError(
                    f"{idx.fai}: record {rec.name!r} at byte {rec.offset:,} of {idx.fasta}: the"
                    f" line before it is {'not a header' if got is None else repr('>' + got)}:"
                    " the index is stale or not this file's; delete it"
                )
            stats.records.add(rec.name)
        a, b = max(start, row) - row, min(end, row + 2 * k) - row  # rows of this record in the shard
        for j0 in range(a, min(b, k), W):  # plus rows j0..j1-1: bases [j0 L, min(j1 L, n))
            j1 = min(j0 + W, b, k)
            yield Job(rec.name, _fetch_checked(idx, rec, j0 * L, min(j1 * L, n), stats), j0 * L, n, k, 1, j0, j1)
        for m0 in range(max(a, k) - k, b - k, W):  # minus rows m0..m1-1: plus chunks k-m1 .. k-1-m0
            m1 = min(m0 + W, b - k)
            lo = (k - m1) * L
            yield Job(rec.name, _fetch_checked(idx, rec, lo, min((k - m0) * L, n), stats), lo, n, k, -1, m0, m1)
        row += 2 * k
