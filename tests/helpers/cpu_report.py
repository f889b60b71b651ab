"""``--cpu-report FILE``: where the suite's CPU goes, test by test (a pytest plugin; tests/conftest.py loads it).

The suite keeps both cores busy (docs/performance.md), so its wall follows its CPU seconds, and a cut is found by
asking which tests spend them. pytest's ``--durations`` gives wall seconds, which on two busy cores say little:
a test waiting on a container start looks as long as one training a model. With this option every test's CPU
seconds are recorded -- its worker's own and those of the child processes it waited for (a command, a Nextflow run
and every task it ran: ``RUSAGE_CHILDREN`` counts a reaped child with its own reaped descendants) -- beside its
wall seconds, and the controller writes them into one JSON file and prints the files that spent the most. A child is
charged to the test during which it is reaped: a fixture's set-up to the first test that asks for it, and the
background nf-test run (started at collection) to ``test_nftest.py``'s first case, which waits for it.

What no test waits for is not attributed: processes another daemon reaps (podman's containers under conmon, SLURM's
jobs under slurmd), collection, and anything else on the machine. The report gives the machine's busy CPU seconds
over the whole run (``/proc/stat``) beside the attributed sum, so the part left over is known.

Usage: ``scripts/test --cpu-report /tmp/cpu.json`` (any pytest command line of the suite).
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections import defaultdict
from pathlib import Path

import pytest

#: how many files the terminal summary lists
TOP_FILES = 15


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-report",
        metavar="JSON",
        default=None,
        help="write every test's CPU seconds (its worker's and its children's) and wall seconds here, and list the "
        "files that spent the most (tests/helpers/cpu_report.py)",
    )


def process_cpu() -> tuple[float, float]:
    """(own, reaped children's) CPU seconds, user + system, of this process so far."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def machine_cpu() -> float:
    """Busy CPU seconds of the whole machine since boot, all CPUs (``/proc/stat``: user, nice, system, irq and
    softirq; not idle, iowait, or steal, the time the hypervisor gave to other guests); 0.0 where there is no
    ``/proc/stat``."""
    try:
        with open("/proc/stat") as fh:
            user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fh.readline().split()[1:8])
    except OSError:
        return 0.0
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def by_file(rows: list[dict]) -> list[dict]:
    """The rows summed per test file, most CPU seconds first: ``{"file", "tests", "cpu_s", "children_cpu_s",
    "wall_s"}``."""
    acc: dict[str, dict] = defaultdict(lambda: {"tests": 0, "cpu_s": 0.0, "children_cpu_s": 0.0, "wall_s": 0.0})
    for r in rows:
        a = acc[r["nodeid"].split("::", 1)[0]]
        a["tests"] += 1
        for k in ("cpu_s", "children_cpu_s", "wall_s"):
            a[k] += r[k]
    sums = ("cpu_s", "children_cpu_s", "wall_s")
    files = [{"file": f, "tests": a["tests"], **{k: round(a[k], 2) for k in sums}} for f, a in acc.items()]
    return sorted(files, key=lambda f: -f["cpu_s"])


class CpuReport:
    """The plugin object of one process: a worker (``worker`` its xdist id) records its tests' rows and writes them
    beside ``path``; the controller (``worker`` None) merges them (or, without xdist, records them itself)."""

    def __init__(self, path: Path, worker: str | None):
        self.path, self.worker = path, worker
        self.rows: list[dict] = []
        self.machine0, self.wall0 = machine_cpu(), time.monotonic()
        self.report: dict | None = None
        if worker is None:  # parts an interrupted run left would be merged into this one's (workers start later)
            for part in self.parts():
                part.unlink()

    def parts(self) -> list[Path]:
        """The workers' part files beside ``path``."""
        return sorted(self.path.parent.glob(f"{self.path.name}.*.part"))

    def part(self, worker: str) -> Path:
        return self.path.with_name(f"{self.path.name}.{worker}.part")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem):
        (own0, kids0), t0 = process_cpu(), time.monotonic()
        yield
        (own1, kids1), t1 = process_cpu(), time.monotonic()
        cpu, kids = (own1 - own0) + (kids1 - kids0), kids1 - kids0
        self.rows.append(
            {
                "nodeid": item.nodeid,
                "worker": self.worker or "main",
                "cpu_s": round(cpu, 3),
                "children_cpu_s": round(kids, 3),
                "wall_s": round(t1 - t0, 3),
            }
        )

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.worker is not None:
            self.part(self.worker).write_text(json.dumps(self.rows))
            return
        rows = list(self.rows)
        for part in self.parts():
            rows += json.loads(part.read_text())
            part.unlink()
        machine = machine_cpu() - self.machine0
        self.report = {
            "wall_s": round(time.monotonic() - self.wall0, 2),
            "machine_busy_cpu_s": round(machine, 2),
            "attributed_cpu_s": round(sum(r["cpu_s"] for r in rows), 2),
            "files": by_file(rows),
            "tests": sorted(rows, key=lambda r: -r["cpu_s"]),
        }
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.report, indent=1) + "\n")
        tmp.replace(self.path)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.report is None:
            return
        r = self.report
        tr = terminalreporter
        tr.section("CPU seconds by test file (--cpu-report)")
        tr.write_line(
            f"{len(r['tests'])} tests: {r['attributed_cpu_s']:.0f} CPU-s attributed of the machine's "
            f"{r['machine_busy_cpu_s']:.0f} busy CPU-s over {r['wall_s']:.0f} s of wall; all rows in {self.path}"
        )
        for f in r["files"][:TOP_FILES]:
            tr.write_line(f"{f['cpu_s']:9.1f} CPU-s {f['wall_s']:8.1f} s wall {f['tests']:5d} tests  {f['file']}")


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("--cpu-report", None)
    if path:
        report = Path(path).resolve()
        if not report.parent.is_dir() or report.is_dir():
            what = "is a folder" if report.is_dir() else f"its folder {report.parent} does not exist"
            raise pytest.UsageError(f"--cpu-report {path}: {what}")
        worker = getattr(config, "workerinput", {}).get("workerid")
        config.pluginmanager.register(CpuReport(report, worker), "chromaflow_cpu_report")
