"""The fasta_shards harness stage (opt-in): its cases, docs/predict.md's table from the run made before it was a
stage (through the converter); its tiny real run is test_dev_stages_quick_run.py's."""

from __future__ import annotations

import json

from benchmarks import stages as S
from benchmarks.harness.render import BEGIN, END
from benchmarks.harness.stagekit import Ctx
from benchmarks.stages import fasta_shards as FS

#: rows of docs/predict.md's table as it was made from benchmarks/fasta_shards/run's results (before the stage), typed
#: here once: the table regenerated through the converter must still show these figures
OLD_ROWS = (
    "| plain, scan | 0.18 s, 0.18 CPU-s | 131–203 MB of 101.7 MB on disk | 672 MB (6.61× the file) | 0.25–0.29 s / "
    "0.25–0.29 |",
    "| plain, index | 0.74 s, 0.74 CPU-s | 25 MB of 101.7 MB on disk | 102 MB (1.00× the file) | 0.05–0.07 s / "
    "0.05–0.07 |",
    "| bgzip, scan | 0.31 s, 0.39 CPU-s | 82–98 MB of 48.9 MB on disk | 360 MB (7.37× the file) | 0.40–0.52 s / "
    "0.54–0.73 |",
    "| bgzip, index | 1.49 s, 1.63 CPU-s | 12 MB of 48.9 MB on disk | 49 MB (1.00× the file) | 0.20–0.24 s / "
    "0.20–0.24 |",
    "AMD EPYC, 2 CPUs, load average 0.4–0.6;",
    "costs 4.1× the scan's CPU on the plain FASTA",
)


def _block(text: str) -> str:
    return text[text.index(BEGIN) + len(BEGIN) : text.index(END)].strip()


def test_quick_cases_are_built_without_running_anything(tmp_path):
    """A plain and a bgzip case, each alternating both plans and every shard's two routes as `measure` commands."""
    assert "fasta_shards" in S.STAGES and "fasta_shards" in S.OPT_IN and FS.PEERS == []
    ctx = Ctx(peers=tmp_path / "peers", work=tmp_path / "w", quick=True, repeats=1, log=lambda m: None)
    warm, cases = FS.build(ctx)
    mbp, n = ctx.cfg["fasta_shards_mbp"], ctx.cfg["fasta_shards_count"]
    assert warm == [] and [c.name for c in cases] == [f"plain_{mbp}Mbp", f"bgzip_{mbp}Mbp"]
    keys = ["plan_scan", "plan_index"] + [f"s{i}_{how}" for i in range(1, n + 1) for how in ("scan", "index")]
    for case, name in zip(cases, ("g.fa", "g.fa.gz")):
        assert [c.key for c in case.contenders] == keys and case.prepare and case.agree and case.pairs == []
        assert case.params["shard_count"] == n and case.params["file"] == name
        argv = case.contenders[-1].argv(tmp_path / "d", 0)
        assert argv[1:5] == ["-m", "benchmarks.stages.fasta_shards", "measure", "shard-index"]
        assert argv[5].endswith(name) and argv[6:] == [str(n), str(n)]
    assert not any(ctx.inputs().iterdir())


def test_the_old_results_render_the_committed_table(tmp_path):
    """benchmarks/fasta_shards/results/*.json (the old script's format) through from_legacy gives docs/predict.md's
    generated table, with the old script's figures."""
    text = FS.render(tmp_path)
    assert text == _block(FS.DOC.read_text())
    for row in OLD_ROWS:
        assert row in text, row
    (path,) = FS.RESULTS_DIR.glob("*.json")
    assert f"From `benchmarks/fasta_shards/results/{path.name}`" in text
    res = FS.from_legacy(json.loads(path.read_text()))
    assert [c["case"] for c in res["cases"]] == ["plain_100Mbp", "bgzip_100Mbp"]
    assert len(res["cases"][0]["runs"]) == 2 + 2 * 4 and res["cases"][0]["runs"][0]["measured"]["bytes_on_disk"]
