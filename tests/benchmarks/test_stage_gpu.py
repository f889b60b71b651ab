"""The gpu harness stage (``benchmarks/stages/gpu.py``, run by ``benchmarks/gpu/run``): its cases on the CPU dry
path, the predict case measured on the CPU at toy sizes, NVML windows, ``--set``, and the committed GPU results
(files of the former ``benchmarks/gpu/run``) rendering to the committed page through the converter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import stages as S
from benchmarks.harness import core
from benchmarks.harness import gpu as tools
from benchmarks.harness.stagekit import Ctx
from benchmarks.stages import gpu as G

ROOT = Path(__file__).resolve().parents[2]
PEERS = (ROOT / ".." / "shared" / "peers").resolve()
CPU = {"gpu": "none (CPU dry run)", "torch": "t", "cuda": None, "cudnn": None}


def _ctx(tmp_path, quick: bool = True, peers: Path = PEERS) -> Ctx:
    return Ctx(peers=peers, work=tmp_path / "w", quick=quick, repeats=1, log=lambda m: None)


@pytest.fixture
def cpu(monkeypatch):
    """This machine as one without CUDA, whatever it has."""
    monkeypatch.setattr(G, "cuda_available", lambda: False)
    monkeypatch.setattr(G, "device_record", lambda: dict(CPU))


def test_cpu_dry_path_cases(tmp_path, cpu, monkeypatch):
    """Opt-in; without CUDA only the quick run builds (the full one says why not); every case on the CPU: predict
    each precision first (the batch cache emptied) and cached, Predmoter and ours on the same h5 and batch (ours,
    once the predict case found it), training Predmoter vs our three variants, the variant stage's CPU case; the
    forward case only when asked; building makes no input."""
    assert "gpu" in S.STAGES and "gpu" in S.OPT_IN and S.STAGES[-1] == "scaling"
    with pytest.raises(RuntimeError, match="no CUDA device"):
        G.build(_ctx(tmp_path, quick=False))
    warm, cases = G.build(_ctx(tmp_path))
    cfg = S.sizes(True)
    assert warm == [] and [c.id for c in cases][:3] == [
        f"gpu/predict_{cfg['gpu_mbp']:g}Mbp",
        f"gpu/peer_{cfg['gpu_peer_mbp']:g}Mbp",
        f"gpu/train_{cfg['gpu_train_chunks']}chunks_{cfg['gpu_epochs']}epochs",
    ]
    assert [c.id.split("_")[0] for c in cases[3:]] == ["variant/cpu"] and cases[3].stage == "variant"
    assert not list((tmp_path / "w").rglob("*.fa")) and not list((tmp_path / "w").rglob("*.ckpt"))
    pred, peer, train = cases[:3]
    assert [c.key for c in pred.contenders] == ["fp32_first", "fp32_cached", "bf16_first", "bf16_cached"]
    d = tmp_path / "d"
    d.mkdir()
    argv = pred.contenders[0].argv(d, 0)
    assert argv[argv.index("--device") + 1] == "cpu" and argv[argv.index("--metrics") + 1] == str(d / "metrics.json")
    cache = Path(pred.contenders[0].env["CHROMAFLOW_CACHE"])
    cache.mkdir(parents=True)
    pred.contenders[1].setup(d, 0)  # cached: the cache stays
    assert cache.exists()
    pred.contenders[0].setup(d, 0)  # first: an empty cache
    assert not cache.exists()
    pm = peer.contenders[0].argv(d, 0)
    assert pm[0].endswith("peer-predmoter") and pm[pm.index("--device") + 1] == "cpu" and pm[-1] == "256"
    # the predict case's batch size, once measured, is the peer case's
    (d / "metrics.json").write_text(json.dumps(_metrics(batch=7)))
    assert pred.per_run("fp32_first", d)["run"] == "first"
    assert peer.contenders[0].argv(d, 0)[-1] == "7" and peer.contenders[1].argv(d, 0)[-3] == "7"
    assert [c.key for c in train.contenders] == ["predmoter", "ours", "ours_bf16", "ours_ram"]
    assert train.pairs == [("ours", "predmoter"), ("ours_bf16", "predmoter"), ("ours_ram", "predmoter")]
    ours = train.contenders[2].argv(d, 0)
    assert ours[ours.index("--device") + 1] == "cpu" and ours[-4:-2] == ["--precision", "bf16-mixed"]
    pm = train.contenders[0].argv(d, 0)
    assert "--metrics" in ours and pm[pm.index("-e") + 1] == "1" and pm[pm.index("--device") + 1] == "cpu"
    monkeypatch.setitem(G.QUICK, "gpu_forward", True)
    _, cases = G.build(_ctx(tmp_path))
    assert cases[1].id == "gpu/forward" and cases[1].contenders[0].argv(d, 0)[-1] == "cpu"
    _, cases = G.build(_ctx(tmp_path, peers=tmp_path / "no-peers"))  # no Predmoter: its cases say why
    assert [c.skip is not None for c in cases] == [False, False, True, True, False]


def _metrics(batch: int, precision: str = "fp32") -> dict:
    return {"precision": precision, "wall_s": 2.0, "bp": 1000, "loop_s": 0.5, "batch_size": batch}


def test_predict_case_measured_on_the_cpu(tmp_path, cpu, monkeypatch):
    """The dry path end to end for the predict case (toy assembly, tiny model): four processes timed by the
    harness, their metrics kept, fp32 checked against the CPU path and bf16 against fp32 by the child checks, and
    the page rendered from the results."""
    monkeypatch.setitem(G.QUICK, "gpu_mbp", 0.05)
    ctx = _ctx(tmp_path)
    _, cases = G.build(ctx)
    rec = core.run_case(cases[0], tmp_path / "runs", 1, lambda m: None)
    assert [r["contender"] for r in rec["runs"]] == ["fp32_first", "fp32_cached", "bf16_first", "bf16_cached"]
    assert all(r["exit"] == 0 and r["bp"] > 0 and r["phases_s"] and r["wall_s"] > 0 for r in rec["runs"])
    ag = rec["agreement"]
    assert ag["ok"] is True and ag["fp32_vs_cpu"]["unexpected_count"] == 0 and ag["bf16_vs_fp32"]["values"] > 0
    res = {
        "schema": core.SCHEMA,
        "command": "benchmarks/run --stages gpu --quick",
        "first_started": rec["started"],
        "machine": {"host": "h", "cpu_model": "c", "usable_cpus": 2},
        "quick": True,
        "cases": [rec],
    }
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "r.json").write_text(json.dumps(res))
    md = G.results_page(tmp_path / "results")
    assert "## none (CPU dry run) — " in md and "| fp32 (first) |" in md and "| bf16 (cached) |" in md
    assert "**identical except documented ties**" in md and "Where a process's seconds go" in md


def test_nvml_windows_cut_the_samples_per_run(tmp_path):
    """Each run sees the samples taken since its window opened: utilisation over the process and its busy span,
    and inside each epoch's training part (wall-clock epoch times mapped onto the sampler's clock)."""
    w = tools.GpuWindows(cuda=False)
    d = tmp_path / "r0"
    assert w.busy(d) is None  # nothing sampled (the CPU)

    class Fake:
        samples = {0: [(9.0, 99, 1), (10.0, 0, 5), (10.5, 50, 7), (11.0, 100, 9), (11.5, 0, 6), (12.0, 0, 2)]}

    w.nvml = Fake()
    w.opened[str(d)] = (10.0, 1000.0)  # perf_counter 10 s = unix 1000 s
    b = w.busy(d)
    assert b["mean_pct"] == 150 / 5 and b["busy_span_mean_pct"] == 75 and b["busy_span_s"] == 0.5
    assert b["max_pct"] == 100 and b["memory_used_max_bytes"] == 9
    curve = [
        {"train_start_unix": 1000.4, "train_end_unix": 1001.1},
        {"train_start_unix": 1001.4, "train_end_unix": 1001.6},
    ]
    w.epochs(d, curve)
    assert [e["gpu_util_train_pct"] for e in curve] == [75, 0]


def test_set_changes_the_stage_sizes(monkeypatch):
    monkeypatch.setattr(G, "FULL", dict(G.FULL))
    monkeypatch.setattr(G, "QUICK", dict(G.QUICK))
    G.override(["train_chunks=3600", "gpu_deflate=isal:1", "forward=true", "peer_batch=null"])
    for table in (G.FULL, G.QUICK):
        assert table["gpu_train_chunks"] == 3600 and table["gpu_deflate"] == "isal:1"
        assert table["gpu_forward"] is True and table["gpu_peer_batch"] is None
    with pytest.raises(SystemExit, match="KEY one of"):
        G.override(["no_such_size=1"])


def test_committed_results_render_to_the_committed_page():
    """benchmarks/gpu/RESULTS.md is what the render section makes of benchmarks/gpu/results/ (the files of the
    former benchmarks/gpu/run through the converter: the same figures; the harness's own files as written), and
    benchmarks/render publishes it."""
    from benchmarks.harness import render

    page = ROOT / "benchmarks" / "gpu" / "RESULTS.md"
    assert G.results_page(G.RESULTS) == page.read_text(), "regenerate it: benchmarks/render"
    assert render.published()[page] == page.read_text()
    files = G.gpu_results(G.RESULTS)
    assert len(files) == len(list(G.RESULTS.glob("*.json"))) >= 4
    assert {"converted_from" in res for _, res in files} == {True, False}, "legacy and harness files both"
    for _, res in files:  # each as the harness writes it: cases of this stage with run records
        assert res["schema"] == core.SCHEMA
        assert res.get("converted_from", "benchmarks/gpu/run").startswith("benchmarks/gpu/run")
        for c in res["cases"]:
            if c["stage"] == "variant":  # the variant stage's case on the GPU (read by the variant page)
                assert c["id"].startswith("variant/cuda_") and c["params"]["device"] == "cuda"
                continue
            assert c["id"] == f"gpu/{c['case']}" and c["params"]["device"]["gpu"].startswith("NVIDIA")
            assert all({"contender", "repeat", "exit"} <= set(r) for r in c["runs"])
            assert set(c["contenders"]) == {r["contender"] for r in c["runs"]}
