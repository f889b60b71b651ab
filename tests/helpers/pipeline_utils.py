"""Helpers for tests that run the real Nextflow pipeline (no mocks): launch, locate outputs, parse the trace."""

from __future__ import annotations

import csv
import os
import subprocess
import time
from pathlib import Path
from typing import NamedTuple

from helpers.environment import ROOT

MAIN_NF = ROOT / "main.nf"


TEST_CONFIG = ROOT / "tests" / "nextflow.config"
#: the failures injected into the session's test-profile run (fixture ``test_run``; tests/nextflow.config): BIGWIG's
#: first attempts exit 137 (as if OOM-killed), GENIE3_MERGE's 75 (an output another process is writing)
TEST_RUN_FAULTS = "BIGWIG:137,GENIE3_MERGE:75"
#: tests/nextflow.config's switches (failures, holds, HTML reports) that a test's Nextflow driver gets only where its
#: caller sets them, never from the environment pytest runs in
TEST_SWITCHES = ("CHROMAFLOW_TEST_FAIL", "CHROMAFLOW_TEST_HOLD", "CHROMAFLOW_TEST_GATE", "CHROMAFLOW_TEST_REPORTS")


class PipelineRun(NamedTuple):
    """A finished pipeline run: its launch folder, ``--outdir``, the text of its Nextflow log and its trace file."""

    work: Path
    outdir: Path
    log: str
    trace: Path


def nextflow_env(env: dict | None = None) -> dict:
    """The environment of a test's Nextflow driver (offline, no ANSI log, small heap)."""
    full_env = dict(os.environ)
    full_env.setdefault("NXF_OFFLINE", "true")
    full_env["NXF_ANSI_LOG"] = "false"
    full_env.setdefault("NXF_OPTS", "-Xms256m -Xmx1g")
    for k in TEST_SWITCHES:
        full_env.pop(k, None)
    if env:
        full_env.update(env)
    return full_env


def nextflow_cmd(args: list[str], test_config: bool = True) -> list[str]:
    """``nextflow run main.nf``, by default with the test-only config (tests/nextflow.config: fault injection,
    holds, and an --outdir default for nf-test's module specs)."""
    extra = ["-c", str(TEST_CONFIG)] if test_config else []
    return ["nextflow", "run", str(MAIN_NF), "-ansi-log", "false", *extra, *args]


def wait_for(cond, timeout: float, what: str, proc: subprocess.Popen | None = None, log: Path | None = None) -> None:
    """Poll ``cond()`` until true; an AssertionError naming ``what`` after ``timeout`` s, or at once when ``proc`` (a
    driver that must keep running meanwhile) has ended -- with the end of ``log``, where given."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(
                f"the run ended (exit {proc.returncode}) while waiting for {what}:\n"
                + (log.read_text()[-3000:] if log else "")
            )
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}" + (f":\n{log.read_text()[-3000:]}" if log else ""))


def run_nextflow(
    args: list[str],
    cwd: Path,
    env: dict | None = None,
    timeout: int = 900,
    check: bool = True,
    test_config: bool = True,
) -> subprocess.CompletedProcess:
    """Run ``nextflow run main.nf <args>`` in ``cwd`` (its own .nextflow/ and work/) and return the result."""
    full_env = nextflow_env(env)
    cmd = nextflow_cmd(args, test_config)
    res = subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)
    if check:
        check_nextflow(res, cwd)
    return res


def check_nextflow(res: subprocess.CompletedProcess, cwd: Path) -> None:
    """Fail with the run's stdout, stderr and log tail when the Nextflow run in ``cwd`` did not exit 0."""
    if res.returncode != 0:
        log = cwd / ".nextflow.log"
        tail = log.read_text()[-4000:] if log.exists() else ""
        raise AssertionError(
            f"nextflow failed "
            f"({res.returncode})\nSTDOUT:\n{res.stdout[-4000:]}\nSTDERR:\n{res.stderr[-4000:]}\nLOG:\n{tail}"
        )


