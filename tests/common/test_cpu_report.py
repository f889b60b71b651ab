"""``--cpu-report`` (tests/helpers/cpu_report.py): a pytest run of three tests that spend known CPU seconds -- in a
child process, in the test's own process, and none (a sleep) -- with and without xdist workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers.environment import ROOT

BURNERS = '''
import subprocess, sys, time

BURN = "import time\\nt = time.process_time()\\nwhile time.process_time() - t < {s}: pass"


def test_child_burns():
    subprocess.run([sys.executable, "-c", BURN.format(s=0.6)], check=True)


def test_self_burns():
    exec(BURN.format(s=0.4))


def test_sleeps():
    time.sleep(0.3)
'''


def _pytest(folder, *args) -> subprocess.CompletedProcess:
    """pytest on ``folder`` with the plugin (as tests/conftest.py loads it for the suite) and ``args``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "pytest", "-p", "helpers.cpu_report", "-p", "no:cacheprovider", *args, str(folder)]
    return subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("workers", [None, "2"], ids=["one-process", "xdist"])
def test_each_test_is_charged_its_own_and_its_childrens_cpu(tmp_path, workers):
    (tmp_path / "test_burners.py").write_text(BURNERS)
    out = tmp_path / "cpu.json"
    # a part file an interrupted run left: not merged into this run's report
    (tmp_path / "cpu.json.gw5.part").write_text(json.dumps([{"nodeid": "stale.py::test_old", "cpu_s": 9.0}]))
    p = _pytest(tmp_path, "--cpu-report", str(out), *(["-n", workers] if workers else ["-p", "no:xdist"]))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    report = json.loads(out.read_text())
    tests = {r["nodeid"].split("::")[1]: r for r in report["tests"]}
    assert set(tests) == {"test_child_burns", "test_self_burns", "test_sleeps"}
    child, own, sleep = tests["test_child_burns"], tests["test_self_burns"], tests["test_sleeps"]
    assert child["children_cpu_s"] >= 0.55 and child["cpu_s"] >= child["children_cpu_s"], child
    assert own["cpu_s"] >= 0.38 and own["children_cpu_s"] < 0.1, own
    assert sleep["cpu_s"] < 0.25 and sleep["wall_s"] >= 0.29, sleep
    assert [r["nodeid"] for r in report["tests"]][-1].endswith("test_sleeps")  # most CPU first
    # one file, its sums; the machine spent at least what the tests were charged
    [f] = report["files"]
    assert f["file"] == "test_burners.py" and f["tests"] == 3
    assert f["cpu_s"] == pytest.approx(sum(r["cpu_s"] for r in report["tests"]), abs=0.02)
    assert report["machine_busy_cpu_s"] >= 0.95 * report["attributed_cpu_s"] > 0
    assert {r["worker"] for r in report["tests"]} <= ({"gw0", "gw1"} if workers else {"main"})
    assert not list(tmp_path.glob("cpu.json.*")), "the workers' part files were left"
    assert "CPU seconds by test file (--cpu-report)" in p.stdout and "test_burners.py" in p.stdout


@pytest.mark.parametrize("where", ["no-folder", "a-folder"])
def test_a_report_path_that_cannot_be_written_stops_before_any_test(tmp_path, where):
    (tmp_path / "test_burners.py").write_text(BURNERS)
    target = tmp_path / "missing" / "cpu.json" if where == "no-folder" else tmp_path
    p = _pytest(tmp_path, "--cpu-report", str(target), "-p", "no:xdist")
    assert p.returncode == 4, p.stdout[-2000:] + p.stderr[-2000:]  # pytest's usage error
    why = "is a folder" if where == "a-folder" else f"its folder {tmp_path / 'missing'} does not exist"
    assert [line for line in p.stderr.splitlines() if "--cpu-report" in line] == [
        f"ERROR: --cpu-report {target}: {why}"
    ], p.stderr
    assert "test_child_burns" not in p.stdout and sorted(x.name for x in tmp_path.iterdir()) == ["test_burners.py"]
