"""The Nextflow trace: parsing its cells and matching its rows to the tasks of the benchmark report."""

from __future__ import annotations

import os
import re
from pathlib import Path

from .units import _positive

_DUR = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_MEM = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4, "PB": 1024**5}


def _trace_field(text: str | None) -> str | None:
    """A trace cell stripped, or None where Nextflow wrote nothing (``-`` or empty)."""
    t = (text or "").strip()
    return None if t in ("", "-") else t


def parse_duration_s(text: str | None) -> float | None:
    """Nextflow trace durations (``250ms``, ``1.5s``, ``2m 3s``, ``1h 2m``) -> seconds; ``-``/empty -> None."""
    t = _trace_field(text)
    if t is None:
        return None
    if re.fullmatch(r"\d+", t):
        return int(t) / 1000.0  # raw trace values are milliseconds
    if not re.fullmatch(r"(?:\s*[\d.]+\s*(?:ms|s|m|h|d))+\s*", t):
        return None  # not a trace duration (the whole cell must be one)
    return sum(float(v) * _DUR[u] for v, u in re.findall(r"([\d.]+)\s*(ms|s|m|h|d)", t))


def parse_memory_bytes(text: str | None) -> float | None:
    """Nextflow trace memory (``123.4 MB``, ``1 GB``, ``0``) -> bytes (Nextflow units are powers of 1024)."""
    t = _trace_field(text)
    m = re.fullmatch(r"([\d.]+)\s*([KMGTP]?B)?", t) if t is not None else None
    return float(m.group(1)) * _MEM[m.group(2) or "B"] if m else None


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


#: metrics ``stage`` -> Nextflow process name: only for metrics without ``task_name`` (written before the tasks
#: named themselves), matched by the old rule (process + tag rebuilt from assembly and part)
STAGE_PROCESS = {
    "fasta2h5": "FASTA2H5",
    "predict": "PREDICT",
    "predict-merge": "PREDICT_MERGE",
    "bigwig": "BIGWIG",
    "genie3": "GENIE3",
    "genie3-merge": "GENIE3_MERGE",
    "add_coverage": "ADD_COVERAGE",
    "train": "TRAIN",
    "evaluate": "EVALUATE",
}


def _trace_key(row: dict) -> tuple[str, str] | None:
    """(process without its workflow path, tag) of a trace row: the old rule's key."""
    proc = row.get("process") or ""
    tag = row.get("tag") or ""
    name = row.get("name") or ""
    if not proc and name:
        proc = name.split(" (")[0]
    if (not tag or tag == "-") and "(" in name:
        tag = name[name.index("(") + 1 : name.rindex(")")] if ")" in name else ""
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
