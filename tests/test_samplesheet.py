"""Samplesheet validation in the real pipeline: every bad sheet stops the run before any task, with one line
naming the sheet, the line and the problem. Runs Nextflow with -preview (no task is executed)."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from pipeline_utils import ROOT, run_nextflow

pytestmark = pytest.mark.pipeline

FASTA = ROOT / "assets" / "test" / "asmA.fa"


def _sheet(tmp_path: Path, text: str | bytes, name: str = "sheet.csv") -> Path:
    p = tmp_path / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    return p


CASES = {
    "missing_column": ("id,species\nA,sp\n", r"missing required column\(s\): fasta"),
    "extra_column": (f"id,fasta,colour\nA,{FASTA},red\n", r"unknown column\(s\): colour"),
    "duplicate_id": (f"id,fasta\nA,{FASTA}\nA,{FASTA}\n", r"line 3: duplicate id 'A' \(first on line 2\)"),
    "missing_file": ("id,fasta\nA,/nonexistent/genome.fa\n", r"line 2: column 'fasta': file not found: /nonexistent/genome.fa"),
    "id_with_space": (f"id,fasta\nmy genome,{FASTA}\n", r"line 2: id 'my genome' may only contain"),
    "id_with_slash": (f"id,fasta\na/b,{FASTA}\n", r"line 2: id 'a/b' may only contain"),
    "empty_sheet": ("id,fasta\n", r"no assemblies \(only a header line\)"),
    "empty_file": ("", r"file is empty"),
    "field_count": (f"id,fasta\nA,{FASTA},extra\n", r"line 2: 3 fields, but the header has 2"),
    "long_species": (f"id,fasta,species\nA,{FASTA},{'x' * 26}\n", r"line 2: species '.*' is 26 bytes"),
}


@pytest.fixture(scope="module")
def validation_results(tmp_path_factory, nextflow_bin):
    """All bad sheets validated by the pipeline's own function in one Nextflow JVM (fast)."""
    tmp = tmp_path_factory.mktemp("sheets")
    sheets = {case: _sheet(tmp, text, f"{case}.csv") for case, (text, _) in CASES.items()}
    res = subprocess.run(
        ["nextflow", "run", str(ROOT / "tests" / "nextflow" / "validate_sheets.nf"), "-ansi-log", "false",
         "--sheets", ",".join(str(p) for p in sheets.values())],
        cwd=tmp, capture_output=True, text=True, timeout=600, env={**os.environ, "NXF_OFFLINE": "true"})
    assert res.returncode == 0, res.stdout + res.stderr
    results = {}
    for line in res.stdout.splitlines():
        if line.startswith("RESULT "):
            _, sheet, rest = line.split(" ", 2)
            results[sheet] = rest
    return {case: results.get(str(p)) for case, p in sheets.items()}, sheets


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_samplesheet_is_rejected_with_one_clear_line(validation_results, case):
    results, sheets = validation_results
    got = results[case]
    assert got is not None and got.startswith("ERROR "), got
    assert re.search(CASES[case][1], got), f"expected /{CASES[case][1]}/ in {got!r}"
    assert "\n" not in got
    if case != "missing_file":
        assert str(sheets[case]) in got


def test_bad_samplesheet_stops_the_real_pipeline_before_any_task(tmp_path, nextflow_bin):
    sheet = _sheet(tmp_path, f"id,fasta\nA,{FASTA}\nA,{FASTA}\n")
    res = run_nextflow(["--genomes", str(sheet), "--skip_predict", "--outdir", str(tmp_path / "out")],
                       cwd=tmp_path, check=False, timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert f"samplesheet {sheet} line 3: duplicate id 'A' (first on line 2)" in out
    work = tmp_path / "work"
    assert not work.exists() or not any(work.iterdir()), "a task ran although the sheet was invalid"


def test_bom_crlf_and_relative_paths_are_accepted(tmp_path, nextflow_bin):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "g.fa").write_text(FASTA.read_text())
    sheet = _sheet(tmp_path, b"\xef\xbb\xbfid,fasta,species\r\nA,data/g.fa,Sp_a\r\n")
    res = run_nextflow(["-preview", "--genomes", str(sheet), "--skip_predict", "--outdir", str(tmp_path / "out")],
                       cwd=tmp_path, timeout=300)
    assert "1 assembly from" in res.stdout
