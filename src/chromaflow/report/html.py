"""The benchmark report's HTML: self-contained (plots are base64 PNGs from matplotlib, Agg), one function per
section of the page."""

from __future__ import annotations

import base64
import html
import io
from typing import Any

from .units import BP_PER_MBP, DATA_WAIT_ALARM, NA, fmt_bytes, fmt_hours, fmt_rate, fmt_s


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
    """Bar charts of each stage's throughput: Mbp/s (log scale) and GENIE3 targets/s; the figure as a base64 PNG."""
    plt = _plt()
    bp = [s for s in stages if s["bp_per_s"]]
    tg = [s for s in stages if s["targets_per_s"]]
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [3, 1]})
    ax = axes[0]
    if bp:
        names = [s["stage"] for s in bp]
        vals = [s["bp_per_s"] / BP_PER_MBP for s in bp]
        bars = ax.bar(names, vals, color=["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3"][: len(vals)])
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
    """Per stage, the tasks' wall time against their subsequences with the stage's fitted line; the figure as a
    base64 PNG."""
    plt = _plt()
    withs = [s for s in stages if s["fit_points"] > 0]
    n = max(1, len(withs))
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.8), squeeze=False)
    if not withs:
        axes[0][0].text(0.5, 0.5, "no stage reported subsequences", ha="center", va="center")
    for ax, s in zip(axes[0], withs):
        pts = [
            (t["subsequences"], t["wall_s"])
            for t in tasks
            if t["stage"] == s["stage"] and t["subsequences"] is not None and t["wall_s"] is not None
        ]
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        ax.scatter(xs, ys, color="#4C72B0", zorder=3, label="tasks")
        fit = s["fit"]
        if fit:
            x0, x1 = 0, max(xs) * 1.05
            ax.plot(
                [x0, x1],
                [fit["intercept_s"], fit["intercept_s"] + fit["slope_s_per_subsequence"] * x1],
                color="#C44E52",
                label=(
                    f"{fit['slope_s_per_subsequence'] * 1000:.3g} ms/subseq "
                    f"+ {fit['intercept_s']:.3g} s (R²={fit['r2']:.2f})"
                ),
            )
            ax.legend(fontsize=8, loc="upper left")
        else:
            ax.text(
                0.5,
                0.92,
                f"{len(pts)} point(s) with distinct sizes < 2: no fit",
                ha="center",
                transform=ax.transAxes,
                fontsize=9,
                color="#C44E52",
            )
        ax.set_xlabel("subsequences in task")
        ax.set_ylabel("wall time (s)")
        ax.set_title(s["stage"])
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    fig.suptitle("Wall time vs subsequences (Predmoter-style), this run")
    fig.tight_layout()
    return _png(fig)


#: above this many tasks a per-task chart is a smear of unreadable labels (a sheet of 100 assemblies): the plots then
#: show each stage's distribution instead, and name the few tasks at the top
PER_TASK_MAX = 40


def _task_label(t: dict) -> str:
    return " ".join(str(x) for x in (t["stage"], t.get("assembly"), t.get("part")) if x)


def _distribution(tasks: list[dict], values: list[float], ylabel: str, title: str, alarm: float | None = None) -> str:
    """One box per stage with every task as a point (jittered, seeded: the same report for the same run), and the
    five tasks with the highest values named beside it."""
    import numpy as np

    values_by_stage: dict[str, list[float]] = {}
    for t, v in zip(tasks, values):
        values_by_stage.setdefault(t["stage"], []).append(v)
    order = sorted(range(len(values)), key=lambda i: (-values[i], _task_label(tasks[i])))[:5]
    top = [(_task_label(tasks[i]), values[i]) for i in order]
    plt = _plt()
    names = list(values_by_stage)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(names) + 4.5), 3.8))
    ax.boxplot([values_by_stage[n] for n in names], showfliers=False, widths=0.5)
    rng = np.random.default_rng(0)
    for i, n in enumerate(names, start=1):
        vs = values_by_stage[n]
        ax.scatter(i + rng.uniform(-0.18, 0.18, len(vs)), vs, s=9, alpha=0.55, color="#4C72B0", zorder=3)
    ax.set_xticks(range(1, len(names) + 1))
    ax.set_xticklabels([f"{n}\n({len(values_by_stage[n])} tasks)" for n in names], fontsize=8)
    if alarm is not None:
        ax.axhline(alarm, color="black", ls="--", lw=1, label="10 % alarm")
        ax.legend(fontsize=8, loc="upper left")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if top:
        ax.text(
            1.02,
            1.0,
            "highest:\n" + "\n".join(f"{lab}: {val:,.1f}" for lab, val in top),
            transform=ax.transAxes,
            va="top",
            ha="left",
            fontsize=8,
            family="monospace",
        )
    fig.tight_layout()
    return _png(fig)


