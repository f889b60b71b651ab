"""The bigwig_writers harness stage (it replaced benchmarks/bigwig/bench_writers.py): its case, the writer tool and the
read-back check that can fail, its table; its tiny real run through the harness is test_dev_stages_quick_run.py's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import stages as S
from benchmarks.harness.env import child_env
from benchmarks.harness.stagekit import Ctx
from benchmarks.stages import bigwig_writers as W


@pytest.mark.parametrize("quick", [True, False], ids=["quick", "full"])
def test_the_case_is_built_without_running_anything(tmp_path, quick):
    """One case, the four writers alternated (ours at levels 1 and 6 against pyBigWig and pybigtools), each a child
    process of the harness tool; building writes nothing; the stage is opt-in and runs before scaling."""
    ctx = Ctx(peers=tmp_path, work=tmp_path / "w", quick=quick, repeats=1, log=lambda m: None)
    warm, cases = W.build(ctx)
    assert len(cases) == 1 and not cases[0].skip
    c = cases[0]
    n = 20_000 if quick else 5_000_000
    assert c.name == f"intervals_{n}_mean3bp" and c.params["intervals"] == n
    assert [x.key for x in c.contenders] == ["chromaflow-l1", "chromaflow-l6", "pybigwig", "pybigtools"]
    assert [x.role for x in c.contenders] == ["ours", "ours", "peer", "peer"]
    assert c.pairs == [("chromaflow-l1", "pybigwig"), ("chromaflow-l1", "pybigtools")]
    argv = c.contenders[1].argv(tmp_path / "d", 0)
    assert argv[1:5] == ["-m", "benchmarks.harness.tools", "bigwig-write", "chromaflow-l6"]
    assert argv[5] == str(tmp_path / "d" / "out.bw") and argv[6:9] == [str(n), "3.0", "1"]
    assert len(warm) == 4 and not (tmp_path / "w").exists()
    assert "bigwig_writers" in S.OPT_IN and S.STAGES.index("bigwig_writers") < S.STAGES.index("scaling")


def _write(d: Path, writer: str, n: int, seed: int) -> None:
    d.mkdir(parents=True)
    cmd = [sys.executable, "-m", "benchmarks.harness.tools", "bigwig-write", writer, str(d / "out.bw"), str(n), "3"]
    p = subprocess.run([*cmd, str(seed), "1"], capture_output=True, text=True, env=child_env())
    assert p.returncode == 0, p.stderr
    (d / "stdout.txt").write_text(p.stdout)  # where the runner puts it: per_run keeps the write call's seconds
    assert W._write_s(writer, d)["write_s"] == float(p.stdout.split()[-1]) >= 0


def test_every_file_is_read_back_and_a_wrong_one_fails(tmp_path):
    """The agreement reads every writer's file back: exact intervals pass; a file of other intervals fails, named."""
    for w in ("chromaflow-l1", "pybigwig"):
        _write(tmp_path / w, w, 3000, 1)
    _write(tmp_path / "other", "chromaflow-l1", 3000, 2)
    agree = W._read_back(3000, 3.0, 1)
    ok = agree({w: tmp_path / w for w in ("chromaflow-l1", "pybigwig")})
    assert ok["ok"] is True and "3,000 intervals" in ok["detail"]
    bad = agree({"chromaflow-l1": tmp_path / "chromaflow-l1", "pybigtools": tmp_path / "other"})
    assert bad["ok"] is False and bad["detail"].count("pybigtools:") == 1 and "chromaflow-l1:" not in bad["detail"]


def test_the_writers_table(tmp_path):
    """The render section: per writer the process CPU and wall, the write call's median and the file's size."""
    run = {"exit": 0, "outputs": {"out.bw": 2_500_000}}
    c = {
        "stage": "bigwig_writers",
        "case": "intervals_5000000_mean3bp",
        "params": {"intervals": 5_000_000, "mean_bp": 3.0, "seed": 1, "threads": 2},
        "runs": [{**run, "contender": "pybigwig", "write_s": x} for x in (4.0, 5.0, 6.0)],
        "contenders": {"pybigwig": {"cpu_s": {"n": 3, "median": 7.0, "min": 6.5, "max": 8.0}, "wall_s": None}},
        "agreement": {"ok": True, "detail": "every file holds exactly the 5,000,000 intervals written"},
    }
    lines = W.writers_lines({"cases": [c, {"stage": "bigwig", "case": "x"}]})
    assert "| pybigwig | 3 | 7.00 (6.50–8.00) | – | 5.00 | 2.50 |" in lines
    assert lines[0].startswith("### intervals_5000000_mean3bp: 5,000,000 intervals (mean 3 bp, seed 1), 2 threads")
    assert "* outputs: ✔ every file holds exactly the 5,000,000 intervals written" in lines
