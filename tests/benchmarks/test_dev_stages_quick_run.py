"""One real ``benchmarks/run --quick`` of the opt-in stages predict_routes, predict_feed, fasta_shards, bigwig_writers,
variant and genie3_prior, shared by a test per stage. Each stage's test checks what the stage's own tiny real run
was checked for when it had one per test file: the stage's cases ran, their outputs agree, and its page or table
renders from the run. One harness start and one set of generated inputs, kept between suite runs (as
test_harness_quick_run.py keeps its own), instead of six.

The gpu stage's predict case stays a test of its own (test_stage_gpu.py): with ``--quick`` on a CPU the stage runs
all its cases (Predmoter's predict and training among them) at sizes above that test's, and on a machine with CUDA
it would not take the CPU path that test checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks.harness import render
from benchmarks.harness.env import child_env
from benchmarks.stages import bigwig_writers as W
from benchmarks.stages import fasta_shards as FS
from benchmarks.stages import genie3_prior as P
from benchmarks.stages import predict_feed as PF
from benchmarks.stages import predict_routes as PR
from benchmarks.stages import variant as V
from helpers.environment import unavailable
from helpers.bench_inputs import keep_suite_inputs, suite_inputs

ROOT = Path(__file__).resolve().parents[2]
PEERS = (ROOT / ".." / "shared" / "peers").resolve()
#: the stages of the shared run (the harness runs them in benchmarks.stages.STAGES order)
STAGES = ("predict_routes", "predict_feed", "fasta_shards", "bigwig_writers", "variant", "genie3_prior")
#: the harness's last line when it ran to its end with failed cases (exit 1); a crash (exit 1 too) has no such line
FAILURES = "case(s) whose outputs did not agree or could not be prepared"


@dataclass
class Run:
    rc: int
    stderr: str
    files: list[Path]  # the results files the run wrote (one: <out>/<date>-<host>-quick.json)

    def results(self) -> dict:
        """The results file's contents, a fresh copy per call (a test may change it)."""
        return json.loads(self.files[0].read_text()) if len(self.files) == 1 else {"cases": []}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Run:
    """The stages' one quick run (~70 s on two busy cores, half of it predict_routes): Predmoter on 4 rows against
    chromaflow predict's routes, the 2 Mbp feeds and FASTA shards, 20,000 intervals through four bigWig writers, 3
    variants on a tiny model, DREAM4 network 1 with 20 trees. Its generated inputs (FASTA, h5, checkpoints, VCF,
    priors: 14 MB) are kept after a passing run, keyed by the code that makes them and these stages."""
    tmp = tmp_path_factory.mktemp("dev-stages")
    cache = Path(os.environ.get("CHROMAFLOW_CACHE", Path.home() / ".cache" / "chromaflow")) / "test-dev-bench-inputs"
    inputs, ready = suite_inputs(cache, STAGES)
    p = subprocess.run(
        [sys.executable, "-m", "benchmarks.harness.main", "--quick", "--stages", ",".join(STAGES), "--peers"]
        + [str(PEERS), "--out", str(tmp / "out"), "--workdir", str(tmp / "w"), "--inputs", str(inputs)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=child_env(),
        timeout=1800,
    )
    if p.returncode == 0:
        keep_suite_inputs(inputs, ready)
    return Run(p.returncode, p.stderr, sorted((tmp / "out").glob("*-quick.json")))


def _cases(run: Run, stage: str) -> tuple[list[dict], dict]:
    """The stage's case records and the results as the stage's own run would have written them (its cases only).
    The stage's own run had to exit 0; here the run must have gone to its end (exit 0, or 1 for failed cases) and
    no failure may be this stage's: a case whose outputs did not agree, or the stage's inputs failing (case *)."""
    assert run.rc == 0 or (run.rc == 1 and FAILURES in run.stderr), run.stderr[-3000:]
    assert len(run.files) == 1, run.files
    res = run.results()
    cases = [c for c in res["cases"] if c["stage"] == stage]
    failed = [c for c in cases if c["case"] == "*" or (c.get("agreement") or {}).get("ok") is False]
    assert cases and not failed, ({c["id"]: c.get("skipped") or c["agreement"] for c in failed}, run.stderr[-3000:])
    return cases, dict(res, cases=cases)


@pytest.mark.reference
def test_predict_routes(run, tmp_path):
    """predict_routes (4 rows, ~40 CPU-s, Predmoter's start-up most of it): every fp32 route equals Predmoter's
    output, bf16's deviation and its own sample are recorded, the page renders."""
    (case,), res = _cases(run, "predict_routes")
    if (case.get("skipped") or "").startswith("peer unavailable"):  # the harness probed the peer: it does not run
        unavailable(f"predict_routes: {case['skipped']}", waiver="CHROMAFLOW_REQUIRE_REFERENCE")
    ag = case["agreement"]
    assert ag["ok"] is True and set(ag["per_contender"]) == set(PR.ROUTES) and ag["bf16"]["values"] > 0, ag
    assert [r["contender"] for r in case["runs"]] == ["predmoter", "h5", "fasta2h5+h5", "fasta", "bf16"]
    assert case["runs"][-1]["precision_check"]["values"] > 0 and len(case["ratios"]) == 4
    (tmp_path / "pub").mkdir()
    (tmp_path / "pub" / "run.json").write_text(json.dumps(dict(res, quick=False)))
    text = PR.published(tmp_path / "pub", own=tmp_path / "none")[PR.PAGE]
    assert text.count("| identical |") == 3 and "bf16 (`--precision bf16`, one run)" in text


def test_predict_feed(run, tmp_path):
    """predict_feed (2 Mbp, ~10 CPU-s): every feed ran, agreed, and renders."""
    (case,), res = _cases(run, "predict_feed")
    assert case["agreement"]["ok"] is True, case["agreement"]
    assert [r["contender"] for r in case["runs"]] == [f[0] for f in PF.FEEDS]
    assert all(r["exit"] == 0 and r["feed"]["mbp_per_cpu_s"] > 0 for r in case["runs"])
    assert case["runs"][1]["feed"]["two_core_capacity_mbps"] and case["runs"][-1]["feed"]["size_of_raw"] > 0
    (tmp_path / "pub").mkdir()
    (tmp_path / "pub" / "run.json").write_text(json.dumps(dict(res, quick=False)))
    text = PF.published(tmp_path / "pub", own=tmp_path / "none")[PF.PAGE]
    assert "from `run.json`" in text and "| FASTA, reader process |" in text and "**failed**" not in text


def test_fasta_shards(run, tmp_path):
    """fasta_shards (2 Mbp, 2 shards, ~6 CPU-s): both routes agree, the index route reads about the file once, and
    the table renders from the run."""
    cases, res = _cases(run, "fasta_shards")
    assert [c["case"] for c in cases] == ["plain_2Mbp", "bgzip_2Mbp"]
    for c in cases:
        assert c["agreement"]["ok"] is True, c["agreement"]
        assert all(r["exit"] == 0 and r["measured"]["bytes_on_disk"] > 0 for r in c["runs"])
    plain = {r["contender"]: r["measured"] for r in cases[0]["runs"]}
    assert plain["plan_index"]["index"] == "fai" and plain["s1_index"]["records_read"] >= 1
    size, read = plain["plan_scan"]["bytes_on_disk"], sum(plain[f"s{i}_index"]["bytes_read"] for i in (1, 2))
    assert 0.99 * size < read <= size  # every base once, headers not
    (tmp_path / "pub").mkdir()
    (tmp_path / "pub" / "run.json").write_text(json.dumps(dict(res, quick=False)))
    text = FS.render(tmp_path / "pub")  # newer than the old script's run in the stage's folder
    assert "From `run.json`" in text and "| plain, index |" in text and "| bgzip, scan |" in text


def test_bigwig_writers(run):
    """bigwig_writers (20,000 intervals, ~5 CPU-s): every writer ran, its write call and file size recorded, the
    files agree, the results Markdown has the writers' table."""
    (c,), _ = _cases(run, "bigwig_writers")
    assert c["agreement"]["ok"] is True, c["agreement"]
    assert {r["contender"] for r in c["runs"]} == set(W.WRITERS)
    assert all(r["exit"] == 0 and r["write_s"] > 0 and r["outputs"]["out.bw"] > 0 for r in c["runs"])
    (f,) = run.files
    md = f.with_suffix(".md").read_text()
    assert "## bigWig writers on the same intervals" in md and "| chromaflow-l1 | 1 |" in md
    assert render.render_markdown(json.loads(f.read_text()), f.name, None) == md


def test_variant(run, tmp_path):
    """variant (a tiny model, 3 variants: ~15 CPU-s): the CPU case runs both precisions, the metrics are kept with
    every run, the tables have the same rows; the CUDA case is skipped with the reason where there is no CUDA; the
    page shows the run once it is a full one."""
    (cpu, cuda), res = _cases(run, "variant")
    assert cpu["agreement"]["ok"] is True and "3 rows" in cpu["agreement"]["detail"], cpu["agreement"]
    for r in cpu["runs"]:
        assert r["exit"] == 0 and r["metrics"]["scored"] == 3 and r["metrics"]["precision"] == r["contender"]
    if cuda.get("skipped"):
        assert "CUDA is not available" in cuda["skipped"]
    res["quick"] = False
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x.json").write_text(json.dumps(res))
    page = V.variant_page((tmp_path / "full",))
    assert "— cpu, host" in page and "| cpu | fp32 | " in page and "| cpu | bf16 | " in page


@pytest.mark.reference
def test_genie3_prior(reference_dir, run, tmp_path):
    """genie3_prior (network 1, 20 trees, one alpha: ~10 CPU-s): every run's figure recorded; the check keeps the
    informative prior and turns the shuffled one off (the same z and p as the retired script's record: the same
    priors); once full, the run makes both tables."""
    (cost, acc), res = _cases(run, "genie3_prior")
    assert all(r["exit"] == 0 and r["compute_cpu_s"] > 0 for r in cost["runs"])
    assert [r["prior_check_s"] > 0 for r in cost["runs"] if r["contender"] == "prior check"] == [True]
    checks = {r["contender"]: r["prior_check"] for r in acc["runs"] if r.get("prior_check")}
    old = json.loads(P.LEGACY.read_text())["accuracy"]["priors"]
    for name in P.PRIORS:  # the correlation test: the retired script's record; the default keeps and drops alike
        got = checks[f"{name} alpha 0.5 check correlation"]
        assert (got["decision"], got["z"], got["p"]) == tuple(old[name]["check"][k] for k in ("decision", "z", "p"))
        assert checks[f"{name} alpha 0.5 check auto"]["decision"] == got["decision"]
    runs = {r["contender"]: r for r in acc["runs"]}
    assert runs["shuffled alpha 0.5 check auto"]["aupr"] == runs["no prior"]["aupr"]  # turned off: alpha 0's bytes
    assert runs["informative alpha 0.5 check auto"]["aupr"] == runs["informative alpha 0.5 check off"]["aupr"]
    res["quick"] = False
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x.json").write_text(json.dumps(res))
    t = P.prior_tables(tmp_path / "full")
    # the cost and accuracy tables come from this run; the real-data table from its own file (no real_ case here)
    assert all(
        t[k].startswith("Generated from `benchmarks/results/x.json` (`benchmarks/run --quick")
        for k in ("prior-cost", "prior-accuracy")
    )
    assert t["prior-real"].startswith("Generated from `benchmarks/genie3/prior_check_results.json`")
    assert "| 1 | " in t["prior-cost"] and "| α 0 (= no prior) | α 0.5 |" in t["prior-accuracy"]
