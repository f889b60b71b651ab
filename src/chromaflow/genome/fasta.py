"""Fast, strict, streaming FASTA reader for ``chromaflow fasta2h5``.

The file is read in large blocks (plain, gzip or BGZF, detected by magic bytes). Sequence bytes are kept
as they are in the file (1 byte per base, any case), with line breaks removed; every byte is checked
against the IUPAC table with a 256-entry lookup table. Every defect is a :class:`ChromaflowError` naming
the file, the record and the line (and column for a bad character).

Rules (see docs/fasta2h5.md):

* A header is a line starting with ``>``. The record id is the header text up to the first whitespace
  character of any kind (space, tab, ...), as samtools faidx cuts it; Helixer cuts at a space only and
  would keep ``c2<TAB>desc`` (a deliberate deviation: a tab in a seqid breaks every tab-separated output).
  The id must be 1..50 ASCII bytes and unique in the file.
* Blank lines (empty or whitespace only) are ignored anywhere. Trailing whitespace on a line
  (including the ``\\r`` of CRLF files) is ignored. Any other byte that is not an IUPAC nucleotide code
  (``ACGTNRYSWKMBDHV`` in either case) is an error, including a space inside a sequence line.
* The first non-blank line must be a header; every record must hold at least one base. A UTF-8 byte-order mark
  before it is skipped (htslib's index refuses such a file: ``predict-plan`` then scans it).
"""

from __future__ import annotations

import os
import re
from typing import Callable, Iterator, NamedTuple, cast

import numpy as np

from ..utils.errors import ChromaflowError

IUPAC = b"ACGTNRYSWKMBDHV"
MAX_ID_BYTES = 50
_WS = b" \t\r\v\f"
#: the UTF-8 byte-order mark a Windows editor may write first
_BOM = b"\xef\xbb\xbf"
#: the record id: the header text up to the first whitespace byte (samtools faidx's rule)
_ID = re.compile(rb"\S*")

#: BAD[byte] == 1 for every byte that may not appear in a sequence (after removing CR/LF)
BAD = np.ones(256, dtype=np.uint8)
for _c in IUPAC + IUPAC.lower():
    BAD[_c] = 0
#: deleting these bytes from a segment leaves only the bytes that are not allowed in a sequence
_ALLOWED = b"\r\n" + IUPAC + IUPAC.lower()

DEFAULT_BLOCK = 16 << 20
#: a header line may not be longer than this (protects against files without line breaks)
MAX_HEADER_BYTES = 1 << 20


class Record(NamedTuple):
    """One FASTA record: its ``seqid``, the 1-based ``line`` of its header, and ``seq``, its bases as in the file with
    the line breaks removed."""

    seqid: str
    line: int  # 1-based line number of the header
    seq: bytes | bytearray  # bases as in the file, line breaks removed


class Piece(NamedTuple):
    """A consecutive part of one record's bases; ``last`` marks the record's final piece."""

    seqid: str
    line: int
    seq: bytes
    last: bool


def _describe_byte(b: int) -> str:
    if 0x21 <= b < 0x7F:
        return f"'{chr(b)}'"
    names = {0x20: "space", 0x09: "tab", 0x0D: "carriage return", 0x00: "NUL"}
    return f"{names.get(b, 'byte')} (0x{b:02X})"


def open_binary(path: str | os.PathLike):
    """Open ``path`` for reading bytes, decompressing gzip/BGZF transparently (detected by magic bytes).

    Returns ``(stream, raw)`` where ``raw`` is the underlying file (its ``tell()`` measures progress).
    """
    raw = open(path, "rb")
    magic = raw.read(6)
    raw.seek(0)
    if magic[:2] == b"\x1f\x8b":
        from isal import igzip_threaded

        return igzip_threaded.open(raw, "rb", threads=1, block_size=4 << 20), raw
    for sig, what in (
        (b"PK\x03\x04", "zip"),
        (b"BZh", "bzip2"),
        (b"\xfd7zXZ\x00", "xz"),
        (b"\x28\xb5\x2f\xfd", "zstd"),
    ):
        if magic.startswith(sig):
            raw.close()
            raise ChromaflowError(f"{path}: {what}-compressed input is not supported (use plain, gzip or bgzip FASTA)")
    return raw, raw


