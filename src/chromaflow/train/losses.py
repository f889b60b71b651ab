"""Predmoter's loss and metric (FORMATS.md §7.3), per (chunk, dataset) row, with explicit masks.

The network outputs p = log-rate, shape (B, L, D). For every row (chunk b, dataset d):

* loss_row = mean over the valid positions of ``exp(p) - y * p`` (Poisson NLL with log input, without log(y!));
* r_row = Pearson's r between ``exp(p)`` and y over the valid positions:
  ``sum(dx * dy) / (sqrt(sum(dx^2)) * sqrt(sum(dy^2)) + 1e-8)`` with dx, dy deviations from the row means;
* valid positions = not padding (X row all zero); a row is used when its target is not the -3 filler, or always
  when the model has a single dataset (Predmoter drops filler rows only with more than one dataset).

Predmoter computes the same with NaN-masked tensors and nanmean; masks give the same values without NaNs in the
autograd graph. Epoch values are means over all used rows (sums and counts are accumulated and, under DDP, summed
over ranks), which is what Predmoter's batch-size-weighted epoch logging gives.
"""

from __future__ import annotations

import torch

EPS = 1e-8


def row_stats(p: torch.Tensor, y: torch.Tensor, x: torch.Tensor, *, with_pearson: bool = True):
    """(loss_rows, pearson_rows or None, used) for p, y of shape (B, L, D) and x (B, L, 4).

    ``used`` (B, D) bool marks rows that count; loss_rows keeps the autograd graph of p.
    """
    valid = (x != 0).any(dim=2)  # (B, L) not padding
    n_valid = valid.sum(dim=1, keepdim=True).clamp(min=1)  # (B, 1)
    w = valid.unsqueeze(2).to(p.dtype)  # (B, L, 1)
    yz = torch.where(valid.unsqueeze(2), y, torch.zeros_like(y))
    loss_pos = torch.exp(p) - yz * p
    loss_rows = (loss_pos * w).sum(dim=1) / n_valid.to(p.dtype)  # (B, D)
    d = y.shape[2]
    used = torch.ones(y.shape[0], d, dtype=torch.bool, device=y.device)
    if d > 1:
        used = y[:, 0, :] != -3
    pearson = None
    if with_pearson:
        with torch.no_grad():
            e = torch.exp(p.detach()).to(torch.float32)
            yy = yz.to(torch.float32)
            wf = w.to(torch.float32)
            n = n_valid.to(torch.float32)
            dx = (e - (e * wf).sum(dim=1, keepdim=True) / n.unsqueeze(2)) * wf
            dy = (yy - (yy * wf).sum(dim=1, keepdim=True) / n.unsqueeze(2)) * wf
            num = (dx * dy).sum(dim=1)
            den = torch.sqrt((dx * dx).sum(dim=1)) * torch.sqrt((dy * dy).sum(dim=1)) + EPS
            pearson = num / den
    return loss_rows, pearson, used


class EpochMeans:
    """Accumulates per-row sums and counts (overall and per dataset) over an epoch, on the model's device."""

    def __init__(self, datasets: tuple[str, ...], device):
        self.datasets = datasets
        d = len(datasets)
        # rows: loss sum, pearson sum, count, per dataset
        self.sums = torch.zeros(3, d, dtype=torch.float64, device=device)

    def add(self, loss_rows: torch.Tensor, pearson_rows: torch.Tensor, used: torch.Tensor) -> None:
        """Add a batch's per-row losses and Pearson correlations (NaN counted as 0) of the rows marked ``used``, per
        dataset, and their count."""
        u = used.to(torch.float64)
        self.sums[0] += (loss_rows.detach().to(torch.float64) * u).sum(dim=0)
        self.sums[1] += (torch.nan_to_num(pearson_rows.to(torch.float64)) * u).sum(dim=0)
        self.sums[2] += u.sum(dim=0)

    def result(self, sums: torch.Tensor | None = None) -> dict[str, float]:
        """The means from ``sums`` (default: this process's own): ``loss`` and ``accuracy`` over all rows and
        datasets, and ``<dataset>_loss`` / ``<dataset>_accuracy``; NaN where no row counted."""
        s = (self.sums if sums is None else sums).cpu()
        out: dict[str, float] = {}
        total = s[2].sum().item()
        out["loss"] = (s[0].sum().item() / total) if total else float("nan")
        out["accuracy"] = (s[1].sum().item() / total) if total else float("nan")
        for j, name in enumerate(self.datasets):
            c = s[2, j].item()
            out[f"{name}_loss"] = s[0, j].item() / c if c else float("nan")
            out[f"{name}_accuracy"] = s[1, j].item() / c if c else float("nan")
        return out