def plot_data_wait(tasks: list[dict]) -> str | None:
    """Prediction data-wait (% of the loop) per task, bars above the 10 % alarm in red (per stage distributions past
    PER_TASK_MAX tasks); the figure as a base64 PNG, None when no task reports it."""
    ts = [t for t in tasks if t["data_wait_pct"] is not None]
    if not ts:
        return None
    if len(ts) > PER_TASK_MAX:
        return _distribution(
            ts,
            [t["data_wait_pct"] for t in ts],
            "data-wait (% of prediction loop)",
            f"Prediction data-wait, {len(ts)} tasks",
            alarm=100 * DATA_WAIT_ALARM,
        )
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(5, 0.8 * len(ts) + 2), 3.6))
    labels = [
        " ".join(str(x) for x in (t.get("assembly"), t.get("part"), t.get("setting")) if x) or t["stage"] for t in ts
    ]
    vals = [t["data_wait_pct"] for t in ts]
    ax.bar(range(len(ts)), vals, color=["#C44E52" if v > 100 * DATA_WAIT_ALARM else "#55A868" for v in vals])
    ax.axhline(100 * DATA_WAIT_ALARM, color="black", ls="--", lw=1, label="10 % alarm")
    return _per_task_bars(
        fig, ax, range(len(ts)), labels, 30, "data-wait (% of prediction loop)", "Prediction data-wait per task"
    )


def plot_memory(tasks: list[dict]) -> str | None:
    """Peak memory (MiB) per task, from the metrics and from the trace (per stage distributions of the larger past
    PER_TASK_MAX tasks); the figure as a base64 PNG, None when no task reports it."""
    ts = [t for t in tasks if t["peak_rss_bytes"] or t["trace_peak_rss_bytes"]]
    if not ts:
        return None
    if len(ts) > PER_TASK_MAX:  # the larger of the two figures of each task, per stage
        vals = [max(t["peak_rss_bytes"] or 0, t["trace_peak_rss_bytes"] or 0) / 2**20 for t in ts]
        return _distribution(ts, vals, "MiB", f"Peak memory per task, {len(ts)} tasks (size memory requests from this)")
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(ts) + 2), 3.6))
    labels = [_task_label(t) for t in ts]
    x = list(range(len(ts)))
    ax.bar([i - 0.2 for i in x], [(t["peak_rss_bytes"] or 0) / 2**20 for t in ts], 0.4, label="metrics peak RSS")
    ax.bar([i + 0.2 for i in x], [(t["trace_peak_rss_bytes"] or 0) / 2**20 for t in ts], 0.4, label="trace peak_rss")
    return _per_task_bars(fig, ax, x, labels, 35, "MiB", "Peak memory per task (size memory requests from this)")


def _per_task_bars(fig, ax, x, labels: list[str], rotation: int, ylabel: str, title: str) -> str:
    """Ticks (one per task), axis label, title and legend of a per-task bar chart; the figure as a base64 PNG."""
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=rotation, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
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
        body.append(
            "<tr>"
            + "".join(f'<td class="l">{_e(c)}</td>' if i < left else f"<td>{_e(c)}</td>" for i, c in enumerate(r))
            + "</tr>"
        )
    return f"<table class='sortable'><tr>{h}</tr>{''.join(body)}</table>"


#: click a column header to sort a table by it (again: the other way); numbers by value (units and thousands
#: separators ignored), text alphabetically. Plain script, no library: the report stays one self-contained file.
_SORT_JS = """
document.querySelectorAll('table.sortable').forEach(function (t) {
  var head = t.rows[0];
  Array.prototype.forEach.call(head.cells, function (th, col) {
    th.style.cursor = 'pointer'; th.title = 'sort by this column';
    th.addEventListener('click', function () {
      var rows = Array.prototype.slice.call(t.rows, 1), asc = th.dataset.dir !== 'asc';
      var key = function (r) { var s = r.cells[col] ? r.cells[col].textContent : '';
        var n = parseFloat(s.replace(/,/g, '')); return isNaN(n) ? s.toLowerCase() : n; };
      rows.sort(function (a, b) { var x = key(a), y = key(b);
        if (typeof x !== typeof y) { x = String(x); y = String(y); }
        return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1); });
      rows.forEach(function (r) { t.tBodies[0].appendChild(r); });
      Array.prototype.forEach.call(head.cells, function (h) { delete h.dataset.dir; });
      th.dataset.dir = asc ? 'asc' : 'desc';
    });
  });
});
"""


