"""The interpret harness stage (``benchmarks/stages/interpret.py``): its cases, the regions it generates, and its page's
figures from a results record (seconds per region of 1 kb, ISM scaled by 1000 / window, hours for 10,000 regions)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import stages as S
from benchmarks.harness.stagekit import Ctx
from benchmarks.stages import interpret as I

ROOT = Path(__file__).resolve().parents[2]


def test_cases_are_opt_in_and_name_their_commands(tmp_path):
    assert "interpret" in S.STAGES and "interpret" in S.OPT_IN
    ctx = Ctx(peers=tmp_path, work=tmp_path / "w", quick=True, repeats=1, log=lambda m: None)
    warm, cases = I.build(ctx)
    assert warm == [] and [c.name for c in cases] == [
        "attribute_cpu_2regions_tiny",
        "attribute_cuda_4regions_tiny",
        "discover_150x200_planted",
    ]
    att = cases[0]
    assert [c.key for c in att.contenders] == ["ig32", "ig8", "ig32_context2000", "ism"]
    argv = att.contenders[3].argv(tmp_path / "run", 0)
    assert argv[argv.index("--method") + 1] == "ism" and argv[argv.index("--top") + 1] == "1"
    assert not (tmp_path / "w").exists() or not any((tmp_path / "w").rglob("*.ckpt"))  # building makes no input


def test_regions_stay_half_an_input_from_the_record_ends(tmp_path):
    fa = tmp_path / "g.fa"
    fa.write_text(">short\n" + "A" * 5000 + "\n>long\n" + "ACGT" * 15000 + "\n")
    bed = tmp_path / "r.narrowPeak"
    I._regions_bed(bed, fa, 50, 3)
    rows = [ln.split("\t") for ln in bed.read_text().splitlines()]
    assert len(rows) == 50 and {r[0] for r in rows} == {"long"}
    centres = [int(r[1]) + 100 for r in rows]
    assert min(centres) >= I.HALF_INPUT and max(centres) <= 60000 - I.HALF_INPUT
    assert [int(r[6]) for r in rows] == list(range(50, 0, -1))  # scores: file order is rank order (--top)


def _run(key: str, loop_s: float, regions: int, window: int, bp_per_s: float) -> dict:
    m = {"bp_per_s": bp_per_s, "loop_s": loop_s, "regions": regions, "window": window, "seq_len": 21384}
    return {"contender": key, "exit": 0, "wall_s": loop_s + 5, "cpu_s": 2 * loop_s, "metrics": m}


def test_page_extrapolates_per_region_and_for_ten_thousand(tmp_path):
    case = {
        "stage": "interpret",
        "case": "attribute_cpu_2regions_release-bihybrid",
        "started": "2026-11-30T03:00:00Z",
        "command": "benchmarks/run --stages interpret",
        "repeats": 2,
        "params": {"device": "cpu", "regions": 2, "mbp": 2.0, "model": "release-bihybrid", "ism_window": 20},
        "machine": {"host": "vm", "cpu_model": "X", "usable_cpus": 2},
        "contenders": {"ig32": {"label": "IG 32"}, "ism": {"label": "ISM"}},
        "runs": [
            _run("ig32", 160.0, 2, 1000, 12.5),
            _run("ig32", 180.0, 2, 1000, 11.1),
            _run("ism", 30.0, 1, 20, 0.67),
            _run("ism", 30.0, 1, 20, 0.67),
        ],
    }
    (tmp_path / "r.json").write_text(json.dumps({"schema": 1, "cases": [case], "machine": {}, "software": {}}))
    page = I.interpret_page((tmp_path,))
    # IG: median of 80 and 90 s per region -> 85 s; 10,000 regions: 236.1 h
    assert "| IG 32 | 2 | 11.8 (11.1–12.5) | 1000 | 21384 | 85.0 | 236.1 |" in page
    # ISM: 30 s for a 20-bp window -> 1,500 s per region of 1 kb; 4,166.7 h
    assert "| ISM | 2 | 0.67 (0.67–0.67) | 20 | 21384 | 1,500.0 | 4,166.7 |" in page


def test_published_page_is_the_committed_one():
    assert I.published()[I.PAGE] == I.PAGE.read_text()
