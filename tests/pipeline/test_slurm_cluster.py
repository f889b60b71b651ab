"""The single-node test SLURM cluster itself (tests/helpers/slurm_cluster.py): partitions, GRES, records, teardown."""

from __future__ import annotations

import concurrent.futures
import subprocess
from datetime import datetime
from pathlib import Path

import pytest

from helpers.environment import unavailable
from helpers.slurm_cluster import SlurmCluster, SlurmUnavailable, pid_alive, slurm_cluster  # noqa: F401

pytestmark = pytest.mark.slurm


def _sbatch_wait(cluster: SlurmCluster, tmp: Path, name: str, *opts: str, seconds: int = 1) -> str:
    script = tmp / f"{name}.sh"
    script.write_text(f"#!/bin/sh\necho start $(date +%s.%N)\nsleep {seconds}\necho end $(date +%s.%N)\n")
    out = tmp / f"{name}.out"
    r = cluster.run(
        "sbatch",
        "--wait",
        "--parsable",
        "-J",
        name,
        "-o",
        str(out),
        "-t",
        "5",
        *opts,
        str(script),
        check=False,
        timeout=120,
    )
    assert r.returncode == 0, f"sbatch {name} failed ({r.returncode}): {r.stdout}{r.stderr}"
    return r.stdout.strip().split(";")[0]


def test_sinfo_shows_cpu_default_and_gpu(slurm_cluster):
    r = slurm_cluster.run("sinfo", "--noheader", "-o", "%P %a %G")
    rows = dict(line.split(None, 1) for line in r.stdout.splitlines())
    assert set(rows) == {"cpu*", "gpu"}  # '*' marks the default partition
    assert "gpu:1" in rows["gpu"]


def test_gpu_job_lands_in_gpu_partition_with_gres(slurm_cluster, tmp_path):
    jid = _sbatch_wait(slurm_cluster, tmp_path, "t-gpu", "-p", "gpu", "--gres=gpu:1")
    job = slurm_cluster.job("t-gpu")
    assert job["JobId"] == jid
    assert job["Partition"] == "gpu"
    assert job["State"] == "COMPLETED"
    assert job["Gres"] == "gpu:1"
    assert job["scontrol"]["TresPerNode"] == "gres:gpu:1"


def test_cpu_job_lands_in_cpu_partition_without_gres(slurm_cluster, tmp_path):
    jid = _sbatch_wait(slurm_cluster, tmp_path, "t-cpu", "-p", "cpu")
    job = slurm_cluster.job("t-cpu")
    assert job["JobId"] == jid
    assert job["Partition"] == "cpu"
    assert job["State"] == "COMPLETED"
    assert job["Gres"] == ""
    assert "gpu" not in job["Tres"]


def test_default_partition_is_cpu(slurm_cluster, tmp_path):
    _sbatch_wait(slurm_cluster, tmp_path, "t-default")
    assert slurm_cluster.job("t-default")["Partition"] == "cpu"


def test_two_gpu_jobs_do_not_overlap(slurm_cluster, tmp_path):
    """One gpu GRES on the node: the second --gres=gpu:1 job waits until the first has finished,
    although CPUs (2) and memory would allow both at once (a cpu control pair below does overlap)."""

    def run(name):
        return _sbatch_wait(slurm_cluster, tmp_path, name, "-p", "gpu", "--gres=gpu:1", seconds=2)

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        list(pool.map(run, ["t-gpu-a", "t-gpu-b"]))
    spans = sorted(_span(tmp_path / f"{n}.out") for n in ("t-gpu-a", "t-gpu-b"))
    assert spans[0][1] <= spans[1][0], f"GPU jobs overlapped in time: {spans}"
    a, b = slurm_cluster.job("t-gpu-a"), slurm_cluster.job("t-gpu-b")
    assert a["Gres"] == b["Gres"] == "gpu:1"
    assert {a["Partition"], b["Partition"]} == {"gpu"}


def test_two_cpu_jobs_do_overlap(slurm_cluster, tmp_path):
    """Control for the test above: without the GRES the same pair runs concurrently (2 CPUs)."""

    def run(name):
        return _sbatch_wait(slurm_cluster, tmp_path, name, "-p", "cpu", seconds=2)

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        list(pool.map(run, ["t-cpu-a", "t-cpu-b"]))
    spans = sorted(_span(tmp_path / f"{n}.out") for n in ("t-cpu-a", "t-cpu-b"))
    assert spans[1][0] < spans[0][1], f"CPU jobs did not overlap: {spans}"


def _span(out: Path) -> tuple[float, float]:
    words = dict(line.split() for line in out.read_text().splitlines() if line.startswith(("start", "end")))
    return float(words["start"]), float(words["end"])


def test_jobcomp_lines_have_partition_and_state(slurm_cluster, tmp_path):
    _sbatch_wait(slurm_cluster, tmp_path, "t-comp", "-p", "gpu", "--gres=gpu:1")
    lines = [ln for ln in slurm_cluster.jobcomp_path.read_text().splitlines() if "Name=t-comp " in ln]
    assert len(lines) == 1
    assert "Partition=gpu" in lines[0] and "JobState=COMPLETED" in lines[0]
    datetime.fromisoformat(slurm_cluster.job("t-comp")["EndTime"])


def test_failed_job_is_recorded_as_failed(slurm_cluster, tmp_path):
    script = tmp_path / "fail.sh"
    script.write_text("#!/bin/sh\nexit 3\n")
    r = slurm_cluster.run(
        "sbatch", "--wait", "-J", "t-fail", "-o", str(tmp_path / "fail.out"), str(script), check=False, timeout=60
    )
    assert r.returncode == 3
    job = slurm_cluster.job("t-fail")
    assert job["State"] == "FAILED" and job["ExitCode"] == "3:0"


def test_env_points_client_tools_at_the_test_cluster(slurm_cluster):
    assert Path(slurm_cluster.env["SLURM_CONF"]).is_file()
    r = subprocess.run(
        ["scontrol", "show", "config"],
        env={**_clean_env(), **slurm_cluster.env},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "ClusterName             = chromaflowtest" in r.stdout


def _clean_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}


def test_own_cluster_stops_all_its_daemons(slurm_cluster):
    """A second, independent cluster (own ports, munge socket, temp dir) starts beside the session one
    and, once stopped, leaves none of the daemons it started running and no temp dir behind.
    (The session fixture asserts the same in its own teardown.)"""
    other = SlurmCluster()
    try:
        other.start()
    except SlurmUnavailable as exc:  # pragma: no cover - the session cluster started, so this should too
        other.stop()
        unavailable(f"second cluster did not start: {exc}")
    pids = other.pids()
    assert set(pids) == {"munged", "slurmctld", "slurmd"}
    assert all(pid_alive(p) for p in pids.values())
    assert other.env["SLURM_CONF"] != slurm_cluster.env["SLURM_CONF"]
    other.stop()
    assert not [n for n, p in pids.items() if pid_alive(p)]
    assert not other.root.exists()
    # the session cluster is unaffected
    assert slurm_cluster.run("sinfo", "--noheader", "-o", "%P %t").stdout.split() == ["cpu*", "idle", "gpu", "idle"]
