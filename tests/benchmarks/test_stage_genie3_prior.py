"""The genie3_prior harness stage (it replaced ``benchmarks/genie3/run_benchmark.py prior``): its cases, its seeded
priors, the converter that keeps docs/genie3.md's two prior tables figure for figure from the retired script's
results file, a newer run taking over; its tiny real run through the harness is test_dev_stages_quick_run.py's."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks import stages as S
from benchmarks.harness import core, render, tools
from benchmarks.harness.stagekit import Ctx
from benchmarks.stages import genie3_prior as P

#: rows of docs/genie3.md's prior tables as ``run_benchmark.py prior-render`` wrote them (before the port)
OLD_COST = [
    "| net | no prior (CPU s) | α = 0.25 | α = 0.5 | α = 1 | prior check (CPU s) |",
    "| 1 | 1.79 | 1.13× | 1.18× | 1.09× | 0.0063 |",
    "| 4 | 1.74 | 1.09× | 1.10× | 1.16× | 0.0120 |",
    "Weighted / unweighted: 1.03–1.18× (limit 1.2×).",
]
OLD_ACCURACY = [
    "| informative | auto (then the correlation test) | kept (z 5.33, p 4.8e-08) | 0.158 | 0.214 | 0.231 | 0.273 "
    "| 0.293 | 0.161 |",
    "| shuffled | off | – | 0.158 | 0.144 | 0.140 | 0.093 | 0.058 | 0.018 |",
    "| shuffled | auto (then the correlation test) | off (z -1.91, p 0.97) | 0.158 | 0.158 | 0.158 | 0.158 | 0.158 "
    "| 0.158 |",
]
WHERE = (
    "Generated from `benchmarks/genie3/prior_results.json` (`python benchmarks/genie3/run_benchmark.py prior` at "
    "commit a2c68fc, 2026-11-27T07:16:22Z – 2026-11-27T07:22:41Z, on AMD EPYC (2 usable CPUs), load average 12.5 "
    "before, 19.1 after)"
)


@pytest.mark.parametrize("quick", [True, False], ids=["quick", "full"])
def test_cases_are_built_without_running_anything(tmp_path, quick):
    """A cost case per network (no prior, each alpha with the check off, the check alone; one thread), one accuracy
    case (no prior, then each prior x alpha x check mode, one run each); building makes no input."""
    ctx = Ctx(peers=tmp_path, work=tmp_path / "w", quick=quick, repeats=3, log=lambda m: None)
    warm, cases = P.build(ctx)
    nets = [1] if quick else [1, 2, 3, 4, 5]
    assert [c.name for c in cases] == [f"cost_net{n}" for n in nets] + ["accuracy_net1"]
    alphas = ["0.5"] if quick else ["0.25", "0.5", "1"]
    cost = cases[0]
    assert [x.key for x in cost.contenders] == ["no prior", *(f"alpha {a}" for a in alphas), "prior check"]
    argv = cost.contenders[1].argv(tmp_path / "d", 2)
    assert argv[argv.index("--threads") + 1] == "1" and argv[argv.index("--seed") + 1] == "3"
    assert argv[argv.index("--prior-check") + 1] == "off" and argv[argv.index("--prior-alpha") + 1] == alphas[0]
    check = cost.contenders[-1].argv(tmp_path / "d", 0)
    assert check[check.index("--prior-check") + 1] == "auto" and check[check.index("--n-trees") + 1] == "1"
    acc = cases[-1]
    nonzero = 1 if quick else 5  # accuracy alphas 0.5 / 0.05, 0.1, 0.25, 0.5, 1 (alpha 0: the run without a prior)
    assert len(acc.contenders) == 1 + 2 * nonzero * 3 and all(x.repeats == 1 for x in acc.contenders)
    first = f"informative alpha {'0.5' if quick else '0.05'} check"
    assert [x.key for x in acc.contenders[1:4]] == [f"{first} off", f"{first} correlation", f"{first} auto"]
    a = acc.contenders[3].argv(tmp_path / "d", 0)
    assert a[a.index("--prior") + 1].endswith("prior_gold_net1/informative.tsv") and "--summary" in a
    assert not (tmp_path / "w" / "inputs").exists() or not any((tmp_path / "w" / "inputs").iterdir())
    assert "genie3_prior" in S.STAGES and S.STAGES.index("genie3_prior") < S.STAGES.index("scaling")


def test_the_old_results_render_to_the_committed_tables(tmp_path):
    """With no full run of the stage, docs/genie3.md's two blocks come from benchmarks/genie3/prior_results.json
    through the converter, with every figure the retired script's tables had; the doc is what render makes."""
    text = P.DOC.read_text()
    tables = P.prior_tables(tmp_path, tmp_path / "none.json")  # no results file there: the retired script's
    assert render.published()[P.DOC] == text
    if not P._newest(P.ROOT / "benchmarks" / "results", "cost_") and not P.CHECK_RESULTS.exists():  # the old file
        assert P.with_prior_tables(text, tables) == text
    assert tables["prior-cost"].startswith(WHERE + "; 1000 trees, medians of 3 alternated rounds.")
    assert tables["prior-accuracy"].startswith(WHERE + ". DREAM4 size-100 network 1, 1000 trees, RF, seed 0;")
    for row in OLD_COST:
        assert row in tables["prior-cost"].splitlines(), row
    for row in OLD_ACCURACY:
        assert row in tables["prior-accuracy"].splitlines(), row


