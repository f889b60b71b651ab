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

The work is in the modules beside this one: :mod:`.units` (unit arithmetic), :mod:`.trace` (the Nextflow trace),
:mod:`.tasks` (metrics -> tasks -> stages, extrapolation, warnings), :mod:`.machine` (the machine record),
:mod:`.tables` (TSV and MultiQC files) and :mod:`.html` (plots and the page).
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from ..utils.errors import ChromaflowError
from ..utils.outputs import check_outputs, write_json_atomic, write_text_atomic
from .html import render_html
from .tables import multiqc_json, multiqc_tsv, tasks_tsv
from .tasks import build_report, read_metrics, read_versions, task_from_metrics
from .trace import match_trace, read_trace


#: the files the report writes into its folder (report.html only with ``html_report``)
REPORT_FILES = (
    "benchmark.json",
    "benchmark.tsv",
    "chromaflow_benchmark_mqc.tsv",
    "chromaflow_throughput_mqc.json",
    "report.html",
)


def write_outputs(rep: dict, outdir: str | os.PathLike, *, html_report: bool = True) -> None:
    """Write the report ``rep`` into ``outdir`` (made if missing): benchmark.json, benchmark.tsv, the two MultiQC
    files and, with ``html_report``, report.html."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    bench_json, bench_tsv, mqc_tsv, mqc_json, html_file = (out / name for name in REPORT_FILES)
    write_json_atomic(bench_json, rep)
    write_text_atomic(bench_tsv, tasks_tsv(rep["tasks"]))
    write_text_atomic(mqc_tsv, multiqc_tsv(rep["tasks"]))
    write_json_atomic(mqc_json, multiqc_json(rep["stages"]))
    if html_report:
        write_text_atomic(html_file, render_html(rep))


def add_extrapolation_arguments(p: argparse.ArgumentParser) -> None:
    """Add the extrapolation options to ``p``: genome size (Gbp), number of genomes and parallel workers."""
    p.add_argument(
        "--extrapolate-genome-gbp",
        type=float,
        default=2.2,
        metavar="G",
        help="genome size for the extrapolation table, in Gbp (default 2.2)",
    )
    p.add_argument("--extrapolate-genomes", type=int, default=10, metavar="N", help="number of genomes (default 10)")
    p.add_argument(
        "--extrapolate-workers",
        type=int,
        default=4,
        metavar="K",
        help="GPUs / CPU tasks running in parallel (default 4)",
    )


def check_extrapolation_arguments(args: argparse.Namespace) -> None:
    """Raise ChromaflowError for a genome size that is not a finite number > 0, or fewer than 1 genome or worker."""
    if not (args.extrapolate_genome_gbp > 0 and math.isfinite(args.extrapolate_genome_gbp)):
        raise ChromaflowError(f"--extrapolate-genome-gbp must be > 0, got {args.extrapolate_genome_gbp}")
    if args.extrapolate_genomes < 1:
        raise ChromaflowError(f"--extrapolate-genomes must be >= 1, got {args.extrapolate_genomes}")
    if args.extrapolate_workers < 1:
        raise ChromaflowError(f"--extrapolate-workers must be >= 1, got {args.extrapolate_workers}")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): metrics JSONL, software versions, Nextflow trace, output folder and the
    extrapolation."""
    p.add_argument("--metrics", required=True, help="metrics.jsonl: one stage metrics JSON object per line")
    p.add_argument("--versions", default=None, help="software_versions.yml (optional)")
    p.add_argument(
        "--trace",
        default=None,
        help="Nextflow trace TSV (optional; may be absent or incomplete while the run is going)",
    )
    p.add_argument("--outdir", default=".", help="output directory (default .)")
    add_extrapolation_arguments(p)


def run(args: argparse.Namespace) -> int:
    """Run the command: read the metrics (matched with the trace where given) and versions and write the benchmark
    report files; returns the exit status."""
    check_extrapolation_arguments(args)
    check_outputs(
        [("--outdir", Path(args.outdir) / name) for name in REPORT_FILES],
        [("--metrics", args.metrics), ("--versions", args.versions), ("--trace", args.trace)],
        [("--outdir", args.outdir)],
    )
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
    rep = build_report(
        tasks,
        versions=read_versions(args.versions),
        genome_gbp=args.extrapolate_genome_gbp,
        genomes=args.extrapolate_genomes,
        workers=args.extrapolate_workers,
        notes=notes,
    )
    write_outputs(rep, args.outdir)
    return 0
