"""Track arithmetic of the conversion (FORMATS.md §5.3–5.5): strand average, smoothing, run-length
encoding and the merge of runs across pieces and blocks.

Tracks are integer valued everywhere (predictions are integers; averages and smoothed values are rounded),
so everything here is done in integers, which is exact and the same on every CPU:

* ``strand_average``: round_half_even((p + m) / 2). Predmoter computes it in float32; for |values| < 2**23
  (``EXACT_LIMIT``) float32 holds p + m exactly, so the integer result is bit-for-bit Predmoter's. Larger values
  take Predmoter's float32 arithmetic (``strand_average_f32``).
* ``smooth_exact``: the moving average of numpy.convolve(track, ones(w)/w, 'same') — same window alignment,
  zero padding at the block edges, output length max(n, w) — computed from int64 cumulative sums as the exact
  rational S/w and rounded half-to-even in integers. numpy's float arithmetic rounds exact .5 ties (S/w = k + ½)
  either way depending on the CPU's BLAS/SIMD kernels (FORMATS §5.4 "machine dependence"); this does not.
* ``smooth_numpy``: numpy's own arithmetic, for users who must reproduce a Predmoter run on the same machine
  (``--smoothing numpy``). Machine dependent at ties by construction.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

#: |value| below this: integer averaging equals Predmoter's float32 averaging bit for bit
EXACT_LIMIT = 1 << 23


# --------------------------------------------------------------------------------------------------
# strand average
# --------------------------------------------------------------------------------------------------
def strand_average(
    p: np.ndarray, m: np.ndarray, out: np.ndarray | None = None, tmp: np.ndarray | None = None
) -> np.ndarray:
    """round_half_even((p + m) / 2) of integer arrays, exactly (``out`` may alias ``p`` or ``m``; ``tmp``:
    scratch of the same size).

    With a = p + m, q = floor(a / 2): a even -> q; a odd -> q + ½, which rounds to the even one of q, q + 1,
    i.e. q + (q & 1). Both cases: q + (a & q & 1).
    """
    a = np.add(p, m, out=out)
    q = np.right_shift(a, 1, out=tmp)
    a &= q
    a &= 1
    a += q
    return a


def strand_average_f32(p: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Predmoter's float32 arithmetic (used where values reach ``EXACT_LIMIT``)."""
    v = np.add(p, m, dtype=np.float32)
    v *= np.float32(0.5)  # exactly / 2
    np.rint(v, out=v)
    return v


# --------------------------------------------------------------------------------------------------
# smoothing
# --------------------------------------------------------------------------------------------------
def window_sums(track: np.ndarray, w: int, clip: bool = True) -> np.ndarray:
    """Integer window sums S[i] of numpy.convolve(track, ones(w), 'same') (int64; zero outside the track).

    numpy's 'same' mode: output length max(n, w); full-convolution index k = i + off with
    off = (min(n, w) - 1) // 2, so S[i] = sum of track[j] for j in [i + off - w + 1, i + off] ∩ [0, n).
    For n >= w that is j in [i - (w - 1 - (w - 1)//2), i + (w - 1)//2] (FORMATS §5.4). ``clip`` keeps only
    the first n values (numpy returns w > n values for a track shorter than the window).
    """
    if w < 1:
        raise ValueError("w must be >= 1")
    n = len(track)
    out_len = n if clip else max(n, w)
    cs = np.empty(n + 1, dtype=np.int64)
    cs[0] = 0
    np.cumsum(track, dtype=np.int64, out=cs[1:])
    off = (min(n, w) - 1) // 2
    if n < w or out_len < 2 * w:  # short: clipped index arithmetic on small arrays
        i = np.arange(out_len, dtype=np.int64)
        hi = np.clip(i + off + 1, 0, n)
        lo = np.clip(i + off - w + 1, 0, n)
        return cs[hi] - cs[lo]
    S = np.empty(out_len, dtype=np.int64)
    head = w - 1 - off  # positions whose window starts before 0
    S[:head] = cs[off + 1 : off + 1 + head]
    mid_end = n - off  # positions whose window lies inside the track: i in [head, n - off)
    np.subtract(cs[w : n + 1], cs[: n - w + 1], out=S[head:mid_end])
    if mid_end < out_len:  # windows that end past the track
        S[mid_end:] = cs[n] - cs[mid_end + off - w + 1 : out_len + off - w + 1]
    return S


