"""Reference and alternative windows of a variant, their predictions on both strands, and the scores.

Window rule (docs/variants.md): the model's input length L comes from the checkpoint (``seq_len``). For a variant
whose first REF base is at 0-based ``p`` the window starts at ``s = p - L // 2`` for both alleles, so the variant
starts at window index ``off = L // 2`` in both. The reference window is the genome ``[s, s + L)``; the alternative
window is the genome ``[s, p)``, then ALT, then the genome from ``p + len(REF)`` on, cut at L. Bases left of the
variant therefore sit at the same window index in both windows; bases right of it are shifted by
``d = len(ALT) - len(REF)`` in the alternative window, and the comparison undoes that shift. Positions outside the
record are padding (code 0, all-zero one-hot), as ``predict`` pads a record's last chunk; they are never scored.

The one-hot table is the genome core's (through the predict stage's :class:`~chromaflow.predict.executors.Encoder`):
a minus-strand row is the window's codes reversed with the complement columns, exactly as predict builds minus rows,
and its output is reversed back to genome order.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

#: strands in the output's column order
STRANDS = ("avg", "plus", "minus")
#: metrics per (dataset, strand) in the output's column order
METRICS = ("ref_mean", "alt_mean", "delta_mean", "log2fc", "max_abs_delta", "max_abs_delta_offset")
#: pseudocount added to both means before log2 (coverage units): damps fold changes of near-zero coverage
PSEUDOCOUNT = 1.0


@dataclass
class Geometry:
    """Where a variant's windows lie: window start ``s`` (genome, may be < 0), variant index ``off`` in the window,
    REF/ALT lengths ``r``/``a``, record length ``n``, window length ``L``."""

    s: int
    off: int
    r: int
    a: int
    n: int
    L: int

    @property
    def d(self) -> int:
        """Length change of the ALT allele: ALT length - REF length."""
        return self.a - self.r

    def padded(self) -> tuple[int, int]:
        """Padding positions of the reference window before the record start / after the record end."""
        return max(0, -self.s), max(0, self.s + self.L - self.n)


def geometry(p: int, r: int, a: int, n: int, L: int) -> Geometry:
    """The :class:`Geometry` of a variant at 0-based position ``p`` (REF ``r`` bases, ALT ``a`` bases) on a record of
    ``n`` bases: the window of length ``L`` puts the variant at index L // 2."""
    return Geometry(s=p - L // 2, off=L // 2, r=r, a=a, n=n, L=L)


def fits(g: Geometry, flank: int) -> bool:
    """The scored region (flank, the longer allele, flank) lies inside the window for both alleles."""
    return g.off - flank >= 0 and g.off + max(g.r, g.a) + flank <= g.L


def ref_window(seq: np.ndarray, g: Geometry) -> np.ndarray:
    """(L,) uint8 codes of the reference window; 0 outside the record."""
    out = np.zeros(g.L, dtype=np.uint8)
    lo, hi = max(0, g.s), min(g.n, g.s + g.L)
    if hi > lo:
        out[lo - g.s : hi - g.s] = seq[lo:hi]
    return out


def alt_window(seq: np.ndarray, g: Geometry, alt: bytes) -> np.ndarray:
    """(L,) uint8 codes of the alternative window: genome [s, p), ALT, genome [p + r, ...), cut at L."""
    out = np.zeros(g.L, dtype=np.uint8)
    p = g.s + g.off
    lo = max(0, g.s)
    out[lo - g.s : g.off] = seq[lo:p]
    a_end = min(g.L, g.off + g.a)
    out[g.off : a_end] = np.frombuffer(alt, dtype=np.uint8)[: a_end - g.off]
    right = max(0, min(g.L - a_end, g.n - (p + g.r)))
    out[a_end : a_end + right] = seq[p + g.r : p + g.r + right]
    return out


def scored_span(gs: list[Geometry], flank: int) -> tuple[int, int]:
    """The window slice [lo, hi) that holds every position :func:`scores` reads for the variants ``gs`` (one window
    length, all fitting: :func:`fits`), symmetric about the window (hi = L - lo), so the minus strand's output, still
    in reversed order, has the same slice: only it needs to leave the model's device (the flanks are ~2 % of a
    Predmoter window)."""
    L, off = gs[0].L, gs[0].off
    hi = off + max(max(g.r, g.a) for g in gs) + flank
    lo = min(off - flank, L - hi)
    return lo, L - lo


def scores(ref: np.ndarray, alt: np.ndarray, g: Geometry, flank: int, base: int = 0) -> dict[str, np.ndarray]:
    """The metrics of one strand (or the strand average): ``ref``/``alt`` (L', D) predicted coverage in window order
    from window index ``base`` on (the whole window: L' = L, base 0; or :func:`scored_span`'s slice).

    Means: over the region flank + allele + flank of each window, record positions only (the alleles' own bases
    are part of their region, so an insertion's or deletion's bases count for its allele). Δ = alt − ref;
    log2fc = log2((alt + PSEUDOCOUNT) / (ref + PSEUDOCOUNT)). max |Δ|: over the positions that align between the
    windows (left flank, the first min(r, a) allele bases, right flank shifted by d); its offset is in reference
    coordinates relative to the first REF base (0 = POS, negative = upstream); ties go to the smallest offset.
    """
    lo = max(g.off - flank, -g.s)
    hi_ref = min(g.off + g.r + flank, g.n - g.s)
    hi_alt = min(g.off + g.a + flank, g.n - g.s + g.d)
    ref_mean = ref[lo - base : hi_ref - base].astype(np.float64).mean(axis=0)
    alt_mean = alt[lo - base : hi_alt - base].astype(np.float64).mean(axis=0)
    m = min(g.r, g.a)
    right = hi_ref - (g.off + g.r)
    o = g.off - base  # the variant's index in the arrays
    delta = np.concatenate(
        [alt[lo - base : o + m] - ref[lo - base : o + m], alt[o + g.a : o + g.a + right] - ref[o + g.r : hi_ref - base]]
    ).astype(np.float64)
    offsets = np.concatenate([np.arange(lo - g.off, m), np.arange(g.r, g.r + right)])
    k = np.abs(delta).argmax(axis=0)
    cols = np.arange(delta.shape[1])
    return {
        "ref_mean": ref_mean,
        "alt_mean": alt_mean,
        "delta_mean": alt_mean - ref_mean,
        "log2fc": np.log2((alt_mean + PSEUDOCOUNT) / (ref_mean + PSEUDOCOUNT)),
        "max_abs_delta": np.abs(delta[k, cols]),
        "max_abs_delta_offset": offsets[k],
    }


def note(g: Geometry, flank: int) -> str:
    """What the output's note says about a scored variant's window: padding past the record, a clipped flank."""
    parts = []
    before, after = g.padded()
    if before:
        parts.append(f"window padded {before} bp before record start")
    if after:
        parts.append(f"window padded {after} bp after record end")
    if g.off - flank < -g.s:
        parts.append("flank clipped at record start")
    if g.off + g.r + flank > g.n - g.s:
        parts.append("flank clipped at record end")
    return "; ".join(parts)


class WindowPredictor:
    """Predicted coverage (exp of the model's log-rate, not rounded) of windows on both strands.

    ``model`` built by the predict stage (:func:`chromaflow.model.checkpoint.build_model`), ``device`` and
    ``precision`` as predict resolves them; rows go through the model ``micro`` at a time (CPU: small calls keep
    activations in cache, as predict's CPU executor does; CUDA: the whole batch)."""

    def __init__(self, model, device, precision: str, micro: int, streams: int = 1):
        import torch

        from ..predict.executors import Encoder, autocast_dtype

        self.torch = torch
        self.model = model.to(device)
        self.device = device
        self.encoder = Encoder(device)
        self.amp = autocast_dtype(precision)
        self.micro = max(1, micro)
        self.rows = 0
        # CPU: ``streams`` micro-batches run at once, one torch thread each, as predict's CPU executor runs them
        # (measured there: faster than one call with several intra-op threads, which spin while they wait); the pool
        # (predict's start_streams) starts at the first call, which knows the window length its first call needs
        self.streams = streams if device.type == "cpu" and streams > 1 else 1
        self.intra = max(1, torch.get_num_threads() // self.streams)
        self.pool: ThreadPoolExecutor | None = None

    def close(self) -> None:
        """Shut the CPU stream pool down, if there is one."""
        if self.pool is not None:
            self.pool.shutdown(wait=True)

    def _forward(self, codes: np.ndarray, strand: np.ndarray, span: tuple[int, int]) -> np.ndarray:
        torch = self.torch
        c = torch.from_numpy(np.ascontiguousarray(codes)).to(self.device)
        st = torch.from_numpy(strand).to(self.device)
        x, _pad = self.encoder.codes(c, st)
        if self.amp is None:
            y = self.model(x)
        else:
            with torch.autocast(device_type=self.device.type, dtype=self.amp):
                y = self.model(x)
        return torch.exp(y[:, span[0] : span[1]].float()).cpu().numpy()

    def _call(self, codes: np.ndarray, strand: np.ndarray, span: tuple[int, int]) -> np.ndarray:
        with self.torch.inference_mode():  # thread-local: entered in the thread that runs the model
            return self._forward(codes, strand, span)

    def __call__(self, windows: np.ndarray, span: tuple[int, int] | None = None) -> np.ndarray:
        """(n, L) uint8 codes -> (n, 2, L', D) float32: [:, 0] plus strand, [:, 1] minus strand, genome order; the
        whole window (L' = L), or only the slice ``span`` = [lo, L - lo) (:func:`scored_span`: the same positions on
        both strands), which is all that is copied off the device and exponentiated."""
        n, L = windows.shape
        span = span or (0, L)
        if span[1] != L - span[0]:
            raise ValueError(f"span {span} is not symmetric in a window of {L}")
        rows = np.concatenate([windows, windows[:, ::-1]])
        strand = np.concatenate([np.zeros(n, np.uint8), np.ones(n, np.uint8)])
        starts = range(0, 2 * n, self.micro)
        if self.streams > 1 and self.pool is None:
            from ..predict.executors import start_streams

            k = min(2, self.micro)
            zeros = (np.zeros((k, L), np.uint8), np.zeros(k, np.uint8), span)
            self.pool = start_streams(self.streams, self.intra, "variant-stream", lambda: self._call(*zeros))
        if self.pool is None:
            parts = [self._call(rows[i : i + self.micro], strand[i : i + self.micro], span) for i in starts]
        else:
            parts = list(
                self.pool.map(lambda i: self._call(rows[i : i + self.micro], strand[i : i + self.micro], span), starts)
            )
        y = np.concatenate(parts)
        self.rows += 2 * n
        return np.stack([y[:n], y[n:, ::-1]], axis=1)


def strand_tracks(pred: np.ndarray) -> dict[str, np.ndarray]:
    """(2, L, D) plus/minus predictions -> avg, plus, minus tracks (avg = the mean of the strands per position)."""
    return {"avg": (pred[0] + pred[1]) / 2, "plus": pred[0], "minus": pred[1]}
