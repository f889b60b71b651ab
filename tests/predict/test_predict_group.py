"""``chromaflow predict --group``: several whole assemblies in one process, each the same file as its own run.

The reference is the one-assembly ``predict`` (itself compared with Predmoter in test_predict.py): a group must give
every member the bytes of that run, an h5 member and a FASTA member alike, with one metrics JSON per member; a bad
table or member stops the group before anything is written, with one line naming the table's line.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers.cli import assert_one_line_error, chromaflow
from helpers.cli import run_in_process as run_cli
from helpers.environment import ROOT

HEADER = "input\tkind\tspecies\tout\tmetrics\n"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("group")
    shutil.copy(ROOT / "assets" / "test" / "asmA.fa", d / "asmA.fa")
    shutil.copy(ROOT / "assets" / "test" / "asmB.fa.gz", d / "asmB.fa.gz")
    run_cli("make-test-model", "--out", d / "m.ckpt", "--seed", "0")
    run_cli("fasta2h5", "--fasta", d / "asmA.fa", "--species", "Testus_primus", "--out", d / "asmA.h5")
    return d


def test_each_member_is_the_file_of_its_own_run(inputs, tmp_path):
    d = inputs
    run_cli("predict", "--h5", d / "asmA.h5", "--model", d / "m.ckpt", "--out", tmp_path / "A.h5", "--threads", "1")
    run_cli(
        "predict",
        "--fasta",
        d / "asmB.fa.gz",
        "--species",
        "Testus_secundus",
        "--model",
        d / "m.ckpt",
        "--out",
        tmp_path / "B.h5",
        "--threads",
        "1",
    )
    table = tmp_path / "group.tsv"
    table.write_text(
        HEADER + f"{d / 'asmA.h5'}\th5\t\t{tmp_path / 'gA.h5'}\t{tmp_path / 'gA.json'}\n"
        f"{d / 'asmB.fa.gz'}\tfasta\tTestus_secundus\t{tmp_path / 'gB.h5'}\t{tmp_path / 'gB.json'}\n"
    )
    run_cli("predict", "--group", table, "--model", d / "m.ckpt", "--threads", "1")
    assert (tmp_path / "gA.h5").read_bytes() == (tmp_path / "A.h5").read_bytes()
    assert (tmp_path / "gB.h5").read_bytes() == (tmp_path / "B.h5").read_bytes()
    a, b = (json.loads((tmp_path / f"g{x}.json").read_text()) for x in "AB")
    assert a["input"] == "h5" and b["input"] == "fasta"
    assert a["subsequences"] > 0 and b["subsequences"] > 0 and a["subsequences"] != b["subsequences"]
    # the process start-up is the first member's; the second pays none of it
    assert a["phases_s"]["before_run"] > 0 and b["phases_s"]["before_run"] == 0


def _rows(d: Path, out: Path, *rows: str) -> str:
    return HEADER + "".join(r.format(d=d, o=out) + "\n" for r in rows)


GOOD_A = "{d}/asmA.h5\th5\t\t{o}/a.h5\t"
#: (id, table text from (inputs, output folder), extra arguments, expected fragment of the one-line error)
BAD = [
    ("header", lambda d, o: "input\tkind\n", (), "line 1: the header must be input kind species out metrics"),
    ("columns", lambda d, o: HEADER + "x\th5\n", (), "line 2: 2 columns, expected 5"),
    ("kind", lambda d, o: _rows(d, o, "{d}/asmA.h5\tbam\t\t{o}/a.h5\t"), (), "line 2: kind must be h5 or fasta"),
    ("empty", lambda d, o: HEADER, (), "lists no assembly"),
    (
        "missing_input",
        lambda d, o: _rows(d, o, GOOD_A, "{d}/nope.fa\tfasta\tTestus_x\t{o}/b.h5\t"),
        (),
        "line 3: " + "{d}/nope.fa: FASTA does not exist",
    ),
    (
        "no_species",
        lambda d, o: _rows(d, o, GOOD_A, "{d}/asmB.fa.gz\tfasta\t\t{o}/b.h5\t"),
        (),
        "line 3: --fasta needs --species",
    ),
    ("same_out", lambda d, o: _rows(d, o, GOOD_A, "{d}/asmB.fa.gz\tfasta\tTestus_x\t{o}/a.h5\t"), (), "line 3 out"),
    ("out_given", lambda d, o: _rows(d, o, GOOD_A), ("--out", "x.h5"), "--out is not given with --group"),
    ("shard_given", lambda d, o: _rows(d, o, GOOD_A), ("--shard", "1/2"), "--shard is not given with --group"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_group_one_line_nothing_written(inputs, tmp_path, case):
    _, table_text, extra, fragment = case
    out = tmp_path / "out"
    out.mkdir()
    table = tmp_path / "g.tsv"
    table.write_text(table_text(inputs, out))
    proc = chromaflow("predict", "--group", table, "--model", inputs / "m.ckpt", *extra, cwd=tmp_path)
    assert_one_line_error(proc, "predict", fragment.format(d=inputs))
    assert list(out.iterdir()) == []
