"""The predict_routes harness stage (opt-in): its case and its page (benchmarks/predict/ROUTES.md); its tiny real
run against the real Predmoter is test_dev_stages_quick_run.py's (one harness run shared with other opt-in stages).
No results of the old script (benchmarks/predict/bench_predict.py) were ever committed, so there is nothing to
convert: the committed page is the page of no run."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import stages as S
from benchmarks.harness.stagekit import Ctx
from benchmarks.stages import predict_routes as PR

ROOT = Path(__file__).resolve().parents[2]
PEERS = (ROOT / ".." / "shared" / "peers").resolve()


def test_quick_case_is_built_without_running_anything(tmp_path):
    """Predmoter, the three fp32 routes and one bf16 run, alternated; fasta2h5 + predict is one command."""
    assert "predict_routes" in S.STAGES and "predict_routes" in S.OPT_IN and PR.PEERS == ["peer-predmoter"]
    ctx = Ctx(peers=PEERS, work=tmp_path / "w", quick=True, repeats=1, log=lambda m: None)
    warm, (case,) = PR.build(ctx)
    assert warm == [] and case.name == f"routes_{ctx.cfg['predict_routes_rows']}rows" and case.prepare
    assert [c.key for c in case.contenders] == ["predmoter", "h5", "fasta2h5+h5", "fasta", "bf16"]
    assert [c.repeats for c in case.contenders] == [None] * 4 + [1]
    assert case.pairs[0] == ("h5", "predmoter") and ("fasta", "fasta2h5+h5") in case.pairs
    d = tmp_path / "d"
    argv = {c.key: [str(a) for a in c.argv(d, 0)] for c in case.contenders}
    assert argv["predmoter"][0] == str(PEERS / "bin" / "peer-predmoter") and argv["predmoter"][-2:] == ["-o", str(d)]
    assert "-b" in argv["predmoter"] and argv["predmoter"][argv["predmoter"].index("-b") + 1] == "120"
    sh, c, script = argv["fasta2h5+h5"]
    assert (sh, c) == ("sh", "-c") and " fasta2h5 " in script and " && " in script and f"{d}/genome.h5" in script
    assert "--fasta" in argv["fasta"] and "--species" in argv["fasta"] and "--h5" not in argv["fasta"]
    assert argv["bf16"][argv["bf16"].index("--precision") + 1] == "bf16" and str(d / "metrics.json") in argv["bf16"]
    assert all(a[a.index("--device") + 1] == "cpu" for a in argv.values() if "--device" in a)
    assert not any(ctx.inputs().iterdir())


def _case(differ: dict, ok: dict) -> dict:
    runs = [
        {"contender": k, "exit": 0, "wall_s": w, "cpu_s": w * 2, "sys_s": 0.5, "peak_tree_rss_bytes": 2**30}
        | {"load_before": [1.0, 1.0, 1.0]}
        for k, w in (("predmoter", 16.0), ("h5", 8.0), ("fasta2h5+h5", 10.0), ("fasta", 8.0), ("bf16", 6.0))
    ]
    runs[-1]["precision_check"] = {"rows_sampled": 64, "differ": 5, "values": 1000, "raw_max_abs": 0.05}

    def ratio(a, b):
        return {"ours": a, "peer": b, "wall": {"of_medians": 1.5}, "cpu": {"of_medians": 1.25}}

    return {
        "stage": "predict_routes",
        "started": "2099-01-01T10:00:00Z",
        "command": "benchmarks/run --stages predict_routes",
        "machine": {"cpu_model": "Test CPU", "usable_cpus": 2, "host": "h"},
        "params": {"rows": 120},
        "runs": runs,
        "contenders": {k: {"label": PR.LABELS[k], "role": "ours"} for k in PR.LABELS},
        "ratios": [ratio(k, "predmoter") for k in PR.ROUTES] + [ratio("fasta", "fasta2h5+h5")],
        "agreement": {
            "ok": all(ok.values()),
            "per_contender": {k: {"ok": ok[k], "differ": differ[k]} for k in PR.ROUTES},
            "bf16": {"differ": 7, "values": 1000, "fraction": 0.007, "max_abs": 1},
        },
    }


def test_page_shows_every_full_run(tmp_path):
    """The committed page is what render makes. A full run's section: its medians, Predmoter's ratios, each route's
    verdict (identical, near-ties, DIFFERENT), issue 17's ratio and the bf16 line; a quick run is not shown."""
    assert PR.published(tmp_path)[PR.PAGE] == PR.PAGE.read_text()
    alone = tmp_path / "none"  # the stage's own folder left out: only the runs written here
    assert PR.NO_RUN in PR.published(tmp_path, own=alone)[PR.PAGE]
    case = _case({"h5": 0, "fasta2h5+h5": 3, "fasta": 9}, {"h5": True, "fasta2h5+h5": True, "fasta": False})
    res = {"machine": {"usable_cpus": 2}, "software": {"torch": "9.9"}, "cases": [case]}
    (tmp_path / "q.json").write_text(json.dumps(dict(res, quick=True)))
    assert PR.NO_RUN in PR.published(tmp_path, own=alone)[PR.PAGE]
    (tmp_path / "r.json").write_text(json.dumps(res))
    text = PR.published(tmp_path, own=alone)[PR.PAGE]
    assert "## 2099-01-01 10:00 UTC — Test CPU, 2 cores, host h" in text and "torch 9.9. 1 rounds" in text
    assert (
        "| chromaflow predict --h5 | 8.00 [8.00–8.00] | 16.00 [16.00–16.00] | 0.50 | 1024 MiB | 1.50× | 1.25× | "
        "identical |" in text
    )
    assert "| 1.50× | 1.25× | identical except near-ties |" in text and "| **DIFFERENT** |" in text
    assert "| (reference) |" in text and "fasta2h5 + predict ÷ the FASTA route, wall 1.50×, CPU 1.25×" in text
    assert "vs fp32 7 of 1000 values differ (0.7000%), max |Δ| 1; the run's own sample (64 rows): 5 of 1000" in text
