"""One run per ``--outdir`` (issue 54 item 1; docs/usage.md, "One run per output folder"), in the real Nextflow.

* The lock (``<outdir>/.chromaflow.lock``): two drivers started at once into one outdir (one runs, the other stops
  with one line naming it), a driver killed with SIGKILL (its lock stays; the next run and a ``-resume`` take it
  over), and the lock's decisions on fabricated holders (another host, a reused pid, a damaged file, several runs
  taking over one stale lock at once), those in one JVM through the pipeline's own functions
  (subworkflows/local/utils_chromaflow/outdir.nf).
* The sample folders' stamps (``<outdir>/<id>/.chromaflow_run.json``): run A then B (B refused), ``-resume`` of A
  (not refused), B with ``--replace_results`` (A's folder replaced whole), then A again (refused: B then A).

Every pipeline run is a ``-stub`` run of the test profile with prediction, GENIE3 and the reports off (two FASTA2H5
tasks), or PREDICT's stubs where a run must publish other files: the JVMs are most of the cost. Holding tasks
(tests/nextflow.config: CHROMAFLOW_TEST_HOLD) keeps a driver inside its run while another starts or a kill comes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from helpers.pipeline_utils import ROOT, nextflow_cmd, nextflow_env, run_nextflow

pytestmark = pytest.mark.pipeline

LOCK = ".chromaflow.lock"
STAMP = ".chromaflow_run.json"
#: the smallest run of the test profile: FASTA2H5 of asmA and asmB, nothing else
SMALL = ["-profile", "test", "-stub", "--skip_predict", "--skip_benchmark", "--skip_genie3"]
#: a run that publishes predictions and no genome h5 (another set of files in <id>/ than SMALL's)
PREDICTIONS_ONLY = [
    "-profile",
    "test",
    "-stub",
    "--predict_from",
    "fasta",
    "--save_h5",
    "false",
    "--skip_tracks",
    "--skip_benchmark",
    "--skip_genie3",
]


def _output(res: subprocess.CompletedProcess) -> str:
    return res.stdout + res.stderr


def _run_name(log: str) -> str:
    m = re.search(r"^Launching `[^`]+` \[([\w-]+)\]", log, re.M)
    assert m, log[-3000:]
    return m.group(1)


def _lines(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if needle in line]


def _tree(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (relative path -> contents; the stubs' files are empty or small)."""
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def _no_task_ran(launch: Path) -> bool:
    return not list((launch / "work").glob("*/*/.command.sh"))


def _start(args: list[str], cwd: Path, env: dict) -> subprocess.Popen:
    """A driver in its own process group (a SIGKILL to the group ends it and its tasks), output to cwd/run.log."""
    cwd.mkdir(parents=True, exist_ok=True)
    with open(cwd / "run.log", "w") as fh:
        return subprocess.Popen(
            nextflow_cmd(args),
            cwd=cwd,
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=nextflow_env(env),
            start_new_session=True,
        )


