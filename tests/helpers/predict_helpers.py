"""Shared by the predict tests (CPU and CUDA)."""

from __future__ import annotations

import threading

import torch


class ScaledModel(torch.nn.Module):
    """log-rate = scale * first one-hot column; raises CUDA out-of-memory above ``limit`` rows per call."""

    def __init__(self, scale: float, limit: int = 1 << 30):
        super().__init__()
        self.scale, self.limit = scale, limit

    def forward(self, x):
        if x.shape[0] > self.limit:
            raise torch.cuda.OutOfMemoryError("simulated")
        return self.scale * x[:, :, :1]


class ThreadRecorder(ScaledModel):
    """:class:`ScaledModel` that records the name of the thread of each call (``threads``, in call order)."""

    def __init__(self, scale: float = 3.0):
        super().__init__(scale)
        self.threads: list[str] = []

    def forward(self, x):
        self.threads.append(threading.current_thread().name)
        return super().forward(x)
