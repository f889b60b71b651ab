"""Resume after a kill -9 of the Nextflow driver in the middle of each long process (issue 14 §2).

For FASTA2H5, PREDICT, BIGWIG and GENIE3 in turn: the real pipeline (-profile test) runs with every task of that
process held at the start of its work (tests/nextflow.config: CHROMAFLOW_TEST_HOLD makes the task write its work
directory into a gate folder and wait; nothing the task computes changes). Once a held task is running and no
other task is, the driver JVM gets SIGKILL. The held tasks are then released: as orphans of the dead driver they
run to the end and write their outputs into their work directories -- what a real kill leaves behind. Then one
`-resume`:

* it must succeed (before this fix the rerun task found the orphan's output in the same work directory and failed
  with "output exists (use --force)");
* every task the killed run completed (its trace) is CACHED in the resumed run's trace, the held process's tasks
  ran again (and at least one of them in the very directory where the orphan had left its output);
* the outputs equal the uninterrupted run of the session (fixture ``test_run``).
"""
from __future__ import annotations

import csv
import gzip
import os
import signal
import subprocess
import time
from pathlib import Path

import h5py
import numpy as np
import pyBigWig
import pytest

from helpers.pipeline_utils import nextflow_cmd, nextflow_env, run_nextflow

pytestmark = pytest.mark.pipeline

# process -> (hold spec for tests/nextflow.config, a file its task writes, processes certainly finished before)
# FASTA2H5 holds only asmB's task, so asmA's branch of the run goes on and finishes before the kill.
HELD = {
    "FASTA2H5": ("FASTA2H5:asmB", "*.h5", set()),
    "PREDICT": ("PREDICT", "*_predictions.h5", {"FASTA2H5", "MAKE_TEST_MODEL"}),
    "BIGWIG": ("BIGWIG", "tracks/*.bw", {"FASTA2H5", "MAKE_TEST_MODEL", "PREDICT", "PREDICT_MERGE"}),
    "GENIE3": ("GENIE3", "*.genie3.part.npz", {"GENIE3_PLAN"}),
}


def _trace(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with open(path) as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    return [r for r in rows if r.get("status")]


def _running_dirs(work: Path) -> set[Path]:
    """Task directories whose script started (.command.begin) and did not finish (.exitcode)."""
    return {p.parent for p in work.glob("*/*/.command.begin") if not (p.parent / ".exitcode").exists()}


def _wait(cond, timeout: float, what: str, proc: subprocess.Popen | None = None, log: Path | None = None) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the run ended (exit {proc.returncode}) while waiting for {what}:\n"
                                 + (log.read_text()[-3000:] if log else ""))
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}" + (f":\n{log.read_text()[-3000:]}" if log else ""))


def _h5_content(path: Path) -> dict:
    out = {}
    with h5py.File(path) as f:
        f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out


def _bw_content(path: Path) -> dict:
    bw = pyBigWig.open(str(path))
    try:
        return {c: bw.intervals(c) for c in bw.chroms()}
    finally:
        bw.close()


def _assert_outputs_equal(outdir: Path, reference: Path) -> None:
    for asm in ("asmA", "asmB"):
        for rel in (f"{asm}/h5/{asm}.h5", f"{asm}/predictions/{asm}_predictions.h5"):
            a, b = _h5_content(outdir / rel), _h5_content(reference / rel)
            assert a.keys() == b.keys(), rel
            for k in a:
                np.testing.assert_array_equal(a[k], b[k], err_msg=f"{rel}:{k}")
        tracks = sorted(p.name for p in (reference / asm / "tracks").glob("*.bw"))
        assert len(tracks) == 6 and tracks == sorted(p.name for p in (outdir / asm / "tracks").glob("*.bw"))
        for name in tracks:
            assert _bw_content(outdir / asm / "tracks" / name) == _bw_content(reference / asm / "tracks" / name)
    links = "asmA/network/asmA.genie3_links.tsv.gz"
    assert gzip.decompress((outdir / links).read_bytes()) == gzip.decompress((reference / links).read_bytes())
    assert (outdir / "multiqc" / "multiqc_report.html").is_file()
    # no temporary/partial file was published
    assert not [p for p in outdir.rglob("*") if p.name.endswith(".part")]