def test_the_converter_gives_harness_records():
    """The converted file: a results file with a cost case per network (per round and condition one run) and the
    accuracy case (alpha 0 once, as the run without a prior; the check's record on the auto runs)."""
    doc = json.loads(P.LEGACY.read_text())
    res = P.from_legacy(doc)
    assert res["schema"] == core.SCHEMA
    cost, acc = res["cases"][0], res["cases"][-1]
    assert [c["case"] for c in res["cases"]] == [f"cost_net{n}" for n in range(1, 6)] + ["accuracy_net1"]
    assert [r["compute_cpu_s"] for r in cost["runs"] if r["contender"] == "no prior"] == doc["cost"][0]["cpu_s"][
        "no prior"
    ]
    assert len(acc["runs"]) == 1 + 2 * 5 * 2 and acc["runs"][0]["contender"] == "no prior"
    assert {
        r["prior_check"]["decision"]
        for r in acc["runs"]
        if r["contender"].startswith("shuffled") and "auto" in r["contender"]
    } == {"off"}
    broken = json.loads(json.dumps(doc))
    broken["accuracy"]["priors"]["shuffled"]["prior_check_off"][0]["aupr"] = 0.5  # alpha 0 must be one run
    with pytest.raises(ValueError):
        P.from_legacy(broken)


def test_a_newer_full_run_takes_over_its_table(tmp_path):
    """The newest full results file with the stage's cost cases makes the cost table (the check in wall seconds,
    as the stage records it); the accuracy table stays the retired script's until a run has that case."""
    old = P.from_legacy(json.loads(P.LEGACY.read_text()))
    cost = json.loads(json.dumps(old["cases"][0]))
    for r in cost["runs"]:
        if r["contender"] == "prior check":
            r["prior_check_s"] = r.pop("check_cpu_s") * 2
    cost.update(command="benchmarks/run --stages genie3_prior --cases cost", git={"commit": "0123456789abcdef"})
    res = {"schema": core.SCHEMA, "quick": False, "last_finished": "2026-12-01T00:00:00Z", "cases": [cost]}
    (tmp_path / "2026-12-01-vm.json").write_text(json.dumps(res))
    (tmp_path / "2026-12-02-vm-quick.json").write_text(
        json.dumps({**res, "quick": True, "last_finished": "2026-12-02"})
    )
    t = P.prior_tables(tmp_path)
    assert t["prior-cost"].startswith("Generated from `benchmarks/results/2026-12-01-vm.json` (`benchmarks/run")
    assert "at commit 0123456," in t["prior-cost"] and "| prior check (s) |" in t["prior-cost"]
    assert "| 1 | 1.79 | 1.13× | 1.18× | 1.09× | 0.0127 |" in t["prior-cost"]
    assert t["prior-accuracy"] == P.prior_tables(tmp_path / "none")["prior-accuracy"]


@pytest.mark.reference
def test_the_priors_are_seeded(tmp_path, reference_dir):
    """The random prior covers every ordered pair (1 at ~10 %, 0 at ~60 %, NA otherwise); the gold priors are
    the same values in two orders; same arguments, same bytes."""
    expr = reference_dir / "dream4" / "insilico_size100_1_multifactorial.tsv"
    gold = reference_dir / "dream4" / "DREAM4_GoldStandard_InSilico_Size100_multifactorial_1.tsv"
    tools.random_prior(str(tmp_path / "r.tsv"), str(expr), "1")
    rows = [ln.split("\t") for ln in (tmp_path / "r.tsv").read_text().splitlines()[1:]]
    assert len(rows) == 100 * 99 and all(r != t for r, t, _ in rows)
    share = {v: sum(x[2] == v for x in rows) / len(rows) for v in ("1", "0", "NA")}
    assert abs(share["1"] - 0.1) < 0.02 and abs(share["0"] - 0.6) < 0.03
    for d in ("a", "b"):
        tools.gold_priors(str(tmp_path / d), str(gold), "1")
    assert (tmp_path / "a" / "shuffled.tsv").read_bytes() == (tmp_path / "b" / "shuffled.tsv").read_bytes()
    values = {
        n: sorted(ln.split("\t")[2] for ln in (tmp_path / "a" / f"{n}.tsv").read_text().splitlines()[1:])
        for n in P.PRIORS
    }
    assert values["informative"] == values["shuffled"] and len(values["shuffled"]) == 9900
    assert np.mean([v == "NA" for v in values["shuffled"]]) == pytest.approx(0.3, abs=0.02)
