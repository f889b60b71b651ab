"""The ``scale`` stage (issue 30 §2): the real pipeline on synthetic assemblies, measured from outside.

    python -m benchmarks.harness.scale run     RUNDIR SHEET [--shard-rows N] [--extra ARG ...]
    python -m benchmarks.harness.scale resume  RUNDIR SHEET [--shard-rows N]

``run`` launches ``nextflow run main.nf -profile test`` (the tiny seeded test model, the local executor) on SHEET
with ``--predict_from fasta --save_h5 false`` and prediction sharded by ``--predict_shard_rows``, in RUNDIR (its
own ``.nextflow/`` and ``work/``, outputs in ``RUNDIR/out``). A background thread samples every second the Nextflow
driver's RSS and CPU (the JVM running ``nextflow.cli.Launcher``, read from /proc by psutil) and the disk allocated
under ``work/`` and the outdir. After the run the trace (the pipeline's own, every field incl. peak_rss,
realtime, %cpu, rchar/wchar) is parsed into per-process figures, the published outputs are digested, and
everything goes to ``RUNDIR/scale.json``.

``resume`` does the same run, but kills the driver's whole process group with SIGKILL once PREDICT tasks are
running (at least one shard finished in the driver's trace, one running), then runs it once more with
``-resume``; the record holds both runs and which PREDICT shards each ran (from the traces).

The bounds (``check_*``) are checked by the harness from these measured numbers; a failed bound fails the case.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from chromaflow.report.trace import parse_duration_s, parse_memory_bytes, parse_percent
from chromaflow.report.trace import read_trace as read_trace_rows

ROOT = Path(__file__).resolve().parents[2]
GiB = 1 << 30
MiB = 1 << 20

#: per-task peak RSS bound at full size (issue 30 §2)
TASK_RSS_BOUND = 2 * GiB
#: processes whose output must be held in memory, so their peak RSS grows with the input, and why. They are
#: exempt from the 2 GiB and the flatness bounds (their figures are still recorded and shown)
IN_MEMORY: dict[str, str] = {
    "GENIE3_MERGE": "the whole links table is sorted by importance before it is written (one row per regulator x "
    "target pair: grows with the expression matrix, not the genome)",
}
#: flat in genome size: a process's peak RSS on the large genome may exceed the small genome's by this factor
#: plus this many bytes (interpreter and library start-up are the same; the slack absorbs allocator noise)
FLAT_FACTOR, FLAT_SLACK = 1.25, 128 * MiB
#: work/ disk: outputs + one shard's temporaries + this slack (Nextflow's own files per task, logs)
DISK_SLACK_FRACTION, DISK_SLACK = 0.05, 64 * MiB
#: free disk a size case needs in its work dir, per bp of the genome: work/ and --outdir at their peak hold the
#: outputs twice (the tracks in their tasks' folders and copied to --outdir; the predictions once in each), 10.9
#: bytes a bp at 1.2 Gbp (`4b8fc18`, peak_work_plus_outdir_bytes), + 10 %. A 4 Gbp run started with 41 GiB free
#: (and an experiment beside it) ran out of space after PREDICT (2026-11-28): its 1 h 26 min of PREDICT were lost.
DISK_NEED_PER_BP = 12.0


# --------------------------------------------------------------------------------------------------
# the trace
# --------------------------------------------------------------------------------------------------
def _strict(value, text: str | None, what: str):
    """The package's parse of a trace cell, but a cell that is not a figure raises (a bound must not read garbage
    as 0): None only for Nextflow's empty cells ("-" or nothing)."""
    if value is None and (text or "").strip() not in ("", "-"):
        raise ValueError(f"not a trace {what}: {text!r}")
    return value


def parse_size(text: str) -> int | None:
    """Nextflow's trace memory/IO figure ("1.2 GB", "345 MB", "0", "-", or raw bytes) in bytes (the package's parser,
    chromaflow.report.trace, rounded to whole bytes)."""
    v = _strict(parse_memory_bytes(text), text, "size")
    return None if v is None else int(round(v))


