"""``chromaflow benchmark-report``: every task's metrics JSON + the Nextflow trace -> benchmark report.

Inputs: ``metrics.jsonl`` (one stage metrics JSON per line, annotated by the workflow with ``assembly`` and
``shard``/``shards`` or ``chunk``/``chunks``), ``software_versions.yml`` and the Nextflow trace file (optional;
it may be absent or still being written). Outputs in ``--outdir``:

* ``benchmark.json`` / ``benchmark.tsv`` -- one row per task (stage, assembly, shard, device, bp, subsequences,
  wall, CPU time, data-wait %, bp/s, subsequences/s, peak RSS, peak GPU memory) plus the trace's realtime,
  %cpu and peak_rss where a trace row matches. A field a stage does not measure is empty, never invented.
* ``report.html`` -- self-contained (plots are base64 PNGs): throughput per stage, wall time vs subsequences
  with a linear fit, data-wait / GPU warnings, the extrapolation table with its formula, versions, machine.
* ``chromaflow_benchmark_mqc.tsv`` and ``chromaflow_throughput_mqc.json`` -- MultiQC custom content.

All unit arithmetic is in the small functions below (bp, seconds, hours, Gbp), each covered by unit tests.
"""
from __future__ import annotations

import argparse
import base64
import datetime
import html
import io
import json
import math
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterable

from .. import __version__
from ..common import ChromaflowError, write_json_atomic, write_text_atomic

SCHEMA = "chromaflow-benchmark/1"

# --------------------------------------------------------------------------------------------------
# units: every quantity carries its unit in its name
# --------------------------------------------------------------------------------------------------
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
    return float(gbp) * BP_PER_GBP


def seconds_to_hours(seconds: float | None) -> float | None:
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


def fleet_hours(n_genomes: float, genome_gbp: float, bp_per_s: float | None, workers: float,
                strands: int = 1) -> float | None:
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
    if bp_per_s is None:
        return NA
    return f"{bp_per_s / BP_PER_MBP:.4g} Mbp/s"


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return NA
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024.0
    return f"{n:.1f} TiB"  # pragma: no cover


def fmt_s(s: float | None) -> str:
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


