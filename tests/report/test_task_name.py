"""The task name a launcher hands a stage (CHROMAFLOW_TASK_NAME) is recorded in its metrics JSON, and the benchmark
report joins a task to the trace row of that name; metrics without it (older runs) still join by process + tag."""

from __future__ import annotations

import json

from chromaflow.utils.metrics import TASK_NAME_ENV, StageMetrics
from chromaflow.report.tasks import task_from_metrics
from chromaflow.report.trace import match_trace


def _row(name: str, status: str = "COMPLETED", realtime: str = "1.5s") -> dict:
    proc, tag = name.split(" (")
    return {
        "name": name,
        "process": proc,
        "tag": tag.rstrip(")"),
        "status": status,
        "realtime": realtime,
        "%cpu": "90.0%",
        "peak_rss": "10 MB",
        "cpus": "1",
    }


def test_stage_metrics_records_the_task_name_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(TASK_NAME_ENV, "WF:SOME_STAGE (x 2/3)")
    with StageMetrics("some-stage", tmp_path / "m.json"):
        pass
    assert json.loads((tmp_path / "m.json").read_text())["task_name"] == "WF:SOME_STAGE (x 2/3)"
    monkeypatch.delenv(TASK_NAME_ENV)
    with StageMetrics("some-stage", tmp_path / "n.json"):
        pass
    assert "task_name" not in json.loads((tmp_path / "n.json").read_text())


def test_trace_rows_are_joined_by_task_name_with_the_old_rule_for_metrics_without_one():
    rows = [
        _row("CHROMAFLOW:PREDICT (asmA 1/2)", "FAILED", "-"),
        _row("CHROMAFLOW:PREDICT (asmA 1/2)"),
        _row("CHROMAFLOW:PREDICT (asmA 2/2)", realtime="3s"),
        # a tag the old rule cannot rebuild from assembly + part: only the name joins it
        _row("TRAIN_MODEL:NEW_STAGE (run one)", realtime="7s"),
    ]
    named = task_from_metrics(
        {"stage": "predict", "assembly": "asmA", "shard": 1, "shards": 2, "task_name": "CHROMAFLOW:PREDICT (asmA 1/2)"}
    )
    odd = task_from_metrics({"stage": "new-stage", "assembly": "model", "task_name": "TRAIN_MODEL:NEW_STAGE (run one)"})
    old = task_from_metrics({"stage": "predict", "assembly": "asmA", "shard": 2, "shards": 2})
    other = task_from_metrics({"stage": "predict", "assembly": "asmB", "task_name": "CHROMAFLOW:PREDICT (asmB 1/1)"})
    assert match_trace([named, odd, old, other], rows) == 3
    assert (named["trace_status"], named["trace_attempts"], named["trace_realtime_s"]) == ("COMPLETED", 2, 1.5)
    assert (odd["trace_status"], odd["trace_realtime_s"]) == ("COMPLETED", 7.0)
    assert (old["trace_status"], old["trace_realtime_s"]) == ("COMPLETED", 3.0)
    assert other["trace_status"] is None