@pytest.mark.parametrize("process", sorted(HELD))
def test_kill_driver_mid_process_then_one_resume(process, tmp_path, test_run, nextflow_bin):
    _, reference, _ = test_run
    outdir, work, gate = tmp_path / "results", tmp_path / "work", tmp_path / "gate"
    gate.mkdir()
    log = tmp_path / "first.log"
    hold, output, upstream = HELD[process]
    env = nextflow_env({"CHROMAFLOW_TEST_HOLD": hold, "CHROMAFLOW_TEST_GATE": str(gate)})
    first_trace = outdir / "pipeline_info" / "execution_trace_first.txt"
    with open(log, "w") as fh:
        # start_new_session: the driver and its tasks form their own process group (cleaned up below)
        proc = subprocess.Popen(nextflow_cmd(["-profile", "test", "--outdir", str(outdir), "--trace_report_suffix", "first"]),
                                cwd=tmp_path, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    held: set[Path] = set()
    try:
        # a held task is running, some task has completed, and no other task runs -- for 8 s in a row (longer
        # than Nextflow takes to start the next task after one finished)
        since = [None]

        def quiet() -> bool:
            held.update(Path(p.read_text().strip()) for p in gate.glob("held.*") if p.read_text().strip())
            ok = (bool(held) and _running_dirs(work) <= held
                  and any(r["status"] == "COMPLETED" for r in _trace(first_trace)))
            since[0] = (since[0] or time.time()) if ok else None
            return ok and time.time() - since[0] >= 8

        _wait(quiet, 900, f"a held {process} task in a quiet run", proc, log)
        os.kill(proc.pid, signal.SIGKILL)       # kill -9 of the Nextflow driver (the JVM)
        proc.wait(timeout=30)
        assert "chromaflow: done" not in log.read_text()
        # the orphaned tasks go on, as they do after a real kill: they finish and leave their outputs behind
        (gate / "release").touch()
        _wait(lambda: all((d / ".exitcode").exists() for d in held) and not _running_dirs(work), 600,
              "the orphaned tasks to finish")
    finally:
        (gate / "release").touch()
        try:
            os.killpg(proc.pid, signal.SIGKILL)    # anything left of the first run's process group
        except ProcessLookupError:
            pass
    orphan_outputs = {d for d in held if list(d.glob(output)) and (d / ".exitcode").read_text().strip() == "0"}
    assert orphan_outputs, f"no orphaned {process} task wrote its output: the test did not reproduce the kill"
    first = _trace(first_trace)
    completed_first = {r["name"] for r in first if r["status"] == "COMPLETED"}
    assert not [r for r in first if Path(r["workdir"]) in held and r["status"] == "COMPLETED"]

    res = run_nextflow(["-profile", "test", "--outdir", str(outdir), "--trace_report_suffix", "second", "-resume"],
                       cwd=tmp_path)
    assert "chromaflow: done" in res.stdout
    second = _trace(outdir / "pipeline_info" / "execution_trace_second.txt")
    status = {r["name"]: r["status"] for r in second}
    assert all(s in ("CACHED", "COMPLETED") for s in status.values()), status
    # everything the killed run had finished came from the cache ...
    assert completed_first and all(status[n] == "CACHED" for n in completed_first), (sorted(completed_first), status)
    cached = {n.split(" (")[0].split(":")[-1] for n, s in status.items() if s == "CACHED"}
    assert upstream <= cached, (process, sorted(cached))
    # ... and the held process ran again, at least once in the directory its orphan had written to
    rerun = [r for r in second if r["name"].split(" (")[0].endswith(f":{process}") and r["status"] != "CACHED"]
    assert rerun and all(r["status"] == "COMPLETED" for r in rerun)
    assert {Path(r["workdir"]) for r in rerun} & orphan_outputs, "no task ran again where its orphan had left output"
    _assert_outputs_equal(outdir, reference)
