"""``benchmarks/render``: the published tables are generated, and what they show of a run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmarks.harness import core, render

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
PEERS = (ROOT / ".." / "shared" / "peers").resolve()


def test_published_tables_are_generated():
    """README/docs tables and every RESULTS.md are exactly what benchmarks/render makes from benchmarks/results/."""
    stale = [str(p.relative_to(ROOT)) for p, text in render.published().items() if p.read_text() != text]
    assert not stale, f"edited by hand or not regenerated (run benchmarks/render): {stale}"


def test_genie3_prior_tables_are_generated():
    """docs/genie3.md's three prior tables (cost, DREAM4 accuracy with and without the prior check, real sets) are what
    the genie3_prior stage's render section makes (``benchmarks/render``): from the newest full run of the stage, and
    before there is one, from the retired script's benchmarks/genie3/prior_results.json through its converter."""
    from benchmarks.stages import genie3_prior as P

    text = (ROOT / "docs" / "genie3.md").read_text()
    assert P.with_prior_tables(text, P.prior_tables()) == text, "edited by hand or not regenerated (benchmarks/render)"
    assert text.count("<!-- BEGIN GENERATED prior-") == 3  # cost, DREAM4 accuracy, real sets
    doc = json.loads(P.LEGACY.read_text())
    acc = doc["accuracy"]["priors"]
    assert acc["informative"]["check"]["decision"] == "kept" and acc["shuffled"]["check"]["decision"] == "off"


def test_targets_follow_the_measured_ratios():
    """Each target's verdict is computed from the run: a bigWig variant below 10x, or outputs that disagree,
    turns it to a cross; GENIE3's DREAM4 target needs both the speed and the AUPR."""

    def bw(name, r, ok=True):
        return {
            "stage": "bigwig",
            "case": name,
            "ratios": [{"ours": "chromaflow", "peer": "predmoter", "wall": {"of_medians": r}}],
            "agreement": {"ok": ok},
        }

    def d4(net, r, aupr_ours, aupr_peer, aupr_tn=None):
        tools = [("chromaflow", aupr_ours), ("arboreto genie3", aupr_peer)]
        tools += [("chromaflow tree-normalised", aupr_tn)] if aupr_tn is not None else []
        runs = [{"contender": t, "exit": 0, "seed": 1, "auroc": 0.7, "aupr": a, "wall_s": 1.0} for t, a in tools]
        return {
            "stage": "genie3",
            "case": f"dream4_net{net}",
            "runs": runs,
            "contenders": {t: {"label": t} for t, _ in tools},
            "ratios": [
                {"ours": o, "peer": "arboreto genie3", "wall": {"of_medians": r}}
                for o, _ in tools
                if o != "arboreto genie3"
            ],
        }

    def verdicts(cases):
        return [row.rsplit("|", 2)[1].strip() for row in render.targets_rows({"cases": cases})[2:]]

    assert verdicts([bw("realistic_a", 10.1), bw("realistic_b", 57.0)]) == ["✔"]
    assert verdicts([bw("realistic_a", 9.9), bw("realistic_b", 57.0)]) == ["✘"]
    assert verdicts([bw("realistic_a", 12.0, ok=False)]) == ["✘"]
    assert verdicts([bw("worst_50Mbp", 2.0), bw("realistic_a", 12.0)]) == ["✔"]  # the worst case has no target
    assert verdicts([d4(1, 52.0, 0.20, 0.19), d4(2, 50.0, 0.20, 0.19)]) == ["✔"]
    assert verdicts([d4(1, 52.0, 0.18, 0.19), d4(2, 50.0, 0.18, 0.19)]) == ["✘"]
    assert verdicts([d4(1, 49.0, 0.20, 0.19), d4(2, 50.0, 0.20, 0.19)]) == ["✘"]
    # the default importance and arboreto's (tree-normalised) are judged each on its own AUPR
    assert verdicts([d4(1, 52.0, 0.18, 0.19, 0.20), d4(2, 50.0, 0.18, 0.19, 0.20)]) == ["✘", "✔"]
    assert verdicts([d4(1, 52.0, 0.20, 0.19, 0.18), d4(2, 50.0, 0.20, 0.19, 0.18)]) == ["✔", "✘"]