def parse_duration(text: str) -> float | None:
    """Nextflow's trace duration ("1h 2m 3s", "4.5s", "120ms", "-", or raw milliseconds) in seconds (the package's
    parser, chromaflow.report.trace)."""
    return _strict(parse_duration_s(text), text, "duration")


def parse_pct(text: str) -> float | None:
    """Nextflow's trace percentage ("98.5%", "-") (the package's parser, chromaflow.report.trace)."""
    return _strict(parse_percent(text), text, "percentage")


def read_trace(path: Path) -> list[dict]:
    """Rows of a Nextflow trace file (the package's reader, chromaflow.report.trace: a row being written is left
    out); rows without a status are dropped."""
    rows, _note = read_trace_rows(path)
    return [r for r in rows if r.get("status")]


def process_name(row: dict) -> str:
    """CHROMAFLOW:REPORTING:MULTIQC -> MULTIQC."""
    return row["process"].split(":")[-1]


def trace_rows(rows: list[dict]) -> list[dict]:
    """What the record keeps of each trace row: enough for check_resume."""
    return [{k: r.get(k) for k in ("process", "name", "status", "exit")} for r in rows]


def summarize_trace(rows: list[dict]) -> dict[str, dict]:
    """Per process: tasks completed / cached / failed, summed wall (realtime) and CPU (realtime x %cpu) seconds of
    the completed tasks, the largest peak RSS and realtime of one task, summed rchar/wchar."""
    out: dict[str, dict] = {}
    for r in rows:
        p = out.setdefault(
            process_name(r),
            {
                "tasks": 0,
                "cached": 0,
                "failed": 0,
                "wall_s": 0.0,
                "cpu_s": 0.0,
                "max_task_wall_s": 0.0,
                "peak_rss_bytes": 0,
                "rchar_bytes": 0,
                "wchar_bytes": 0,
                "max_wchar_bytes": 0,
            },
        )
        st = r["status"]
        if st == "CACHED":
            p["cached"] += 1
            continue
        if st != "COMPLETED":
            p["failed"] += 1
            continue
        p["tasks"] += 1
        wall = parse_duration(r.get("realtime")) or 0.0
        p["wall_s"] += wall
        p["cpu_s"] += wall * (parse_pct(r.get("%cpu")) or 0.0) / 100
        p["max_task_wall_s"] = max(p["max_task_wall_s"], wall)
        p["peak_rss_bytes"] = max(p["peak_rss_bytes"], parse_size(r.get("peak_rss")) or 0)
        w = parse_size(r.get("wchar")) or 0
        p["rchar_bytes"] += parse_size(r.get("rchar")) or 0
        p["wchar_bytes"] += w
        p["max_wchar_bytes"] = max(p["max_wchar_bytes"], w)
    for p in out.values():
        p["wall_s"], p["cpu_s"] = round(p["wall_s"], 3), round(p["cpu_s"], 3)
    return out


# --------------------------------------------------------------------------------------------------
# the bounds: each returns a list of failures (one line each); empty = the bound holds
# --------------------------------------------------------------------------------------------------
def check_task_memory(processes: dict[str, dict], bound: int = TASK_RSS_BOUND) -> list[str]:
    return [
        f"{name}: peak RSS {p['peak_rss_bytes'] / GiB:.2f} GiB > {bound / GiB:g} GiB per task"
        for name, p in sorted(processes.items())
        if name not in IN_MEMORY and p["peak_rss_bytes"] > bound
    ]


def check_flat(small: dict[str, dict], large: dict[str, dict]) -> list[str]:
    """Per-task peak RSS flat in genome size: large <= small x FLAT_FACTOR + FLAT_SLACK for every process that ran
    on both (and is not an in-memory stage)."""
    bad = []
    for name in sorted(set(small) & set(large)):
        if name in IN_MEMORY or not small[name]["tasks"] or not large[name]["tasks"]:
            continue
        a, b = small[name]["peak_rss_bytes"], large[name]["peak_rss_bytes"]
        if b > a * FLAT_FACTOR + FLAT_SLACK:
            bad.append(
                f"{name}: peak RSS {b / MiB:.0f} MiB on the large genome vs {a / MiB:.0f} MiB on the small "
                f"(> x{FLAT_FACTOR:g} + {FLAT_SLACK // MiB} MiB: not flat)"
            )
    return bad


