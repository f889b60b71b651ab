"""Parts and shards: ``I/N`` options (``--shard``, ``--targets-chunk``) and the contiguous row ranges they name."""

from __future__ import annotations

import re

from .errors import ChromaflowError


def parse_part(text: str | None, option: str) -> tuple[int, int] | None:
    """``"I/N"`` (1-based part I of N, as in ``--shard`` or ``--targets-chunk``) -> (i, n); None -> None.

    Anything else is a one-line :class:`ChromaflowError` naming ``option``.
    """
    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m:
        raise ChromaflowError(f"{option} {text!r}: expected I/N with 1 <= I <= N, e.g. 1/4")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 1 <= i <= n:
        raise ChromaflowError(f"{option} {text!r}: expected I/N with 1 <= I <= N (parts are numbered from 1)")
    return i, n


def part_bounds(i: int, n: int, total: int) -> tuple[int, int]:
    """Items [start, end) of 1-based part i of n over ``total`` items: contiguous, sizes differ by at most one."""
    return (i - 1) * total // n, i * total // n


def shard_list(n: int, total: int) -> list[dict]:
    """The shards of a plan (predict-plan, variant-plan): ``shard`` as ``--shard`` takes it, ``index``/``count`` and
    the [start, end) ``rows`` of each (:func:`part_bounds`)."""
    return [
        {"shard": f"{i}/{n}", "index": i, "count": n, "rows": list(part_bounds(i, n, total))} for i in range(1, n + 1)
    ]
