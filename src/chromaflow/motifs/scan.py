"""Motif scanning of promoter windows on both strands with MOODS (``MOODS-python``).

Scores are MOODS log-odds (natural log) of the counts against the assembly's base composition with a pseudocount
of 1 (``MOODS.tools.log_odds(counts, bg, 1.0)``); a motif hits where its score reaches the threshold of the chosen
p-value under that background (``MOODS.tools.threshold_from_p``). The reverse strand is scanned with the reverse
complement matrix; a hit's coordinates are those of the forward-strand bases it covers.

MOODS 1.9.4.1 misses a hit whose last base is the last base of the scanned string or the base before a non-ACGT
character (found by the brute-force check in tests/motifs/test_motif_scan.py). So each window is cut at every
non-ACGT character (no motif may cover an N anyway) and each ACGT segment is scanned with one extra ``A``
appended; hits that reach into that base are dropped.
"""

from __future__ import annotations

import re

import numpy as np

from ..utils.errors import ChromaflowError
from .motifs import Motif

PSEUDOCOUNT = 1.0
DEFAULT_P = 1e-4
_ACGT_RUN = re.compile(rb"[ACGT]+")


def background(counts: np.ndarray) -> list[float]:
    """A C G T frequencies from base counts (+1 each, so no base has zero frequency)."""
    c = counts.astype(np.float64) + 1.0
    return (c / c.sum()).tolist()


def base_counts(seq: bytes) -> np.ndarray:
    """Counts of A C G T (either case) in ``seq``."""
    b = np.bincount(np.frombuffer(seq, dtype=np.uint8), minlength=256)
    return np.array(
        [b[ord("A")] + b[ord("a")], b[ord("C")] + b[ord("c")], b[ord("G")] + b[ord("g")], b[ord("T")] + b[ord("t")]],
        dtype=np.int64,
    )


class Scanner:
    """All motifs, both strands, at one p-value: :meth:`scan` returns, per motif, the sorted distinct start
    positions of its hits (either strand) in a sequence."""

    def __init__(self, motifs: list[Motif], bg: list[float], p: float):
        import MOODS.scan
        import MOODS.tools

        if not 0 < p < 1:
            raise ChromaflowError(f"--p-value must be in (0, 1) (got {p})")
        self.motifs = motifs
        self.bg = bg
        fwd = [MOODS.tools.log_odds(m.counts.tolist(), bg, PSEUDOCOUNT) for m in motifs]
        rev = [MOODS.tools.reverse_complement(x) for x in fwd]
        th = [MOODS.tools.threshold_from_p(x, bg, p) for x in fwd]
        self.thresholds = th
        self.lengths = [m.length for m in motifs]
        self._scanner = MOODS.scan.Scanner(7)
        self._scanner.set_motifs(fwd + rev, bg, th + th)
        self.matrices = fwd

    def scan(self, seq: bytes) -> list[np.ndarray]:
        """Hit starts per motif in ``seq`` (bytes, any case; non-ACGT bases break it into segments)."""
        k = len(self.motifs)
        found: list[list[int]] = [[] for _ in range(k)]
        for m in _ACGT_RUN.finditer(seq.upper()):
            a, b = m.span()
            n = b - a
            res = self._scanner.scan((m.group() + b"A").decode("ascii"))
            for i in range(2 * k):
                j = i % k
                L = self.lengths[j]
                for r in res[i]:
                    if r.pos + L <= n:
                        found[j].append(a + r.pos)
        return [np.unique(np.array(f, dtype=np.int64)) for f in found]