def disk_allowance(outputs_bytes: int, shard_temp_bytes: int) -> int:
    base = outputs_bytes + shard_temp_bytes
    return int(base + max(DISK_SLACK, DISK_SLACK_FRACTION * base))


def check_free_disk(folder, total_bp: int, label: str) -> None:
    """Raise core.NotRunnable when ``folder``'s file system has less free space than a run of ``total_bp`` needs
    (:data:`DISK_NEED_PER_BP`): refused before it starts, not hours later."""
    import shutil

    from .core import NotRunnable

    need = int(total_bp * DISK_NEED_PER_BP)
    free = shutil.disk_usage(folder).free
    if free < need:
        raise NotRunnable(
            f"{folder}: {free / GiB:.1f} GiB free, the {label} run needs about {need / GiB:.1f} GiB "
            f"(work/ and the outdir at their peak, {DISK_NEED_PER_BP:g} bytes a bp); not started"
        )


def check_disk(peak_work_bytes: int, outputs_bytes: int, shard_temp_bytes: int) -> list[str]:
    allow = disk_allowance(outputs_bytes, shard_temp_bytes)
    if peak_work_bytes > allow:
        return [
            f"work/ peaked at {peak_work_bytes / MiB:.0f} MiB > outputs {outputs_bytes / MiB:.0f} MiB + one "
            f"shard's temporaries {shard_temp_bytes / MiB:.0f} MiB + slack = {allow / MiB:.0f} MiB"
        ]
    return []


def check_resume(killed: list[dict], resumed: list[dict], process: str = "PREDICT") -> tuple[list[str], dict]:
    """Only the shards the killed run did not finish rerun: the resumed run's completed (not cached) ``process``
    tasks are exactly those the killed run's trace does not list as COMPLETED. Returns (failures, counts)."""

    def names(rows, statuses):
        return {r["name"] for r in rows if process_name(r) == process and r["status"] in statuses}

    done_before = names(killed, {"COMPLETED"})
    rerun = names(resumed, {"COMPLETED"})
    cached = names(resumed, {"CACHED"})
    total = rerun | cached
    counts = {
        "shards": len(total),
        "finished_before_kill": len(done_before),
        "rerun": len(rerun),
        "cached": len(cached),
        "unfinished_at_kill": len(total - done_before),
    }
    bad = []
    if not done_before:
        bad.append(
            f"no {process} shard had finished when the driver was killed: nothing shows that finished shards are kept"
        )
    if rerun & done_before:
        bad.append(
            f"{len(rerun & done_before)} {process} shard(s) finished before the kill ran again: "
            + ", ".join(sorted(rerun & done_before)[:3])
        )
    if rerun != total - done_before:
        bad.append(f"{process} shards rerun ({len(rerun)}) are not the unfinished ones ({len(total - done_before)})")
    return bad, counts


# --------------------------------------------------------------------------------------------------
# outputs: digests of the published per-assembly files (contents, not container bytes)
# --------------------------------------------------------------------------------------------------
#: outdir folders that are not per-assembly results (reports carry dates and run names)
NOT_OUTPUTS = {"pipeline_info", "multiqc", "benchmark", "test_model"}
#: the data files compared (browser sessions, hubs and JSON summaries name paths of their own run)
DATA_SUFFIXES = {".h5", ".bw", ".bb", ".narrowPeak", ".bed", ".gz", ".tsv", ".sizes"}


