"""One run's outputs are all or nothing, and two runs never write the same output at once (issue 33,
docs/reliability.md "The output rule"). Every case runs the real CLI in a child process."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.cli import assert_nothing_left, assert_one_line_error, ok
from helpers.cli import chromaflow as run

ROOT = Path(__file__).resolve().parents[2]
EXPR = ROOT / "assets" / "test" / "genie3" / "expression.tsv"
GENIE3 = ["genie3", "--expression", str(EXPR), "--layout", "samples-x-genes", "--n-trees", "5", "--threads", "1"]

#: runs the CLI with genie3's weight-matrix writer replaced by one that fails as a full disk does, after the link
#: list was written completely
FAILING_WEIGHTS = """
import errno, sys
import chromaflow.genie3.links as links
def write_weights(path, *args, **kw):
    open(path, "wb").write(b"partial")
    raise OSError(errno.ENOSPC, "No space left on device", str(path))
links.write_weights = write_weights
from chromaflow.cli import main
sys.exit(main(sys.argv[1:]))
"""


#: runs the CLI with the metrics JSON writer failing as a full disk does, after the command's outputs are in place
FAILING_METRICS = """
import errno, sys
import chromaflow.utils.outputs as outputs
def write_json_atomic(path, obj):
    raise OSError(errno.ENOSPC, "No space left on device", str(path))
