"""One run per ``--outdir`` (issue 54 item 1; docs/usage.md, "One run per output folder"), in the real Nextflow.

* The lock (``<outdir>/.chromaflow.lock``): two drivers started at once into one outdir (one runs, the other stops
  with one line naming it), a driver killed with SIGKILL (its lock stays; the next run and a ``-resume`` take it
  over), and the lock's decisions on fabricated holders (another host, a reused pid, a damaged file, several runs
  taking over one stale lock at once), those in one JVM through the pipeline's own functions
  (subworkflows/local/utils_chromaflow/outdir.nf).
* The sample folders' stamps (``<outdir>/<id>/.chromaflow_run.json``): run A then B (B refused), ``-resume`` of A
  (not refused), B with ``--replace_results`` (A's folder replaced whole), then A again (refused: B then A).

Every pipeline run is a ``-stub`` run of the test profile with prediction, GENIE3, the benchmark and MultiQC off (two
FASTA2H5 tasks), or PREDICT's stubs where a run must publish other files: what is tested happens in the driver, before
and after the tasks (the stubs publish the same file names as the real tasks; no assertion reads a task's bytes), and
the JVMs are most of the cost (each launch parses the project's configuration and compiles the whole pipeline's
scripts, whatever the run then does). So launches are shared: the killed-driver chain (run 1 killed, run 2 killed
with asmA published, run 2 resumed to its end) is run A of the sample-folder test, and its ``-resume`` is the one that
test's refusal line advises (the same session, from A's launch folder, into a folder holding A's files): 9 launches
in this file instead of 11. Holding tasks (tests/nextflow.config: CHROMAFLOW_TEST_HOLD) keeps a driver inside its run
while another starts or a kill comes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.pipeline_utils import ROOT, nextflow_cmd, nextflow_env, run_nextflow, wait_for

pytestmark = pytest.mark.pipeline

LOCK = ".chromaflow.lock"
STAMP = ".chromaflow_run.json"
#: the smallest run of the test profile: FASTA2H5 of asmA and asmB, nothing else
SMALL = ["-profile", "test", "-stub", "--skip_predict", "--skip_benchmark", "--skip_genie3", "--skip_multiqc"]
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
    "--skip_multiqc",
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


def _start(args: list[str], cwd: Path, env: dict, log: str = "run.log") -> subprocess.Popen:
    """A driver in its own process group (a SIGKILL to the group ends it and its tasks), output to cwd/log."""
    cwd.mkdir(parents=True, exist_ok=True)
    with open(cwd / log, "w") as fh:
        return subprocess.Popen(
            nextflow_cmd(args),
            cwd=cwd,
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=nextflow_env(env),
            start_new_session=True,
        )


def _hold_env(gate: Path, hold: str = "FASTA2H5") -> dict:
    gate.mkdir(parents=True, exist_ok=True)
    return {"CHROMAFLOW_TEST_HOLD": hold, "CHROMAFLOW_TEST_GATE": str(gate), "CHROMAFLOW_LOCK_HEARTBEAT_S": "1"}


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the driver stopped by itself, and its tasks with it
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
        wait_for(lambda: any(p.poll() is not None for p in procs.values()), 240, "one driver to stop")
        loser = next(n for n, p in procs.items() if p.poll() is not None)
        winner = next(n for n in procs if n != loser)
        wait_for(lambda: list(gate.glob("held.*")), 240, "the other driver's held task")
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
        wait_for(lambda: (out / LOCK).stat().st_mtime > beat, 20, "a heartbeat")
        (gate / "release").touch()
        assert procs[winner].wait(timeout=300) == 0, (tmp_path / winner / "run.log").read_text()[-3000:]
    finally:
        for p in procs.values():
            if p.poll() is None:
                _kill_group(p)
    assert not (out / LOCK).exists()  # released at the end
    for asm in ("asmA", "asmB"):
        assert json.loads((out / asm / STAMP).read_text())["launch_dir"] == str(tmp_path / winner)


@dataclass
class KilledRun:
    """A driver held in its FASTA2H5 tasks, then killed with its process group (SIGKILL)."""

    pid: int  # the driver JVM's (the launcher execs java)
    lock: dict  # the lock it left
    name: str  # its run name
    log: str


def _cached(launch: Path, output: str) -> bool:
    """Whether the finished task that made ``output`` (its work folder holds it and an exit code) is in the cache DB
    of the launch folder: Nextflow writes the task's entry there asynchronously, around the time it publishes, and a
    task whose entry a kill prevented runs again on -resume. LevelDB's log holds the key (the task hash's 16 bytes)."""
    for d in launch.glob("work/??/*"):
        if (d / ".exitcode").is_file() and (d / output).exists():
            key = bytes.fromhex(d.parent.name + d.name)
            return any(key in f.read_bytes() for f in launch.glob(".nextflow/cache/*/db/*.log"))
    return False


def _killed_run(k: int, launch: Path, out: Path, gate: Path, hold: str, published: str | None = None) -> KilledRun:
    """Run ``k`` of the launch folder, held in the tasks ``hold`` names (and, with ``published``, once the task that
    made that file under ``out`` has published it and is in the cache), then its process group killed with SIGKILL."""
    proc = _start(
        [*SMALL, "--outdir", str(out), "--trace_report_suffix", f"run{k}"], launch, _hold_env(gate, hold), f"run{k}.log"
    )
    run_log = launch / f"run{k}.log"  # a run that stops by itself fails the wait at once, with its log
    try:
        wait_for(lambda: list(gate.glob("held.*")), 240, f"run {k}'s held task", proc, run_log)
        if published is not None:
            wait_for((out / published).is_file, 240, f"run {k} to publish {published}", proc, run_log)
            in_cache = Path(published).name
            wait_for(lambda: _cached(launch, in_cache), 240, f"run {k}'s {published} in the cache", proc, run_log)
    finally:
        _kill_group(proc)
    log = run_log.read_text()
    return KilledRun(proc.pid, json.loads((out / LOCK).read_text()), _run_name(log), log)


@dataclass
class Chain:
    """The killed-driver chain, one launch folder: run 1 killed, run 2 (a new run) killed, run 3 (its -resume) to
    the end. What the tests read of the outdir is kept here as it was then: the sample-folder test changes it."""

    out: Path
    launch: Path
    first: KilledRun
    second: KilledRun
    resume: subprocess.CompletedProcess
    before_resume: dict[str, str]  # <out>/asmA/ when run 2 was killed
    after_resume: dict[str, str]  # <out>/asmA/ after run 3
    stamps: dict[str, dict]  # <out>/<id>/.chromaflow_run.json after run 3
    lock_after: bool  # <out>/.chromaflow.lock after run 3


@pytest.fixture(scope="module")
def chain(tmp_path_factory, nextflow_bin) -> Chain:
    """Run 1 holds both FASTA2H5 tasks (nothing published: its folders hold only its stamps, which a new run may
    take). Run 2 holds asmB's only, so asmA's h5 is published under run 2's stamp before the kill: its -resume (run 3,
    ``-resume <session>`` from the launch folder, as the sample-folder refusal advises) meets a folder holding files
    of its own session."""
    root = tmp_path_factory.mktemp("outdir_lock_chain")
    out, launch = root / "results", root / "a"
    first = _killed_run(1, launch, out, root / "gate1", "FASTA2H5")
    second = _killed_run(2, launch, out, root / "gate2", "FASTA2H5:asmB", "asmA/h5/asmA.h5")
    before = _tree(out / "asmA")
    resume = run_nextflow(
        [*SMALL, "--outdir", str(out), "--trace_report_suffix", "run3", "-resume", second.lock["session"]], cwd=launch
    )
    stamps = {asm: json.loads((out / asm / STAMP).read_text()) for asm in ("asmA", "asmB")}
    return Chain(out, launch, first, second, resume, before, _tree(out / "asmA"), stamps, (out / LOCK).exists())


def _takeover(lock: dict, name: str, out: Path) -> str:
    return (
        f"WARN: chromaflow: taking over the lock of run {name} (session {lock['session']}, host {lock['host']}, "
        f"pid {lock['pid']}, launched from {lock['launch_dir']}, started {lock['started']}) on --outdir {out}: its "
        f"driver (pid {lock['pid']}) is not running"
    )


def test_lock_of_a_killed_driver_is_taken_over_by_the_next_run_and_by_a_resume(chain):
    """kill -9 of a held driver leaves its lock; a new run takes it over (one warning naming the dead holder) and is
    killed the same way; a -resume of that run takes its lock over and finishes. One launch folder for the three."""
    first, second, out = chain.first, chain.second, chain.out
    assert first.lock["pid"] == first.pid and second.lock["pid"] == second.pid, second.log
    assert second.lock["session"] != first.lock["session"]
    assert _lines(second.log, "taking over") == [_takeover(first.lock, first.name, out)], second.log
    assert _lines(_output(chain.resume), "taking over") == [_takeover(second.lock, second.name, out)]
    assert not chain.lock_after
    assert chain.stamps["asmA"]["session"] == second.lock["session"]
    assert "h5/asmA.h5" in chain.after_resume


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


def test_runs_never_mix_files_in_a_sample_folder(chain, tmp_path):
    """The probe's case: run A (the killed-driver chain: its run 2, resumed to the end) then run B from another launch
    folder, the same id asmA with another FASTA, into one --outdir. The -resume the refusal line advises (A's session,
    from A's launch folder) is not refused where asmA/ holds A's files; B stops before any task, naming A's run; B
    with --replace_results replaces asmA/ whole (A's genome h5 gone, B's predictions only); then A again is refused,
    naming B's run."""
    out, la, lb = chain.out, chain.launch, tmp_path / "b"
    lb.mkdir()
    sheet_b = tmp_path / "b.csv"
    sheet_b.write_text(f"id,fasta\nasmA,{ROOT / 'assets' / 'test' / 'asmB.fa.gz'}\n")
    run_a = [*SMALL, "--outdir", str(out)]
    stamp_a = chain.stamps["asmA"]
    assert stamp_a["run_name"] == chain.second.name and stamp_a["launch_dir"] == str(la)
    assert stamp_a["session"] == chain.second.lock["session"]
    assert chain.stamps["asmB"] == stamp_a

    # the -resume of A's session from A's launch folder (the line below advises it) is the same run: not refused,
    # though asmA/ held A's published h5 (asmA's task came from the cache; asmB's, killed while held, ran)
    assert sorted(chain.before_resume) == [STAMP, "h5/asmA.h5"]
    cached = _lines(chain.resume.stdout, "Cached process > CHROMAFLOW:FASTA2H5")
    assert len(cached) == 1 and cached[0].endswith("(asmA)"), chain.resume.stdout
    assert chain.after_resume == chain.before_resume
    before = _tree(out / "asmA")
    assert before == chain.after_resume

    # A then B: B is refused before any task, one line, nothing changed
    res = run_nextflow(
        [*SMALL, "--outdir", str(out), "--input", str(sheet_b), "--trace_report_suffix", "b1"], cwd=lb, check=False
    )
    assert res.returncode == 1
    assert _lines(_output(res), "chromaflow:") == [_refusal(out / "asmA", stamp_a)], _output(res)
    assert _no_task_ran(lb) and _tree(out / "asmA") == before and not (out / LOCK).exists()

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
    assert not (out / LOCK).exists()  # released at the end

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
