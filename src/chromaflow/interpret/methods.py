"""Contribution scores of a region's bases to the model's predicted coverage there (docs/interpret.md).

The target: a model input of the checkpoint's length L around the region's centre, in genome orientation (one-hot,
C, A, T, G columns); the model's predicted coverage (exp of its log-rate output) of one dataset, on the plus strand,
the minus strand (the reverse complement through the model, its output turned back to genome order, as predict
does) or their mean (``avg``), summed over the region's positions. A scalar per input row.

Two methods, both giving *hypothetical* scores h (L x 4: what each base would contribute at each position; the
observed base's is the contribution of the sequence as it is):

* ``ism`` (in-silico saturation mutagenesis, the exact reference): every other base at every position of the
  window, each mutant through the model; Δ[i, b] = target(mutant) − target(sequence) (0 for the observed base),
  h[i, :] = Δ[i, :] − mean_b Δ[i, b]. A BiLSTM makes every output depend on the whole input, so each mutant costs a
  full forward pass of length L: 3 W passes per region (x 2 strands for ``avg``), nothing shared between them.
* ``ig`` (Integrated Gradients, Sundararajan et al. 2017) from captum (PyPI, the reference implementation of the
  method for PyTorch; chosen over tangermeme because it needs no further compiled dependency and takes any
  nn.Module): the gradients of the target averaged along the straight path from a baseline of N (0.25 in each
  column; padding stays 0) to the sequence, G (L x 4, captum's ``multiply_by_inputs=False``), h = G − mean_b G. The
  observed base's h is then exactly IG's attribution of that position ((x − baseline) · G), and IG's completeness
  holds: the observed contributions sum to target(sequence) − target(baseline), up to the path integral's error.
  ``steps`` forward and backward passes per region (x 2 strands for ``avg``), however wide the window.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

METHODS = ("ig", "ism")
STRANDS = ("avg", "plus", "minus")
#: Integrated Gradients' path steps (Riemann sum points: captum's Gauss-Legendre rule)
DEFAULT_STEPS = 32


class Target(nn.Module):
    """The scalar target of each input row: predicted coverage of dataset ``d`` on ``strand``, summed over the
    positions of ``mask``.

    Parameters
    ----------
    model : torch.nn.Module
        A Predmoter-compatible network in eval mode: (B, L, 4) one-hot -> (B, L, D) log-rates.
    d : int
        The dataset's column of the output.
    strand : str
        'avg', 'plus' or 'minus'.
    """

    def __init__(self, model: nn.Module, d: int, strand: str, amp: torch.dtype | None = None):
        super().__init__()
        self.model, self.d, self.strand, self.amp = model, d, strand, amp

    def _rate(self, x: torch.Tensor) -> torch.Tensor:
        if self.amp is None:
            y = self.model(x)
        else:
            with torch.autocast(device_type=x.device.type, dtype=self.amp):
                y = self.model(x)
        return torch.exp(y[..., self.d].float())

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x (B, L, 4) float32 genome-orientation one-hot, mask (B, L) float32 -> (B,) target."""
        parts = []
        if self.strand in ("avg", "plus"):
            parts.append(self._rate(x))
        if self.strand in ("avg", "minus"):  # reverse complement: positions and columns reversed
            parts.append(self._rate(x.flip(1).flip(2)).flip(1))
        y = parts[0] if len(parts) == 1 else (parts[0] + parts[1]) / 2
        return (y * mask).sum(dim=1)


def hypothetical(scores: np.ndarray) -> np.ndarray:
    """(W, 4) per-base scores -> the same centred over the four bases of each position (hypothetical scores)."""
    return scores - scores.mean(axis=1, keepdims=True)


def observed(x: np.ndarray, h: np.ndarray) -> np.ndarray:
    """One-hot and hypothetical scores, bases on axis 1 ((W, 4), or (N, 4, W) in the output's layout) -> the observed
    sequence's contribution per position (that axis summed away)."""
    return (x * h).sum(axis=1)


def ism(target: Target, x: torch.Tensor, mask: torch.Tensor, lo: int, hi: int, batch: int) -> tuple[np.ndarray, float]:
    """In-silico saturation mutagenesis of window positions [lo, hi) of one input.

    Parameters
    ----------
    target : Target
        The scalar target.
    x : torch.Tensor
        (1, L, 4) float32 one-hot on the model's device.
    mask : torch.Tensor
        (1, L) float32: the target's positions.
    lo, hi : int
        The window's positions in the input.
    batch : int
        Mutants per model call.

    Returns
    -------
    (numpy.ndarray, float)
        Hypothetical scores (hi − lo, 4) float64 and the target of the sequence itself.
    """
    eye = torch.eye(4, device=x.device)
    xn = x[0, lo:hi].cpu().numpy()
    # every base but the observed one at every position that is not padding (an N: all four)
    muts = [(lo + i, b) for i in range(hi - lo) if xn[i].any() for b in range(4) if not (xn[i] == np.eye(4)[b]).all()]
    with torch.inference_mode():
        ref = float(target(x, mask)[0])
        delta = np.zeros((hi - lo, 4))
        for k in range(0, len(muts), batch):
            part = muts[k : k + batch]
            xb = x.expand(len(part), -1, -1).clone()
            for j, (i, b) in enumerate(part):
                xb[j, i] = eye[b]
            out = target(xb, mask.expand(len(part), -1)).double().cpu().numpy()
            for j, (i, b) in enumerate(part):
                delta[i - lo, b] = out[j] - ref
    return hypothetical(delta), ref


def integrated_gradients(
    target: Target, x: torch.Tensor, mask: torch.Tensor, lo: int, hi: int, steps: int, batch: int
) -> tuple[np.ndarray, float, float]:
    """Integrated Gradients (captum) of one input, hypothetical scores of window positions [lo, hi).

    Parameters
    ----------
    target, x, mask, lo, hi
        As :func:`ism`.
    steps : int
        Path steps.
    batch : int
        Path points per model call (captum's ``internal_batch_size``).

    Returns
    -------
    (numpy.ndarray, float, float)
        Hypothetical scores (hi − lo, 4) float64, the target of the sequence and of the baseline.
    """
    from captum.attr import IntegratedGradients

    baseline = torch.where(x.amax(dim=2, keepdim=True) > 0, torch.full_like(x, 0.25), torch.zeros_like(x))
    ig = IntegratedGradients(target, multiply_by_inputs=False)
    cudnn_off = torch.backends.cudnn.flags(enabled=False)  # cuDNN's LSTM has no backward in eval mode
    with cudnn_off:
        grads = ig.attribute(
            x, baselines=baseline, additional_forward_args=(mask,), n_steps=steps, internal_batch_size=batch
        )
    with torch.inference_mode():
        ends = target(torch.cat([x, baseline]), mask.expand(2, -1)).double().cpu().numpy()
    g = grads[0, lo:hi].double().cpu().numpy()
    base = x[0, lo:hi].cpu().numpy().any(axis=1, keepdims=True)  # padding: no base, no score (as ISM)
    return hypothetical(g) * base, float(ends[0]), float(ends[1])
