"""Helpers for tests that run the real Nextflow pipeline (no mocks): launch, locate outputs, parse the trace."""
from __future__ import annotations

import csv
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAIN_NF = ROOT / "main.nf"


def run_nextflow(args: list[str], cwd: Path, env: dict | None = None, timeout: int = 900,
                 check: bool = True) -> subprocess.CompletedProcess:
    """Run ``nextflow run main.nf <args>`` in ``cwd`` (its own .nextflow/ and work/) and return the result."""
    full_env = dict(os.environ)
    full_env.setdefault("NXF_OFFLINE", "true")
    full_env["NXF_ANSI_LOG"] = "false"
    full_env.setdefault("NXF_OPTS", "-Xms256m -Xmx1g")
    if env:
        full_env.update(env)
    cmd = ["nextflow", "run", str(MAIN_NF), "-ansi-log", "false", *args]
    res = subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)
    if check and res.returncode != 0:
        log = (cwd / ".nextflow.log")
        tail = log.read_text()[-4000:] if log.exists() else ""
        raise AssertionError(
            f"nextflow failed ({res.returncode})\nSTDOUT:\n{res.stdout[-4000:]}\nSTDERR:\n{res.stderr[-4000:]}\nLOG:\n{tail}")
    return res


def read_trace(outdir: Path) -> list[dict]:
    """Rows of the (single) execution trace file in ``outdir/pipeline_info``."""
    traces = sorted((outdir / "pipeline_info").glob("execution_trace_*.txt"))
    assert traces, f"no execution trace in {outdir / 'pipeline_info'}"
    with open(traces[-1]) as fh:
        return list(csv.DictReader(fh, delimiter="\t"))
