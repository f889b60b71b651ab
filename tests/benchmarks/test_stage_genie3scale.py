"""The genie3scale harness stage (issue 30 §2): its cases, the planted generator, the cost fit and prediction, the
RSS bound checks and the scaling tables (cheap: the real runs are `benchmarks/run --stages genie3scale`)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from benchmarks import stages as S
from benchmarks.stages import genie3scale as G3
from benchmarks.harness.stagekit import Ctx
from benchmarks.harness import genie3scale as scale

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"


@pytest.mark.parametrize("quick", [True, False], ids=["quick", "full"])
def test_cases_are_built_without_running_anything(tmp_path, quick):
    """7 cost points (one factor at a time around the largest values), the four pipeline runs and the merge at the
    predicted size; building makes no input; the stage is not in the suite's quick harness run."""
    ctx = Ctx(peers=tmp_path, work=tmp_path / "w", quick=quick, repeats=1, log=lambda m: None)
    warm, cases = G3.build(ctx)
    cfg = ctx.cfg
    names = [c.name for c in cases]
    cost = [c for c in cases if c.params["series"] == "cost"]
    assert len(cost) == 7 and len({(c.params["samples"], c.params["regulators"], c.params["trees"]) for c in cost}) == 7
    centre = {f: max(cfg["g3scale_cost"][f]) for f in ("samples", "regulators", "trees")}
    for c in cost:  # every point differs from the centre in at most one factor
        assert sum(c.params[f] != centre[f] for f in centre) <= 1
    assert [n for n in names if n.startswith("pipeline_")] == [
        "pipeline_strong_p1",
        "pipeline_strong_p2",
        "pipeline_weak_p1",
        "pipeline_weak_p2",
    ]
    # the same four through the real pipeline and SLURM; weak: one chunk of genes per task
    slurm = {c.name: c for c in cases if c.name.startswith("slurm_")}
    assert list(slurm) == ["slurm_strong_p1", "slurm_strong_p2", "slurm_weak_p1", "slurm_weak_p2"]
    PG, PC = cfg["g3scale_pipeline"][0], cfg["g3scale_pipeline"][4]
    assert [c.params["genes"] for c in slurm.values()] == [PG, PG, PC, 2 * PC]
    argv = slurm["slurm_weak_p2"].contenders[0].argv(tmp_path / "d", 0)
    assert argv[2:4] == ["benchmarks.harness.genie3scale", "slurm"] and argv[-3:] == ["2", "--genes", str(2 * PC)]
    assert all(
        c.skip
        == (
            f"SLURM unavailable: {S.stage('genie3scale').SlurmCluster.unavailable()}"
            if G3.SlurmCluster.unavailable()
            else None
        )
        for c in slurm.values()
    )
    assert any(n.startswith("merge_") for n in names)
    argv = cost[0].contenders[0].argv(tmp_path / "d", 0)
    assert "--targets-chunk" in argv and "--threads" in argv and argv[argv.index("--threads") + 1] == "1"
    strong = next(c for c in cases if c.name == "pipeline_strong_p2").contenders[0].argv(tmp_path / "d", 0)
    assert strong[2:4] == ["benchmarks.harness.genie3scale", "pipeline"] and strong[-1] == "2"
    assert not (tmp_path / "w" / "inputs").exists() or not any((tmp_path / "w" / "inputs").iterdir())
    if not quick:
        assert cfg["g3scale_predict"] == (25_000, 1_700, 500, 1000) == G3.G3_PREDICT
    assert "genie3scale" in S.STAGES and S.STAGES[-1] == "scaling"


