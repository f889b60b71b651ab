"""A writer of UCSC's twoBit format (``.2bit``), the sequence file of an assembly hub's ``twoBitPath``.

Why our own writer: no maintained Python package writes .2bit (py2bit, twobitreader and pytwobit only read it), and
UCSC's ``faToTwoBit`` is not a Python dependency. The format is small (UCSC's twoBit.c / lib2bit):

* header: signature ``0x1A412743``, version (0, or 1 when an offset passes 4 GiB: 64-bit index offsets), the
  sequence count and a reserved 0, all uint32 little-endian (readers detect the byte order from the signature);
* index: per sequence its name length (1 byte), name and the byte offset of its record;
* per record: dnaSize, nBlockCount, nBlockStarts[], nBlockSizes[], maskBlockCount, maskBlockStarts[],
  maskBlockSizes[], a reserved 0 (uint32 each), then the bases packed 4 to a byte, the first in the high bits
  (T=0, C=1, A=2, G=3). N blocks are the runs of bases other than ACGT (every other IUPAC code reads back as N, as
  with faToTwoBit); mask blocks the runs of lower-case bases (soft-masking).

The records are spooled to an anonymous temporary file as they come (the index needs every record's size first),
then header, index and records are written in order: memory holds one record at a time. Tested against py2bit
(lib2bit, UCSC's reader), tests/browsers/test_genome_files.py.
"""

from __future__ import annotations

import shutil
import struct
import tempfile
from typing import BinaryIO

import numpy as np

SIGNATURE = 0x1A412743
#: base byte -> 2-bit code (T=0, C=1, A=2, G=3; anything else 0, inside an N block)
_CODE = np.zeros(256, dtype=np.uint8)
for _b, _v in zip(b"TCAGtcag", (0, 1, 2, 3, 0, 1, 2, 3)):
    _CODE[_b] = _v
_ACGT = np.zeros(256, dtype=bool)
_ACGT[list(b"ACGTacgt")] = True
_LOWER = np.zeros(256, dtype=bool)
_LOWER[list(range(ord("a"), ord("z") + 1))] = True


#: bases encoded per step: the temporaries of one step are a few bytes a base, whatever the sequence's length
STEP = 1 << 22


def _runs(flags: np.ndarray, offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Starts and sizes of the runs of True in ``flags``.

    Parameters
    ----------
    flags : numpy.ndarray, shape (n,), bool
    offset : int
        Added to the starts (the position of ``flags[0]`` in the sequence).

    Returns
    -------
    tuple of numpy.ndarray, each shape (runs,), int64
        The 0-based start and the length of each run, in order.
    """
    edges = np.diff(np.concatenate(([0], flags.view(np.int8), [0])))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)
    return starts + offset, ends - starts


def _blocks(parts: list[tuple[np.ndarray, np.ndarray]]) -> bytes:
    """The count, starts and sizes (uint32 each) of the runs found step by step (``parts``: (starts, sizes) per
    step, in order), a run that crosses a step's end joined with its continuation."""
    starts = np.concatenate([st for st, _ in parts] or [np.zeros(0, np.int64)])
    ends = starts + np.concatenate([sz for _, sz in parts] or [np.zeros(0, np.int64)])
    first = np.ones(len(starts), dtype=bool)
    first[1:] = starts[1:] != ends[:-1]  # a run that starts where the previous ends continues it
    last = np.ones(len(starts), dtype=bool)
    last[:-1] = first[1:]
    js, je = starts[first], ends[last]
    return struct.pack("<I", len(js)) + js.astype("<u4").tobytes() + (je - js).astype("<u4").tobytes()


def encode_record(seq: bytes | bytearray) -> bytes:
    """One sequence's twoBit record (everything after the index entry), encoded :data:`STEP` bases at a time.

    Parameters
    ----------
    seq : bytes, shape (n,)
        The bases, one byte each, any case (IUPAC codes other than ACGT become N).

    Returns
    -------
    bytes
        dnaSize, the N blocks, the mask blocks, the reserved word and the packed bases ((n + 3) // 4 bytes).
    """
    n = len(seq)
    if n >= 1 << 32:
        raise ValueError(f"sequence of {n} bp: twoBit holds at most 2^32 - 1 bp a sequence")
    view = memoryview(seq)
    n_runs, m_runs, packed = [], [], []
    for i in range(0, n, STEP):  # STEP is a multiple of 4: each step packs whole bytes
        a = np.frombuffer(view[i : i + STEP], dtype=np.uint8)
        n_runs.append(_runs(~_ACGT[a], i))
        m_runs.append(_runs(_LOWER[a], i))
        codes = np.zeros((len(a) + 3) // 4 * 4, dtype=np.uint8)
        codes[: len(a)] = _CODE[a]
        q = codes.reshape(-1, 4)
        packed.append(((q[:, 0] << 6) | (q[:, 1] << 4) | (q[:, 2] << 2) | q[:, 3]).astype(np.uint8).tobytes())
    return b"".join([struct.pack("<I", n), _blocks(n_runs), _blocks(m_runs), struct.pack("<I", 0), *packed])


class TwoBitWriter:
    """Write a .2bit file one sequence at a time: ``add(name, seq)`` per sequence, then ``close()``.

    Parameters
    ----------
    out : binary file
        Where the file goes (written only at :meth:`close`).
    """

    def __init__(self, out: BinaryIO):
        self.out = out
        self.names: list[bytes] = []
        self.sizes: list[int] = []
        self.spool = tempfile.TemporaryFile()

    def add(self, name: str, seq: bytes | bytearray) -> None:
        """Append sequence ``name`` (1..255 ASCII bytes) with bases ``seq`` (shape (n,), one byte a base)."""
        raw = name.encode()
        if not 0 < len(raw) < 256:
            raise ValueError(f"sequence name {name!r}: twoBit names are 1..255 bytes")
        rec = encode_record(seq)
        self.spool.write(rec)
        self.names.append(raw)
        self.sizes.append(len(rec))

    def close(self) -> None:
        """Write header, index and the spooled records to ``out``; the spool is closed."""
        index_bytes = sum(1 + len(n) for n in self.names)
        offset = 16 + index_bytes + 4 * len(self.names)
        version = 0 if offset + sum(self.sizes) < 1 << 32 else 1
        if version:
            offset += 4 * len(self.names)
        self.out.write(struct.pack("<IIII", SIGNATURE, version, len(self.names), 0))
        fmt = "<Q" if version else "<I"
        for name, size in zip(self.names, self.sizes):
            self.out.write(bytes([len(name)]) + name + struct.pack(fmt, offset))
            offset += size
        self.spool.seek(0)
        shutil.copyfileobj(self.spool, self.out, 1 << 20)
        self.spool.close()
