"""The metrics JSON every stage writes (collected by the BENCHMARK stage): wall, CPU, peak RSS, phases, counts."""

from __future__ import annotations

import os
import platform
import resource
import socket
import time
from typing import Any

from .. import __version__
from . import outputs


def process_age_s() -> float | None:
    """Seconds since this process started (Linux ``/proc``; None elsewhere): the interpreter's start-up and
    imports before any stage code ran."""
    try:
        with open("/proc/self/stat") as fh:
            start_ticks = int(fh.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        return round(max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK")), 3)
    except (OSError, ValueError, IndexError):
        return None


class Phases:
    """Wall seconds of a run's consecutive phases: ``mark(name)`` closes the phase that ran since the last mark
    (or since the object was made) under ``name``; ``as_dict()`` gives them in order."""

    def __init__(self) -> None:
        self._t = time.perf_counter()
        self.seconds: dict[str, float] = {}

    def mark(self, name: str) -> None:
        """Close the phase running since the last mark (or the start) under ``name``, adding to a phase of that name."""
        now = time.perf_counter()
        self.seconds[name] = round(self.seconds.get(name, 0.0) + now - self._t, 6)
        self._t = now

    def add(self, name: str, seconds: float) -> None:
        """Record ``seconds`` as phase ``name`` (replacing any earlier value)."""
        self.seconds[name] = round(seconds, 6)

    def as_dict(self) -> dict[str, float]:
        """The phases and their seconds, in order."""
        return dict(self.seconds)


def peak_rss_bytes() -> int:
    """Peak resident set size of this process and its waited-for children, in bytes (Linux: ru_maxrss is KiB)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return int(max(own, children) * 1024)


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and its waited-for children."""
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


#: environment variable through which whatever launched this command names the task (recorded as ``task_name``)
TASK_NAME_ENV = "CHROMAFLOW_TASK_NAME"


class StageMetrics:
    """Measures one stage run and writes the metrics JSON every stage shares.

    Common fields: ``stage``, ``wall_s``, ``cpu_s``, ``peak_rss_bytes``, ``device``, ``threads``,
    ``started``/``finished`` (UTC ISO), ``host``, ``chromaflow_version``, ``python``, and ``task_name`` where the
    launcher named the task in the environment (:data:`TASK_NAME_ENV`; a report joins its rows to the launcher's
    own records by that name, absent when unset). Stages add their
    counts with :meth:`set` (``bp``, ``subsequences``, ``records``, ``data_wait_fraction``, ...);
    ``bp_per_s`` and ``subsequences_per_s`` are derived from ``wall_s`` when the counts are present.

    Use ``with StageMetrics("fasta2h5", path) as m: ...; m.set(bp=...)``. The JSON is written (atomically)
    only when the block succeeds and ``path`` is not None.
    """

    def __init__(self, stage: str, path: str | os.PathLike | None, **fields: Any):
        self.stage = stage
        self.path = path
        self.fields: dict[str, Any] = {"device": "cpu", "threads": None}
        self.fields.update(fields)

    def set(self, **fields: Any) -> None:
        """Add or replace fields of the metrics."""
        self.fields.update(fields)

    def __enter__(self) -> "StageMetrics":
        self._t0 = time.perf_counter()
        self._c0 = cpu_seconds()
        self._started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            return
        self.result = self.finish()
        if self.path is not None:
            outputs.write_json_atomic(self.path, self.result)  # looked up at call time (tests replace it)

    def finish(self) -> dict[str, Any]:
        """The metrics as they stand now: the common fields, the stage's own, and ``bp_per_s`` /
        ``subsequences_per_s`` where those counts are set."""
        wall = time.perf_counter() - self._t0
        out: dict[str, Any] = {
            "stage": self.stage,
            "chromaflow_version": __version__,
            "started": self._started,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "wall_s": round(wall, 6),
            "cpu_s": round(cpu_seconds() - self._c0, 6),
            "peak_rss_bytes": peak_rss_bytes(),
            "host": socket.gethostname(),
            "python": platform.python_version(),
        }
        if os.environ.get(TASK_NAME_ENV):
            out["task_name"] = os.environ[TASK_NAME_ENV]
        out.update(self.fields)
        if out.get("bp") is not None and wall > 0:
            out["bp_per_s"] = out["bp"] / wall
        if out.get("subsequences") is not None and wall > 0:
            out["subsequences_per_s"] = out["subsequences"] / wall
        return out