def _v(x: Any, fmt: str = "{:.4g}") -> str:
    if x is None:
        return ""
    if isinstance(x, float):
        return fmt.format(x)
    return str(x)


def _head(rep: dict) -> list[str]:
    mach = rep["machine"]
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>chromaflow benchmark report</title>"
        f"<style>{_CSS}</style></head><body>",
        f"<h1>chromaflow benchmark report</h1><p class='note'>{_e(rep['source'])} · generated "
        f"{_e(rep['generated'])} · chromaflow {_e(mach.get('chromaflow'))} · {len(rep['tasks'])} task(s)</p>",
    ]
    for n in rep["notes"]:
        parts.append(f"<p class='note'>Note: {_e(n)}</p>")
    return parts


def _summary(rep: dict) -> list[str]:
    rows = [
        [
            s["stage"],
            s["tasks"],
            ", ".join(s["devices"]),
            _v(s["bp"], "{:.0f}"),
            _v(s["subsequences"], "{:.0f}"),
            fmt_s(s["wall_s"]),
            fmt_s(s["cpu_s"]),
            fmt_rate(s["bp_per_s"]),
            _v(s["subsequences_per_s"]) or NA,
            _v(s["targets_per_s"]) or "",
            _v(s["data_wait_pct_max"], "{:.1f}"),
            fmt_bytes(s["peak_rss_bytes_max"]),
            fmt_bytes(s["peak_gpu_bytes_max"]) if s["peak_gpu_bytes_max"] else "",
        ]
        for s in rep["stages"]
    ]
    return [
        "<h2 id='summary'>Stage summary</h2>",
        _table(
            [
                "stage",
                "tasks",
                "device",
                "Σbp",
                "Σsubsequences",
                "Σwall",
                "ΣCPU",
                "rate (Σbp÷Σwall)",
                "subseq/s",
                "targets/s",
                "max data-wait %",
                "max peak RSS",
                "max peak GPU mem",
            ],
            rows,
            3,
        ),
    ]


def _throughput(rep: dict) -> list[str]:
    return [
        "<h2 id='throughput'>Throughput per stage</h2>"
        "<p class='note'>Per task (one worker): Σbp ÷ Σwall over the stage's tasks. Tiny test inputs are "
        "dominated by start-up cost; run <code>chromaflow bench</code> for steady-state rates.</p>",
        f"<img alt='throughput per stage' src='data:image/png;base64,{plot_throughput(rep['stages'])}'>",
    ]


def _scaling(rep: dict) -> list[str]:
    tasks, stages = rep["tasks"], rep["stages"]
    parts = [
        "<h2 id='scaling'>Wall time vs subsequences</h2><p class='note'>Each point is one task; the line is "
        "a least-squares fit: slope = marginal seconds per subsequence, intercept = fixed start-up cost "
        "(model load, file open). A stage with fewer than 2 distinct task sizes gets no fit.</p>",
        f"<img alt='wall time vs subsequences' src='data:image/png;base64,{plot_wall_vs_subsequences(tasks, stages)}'>",
    ]
    fits = [
        [
            s["stage"],
            s["fit_points"],
            *(
                ["no fit (< 2 distinct sizes)", "", ""]
                if not s["fit"]
                else [
                    f"{s['fit']['slope_s_per_subsequence'] * 1000:.4g} ms",
                    f"{s['fit']['intercept_s']:.4g} s",
                    f"{s['fit']['r2']:.3f}",
                ]
            ),
        ]
        for s in stages
        if s["fit_points"]
    ]
    if fits:
        parts.append(_table(["stage", "points", "slope (per subsequence)", "intercept", "R²"], fits))
    return parts


def _data_wait(rep: dict) -> list[str]:
    tasks = rep["tasks"]
    parts = [
        "<h2 id='datawait'>Data-wait and GPU utilisation</h2><p class='note'>data-wait = time the "
        "prediction loop waited for the h5 reader ÷ loop time (LightlyTrain's data_time ÷ (data_time + "
        "batch_time)); above 10 % the model (GPU) is starved. GPU utilisation is at most 1 − data-wait.</p>"
    ]
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
    return parts


def _memory(rep: dict) -> list[str]:
    mem = plot_memory(rep["tasks"])
    return [
        "<h2 id='memory'>Peak memory</h2>",
        f"<img alt='peak memory per task' src='data:image/png;base64,{mem}'>"
        if mem
        else "<p class='note'>No memory figures.</p>",
    ]


