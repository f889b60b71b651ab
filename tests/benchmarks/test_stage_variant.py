"""The variant harness stage (it replaced benchmarks/variant/bench_variant.py): its cases, its seeded VCF, the
converter that keeps the retired script's results on benchmarks/variant/RESULTS.md figure for figure; its tiny real
run through the harness is test_dev_stages_quick_run.py's."""

from __future__ import annotations

import json

import pytest

from benchmarks import stages as S
from benchmarks.harness import core, render, tools
from benchmarks.harness.stagekit import Ctx
from benchmarks.stages import variant as V

#: rows of benchmarks/variant/RESULTS.md as bench_variant.py wrote them (before the port), from its two JSON files
OLD_ROWS = [
    "## 2026-11-27 04:22 UTC — cpu, host vm",
    "Command: `python benchmarks/variant/bench_variant.py --variants 100 --mbp 10 --repeats 3 --workdir /tmp/bvfull`. "
    "100 VCF records (105 (variant, ALT) rows) on a 10 Mbp random genome; CPU AMD EPYC (2 usable), GPU none, torch "
    "2.13.0+cu130. 3 runs per precision.",
    "| cpu | fp32 | 2 | 3 | 0.576 (0.489–0.596) | 190.6 | 0.551 | 59.0 | 992 | 120 | 410 | 8.77–19.44 |",
    "## 2026-11-27 05:07 UTC — cpu, host vm",
    "| cpu | fp32 | 2 | 1 | 1.32 (1.32–1.32) | 83.2 | 1.26 | 55.2 | 1,027 | 120 | 410 | 5.76–5.76 |",
    "| cpu | bf16 | 2 | 1 | 2.49 (2.49–2.49) | 46.2 | 2.27 | 30.3 | 849 | 120 | 410 | 5.5–5.5 |",
]


@pytest.mark.parametrize("quick", [True, False], ids=["quick", "full"])
def test_cases_are_built_without_running_anything(tmp_path, quick):
    """A case per device (cpu, cuda), the precisions its contenders; building makes no input; opt-in."""
    ctx = Ctx(peers=tmp_path, work=tmp_path / "w", quick=quick, repeats=1, log=lambda m: None)
    warm, cases = V.build(ctx)
    want = ["cpu_3v_0.2Mbp", "cuda_50v_0.5Mbp"] if quick else ["cpu_100v_10Mbp", "cuda_20000v_25Mbp"]
    assert [c.name for c in cases] == want
    for c in cases:
        assert [x.key for x in c.contenders] == ["fp32", "bf16"] and c.pairs == [] and c.prepare
        argv = c.contenders[1].argv(tmp_path / "d", 0)
        assert argv[1:4] == ["-m", "chromaflow", "variant-effect"]
        assert argv[argv.index("--device") + 1] == c.params["device"] and argv[argv.index("--precision") + 1] == "bf16"
        assert argv[argv.index("--metrics") + 1] == str(tmp_path / "d" / "metrics.json")
        assert argv[argv.index("--model") + 1].endswith(f"model_{'tiny' if quick else 'release-bihybrid'}_seed0.ckpt")
    assert not (tmp_path / "w" / "inputs").exists() or not any((tmp_path / "w" / "inputs").iterdir())
    assert "variant" in S.OPT_IN and S.STAGES.index("variant") < S.STAGES.index("scaling")
    # a GPU stage builds the same case on its device, with its own sizes and precisions
    g = V.device_case(ctx, "cuda", 7, 0.5, precisions=["bf16"])
    assert g.name == "cuda_7v_0.5Mbp" and [x.key for x in g.contenders] == ["bf16"] and g.stage == "variant"


def test_the_vcf_is_seeded_and_matches_the_genome(tmp_path):
    """Same arguments, same bytes; every REF is the genome's base(s) at POS; every 20th record has two ALTs."""
    fa = tmp_path / "g.fa"
    fa.write_text("".join(f">c{i}\n" + "ACGTTGCA" * 500 + "\n" for i in range(1, 5)))
    for name in ("a", "b"):
        tools.variants(str(tmp_path / f"{name}.vcf.gz"), str(fa), "40", "5")
    assert (tmp_path / "a.vcf.gz").read_bytes() == (tmp_path / "b.vcf.gz").read_bytes()
    assert (tmp_path / "a.vcf.gz.tbi").exists()
    import pysam

    seqs = tools._read_fasta(str(fa))
    recs = list(pysam.VariantFile(str(tmp_path / "a.vcf.gz")))
    assert len(recs) == 40
    for i, r in enumerate(recs):
        assert seqs[r.chrom][r.pos - 1 : r.pos - 1 + len(r.ref)] == r.ref
        assert len(r.alts) == (2 if i % 20 == 19 and len(r.ref) == 1 else 1)


def test_the_old_results_render_to_the_committed_page():
    """benchmarks/variant/RESULTS.md is what the stage's render section makes from benchmarks/variant/results/, whose
    files bench_variant.py wrote (the converter keeps every figure of the page that script made), and from the GPU
    runs' variant cases in benchmarks/gpu/results/."""
    page = V.variant_page((V.RESULTS_DIR, V.GPU_RESULTS))
    assert page == V.PAGE.read_text() == render.published()[V.PAGE]
    assert "— cuda, host" in page  # the H200 run's case (benchmarks/gpu/results)
    lines = page.splitlines()
    for row in OLD_ROWS:
        assert row in lines, row
    assert page.index(OLD_ROWS[0]) < page.index(OLD_ROWS[3])  # oldest first


def test_the_converter_gives_harness_records():
    """A converted file is a results file of benchmarks/run: one variant case, a contender per precision, runs with
    their figures and loads as lists; a harness run of the stage renders through the same section."""
    old = json.loads(sorted(V.RESULTS_DIR.glob("*.json"))[-1].read_text())
    res = V.from_legacy(old)
    (c,) = res["cases"]
    assert res["schema"] == core.SCHEMA and c["stage"] == "variant" and list(c["contenders"]) == ["fp32", "bf16"]
    assert c["started"] == "2026-11-27T05:07Z" and c["runs"][0]["load_before"] == [5.76]
    assert c["runs"][1]["metrics"] == old["runs"]["bf16"][0]["metrics"]
    new = json.loads(json.dumps(res))  # as benchmarks/run writes it: ISO start with seconds, 3 loads
    new["cases"][0].update(started="2026-12-01T10:11:12Z", command="benchmarks/run --stages variant")
    for r in new["cases"][0]["runs"]:
        r["load_before"] = [1.25, 1.0, 0.5]
    sec = V.variant_section(new["cases"][0], new)
    assert sec[0] == "## 2026-12-01 10:11 UTC — cpu, host vm" and sec[2].startswith("Command: `benchmarks/run")
    assert sec[-2].endswith("| 120 | 410 | 1.25–1.25 |")
