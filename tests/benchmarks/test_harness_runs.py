"""The harness's measuring (``benchmarks/run``): the process timer and runner, alternation, failures, resume and
the peer probes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks.harness import core, tables
from benchmarks import stages as S

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
PEERS = (ROOT / ".." / "shared" / "peers").resolve()


# --------------------------------------------------------------------------------------------------
# measuring one run
# --------------------------------------------------------------------------------------------------
def test_cpu_of_descendants_is_counted(tmp_path):
    """A command whose CPU is burnt by a grandchild: wait4 of the runner includes it."""
    burn = "import time; t = time.process_time(); x = 0\nwhile time.process_time() - t < 0.6: x += 1"
    cmd = [sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', {burn!r}])"]
    m = core.timed_run(cmd, tmp_path / "r")
    assert m["exit"] == 0
    assert m["cpu_s"] >= 0.55, m
    assert m["wall_s"] >= m["cpu_s"] * 0.5


def test_cpu_of_descendants_nobody_waits_for_is_counted(tmp_path):
    """A command that starts a CPU-burning child and exits without waiting for it (as DDP ranks are left): wait4
    cannot count the child, the sampled process tree does."""
    done = tmp_path / "done"
    burn = (
        f"import time; t = time.process_time(); x = 0\nwhile time.process_time() - t < 0.6: x += 1\n"
        f"open({str(done)!r}, 'w').close()"
    )
    cmd = [
        sys.executable,
        "-c",
        f"import os, subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {burn!r}])"
        f"\nwhile not os.path.exists({str(done)!r}): time.sleep(0.01)",
    ]
    m = core.timed_run(cmd, tmp_path / "r")
    assert m["exit"] == 0 and m["tree_cpu_s"] >= 0.5 and m["cpu_s"] >= m["tree_cpu_s"], m


def test_peak_rss_is_the_commands_not_the_parents(tmp_path):
    """The harness process may be big; the command's peak RSS must not inherit it (ru_maxrss survives fork+exec)."""
    ballast = np.ones(400 * 2**20 // 8)  # 400 MiB resident in this (parent) process
    small = core.timed_run([sys.executable, "-S", "-c", "pass"], tmp_path / "s")
    big = core.timed_run(
        [sys.executable, "-c", "import numpy as np; a = np.ones(300 * 2**20 // 8); a.sum()"], tmp_path / "b"
    )
    assert ballast.sum() > 0
    assert small["peak_rss_bytes"] < 100 * 2**20, small
    assert 300 * 2**20 <= big["peak_rss_bytes"] < 600 * 2**20, big
    assert big["peak_tree_rss_bytes"] >= big["peak_rss_bytes"]


def test_timer_of_the_scripts_drains_pipes_samples_the_tree_and_checks(tmp_path):
    """harness.timer.measure, the process timer of the per-stage scripts: both pipes drained while the child runs
    (a child writing more than a pipe holds must not block), the sampled tree counted, a failure named with its
    stderr."""
    from benchmarks.harness import timer

    chatty = "import sys; sys.stdout.write('o' * 300000); sys.stderr.write('e' * 300000)"
    r = timer.measure([sys.executable, "-c", chatty], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert r["exit"] == 0 and r["stdout"] == b"o" * 300000 and r["stderr"] == b"e" * 300000
    assert r["load_before"] is not None and r["load_after"] is not None
    sleeper = [
        sys.executable,
        "-c",
        "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import time; time.sleep(0.5)'])",
    ]
    assert timer.measure(sleeper, sample_tree=True)["processes"] >= 2
    with pytest.raises(SystemExit, match=r"failed \(exit 3\): .*\nboom"):
        timer.measure([sys.executable, "-c", "import sys; sys.stderr.write('boom'); sys.exit(3)"], check=True)


def test_failed_command_and_summary(tmp_path):
    m = core.timed_run(
        [sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"], tmp_path / "f"
    )
    assert m["exit"] == 3 and (tmp_path / "f" / "stderr.txt").read_text().strip() == "boom"
    s = core.summarize([3.0, 1.0, 2.0, 10.0])
    assert (s["n"], s["median"], s["min"], s["max"]) == (4, 2.5, 1.0, 10.0)
    r = core.ratio(core.summarize([10.0, 12.0, 11.0]), core.summarize([1.0, 2.0, 1.5]))
    assert r["of_medians"] == pytest.approx(11 / 1.5) and r["low"] == pytest.approx(5) and r["high"] == 12


def test_alternation_and_failure_recording(tmp_path):
    order = tmp_path / "order.txt"

    def writer(tag):
        return lambda d, r: [sys.executable, "-c", f"open({str(order)!r}, 'a').write('{tag}{r} ')"]

    flaky = tmp_path / "flaky"  # fails the first time only: retried once, the failed attempt recorded
    once = tmp_path / "once"  # the same, but a contender without retries: its failure stands
    case = core.Case(
        "t",
        "alt",
        {},
        [
            core.Contender("a", "A", "ours", writer("a")),
            core.Contender("b", "B", "peer", writer("b")),
            core.Contender("c", "C", "peer", lambda d, r: [sys.executable, "-c", "1/0"]),
            core.Contender(
                "f",
                "F",
                "peer",
                lambda d, r: [
                    sys.executable,
                    "-c",
                    f"import os, sys; p = {str(flaky)!r}\nif not os.path.exists(p): open(p, 'w'); sys.exit(7)",
                ],
            ),
            core.Contender(
                "g",
                "G",
                "peer",
                lambda d, r: [
                    sys.executable,
                    "-c",
                    f"import os, sys; p = {str(once)!r}\nif not os.path.exists(p): open(p, 'w'); sys.exit(7)",
                ],
                retries=0,
            ),
        ],
        [("a", "b"), ("a", "c")],
        agree=lambda dirs: {"ok": True, "detail": "x"},
    )
    rec = core.run_case(case, tmp_path / "w", 3, log=lambda m: None)
    assert order.read_text().split() == ["a0", "b0", "a1", "b1", "a2", "b2"]  # A B A B A B; c stopped after failing
    f_runs = [r for r in rec["runs"] if r["contender"] == "f"]
    assert [r["exit"] for r in f_runs] == [0, 0, 0] and f_runs[0]["failed_attempts"][0]["exit"] == 7
    assert "failed_attempts" not in f_runs[1]
    assert rec["contenders"]["c"]["failed"].startswith("exit 1")
    assert len([r for r in rec["runs"] if r["contender"] == "c"]) == 1  # retried once, then given up
    g_runs = [r for r in rec["runs"] if r["contender"] == "g"]
    assert [r["exit"] for r in g_runs] == [7] and "failed_attempts" not in g_runs[0]
    assert rec["agreement"]["ok"] is False and "not compared" in rec["agreement"]["detail"]
    assert rec["contenders"]["a"]["wall_s"]["n"] == 3 and rec["ratios"][0]["wall"] is not None


# --------------------------------------------------------------------------------------------------
# the output comparisons fail on a wrong output
# --------------------------------------------------------------------------------------------------


def _two_case_stage(tmp_path, monkeypatch):
    """A fake 'scaling' stage of two cases ('one', 'two') whose commands append their name to calls.txt; returns
    (harness.main, the calls file, benchmarks/run arguments for a quick run of it)."""
    from benchmarks.harness import main as M

    calls = tmp_path / "calls.txt"

    def stage(ctx):
        def case(name):
            c = core.Contender(
                "chromaflow",
                "x",
                "ours",
                lambda d, r, name=name: [sys.executable, "-c", f"open({str(calls)!r}, 'a').write('{name} ')"],
            )
            return core.Case("scaling", name, {"series": "t", "size": 1 if name == "one" else 2, "unit": "u"}, [c], [])

        return [], [case("one"), case("two")]

    monkeypatch.setattr(S.stage("scaling"), "build", stage)
    monkeypatch.setattr(S.stage("scaling"), "PEERS", [])
    return (
        M,
        calls,
        ["--quick", "--stages", "scaling", "--out", str(tmp_path / "out"), "--workdir", str(tmp_path / "w")],
    )


def test_resume_skips_finished_cases_and_keeps_them(tmp_path, monkeypatch):
    """A run cut short keeps its finished cases; --resume runs only what is missing."""
    M, calls, args = _two_case_stage(tmp_path, monkeypatch)
    assert M.main(args + ["--cases", "one"]) == 0
    assert calls.read_text().split() == ["one"]
    res_file = next((tmp_path / "out").glob("*-quick.json"))
    first = json.loads(res_file.read_text())
    assert [c["id"] for c in first["cases"]] == ["scaling/one"]
    assert M.main(args + ["--resume"]) == 0
    assert calls.read_text().split() == ["one", "two"]  # 'one' was not run again
    res = json.loads(res_file.read_text())
    assert [c["id"] for c in res["cases"]] == ["scaling/one", "scaling/two"]
    assert res["cases"][0]["started"] == first["cases"][0]["started"]
    assert len(res["commands"]) == 2
    assert M.main(args) == 0  # without --resume: every selected case again, still one record each
    assert calls.read_text().split() == ["one", "two", "one", "two"]
    assert [c["id"] for c in json.loads(res_file.read_text())["cases"]] == ["scaling/one", "scaling/two"]


def test_results_file_of_an_earlier_day_is_continued(tmp_path, monkeypatch):
    """--results FILE adds the missing cases to a named (earlier) results file and keeps the ones there; each new
    case records the commit it ran at; a missing file or a quick/full mismatch is one clear error."""
    M, calls, args = _two_case_stage(tmp_path, monkeypatch)
    assert M.main(args + ["--cases", "one"]) == 0
    earlier = tmp_path / "2020-01-01-host-quick.json"
    next((tmp_path / "out").glob("*-quick.json")).rename(earlier)
    first = json.loads(earlier.read_text())
    real_info = core.machine_info
    monkeypatch.setattr(core, "MACHINE_BRIEF", dict(core.MACHINE_BRIEF))  # main() updates it: keep it per test
    monkeypatch.setattr(core, "machine_info", lambda: {**real_info(), "cpu_model": "Other CPU", "cpu_flags": ["avx2"]})
    assert M.main(args + ["--resume", "--results", str(earlier)]) == 0
    assert calls.read_text().split() == ["one", "two"]
    res = json.loads(earlier.read_text())
    assert [c["id"] for c in res["cases"]] == ["scaling/one", "scaling/two"]
    assert res["cases"][0]["started"] == first["cases"][0]["started"]
    assert res["first_started"] == first["first_started"]
    # the file keeps its machine; the second one is listed and its case is marked in the report
    assert res["machine"] == first["machine"] and res["git"] == first["git"]
    assert [o["machine"]["cpu_model"] for o in res["other_machines"]] == ["Other CPU"]
    assert res["cases"][1]["machine"]["cpu_model"] == "Other CPU"
    assert tables.other_machines(res)[0]["cpu_model"] == "Other CPU"
    assert tables._mark(res, res["cases"][0]) == "" and tables._mark(res, res["cases"][1]) == " †"
    assert "cases marked † (two) ran on another machine" in tables.machines_text(res)
    assert "### two †" in earlier.with_suffix(".md").read_text()
    assert len(res["cases"][1]["git"]["commit"] or "") in (0, 40)
    assert not list((tmp_path / "out").glob("*.json"))  # nothing went to today's file
    with pytest.raises(SystemExit, match="no such results file"):
        M.main(args + ["--results", str(tmp_path / "nope.json")])
    with pytest.raises(SystemExit, match="quick results file cannot take full cases"):
        M.main([a for a in args if a != "--quick"] + ["--repeats", "3", "--results", str(earlier)])


def test_each_peer_launcher_is_probed_once_per_run(tmp_path):
    """Stages sharing a peer (predict and train: Predmoter; genie3 and scaling: arboreto) probe its launcher once;
    a missing or failing launcher is one line naming it."""
    from benchmarks.harness import main as M

    M._probe.cache_clear()
    log = tmp_path / "calls"
    (tmp_path / "bin").mkdir()
    for name, code in (("peer-ok", 0), ("peer-bad", 3)):
        exe = tmp_path / "bin" / name
        exe.write_text(f"#!/bin/sh\necho {name} >> '{log}'\necho 'no module named x' >&2\nexit {code}\n")
        exe.chmod(0o755)
    try:
        assert M._peers_ready(tmp_path, ["peer-ok"]) is None
        assert M._peers_ready(tmp_path, ["peer-ok"]) is None
        assert M._peers_ready(tmp_path, ["peer-ok", "peer-bad"]) == "peer-bad does not run: no module named x"
        assert M._peers_ready(tmp_path, ["peer-missing"]).startswith("peer-missing does not run: ")
        assert log.read_text().split() == ["peer-ok", "peer-bad"]
    finally:
        M._probe.cache_clear()
