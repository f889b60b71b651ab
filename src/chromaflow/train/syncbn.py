"""BatchNorm synchronised over DDP processes on CPU (gloo), so N processes compute what one process would.

``torch.nn.SyncBatchNorm`` refuses CPU tensors (its statistics kernels are CUDA-only), and without it every DDP
process normalises with the statistics of its own slice of the batch, which changes the model's arithmetic compared
with one process holding the whole batch (Predmoter's single-device setting). This module does the same as
SyncBatchNorm with plain tensor ops and ``torch.distributed.all_reduce``:

* forward (training): global per-channel mean and biased variance over every process's batch (two passes,
  accumulated in float64), normalise, update the running statistics with the unbiased variance, like BatchNorm1d;
* backward: ``dx = w * invstd * (dy - sum(dy)/n - xhat * sum(dy * xhat)/n)`` with the sums over all processes;
  the weight and bias gradients stay local (DDP averages them, as it does every gradient).

In eval mode, or without an initialised process group of more than one process, it is plain BatchNorm1d. The
state_dict keys and shapes are BatchNorm1d's, so checkpoints do not change.
"""

from __future__ import annotations

from typing import cast

import torch
import torch.distributed as dist
from torch import nn


def _allreduce(t: torch.Tensor) -> torch.Tensor:
    dist.all_reduce(t)
    return t


class _SyncBN(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps: float, momentum: float):
        """Normalise ``x`` with the mean and biased variance over every process's batch (float64 sums) and update the
        running statistics with the unbiased variance."""
        c = x.shape[1]
        dims = [0] + list(range(2, x.dim()))
        x64 = x.to(torch.float64)
        s = torch.cat([x64.sum(dims), torch.tensor([x.numel() // c], dtype=torch.float64)])
        s = _allreduce(s)
        n = s[-1]
        mean = s[:c] / n
        shape = [1, c] + [1] * (x.dim() - 2)
        diff = x64 - mean.view(shape)
        var = _allreduce((diff * diff).sum(dims)) / n
        invstd = torch.rsqrt(var + eps)
        xhat = (diff * invstd.view(shape)).to(x.dtype)
        y = xhat * weight.view(shape) + bias.view(shape)
        with torch.no_grad():
            running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype), alpha=momentum)
            unbiased = var * n / max(n.item() - 1, 1)
            running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype), alpha=momentum)
        ctx.save_for_backward(xhat, weight, invstd.to(x.dtype))
        ctx.n = float(n.item())
        return y

    @staticmethod
    def backward(ctx, dy):
        """Gradients of the input (from sums over every process), weight and bias (local); None for the other
        arguments."""
        xhat, weight, invstd = ctx.saved_tensors
        c = xhat.shape[1]
        dims = [0] + list(range(2, xhat.dim()))
        shape = [1, c] + [1] * (xhat.dim() - 2)
        sum_dy_local = dy.sum(dims)
        sum_dy_xhat_local = (dy * xhat).sum(dims)
        sums = _allreduce(torch.cat([sum_dy_local, sum_dy_xhat_local]).to(torch.float64))
        mean_dy = (sums[:c] / ctx.n).to(dy.dtype)
        mean_dy_xhat = (sums[c:] / ctx.n).to(dy.dtype)
        dx = (weight * invstd).view(shape) * (dy - mean_dy.view(shape) - xhat * mean_dy_xhat.view(shape))
        return dx, sum_dy_xhat_local, sum_dy_local, None, None, None, None


class CPUSyncBatchNorm1d(nn.BatchNorm1d):
    """BatchNorm1d whose training statistics span all DDP processes (see the module docstring)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """BatchNorm1d over the batches of all processes when training in a process group of more than one; plain
        BatchNorm1d otherwise."""
        if not (self.training and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
            return super().forward(x)
        if self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
        # momentum None (a cumulative average) is BatchNorm's with tracked running stats: num_batches_tracked is set
        momentum = (
            self.momentum if self.momentum is not None else 1.0 / float(cast(torch.Tensor, self.num_batches_tracked))
        )
        return _SyncBN.apply(x, self.weight, self.bias, self.running_mean, self.running_var, self.eps, momentum)


def convert(module: nn.Module) -> nn.Module:
    """Replace every BatchNorm1d in ``module`` (in place) with :class:`CPUSyncBatchNorm1d`, keeping its state."""
    for name, child in module.named_children():
        if type(child) is nn.BatchNorm1d:
            new = CPUSyncBatchNorm1d(
                child.num_features, child.eps, child.momentum, child.affine, child.track_running_stats
            )
            new.load_state_dict(child.state_dict())
            new.train(child.training)
            setattr(module, name, new)
        else:
            convert(child)
    return module
