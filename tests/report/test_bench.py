"""``chromaflow bench --quick`` with tiny sizes: real stage runs, a table, the best setting, benchmark.json format."""

from __future__ import annotations

import json

from chromaflow.report import sweep as bench
from helpers.cli import assert_one_line_error, chromaflow, ok


def test_bench_quick_tiny(tmp_path):
    out = tmp_path / "bench.json"
    res = ok(
        "bench",
        "--quick",
        "--genome-mbp",
        "0.05",
        "--subsequence-length",
        "1000",
        "--predict-rows",
        "6",
        "--batch-sizes",
        "2,6",
        "--num-workers",
        "1",
        "--threads",
        "1,2",
        "--genie3-genes",
        "12",
        "--genie3-samples",
        "8",
        "--genie3-trees",
        "5",
        "--device",
        "cpu",
        "--out",
        out,
        "--html",
        tmp_path / "bench.html",
        timeout=900,
    )
    rep = json.loads(out.read_text())
    assert rep["schema"] == "chromaflow-benchmark/1" and rep["source"] == "chromaflow bench"
    settings = [(t["stage"], t["setting"]) for t in rep["tasks"]]
    assert settings == [
        ("fasta2h5", "threads=1"),
        ("fasta2h5", "threads=2"),
        ("predict", "batch=2 workers=1"),
        ("predict", "batch=6 workers=1"),
        ("genie3", "threads=1"),
        ("genie3", "threads=2"),
    ]
    for t in rep["tasks"]:
        assert t["wall_s"] > 0
    pred = [t for t in rep["tasks"] if t["stage"] == "predict"]
    assert all(1 <= t["subsequences"] <= 6 and t["data_wait_pct"] is not None and t["bp_per_s"] > 0 for t in pred)
    fa = [t for t in rep["tasks"] if t["stage"] == "fasta2h5"]
    assert all(t["bp"] == 50_000 for t in fa)
    assert set(rep["best"]) == {"fasta2h5", "predict", "genie3"}
    assert rep["best"]["predict"]["setting"] in ("batch=2 workers=1", "batch=6 workers=1")
    assert "best predict:" in res.stdout and "stage" in res.stdout.splitlines()[0]
    assert any(r["stage"] == "predict" and r["hours_per_genome"] for r in rep["extrapolation"]["rows"])
    assert "<img alt='throughput per stage'" in (tmp_path / "bench.html").read_text()


def test_best_settings_and_bad_stage():
    tasks = [
        {"stage": "predict", "setting": "a", "bp_per_s": 1.0},
        {"stage": "predict", "setting": "b", "bp_per_s": 3.0},
        {"stage": "genie3", "setting": "t1", "targets_per_s": 5.0, "bp_per_s": None},
    ]
    best = bench.best_settings(tasks)
    assert best["predict"]["setting"] == "b" and best["genie3"]["setting"] == "t1"
    res = chromaflow("bench", "--stages", "fasta2h5,nope")
    assert_one_line_error(res, "bench", "nope")
    assert res.returncode == 1


def test_random_fasta_is_seeded(tmp_path):
    a, b = tmp_path / "a.fa", tmp_path / "b.fa"
    assert bench.write_random_fasta(a, 12_345, seed=1) == 12_345
    bench.write_random_fasta(b, 12_345, seed=1)
    assert a.read_bytes() == b.read_bytes()
    seq = b"".join(line for line in a.read_bytes().splitlines() if not line.startswith(b">"))
    assert len(seq) == 12_345 and set(seq) <= set(b"ACGT")