def round_half_even_div(S: np.ndarray, w: int) -> np.ndarray:
    """round_half_even(S / w) for int64 S, exactly. S is overwritten (it becomes scratch space)."""
    t = S
    t *= 2
    t += w
    q = t // (2 * w)  # round half up: floor((2S + w) / 2w)
    tie = q * (2 * w)
    np.equal(tie, t, out=tie)  # (2S + w) divisible by 2w: S/w is exactly k + ½ and q = k + 1 ...
    tie &= q
    tie &= 1
    q -= tie  # ... and half-to-even takes k when k + 1 is odd
    return q


def _smooth_segments(track: np.ndarray, w: int, clip: bool, segment: int):
    """Yield (first position, exact smoothed values) in segments of ``segment`` positions.

    Each segment is computed from its own slice of the track with the (w - 1)-bp context its windows need,
    so the temporaries stay small (a 21.4 Mbp block would otherwise allocate ~1 GB of int64 scratch).
    """
    if track.dtype.kind == "f":
        track = track.astype(np.int64)  # integral by construction (predictions, rounded averages)
    n = len(track)
    if n < max(2 * segment, 4 * w):
        yield 0, round_half_even_div(window_sums(track, w, clip), w)
        return
    left = w - 1 - (w - 1) // 2  # window of i: [i - left, i + (w - 1) // 2]
    right = (w - 1) // 2
    for a in range(0, n, segment):
        b = min(n, a + segment)
        lo = max(0, a - left)
        hi = min(n, b + right)
        if hi - lo < w:  # at least w long, so window_sums keeps the long-track alignment (more context is harmless)
            lo = max(0, hi - w)
            hi = min(n, lo + w)
        # outside [lo, hi) window_sums counts zeros: true at the block edges, and never reached inside
        yield a, round_half_even_div(window_sums(track[lo:hi], w)[a - lo : b - lo], w)


def smooth_exact(track: np.ndarray, w: int, clip: bool = True, segment: int = 1 << 20) -> np.ndarray:
    """round_half_even(S/w) of the 'same'-mode window sums of an integer-valued track (int64)."""
    parts = [v for _, v in _smooth_segments(track, w, clip, segment)]
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def smooth_exact_runs(track: np.ndarray, w: int, clip: bool = True, segment: int = 1 << 20):
    """runs(smooth_exact(track, w, clip)) without the dense smoothed vector: segment by segment."""
    starts, ends, vals = [], [], []
    last = None  # value of the last run so far
    for a, v in _smooth_segments(track, w, clip, segment):
        s, e, x = runs(v)
        s += a
        e += a
        if last is not None and last == x[0]:  # the run goes on across the segment edge
            ends[-1][-1] = e[0]
            s, e, x = s[1:], e[1:], x[1:]
        if len(s):
            starts.append(s)
            ends.append(e)
            vals.append(x)
            last = x[-1]
    if len(starts) == 1:
        return starts[0], ends[0], vals[0]
    return np.concatenate(starts), np.concatenate(ends), np.concatenate(vals)


