"""Fixtures of the cross-stage tests (test_reliability.py, test_output_sets.py): small inputs made with the real
stages, and a full disk."""

from __future__ import annotations

import subprocess

import pytest

from helpers.cli import ok
from helpers.environment import ROOT

TEST = ROOT / "assets" / "test"


# --------------------------------------------------------------------------------------------------
# shared small inputs, made with the real stages
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small(tmp_path_factory):
    d = tmp_path_factory.mktemp("small")
    ok(
        "fasta2h5",
        "--fasta",
        str(TEST / "asmA.fa"),
        "--species",
        "Sp",
        "--out",
        str(d / "g.h5"),
        "--subsequence-length",
        "2000",
    )
    ok("make-test-model", "--out", str(d / "m.ckpt"), "--seed", "3")
    ok("predict", "--h5", str(d / "g.h5"), "--model", str(d / "m.ckpt"), "--out", str(d / "p.h5"), "--device", "cpu")
    return d


@pytest.fixture
def full_disk(tmp_path, request):
    size = getattr(request, "param", "256k")
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    try:
        res = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True, text=True
        )
        why = res.stderr.strip() or f"mount exited {res.returncode}"
    except FileNotFoundError:
        res, why = None, "no mount command"
    if res is None or res.returncode != 0:
        # a container without CAP_SYS_ADMIN, or not root: the disk-full behaviour cannot be produced here
        pytest.skip(f"cannot mount a {size} tmpfs here ({why}): needs root with CAP_SYS_ADMIN")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
