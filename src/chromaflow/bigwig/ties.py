"""Smoothing ties and a tie-rule comparison of tracks: what the tests and the benchmarks compare our bigWig /
bedGraph output with Predmoter's by.

The tie positions are computed from the predictions file, written from FORMATS.md §5.2–5.4 and kept independent of
:mod:`chromaflow.bigwig.convert` (integer window sums with numpy's 'same'-mode alignment per 21.384 Mbp block), so
they check the converter rather than repeat it. A position is a tie when the window sum S makes S/w exactly k + ½:
there numpy's float arithmetic — and therefore Predmoter's reference files — may round either way depending on the
CPU (FORMATS §5.4).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..genome.h5rows import read_rows

BLOCK_BP = 21_384_000


def bg_intervals(text: str) -> dict[str, list[tuple[int, int, float]]]:
    """The intervals of a bedGraph's ``text``: {chromosome: [(start, end, value), ...]} in file order."""
    out: dict[str, list] = {}
    for line in text.split("\n"):
        if not line:
            continue
        c, s, e, v = line.split("\t")
        out.setdefault(c, []).append((int(s), int(e), float(v)))
    return out


def predicted_blocks(h5path: Path, dataset: int, strand: str = "avg"):
    """Yield (seqid, block start, integer track of the block) as FORMATS §5.2–5.3 describe it."""
    import h5py

    with h5py.File(h5path, "r") as h5:
        seqids = read_rows(h5["data/seqids"])
        se = read_rows(h5["data/start_ends"])
        pred = h5["prediction/predictions"]
        L = pred.shape[1]
        n = BLOCK_BP // L
        for sid in dict.fromkeys(seqids.tolist()):
            rows = np.flatnonzero(seqids == sid)
            plus = rows[se[rows, 0] <= se[rows, 1]]
            minus = rows[se[rows, 0] > se[rows, 1]][::-1]
            offset = 0
            for j in range(0, len(plus), n):
                p = pred[np.sort(plus[j : j + n]), :, dataset].reshape(-1).astype(np.float32)
                m = pred[np.sort(minus[j : j + n]), :, dataset].reshape(-1)[::-1].astype(np.float32)
                p = p[p != -1]
                m = m[m != -1]
                t = {"+": p, "-": m}.get(strand)
                if t is None:
                    t = np.rint((p + m) / np.float32(2))
                yield sid.decode(), offset, t.astype(np.int64)
                offset += len(t)


def smoothing_ties(h5path: Path, dataset: int, w: int, strand: str = "avg") -> dict[str, set[int]]:
    """Positions whose smoothed value S/w is exactly k + ½ (per seqid, chromosome coordinates)."""
    out: dict[str, set[int]] = {}
    if w % 2:
        return out
    h = (w - 1) // 2
    for sid, offset, t in predicted_blocks(h5path, dataset, strand):
        n = len(t)
        cs = np.concatenate([[0], np.cumsum(t)])
        i = np.arange(max(n, w))
        if n >= w:
            S = cs[np.minimum(n, i + h + 1)] - cs[np.maximum(0, i - (w - 1 - h))]
        else:  # numpy's 'same' mode centres the short operand
            off = (n - 1) // 2
            S = cs[np.clip(i + off + 1, 0, n)] - cs[np.clip(i + off - w + 1, 0, n)]
        ties = np.flatnonzero(S % w == w // 2)
        out.setdefault(sid, set()).update((ties + offset).tolist())
    return out


# --------------------------------------------------------------------------------------------------
# comparison with a tie rule
# --------------------------------------------------------------------------------------------------
def compare_with_ties(ours: dict, ref: dict, allowed: dict[str, set[int]] | None = None) -> list[str]:
    """Assert that two interval sets hold the same value at every base, except ±1 at ``allowed`` positions.

    Returns the differing positions as "seqid:pos" (all of them allowed); raises AssertionError naming every
    position that differs without being allowed (or by more than 1), and any difference in coverage.
    """
    allowed = allowed or {}
    named: list[str] = []
    bad: list[str] = []
    if list(ours) != list(ref):
        raise AssertionError(f"seqids differ: {list(ours)} vs {list(ref)}")
    for c in ref:
        a = np.array(ours[c], dtype=np.float64).reshape(-1, 3)
        b = np.array(ref[c], dtype=np.float64).reshape(-1, 3)
        for name, x in (("ours", a), ("reference", b)):
            if len(x) and (x[0, 0] != 0 or np.any(x[1:, 0] != x[:-1, 1])):
                raise AssertionError(f"{name}: intervals of {c} do not tile from 0")
        if a[-1, 1] != b[-1, 1]:
            raise AssertionError(f"{c}: ours end at {int(a[-1, 1])}, the reference at {int(b[-1, 1])}")
        cuts = np.union1d(a[:, 0], b[:, 0])
        ends = np.append(cuts[1:], a[-1, 1])
        va = a[np.searchsorted(a[:, 0], cuts, side="right") - 1, 2]
        vb = b[np.searchsorted(b[:, 0], cuts, side="right") - 1, 2]
        for k in np.flatnonzero(va != vb):
            ok_c = allowed.get(c, set())
            for pos in range(int(cuts[k]), int(ends[k])):
                tag = f"{c}:{pos} ours {va[k]:g} reference {vb[k]:g}"
                if pos in ok_c and abs(va[k] - vb[k]) == 1:
                    named.append(f"{c}:{pos}")
                else:
                    bad.append(tag)
                if len(bad) > 20:
                    break
    if bad:
        raise AssertionError(f"{len(bad)} position(s) differ outside the allowed ties: {'; '.join(bad[:20])}")
    return named