def test_issue55_targets_follow_the_measured_ratios():
    """Issue 55's CPU targets: each verdict computed from the run (bigWig's 20x on the realistic avg case and 15x on
    every bigWig case, peaks' 5x with identical peaks, add-coverage's 5x at --threads 1 on every case, predict's
    2.5x with identical predictions), each row with its stage's limit."""

    def case(stage, name, ours, peer, r, agreement):
        return {
            "stage": stage,
            "case": name,
            "ratios": [{"ours": o, "peer": peer, "wall": {"of_medians": x}} for o, x in zip(ours, r)],
            "agreement": agreement,
        }

    def verdicts(cases):
        return [row.split("|")[3].strip() for row in render.targets55_rows({"cases": cases})[2:]]

    def bw(name, r, ok=True):
        return case("bigwig", name, ["chromaflow"], "predmoter", [r], {"ok": ok})

    assert verdicts([bw("realistic_200Mbp_bw_avg", 20.5), bw("worst_50Mbp_bw_avg", 15.1)]) == ["✔"]
    assert verdicts([bw("realistic_200Mbp_bw_avg", 19.9), bw("worst_50Mbp_bw_avg", 25.0)]) == ["✘"]
    assert verdicts([bw("realistic_200Mbp_bw_avg", 25.0), bw("realistic_200Mbp_bw_avg_ws150", 14.9)]) == ["✘"]
    assert verdicts([bw("realistic_200Mbp_bw_avg", 25.0), bw("realistic_200Mbp_bg_avg", 3.0)]) == ["✔"]  # bedGraph
    assert verdicts([bw("realistic_200Mbp_bw_avg", 25.0, ok=False)]) == ["✘"]
    pk = case("peaks", "p", ["chromaflow"], "macs3", [5.2], {"ok": True})
    assert verdicts([pk]) == ["✔"] and verdicts([{**pk, "agreement": {"ok": False}}]) == ["✘"]
    per = {"per_contender": {"chromaflow t1": {"ok": True}, "chromaflow t2": {"ok": True}}}
    cov = case("coverage", "c", ["chromaflow t1", "chromaflow t2"], "helixer", [4.9, 9.0], per)
    assert verdicts([cov]) == ["✘"]  # --threads 2 does not count for --threads 1
    assert verdicts([{**cov, "ratios": [{**cov["ratios"][0], "wall": {"of_medians": 5.1}}]}]) == ["✔"]
    pr = case("predict", "p", ["chromaflow fp32"], "predmoter", [2.6], {"fp32": {"ok": True}})
    assert verdicts([pr]) == ["✔"] and verdicts([{**pr, "agreement": {"fp32": {"ok": False}}}]) == ["✘"]
    row = render.targets55_rows({"cases": [pr]})[2]
    assert row.rstrip(" |").endswith(render._limit("predict").rstrip()) and "torch" in row