outputs.write_json_atomic = write_json_atomic
from chromaflow.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("command", ["fasta2h5", "genie3"])
def test_failing_metrics_leave_none_of_the_run_outputs(tmp_path, command):
    """--metrics is written last: when it fails, the outputs the run had already put in place are removed too (a
    failed run leaves none of its outputs); an output that existed before (--force) is not removed."""
    fa = ROOT / "assets" / "test" / "asmA.fa"
    argv = {
        "fasta2h5": ["fasta2h5", "--fasta", str(fa), "--species", "S", "--out", str(tmp_path / "o.h5")],
        "genie3": [*GENIE3, "--out", str(tmp_path / "o.tsv.gz"), "--summary", str(tmp_path / "s.json")],
    }[command]
    m = tmp_path / "m.json"
    res = subprocess.run(
        [sys.executable, "-c", FAILING_METRICS, *argv, "--metrics", str(m)], capture_output=True, text=True, timeout=300
    )
    assert_one_line_error(res, command, f"{m}: No space left on device")
    assert_nothing_left(tmp_path, set())
    if command == "fasta2h5":  # an earlier result overwritten with --force stays (the new one is complete)
        ok(*argv)
        res = subprocess.run(
            [sys.executable, "-c", FAILING_METRICS, *argv, "--metrics", str(m), "--force"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert res.returncode == 1 and (tmp_path / "o.h5").exists()


def test_genie3_failing_weights_leaves_no_link_list(tmp_path):
    out, weights = tmp_path / "links.tsv.gz", tmp_path / "weights.tsv.gz"
    res = subprocess.run(
        [
            sys.executable,
            "-c",
            FAILING_WEIGHTS,
            *GENIE3,
            "--out",
            str(out),
            "--weights",
            str(weights),
            "--summary",
            str(tmp_path / "s.json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert_one_line_error(res, "genie3", f"{weights}: No space left on device")
    assert_nothing_left(tmp_path, set())


@pytest.mark.parametrize("full_disk", ["64k"], indirect=True)
def test_genie3_disk_full_on_the_second_output(full_disk, tmp_path):
    """The link list (on a roomy disk) is complete, then the weight matrix meets a full tmpfs: neither is kept."""
    work = tmp_path / "work"
    work.mkdir()
    out, weights = work / "links.tsv.gz", full_disk / "weights.tsv.gz"
    with pytest.raises(OSError), open(full_disk / "filler", "wb") as fh:  # fill it: no room for the weights
        for _ in range(64):
            fh.write(b"\0" * 4096)
            fh.flush()
    res = run(*GENIE3, "--out", str(out), "--weights", str(weights))
    assert_one_line_error(res, "genie3", f"{weights}: No space left on device")
    assert_nothing_left(work, set())
    assert_nothing_left(full_disk, {"filler"})


#: runs the CLI with every text file write failing as a full disk does once the name holds "trackDb"
FAILING_TRACKDB = """
import errno, pathlib, sys
write_text = pathlib.Path.write_text
def failing(self, *args, **kw):
    if "trackDb" in self.name:
        raise OSError(errno.ENOSPC, "No space left on device")
    return write_text(self, *args, **kw)
pathlib.Path.write_text = failing
from chromaflow.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_bigwig_failing_last_browser_file_leaves_no_track_and_no_browser_file(tmp_path, small):
    out = tmp_path / "tracks"
    res = subprocess.run(
        [
            sys.executable,
            "-c",
            FAILING_TRACKDB,
            "bigwig",
            "--predictions",
            str(small / "p.h5"),
            "--outdir",
            str(out),
            "--basename",
            "x",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert_one_line_error(res, "bigwig", f"{out / 'trackDb.txt'}: No space left on device")
    assert_nothing_left(out, set())


# --------------------------------------------------------------------------------------------------
# concurrent runs into the same output
# --------------------------------------------------------------------------------------------------
def _hold(output: Path, pid: int):
    """Hold ``output``'s lock as a running chromaflow process would."""
    fd = os.open(output.parent / f".{output.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, f"{pid}\n".encode())
    return fd


def test_second_run_into_a_locked_output_is_refused(tmp_path):
    out = tmp_path / "links.tsv.gz"
    fd = _hold(out, os.getpid())
    try:
        res = run(*GENIE3, "--out", str(out))
    finally:
        os.close(fd)
    assert_one_line_error(res, "genie3", f"{out}: is being written by another chromaflow process (pid {os.getpid()})")
    assert res.returncode == 75  # EX_TEMPFAIL: the pipeline retries it (conf/base.config)
    assert_nothing_left(tmp_path, {".links.tsv.gz.lock"})


def test_lock_on_a_side_output_refuses_too(tmp_path, small):
    metrics = tmp_path / "m.json"
    fd = _hold(metrics, 4242)
    try:
        res = run(
            "predict",
            "--h5",
            str(small / "g.h5"),
            "--model",
            str(small / "m.ckpt"),
            "--out",
            str(tmp_path / "p.h5"),
            "--metrics",
            str(metrics),
            "--device",
            "cpu",
        )
    finally:
        os.close(fd)
    assert_one_line_error(res, "predict", f"{metrics}: is being written by another chromaflow process (pid 4242)")
    assert_nothing_left(tmp_path, {".m.json.lock"})


def test_lock_is_found_through_a_linked_folder(tmp_path):
    """The same output named through a symbolic link to its folder is the same output."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    fd = _hold(real / "links.tsv.gz", os.getpid())
    try:
        res = run(*GENIE3, "--out", str(tmp_path / "link" / "links.tsv.gz"))
    finally:
        os.close(fd)
    assert_one_line_error(res, "genie3", "is being written by another chromaflow process")
    assert_nothing_left(real, {".links.tsv.gz.lock"})


def test_stale_lock_of_a_dead_run_is_taken_over(tmp_path):
    out = tmp_path / "links.tsv.gz"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / ".links.tsv.gz.lock").write_text(f"{dead.pid}\n")  # what a run killed with kill -9 leaves
    ok(*GENIE3, "--out", str(out))
    assert_nothing_left(tmp_path, {"links.tsv.gz"})


def test_lock_is_released_after_success_and_failure(tmp_path):
    out = tmp_path / "links.tsv.gz"
    ok(*GENIE3, "--out", str(out))
    assert_nothing_left(tmp_path, {"links.tsv.gz"})
    res = run(*GENIE3, "--out", str(out), "--regulators", str(tmp_path / "missing.txt"))
    assert_one_line_error(res, "genie3", "missing.txt")
    assert_nothing_left(tmp_path, {"links.tsv.gz"})


# --------------------------------------------------------------------------------------------------
# ENOSPC, EIO, EACCES: one line naming the output (not its temporary)
# --------------------------------------------------------------------------------------------------
HDF5_TEXT = (
    "Can't write data (file write failed: time = Thu Nov 26 22:05:29 2026\n, filename = "
    "'/d/.p.h5.0a7c9c-3352.d9d8b4fe.part', file descriptor = 5, errno = {}, error message = '{}', buf = "
    "0x1, total write size = 8, bytes this sub-write = 8, bytes actually written = 18446744073709551615, "
    "offset = 0)"
)


@pytest.mark.parametrize(
    "exc,line",
    [
        (RuntimeError(HDF5_TEXT.format(5, "Input/output error")), "/d/p.h5: Input/output error"),
        (OSError(28, HDF5_TEXT.format(28, "No space left on device")), "/d/p.h5: No space left on device"),
        (PermissionError(13, "Permission denied", "/d/.g.h5.0a7c9c-3352.d9d8b4fe.part"), "/d/g.h5: Permission denied"),
        (OSError(5, "Input/output error", "/d/links.tsv.gz"), "/d/links.tsv.gz: Input/output error"),
    ],
    ids=["hdf5-runtime-EIO", "hdf5-ENOSPC", "EACCES-temporary", "EIO"],
)
def test_os_error_line_names_the_output(exc, line):
    from chromaflow.cli import _os_error_line

    assert _os_error_line(exc) == line


def test_naming_errors_names_the_file_of_a_failed_write(tmp_path):
    from chromaflow.utils.outputs import naming_errors

    with pytest.raises(OSError) as info, naming_errors(tmp_path / "x"):
        raise OSError(5, "Input/output error")
    assert info.value.filename == str(tmp_path / "x") and info.value.errno == 5


def test_unwritable_folder_names_the_output(tmp_path, monkeypatch):
    """A folder the lock file cannot be created in (read-only, as a non-root user sees it) names the output."""
    from chromaflow.utils import outputs

    def deny(path, *args, **kw):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(outputs.os, "open", deny)
    with pytest.raises(PermissionError) as info:
        outputs.lock_output(tmp_path / "out.h5")
    assert info.value.filename == str(tmp_path / "out.h5")


# --------------------------------------------------------------------------------------------------
# a stop signal that lands where Python swallows exceptions
# --------------------------------------------------------------------------------------------------
#: genie3 whose link writer first runs a __del__ that receives SIGTERM: the handler's exception is raised inside
#: the __del__, where Python only prints "Exception ignored in ..." and goes on (seen in test_signals under load:
#: predict exited 0 after SIGTERM, its signal raised in a WeakValueDictionary callback)
SIGNAL_IN_DEL = """
import os, signal, sys
import chromaflow.genie3.links as links
class Dying:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
write_links = links.write_links
def write_links_after_del(*args, **kw):
    Dying()
    return write_links(*args, **kw)
links.write_links = write_links_after_del
from chromaflow.cli import main
sys.exit(main())
"""


def test_a_stop_signal_swallowed_in_a_destructor_still_stops_the_run(tmp_path):
    out = tmp_path / "links.tsv.gz"
    res = subprocess.run(
        [sys.executable, "-c", SIGNAL_IN_DEL, *GENIE3, "--out", str(out), "--summary", str(tmp_path / "s.json")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 143, res.stderr
    assert res.stderr.splitlines() == ["chromaflow genie3: error: interrupted by SIGTERM"]
    assert_nothing_left(tmp_path, set())
