"""The benchmark report's tables: benchmark.tsv and the MultiQC custom-content files."""

from __future__ import annotations

from typing import Any

from .units import BP_PER_MBP

#: (column, header, unit) of benchmark.tsv, in order
COLUMNS = [
    ("stage", "stage", ""),
    ("assembly", "assembly", ""),
    ("part", "shard", "i/n"),
    ("device", "device", ""),
    ("threads", "threads", ""),
    ("bp", "bp", "bp"),
    ("subsequences", "subsequences", ""),
    ("wall_s", "wall_s", "s"),
    ("cpu_s", "cpu_s", "s"),
    ("data_wait_pct", "data_wait_pct", "%"),
    ("bp_per_s", "bp_per_s", "bp/s"),
    ("subsequences_per_s", "subsequences_per_s", "1/s"),
    ("peak_rss_bytes", "peak_rss_bytes", "B"),
    ("peak_gpu_bytes", "peak_gpu_bytes", "B"),
    ("batch_size", "batch_size", ""),
    ("num_workers", "num_workers", ""),
    ("targets", "targets", ""),
    ("targets_per_s", "targets_per_s", "1/s"),
    ("trace_realtime_s", "trace_realtime_s", "s"),
    ("trace_cpu_pct", "trace_cpu_pct", "%"),
    ("trace_peak_rss_bytes", "trace_peak_rss_bytes", "B"),
    ("trace_attempts", "trace_attempts", ""),
    ("host", "host", ""),
]


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        if v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.6g}"
    return str(v)


def tasks_tsv(tasks: list[dict]) -> str:
    """The tasks as a TSV: a header of :data:`COLUMNS`, one row per task (an empty cell for a missing value)."""
    lines = ["\t".join(h for _, h, _ in COLUMNS)]
    for t in tasks:
        lines.append("\t".join(_cell(t.get(k)) for k, _, _ in COLUMNS))
    return "\n".join(lines) + "\n"


def multiqc_tsv(tasks: list[dict]) -> str:
    """The tasks as a MultiQC custom-content table: the MultiQC header comments, then one row per task named by
    assembly, stage, part and setting (``#2``... for repeated names)."""
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
    cols = [
        ("wall_s", "wall_s"),
        ("cpu_s", "cpu_s"),
        ("bp", "bp"),
        ("subsequences", "subsequences"),
        ("bp_per_s", "bp_per_s"),
        ("data_wait_pct", "data_wait_pct"),
        ("peak_rss_bytes", "peak_rss_bytes"),
        ("peak_gpu_bytes", "peak_gpu_bytes"),
        ("device", "device"),
    ]
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
    """MultiQC custom content: a bar graph of each stage's throughput in Mbp/s (stages that report bp)."""
    data = {s["stage"]: {"Mbp/s": s["bp_per_s"] / BP_PER_MBP} for s in stages if s["bp_per_s"]}
    return {
        "id": "chromaflow_throughput",
        "section_name": "chromaflow throughput",
        "description": "Measured throughput per stage (Σbp ÷ Σwall over the stage's tasks), Mbp/s per task",
        "plot_type": "bargraph",
        "pconfig": {"id": "chromaflow_throughput_plot", "ylab": "Mbp/s"},
        "data": data,
    }