class FastaReader:
    """Iterate over the records of a FASTA file: ``for rec in FastaReader(path): ...``.

    ``block_size`` is the read size (tests use tiny values to exercise records spanning blocks).
    ``on_progress(raw_bytes_consumed)`` is called after every block.
    """

    def __init__(
        self, path: str | os.PathLike, block_size: int = DEFAULT_BLOCK, on_progress: Callable[[int], None] | None = None
    ):
        self.path = str(path)
        self.block_size = max(1, int(block_size))
        self.on_progress = on_progress
        # parser state
        self.line = 1  # line number of the next byte to process
        self.col0 = 0  # bytes of the current line already processed (when a block ends mid-line)
        self.at_line_start = True
        self.cur_id: str | None = None
        self.cur_line = 0
        self.cur_parts: list[bytes] = []
        self.cur_len = 0
        self.seen: dict[str, int] = {}
        self.done: list[Piece] = []
        self.n_records = 0

    # ---------------------------------------------------------------------------------------------
    def _err(self, msg: str) -> ChromaflowError:
        return ChromaflowError(f"{self.path}: {msg}")

    def __iter__(self) -> Iterator[Record]:
        """Whole records (the bases of a record are joined in memory)."""
        parts: list[bytes] = []
        for piece in self.pieces():
            parts.append(piece.seq)
            if piece.last:
                yield Record(piece.seqid, piece.line, b"".join(parts) if len(parts) > 1 else parts[0])
                parts = []

    def pieces(self) -> Iterator[Piece]:
        """Records as consecutive pieces (about one read block each), so a consumer can start on a long
        record before it has been read to its end. Defects are raised when they are reached."""
        stream, raw = open_binary(self.path)
        try:
            try:  # a UTF-8 byte-order mark (a Windows editor's) is skipped
                carry = stream.read(len(_BOM))
            except Exception as exc:
                raise self._err(f"cannot read input near line 1: {exc}") from None
            if carry == _BOM:
                carry = b""
            while True:
                try:
                    block = stream.read(self.block_size)
                except Exception as exc:  # zlib/isal errors, truncated streams, I/O errors
                    raise self._err(f"cannot read input near line {self.line}: {exc}") from None
                if not block:
                    break
                buf = carry + block if carry else block
                cut = buf.rfind(b"\n") + 1
                if cut:
                    self._process(buf[:cut] if cut < len(buf) else buf)
                    carry = buf[cut:]
                elif self.at_line_start and buf[:1] == b">":
                    self._check_header_cr(buf)
                    if len(buf) > MAX_HEADER_BYTES:
                        raise self._err(
                            f"line {self.line}: header line longer than {MAX_HEADER_BYTES:,} bytes (no line break?)"
                        )
                    carry = buf  # a (long) header line without its newline yet
                else:
                    # mid-line of a very long sequence line: keep trailing whitespace for the next round
                    m = len(buf.rstrip(_WS))
                    if m:
                        self._process(buf[:m])
                    carry = buf[m:]
                if self.on_progress is not None:
                    self.on_progress(raw.tell())
                if self.cur_id is not None and self.cur_parts:  # flush the open record's bases so far
                    parts = self.cur_parts
                    self.done.append(
                        Piece(self.cur_id, self.cur_line, parts[0] if len(parts) == 1 else b"".join(parts), False)
                    )
                    self.cur_parts = []
                if self.done:
                    yield from self.done
                    self.done = []
            if carry:
                self._process(carry)
            self._finish_record()
            yield from self.done
            self.done = []
            if self.n_records == 0:
                raise self._err("no FASTA records found (empty file)")
        finally:
            stream.close()
            raw.close()

    # ---------------------------------------------------------------------------------------------
    def _process(self, chunk: bytes) -> None:
        pos, n = 0, len(chunk)
        while pos < n:
            if self.at_line_start and chunk[pos] == 0x3E:  # '>'
                nl = chunk.find(b"\n", pos)
                end = n if nl < 0 else nl
                self._header(chunk[pos + 1 : end])
                self.line += 1
                self.col0 = 0
                pos = n if nl < 0 else nl + 1
                self.at_line_start = True
                continue
            # next header: a '>' at a line start (memchr for '>' is much faster than a search for "\n>"; a '>'
            # inside a line is not a header and is reported by the sequence check)
            idx = chunk.find(b">", pos)
            while idx >= 0 and (idx == 0 or chunk[idx - 1] != 0x0A):
                idx = chunk.find(b">", idx + 1)
            seg_end = n if idx < 0 else idx
            self._sequence(chunk[pos:seg_end] if (pos or seg_end < n) else chunk)
            pos = seg_end

    def _check_header_cr(self, text: bytes) -> None:
        """A carriage return followed by more text inside a header line means CR-only (classic Mac OS) line
        ends: the whole file would be read as one header line."""
        cr = text.find(b"\r")
        if cr >= 0 and text[cr:].strip(_WS + b"\n"):
            raise self._err(
                f"line {self.line}: carriage return inside the header line: CR-only (classic Mac)"
                " line ends are not supported; convert them to LF, e.g. tr '\\r' '\\n'"
            )

    def _header(self, text: bytes) -> None:
        self._finish_record()
        line = self.line
        self._check_header_cr(text)
        text = text.rstrip(_WS)
        raw_id = cast("re.Match[bytes]", _ID.match(text)).group()  # \S* matches every text
        if not raw_id:
            raise self._err(
                f"line {line}: empty record id in header '>{text.decode('utf-8', 'replace')}'"
                " (the id is the header text up to the first space or tab)"
            )
        if not raw_id.isascii():
            raise self._err(f"line {line}: record id {raw_id.decode('utf-8', 'replace')!r} is not ASCII")
        ctrl = next((c for c in raw_id if c < 0x20 or c == 0x7F), None)
        if ctrl is not None:  # a NUL would silently cut the S50 seqid short
            raise self._err(
                f"line {line}: record id {raw_id.decode('ascii')!r} contains the control character"
                f" {_describe_byte(ctrl)}"
            )
        seqid = raw_id.decode("ascii")
        if len(raw_id) > MAX_ID_BYTES:
            raise self._err(
                f"line {line}: record id {seqid!r} is {len(raw_id)} bytes long;"
                f" the Helixer layout stores at most {MAX_ID_BYTES} (S50)"
            )
        if seqid in self.seen:
            raise self._err(f"line {line}: duplicate record id {seqid!r} (first seen on line {self.seen[seqid]})")
        self.seen[seqid] = line
        self.cur_id, self.cur_line = seqid, line
        self.cur_parts, self.cur_len = [], 0

    def _sequence(self, seg: bytes) -> None:
        if seg.translate(None, _ALLOWED):  # fast C check; the slow path finds line/column
            t = self._slow_sequence(seg)
            nls = seg.count(b"\n")
        elif b"\r" not in seg:
            # LF only: bytes.replace (memchr + memcpy per line) is ~3x faster than a translate byte loop, and
            # the removed bytes are the line count (saves a counting pass)
            t = seg.replace(b"\n", b"")
            nls = len(seg) - len(t)
        else:
            t = seg.translate(None, b"\r\n")
            nls = seg.count(b"\n")
        if t:
            if self.cur_id is None:
                raise self._err(f"line {self.line}: first line does not start with '>' (not a FASTA file?)")
            self.cur_parts.append(t)
            self.cur_len += len(t)
        if nls:
            self.line += nls
            self.col0 = len(seg) - (seg.rfind(b"\n") + 1)
        else:
            self.col0 += len(seg)
        self.at_line_start = seg.endswith(b"\n")

    def _slow_sequence(self, seg: bytes) -> bytes:
        """Line by line: drop trailing whitespace, then report the first bad byte with line and column."""
        out = []
        lines = seg.split(b"\n")
        for i, ln in enumerate(lines):
            # the last piece has no newline: it is either the end of the file or (by construction of the
            # caller) a mid-line piece without trailing whitespace, so stripping it is always safe
            s = ln.rstrip(_WS)
            if s:
                bad = np.flatnonzero(BAD.take(np.frombuffer(s, dtype=np.uint8)))
                if bad.size:
                    j = int(bad[0])
                    col = j + 1 + (self.col0 if i == 0 else 0)
                    if self.cur_id is None:
                        raise self._err(f"line {self.line + i}: first line does not start with '>' (not a FASTA file?)")
                    raise self._err(
                        f"record {self.cur_id!r} (header line {self.cur_line}): line {self.line + i}, column {col}:"
                        f" invalid character {_describe_byte(s[j])}; allowed are the IUPAC codes"
                        " ACGTN RYSWKM BDHV in either case"
                    )
                out.append(s)
        return b"".join(out)

    def _finish_record(self) -> None:
        if self.cur_id is None:
            return
        if self.cur_len == 0:
            raise self._err(f"record {self.cur_id!r} (line {self.cur_line}) is empty: no sequence after the header")
        parts = self.cur_parts
        seq = b"" if not parts else parts[0] if len(parts) == 1 else b"".join(parts)
        self.done.append(Piece(self.cur_id, self.cur_line, seq, True))
        self.n_records += 1
        self.cur_id, self.cur_parts, self.cur_len = None, [], 0
