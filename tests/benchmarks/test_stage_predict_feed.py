"""The predict_feed harness stage (opt-in): its case, its page from the run made before it was a stage (through the
converter) and from the harness's runs; its tiny real run is test_dev_stages_quick_run.py's."""

from __future__ import annotations

import json

from benchmarks import stages as S
from benchmarks.harness.stagekit import Ctx
from benchmarks.stages import predict_feed as PF

#: rows of the committed page as benchmarks/predict_feed/run made it (before the stage), typed here once: the page
#: regenerated through the converter must still show these figures
OLD_ROWS = (
    "| FASTA, reader thread | 320 [294–326] | 0.31 | 319 | 0.314 | – | 0.7–1.4 |",
    "| FASTA.gz, reader process | 141 [140–151] | 1.07 | 94 | 1.067 | 117 | 0.7–1.4 |",
    "| h5 -> codes, 2 inflate threads | 53 [51–55] | 4.44 | 45 | 2.220 | – | 0.9–1.4 |",
    "| writer, isal:1 | 279 [237–313] | 1.31 | 153 | 0.655 | – | 1.2–1.5 |",
    "File size as % of the raw int64: zlib:9 0.26%, zlib:1 0.65%, isal:1 0.53%.",
    "Machine: AMD EPYC (2 cores, AVX-512: False), host vm, Python 3.11.7; 2026-11-25 18:23 UTC. Genome: 100 Mbp",
)


def test_quick_case_is_built_without_running_anything(tmp_path):
    """One case alternating the eleven feeds of the old script as `measure` commands; nothing is made by building."""
    assert "predict_feed" in S.STAGES and "predict_feed" in S.OPT_IN and PF.PEERS == []
    ctx = Ctx(peers=tmp_path / "peers", work=tmp_path / "w", quick=True, repeats=1, log=lambda m: None)
    warm, cases = PF.build(ctx)
    (case,) = cases
    cfg = ctx.cfg
    assert warm == [] and case.id == f"predict_feed/feed_{cfg['predict_feed_mbp']:g}Mbp" and case.prepare
    assert [c.key for c in case.contenders] == [f[0] for f in PF.FEEDS] and len(PF.FEEDS) == 11
    assert [c.label for c in case.contenders][0] == "FASTA, reader thread" and case.pairs == []
    d = tmp_path / "run"
    argv = case.contenders[0].argv(d, 0)
    assert argv[1:5] == ["-m", "benchmarks.stages.predict_feed", "measure", "fasta"]
    assert (
        argv[5].endswith(".fa")
        and argv[6] == str(cfg["predict_feed_batch"])
        and json.loads(argv[7]) == {"reader": "thread"}
    )
    writer = case.contenders[-1].argv(d, 0)
    assert writer[4:6] == ["writer", str(d / "writer_out.h5")]
    assert json.loads(writer[7]) == {
        "deflate": "isal:1",
        "rows": -(-int(2 * cfg["predict_feed_mbp"] * 1e6) // 21384),
        "seed": 1,
        "threads": cfg["predict_feed_writer_threads"],
    }
    assert not any(ctx.inputs().iterdir())


def test_the_old_results_render_the_committed_page(tmp_path):
    """benchmarks/predict_feed/results.json (the old script's format) through from_legacy gives the committed
    RESULTS.md, whose figures are the old script's page's."""
    text = PF.published(tmp_path)[PF.PAGE]
    assert text == PF.PAGE.read_text()
    for row in OLD_ROWS:
        assert row in text, row
    res = PF.from_legacy(json.loads(PF.LEGACY.read_text()))
    (case,) = res["cases"]
    assert len(case["runs"]) == 33 and set(case["contenders"]) == {f[0] for f in PF.FEEDS}
    assert case["runs"][0]["load_before"] == [0.66064453125] and case["runs"][0]["feed"]["bp"] == 100_000_000


def test_a_newer_harness_run_is_published_and_a_quick_one_is_not(tmp_path):
    old = PF.from_legacy(json.loads(PF.LEGACY.read_text()))
    case = json.loads(json.dumps(old["cases"][0]))
    case.update(started="2099-01-01T00:00:00Z", command="benchmarks/run --stages predict_feed")
    for r in case["runs"]:
        r["load_before"] = [9.0, 1.0, 1.0]
        r["feed"]["mbp_per_s_wall"] *= 2
    res = {"machine": old["machine"], "cases": [case]}
    alone = tmp_path / "none"  # the stage's own folder left out: the old script's run and the runs written here
    before = PF.published(tmp_path, own=alone)[PF.PAGE]
    (tmp_path / "q.json").write_text(json.dumps(dict(res, quick=True)))
    assert PF.published(tmp_path, own=alone)[PF.PAGE] == before  # a quick run is never published
    (tmp_path / "full.json").write_text(json.dumps(res))
    text = PF.published(tmp_path, own=alone)[PF.PAGE]
    assert "from `full.json`" in text and "2099-01-01 00:00 UTC" in text
    assert "| FASTA, reader thread | 641 [589–652] | 0.31 | 319 | 0.314 | – | 9.0–9.0 |" in text
