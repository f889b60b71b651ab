"""The tests' command runner (tests/helpers/cli.py): a command started from the fork server gives what a fresh
``python -m chromaflow`` gives (exit status, stdout, stderr, the bytes it writes, its cwd and environment), a
command it must not fork (an environment variable read at import differs) runs as a fresh interpreter, and a
timeout kills the forked child."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from helpers import cli

ASM = Path(__file__).resolve().parents[2] / "assets" / "test" / "asmA.fa"


@pytest.fixture(scope="module")
def server() -> cli.ForkServer:
    s = cli._fork_server({**os.environ, "CHROMAFLOW_PROGRESS": "0"})
    assert s is not None and s.accepts(os.environ), (
        "no fork server for this session's own environment: every torch command would start a fresh interpreter"
    )
    return s


def _pair(tmp_path: Path, *args, env=None) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """The same command line, forked in tmp/forked and fresh in tmp/fresh (relative paths: each runs in its cwd)."""
    for d in ("forked", "fresh"):
        (tmp_path / d).mkdir(exist_ok=True)
    server, served = cli._server, cli._server.served
    pair = (
        cli.chromaflow(*args, cwd=tmp_path / "forked", env=env),
        cli.chromaflow(*args, cwd=tmp_path / "fresh", env=env, fresh=True),
    )
    assert cli._server is server and server.served == served + 1, "not one forked and one fresh run"
    return pair


def test_forked_commands_write_the_bytes_fresh_ones_write(server, tmp_path):
    genome = tmp_path / "g.h5"
    cli.ok("fasta2h5", "--fasta", ASM, "--species", "Sp", "--subsequence-length", "2000", "--out", genome)
    for args, env in (
        (("make-test-model", "--out", "m.ckpt", "--seed", "5"), None),
        # progress forced on: the child reads the environment it is given, not the server's
        (
            ("predict", "--h5", genome, "--model", "m.ckpt", "--out", "p.h5", "--device", "cpu"),
            {"CHROMAFLOW_PROGRESS": "1"},
        ),
    ):
        forked, fresh = _pair(tmp_path, *args, env=env)
        assert forked.returncode == fresh.returncode == 0, (forked.stderr, fresh.stderr)
        assert forked.stdout == fresh.stdout
        out = args[args.index("--out") + 1]
        assert (tmp_path / "forked" / out).read_bytes() == (tmp_path / "fresh" / out).read_bytes()
    assert "%" in forked.stderr and "%" in fresh.stderr  # the progress bar of both predict runs


def test_forked_errors_are_the_fresh_ones(server, tmp_path):
    for args, code in (
        (("predict", "--h5", "missing.h5", "--model", "m.ckpt", "--out", "p.h5"), 1),
        (("predict", "--no-such-option"), 2),
    ):  # argparse's SystemExit(2) and usage
        forked, fresh = _pair(tmp_path, *args)
        assert forked.returncode == fresh.returncode == code
        assert forked.stderr == fresh.stderr and forked.stderr.strip()


def test_only_chromaflows_own_variables_may_differ(server, monkeypatch):
    env = dict(os.environ, CHROMAFLOW_PROGRESS="0")
    # a kernel variable torch reads when imported, set to what this session does not have (kernel-variant runs set it)
    aten = "avx2" if os.environ.get("ATEN_CPU_CAPABILITY") == "default" else "default"
    assert server.accepts(dict(env, CHROMAFLOW_ANYTHING="1", PYTEST_CURRENT_TEST="x"))
    assert not server.accepts(dict(env, ATEN_CPU_CAPABILITY=aten))
    assert not server.accepts({k: v for k, v in env.items() if k != "PATH"})
    # an environment given for one call runs fresh; a change of this process's own gets a server of its own (as
    # Lightning's seed_everything leaves PL_GLOBAL_SEED in a process that trained; a name nothing else sets here)
    assert cli._fork_server(dict(env, ATEN_CPU_CAPABILITY=aten)) is None
    # which server serves is _fork_server's choice alone; what a server imports first (PRELOAD) plays no part in it,
    # so the two servers started below import nothing (each would import torch and Lightning: ~6 CPU-s), and the
    # session's server, which _fork_server closes when it starts another, is only set aside (its close a no-op) and
    # is the server again after this test
    monkeypatch.setattr(cli, "PRELOAD", ())
    monkeypatch.setattr(server, "close", lambda: None)
    monkeypatch.setattr(cli, "_server", cli._server)
    monkeypatch.setattr(cli, "_starts", cli._starts)
    monkeypatch.setenv("CF_RUNNER_TEST_MARK", str(os.getpid()))
    other = cli._fork_server(dict(os.environ))
    assert other is not None and other is not server and other.env["CF_RUNNER_TEST_MARK"] == str(os.getpid())
    monkeypatch.delenv("CF_RUNNER_TEST_MARK")
    back = cli._fork_server(dict(os.environ))
    assert back.accepts(os.environ) and back is not other and other.proc.poll() is not None
    back.close()


def test_timeout_kills_the_forked_child_and_the_server_goes_on(server, tmp_path):
    # a forked make-test-model takes ~0.3 s here (torch builds and saves the model): 0.02 s cannot be enough
    with pytest.raises(subprocess.TimeoutExpired):
        cli.chromaflow("make-test-model", "--out", tmp_path / "m.ckpt", timeout=0.02)
    assert not (tmp_path / "m.ckpt").exists()
    assert cli.chromaflow("make-test-model", "--out", tmp_path / "m.ckpt").returncode == 0


def test_answers_that_arrive_together_are_both_read(tmp_path):
    """A quick child's pid and exit status reach us in one read when we are slow to look: the second answer must come
    from what was already read, not wait on the pipe."""
    server = cli._fork_server(dict(os.environ))
    with server.lock:
        server.send(["predict", "--no-such-option"], str(tmp_path), server.env, tmp_path / "o", tmp_path / "e")
        time.sleep(3)  # the child has long ended: both lines are in the pipe
        assert "pid" in server._read(5)
        assert server._read(5) == {"status": 2}