def test_planted_expression_is_seeded_and_carries_the_edges(tmp_path):
    """Same seed, same bytes; a planted regulator correlates with its target far more than a non-regulator."""
    scale.make(str(tmp_path / "a"), "3", "120", "12", "80")
    scale.make(str(tmp_path / "b"), "3", "120", "12", "80")
    for f in ("expression.tsv", "gold.tsv", "regulators.txt"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    lines = (tmp_path / "a" / "expression.tsv").read_text().splitlines()
    names = [ln.split("\t")[0] for ln in lines[1:]]
    X = np.array([[float(v) for v in ln.split("\t")[1:]] for ln in lines[1:]])
    assert X.shape == (120, 80) and names[:12] == [f"TF{i}" for i in range(1, 13)]
    idx = {g: i for i, g in enumerate(names)}
    edge, other = [], []
    for ln in (tmp_path / "a" / "gold.tsv").read_text().splitlines():
        t, g, y = ln.split("\t")
        r = abs(np.corrcoef(np.tanh(X[idx[t]]), X[idx[g]])[0, 1])
        (edge if y == "1" else other).append(r)
    assert len(edge) > 50 and np.mean(edge) > 3 * np.mean(other)


def _points(rng, a=-12.0, bs=1.2, br=0.5, n0=15.0, noise=0.02):
    pts = []
    for s in (100, 250, 500):
        for r in (200, 600, 1700):
            for n in (10, 20, 40):
                c = math.exp(a + bs * math.log(s) + br * math.log(r) + rng.normal(0, noise)) * (n + n0)
                pts.append({"samples": s, "regulators": r, "trees": n, "cpu_s_per_target": c})
    return pts


def test_fit_recovers_the_model_and_the_prediction_brackets_the_truth():
    """Exponents, the per-target work outside the trees (n0) and a prediction at 1,000 trees (25x beyond the
    measured trees) whose interval holds the true cost; a power law in trees would miss it."""
    rng = np.random.default_rng(1)
    fit = scale.fit_cost(_points(rng))
    e, se = fit["exponents"], fit["stderr"]
    for f, want in (("samples", 1.2), ("regulators", 0.5)):
        assert abs(e[f] - want) < 4 * se[f] + 1e-9 and se[f] < 0.05, (f, e[f], se[f])
    assert fit["n0"] == pytest.approx(15.0, rel=0.25)
    assert len(fit["residuals"]) == 27 and abs(fit["residual_sd"] - 0.02) < 0.01
    p = scale.predict(fit, 500, 1700, 1000, 25_000)
    truth = math.exp(-12.0 + 1.2 * math.log(500) + 0.5 * math.log(1700)) * (1000 + 15.0) * 25_000 / 3600
    assert p["cpu_hours_low"] < truth < p["cpu_hours_high"]
    assert p["cpu_hours_high"] / p["cpu_hours_low"] < 1.5
    # too few points or trees that never vary: no fit
    assert scale.fit_cost(_points(rng)[:4]) is None
    assert scale.fit_cost([dict(p, trees=10) for p in _points(rng)]) is None


def test_overhead_fit_is_linear_in_matrix_size():
    pts = [{"cells": c, "overhead_s": 0.4 + 2e-7 * c} for c in (1e5, 5e5, 1e6)]
    o = scale.fit_overhead(pts)
    assert o["o0"] == pytest.approx(0.4) and o["o1"] == pytest.approx(2e-7)
    assert scale.fit_overhead(pts[:1]) is None


def _tasks(tmp, rss_chunk, part_bytes=None):
    (tmp / "w").mkdir(parents=True)
    doc = {
        "plan": {"genes": 10, "chunk_size": 5, "chunks": 2, "samples": 4, "regulators": 2},
        "parallel": 1,
        "trees": 5,
        "plan_task": {"task": "plan", "peak_rss_bytes": 50 << 20, "wall_s": 1, "cpu_s": 1},
        "chunks": [
            {
                "task": "chunk1",
                "peak_rss_bytes": rss_chunk,
                "wall_s": 2.0,
                "cpu_s": 1.0,
                "compute_cpu_s": 0.5,
                "targets": 5,
                "regulators": 2,
                **({} if part_bytes is None else {"out_bytes": part_bytes}),
            }
        ],
        "merges": [{"task": "merge", "peak_rss_bytes": 90 << 20, "wall_s": 3.0, "cpu_s": 2.0}],
        "score": {"aupr": 0.5, "auroc": 0.8},
        "chunks_wall_s": 2.0,
        "wall_s": 6.0,
    }
    (tmp / "w" / "tasks.json").write_text(json.dumps(doc))
    return tmp


def test_a_task_over_its_rss_or_disk_bound_fails_the_case(tmp_path):
    bounds = {"plan": 512 << 20, "chunk": 100 << 20, "merge": 1 << 30}
    check = G3._bound_check(bounds)
    assert check({"chromaflow": _tasks(tmp_path / "ok", 99 << 20)})["ok"] is True
    bad = check({"chromaflow": _tasks(tmp_path / "bad", 101 << 20)})
    assert bad["ok"] is False and "chunk1: peak RSS 101 MiB > bound 100 MiB" in bad["detail"]
    # disk: a part at most its float64 weights (2 x 5 x 8 bytes) + 1 MiB of metadata
    limit = 2 * 5 * 8 + (1 << 20)
    ok = check({"chromaflow": _tasks(tmp_path / "dok", 99 << 20, limit)})
    assert ok["ok"] is True and "disk bound" in ok["detail"]
    big = check({"chromaflow": _tasks(tmp_path / "dbad", 99 << 20, limit + 1)})
    assert big["ok"] is False and f"chunk1: {limit + 1:,} bytes written > disk bound {limit:,}" in big["detail"]


def test_scaling_tables_label_measured_and_extrapolated():
    """The render: measured strong/weak rows from the pipeline runs, the prediction from the fit, and an N-task
    table labelled extrapolated whose speed-up follows the waves and the measured weak efficiency."""
    rng = np.random.default_rng(2)

    def cost_case(p):
        return {
            "stage": "genie3scale",
            "case": "c",
            "params": {"series": "cost", **{k: p[k] for k in ("samples", "regulators", "trees")}},
            "runs": [
                {
                    "exit": 0,
                    "cpu_s_per_target": p["cpu_s_per_target"],
                    "task_peak_rss_bytes": 1 << 26,
                    "overhead_s": 1.0 + 1e-6 * p["samples"] * 2000,
                    "cells": p["samples"] * 2000,
                }
            ],
        }

    def pipe(name, tasks, wall, only=None):
        return {
            "stage": "genie3scale",
            "case": f"pipeline_{name}",
            "agreement": {"ok": True, "detail": "ok"},
            "params": {
                "tasks": tasks,
                "genes": 5000,
                "regulators": 340,
                "samples": 500,
                "trees": 20,
                "chunks_only": only,
            },
            "runs": [
                {
                    "exit": 0,
                    "chunks_wall_s": wall,
                    "pipeline_wall_s": wall + 5,
                    "chunks_run": only or 10,
                    "plan": {"chunks": 10},
                    "chunk_cpu_s": [10.0] * (only or 10),
                    "chunk_compute_cpu_s": [8.0] * (only or 10),
                    "chunk_peak_rss_bytes": 1 << 27,
                    "chunk_targets": [500] * (only or 10),
                    "plan_task": {"peak_rss_bytes": 1 << 26},
                    "merges": [{"task": "merge", "wall_s": 20.0, "cpu_s": 15.0, "peak_rss_bytes": 1 << 28}]
                    if not only
                    else [],
                    "score": {"aupr": 0.4, "auroc": 0.9} if not only else None,
                    "load_before": [2.0],
                }
            ],
        }

    def slurm(name, tasks, wall, only=None):
        c = pipe(name, tasks, wall, only)
        c["case"] = f"slurm_{name}"
        return c

    cases = [cost_case(p) for p in _points(rng)] + [
        pipe("strong_p1", 1, 100.0),
        pipe("strong_p2", 2, 55.0),
        pipe("weak_p1", 1, 10.0, 1),
        pipe("weak_p2", 2, 12.5, 2),
        slurm("strong_p1", 1, 110.0),
        slurm("strong_p2", 2, 50.0),
        slurm("weak_p1", 1, 11.0, 1),
        slurm("weak_p2", 2, 11.0 / 0.9, 2),
    ]
    text = "\n".join(G3.g3scale_lines({"cases": cases}))
    assert "| strong (measured) | local processes | 2 | 55.00 | 1.82 | 0.91 |" in text
    assert "| weak (measured) | local processes | 2 | 12.50 | 1.60 | 0.80 |" in text
    # the same through SLURM, in rows of their own (and both kinds in the table of runs)
    assert "| strong (measured) | SLURM jobs | 2 | 50.00 | 2.20 | 1.10 |" in text
    assert "| weak (measured) | SLURM jobs | 2 | 12.22 | 1.80 | 0.90 |" in text
    runs = [ln for ln in text.splitlines() if ln.startswith("| strong_p2 |")]
    assert [ln.split(" | ")[1] for ln in runs] == ["local processes", "SLURM jobs"]
    assert "Check of the cost model on these chunks" in text and "measured 0.016 CPU s per target" in text
    assert "**Predicted** (extrapolated from the fit)" in text and "**Extrapolated** (on paper, not measured)" in text
    rows = [ln for ln in text.splitlines() if ln.startswith("| 50 | 1 |")]
    assert len(rows) == 1
    pts, fit = G3.g3scale_cost(cases)
    ext = G3.g3scale_extrapolation(
        G3._g3_pipe(cases), scale.predict(fit, 500, 1700, 1000, 25_000), scale.fit_overhead(pts), None
    )
    assert [r["waves"] for r in ext] == [50, 25, 13, 7, 4, 2, 1]
    # the SLURM jobs' weak-scaling efficiency (0.9) where they ran, as a cluster runs the tasks; else the local one
    assert ext[1]["efficiency"] == pytest.approx(0.9) and ext[1]["efficiency_from"] == "SLURM jobs"
    assert "weak-scaling efficiency measured at 2 tasks (SLURM jobs)" in text
    one, two = ext[0], ext[1]
    assert two["wall_h"] == pytest.approx((25 * one["chunk_cpu_s"] / 0.9 + one["merge_s"]) / 3600)
    local = G3.g3scale_extrapolation(
        G3._g3_pipe([c for c in cases if not c["case"].startswith("slurm_")]),
        scale.predict(fit, 500, 1700, 1000, 25_000),
        scale.fit_overhead(pts),
        None,
    )
    assert local[1]["efficiency"] == pytest.approx(0.8) and local[1]["efficiency_from"] == "local processes"
    assert one["merge_s"] == pytest.approx(15.0 * (1700 * 25_000) / (340 * 5000))  # the merge CPU s, scaled


def test_slurm_run_summary_from_the_raw_trace(tmp_path):
    """harness.genie3scale slurm's tasks.json: the plan, the GENIE3 jobs in chunk order with their metrics and part
    sizes, the merge with its links, the chunk phase from the first GENIE3 start to the last end (raw trace)."""
    import gzip

    import os

    def task(name: str, files: dict, began: float = 100.0, ended: float = 101.0) -> Path:
        d = tmp_path / "work" / name
        d.mkdir(parents=True)
        for f, text in files.items():
            (d / f).write_text(text)
        for f, t in ((".command.begin", began), (".exitcode", ended)):  # when the job's script started and ended
            (d / f).write_text("0")
            os.utime(d / f, (t, t))
        return d

    plan = task(
        "plan",
        {
            "net.genie3_plan.json": json.dumps(
                {"genes": 20, "chunk_size": 10, "chunks": 2, "samples": 8, "regulators": 4}
            )
        },
    )
    chunk = {
        i: task(
            f"c{i}",
            {
                "net.genie3.metrics.json": json.dumps(
                    {"targets": 10, "regulators": 4, "compute_s": 0.5 * i, "compute_cpu_s": 0.4 * i}
                ),
                "net.genie3.part.npz": "x" * (100 * i),
            },
            began=200.0 + 0.5 * i,
            ended=203.0 + 1.25 * i,
        )
        for i in (1, 2)
    }
    merge = task("merge", {})
    net = tmp_path / "out" / "net" / "network"
    net.mkdir(parents=True)
    with gzip.open(net / "net.genie3_links.tsv.gz", "wt") as fh:
        fh.write("regulator\ttarget\timportance\n")
    head = "task_id\tnative_id\tprocess\ttag\tstatus\texit\tstart\tcomplete\trealtime\t%cpu\tpeak_rss\tworkdir\n"
    rows = [
        ("1", "101", "CHROMAFLOW:GENIE3_PLAN", "net", "COMPLETED", "0", "1000", "1500", "400", "90.0", "1000", plan),
        ("2", "102", "CHROMAFLOW:FASTA2H5", "net", "COMPLETED", "0", "1000", "1600", "500", "80.0", "2000", plan),
        (
            "4",
            "104",
            "CHROMAFLOW:GENIE3",
            "net 2/2",
            "COMPLETED",
            "0",
            "2500",
            "6000",
            "3400",
            "99.0",
            "5000",
            chunk[2],
        ),
        (
            "3",
            "103",
            "CHROMAFLOW:GENIE3",
            "net 1/2",
            "COMPLETED",
            "0",
            "2000",
            "5000",
            "2900",
            "98.0",
            "4000",
            chunk[1],
        ),
        ("5", "105", "CHROMAFLOW:GENIE3_MERGE", "net", "COMPLETED", "0", "6500", "7000", "450", "50.0", "3000", merge),
    ]
    trace = tmp_path / "trace.txt"
    trace.write_text(head + "".join("\t".join(map(str, r)) + "\n" for r in rows))
    doc = scale.slurm_summary(trace, tmp_path / "out", None, 2, 5, 9.5)
    assert doc["plan"] == {"genes": 20, "chunk_size": 10, "chunks": 2, "samples": 8, "regulators": 4}
    assert [c["task"] for c in doc["chunks"]] == ["chunk1", "chunk2"]
    c1 = doc["chunks"][0]
    assert (c1["wall_s"], c1["cpu_s"], c1["peak_rss_bytes"], c1["slurm_job"]) == (2.9, 2.842, 4000, "103")
    assert (c1["targets"], c1["compute_cpu_s"], c1["out_bytes"]) == (10, 0.4, 100)
    assert doc["chunks_wall_s"] == 5.0  # the first job's start (200.5) to the last one's end (205.5), not the trace's
    assert doc["plan_task"]["task"] == "plan" and doc["plan_task"]["wall_s"] == 0.4
    (m,) = doc["merges"]
    assert m["task"] == "merge" and m["links"] == 20 * 4 - 4 and m["out_bytes"] > 0
    assert (doc["parallel"], doc["trees"], doc["wall_s"], doc["slurm_jobs"], doc["score"]) == (2, 5, 9.5, 5, None)
    # the case's per-run summary reads it as it reads the local pipeline's
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "tasks.json").write_text(json.dumps(doc))
    summ = G3._tasks_summary("k", tmp_path / "t")
    assert summ["chunk_wall_s"] == [2.9, 3.4] and summ["chunks_run"] == 2 and summ["chunk_peak_rss_bytes"] == 5000