def test_render_of_a_full_run(tmp_path):
    """A (tiny, fake) full run renders into the README row, the fasta2h5 engine table and RESULTS.md."""

    def cmd(seconds):
        return lambda d, r: [
            sys.executable,
            "-c",
            f"import time; t=time.process_time()\nwhile time.process_time()-t<{seconds}: pass",
        ]

    case = core.Case(
        "fasta2h5",
        "5x10Mbp",
        {"bp": 50_000_000, "records": 5},
        [
            core.Contender("helixer", "Helixer fasta2h5.py", "peer", cmd(0.4)),
            core.Contender("chromaflow", "chromaflow fasta2h5 (default)", "ours", cmd(0.02)),
        ],
        [("chromaflow", "helixer")],
        agree=lambda dirs: {
            "ok": True,
            "detail": "same",
            "per_contender": {"chromaflow": {"ok": True, "size_ratio": 0.83}},
        },
    )
    rec = core.run_case(case, tmp_path / "w", 3, log=lambda m: None)
    rec.update(repeats=3, command="benchmarks/run --stages fasta2h5")
    res = {
        "schema": core.SCHEMA,
        "command": "benchmarks/run --stages fasta2h5",
        "commands": ["benchmarks/run"],
        "quick": False,
        "repeats": 3,
        "machine": core.machine_info(),
        "cases": [rec],
        "first_started": "t0",
        "last_started": "t1",
        "last_finished": "t2",
    }
    rdir = tmp_path / "results"
    rdir.mkdir()
    (rdir / "2099-01-01-test.json").write_text(json.dumps(res))
    out = render.published(rdir)
    readme = out[ROOT / "benchmarks" / "README.md"]
    row = next(line for line in readme.splitlines() if line.startswith("| fasta2h5 | 5x10Mbp |"))
    r = rec["ratios"][0]["cpu"]["of_medians"]
    assert 5 < r and f"**{r:.1f}×**" in row and "equal size ✔" in row and "0.830× Helixer's" in row
    assert "2099-01-01-test.json" in readme
    w = rec["ratios"][0]["wall"]["of_medians"]
    target = next(line for line in readme.splitlines() if line.startswith("| FASTA→h5 ≥ 15× Helixer"))
    assert f"{w:.1f}–{w:.1f}× (lowest: 5x10Mbp)" in target and target.endswith("✔ |" if w >= 15 else "✘ |")
    f2h = out[ROOT / "docs" / "fasta2h5.md"]
    assert "| chromaflow fasta2h5 (default) |" in f2h and "| 0.830 |" in f2h
    assert "### 5x10Mbp" in out[ROOT / "benchmarks" / "fasta2h5" / "RESULTS.md"]
    assert (
        "No published run yet" in out[ROOT / "benchmarks" / "genie3" / "RESULTS.md"]
        or "no case of this stage" in out[ROOT / "benchmarks" / "genie3" / "RESULTS.md"]
    )


def test_render_of_a_train_case():
    """A train case renders seconds per epoch (each tool's own record) beside the process times, the per-epoch ratio
    in its ratio row and the last epoch's losses; the coverage and train stages get their RESULTS.md."""

    def run(key, wall, epoch_s):
        return {
            "contender": key,
            "exit": 0,
            "wall_s": wall,
            "cpu_s": wall,
            "peak_tree_rss_bytes": 2**30,
            "load_before": [1.0],
            "load_after": [1.0],
            "epoch_s": epoch_s,
            "curve": [{"avg_train_loss": 2.5087, "avg_val_loss": 2.4754, "avg_val_accuracy": 0.00047}],
        }

    runs = [
        run("predmoter", 60.0, 50.0),
        run("ours", 50.0, 40.0),
        run("predmoter", 62.0, 52.0),
        run("ours", 52.0, 38.0),
    ]
    cons = {
        k: {
            "label": f"{k} label",
            "role": "peer" if k == "predmoter" else "ours",
            "wall_s": core.summarize([r["wall_s"] for r in runs if r["contender"] == k]),
            "cpu_s": core.summarize([r["cpu_s"] for r in runs if r["contender"] == k]),
            "peak_rss_bytes": core.summarize([2**30]),
        }
        for k in ("predmoter", "ours")
    }
    c = {
        "stage": "train",
        "case": "1x641.52kbp_default_1epoch",
        "params": {"epochs": 1},
        "runs": runs,
        "contenders": cons,
        "ratios": [
            {
                "ours": "ours",
                "peer": "predmoter",
                "wall": core.ratio(cons["predmoter"]["wall_s"], cons["ours"]["wall_s"]),
                "cpu": core.ratio(cons["predmoter"]["cpu_s"], cons["ours"]["cpu_s"]),
            }
        ],
        "agreement": {"ok": True, "detail": "equal", "per_contender": {"ours": {"ok": True}}},
    }
    (row,) = render.headline_rows({"machine": {}, "cases": [c]})
    assert "per epoch 51.0 ÷ 39.0 s = **1.31×**; ✔ loss curve equal" in row
    sec = "\n".join(render.case_section(c))
    assert "| s / epoch median (min–max) |" in sec and "| 39.0 (38.0–40.0) | 2.50870 / 2.47540 / 0.00047 |" in sec
    assert {"coverage", "train"} <= set(render.STAGE_DIRS)