class SmoothStream:
    """Exact smoothing of one block fed piece by piece (FORMATS §5.4: smoothing restarts at every block).

    A position is emitted once the piece holding the end of its window has arrived; only the last w - 1 values
    are kept. Positions are block coordinates. Until w values have arrived nothing is emitted, so a block
    shorter than the window gets numpy's short-operand alignment (and, without ``clip``, its w outputs).
    """

    def __init__(self, w: int, clip: bool, native: bool = True):
        from . import _native

        self.w = w
        self.clip = clip
        self.native = _native.load() if native else None
        self.left = w - 1 - (w - 1) // 2  # window of i: [i - left, i + right]
        self.right = (w - 1) // 2
        self.reset()

    def reset(self) -> None:
        """Forget the values held back: start afresh at block position 0."""
        self.buf = np.empty(0, dtype=np.int64)
        self.buf_start = 0
        self.done = 0

    SUB = 1 << 18  # positions per step: keeps the int64 temporaries at ~2 MB (no fresh pages per piece)

    def feed_runs(self, chunk: np.ndarray, block_final: bool, minus: np.ndarray | None = None):
        """(first emitted position, runs (starts, ends, values) in block coordinates, or None if nothing is due).

        With ``minus``, the track is strand_average(chunk, minus) (int32 arrays): with the C kernels it is formed
        straight into the int64 window buffer. The chunk is taken in steps of SUB values; the runs of the steps
        are merged."""
        first = self.done
        parts: list[tuple] = []
        n = len(chunk)
        fused = (
            self.native is not None
            and chunk.dtype == np.int32
            and (minus is None or (minus.dtype == np.int32 and len(minus) == n))
        )
        if minus is not None and not fused:
            chunk = strand_average(np.asarray(chunk).astype(np.int64), np.asarray(minus).astype(np.int64))
            minus = None
        steps = list(range(0, n, self.SUB)) or [0]
        for k, a in enumerate(steps):
            last = k == len(steps) - 1
            if fused:
                x = np.ascontiguousarray(chunk[a : a + self.SUB])
                mm = np.ascontiguousarray(minus[a : a + self.SUB]) if minus is not None else None
                nb = len(self.buf)
                data = np.empty(nb + len(x), dtype=np.int64)
                data[:nb] = self.buf
                cast(Any, self.native).cf_track_i64(  # fused: native is loaded
                    x.ctypes.data, mm.ctypes.data if mm is not None else None, len(x), data[nb:].ctypes.data
                )
                start, y = self._feed_data(data, block_final and last)
            else:
                start, y = self.feed(chunk[a : a + self.SUB], block_final and last)
            if y is None or not len(y):
                continue
            if isinstance(y, tuple):  # runs from the C kernel, block coordinates
                s, e, v = y
            else:
                s, e, v = runs(y)
                s += start
                e += start
            if parts and parts[-1][2][-1] == v[0]:  # the run goes on across the step
                parts[-1][1][-1] = e[0]
                s, e, v = s[1:], e[1:], v[1:]
            if len(s):
                parts.append((s, e, v))
        if not parts:
            return first, None
        if len(parts) == 1:
            return first, parts[0]
        return first, tuple(np.concatenate([p[i] for p in parts]) for i in range(3))

    def _native_runs(self, data, d0, d1, start, end, block_final):
        data = np.ascontiguousarray(data, dtype=np.int64)
        k_max = end - start
        starts = np.empty(k_max, dtype=np.int64)
        vals = np.empty(k_max, dtype=np.int64)
        k = self.native.cf_smooth_runs(
            data.ctypes.data,
            d0,
            len(data),
            d1 if block_final else np.iinfo(np.int64).max,
            start,
            end,
            self.w,
            self.left,
            self.right,
            starts.ctypes.data,
            vals.ctypes.data,
        )
        s = starts[:k].copy()
        e = np.empty(k, dtype=np.int64)
        e[:-1] = s[1:]
        e[-1] = end
        return s, e, vals[:k].copy()

    def feed(self, chunk: np.ndarray, block_final: bool):
        """(first emitted position, exact smoothed values as int64 — or, with the C kernels, their runs in block
        coordinates — or None if nothing is due yet)."""
        if chunk.dtype.kind == "f":
            chunk = chunk.astype(np.int64)  # integral by construction
        data = np.concatenate([self.buf, chunk]) if len(self.buf) else chunk.astype(np.int64)
        return self._feed_data(data, block_final)

    def _feed_data(self, data: np.ndarray, block_final: bool):
        """feed() of the int64 buffer = the kept w - 1 values followed by the new ones."""
        w = self.w
        d0 = self.buf_start
        d1 = d0 + len(data)
        start = self.done
        if d1 < w:  # the block is shorter than the window so far
            if not block_final:
                self.buf = data
                return start, None
            out: np.ndarray | None = round_half_even_div(window_sums(data, w, self.clip), w)  # d0 == 0: the whole block
            self.reset()
            return 0, out
        end = d1 if block_final else d1 - self.right
        out = None
        if end > start and self.native is not None:  # the C kernel emits the runs directly
            out = self._native_runs(data, d0, d1, start, end, block_final)
            self.done = end
        elif end > start:
            cs = np.empty(len(data) + 1, dtype=np.int64)
            cs[0] = 0
            np.cumsum(data, out=cs[1:])
            S = np.empty(end - start, dtype=np.int64)
            # i in [start, end): S[i] = cs[min(i + right + 1, d1) - d0] - cs[max(i - left, 0) - d0]
            a = min(max(start, self.left), end)  # windows before position `left` start at the block start
            b = max(min(end, d1 - self.right), a)  # windows from d1 - right on run past the data (final only)
            if a > start:
                S[: a - start] = cs[start + self.right + 1 - d0 : a + self.right + 1 - d0] - cs[0]
            S[a - start : b - start] = (
                cs[a + self.right + 1 - d0 : b + self.right + 1 - d0] - cs[a - self.left - d0 : b - self.left - d0]
            )
            if b < end:
                S[b - start :] = cs[d1 - d0] - cs[np.maximum(np.arange(b, end) - self.left, 0) - d0]
            out = round_half_even_div(S, w)
            self.done = end
        if block_final:
            self.reset()
        else:
            keep = min(len(data), w - 1)
            self.buf = data[len(data) - keep :].copy()
            self.buf_start = d1 - keep
        return start, out


