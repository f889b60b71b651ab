"""Options every command shares (``--threads``, ``--metrics``, ``--force``) and how ``--threads`` resolves."""

from __future__ import annotations

import os


METRICS_HELP = "write the stage metrics JSON here"
FORCE_HELP = "overwrite an existing --out"


def add_run_options(
    p,
    *,
    threads: str | None = None,
    metrics: bool | str = False,
    force: bool | str = False,
    threads_default: int | None = 0,
) -> None:
    """Add ``--threads``, ``--metrics`` and ``--force``, the options the stages share, with one type, default and
    action each (``p``: a parser or an argument group). Only those asked for are added: ``threads`` is its help
    text (what the threads do differs per command; ``threads_default`` None where 0 is refused, as in predict),
    ``metrics`` / ``force`` are True for the common help or a help text of the command's own."""
    if threads is not None:
        p.add_argument("--threads", type=int, default=threads_default, metavar="N", help=threads)
    if metrics:
        p.add_argument("--metrics", default=None, metavar="JSON", help=METRICS_HELP if metrics is True else metrics)
    if force:
        p.add_argument("--force", action="store_true", help=FORCE_HELP if force is True else force)


def resolve_threads(threads: int | None) -> int:
    """Number of worker threads: ``threads`` if > 0, else the CPUs this process may use."""
    if threads and threads > 0:
        return int(threads)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def options_from(args, cls):
    """A core's options dataclass ``cls`` built from the parsed ``args``: each field from the option of its name (the
    thin commands' step from argparse to the core, which validates the options itself)."""
    import dataclasses

    return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})
