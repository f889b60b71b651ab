"""Tasks of the benchmark report: metrics JSONs -> task rows -> stage summaries, extrapolation, warnings, and the
report data (``build_report``, shared with ``chromaflow bench``)."""

from __future__ import annotations

import datetime
import json
import os
import re
from pathlib import Path

from ..utils.errors import ChromaflowError
from .machine import machine_info
from .units import DATA_WAIT_ALARM, _num, fleet_hours, genome_hours, hours_per_gbp, linear_fit, rate_bp_per_s

SCHEMA = "chromaflow-benchmark/1"

#: bp a stage processes per genome bp: prediction runs on both strands (fasta2h5 writes + and - rows)
STRANDS = {"predict": 2}

STAGE_ORDER = [
    "fasta2h5",
    "add_coverage",
    "train",
    "evaluate",
    "predict",
    "predict-merge",
    "predict-view",
    "bigwig",
    "gene-accessibility",
    "motif-prior",
    "genie3",
    "genie3-merge",
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
        "subsequences_per_s": (
            _num(m.get("subsequences_per_s")) if m.get("subsequences_per_s") is not None else rate_bp_per_s(subs, wall)
        ),
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
        "trace_status": None,
        "trace_attempts": None,
        "trace_realtime_s": None,
        "trace_cpu_pct": None,
        "trace_peak_rss_bytes": None,
        "trace_cpus": None,
    }
    if "setting" in m:  # rows written by `chromaflow bench`
        t["setting"] = m["setting"]
    return t


def read_metrics(path: str | os.PathLike) -> list[dict]:
    """The JSON objects of a metrics file, one per non-blank line; ChromaflowError if the file is missing or a line
    is not a JSON object."""
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
        fit_pts = [
            (t["subsequences"], t["wall_s"]) for t in ts if t["subsequences"] is not None and t["wall_s"] is not None
        ]
        tgt = _sum(t["targets"] for t in ts)
        out.append(
            {
                "stage": name,
                "tasks": len(ts),
                "devices": sorted({str(t["device"]) for t in ts if t["device"]}),
                "bp": bp,
                "subsequences": subs,
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
            }
        )
    return out


def extrapolate(stages: list[dict], genome_gbp: float, genomes: int, workers: int) -> dict:
    """Extrapolation table from each stage's measured rate (bp/s per worker)."""
    rows = []
    for s in stages:
        r = s["bp_per_s"]
        kind = "GPUs" if any(d.startswith("cuda") for d in s["devices"]) else "CPU tasks"
        reason = None
        if r is None:
            reason = (
                "scales with genes × samples × trees, not bp"
                if s["stage"].startswith("genie3")
                else "stage reports no bp count"
                if s["bp"] is None
                else "zero rate"
            )
        k = STRANDS.get(s["stage"], 1)
        rows.append(
            {
                "stage": s["stage"],
                "bp_per_s": r,
                "worker_kind": kind,
                "strands": k,
                "hours_per_gbp": hours_per_gbp(r),
                "hours_per_genome": genome_hours(genome_gbp, r, k),
                "hours_total": fleet_hours(genomes, genome_gbp, r, workers, k),
                "why_na": reason,
            }
        )
    return {
        "genome_gbp": genome_gbp,
        "genomes": genomes,
        "workers": workers,
        "formula": (
            "t_genome [h] = G [Gbp] × 1e9 [bp/Gbp] × s ÷ r [bp/s] ÷ 3600 [s/h];  "
            "T [h] = N × t_genome ÷ K  (s = strands processed: 2 for predict, else 1; "
            "even split, no ceiling, no queueing or start-up)"
        ),
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
            out.append(
                {
                    "task": where,
                    "kind": "data-wait",
                    "message": (
                        f"{where}: {dw:.1f} % of the prediction loop waited for input data (alarm at "
                        f"{100 * DATA_WAIT_ALARM:.0f} %)" + ("; the GPU idles meanwhile" if gpu else "")
                    ),
                    "fix": (
                        "raise the reader prefetch (--num-workers, e.g. 4), raise --batch-size (e.g. 2×), put the "
                        "h5 on local/fast disk; check with `chromaflow bench`"
                    ),
                }
            )
        if str(t.get("device") or "").startswith("cuda"):
            u = t.get("gpu_util_pct")
            if u is None and dw is not None:
                u_est = 100.0 - dw
                if u_est < 90:
                    out.append(
                        {
                            "task": where,
                            "kind": "gpu-utilisation",
                            "message": f"{where}: GPU busy at most ≈{u_est:.0f} % (1 − data-wait)",
                            "fix": "raise --batch-size until peak GPU memory nears the card's size",
                        }
                    )
            elif u is not None and u < 50:
                out.append(
                    {
                        "task": where,
                        "kind": "gpu-utilisation",
                        "message": f"{where}: sampled GPU utilisation {u:.0f} %",
                        "fix": "raise --batch-size and --num-workers",
                    }
                )
    return out


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


def build_report(
    tasks: list[dict],
    *,
    versions: dict | None = None,
    genome_gbp: float = 2.2,
    genomes: int = 10,
    workers: int = 4,
    notes: list[str] | None = None,
    source: str = "pipeline",
) -> dict:
    """The benchmark report of ``tasks``: the tasks sorted by stage, assembly and part, per-stage summaries, the
    extrapolation to ``genomes`` genomes of ``genome_gbp`` Gbp on ``workers`` workers, warnings, notes, the machine,
    hosts and ``versions``."""
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
