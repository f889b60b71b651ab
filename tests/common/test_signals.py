"""SIGTERM, SIGINT and SIGHUP end fasta2h5, predict and bigwig alike (docs/reliability.md, "Signals"): the
temporaries removed, one line on stderr naming the signal, exit status 128 + signal; and the temporaries a
killed run (kill -9) left are removed by the next run with the same output. Each test runs the real command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from helpers.cli import chromaflow as _cli

SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP]


def _default_signals() -> None:
    # the child gets the default action of the three even where this suite runs with them ignored (a background job
    # ignores SIGINT, nohup ignores SIGHUP: a child inherits that, see test_interrupt_removes_temporary)
    for s in SIGNALS:
        signal.signal(s, signal.SIG_DFL)


def _parts(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".part"))


def _fasta(path: Path, records: int, bp: int) -> Path:
    rng = np.random.default_rng(1)
    with open(path, "w") as fh:
        for i in range(records):
            seq = rng.choice(np.frombuffer(b"ACGT", "S1"), bp).tobytes().decode()
            fh.write(f">c{i}\n" + "\n".join(seq[j : j + 80] for j in range(0, bp, 80)) + "\n")
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("signals")
    _fasta(d / "big.fa", 4, 2_000_000)
    _fasta(d / "small.fa", 2, 500_000)
    for argv in (
        ["make-test-model", "--out", d / "m.ckpt"],
        [
            "predict",
            "--fasta",
            d / "small.fa",
            "--species",
            "sp",
            "--model",
            d / "m.ckpt",
            "--out",
            d / "p.h5",
            "--device",
            "cpu",
        ],
    ):
        res = _cli(*argv)
        assert res.returncode == 0, res.stderr
    return d


def _commands(d: Path, out: Path) -> dict[str, list]:
    return {
        "fasta2h5": [
            "fasta2h5",
            "--fasta",
            d / "big.fa",
            "--species",
            "sp",
            "--out",
            out / "g.h5",
            "--threads",
            "1",
            "--deflate",
            "zlib",
        ],
        "predict": [
            "predict",
            "--fasta",
            d / "big.fa",
            "--species",
            "sp",
            "--model",
            d / "m.ckpt",
            "--out",
            out / "p.h5",
            "--device",
            "cpu",
            "--threads",
            "1",
        ],
        "predict-process-reader": [
            "predict",
            "--fasta",
            d / "big.fa",
            "--species",
            "sp",
            "--model",
            d / "m.ckpt",
            "--out",
            out / "p.h5",
            "--device",
            "cpu",
            "--threads",
            "1",
            "--reader",
            "process",
        ],
        "bigwig": [
            "bigwig",
            "--predictions",
            d / "p.h5",
            "--outdir",
            out,
            "--basename",
            "b",
            "--strand",
            "all",
            "--format",
            "bedgraph",
            "--threads",
            "1",
            "--compression-level",
            "12",
        ],
    }


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
@pytest.mark.parametrize("case", ["fasta2h5", "predict", "predict-process-reader", "bigwig"])
def test_signal_removes_temporaries(inputs, tmp_path, case, sig):
    argv = _commands(inputs, tmp_path)[case]
    command = argv[0]
    proc = subprocess.Popen(
        [sys.executable, "-m", "chromaflow", *map(str, argv)],
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, CHROMAFLOW_PROGRESS="0"),
        preexec_fn=_default_signals,
    )
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and not _parts(tmp_path):
        time.sleep(0.01)
    # stopped as soon as a temporary exists, so the signal reaches it mid-run however fast the machine is
    proc.send_signal(signal.SIGSTOP)
    assert proc.poll() is None and _parts(tmp_path), "finished before it could be signalled"
    proc.send_signal(sig)
    proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=120)
    name = signal.Signals(sig).name
    assert proc.returncode == 128 + sig, err
    assert err.strip().splitlines() == [f"chromaflow {command}: error: interrupted by {name}"]
    assert list(tmp_path.iterdir()) == []  # no temporary, no output


def test_temporaries_of_a_killed_run_are_removed_by_the_next(inputs, tmp_path):
    argv = _commands(inputs, tmp_path)["fasta2h5"]
    proc = subprocess.Popen([sys.executable, "-m", "chromaflow", *map(str, argv)], stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and not _parts(tmp_path):
        time.sleep(0.01)
    proc.kill()
    proc.wait()
    stale = _parts(tmp_path)
    assert len(stale) == 1 and f"-{proc.pid}." in stale[0], stale  # .g.h5.<host>-<pid>.<random>.part
    host = stale[0][len(".g.h5.") :].split("-")[0]
    live = f".g.h5.{host}-{os.getpid()}.abcd1234.part"  # a live process's temporary (this one's) is kept
    other = ".g.h5.abcd1234.part"  # an old-style name without host and pid: whose it is cannot be told, kept
    for name in (live, other):
        (tmp_path / name).write_bytes(b"")
    res = _cli(*argv)
    assert res.returncode == 0, res.stderr
    assert _parts(tmp_path) == sorted([live, other]) and (tmp_path / "g.h5").is_file()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: signal.Signals(s).name)
def test_train_stops_with_128_plus_signal_and_resumes_exactly(tmp_path, sig):
    """A scheduler's time limit or a preemption (SIGTERM) must not look like a finished model: before, train exited
    0 after the epoch it was in (Lightning's SystemExit), and 1 on SIGINT. Now it stops at the next batch end, exits
    128 + signal, and --resume from last.ckpt (the last completed epoch's) gives the uninterrupted run's weights."""
    import torch

    from helpers.trainfactory import TINY, make_input_dir

    make_input_dir(tmp_path / "data")
    out, whole = tmp_path / "run", tmp_path / "whole"
    argv = ["train", "--input-dir", tmp_path / "data", "--batch-size", "1", "--seed", "1"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "chromaflow", *map(str, argv), "--out", out, *TINY, "--epochs", "1000"],
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, CHROMAFLOW_PROGRESS="0"),
        preexec_fn=_default_signals,
    )
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not (out / "metrics.tsv").exists():
        time.sleep(0.05)
    time.sleep(0.5)  # into the second epoch
    assert proc.poll() is None, "finished before it could be signalled"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 128 + sig, err[-3000:]
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(
            f"chromaflow train: error: interrupted by "
            f"{signal.Signals(sig).name}; continue with --resume {out}/last.ckpt"
        )
    )
    assert "Traceback" not in err and not _parts(out)
    done = torch.load(out / "last.ckpt", map_location="cpu", weights_only=False)["epoch"] + 1
    res = _cli(*argv, "--out", out, "--resume", out / "last.ckpt", "--epochs", done + 1)
    assert res.returncode == 0, res.stderr[-3000:]
    res = _cli(*argv, "--out", whole, *TINY, "--epochs", done + 1)
    assert res.returncode == 0, res.stderr[-3000:]
    a, b = (torch.load(p / "last.ckpt", map_location="cpu", weights_only=False) for p in (out, whole))
    assert a["epoch"] == b["epoch"] == done and a["global_step"] == b["global_step"]
    assert all(torch.equal(a["state_dict"][k], b["state_dict"][k]) for k in a["state_dict"])


def test_a_signal_between_creating_a_temporary_and_guarding_it_leaves_nothing(tmp_path, monkeypatch, capsys):
    """A signal can arrive after a temporary exists and before the block (or ExitStack entry) that removes it on
    error: bigwig, stopped while it created its six temporaries, once kept one. The CLI removes every temporary of
    the process that is still listed when a command stops."""
    import types

    from chromaflow import cli
    from chromaflow.utils.outputs import _new_temporary
    from chromaflow.utils.signals import Interrupted

    def run(args):
        _new_temporary(tmp_path, "out.h5", "")  # created, not yet guarded by atomic_output's block
        raise Interrupted(signal.SIGTERM)

    real = cli.importlib.import_module(cli.COMMANDS["fasta2h5"][0])
    fake = types.SimpleNamespace(run=run, add_arguments=real.add_arguments)
    monkeypatch.setattr(cli.importlib, "import_module", lambda name: fake)
    rc = cli.main(["fasta2h5", "--fasta", "x.fa", "--species", "s", "--out", str(tmp_path / "out.h5")])
    assert rc == 128 + signal.SIGTERM
    assert capsys.readouterr().err.strip() == "chromaflow fasta2h5: error: interrupted by SIGTERM"
    assert list(tmp_path.iterdir()) == []
