"""The benchmarks' one process timer: run a command as a child process and say what it cost.

Standard library only (psutil is imported only by :class:`TreeSampler`), so the harness's runner
(``runner.py``, started as ``python -S -E -s``) uses it as the benchmark scripts do.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time


def loadavg() -> list[float]:
    """The 1-, 5- and 15-minute load averages (rounded), or [] where the system has none."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


class TreeSampler:
    """Samples the summed RSS of a process tree (psutil) while it runs: the peak memory of tools that fork
    workers (Helixer's multiprocessing, dask), which ``ru_maxrss`` (largest single process) does not show.
    Also keeps the last CPU seconds seen of every descendant (``cpu_s``): a lower bound of the tree's CPU time
    that counts workers nobody waits for (e.g. DDP ranks), which ``RUSAGE_CHILDREN`` misses."""

    def __init__(self, pid: int, interval: float = 0.05, include_root: bool = False):
        self.pid, self.interval, self.include_root = pid, interval, include_root
        self.peak = 0
        self.nproc = 1
        self._cpu: dict[tuple[int, float], float] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self._stop.is_set():
            try:
                procs = root.children(recursive=True)  # the runner itself is not counted ...
                if self.include_root:  # ... unless it is the tool
                    procs.append(root)
            except psutil.Error:
                return
            rss = 0
            for p in procs:
                try:
                    rss += p.memory_info().rss
                    t = p.cpu_times()
                    self._cpu[(p.pid, p.create_time())] = t.user + t.system
                except psutil.Error:
                    pass
            self.peak = max(self.peak, rss)
            self.nproc = max(self.nproc, len(procs))
            self._stop.wait(self.interval)

    @property
    def cpu_s(self) -> float:
        return sum(self._cpu.values())

    def __enter__(self) -> "TreeSampler":
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join(timeout=5)


class _Drain(threading.Thread):
    """Reads a child's pipe to its end (so a chatty child never blocks on a full pipe while it is timed)."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream, self.data = stream, b""
        self.start()

    def run(self) -> None:
        self.data = self.stream.read()
        self.stream.close()


def _rusage_record(wall: float, ru, exit_status: int, load0) -> dict:
    """:func:`measure`'s record of a reaped child: wall, CPU, peak RSS, exit, page faults, load before."""
    return {
        "wall_s": wall,
        "user_s": ru.ru_utime,
        "sys_s": ru.ru_stime,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "peak_rss_bytes": ru.ru_maxrss * 1024,
        "exit": exit_status,
        "minflt": ru.ru_minflt,
        "majflt": ru.ru_majflt,
        "load_before": load0[0] if load0 else None,
    }


def measure(
    cmd: list,
    *,
    cwd=None,
    env: dict | None = None,
    stdin=subprocess.DEVNULL,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.PIPE,
    sample_tree: bool = False,
    check: bool = False,
) -> dict:
    """Run ``cmd`` as a child and reap it with ``os.wait4``.

    Returns ``wall_s`` (perf_counter), ``user_s``/``sys_s``/``cpu_s`` (the child and every descendant it waited
    for), ``peak_rss_bytes`` (``ru_maxrss``: the largest single process of that tree), ``minflt``/``majflt``,
    ``load_before``/``load_after`` (1-minute load average), ``exit`` (the exit status; -N for signal N) and, for
    a stream given as ``subprocess.PIPE``, its bytes as ``stdout``/``stderr``. With ``sample_tree`` the tree is
    also sampled (:class:`TreeSampler`, the child counted): CPU and peak RSS are the larger of the two, and
    ``processes`` is the most processes seen at once. ``stdout``/``stderr`` take what ``subprocess.Popen`` takes.
    Raises OSError when the command cannot be started, and with ``check`` SystemExit when it fails (naming the
    command, with the end of its stderr when that was piped).
    """
    load0 = loadavg()
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(c) for c in cmd], cwd=cwd, env=env, stdin=stdin, stdout=stdout, stderr=stderr)
    drains = {name: _Drain(s) for name, s in (("stdout", proc.stdout), ("stderr", proc.stderr)) if s is not None}
    sampler = TreeSampler(proc.pid, include_root=True) if sample_tree else None
    if sampler:
        sampler.__enter__()
    try:
        _, status, ru = os.wait4(proc.pid, 0)
    finally:
        if sampler:
            sampler.__exit__()
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    rec = _rusage_record(wall, ru, proc.returncode, load0)
    for name, d in drains.items():
        d.join()
        rec[name] = d.data
    la = loadavg()
    rec["load_after"] = la[0] if la else None
    if sampler:
        rec.update(
            cpu_s=max(rec["cpu_s"], sampler.cpu_s),
            peak_rss_bytes=max(rec["peak_rss_bytes"], sampler.peak),
            processes=sampler.nproc,
        )
    if check and rec["exit"] != 0:
        err = (rec.get("stderr") or b"").decode(errors="replace").strip()[-3000:]
        raise SystemExit(f"failed (exit {rec['exit']}): {' '.join(str(c) for c in cmd)}" + (f"\n{err}" if err else ""))
    return rec
