"""Progress on a terminal, silence elsewhere (Nextflow task logs)."""

from __future__ import annotations

import os
import sys
import time


class Progress:
    """A small progress bar on stderr, drawn only when stderr is a terminal.

    In Nextflow task logs (stderr is a file) it prints nothing. ``CHROMAFLOW_PROGRESS=1`` forces it
    on, ``=0`` off. The bar redraws at most ~5 times per second, so it costs nothing in hot loops.
    ``total=None``: the amount is not known ahead (an unsharded ``predict --fasta`` learns its rows as it reads):
    a count and a rate, no bar.
    """

    def __init__(self, total: float | None, desc: str, unit: str = "", enabled: bool | None = None):
        env = os.environ.get("CHROMAFLOW_PROGRESS")
        if enabled is None:
            enabled = env == "1" if env in ("0", "1") else sys.stderr.isatty()
        self.enabled = enabled
        self.known = total is not None
        self.total = max(float(total), 1e-12) if total is not None else float("inf")
        self.desc = desc
        self.unit = unit
        self.done = 0.0
        self.t0 = time.perf_counter()
        self._last = 0.0

    def update(self, n: float = 1) -> None:
        """Count ``n`` more done and redraw (at most every 0.2 s, and at the end): a bar with the percentage and
        rate, or a count and rate when the total is unknown."""
        self.done += n
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._last < 0.2 and self.done < self.total:
            return
        self._last = now
        rate = self.done / max(now - self.t0, 1e-9)
        if not self.known:
            sys.stderr.write(f"\r{self.desc} {_human(self.done)}{self.unit} {_human(rate)}{self.unit}/s ")
            sys.stderr.flush()
            return
        frac = min(self.done / self.total, 1.0)
        width = 30
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        sys.stderr.write(f"\r{self.desc} [{bar}] {frac * 100:5.1f}% {_human(rate)}{self.unit}/s ")
        sys.stderr.flush()

    def close(self) -> None:
        """Draw the final state and end the line (when enabled)."""
        if self.enabled:
            self._last = 0.0
            self.update(0)
            sys.stderr.write("\n")
            sys.stderr.flush()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _human(x: float) -> str:
    for unit in ("", "k", "M", "G", "T"):
        if abs(x) < 1000:
            return f"{x:.1f}{unit}"
        x /= 1000.0
    return f"{x:.1f}P"
