"""The genome ``chromaflow attribute`` reads: a FASTA (plain, gzip or BGZF) or a Helixer-layout genome h5.

Both give each record as base codes (uint8 ASCII, IUPAC; the predict stage's one-hot table encodes them), one record
at a time. A genome h5 holds one-hot rows, C, A, T, G columns (FORMATS.md §1); its plus-strand rows of a record are
joined in start order and each position's four float16 values mapped back to the IUPAC letter whose column pattern
they are (every pattern of the encoding is one letter's; padding is code 0).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from ..genome.encoding import LUT16
from ..utils.errors import ChromaflowError


def _pattern_table() -> tuple[np.ndarray, np.ndarray]:
    """Sorted uint64 keys of the encoding's column patterns and their upper-case letters (padding: 0)."""
    keys, codes = [0], [0]
    for b in range(256):
        if LUT16[b].any() and chr(b).isupper():
            keys.append(int(LUT16[b].astype(np.uint64) @ (np.uint64(1) << np.arange(0, 64, 16, dtype=np.uint64))))
            codes.append(b)
    order = np.argsort(keys)
    return np.asarray(keys, dtype=np.uint64)[order], np.asarray(codes, dtype=np.uint8)[order]


def onehot_to_codes(x: np.ndarray, where: str) -> np.ndarray:
    """(n, 4) float16 one-hot rows (C, A, T, G) -> (n,) uint8 IUPAC codes (0 = padding).

    Parameters
    ----------
    x : numpy.ndarray
        float16 values, shape (n, 4).
    where : str
        What an unknown pattern's error names (the file and record).
    """
    keys, codes = _pattern_table()
    bits = np.ascontiguousarray(x, dtype=np.float16).view(np.uint16).astype(np.uint64)
    k = bits[:, 0] | (bits[:, 1] << np.uint64(16)) | (bits[:, 2] << np.uint64(32)) | (bits[:, 3] << np.uint64(48))
    pos = np.minimum(np.searchsorted(keys, k), len(keys) - 1)
    bad = keys[pos] != k
    if bad.any():
        i = int(np.argmax(bad))
        raise ChromaflowError(f"{where}: position {i}: one-hot values {x[i].tolist()} are not a base of the encoding")
    return codes[pos]


class Genome:
    """Record lengths (in file order) and record codes of a FASTA or a genome h5.

    Parameters
    ----------
    fasta, h5 : str or None
        Exactly one of them.
    """

    def __init__(self, fasta: str | None, h5: str | None):
        self.fasta, self.h5 = fasta, h5
        self.path = fasta or h5 or ""
        self.lengths = self._fasta_lengths() if fasta else self._h5_lengths()

    def _fasta_lengths(self) -> dict[str, int]:
        from ..genome.fasta import FastaReader

        return {rec.seqid: len(rec.seq) for rec in FastaReader(self.fasta or "")}

    def _h5_rows(self):
        from ..predict.h5io import open_input
        from ..genome.h5rows import read_rows

        fh, _info = open_input(self.h5 or "")
        seqids = read_rows(fh["data/seqids"])
        se = read_rows(fh["data/start_ends"]).astype(np.int64)
        return fh, np.array([s.decode() if isinstance(s, bytes) else str(s) for s in seqids], dtype=object), se

    def _h5_lengths(self) -> dict[str, int]:
        fh, names, se = self._h5_rows()
        with fh:
            plus = se[:, 0] < se[:, 1]
            out: dict[str, int] = {}
            for name, end in zip(names[plus], se[plus, 1]):
                out[name] = max(out.get(name, 0), int(end))
        if not out:
            raise ChromaflowError(f"{self.h5}: no plus-strand rows (data/start_ends: start < end)")
        return out

    def records(self, wanted: set[str]) -> Iterator[tuple[str, np.ndarray]]:
        """(name, (n,) uint8 codes) of the records in ``wanted``, in file order."""
        if self.fasta:
            from ..genome.fasta import FastaReader

            for rec in FastaReader(self.fasta):
                if rec.seqid in wanted:
                    yield rec.seqid, np.frombuffer(bytes(rec.seq), dtype=np.uint8)
            return
        fh, names, se = self._h5_rows()
        with fh:
            X = fh["data/X"]
            order = [n for n in dict.fromkeys(names.tolist()) if n in wanted]
            for name in order:
                rows = np.flatnonzero((names == name) & (se[:, 0] < se[:, 1]))
                rows = rows[np.argsort(se[rows, 0], kind="stable")]
                codes = np.zeros(self.lengths[name], dtype=np.uint8)
                for r in rows:
                    a, b = int(se[r, 0]), int(se[r, 1])
                    codes[a:b] = onehot_to_codes(np.asarray(X[r, : b - a]), f"{self.h5}: {name} row {r}")
                yield name, codes
