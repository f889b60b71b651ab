"""Spooling: append-only int64 records that go to an anonymous temporary file past a bound (the bigWig/bigBed
writers' block records and zoom blocks, and the peak caller's summit candidates)."""

from __future__ import annotations

import os
import sys
from array import array
from pathlib import Path
from typing import BinaryIO


class Spill:
    """An anonymous temporary file (unlinked at once: gone whatever happens), opened on first use, that a writer
    appends to while it works and reads back later: the bigWig/bigBed writers' zoom blocks (their place in the file
    is only known once the data is written) and every :class:`Records`. Beside ``path`` (the output it serves), or in
    the temporary folder ($TMPDIR) without one."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else None
        self.fh: BinaryIO | None = None
        self.end = 0  # bytes appended
        self.at_end = True  # the file position is the end (a seek flushes the buffer: only after a read)

    def append(self, data) -> int:
        """Append ``data`` (bytes-like); its offset."""
        if self.fh is None:
            import tempfile

            if self.path is None:
                self.fh = tempfile.TemporaryFile(prefix="chromaflow-spill-")
            else:
                fd, name = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".part", dir=self.path.parent)
                self.fh = os.fdopen(fd, "w+b")
                os.unlink(name)
        if not self.at_end:
            self.fh.seek(self.end)
            self.at_end = True
        off = self.end
        self.end += self.fh.write(data)
        return off

    def read(self, offset: int, size: int) -> bytes:
        """The ``size`` bytes appended at ``offset``."""
        self.at_end = False
        assert self.fh is not None  # read only what append wrote
        self.fh.seek(offset)
        return self.fh.read(size)

    def close(self) -> None:
        """Close the temporary file (it was unlinked when opened, so nothing remains)."""
        if self.fh is not None:
            self.fh.close()
            self.fh = None


class Records:
    """Fixed-width int64 records appended in order, held up to :attr:`HELD` values, then appended to a
    :class:`Spill` in chunks; read back whole (:meth:`to_array`) or one value at a time (:meth:`value`).

    Used where a count grows with the input and only the end needs it all: the block records of the bigWig/bigBed
    indexes (a track that changes at almost every base has ~1.5 M data blocks a file at 4 Gbp, and BIGWIG writes six
    files at once: 40 bytes a data block, 48 a zoom block, ~60 MB a file held; spooled, the memory is one file's
    records, at its close), and a folded peak's summit candidates (width 1: millions in one long peak, only the
    middle one wanted when the peak closes)."""

    #: values held before a chunk goes to the spill file (512 KB); tests set it low
    HELD = 1 << 16

    def __init__(self, width: int, spill: Spill):
        self.width = width
        self.spill = spill
        self.buf = array("q")
        self.chunks: list[tuple[int, int]] = []  # (offset in the spill file, values)
        self.n_spilled = 0

    def extend(self, values) -> None:
        """Append values (an int64-convertible numpy array, or any iterable of ints), ``width`` per record."""
        if hasattr(values, "dtype"):  # numpy: its bytes, not one Python int per value
            import numpy as np

            self.buf.frombytes(np.ascontiguousarray(values, dtype="=i8").tobytes())
        else:
            self.buf.extend(values)
        if len(self.buf) >= self.HELD:
            self.chunks.append((self.spill.append(self.buf), len(self.buf)))
            self.n_spilled += len(self.buf)
            self.buf = array("q")

    def __len__(self) -> int:
        return (self.n_spilled + len(self.buf)) // self.width

    def value(self, i: int) -> int:
        """The ``i``-th value appended (counting every field of every record)."""
        if not 0 <= i < self.n_spilled + len(self.buf):
            raise IndexError(i)
        for off, n in self.chunks:
            if i < n:
                return int.from_bytes(self.spill.read(off + 8 * i, 8), sys.byteorder, signed=True)
            i -= n
        return self.buf[i]

    def arrays(self):
        """The records in order as (k, width) int64 arrays, one spilled chunk (at most :attr:`HELD` values) at a
        time, then those held."""
        import numpy as np

        for off, n in self.chunks:
            yield np.frombuffer(self.spill.read(off, 8 * n), dtype=np.int64).reshape(-1, self.width)
        if len(self.buf):
            yield np.frombuffer(self.buf, dtype=np.int64).reshape(-1, self.width).copy()

    def to_array(self):
        """All records as an (n, width) int64 array, in the order they were added."""
        import numpy as np

        return np.concatenate([*self.arrays(), np.zeros((0, self.width), np.int64)])