def _h5_digest(path: Path) -> str:
    import h5py

    from chromaflow.genome.h5rows import ROW_BLOCK

    h = hashlib.md5()
    with h5py.File(path, "r") as f:
        names: list[str] = []
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        for n in sorted(names):
            d = f[n]
            h.update(f"{n}|{d.dtype.str}|{d.shape}|".encode())
            if d.ndim and d.shape[0] and d.dtype.kind != "O":
                # slices of at most ~64 MiB and ROW_BLOCK rows (seqids/start_ends have one chunk per row, and HDF5
                # keeps a record per chunk a read touches: a whole 1.2M-row read took ~4.8 GB); the same bytes
                row = d.dtype.itemsize * math.prod(d.shape[1:])
                step = max(1, min(ROW_BLOCK, (64 << 20) // max(row, 1)))
                for s in range(0, d.shape[0], step):
                    h.update(d[s : s + step].tobytes())
            else:
                v = d[()]
                h.update(v.tobytes() if hasattr(v, "tobytes") else repr(v).encode())
    return h.hexdigest()


def file_digest(path: Path) -> str:
    """md5 of a published file's contents: h5 datasets (names, types, shapes, values), gzip text decompressed,
    anything else (bigWig, bigBed, BED, TSV) byte for byte."""
    if path.suffix == ".h5":
        return "h5:" + _h5_digest(path)
    h = hashlib.md5()
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def output_digests(outdir: Path) -> dict[str, str]:
    out = {}
    for p in sorted(outdir.rglob("*")):
        rel = p.relative_to(outdir)
        if p.is_file() and rel.parts[0] not in NOT_OUTPUTS and p.suffix in DATA_SUFFIXES:
            out[str(rel)] = file_digest(p)
    return out


def unreadable_browser_files(outdir: Path) -> list[str]:
    """Published bigWig/bigBed files that pyBigWig (libBigWig, as IGV-like readers) cannot open or that list no
    chromosome: a digest compares bytes between runs, not whether a browser reads them."""
    import pyBigWig

    bad = []
    for p in sorted(outdir.rglob("*")):
        if p.suffix in (".bw", ".bb") and p.is_file():
            try:
                f = pyBigWig.open(str(p))
            except RuntimeError:
                f = None
            if f is None:
                bad.append(str(p.relative_to(outdir)))
                continue
            try:
                if not f.chroms():
                    bad.append(str(p.relative_to(outdir)))
            finally:
                f.close()
    return bad


def compare_digests(
    a: dict[str, str], b: dict[str, str], names: tuple[str, str] = ("the resumed run", "the uninterrupted run")
) -> list[str]:
    bad = [f"{k}: only in {names[0] if k in a else names[1]}" for k in sorted(set(a) ^ set(b))]
    bad += [f"{k}: contents differ" for k in sorted(set(a) & set(b)) if a[k] != b[k]]
    return bad


# --------------------------------------------------------------------------------------------------
# sampling: the driver JVM and the disk
# --------------------------------------------------------------------------------------------------
def tree_bytes(path: Path) -> int:
    """Disk allocated under ``path`` (st_blocks, not apparent sizes; hard links counted once)."""
    total, seen = 0, set()
    stack = [str(path)]
    while stack:
        try:
            it = os.scandir(stack.pop())
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                    elif e.is_file(follow_symlinks=False):
                        st = e.stat(follow_symlinks=False)
                        if st.st_nlink > 1:
                            if st.st_ino in seen:
                                continue
                            seen.add(st.st_ino)
                        total += st.st_blocks * 512
                except OSError:
                    continue
    return total


class Sampler(threading.Thread):
    """Every ``interval`` s: the Nextflow driver's RSS and CPU, and the disk under work/ and the outdir."""

    def __init__(self, pid: int, work: Path, outdir: Path, interval: float = 1.0):
        super().__init__(daemon=True)
        self.pid, self.work, self.outdir, self.interval = pid, work, outdir, interval
        self.stop = threading.Event()
        self.driver_peak_rss = 0
        self.driver_cpu_s = 0.0
        self.peak_work = self.peak_outdir = self.peak_total = 0
        self.samples = 0
        self.driver_pid: int | None = None

    def _driver(self):
        import psutil

        try:
            root = psutil.Process(self.pid)
            for p in [root, *root.children(recursive=True)]:
                try:
                    if "nextflow.cli.Launcher" in " ".join(p.cmdline()):
                        return p
                except psutil.Error:
                    continue
        except psutil.Error:
            return None
        return None

    def run(self) -> None:
        import psutil

        driver = None
        while not self.stop.is_set():
            if driver is None:
                driver = self._driver()
                if driver is not None:
                    self.driver_pid = driver.pid
            if driver is not None:
                try:
                    self.driver_peak_rss = max(self.driver_peak_rss, driver.memory_info().rss)
                    t = driver.cpu_times()
                    self.driver_cpu_s = t.user + t.system
                except psutil.Error:
                    pass
            w, o = tree_bytes(self.work), tree_bytes(self.outdir)
            self.peak_work, self.peak_outdir = max(self.peak_work, w), max(self.peak_outdir, o)
            self.peak_total = max(self.peak_total, w + o)
            self.samples += 1
            self.stop.wait(self.interval)

    def record(self) -> dict:
        return {
            "driver_peak_rss_bytes": self.driver_peak_rss,
            "driver_cpu_s": round(self.driver_cpu_s, 2),
            "peak_work_bytes": self.peak_work,
            "peak_outdir_bytes": self.peak_outdir,
            "peak_work_plus_outdir_bytes": self.peak_total,
            "samples": self.samples,
        }


# --------------------------------------------------------------------------------------------------
# one pipeline run
# --------------------------------------------------------------------------------------------------
def nextflow_argv(sheet: Path, outdir: Path, shard_rows: int, suffix: str, resume: bool, extra: list[str]) -> list[str]:
    return [
        "nextflow",
        "run",
        str(ROOT / "main.nf"),
        "-ansi-log",
        "false",
        "-profile",
        "test",
        "--input",
        str(sheet),
        "--outdir",
        str(outdir),
        "--predict_from",
        "fasta",
        "--save_h5",
        "false",
        "--predict_shards",
        "auto",
        "--predict_shard_rows",
        str(shard_rows),
        "--trace_report_suffix",
        suffix,
        *(["-resume"] if resume else []),
        *extra,
    ]


def _env() -> dict:
    env = dict(os.environ, NXF_OFFLINE="true", NXF_ANSI_LOG="false", CHROMAFLOW_PROGRESS="0")
    env.setdefault("NXF_OPTS", "-Xms256m -Xmx2g")
    return env


#: the task's name in its .command.run header (Nextflow 24.10: "### name: 'CHROMAFLOW:PREDICT (asm 1/4)'")
TASK_NAME = re.compile(r"^### name: '([^' ]+)", re.M)


def task_dirs(work: Path, process: str) -> tuple[int, int]:
    """(finished with exit 0, running) task directories of ``process`` under work/ (name from .command.run)."""
    done = running = 0
    for begin in work.glob("*/*/.command.begin"):
        d = begin.parent
        try:
            head = (d / ".command.run").read_text(errors="replace")[:400]
        except OSError:
            continue
        m = TASK_NAME.search(head)
        if not m or m.group(1).split(":")[-1] != process:
            continue
        ec = d / ".exitcode"
        if ec.exists():
            done += ec.read_text().strip() == "0"
        else:
            running += 1
    return done, running


def _completed(trace: Path, process: str) -> int:
    """Tasks of ``process`` the trace lists as COMPLETED so far (0 while the trace does not exist)."""
    try:
        return sum(process_name(r) == process and r["status"] == "COMPLETED" for r in read_trace(trace))
    except (OSError, KeyError, csv.Error):
        return 0


def _watch(
    proc: subprocess.Popen, t0: float, timeout: float, kill_during: str | None, trace_path: Path, work: Path
) -> dict | None:
    """Poll the run until it ends: past ``timeout`` its process group is killed (an error); with ``kill_during``,
    SIGKILL to the group once a task of that process has finished and another runs. When and at what it was
    killed, or None."""
    killed = None
    while proc.poll() is None:
        if time.monotonic() - t0 > timeout:
            os.killpg(proc.pid, signal.SIGKILL)
            raise RuntimeError(f"nextflow ran past {timeout} s")
        if kill_during and killed is None:
            # a finished task the driver has recorded (its trace row: the driver, not the task, decides what a
            # resume may reuse) and another task running
            done = _completed(trace_path, kill_during)
            running = task_dirs(work, kill_during)[1] if done else 0
            if done >= 1 and running >= 1:
                os.killpg(proc.pid, signal.SIGKILL)  # kill -9 of the driver and every task of its group
                killed = {"at_s": round(time.monotonic() - t0, 1), "finished": done, "running": running}
        time.sleep(0.5)
    return killed


def launch(
    rundir: Path,
    sheet: Path,
    shard_rows: int,
    suffix: str,
    resume: bool = False,
    extra: list[str] = (),
    kill_during: str | None = None,
    timeout: float = 86400,
) -> dict:
    """One ``nextflow run``; with ``kill_during``: SIGKILL to the driver's process group once a task of that process
    has finished and another runs. Returns the measured record (trace summary, sampler, wall)."""
    outdir, work = rundir / "out", rundir / "work"
    work.mkdir(parents=True, exist_ok=True)
    log = rundir / f"nextflow.{suffix}.log"
    argv = nextflow_argv(sheet, outdir, shard_rows, suffix, resume, list(extra))
    trace_path = outdir / "pipeline_info" / f"execution_trace_{suffix}.txt"
    t0 = time.monotonic()
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            argv,
            cwd=rundir,
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=_env(),
            start_new_session=True,
            stdin=subprocess.DEVNULL,
        )
    sampler = Sampler(proc.pid, work, outdir)
    sampler.start()
    try:
        killed = _watch(proc, t0, timeout, kill_during, trace_path, work)
    finally:
        sampler.stop.set()
        sampler.join()
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # nothing of the group outlives its run
        except ProcessLookupError:
            pass
    wall = time.monotonic() - t0
    rows = read_trace(trace_path) if trace_path.exists() else []
    rec = {
        "exit": proc.returncode,
        "wall_s": round(wall, 2),
        "suffix": suffix,
        "killed": killed,
        "processes": summarize_trace(rows),
        "trace_rows": trace_rows(rows),
        **sampler.record(),
    }
    rec["tasks"] = sum(p["tasks"] for p in rec["processes"].values())
    if kill_during is None and proc.returncode != 0:
        rec["error"] = log.read_text(errors="replace")[-2000:]
    return rec


def finish(rundir: Path, rec: dict) -> dict:
    """The final outputs' size and digests, and the overhead per task."""
    outdir = rundir / "out"
    rec["outputs_bytes"] = tree_bytes(outdir)
    rec["final_work_bytes"] = tree_bytes(rundir / "work")
    rec["digests"] = output_digests(outdir)
    rec["unreadable_browser_files"] = unreadable_browser_files(outdir)
    rec["report_html_bytes"] = {
        str(p.relative_to(outdir)): p.stat().st_size
        for p in sorted(outdir.rglob("*.html"))
        if "pipeline_info" not in p.parts
    }
    rec["driver_cpu_s_per_task"] = round(rec["driver_cpu_s"] / rec["tasks"], 4) if rec.get("tasks") else None
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.harness.scale", description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["run", "resume"])
    ap.add_argument("rundir", type=Path)
    ap.add_argument("sheet", type=Path)
    ap.add_argument("--shard-rows", type=int, default=20000)
    ap.add_argument("--extra", action="append", default=[], help="one more nextflow argument (repeatable)")
    a = ap.parse_args(argv)
    rundir = a.rundir.resolve()
    rundir.mkdir(parents=True, exist_ok=True)
    if a.mode == "run":
        rec = launch(rundir, a.sheet.resolve(), a.shard_rows, "scale", extra=a.extra)
        if rec["exit"] == 0:
            finish(rundir, rec)
    else:
        killed = launch(rundir, a.sheet.resolve(), a.shard_rows, "killed", extra=a.extra, kill_during="PREDICT")
        if killed["killed"] is None:
            rec = {"exit": 1, "killed_run": killed, "error": "the run ended before PREDICT could be killed"}
        else:
            resumed = launch(rundir, a.sheet.resolve(), a.shard_rows, "resumed", resume=True, extra=a.extra)
            rec = dict(resumed, killed_run=killed)
            if resumed["exit"] == 0:
                finish(rundir, rec)
    (rundir / "scale.json").write_text(json.dumps(rec, indent=1) + "\n")
    if rec.get("exit") != 0:
        why = rec.get("error", "")
        why = why if why.startswith("the run ended") else f"the pipeline run failed (exit {rec.get('exit')})"
        print(f"harness.scale: error: {why}: see {rundir}/nextflow.*.log", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
