"""The session's single-node SLURM cluster (``slurm_cluster`` fixture): the cluster itself is
benchmarks/harness/slurm_cluster.py (:class:`SlurmCluster`), which the benchmark harness starts too."""

from __future__ import annotations

from typing import Iterator

import pytest

from helpers.environment import unavailable

from benchmarks.harness.slurm_cluster import SlurmCluster, SlurmUnavailable, pid_alive

__all__ = ["SlurmCluster", "SlurmUnavailable", "pid_alive", "slurm_cluster"]


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """Session-wide single-node SLURM cluster; see the module docstring. Yields a SlurmCluster."""
    cluster = SlurmCluster()
    try:
        cluster.start()
    except SlurmUnavailable as exc:
        unavailable(f"cannot start the test SLURM cluster: {exc}")
    pids = cluster.pids()
    try:
        yield cluster
    finally:
        cluster.stop()
        alive = {n: p for n, p in pids.items() if pid_alive(p)}
        assert not alive, f"SLURM test daemons still running after teardown: {alive}"
