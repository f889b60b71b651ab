"""Resume after a kill -9 of the Nextflow driver in the middle of each long process (issue 14 §2).

One launch folder, a chain of runs of the real pipeline (-profile test), each killed in the middle of other long
processes and resumed once: run 1 holds FASTA2H5 (asmB's task only, so asmA's branch goes on) and GENIE3; its resume
(run 2) holds asmB's first PREDICT shard and asmA's BIGWIG (one held task each: the test profile's two task slots,
and asmA's branch reaches BIGWIG while asmB's shard is held); run 3 resumes to the end. Holding (tests/nextflow.config:
CHROMAFLOW_TEST_HOLD) makes every task of the process write its work directory into a gate folder and wait at the
start of its work; nothing the task computes changes. Once a held task of every held process is running and no
other task is, the driver JVM gets SIGKILL. The held tasks are then released: as orphans of the dead driver they
run to the end and write their outputs into their work directories -- what a real kill leaves behind. Then one
`-resume`, and for each held process:

* every task the killed run completed (its trace) is CACHED in the resumed run's trace, the held process's tasks
  ran again (and at least one of them in the very directory where the orphan had left its output; before this fix
  the rerun task found the orphan's output there and failed with "output exists (use --force)");
* the last resume succeeds and its outputs equal the uninterrupted run of the session (fixture ``test_run``).

One chain instead of one kill-and-resume pair per process: 3 Nextflow runs instead of 8, each later run mostly
cached (the suite's time, issue 28); every kill is still followed by exactly one resume.
"""

from __future__ import annotations

import csv
import gzip
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np
import pyBigWig
import pytest

from helpers.pipeline_utils import nextflow_cmd, nextflow_env, run_nextflow, wait_for

pytestmark = pytest.mark.pipeline

# process -> (hold spec for tests/nextflow.config, a file its task writes, processes certainly finished before)
HELD = {
    "FASTA2H5": ("FASTA2H5:asmB", "*.h5", set()),
    "PREDICT": ("PREDICT:asmB 1", "*_predictions.h5", {"FASTA2H5", "MAKE_TEST_MODEL"}),
    "BIGWIG": ("BIGWIG:asmA", "tracks/*.bw", {"FASTA2H5", "MAKE_TEST_MODEL", "PREDICT", "PREDICT_VIEW"}),
    "GENIE3": ("GENIE3", "*.genie3.part.npz", {"GENIE3_PLAN"}),
}
#: the processes each killed run of the chain holds (GENIE3's branch is independent of the tracks' branch)
CHAIN = [("FASTA2H5", "GENIE3"), ("PREDICT", "BIGWIG")]