def _extrapolation(rep: dict) -> list[str]:
    ex = rep["extrapolation"]
    xr = [
        [
            r["stage"],
            r["worker_kind"],
            fmt_rate(r["bp_per_s"]),
            r["strands"],
            fmt_hours(r["hours_per_gbp"]),
            fmt_hours(r["hours_per_genome"]),
            fmt_hours(r["hours_total"]),
            r["why_na"] or "",
        ]
        for r in ex["rows"]
    ]
    return [
        "<h2 id='extrapolation'>Extrapolation</h2>",
        f"<p>For N = {ex['genomes']} genomes of G = {ex['genome_gbp']} Gbp on K = {ex['workers']} "
        f"workers, from each stage's measured rate r:</p><span class='formula'>{_e(ex['formula'])}</span>",
        _table(
            [
                "stage",
                "worker",
                "rate r",
                "s",
                "h per Gbp processed",
                f"h per {ex['genome_gbp']} Gbp genome",
                f"h for {ex['genomes']} genomes on {ex['workers']} workers",
                "note",
            ],
            xr,
            2,
        ),
        "<p class='note'>Rates from tiny inputs include start-up cost and understate throughput; "
        "CPU rates depend on the task's threads. For planning use rates from <code>chromaflow bench</code> "
        "or a real genome.</p>",
    ]


def _tasks(rep: dict) -> list[str]:
    trows = [
        [
            t["stage"],
            t.get("assembly") or "",
            t.get("part") or "",
            t.get("device") or "",
            _v(t["bp"], "{:.0f}"),
            _v(t["subsequences"], "{:.0f}"),
            _v(t["wall_s"], "{:.3f}"),
            _v(t["cpu_s"], "{:.3f}"),
            _v(t["data_wait_pct"], "{:.1f}"),
            fmt_rate(t["bp_per_s"]) if t["bp_per_s"] else "",
            _v(t["subsequences_per_s"]),
            fmt_bytes(t["peak_rss_bytes"]) if t["peak_rss_bytes"] else "",
            fmt_bytes(t["peak_gpu_bytes"]) if t["peak_gpu_bytes"] else "",
            _v(t["trace_realtime_s"], "{:.3f}"),
            _v(t["trace_cpu_pct"], "{:.1f}"),
            fmt_bytes(t["trace_peak_rss_bytes"]) if t["trace_peak_rss_bytes"] else "",
            _v(t["trace_attempts"]),
        ]
        for t in rep["tasks"]
    ]
    return [
        "<h2 id='tasks'>Tasks</h2>",
        _table(
            [
                "stage",
                "assembly",
                "shard",
                "device",
                "bp",
                "subseq",
                "wall s",
                "CPU s",
                "data-wait %",
                "bp/s",
                "subseq/s",
                "peak RSS",
                "peak GPU",
                "trace realtime s",
                "trace %cpu",
                "trace peak_rss",
                "attempts",
            ],
            trows,
            4,
        ),
    ]


def _versions(rep: dict) -> list[str]:
    tools: dict[str, set] = {}
    for _, tv in rep["versions"].items():
        for k, v in tv.items():
            tools.setdefault(k, set()).add(v)
    return [
        "<h2 id='versions'>Software versions</h2>",
        _table(["tool", "version(s)"], [[k, ", ".join(sorted(v))] for k, v in sorted(tools.items())])
        if tools
        else "<p class='note'>No software_versions.yml given.</p>",
    ]


def _machine(rep: dict) -> list[str]:
    mach = rep["machine"]
    gpus = (
        "; ".join(f"{g['name']} ({g['memory']})" for g in mach.get("gpus") or []) or "none detected (nvidia-smi absent)"
    )
    mrows = [
        ["CPU model", mach.get("cpu_model")],
        ["cores", mach.get("logical_cpus")],
        ["usable CPUs", mach.get("usable_cpus")],
        ["memory", fmt_bytes(mach.get("memory_bytes"))],
        ["GPU", gpus],
        ["OS", mach.get("os")],
        ["Python", mach.get("python")],
        ["report host", mach.get("host")],
        ["task hosts", ", ".join(rep["hosts"]) or NA],
    ]
    return [
        "<h2 id='machine'>Machine</h2>",
        _table(["", ""], mrows, 2),
        "<p class='note'>The machine is where this report was written; tasks may have run on other hosts "
        "(listed above). Read it alongside Nextflow's execution_report/timeline in pipeline_info/.</p>",
    ]


#: the page's sections, in order
SECTIONS = (_head, _summary, _throughput, _scaling, _data_wait, _memory, _extrapolation, _tasks, _versions, _machine)


def render_html(rep: dict) -> str:
    """The report ``rep`` as one self-contained HTML page."""
    parts = [line for section in SECTIONS for line in section(rep)]
    parts.append(f"<script>{_SORT_JS}</script></body></html>")
    return "\n".join(parts)