def trace_file(outdir: Path) -> Path:
    """The (single) execution trace file in ``outdir/pipeline_info``."""
    traces = sorted((outdir / "pipeline_info").glob("execution_trace_*.txt"))
    assert traces, f"no execution trace in {outdir / 'pipeline_info'}"
    return traces[-1]


def read_trace_file(path: Path) -> list[dict]:
    with open(path) as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def read_trace(outdir: Path) -> list[dict]:
    """Rows of the (single) execution trace file in ``outdir/pipeline_info``."""
    return read_trace_file(trace_file(outdir))


class LocalHttpServer:
    """A static file server on loopback (http://127.0.0.1:<port>/), for samplesheet URLs in tests."""

    def __init__(self, directory: Path):
        import functools
        import http.server
        import threading

        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args, **kwargs) -> None:
                pass

        handler = functools.partial(Quiet, directory=str(directory))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "LocalHttpServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def free_port() -> int:
    """A loopback port nobody listens on (for a URL whose connection is refused)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


RENDER_CONFIGS = ROOT / "tests" / "pipeline" / "nextflow" / "render_configs.nf"
VALIDATE_SHEETS = ROOT / "tests" / "pipeline" / "nextflow" / "validate_sheets.nf"


def render_configs(profile_lists: list[str], cwd: Path) -> dict[str, str]:
    """{profile list: the project's flat configuration under it}, as ``nextflow config <root> -profile <list> -flat``
    prints it, all rendered by Nextflow's own code in one JVM (tests/pipeline/nextflow/render_configs.nf); one
    launch instead of one per list (test_cloud_profiles.py compares a rendering with the command's output)."""
    res = subprocess.run(
        [
            "nextflow",
            "-q",
            "run",
            str(RENDER_CONFIGS),
            "-ansi-log",
            "false",
            "--root",
            str(ROOT),
            "--profiles",
            ";".join(profile_lists),
        ],
        cwd=cwd,
        env=nextflow_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    rendered, current, lines = {}, None, []
    for line in res.stdout.splitlines(keepends=True):
        if line.startswith("BEGIN\t"):
            current, lines = line.rstrip("\n").split("\t", 1)[1], []
        elif line.startswith("END\t"):
            rendered[current], current = "".join(lines), None
        elif line.startswith("ERROR\t"):
            _, profiles, message = line.rstrip("\n").split("\t", 2)
            raise AssertionError(f"nextflow config -profile {profiles}: {message}")
        elif current is not None:
            lines.append(line)
    assert sorted(rendered) == sorted(profile_lists), res.stdout[-4000:]
    return rendered


def validate_sheets(
    cwd: Path, sheets, train_sheets=(), schema: Path | None = None, train_schema: Path | None = None
) -> dict[str, tuple[str, str]]:
    """{sheet path: (OK|ERROR, rows JSON or message)} from one run of the validation driver (one JVM for all);
    ``schema``: a sheet schema file read instead of the one nextflow_schema.json names (for both sheets, unless
    ``train_schema`` names the train sheets' own)."""
    cmd = ["nextflow", "run", str(VALIDATE_SHEETS), "-ansi-log", "false"]
    if schema is not None:
        cmd += ["--sheet_schema", str(schema)]
    if train_schema is not None:
        cmd += ["--train_sheet_schema", str(train_schema)]
    if sheets:  # an empty value would reach the driver as `true`
        cmd += ["--sheets", ",".join(map(str, sheets))]
    if train_sheets:
        cmd += ["--train_sheets", ",".join(map(str, train_sheets))]
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600, env=nextflow_env())
    assert res.returncode == 0, res.stdout + res.stderr
    results = {}
    for line in res.stdout.splitlines():
        if line.startswith("RESULT\t"):
            _, sheet, kind, rest = line.split("\t", 3)
            results[sheet] = (kind, rest)
    return results