def test_fasta_shards_table_is_rendered_from_the_newest_results(tmp_path):
    """docs/predict.md's FASTA-index table comes from the fasta_shards stage's results (here: files of the script
    before it, benchmarks/fasta_shards/run, read through its converter), not typed by hand: the newest file's figures
    (bytes read per shard and in all, the index's share of the file) end up in the table."""
    from benchmarks.stages import fasta_shards as fsr

    def route(size, scan, index):
        return {
            "bytes_on_disk": size,
            "load_before": 1.0,
            "load_after": 2.0,
            "plan_scan": {"wall_s": 0.2, "cpu_s": 0.2},
            "plan_index": {"wall_s": 0.8, "cpu_s": 0.8, "index": "fai"},
            "shards": [
                {
                    "shard": f"{i}/2",
                    "rows": [0, 1],
                    "scan": {"wall_s": 0.3, "cpu_s": 0.3, "bytes_read": s},
                    "index": {"wall_s": 0.1, "cpu_s": 0.1, "bytes_read": x, "records_read": 1},
                }
                for i, (s, x) in enumerate(zip(scan, index), start=1)
            ],
        }

    res = {
        "benchmark": "fasta_shards",
        "command": "benchmarks/fasta_shards/run --mbp 10 --shards 2",
        "mbp": 10,
        "records": 4,
        "line_width": 60,
        "subsequence_length": 21384,
        "shard_count": 2,
        "started": "2099-01-02",
        "machine": {"cpu_model": "Test CPU", "logical_cpus": 2},
        "routes": {
            "plain": route(10_000_000, [12e6, 15e6], [5e6, 5e6]),
            "bgzip": route(5_000_000, [8e6, 9e6], [2.5e6, 2.5e6]),
        },
    }
    old = dict(res, started="2099-01-01", routes={k: route(1, [1, 1], [1, 1]) for k in ("plain", "bgzip")})
    (tmp_path / "2099-01-01-10Mbp.json").write_text(json.dumps(old))
    (tmp_path / "2099-01-02-10Mbp.json").write_text(json.dumps(res))
    text = fsr.render(None, tmp_path)
    assert "2099-01-02-10Mbp.json" in text and "Test CPU" in text and "load average 1.0–2.0" in text
    rows = {r.split("|")[1].strip(): r for r in text.splitlines() if r.startswith("| plain") or r.startswith("| bgzip")}
    assert "| 12–15 MB of 10.0 MB on disk | 27 MB (2.70× the file) |" in rows["plain, scan"]
    assert "| 5 MB of 10.0 MB on disk | 10 MB (1.00× the file) |" in rows["plain, index"]
    assert "| 2 MB of 5.0 MB on disk | 5 MB (1.00× the file) |" in rows["bgzip, index"]
    assert "costs 4.0× the scan's CPU" in text
    assert fsr.render(None, tmp_path / "none") == fsr.NO_RUN


def test_command_line_help_and_a_missing_results_file(tmp_path, capsys):
    """``benchmarks/render --help`` prints its usage (it once read "--help" as a results file and crashed), and a
    results file that is not there is one line naming it, exit 2, before anything is rendered."""
    with pytest.raises(SystemExit) as e:
        render.main(["--help"])
    assert e.value.code == 0 and "usage: benchmarks/render" in capsys.readouterr().out
    missing = tmp_path / "nope.json"
    with pytest.raises(SystemExit) as e:
        render.main([str(missing)])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and err[-1] == f"benchmarks/render: error: {missing}: no such results file"
