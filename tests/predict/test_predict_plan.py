"""``chromaflow predict-plan``: the prediction shards the pipeline fans PREDICT out from (PREDICT_PLAN).

The rows counted from the FASTA must be the rows ``fasta2h5`` writes (plain and gzipped FASTA, checked against the
real h5), the shard count follows --shards (a count capped at the rows, or auto: one per --shard-rows rows), the
shards' row ranges tile [0, rows) as ``predict --shard i/n`` splits them, and bad options are one-line errors.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from chromaflow.utils.sharding import part_bounds
from helpers.cli import chromaflow as run
from helpers.environment import ROOT

TEST = ROOT / "assets" / "test"


def plan(*args: str) -> dict:
    res = run("predict-plan", *args)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def copy(name: str, tmp_path) -> Path:
    """A copy of an asset FASTA: the plan writes the FASTA's index beside it, never into assets/."""
    dst = tmp_path / name
    shutil.copy(TEST / name, dst)
    return dst


@pytest.mark.parametrize("fasta, rows, index", [("asmA.fa", 36, "fai"), ("asmB.fa.gz", 22, "scan")])
def test_rows_from_the_fasta_are_the_rows_fasta2h5_writes(tmp_path, fasta, rows, index):
    h5 = tmp_path / "g.h5"
    res = run("fasta2h5", "--fasta", TEST / fasta, "--species", "Testus", "--subsequence-length", "2000", "--out", h5)
    assert res.returncode == 0, res.stderr
    from_fasta = plan("--fasta", copy(fasta, tmp_path), "--subsequence-length", "2000", "--shards", "2")
    from_h5 = plan("--h5", h5, "--shards", "2")
    assert from_fasta["subsequences"] == from_h5["subsequences"] == rows
    assert from_fasta["shards"] == from_h5["shards"]
    assert from_h5["subsequence_length"] == 2000
    # asmA.fa is laid out from the index the plan made beside it; asmB.fa.gz is plain gzip: scanned, and said why
    assert from_fasta["index"] == index
    if index == "fai":
        assert from_fasta["index_files"] == ["asmA.fa.fai"] and (tmp_path / "asmA.fa.fai").is_file()
    else:
        assert from_fasta["index_reason"] == "gzip (not bgzip) FASTA cannot be indexed"
        assert not list(tmp_path.glob("*.fai"))


def test_index_none_scans_and_makes_no_index(tmp_path):
    fa = copy("asmA.fa", tmp_path)
    got = plan("--fasta", fa, "--index", "none", "--subsequence-length", "2000", "--shards", "2")
    assert got["index"] == "scan" and got["index_reason"] == "--index none" and got["subsequences"] == 36
    assert sorted(p.name for p in tmp_path.iterdir()) == ["asmA.fa"]


@pytest.mark.parametrize(
    "shards, shard_rows, count",
    [
        ("1", 20000, 1),
        ("2", 20000, 2),
        ("100", 20000, 36),
        ("auto", 20000, 1),
        ("auto", 10, 4),
        ("auto", 36, 1),
        ("auto", 1, 36),
    ],
)
def test_shard_count_and_ranges(tmp_path, shards, shard_rows, count):
    res = run(
        "predict-plan",
        "--fasta",
        copy("asmA.fa", tmp_path),
        "--subsequence-length",
        "2000",
        "--shards",
        shards,
        "--shard-rows",
        str(shard_rows),
        "--out",
        tmp_path / "plan.json",
    )
    assert res.returncode == 0 and res.stdout == "", res.stderr
    p = json.loads((tmp_path / "plan.json").read_text())
    assert p["shard_count"] == count == len(p["shards"])
    assert [s["shard"] for s in p["shards"]] == [f"{i}/{count}" for i in range(1, count + 1)]
    assert [s["index"] for s in p["shards"]] == list(range(1, count + 1))
    assert all(s["count"] == count for s in p["shards"])
    ranges = [tuple(s["rows"]) for s in p["shards"]]
    assert ranges == [part_bounds(i, count, 36) for i in range(1, count + 1)]
    assert (
        ranges[0][0] == 0
        and ranges[-1][1] == 36
        and all(a[1] == b[0] and a[0] < a[1] for a, b in zip(ranges, ranges[1:]))
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--shards", "0"], "--shards '0': expected an integer >= 1 or auto"),
        (["--shards", "two"], "--shards 'two': expected an integer >= 1 or auto"),
        (["--shards", "auto", "--shard-rows", "0"], "--shard-rows must be >= 1 (got 0)"),
        (["--subsequence-length", "0"], "--subsequence-length 0"),
    ],
)
def test_bad_options_are_one_line_errors(tmp_path, args, message):
    res = run("predict-plan", "--fasta", copy("asmA.fa", tmp_path), "--out", tmp_path / "plan.json", *args)
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("chromaflow predict-plan: error: ") and message in lines[0], (
        res.stderr
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["asmA.fa"]  # no plan, no index


def test_bad_fasta_and_h5_name_the_file(tmp_path):
    bad = tmp_path / "bad.fa"
    bad.write_text("ACGT\n")
    for args in (["--fasta", bad], ["--h5", bad], ["--fasta", tmp_path / "missing.fa"]):
        res = run("predict-plan", *args)
        assert res.returncode != 0
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and str(args[1]) in lines[0], res.stderr