def tie_positions(track: np.ndarray, w: int, clip: bool = True) -> np.ndarray:
    """Positions where S/w is exactly k + ½ (where numpy's float arithmetic may round either way)."""
    if w % 2:
        return np.empty(0, dtype=np.int64)
    S = window_sums(np.asarray(track).astype(np.int64), w, clip)
    return np.flatnonzero(S % w == w // 2)


def smooth_numpy(track: np.ndarray, w: int, clip: bool) -> np.ndarray:
    """round_half_even(numpy.convolve(track, ones(w)/w, 'same')) in float64 — Predmoter's own arithmetic.

    Machine dependent at exact .5 ties (FORMATS §5.4). A window that lies wholly inside a run of one integer
    value c gives c, so numpy.convolve is run only on the regions within w of a value change or of a block
    edge. Each region is convolved with w bp of context on both sides (or the block edge itself), so every
    output position gets the same dot product over the same data as in a whole-block call.
    """
    n = len(track)
    kernel = np.ones(w) / w
    t64 = track.astype(np.float64)
    if n >= 8 * w and os.environ.get("CHROMAFLOW_SMOOTH") != "convolve":
        cuts = np.flatnonzero(track[1:] != track[:-1]) + 1
        if len(cuts) * 4 * w < n and max(float(track.max()), -float(track.min())) < 2.0**40:
            starts = np.concatenate([[0], cuts - w, [n - w]])
            ends = np.concatenate([[w], cuts + w, [n]])
            np.clip(starts, 0, n, out=starts)
            np.clip(ends, 0, n, out=ends)
            brk = np.flatnonzero(starts[1:] > ends[:-1]) + 1  # starts/ends are both sorted
            rs = starts[np.concatenate([[0], brk])]
            re = ends[np.concatenate([brk - 1, [len(ends) - 1]])]
            done = []
            for a, b in zip(rs.tolist(), re.tolist()):
                lo = max(0, a - w)
                hi = min(n, b + w)
                done.append((a, b, np.rint(np.convolve(t64[lo:hi], kernel, mode="same")[a - lo : b - lo])))
            for a, b, v in done:  # t64 becomes the output (outside the regions it already is the answer)
                t64[a:b] = v
            return t64
    out = np.rint(np.convolve(t64, kernel, mode="same"))
    if clip:
        out = out[:n]
    return out


# --------------------------------------------------------------------------------------------------
# runs
# --------------------------------------------------------------------------------------------------
def runs(v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Maximal runs of equal values: (starts, ends, values) in the vector's own coordinates (int64)."""
    n = len(v)
    cut = np.flatnonzero(v[1:] != v[:-1])
    starts = np.empty(len(cut) + 1, dtype=np.int64)
    starts[0] = 0
    np.add(cut, 1, out=starts[1:])
    ends = np.empty_like(starts)
    ends[:-1] = starts[1:]
    ends[-1] = n
    return starts, ends, v[starts]


#: runs per bp of the last piece runs_native called (the next piece's guess of its output size: a track's pieces are
#: alike); shared by the pool's threads, a guess that a race can only make a retry more or less likely
_RUNS_PER_BP = [1 / 8]


def runs_native(x: np.ndarray, m: np.ndarray | None = None, offset: int = 0):
    """runs(x), or runs(strand_average(x, m)), of int32 arrays in C: (starts + offset, ends + offset, float32
    values), or None without the C kernels. One pass (``_kernels.c``, cf_runs) into arrays sized by the last
    piece's runs per bp (+25 %); a piece with more runs than that is run again into arrays of its size."""
    from . import _native

    lib = _native.load()
    if lib is None or x.dtype != np.int32 or (m is not None and m.dtype != np.int32):
        return None
    x = np.ascontiguousarray(x)
    n = len(x)
    mp = np.ascontiguousarray(m).ctypes.data if m is not None else None
    cap = min(n, int(n * _RUNS_PER_BP[0] * 1.25) + 1024)
    while True:
        starts = np.empty(cap, dtype=np.int64)
        ends = np.empty(cap, dtype=np.int64)
        vals = np.empty(cap, dtype=np.float32)
        k = lib.cf_runs(x.ctypes.data, mp, n, offset, cap, starts.ctypes.data, ends.ctypes.data, vals.ctypes.data)
        if k <= cap:
            break
        cap = k
    if n:
        _RUNS_PER_BP[0] = k / n
    if k < cap // 2:  # a piece with far fewer runs than the last: its own arrays, not views of big ones
        return starts[:k].copy(), ends[:k].copy(), vals[:k].copy()
    return starts[:k], ends[:k], vals[:k]


def int_floor(cutoff: float) -> int:
    """The smallest integer v with float32(v) >= float32(cutoff), for the integer tracks of the exact path (values
    in [0, EXACT_LIMIT), exact in float32): below it a value is below the cutoff (capped, to fit int32). The C
    peak caller's threshold."""
    return int(min(max(np.ceil(np.float64(np.float32(cutoff))), 1), 2 * EXACT_LIMIT))


@dataclass
class TrackState:
    """Cross-piece merge state of one output track within one chromosome (FORMATS §5.5).

    The last run of each piece is held back; the next piece's first run extends it when the values are equal.
    Consecutive intervals therefore always differ in value. A piece that only continues the held run emits
    nothing (the reference writes a blank bedGraph line there and crashes on bigWig; see docs/bigwig.md).
    """

    pending: tuple[int, object] | None = None  # (start, value) of the held-back last run
    end: int = 0

    def feed(self, v: np.ndarray, offset: int, final: bool):
        """(starts, ends, values) to emit for piece ``v`` starting at chromosome coordinate ``offset``."""
        return self.feed_runs(runs(v) if len(v) else None, v.dtype, offset, final)

    def feed_runs(self, piece_runs, dtype, offset: int, final: bool):
        """Like :meth:`feed`, for the piece's runs (piece coordinates) computed beforehand (None: empty). The runs'
        ``starts`` and ``ends`` are shifted in place (arrays made for this piece: two fresh 66 M-element arrays a
        200 Mbp track cost more in the kernel's page zeroing than the additions)."""
        if piece_runs is None:
            if final and self.pending is not None:
                s, val = self.pending
                self.pending = None
                return (np.array([s], np.int64), np.array([self.end], np.int64), np.array([val], dtype))
            return None
        starts, ends, vals = piece_runs
        if offset:
            starts += offset
            ends += offset
        if self.pending is not None:
            ps, pv = self.pending
            if vals[0] == pv:
                starts[0] = ps
            else:
                starts = np.concatenate([[ps], starts])
                ends = np.concatenate([[offset], ends])
                vals = np.concatenate([np.array([pv], dtype=vals.dtype), vals])
            self.pending = None
        if not final:
            self.pending = (int(starts[-1]), vals[-1])
            self.end = int(ends[-1])
            starts, ends, vals = starts[:-1], ends[:-1], vals[:-1]
        if len(starts) == 0:  # empty-block defect of the reference: emit nothing
            return None
        return starts, ends, vals