def _trace(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with open(path) as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    return [r for r in rows if r.get("status")]


def _running_dirs(work: Path) -> set[Path]:
    """Task directories whose script started (.command.begin) and did not finish (.exitcode)."""
    return {p.parent for p in work.glob("*/*/.command.begin") if not (p.parent / ".exitcode").exists()}


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


@dataclass
class KilledRun:
    """A run of the chain killed with its held tasks running, and the orphans it left."""

    held: dict[str, set[Path]] = field(default_factory=dict)  # process -> held task directories
    orphan_outputs: dict[str, set[Path]] = field(default_factory=dict)  # process -> held dirs with output, exit 0
    trace: list[dict] = field(default_factory=list)
    log: str = ""
    later_traces: list[list[dict]] = field(default_factory=list)  # the traces of the runs that followed, in order


def _kill_mid(launch: Path, outdir: Path, k: int, processes: tuple[str, ...], resume: bool) -> KilledRun:
    work, gate = launch / "work", launch / f"gate{k}"
    gate.mkdir()
    log = launch / f"run{k}.log"
    hold = ",".join(HELD[p][0] for p in processes)
    env = nextflow_env({"CHROMAFLOW_TEST_HOLD": hold, "CHROMAFLOW_TEST_GATE": str(gate)})
    trace_file = outdir / "pipeline_info" / f"execution_trace_run{k}.txt"
    args = [
        "-profile",
        "test",
        "--outdir",
        str(outdir),
        "--trace_report_suffix",
        f"run{k}",
        *(["-resume"] if resume else []),
    ]
    with open(log, "w") as fh:
        # start_new_session: the driver and its tasks form their own process group (cleaned up below)
        proc = subprocess.Popen(
            nextflow_cmd(args), cwd=launch, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    run = KilledRun()

    def read_held() -> None:
        for f in gate.glob("held.*"):
            text = f.read_text().strip()
            if text:
                run.held.setdefault(f.name.split(".")[1], set()).add(Path(text))

    try:
        # a held task of every held process is running, some task has completed, and no other task runs -- for
        # 8 s in a row (longer than Nextflow takes to start the next task after one finished)
        since = [None]

        def quiet() -> bool:
            read_held()
            every = set().union(*run.held.values()) if run.held else set()
            ok = (
                set(run.held) == set(processes)
                and _running_dirs(work) <= every
                and any(r["status"] == "COMPLETED" for r in _trace(trace_file))
            )
            since[0] = (since[0] or time.time()) if ok else None
            return ok and time.time() - since[0] >= 8

        wait_for(quiet, 900, f"held {'+'.join(processes)} tasks in a quiet run {k}", proc, log)
        os.kill(proc.pid, signal.SIGKILL)  # kill -9 of the Nextflow driver (the JVM)
        proc.wait(timeout=30)
        run.log = log.read_text()
        # the orphaned tasks go on, as they do after a real kill: they finish and leave their outputs behind
        (gate / "release").touch()
        every = set().union(*run.held.values())
        wait_for(
            lambda: all((d / ".exitcode").exists() for d in every) and not _running_dirs(work),
            600,
            "the orphaned tasks to finish",
        )
    finally:
        (gate / "release").touch()
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # anything left of the run's process group
        except ProcessLookupError:
            pass
    for p, dirs in run.held.items():
        run.orphan_outputs[p] = {
            d for d in dirs if list(d.glob(HELD[p][1])) and (d / ".exitcode").read_text().strip() == "0"
        }
    run.trace = _trace(trace_file)
    return run


@pytest.fixture(scope="module")
def chain(tmp_path_factory, test_run, nextflow_bin):
    """({process: the killed run that held it}, the last resume's outdir, the last resume's CompletedProcess)."""
    launch = tmp_path_factory.mktemp("resume")
    outdir = launch / "results"
    runs: list[KilledRun] = []
    by_process: dict[str, KilledRun] = {}
    for k, processes in enumerate(CHAIN, start=1):
        run = _kill_mid(launch, outdir, k, processes, resume=k > 1)
        for earlier in runs:
            earlier.later_traces.append(run.trace)
        runs.append(run)
        by_process.update({p: run for p in processes})
    last = run_nextflow(
        ["-profile", "test", "--outdir", str(outdir), "--trace_report_suffix", "last", "-resume"], cwd=launch
    )
    for earlier in runs:
        earlier.later_traces.append(_trace(outdir / "pipeline_info" / "execution_trace_last.txt"))
    return by_process, outdir, last


@pytest.mark.parametrize("process", sorted(HELD))
def test_kill_driver_mid_process_then_one_resume(process, chain):
    by_process, _, _ = chain
    run = by_process[process]
    assert "chromaflow: done" not in run.log
    held = run.held[process]
    assert run.orphan_outputs[process], (
        f"no orphaned {process} task wrote its output: the test did not reproduce the kill"
    )
    completed_first = {r["name"] for r in run.trace if r["status"] == "COMPLETED"}
    assert not [r for r in run.trace if Path(r["workdir"]) in held and r["status"] == "COMPLETED"]

    # everything the killed run had finished came from the cache of the resume that followed ... but PREDICT_MERGE,
    # whose merged file was moved to --outdir (work/ keeps the predictions once, as the shards): it is written again
    # from the cached shards (docs/predict.md)
    status = {r["name"]: r["status"] for r in run.later_traces[0]}
    merges = {n for n in completed_first if n.split(" (")[0].endswith(":PREDICT_MERGE")}
    assert completed_first - merges and all(status.get(n) == "CACHED" for n in completed_first - merges), (
        sorted(completed_first),
        status,
    )
    assert all(status.get(n) == "COMPLETED" for n in merges), (sorted(merges), status)

    # ... and the held process ran again, at least once in the directory its orphan had written to: in that resume,
    # or, where that resume was killed before the process's tasks got a turn (GENIE3's tasks can wait for a CPU
    # while run 2's held PREDICT task holds the test profile's), in the first later run that ran them
    def reruns(trace):
        return [r for r in trace if r["name"].split(" (")[0].endswith(f":{process}") and r["status"] != "CACHED"]

    second = next((t for t in run.later_traces if reruns(t)), [])
    rerun = reruns(second)
    assert rerun and all(r["status"] == "COMPLETED" for r in rerun), (process, [len(t) for t in run.later_traces])
    cached = {r["name"].split(" (")[0].split(":")[-1] for r in second if r["status"] == "CACHED"}
    _, _, upstream = HELD[process]
    assert upstream <= cached, (process, sorted(cached))
    assert {Path(r["workdir"]) for r in rerun} & run.orphan_outputs[process], (
        "no task ran again where its orphan had left output"
    )


def test_the_last_resume_finishes_with_the_outputs_of_an_uninterrupted_run(chain, test_run):
    _, outdir, last = chain
    reference = test_run.outdir
    assert "chromaflow: done" in last.stdout
    status = {r["name"]: r["status"] for r in _trace(outdir / "pipeline_info" / "execution_trace_last.txt")}
    assert status and all(s in ("CACHED", "COMPLETED") for s in status.values()), status
    _assert_outputs_equal(outdir, reference)