def _wait(cond, timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def _hold_env(gate: Path) -> dict:
    gate.mkdir(parents=True, exist_ok=True)
    return {"CHROMAFLOW_TEST_HOLD": "FASTA2H5", "CHROMAFLOW_TEST_GATE": str(gate), "CHROMAFLOW_LOCK_HEARTBEAT_S": "1"}


def _kill_group(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)


# ------------------------------------------------------------------------------------------------------------------
# the lock, with real drivers
# ------------------------------------------------------------------------------------------------------------------


def test_two_drivers_at_once_one_runs_the_other_stops_with_one_line(tmp_path, nextflow_bin):
    """Both start at once, each from its own launch folder (and its own report suffix, as two launch seconds would
    give: the same suffix would stop the later one at Nextflow's own 'Trace file already exists'). Both hold their
    FASTA2H5 tasks, so the first to take the lock is still inside its run when the other reaches its check."""
    out, gate = tmp_path / "results", tmp_path / "gate"
    env = _hold_env(gate)
    procs = {
        n: _start([*SMALL, "--outdir", str(out), "--trace_report_suffix", n], tmp_path / n, env) for n in ("d1", "d2")
    }
    try:
        _wait(lambda: any(p.poll() is not None for p in procs.values()), 240, "one driver to stop")
        loser = next(n for n, p in procs.items() if p.poll() is not None)
        winner = next(n for n in procs if n != loser)
        _wait(lambda: list(gate.glob("held.*")), 240, "the other driver's held task")
        assert procs[winner].poll() is None, (tmp_path / winner / "run.log").read_text()[-3000:]
        log = (tmp_path / loser / "run.log").read_text()
        lock = json.loads((out / LOCK).read_text())
        assert procs[loser].returncode == 1, log
        # the one line: the holder's run name, host, driver pid and launch folder
        name = _run_name((tmp_path / winner / "run.log").read_text())
        assert _lines(log, "chromaflow:") == [
            f"chromaflow: --outdir {out} is in use by run {name} (session {lock['session']}, host {lock['host']}, "
            f"pid {procs[winner].pid}, launched from {tmp_path / winner}, started {lock['started']}); wait for it to "
            f"end or choose another --outdir (lock: {out / LOCK})"
        ], log
        assert "Exception" not in log and _no_task_ran(tmp_path / loser)
        # the holder's heartbeat (every second here) moves the lock's mtime
        beat = (out / LOCK).stat().st_mtime
        _wait(lambda: (out / LOCK).stat().st_mtime > beat, 20, "a heartbeat")
        (gate / "release").touch()
        assert procs[winner].wait(timeout=300) == 0, (tmp_path / winner / "run.log").read_text()[-3000:]
    finally:
        for p in procs.values():
            if p.poll() is None:
                _kill_group(p)
    assert not (out / LOCK).exists()  # released at the end
    for asm in ("asmA", "asmB"):
        assert json.loads((out / asm / STAMP).read_text())["launch_dir"] == str(tmp_path / winner)


def _killed_run(k: int, launch: Path, out: Path, gate: Path) -> tuple[dict, str, str]:
    """Run ``k`` of the launch folder, held in FASTA2H5, then its process group killed with SIGKILL: (the lock it
    left, its run name, its log)."""
    proc = _start([*SMALL, "--outdir", str(out), "--trace_report_suffix", f"run{k}"], launch, _hold_env(gate))
    try:
        _wait(lambda: list(gate.glob("held.*")), 240, f"run {k}'s held task")
    finally:
        _kill_group(proc)
    log = (launch / "run.log").read_text()
    lock = json.loads((out / LOCK).read_text())
    assert lock["pid"] == proc.pid, log  # the driver JVM's pid (the launcher execs java)
    return lock, _run_name(log), log


def _takeover(lock: dict, name: str, out: Path) -> str:
    return (
        f"WARN: chromaflow: taking over the lock of run {name} (session {lock['session']}, host {lock['host']}, "
        f"pid {lock['pid']}, launched from {lock['launch_dir']}, started {lock['started']}) on --outdir {out}: its "
        f"driver (pid {lock['pid']}) is not running"
    )


def test_lock_of_a_killed_driver_is_taken_over_by_the_next_run_and_by_a_resume(tmp_path, nextflow_bin):
    """kill -9 of a held driver leaves its lock; a new run takes it over (one warning naming the dead holder) and is
    killed the same way; a -resume of that run takes its lock over and finishes. One launch folder for the three."""
    out, launch = tmp_path / "results", tmp_path / "launch"
    first, first_name, _ = _killed_run(1, launch, out, tmp_path / "gate1")
    second, second_name, log = _killed_run(2, launch, out, tmp_path / "gate2")
    assert second["session"] != first["session"]
    assert _lines(log, "taking over") == [_takeover(first, first_name, out)], log
    res = run_nextflow([*SMALL, "--outdir", str(out), "--trace_report_suffix", "run3", "-resume"], cwd=launch)
    assert _lines(_output(res), "taking over") == [_takeover(second, second_name, out)]
    assert not (out / LOCK).exists()
    assert json.loads((out / "asmA" / STAMP).read_text())["session"] == second["session"]
    assert (out / "asmA" / "h5" / "asmA.h5").is_file()


# ------------------------------------------------------------------------------------------------------------------
# the sample folders
# ------------------------------------------------------------------------------------------------------------------


def _describe(stamp: dict) -> str:
    return (
        f"run {stamp['run_name']} (session {stamp['session']}, host {stamp['host']}, launched from "
        f"{stamp['launch_dir']}, started {stamp['started']})"
    )


def _refusal(folder: Path, stamp: dict, also: str = "") -> str:
    return (
        f"chromaflow: {folder} holds the results of {_describe(stamp)}{also}. Nothing was run: continue that run "
        f"(-resume {stamp['session']} in {stamp['launch_dir']}), choose another --outdir, or add --replace_results to "
        "delete and rewrite these folders"
    )


def test_runs_never_mix_files_in_a_sample_folder(tmp_path, nextflow_bin):
    """The probe's case: run A (the test sheet) then run B from another launch folder, the same id asmA with another
    FASTA, into one --outdir. B stops before any task, naming A's run; the -resume the line advises is not refused;
    B with --replace_results replaces asmA/ whole (A's genome h5 gone, B's predictions only); then A again is refused,
    naming B's run."""
    out, la, lb = tmp_path / "results", tmp_path / "a", tmp_path / "b"
    la.mkdir()
    lb.mkdir()
    sheet_b = tmp_path / "b.csv"
    sheet_b.write_text(f"id,fasta\nasmA,{ROOT / 'assets' / 'test' / 'asmB.fa.gz'}\n")
    run_a = [*SMALL, "--outdir", str(out)]
    res = run_nextflow([*run_a, "--trace_report_suffix", "a1"], cwd=la)
    stamp_a = json.loads((out / "asmA" / STAMP).read_text())
    assert stamp_a["run_name"] == _run_name(res.stdout) and stamp_a["launch_dir"] == str(la)
    assert json.loads((out / "asmB" / STAMP).read_text()) == stamp_a
    before = _tree(out / "asmA")
    assert sorted(before) == [STAMP, "h5/asmA.h5"]

    # A then B: B is refused before any task, one line, nothing changed
    res = run_nextflow(
        [*SMALL, "--outdir", str(out), "--input", str(sheet_b), "--trace_report_suffix", "b1"], cwd=lb, check=False
    )
    assert res.returncode == 1
    assert _lines(_output(res), "chromaflow:") == [_refusal(out / "asmA", stamp_a)], _output(res)
    assert _no_task_ran(lb) and _tree(out / "asmA") == before and not (out / LOCK).exists()

    # the -resume the line names (A's session, from A's launch folder) is the same run: not refused
    res = run_nextflow([*run_a, "--trace_report_suffix", "a2", "-resume", stamp_a["session"]], cwd=la)
    assert len(_lines(res.stdout, "Cached process > CHROMAFLOW:FASTA2H5")) == 2, res.stdout
    assert _tree(out / "asmA") == before

    # B with consent: asmA/ replaced whole (A's h5 is not left beside B's predictions); asmB/ (not B's) untouched
    res = run_nextflow(
        [
            *PREDICTIONS_ONLY,
            "--outdir",
            str(out),
            "--input",
            str(sheet_b),
            "--replace_results",
            "--trace_report_suffix",
            "b2",
        ],
        cwd=lb,
    )
    assert _lines(_output(res), "--replace_results") == [
        f"WARN: chromaflow: --replace_results: deleting {out / 'asmA'} (the results of {_describe(stamp_a)})"
    ]
    stamp_b = json.loads((out / "asmA" / STAMP).read_text())
    assert stamp_b["session"] != stamp_a["session"] and stamp_b["launch_dir"] == str(lb)
    assert sorted(_tree(out / "asmA")) == [STAMP, "predictions/asmA_predictions.h5"]
    assert json.loads((out / "asmB" / STAMP).read_text()) == stamp_a and (out / "asmB" / "h5" / "asmB.h5").is_file()
    assert not [p for p in out.iterdir() if p.name.startswith(".asmA")]  # the replaced folder's remains are gone

    # B then A: a new run of A is refused, naming B's run
    after = _tree(out / "asmA")
    res = run_nextflow([*run_a, "--trace_report_suffix", "a3"], cwd=la, check=False)
    assert res.returncode == 1
    # asmA is B's now, asmB still the first run of A's (another session than this new run's)
    assert _lines(_output(res), "chromaflow:") == [_refusal(out / "asmA", stamp_b, "; also asmB")], _output(res)
    assert _tree(out / "asmA") == after


# ------------------------------------------------------------------------------------------------------------------
# the lock's decisions, through the pipeline's own functions in one JVM
# ------------------------------------------------------------------------------------------------------------------

#: a driver over outdir.nf's functions: takeLock on every case folder under --root (SELF_* in a lock file become
#: this JVM's host, PID namespace and session first), a race of --racers runs taking over one stale lock, --rounds
#: times, and isObjectStore on --urls
DRIVER = """
include { takeLock; isObjectStore; thisRun; lockFileName } from '%s'
import java.nio.file.Files
import java.util.concurrent.CountDownLatch

def rootCause(Throwable e) { (e.cause != null && e.cause != e) ? rootCause(e.cause) : e }

def self(String text, Map me) {
    text.replace('SELF_HOST', me.host).replace('SELF_PIDNS', me.pid_namespace).replace('SELF_SESSION', me.session)
}

def attempt(java.nio.file.Path dir, Map me) {
    try {
        takeLock(dir, me)
        return "TAKEN\\t${me.session}"
    } catch (Throwable e) {
        return "REFUSED\\t${rootCause(e).message}"
    }
}

workflow {
    def me = thisRun()
    file(params.root).listFiles().findAll { it.isDirectory() }.sort().each { d ->
        def lock = d.resolve(lockFileName())
        def mtime = Files.getLastModifiedTime(lock)
        lock.text = self(lock.text, me)
        Files.setLastModifiedTime(lock, mtime)
        println("CASE\\t${d.name}\\t${attempt(d, me)}")
    }
    (1..params.rounds).each { r ->
        def d = file("${params.race}/r${r}")
        Files.createDirectories(d)
        d.resolve(lockFileName()).text = self(file(params.stale).text, me)
        def go = new CountDownLatch(1)
        def results = Collections.synchronizedList([])
        def threads = (1..params.racers).collect {
            def mine = me + [session: UUID.randomUUID().toString()]
            Thread.start { go.await(); results << attempt(d, mine) }
        }
        go.countDown()
        threads*.join()
        println("RACE\\t${r}\\t" + groovy.json.JsonOutput.toJson(results))
    }
    params.urls.tokenize(',').each { println("URL\\t${it}\\t${isObjectStore(it)}") }
}
"""


def _lock_record(**kw) -> dict:
    rec = {
        "host": "SELF_HOST",
        "pid_namespace": "SELF_PIDNS",
        "pid": os.getpid(),
        "run_name": "fake_run",
        "session": "11111111-2222-3333-4444-555555555555",
        "launch_dir": "/somewhere/launch",
        "started": "2026-01-01T00:00:00Z",
    }
    rec.update(kw)
    return rec


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_lock_decisions(tmp_path, nextflow_bin):
    now = time.time()
    other = {"host": "elsewhere.example", "pid_namespace": "pid:[1]", "pid": 4242}
    me_started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))  # after this pytest process started
    cases = {
        # another machine: its heartbeat decides (stale after 300 s)
        "other_host_fresh": (_lock_record(**other), now),
        "other_host_silent_400s": (_lock_record(**other), now - 400),
        "other_host_same_session": (_lock_record(**other, session="SELF_SESSION"), now),  # a -resume from another host
        # this machine: the pid decides, and a pid that now runs a process started after the lock is not the holder
        "same_host_live": (_lock_record(started=me_started), now - 4000),
        "same_host_pid_reused": (_lock_record(started="2000-01-01T00:00:00Z"), now),
        "same_host_dead": (_lock_record(pid=_dead_pid()), now),
        "damaged": (None, now),
    }
    root = tmp_path / "cases"
    for name, (rec, mtime) in cases.items():
        lock = root / name / LOCK
        lock.parent.mkdir(parents=True)
        lock.write_text(json.dumps(rec) if rec else "{not json")
        os.utime(lock, (mtime, mtime))
    stale = tmp_path / "stale.json"
    stale.write_text(json.dumps(_lock_record(pid=_dead_pid())))
    driver = tmp_path / "driver.nf"
    driver.write_text(DRIVER % (ROOT / "subworkflows" / "local" / "utils_chromaflow" / "outdir.nf"))
    urls = ["s3://bucket/results", "gs://b/r", "az://c/r", "https://h/r", "file:///tmp/r", "/tmp/r", "results"]
    res = subprocess.run(
        [
            "nextflow",
            "run",
            str(driver),
            "-ansi-log",
            "false",
            "--root",
            str(root),
            "--race",
            str(tmp_path / "race"),
            "--stale",
            str(stale),
            "--rounds",
            "20",
            "--racers",
            "4",
            "--urls",
            ",".join(urls),
        ],
        cwd=tmp_path,
        env=nextflow_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    out = res.stdout
    got = {line.split("\t")[1]: line.split("\t")[2:] for line in out.splitlines() if line.startswith("CASE\t")}
    lock_of = lambda name: root / name / LOCK  # noqa: E731
    assert got["other_host_fresh"] == [
        "REFUSED",
        f"chromaflow: --outdir {root / 'other_host_fresh'} is in use by run fake_run (session "
        "11111111-2222-3333-4444-555555555555, host elsewhere.example, pid 4242, launched from /somewhere/launch, "
        "started 2026-01-01T00:00:00Z); wait for it to end or choose another --outdir "
        f"(lock: {lock_of('other_host_fresh')})",
    ]
    assert got["same_host_live"][0] == "REFUSED" and f"pid {os.getpid()}," in got["same_host_live"][1]
    assert got["damaged"] == [
        "REFUSED",
        f"chromaflow: --outdir {root / 'damaged'} is locked by {lock_of('damaged')}, which holds no run record; "
        "if no run uses this folder, delete that file",
    ]
    taken = {
        n: why
        for n, why in (
            ("other_host_silent_400s", "no heartbeat for 4"),
            ("other_host_same_session", "this run resumes it (the same session) on another machine"),
            ("same_host_pid_reused", f"its driver (pid {os.getpid()}) is not running"),
            ("same_host_dead", "is not running"),
        )
    }
    for name, why in taken.items():
        assert got[name][0] == "TAKEN", (name, got[name])
        # the lock is this run's now, and one warning names the holder taken over and why
        assert json.loads(lock_of(name).read_text())["session"] == got[name][1]
        warn = [line for line in out.splitlines() if f"--outdir {root / name}:" in line and "taking over" in line]
        assert len(warn) == 1 and why in warn[0], (name, warn)
    # the race: exactly one of the runs takes the stale lock over, the others are refused naming it
    rounds = [json.loads(line.split("\t", 2)[2]) for line in out.splitlines() if line.startswith("RACE\t")]
    assert len(rounds) == 20
    for results in rounds:
        winners = [r.split("\t")[1] for r in results if r.startswith("TAKEN")]
        assert len(winners) == 1, results
        assert all(
            r.startswith("REFUSED") and f"(session {winners[0]}," in r for r in results if not r.startswith("TAKEN")
        )
    assert not list((tmp_path / "race").glob("*/*.takeover"))
    objects = {line.split("\t")[1]: line.split("\t")[2] for line in out.splitlines() if line.startswith("URL\t")}
    assert objects == {u: str(u.split("://")[0] in ("s3", "gs", "az", "https")).lower() for u in urls}
