"""Units of the benchmark report: every quantity carries its unit in its name (bp, seconds, hours, Gbp).

All unit arithmetic of ``chromaflow benchmark-report`` is in these small functions, each covered by hand-computed
unit tests (tests/report/test_benchreport_units.py).
"""

from __future__ import annotations

import math
from typing import Any, Iterable

BP_PER_GBP = 1e9
BP_PER_MBP = 1e6
SECONDS_PER_HOUR = 3600.0
DATA_WAIT_ALARM = 0.10  # LightlyTrain's threshold: > 10 % of the loop spent waiting for data

NA = "n/a"


def _num(x: Any) -> float | None:
    """``x`` as a finite float, else None (missing, bool, NaN, inf, text)."""
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _positive(x: Any) -> float | None:
    """``x`` as a float if it is a finite number > 0, else None (missing, zero, negative, NaN, text)."""
    v = _num(x)
    return v if v is not None and v > 0 else None


def rate_bp_per_s(bp: float | None, seconds: float | None) -> float | None:
    """Throughput in bp/s = bp / seconds; None when either is missing or not > 0."""
    b, s = _positive(bp), _positive(seconds)
    return b / s if b is not None and s is not None else None


def seconds_for_bp(bp: float, bp_per_s: float | None) -> float | None:
    """Seconds to process ``bp`` base pairs at ``bp_per_s``; None when the rate is missing/zero."""
    r = _positive(bp_per_s)
    b = _positive(bp)
    return b / r if r is not None and b is not None else None


def gbp_to_bp(gbp: float) -> float:
    """Gbp as bp."""
    return float(gbp) * BP_PER_GBP


def seconds_to_hours(seconds: float | None) -> float | None:
    """Seconds as hours; None stays None."""
    return None if seconds is None else seconds / SECONDS_PER_HOUR


def hours_per_gbp(bp_per_s: float | None) -> float | None:
    """Hours for one worker to process 1 Gbp: 1e9 bp / (bp/s) / 3600 s/h."""
    return seconds_to_hours(seconds_for_bp(BP_PER_GBP, bp_per_s))


def genome_hours(genome_gbp: float, bp_per_s: float | None, strands: int = 1) -> float | None:
    """Hours for one worker to process one genome of ``genome_gbp`` Gbp: G·1e9 bp · s / r / 3600.

    ``strands`` (s) is how many bp the stage processes per genome bp: 2 for prediction, which runs on both
    strands (its ``bp`` and ``bp/s`` count both), 1 for the other stages.
    """
    return seconds_to_hours(seconds_for_bp(gbp_to_bp(genome_gbp) * strands, bp_per_s))


def fleet_hours(
    n_genomes: float, genome_gbp: float, bp_per_s: float | None, workers: float, strands: int = 1
) -> float | None:
    """Wall hours for ``n_genomes`` genomes spread over ``workers`` identical workers: N·t_genome / K.

    No ceiling: assumes the work splits evenly (shards), ignores queueing and per-task start-up.
    None when the rate is missing/zero or ``workers`` is not > 0.
    """
    t = genome_hours(genome_gbp, bp_per_s, strands)
    k = _positive(workers)
    n = float(n_genomes)
    if t is None or k is None or n < 0:
        return None
    return n * t / k


def fmt_hours(h: float | None) -> str:
    """Hours with 4 significant digits, or ``n/a``."""
    if h is None:
        return NA
    return f"{h:.4g} h"


def fmt_rate(bp_per_s: float | None) -> str:
    """A bp/s rate as text in Mbp/s (4 significant digits); the n/a mark for None."""
    if bp_per_s is None:
        return NA
    return f"{bp_per_s / BP_PER_MBP:.4g} Mbp/s"


def fmt_bytes(n: float | None) -> str:
    """A byte count as text in the first of B, KiB, MiB, GiB, TiB in which it is below 1024 (at most TiB); the n/a
    mark for None."""
    if n is None:
        return NA
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024.0
    return f"{n:.1f} TiB"  # pragma: no cover


def fmt_s(s: float | None) -> str:
    """Seconds as text (3 significant digits); the n/a mark for None."""
    return NA if s is None else f"{s:.3g} s"


def linear_fit(xs: Iterable[float], ys: Iterable[float]) -> dict | None:
    """Least-squares ``y = slope·x + intercept`` with R²; None with fewer than 2 distinct x values."""
    pts = [(float(x), float(y)) for x, y in zip(xs, ys) if x is not None and y is not None]
    if len({x for x, _ in pts}) < 2:
        return None
    n = len(pts)
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    sxy = sum((x - mx) * (y - my) for x, y in pts)
    slope = sxy / sxx
    intercept = my - slope * mx
    ss_tot = sum((y - my) ** 2 for _, y in pts)
    ss_res = sum((y - (slope * x + intercept)) ** 2 for x, y in pts)
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    return {"slope_s_per_subsequence": slope, "intercept_s": intercept, "r2": r2, "n": n}