# --------------------------------------------------------------------------------------------------
# Nextflow trace parsing
# --------------------------------------------------------------------------------------------------
_DUR = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_MEM = {"B": 1, "KB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3, "TB": 1024 ** 4, "PB": 1024 ** 5}


def _trace_field(text: str | None) -> str | None:
    """A trace cell stripped, or None where Nextflow wrote nothing (``-`` or empty)."""
    t = (text or "").strip()
    return None if t in ("", "-") else t


def parse_duration_s(text: str | None) -> float | None:
    """Nextflow trace durations (``250ms``, ``1.5s``, ``2m 3s``, ``1h 2m``) -> seconds; ``-``/empty -> None."""
    t = _trace_field(text)
    if t is None:
        return None
    parts = re.findall(r"([\d.]+)\s*(ms|s|m|h|d)\b", t)
    if not parts:
        try:
            return float(t) / 1000.0  # raw trace values are milliseconds
        except ValueError:
            return None
    return sum(float(v) * _DUR[u] for v, u in parts)


def parse_memory_bytes(text: str | None) -> float | None:
    """Nextflow trace memory (``123.4 MB``, ``1 GB``, ``0``) -> bytes (Nextflow units are powers of 1024)."""
    t = _trace_field(text)
    if t is None:
        return None
    m = re.fullmatch(r"([\d.]+)\s*([KMGTP]?B)?", t)
    if not m:
        return None
    return float(m.group(1)) * _MEM[m.group(2) or "B"]


def parse_percent(text: str | None) -> float | None:
    """Nextflow trace percentages (``98.5%``) -> 98.5; ``-``/empty -> None."""
    t = _trace_field((text or "").strip().rstrip("%"))
    if t is None:
        return None
    try:
        return float(t)
    except ValueError:
        return None


def read_trace(path: str | os.PathLike | None) -> tuple[list[dict], str | None]:
    """Rows of a Nextflow trace TSV, and a note when it is absent/empty/partly written (never raises)."""
    if not path:
        return [], "no trace file given"
    p = Path(path)
    if not p.is_file():
        return [], f"trace {p} not found (run still starting, or tracing disabled): trace columns are empty"
    try:
        text = p.read_text(errors="replace")
    except OSError as exc:
        return [], f"trace {p} unreadable ({exc.strerror}): trace columns are empty"
    lines = text.splitlines()
    if not lines:
        return [], f"trace {p} is empty (run still going?): trace columns are empty"
    header = lines[0].split("\t")
    rows, bad = [], 0
    for line in lines[1:]:
        cells = line.split("\t")
        if len(cells) != len(header):  # a row being written right now
            bad += 1
            continue
        rows.append(dict(zip(header, cells)))
    note = f"trace {p}: skipped {bad} incomplete row(s)" if bad else None
    return rows, note


#: bp a stage processes per genome bp: prediction runs on both strands (fasta2h5 writes + and - rows)
STRANDS = {"predict": 2}

#: metrics ``stage`` -> Nextflow process name: only for metrics without ``task_name`` (written before the tasks
#: named themselves), matched by the old rule (process + tag rebuilt from assembly and part)
STAGE_PROCESS = {"fasta2h5": "FASTA2H5", "predict": "PREDICT", "predict-merge": "PREDICT_MERGE",
                 "bigwig": "BIGWIG", "genie3": "GENIE3", "genie3-merge": "GENIE3_MERGE",
                 "add_coverage": "ADD_COVERAGE", "train": "TRAIN", "evaluate": "EVALUATE"}
STAGE_ORDER = ["fasta2h5", "add_coverage", "train", "evaluate", "predict", "predict-merge", "bigwig", "genie3",
               "genie3-merge"]


def _trace_key(row: dict) -> tuple[str, str] | None:
    """(process without its workflow path, tag) of a trace row: the old rule's key."""
    proc = row.get("process") or ""
    tag = row.get("tag") or ""
    name = row.get("name") or ""
    if not proc and name:
        proc = name.split(" (")[0]
    if (not tag or tag == "-") and "(" in name:
        tag = name[name.index("(") + 1:name.rindex(")")] if ")" in name else ""
    if not proc:
        return None
    return proc.split(":")[-1], tag.strip()


def match_trace(tasks: list[dict], trace_rows: list[dict]) -> int:
    """Fill ``trace_*`` fields of each task from its trace row; returns how many matched.

    A task whose metrics carry ``task_name`` (the name its launcher gave it) matches the rows of that ``name``;
    one without (older metrics) matches by process + tag rebuilt from stage, assembly and part.
    Retried tasks have several rows; the COMPLETED (or CACHED) one wins, and ``trace_attempts`` counts all.
    """
    by_name: dict[str, list[dict]] = {}
    by_key: dict[tuple[str, str], list[dict]] = {}
    for r in trace_rows:
        if r.get("name"):
            by_name.setdefault(r["name"].strip(), []).append(r)
        k = _trace_key(r)
        if k:
            by_key.setdefault(k, []).append(r)
    matched = 0
    for t in tasks:
        if t.get("task_name"):
            rows = by_name.get(str(t["task_name"]).strip())
        else:
            proc = STAGE_PROCESS.get(t["stage"])
            tag = t["assembly"] or ""
            if t.get("part"):
                tag = f"{tag} {t['part']}"
            rows = by_key.get((proc, tag)) if proc else None
        if not rows:
            continue
        ok = [r for r in rows if r.get("status") in ("COMPLETED", "CACHED")]
        r = (ok or rows)[-1]
        t["trace_status"] = r.get("status")
        t["trace_attempts"] = len(rows)
        t["trace_realtime_s"] = parse_duration_s(r.get("realtime"))
        t["trace_cpu_pct"] = parse_percent(r.get("%cpu"))
        t["trace_peak_rss_bytes"] = parse_memory_bytes(r.get("peak_rss"))
        t["trace_cpus"] = _positive(r.get("cpus"))
        matched += 1
    return matched


# --------------------------------------------------------------------------------------------------
# metrics -> task rows -> stage summaries
# --------------------------------------------------------------------------------------------------
#: (column, header, unit) of benchmark.tsv, in order
COLUMNS = [
    ("stage", "stage", ""), ("assembly", "assembly", ""), ("part", "shard", "i/n"), ("device", "device", ""),
    ("threads", "threads", ""), ("bp", "bp", "bp"), ("subsequences", "subsequences", ""),
    ("wall_s", "wall_s", "s"), ("cpu_s", "cpu_s", "s"), ("data_wait_pct", "data_wait_pct", "%"),
    ("bp_per_s", "bp_per_s", "bp/s"), ("subsequences_per_s", "subsequences_per_s", "1/s"),
    ("peak_rss_bytes", "peak_rss_bytes", "B"), ("peak_gpu_bytes", "peak_gpu_bytes", "B"),
    ("batch_size", "batch_size", ""), ("num_workers", "num_workers", ""),
    ("targets", "targets", ""), ("targets_per_s", "targets_per_s", "1/s"),
    ("trace_realtime_s", "trace_realtime_s", "s"), ("trace_cpu_pct", "trace_cpu_pct", "%"),
    ("trace_peak_rss_bytes", "trace_peak_rss_bytes", "B"), ("trace_attempts", "trace_attempts", ""),
    ("host", "host", ""),
]


def task_from_metrics(m: dict) -> dict:
    """One report row from one (annotated) metrics JSON; absent fields stay None."""
    part = None
    if m.get("shards") is not None and m.get("shard") is not None:
        part = f"{m['shard']}/{m['shards']}"
    elif m.get("chunks") is not None and m.get("chunk") is not None:
        part = f"{m['chunk']}/{m['chunks']}"
    elif isinstance(m.get("shard"), str) and "/" in m["shard"]:
        part = m["shard"]
    elif isinstance(m.get("chunk"), str) and "/" in m["chunk"]:
        part = m["chunk"]
    wall = _num(m.get("wall_s"))
    bp = _num(m.get("bp"))
    subs = _num(m.get("subsequences"))
    dwf = _num(m.get("data_wait_fraction"))
    t = {
        "stage": str(m.get("stage") or "unknown"),
        "assembly": m.get("assembly"),
        "part": part,
        "device": m.get("device"),
        "threads": _num(m.get("threads")),
        "bp": bp,
        "subsequences": subs,
        "wall_s": wall,
        "cpu_s": _num(m.get("cpu_s")),
        "data_wait_pct": None if dwf is None else 100.0 * dwf,
        "bp_per_s": _num(m.get("bp_per_s")) if m.get("bp_per_s") is not None else rate_bp_per_s(bp, wall),
        "subsequences_per_s": (_num(m.get("subsequences_per_s")) if m.get("subsequences_per_s") is not None
                               else rate_bp_per_s(subs, wall)),
        "peak_rss_bytes": _num(m.get("peak_rss_bytes")),
        "peak_gpu_bytes": _num(m.get("peak_gpu_bytes")),
        "gpu_util_pct": _num(m.get("gpu_util_pct")),
        "batch_size": _num(m.get("batch_size")),
        "num_workers": _num(m.get("num_workers")),
        "targets": _num(m.get("targets")) if m.get("stage") == "genie3" else None,
        "targets_per_s": _num(m.get("targets_per_s")) if m.get("stage") == "genie3" else None,
        "host": m.get("host"),
        "task_name": m.get("task_name"),
        "stub": bool(m.get("stub")),
        "trace_status": None, "trace_attempts": None, "trace_realtime_s": None, "trace_cpu_pct": None,
        "trace_peak_rss_bytes": None, "trace_cpus": None,
    }
    if "setting" in m:  # rows written by `chromaflow bench`
        t["setting"] = m["setting"]
    return t


def read_metrics(path: str | os.PathLike) -> list[dict]:
    p = Path(path)
    if not p.is_file():
        raise ChromaflowError(f"{p}: metrics file does not exist")
    out = []
    for i, line in enumerate(p.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ChromaflowError(f"{p}: line {i}: not JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise ChromaflowError(f"{p}: line {i}: expected a JSON object")
        out.append(obj)
    return out


def _sort_key(t: dict):
    st = STAGE_ORDER.index(t["stage"]) if t["stage"] in STAGE_ORDER else len(STAGE_ORDER)
    part = t.get("part") or ""
    nums = tuple(int(x) for x in re.findall(r"\d+", part))
    return (st, t["stage"], str(t.get("assembly") or ""), nums)


def _sum(vals) -> float | None:
    v = [x for x in vals if x is not None]
    return sum(v) if v else None


def summarise_stages(tasks: list[dict]) -> list[dict]:
    """Per stage: tasks, Σbp, Σwall, rate = Σbp/Σwall (one worker's throughput), fit of wall vs subsequences."""
    stages: dict[str, list[dict]] = {}
    for t in tasks:
        stages.setdefault(t["stage"], []).append(t)
    out = []
    for name in sorted(stages, key=lambda s: STAGE_ORDER.index(s) if s in STAGE_ORDER else 99):
        ts = stages[name]
        bp = _sum(t["bp"] for t in ts if t["wall_s"])
        subs = _sum(t["subsequences"] for t in ts if t["wall_s"])
        wall_bp = _sum(t["wall_s"] for t in ts if t["bp"] is not None)
        wall_sub = _sum(t["wall_s"] for t in ts if t["subsequences"] is not None)
        waits = [t["data_wait_pct"] for t in ts if t["data_wait_pct"] is not None]
        fit_pts = [(t["subsequences"], t["wall_s"]) for t in ts
                   if t["subsequences"] is not None and t["wall_s"] is not None]
        tgt = _sum(t["targets"] for t in ts)
        out.append({
            "stage": name,
            "tasks": len(ts),
            "devices": sorted({str(t["device"]) for t in ts if t["device"]}),
            "bp": bp, "subsequences": subs,
            "wall_s": _sum(t["wall_s"] for t in ts),
            "cpu_s": _sum(t["cpu_s"] for t in ts),
            "bp_per_s": rate_bp_per_s(bp, wall_bp),
            "subsequences_per_s": rate_bp_per_s(subs, wall_sub),
            "targets": tgt,
            "targets_per_s": rate_bp_per_s(tgt, _sum(t["wall_s"] for t in ts if t["targets"] is not None)),
            "data_wait_pct_max": max(waits) if waits else None,
            "data_wait_pct_mean": sum(waits) / len(waits) if waits else None,
            "peak_rss_bytes_max": max([t["peak_rss_bytes"] for t in ts if t["peak_rss_bytes"]], default=None),
            "peak_gpu_bytes_max": max([t["peak_gpu_bytes"] for t in ts if t["peak_gpu_bytes"]], default=None),
            "fit": linear_fit([x for x, _ in fit_pts], [y for _, y in fit_pts]),
            "fit_points": len(fit_pts),
        })
    return out


def extrapolate(stages: list[dict], genome_gbp: float, genomes: int, workers: int) -> dict:
    """Extrapolation table from each stage's measured rate (bp/s per worker)."""
    rows = []
    for s in stages:
        r = s["bp_per_s"]
        kind = "GPUs" if any(d.startswith("cuda") for d in s["devices"]) else "CPU tasks"
        reason = None
        if r is None:
            reason = ("scales with genes × samples × trees, not bp" if s["stage"].startswith("genie3")
                      else "stage reports no bp count" if s["bp"] is None else "zero rate")
        k = STRANDS.get(s["stage"], 1)
        rows.append({
            "stage": s["stage"], "bp_per_s": r, "worker_kind": kind, "strands": k,
            "hours_per_gbp": hours_per_gbp(r),
            "hours_per_genome": genome_hours(genome_gbp, r, k),
            "hours_total": fleet_hours(genomes, genome_gbp, r, workers, k),
            "why_na": reason,
        })
    return {
        "genome_gbp": genome_gbp, "genomes": genomes, "workers": workers,
        "formula": ("t_genome [h] = G [Gbp] × 1e9 [bp/Gbp] × s ÷ r [bp/s] ÷ 3600 [s/h];  "
                    "T [h] = N × t_genome ÷ K  (s = strands processed: 2 for predict, else 1; "
                    "even split, no ceiling, no queueing or start-up)"),
        "rows": rows,
    }


def warnings_for(tasks: list[dict]) -> list[dict]:
    """Data-wait (> 10 %) and GPU warnings, each with the fix to try."""
    out = []
    for t in tasks:
        dw = t.get("data_wait_pct")
        where = f"{t['stage']} {t.get('assembly') or ''} {t.get('part') or ''}".strip()
        if dw is not None and dw > 100 * DATA_WAIT_ALARM:
            gpu = str(t.get("device") or "").startswith("cuda")
            out.append({
                "task": where, "kind": "data-wait",
                "message": (f"{where}: {dw:.1f} % of the prediction loop waited for input data (alarm at "
                            f"{100 * DATA_WAIT_ALARM:.0f} %)" + ("; the GPU idles meanwhile" if gpu else "")),
                "fix": ("raise the reader prefetch (--num-workers, e.g. 4), raise --batch-size (e.g. 2×), put the "
                        "h5 on local/fast disk; check with `chromaflow bench`"),
            })
        if str(t.get("device") or "").startswith("cuda"):
            u = t.get("gpu_util_pct")
            if u is None and dw is not None:
                u_est = 100.0 - dw
                if u_est < 90:
                    out.append({"task": where, "kind": "gpu-utilisation",
                                "message": f"{where}: GPU busy at most ≈{u_est:.0f} % (1 − data-wait)",
                                "fix": "raise --batch-size until peak GPU memory nears the card's size"})
            elif u is not None and u < 50:
                out.append({"task": where, "kind": "gpu-utilisation",
                            "message": f"{where}: sampled GPU utilisation {u:.0f} %",
                            "fix": "raise --batch-size and --num-workers"})
    return out


# --------------------------------------------------------------------------------------------------
# versions + machine
# --------------------------------------------------------------------------------------------------
def read_versions(path: str | os.PathLike | None) -> dict[str, dict[str, str]]:
    """nf-core style software_versions.yml (``"PROC":`` then indented ``tool: version``) -> {process: {tool: v}}."""
    if not path or not Path(path).is_file():
        return {}
    out: dict[str, dict[str, str]] = {}
    cur = None
    for line in Path(path).read_text(errors="replace").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():
            cur = line.strip().rstrip(":").strip().strip('"').strip("'")
            out.setdefault(cur, {})
        elif cur is not None and ":" in line:
            k, v = line.strip().split(":", 1)
            out[cur][k.strip().strip('"')] = v.strip().strip('"').strip("'")
    return out


def machine_info() -> dict:
    info: dict[str, Any] = {"hostname": platform.node(), "os": platform.platform(), "python": platform.python_version(),
                            "chromaflow": __version__}
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info["cpu_model"] = model or platform.processor() or platform.machine()
    info["cpu_cores"] = os.cpu_count()
    try:
        info["cpus_usable"] = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        info["cpus_usable"] = os.cpu_count()
    mem = None
    try:
        import psutil
        mem = psutil.virtual_memory().total
    except Exception:  # pragma: no cover
        try:
            for line in Path("/proc/meminfo").read_text().splitlines():
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * 1024
        except OSError:
            pass
    info["memory_bytes"] = mem
    info["gpus"] = gpu_info()
    return info


def gpu_info() -> list[dict]:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        res = subprocess.run([smi, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in res.stdout.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 2:
            gpus.append({"name": cells[0], "memory": cells[1], "driver": cells[2] if len(cells) > 2 else None})
    return gpus


# --------------------------------------------------------------------------------------------------
# the report data (shared with `chromaflow bench`)
# --------------------------------------------------------------------------------------------------
def build_report(tasks: list[dict], *, versions: dict | None = None, genome_gbp: float = 2.2, genomes: int = 10,
                 workers: int = 4, notes: list[str] | None = None, source: str = "pipeline") -> dict:
    tasks = sorted(tasks, key=_sort_key)
    stages = summarise_stages(tasks)
    return {
        "schema": SCHEMA,
        "source": source,
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine_info(),
        "hosts": sorted({str(t["host"]) for t in tasks if t.get("host")}),
        "versions": versions or {},
        "tasks": tasks,
        "stages": stages,
        "extrapolation": extrapolate(stages, genome_gbp, genomes, workers),
        "warnings": warnings_for(tasks),
        "notes": list(notes or []),
    }


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        if v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.6g}"
    return str(v)


def tasks_tsv(tasks: list[dict]) -> str:
    lines = ["\t".join(h for _, h, _ in COLUMNS)]
    for t in tasks:
        lines.append("\t".join(_cell(t.get(k)) for k, _, _ in COLUMNS))
    return "\n".join(lines) + "\n"


def multiqc_tsv(tasks: list[dict]) -> str:
    head = [
        "# id: 'chromaflow_benchmark'",
        "# section_name: 'chromaflow benchmark'",
        "# description: 'Per-task wall time, throughput, data-wait and memory of the chromaflow stages "
        "(chromaflow benchmark-report; full report in benchmark/report.html)'",
        "# plot_type: 'table'",
        "# pconfig:",
        "#     id: 'chromaflow_benchmark_table'",
        "#     namespace: 'chromaflow'",
    ]
    cols = [("wall_s", "wall_s"), ("cpu_s", "cpu_s"), ("bp", "bp"), ("subsequences", "subsequences"),
            ("bp_per_s", "bp_per_s"), ("data_wait_pct", "data_wait_pct"), ("peak_rss_bytes", "peak_rss_bytes"),
            ("peak_gpu_bytes", "peak_gpu_bytes"), ("device", "device")]
    lines = head + ["\t".join(["task"] + [h for _, h in cols])]
    seen: dict[str, int] = {}
    for t in tasks:
        name = " ".join(str(x) for x in (t.get("assembly"), t["stage"], t.get("part")) if x)
        if t.get("setting"):
            name += f" [{t['setting']}]"
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name += f" #{seen[name]}"
        lines.append("\t".join([name] + [_cell(t.get(k)) for k, _ in cols]))
    return "\n".join(lines) + "\n"


def multiqc_json(stages: list[dict]) -> dict:
    data = {s["stage"]: {"Mbp/s": s["bp_per_s"] / BP_PER_MBP} for s in stages if s["bp_per_s"]}
    return {"id": "chromaflow_throughput", "section_name": "chromaflow throughput",
            "description": "Measured throughput per stage (Σbp ÷ Σwall over the stage's tasks), Mbp/s per task",
            "plot_type": "bargraph", "pconfig": {"id": "chromaflow_throughput_plot", "ylab": "Mbp/s"},
            "data": data}


# --------------------------------------------------------------------------------------------------
# plots (matplotlib, Agg) -> base64 PNG
# --------------------------------------------------------------------------------------------------
def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, bbox_inches="tight")
    import matplotlib.pyplot as plt
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_throughput(stages: list[dict]) -> str:
    plt = _plt()
    bp = [s for s in stages if s["bp_per_s"]]
    tg = [s for s in stages if s["targets_per_s"]]
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [3, 1]})
    ax = axes[0]
    if bp:
        names = [s["stage"] for s in bp]
        vals = [s["bp_per_s"] / BP_PER_MBP for s in bp]
        bars = ax.bar(names, vals, color=["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3"][:len(vals)])
        for b, v in zip(bars, vals):
            ax.annotate(f"{v:.3g}", (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom", fontsize=9)
        ax.set_yscale("log")
    else:
        ax.text(0.5, 0.5, "no stage reported bp", ha="center", va="center", transform=ax.transAxes)
    ax.set_ylabel("Mbp/s per task (Σbp ÷ Σwall)")
    ax.set_title("Throughput per stage (bp)")
    ax = axes[1]
    if tg:
        ax.bar([s["stage"] for s in tg], [s["targets_per_s"] for s in tg], color="#937860")
        ax.set_ylabel("GENIE3 targets/s per task")
    else:
        ax.text(0.5, 0.5, "no GENIE3 tasks", ha="center", va="center", transform=ax.transAxes)
    ax.set_title("GENIE3 throughput")
    fig.tight_layout()
    return _png(fig)


def plot_wall_vs_subsequences(tasks: list[dict], stages: list[dict]) -> str:
    plt = _plt()
    withs = [s for s in stages if s["fit_points"] > 0]
    n = max(1, len(withs))
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.8), squeeze=False)
    if not withs:
        axes[0][0].text(0.5, 0.5, "no stage reported subsequences", ha="center", va="center")
    for ax, s in zip(axes[0], withs):
        pts = [(t["subsequences"], t["wall_s"]) for t in tasks
               if t["stage"] == s["stage"] and t["subsequences"] is not None and t["wall_s"] is not None]
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        ax.scatter(xs, ys, color="#4C72B0", zorder=3, label="tasks")
        fit = s["fit"]
        if fit:
            x0, x1 = 0, max(xs) * 1.05
            ax.plot([x0, x1], [fit["intercept_s"], fit["intercept_s"] + fit["slope_s_per_subsequence"] * x1],
                    color="#C44E52", label=(f"{fit['slope_s_per_subsequence'] * 1000:.3g} ms/subseq "
                                            f"+ {fit['intercept_s']:.3g} s (R²={fit['r2']:.2f})"))
            ax.legend(fontsize=8, loc="upper left")
        else:
            ax.text(0.5, 0.92, f"{len(pts)} point(s) with distinct sizes < 2: no fit", ha="center",
                    transform=ax.transAxes, fontsize=9, color="#C44E52")
        ax.set_xlabel("subsequences in task")
        ax.set_ylabel("wall time (s)")
        ax.set_title(s["stage"])
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    fig.suptitle("Wall time vs subsequences (Predmoter-style), this run")
    fig.tight_layout()
    return _png(fig)


def plot_data_wait(tasks: list[dict]) -> str | None:
    ts = [t for t in tasks if t["data_wait_pct"] is not None]
    if not ts:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(5, 0.8 * len(ts) + 2), 3.6))
    labels = [" ".join(str(x) for x in (t.get("assembly"), t.get("part"), t.get("setting")) if x) or t["stage"]
              for t in ts]
    vals = [t["data_wait_pct"] for t in ts]
    ax.bar(range(len(ts)), vals, color=["#C44E52" if v > 100 * DATA_WAIT_ALARM else "#55A868" for v in vals])
    ax.axhline(100 * DATA_WAIT_ALARM, color="black", ls="--", lw=1, label="10 % alarm")
    ax.set_xticks(range(len(ts)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("data-wait (% of prediction loop)")
    ax.set_title("Prediction data-wait per task")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)


def plot_memory(tasks: list[dict]) -> str | None:
    ts = [t for t in tasks if t["peak_rss_bytes"] or t["trace_peak_rss_bytes"]]
    if not ts:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(ts) + 2), 3.6))
    labels = [" ".join(str(x) for x in (t["stage"], t.get("assembly"), t.get("part")) if x) for t in ts]
    x = list(range(len(ts)))
    ax.bar([i - 0.2 for i in x], [(t["peak_rss_bytes"] or 0) / 2 ** 20 for t in ts], 0.4, label="metrics peak RSS")
    ax.bar([i + 0.2 for i in x], [(t["trace_peak_rss_bytes"] or 0) / 2 ** 20 for t in ts], 0.4,
           label="trace peak_rss")
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("MiB")
    ax.set_title("Peak memory per task (size memory requests from this)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)


# --------------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------------
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1250px}
h1{font-size:1.6em;margin-bottom:0}h2{border-bottom:2px solid #4C72B0;padding-bottom:3px;margin-top:32px}
table{border-collapse:collapse;font-size:13px;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}
th{background:#eef2f8}td.l,th.l{text-align:left}.warn{background:#fff3cd;border-left:5px solid #e0a800;padding:8px 12px;margin:6px 0}
.ok{background:#e8f5e9;border-left:5px solid #43a047;padding:8px 12px}.note{color:#555;font-size:13px}
code,.formula{background:#f4f4f4;padding:2px 5px;border-radius:3px}.formula{display:block;padding:8px;margin:8px 0}
img{max-width:100%;border:1px solid #ddd;margin:6px 0}
"""


def _e(x: Any) -> str:
    return html.escape(str(x))


def _table(headers: list[str], rows: list[list[Any]], left: int = 1) -> str:
    h = "".join(f'<th class="l">{_e(x)}</th>' if i < left else f"<th>{_e(x)}</th>" for i, x in enumerate(headers))
    body = []
    for r in rows:
        body.append("<tr>" + "".join(f'<td class="l">{_e(c)}</td>' if i < left else f"<td>{_e(c)}</td>"
                                     for i, c in enumerate(r)) + "</tr>")
    return f"<table><tr>{h}</tr>{''.join(body)}</table>"


def _v(x: Any, fmt: str = "{:.4g}") -> str:
    if x is None:
        return ""
    if isinstance(x, float):
        return fmt.format(x)
    return str(x)


def render_html(rep: dict) -> str:
    tasks, stages, ex = rep["tasks"], rep["stages"], rep["extrapolation"]
    mach = rep["machine"]
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>chromaflow benchmark report</title>"
             f"<style>{_CSS}</style></head><body>",
             f"<h1>chromaflow benchmark report</h1><p class='note'>{_e(rep['source'])} · generated "
             f"{_e(rep['generated'])} · chromaflow {_e(mach.get('chromaflow'))} · {len(tasks)} task(s)</p>"]
    for n in rep["notes"]:
        parts.append(f"<p class='note'>Note: {_e(n)}</p>")

    parts.append("<h2 id='summary'>Stage summary</h2>")
    rows = [[s["stage"], s["tasks"], ", ".join(s["devices"]), _v(s["bp"], "{:.0f}"), _v(s["subsequences"], "{:.0f}"),
             fmt_s(s["wall_s"]), fmt_s(s["cpu_s"]), fmt_rate(s["bp_per_s"]),
             _v(s["subsequences_per_s"]) or NA, _v(s["targets_per_s"]) or "",
             _v(s["data_wait_pct_max"], "{:.1f}"), fmt_bytes(s["peak_rss_bytes_max"]),
             fmt_bytes(s["peak_gpu_bytes_max"]) if s["peak_gpu_bytes_max"] else ""] for s in stages]
    parts.append(_table(["stage", "tasks", "device", "Σbp", "Σsubsequences", "Σwall", "ΣCPU", "rate (Σbp÷Σwall)",
                         "subseq/s", "targets/s", "max data-wait %", "max peak RSS", "max peak GPU mem"], rows, 3))

    parts.append("<h2 id='throughput'>Throughput per stage</h2>"
                 "<p class='note'>Per task (one worker): Σbp ÷ Σwall over the stage's tasks. Tiny test inputs are "
                 "dominated by start-up cost; run <code>chromaflow bench</code> for steady-state rates.</p>")
    parts.append(f"<img alt='throughput per stage' src='data:image/png;base64,{plot_throughput(stages)}'>")

    parts.append("<h2 id='scaling'>Wall time vs subsequences</h2><p class='note'>Each point is one task; the line is "
                 "a least-squares fit: slope = marginal seconds per subsequence, intercept = fixed start-up cost "
                 "(model load, file open). A stage with fewer than 2 distinct task sizes gets no fit.</p>")
    parts.append(f"<img alt='wall time vs subsequences' src='data:image/png;base64,"
                 f"{plot_wall_vs_subsequences(tasks, stages)}'>")
    fits = [[s["stage"], s["fit_points"], *(["no fit (< 2 distinct sizes)", "", ""] if not s["fit"] else
             [f"{s['fit']['slope_s_per_subsequence'] * 1000:.4g} ms", f"{s['fit']['intercept_s']:.4g} s",
              f"{s['fit']['r2']:.3f}"])] for s in stages if s["fit_points"]]
    if fits:
        parts.append(_table(["stage", "points", "slope (per subsequence)", "intercept", "R²"], fits))

    parts.append("<h2 id='datawait'>Data-wait and GPU utilisation</h2><p class='note'>data-wait = time the "
                 "prediction loop waited for the h5 reader ÷ loop time (LightlyTrain's data_time ÷ (data_time + "
                 "batch_time)); above 10 % the model (GPU) is starved. GPU utilisation is at most 1 − data-wait.</p>")
    dw = plot_data_wait(tasks)
    if dw:
        parts.append(f"<img alt='data-wait per task' src='data:image/png;base64,{dw}'>")
    else:
        parts.append("<p class='note'>No task reported data-wait (no prediction tasks).</p>")
    if rep["warnings"]:
        for w in rep["warnings"]:
            parts.append(f"<div class='warn'><b>Warning:</b> {_e(w['message'])}<br><b>Try:</b> {_e(w['fix'])}</div>")
    else:
        parts.append("<div class='ok'>No data-wait above 10 % and no GPU under-use detected.</div>")
    gpu_tasks = [t for t in tasks if str(t.get("device") or "").startswith("cuda")]
    if not gpu_tasks:
        parts.append("<p class='note'>All prediction ran on CPU: no GPU utilisation to sample.</p>")

    parts.append("<h2 id='memory'>Peak memory</h2>")
    mem = plot_memory(tasks)
    parts.append(f"<img alt='peak memory per task' src='data:image/png;base64,{mem}'>" if mem
                 else "<p class='note'>No memory figures.</p>")

    parts.append("<h2 id='extrapolation'>Extrapolation</h2>")
    parts.append(f"<p>For N = {ex['genomes']} genomes of G = {ex['genome_gbp']} Gbp on K = {ex['workers']} "
                 f"workers, from each stage's measured rate r:</p><span class='formula'>{_e(ex['formula'])}</span>")
    xr = [[r["stage"], r["worker_kind"], fmt_rate(r["bp_per_s"]), r["strands"], fmt_hours(r["hours_per_gbp"]),
           fmt_hours(r["hours_per_genome"]), fmt_hours(r["hours_total"]), r["why_na"] or ""] for r in ex["rows"]]
    parts.append(_table(["stage", "worker", "rate r", "s", "h per Gbp processed", f"h per {ex['genome_gbp']} Gbp genome",
                         f"h for {ex['genomes']} genomes on {ex['workers']} workers", "note"], xr, 2))
    parts.append("<p class='note'>Rates from tiny inputs include start-up cost and understate throughput; "
                 "CPU rates depend on the task's threads. For planning use rates from <code>chromaflow bench</code> "
                 "or a real genome.</p>")

    parts.append("<h2 id='tasks'>Tasks</h2>")
    trows = [[t["stage"], t.get("assembly") or "", t.get("part") or "", t.get("device") or "",
              _v(t["bp"], "{:.0f}"), _v(t["subsequences"], "{:.0f}"), _v(t["wall_s"], "{:.3f}"),
              _v(t["cpu_s"], "{:.3f}"), _v(t["data_wait_pct"], "{:.1f}"), fmt_rate(t["bp_per_s"]) if t["bp_per_s"] else "",
              _v(t["subsequences_per_s"]), fmt_bytes(t["peak_rss_bytes"]) if t["peak_rss_bytes"] else "",
              fmt_bytes(t["peak_gpu_bytes"]) if t["peak_gpu_bytes"] else "",
              _v(t["trace_realtime_s"], "{:.3f}"), _v(t["trace_cpu_pct"], "{:.1f}"),
              fmt_bytes(t["trace_peak_rss_bytes"]) if t["trace_peak_rss_bytes"] else "",
              _v(t["trace_attempts"])] for t in tasks]
    parts.append(_table(["stage", "assembly", "shard", "device", "bp", "subseq", "wall s", "CPU s", "data-wait %",
                         "bp/s", "subseq/s", "peak RSS", "peak GPU", "trace realtime s", "trace %cpu",
                         "trace peak_rss", "attempts"], trows, 4))

    parts.append("<h2 id='versions'>Software versions</h2>")
    tools: dict[str, set] = {}
    for _, tv in rep["versions"].items():
        for k, v in tv.items():
            tools.setdefault(k, set()).add(v)
    if tools:
        parts.append(_table(["tool", "version(s)"], [[k, ", ".join(sorted(v))] for k, v in sorted(tools.items())]))
    else:
        parts.append("<p class='note'>No software_versions.yml given.</p>")

    parts.append("<h2 id='machine'>Machine</h2>")
    gpus = "; ".join(f"{g['name']} ({g['memory']})" for g in mach.get("gpus") or []) or "none detected (nvidia-smi absent)"
    mrows = [["CPU model", mach.get("cpu_model")], ["cores", mach.get("cpu_cores")],
             ["usable CPUs", mach.get("cpus_usable")], ["memory", fmt_bytes(mach.get("memory_bytes"))],
             ["GPU", gpus], ["OS", mach.get("os")], ["Python", mach.get("python")],
             ["report host", mach.get("hostname")], ["task hosts", ", ".join(rep["hosts"]) or NA]]
    parts.append(_table(["", ""], mrows, 2))
    parts.append("<p class='note'>The machine is where this report was written; tasks may have run on other hosts "
                 "(listed above). Read it alongside Nextflow's execution_report/timeline in pipeline_info/.</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_outputs(rep: dict, outdir: str | os.PathLike, *, html_report: bool = True) -> None:
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "benchmark.json", rep)
    write_text_atomic(out / "benchmark.tsv", tasks_tsv(rep["tasks"]))
    write_text_atomic(out / "chromaflow_benchmark_mqc.tsv", multiqc_tsv(rep["tasks"]))
    write_json_atomic(out / "chromaflow_throughput_mqc.json", multiqc_json(rep["stages"]))
    if html_report:
        write_text_atomic(out / "report.html", render_html(rep))


# --------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------
def add_extrapolation_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--extrapolate-genome-gbp", type=float, default=2.2, metavar="G",
                   help="genome size for the extrapolation table, in Gbp (default 2.2)")
    p.add_argument("--extrapolate-genomes", type=int, default=10, metavar="N", help="number of genomes (default 10)")
    p.add_argument("--extrapolate-workers", type=int, default=4, metavar="K",
                   help="GPUs / CPU tasks running in parallel (default 4)")


def check_extrapolation_arguments(args: argparse.Namespace) -> None:
    if not (args.extrapolate_genome_gbp > 0 and math.isfinite(args.extrapolate_genome_gbp)):
        raise ChromaflowError(f"--extrapolate-genome-gbp must be > 0, got {args.extrapolate_genome_gbp}")
    if args.extrapolate_genomes < 1:
        raise ChromaflowError(f"--extrapolate-genomes must be >= 1, got {args.extrapolate_genomes}")
    if args.extrapolate_workers < 1:
        raise ChromaflowError(f"--extrapolate-workers must be >= 1, got {args.extrapolate_workers}")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics", required=True, help="metrics.jsonl: one stage metrics JSON object per line")
    p.add_argument("--versions", default=None, help="software_versions.yml (optional)")
    p.add_argument("--trace", default=None,
                   help="Nextflow trace TSV (optional; may be absent or incomplete while the run is going)")
    p.add_argument("--outdir", default=".", help="output directory (default .)")
    add_extrapolation_arguments(p)


def run(args: argparse.Namespace) -> int:
    check_extrapolation_arguments(args)
    metrics = read_metrics(args.metrics)
    tasks = [task_from_metrics(m) for m in metrics]
    notes = []
    stubs = sum(t["stub"] for t in tasks)
    if stubs:
        notes.append(f"{stubs} task(s) are stubs (-stub-run): their fields are empty")
    trace_rows, note = read_trace(args.trace)
    if note:
        notes.append(note)
    if trace_rows:
        n = match_trace(tasks, trace_rows)
        if n < len(tasks):
            notes.append(f"{len(tasks) - n} of {len(tasks)} task(s) have no matching trace row")
    if args.versions and not Path(args.versions).is_file():
        notes.append(f"versions file {args.versions} not found")
    if not tasks:
        notes.append("metrics file has no tasks")
    rep = build_report(tasks, versions=read_versions(args.versions), genome_gbp=args.extrapolate_genome_gbp,
                       genomes=args.extrapolate_genomes, workers=args.extrapolate_workers, notes=notes)
    write_outputs(rep, args.outdir)
    return 0
