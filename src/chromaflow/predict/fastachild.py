"""The FASTA reader child process of ``predict --fasta --reader process``: parses the FASTA (its own interpreter, so
its own core and GIL) and writes its pieces to stdout. Imports only the reader, so it starts fast.

Protocol, per message: header (kind: 0 piece, 1 last piece of a record, 2 end, 3 error; byte count; seqid length;
header line), then the seqid and the bases (or the error message).
"""

from __future__ import annotations

import struct
import sys

from ..utils.errors import ChromaflowError
from ..native.memory import tune_malloc
from ..genome.fasta import FastaReader

HDR = struct.Struct("<BQHI")  # kind (0 piece, 1 last piece, 2 end, 3 error), bytes, seqid bytes, header line


def main() -> None:  # pragma: no cover - runs in the child process (coverage does not follow it)
    """Child process: parse the FASTA named in argv and write its pieces to stdout (header, seqid, bases)."""
    tune_malloc()
    path, block = sys.argv[1], int(sys.argv[2])
    out = sys.stdout.buffer
    try:
        for piece in FastaReader(path, block_size=block).pieces():
            sid = piece.seqid.encode("ascii")
            out.write(HDR.pack(1 if piece.last else 0, len(piece.seq), len(sid), piece.line))
            out.write(sid)
            out.write(piece.seq)
        out.write(HDR.pack(2, 0, 0, 0))
    except ChromaflowError as exc:
        msg = str(exc).encode("utf-8", "replace")
        out.write(HDR.pack(3, len(msg), 0, 0) + msg)
    except BrokenPipeError:
        return
    except BaseException as exc:  # noqa: BLE001 - reported as one line by the parent
        msg = f"{path}: reading failed: {type(exc).__name__}: {exc}".encode("utf-8", "replace")
        out.write(HDR.pack(3, len(msg), 0, 0) + msg)
    out.flush()
