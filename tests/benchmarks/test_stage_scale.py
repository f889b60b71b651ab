"""The ``scale`` stage of the benchmark harness (issue 30 §2): the synthetic assembly generator, the trace parser,
the bounds (a failed bound fails the case) and the generated table. The pipeline runs themselves are the harness's
(``benchmarks/run --stages scale``), not the suite's: these tests are cheap."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import h5py
import numpy as np
import pysam
import pytest
from benchmarks.stages import scale as SC
from benchmarks.harness.stagekit import Ctx
from benchmarks.harness import render, scale_render
from benchmarks.harness import scale as S
from benchmarks.harness.synth import lengths, write_assembly, write_sheet

ROOT = Path(__file__).resolve().parents[2]


GiB, MiB = 1 << 30, 1 << 20


# --------------------------------------------------------------------------------------------------
# the generator
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def assemblies(tmp_path_factory):
    d = tmp_path_factory.mktemp("synth")
    recs = [123_457, 9_000_001, 61]
    kw = dict(contigs=(300, 1_000, 20_000))
    write_assembly(d / "a.fa", 5, recs, **kw)
    write_assembly(d / "b.fa", 5, recs, **kw)
    write_assembly(d / "c.fa", 6, recs, **kw)
    write_assembly(d / "w80.fa", 5, recs, width=80, **kw)
    write_assembly(d / "a.fa.gz", 5, recs, bgzip=True, **kw)
    return d, lengths(5, recs, kw["contigs"])


def test_same_seed_same_bytes_other_seed_other_bases(assemblies):
    d, _ = assemblies
    assert (d / "a.fa").read_bytes() == (d / "b.fa").read_bytes()
    with pysam.FastaFile(str(d / "a.fa")) as a, pysam.FastaFile(str(d / "c.fa")) as c:
        assert a.fetch("chr1") != c.fetch("chr1")  # same length, other bases


@pytest.mark.parametrize("name,width", [("a.fa", 60), ("w80.fa", 80), ("a.fa.gz", 60)])
def test_records_have_the_asked_lengths_and_line_width(assemblies, name, width):
    """Read back by samtools' faidx (pysam), which checks every line length of a record; the bgzip file is BGZF."""
    d, expect = assemblies
    with pysam.FastaFile(str(d / name)) as fa:
        assert list(zip(fa.references, fa.lengths)) == expect
        assert set(fa.fetch("chr2")) == set("ACGT")
    assert expect[:3] == [("chr1", 123_457), ("chr2", 9_000_001), ("chr3", 61)]
    contigs = [n for _, n in expect[3:]]
    assert len(contigs) == 300 and min(contigs) >= 1_000 and max(contigs) <= 20_000
    fai = (d / f"{name}.fai").read_text().splitlines()
    assert {int(row.split("\t")[3]) for row in fai if int(row.split("\t")[1]) > width} == {width}


def test_bgzip_holds_the_same_text(assemblies):
    d, _ = assemblies
    with pysam.BGZFile(str(d / "a.fa.gz"), "rb") as fh:
        assert fh.read() == (d / "a.fa").read_bytes()


def test_sheet_of_many_assemblies(tmp_path):
    sheet = write_sheet(tmp_path, 4, 7, [5_000], (3, 1_000, 2_000), expression=2)
    rows = list(csv.DictReader(io.StringIO(sheet.read_text())))
    assert [r["id"] for r in rows] == ["asm001", "asm002", "asm003", "asm004"]
    assert [bool(r["expression"]) for r in rows] == [True, True, False, False]
    expr = Path(rows[0]["expression"]).read_text().splitlines()
    header = expr[0].split("\t")
    assert header[0] == '"TF1"' and len(header) == 20 and len(expr) == 31  # samples x genes, quoted names
    assert Path(rows[0]["regulators"]).read_text().split() == ["TF1", "TF2", "TF3", "TF4", "TF5"]
    assert rows[0]["expression_layout"] == "samples-x-genes"
    # every assembly its own seed: different bases
    assert Path(rows[0]["fasta"]).read_bytes() != Path(rows[1]["fasta"]).read_bytes()


# --------------------------------------------------------------------------------------------------
# the trace
# --------------------------------------------------------------------------------------------------
#: the first columns of a real trace of this pipeline (-profile test, Nextflow 24.10), plus a cached and a failed row
TRACE = """task_id\thash\tprocess\tname\tstatus\texit\trealtime\t%cpu\tpeak_rss\trchar\twchar
2\t9a/6faf1c\tCHROMAFLOW:PREDICT_PLAN\tCHROMAFLOW:PREDICT_PLAN (q4)\tCOMPLETED\t0\t3.3s\t7.7%\t21.7 MB\t9.3 MB\t954 B
3\t2e/0c6e28\tCHROMAFLOW:PREDICT\tCHROMAFLOW:PREDICT (q4 1/4)\tCOMPLETED\t0\t36.8s\t15.5%\t575.5 MB\t56.3 MB\t708.5 KB
4\t77/b85535\tCHROMAFLOW:PREDICT\tCHROMAFLOW:PREDICT (q4 2/4)\tCOMPLETED\t0\t1m 2s\t100.0%\t1.5 GB\t56.3 MB\t708 KB
5\t11/3b9733\tCHROMAFLOW:PREDICT\tCHROMAFLOW:PREDICT (q4 3/4)\tCACHED\t0\t40s\t12.8%\t575 MB\t56.3 MB\t708 KB
6\td8/65cae1\tCHROMAFLOW:PREDICT\tCHROMAFLOW:PREDICT (q4 4/4)\tFAILED\t137\t2s\t50%\t3 GB\t1 MB\t0
7\tbf/fa5182\tCHROMAFLOW:REPORTING:MULTIQC\tCHROMAFLOW:REPORTING:MULTIQC (1)\tCOMPLETED\t0\t120ms\t-\t-\t-\t-
"""


@pytest.mark.parametrize(
    "text,expect",
    [("954 B", 954), ("708.5 KB", 725_504), ("1.5 GB", 1_610_612_736), ("0", 0), ("-", None), ("12345", 12345)],
)
def test_parse_size(text, expect):
    assert S.parse_size(text) == expect


@pytest.mark.parametrize(
    "text,expect",
    [("3.3s", 3.3), ("1m 2s", 62), ("1h 0m 5s", 3605), ("120ms", 0.12), ("1d 1h", 90000), ("-", None), ("4500", 4.5)],
)
def test_parse_duration(text, expect):
    assert S.parse_duration(text) == pytest.approx(expect)


@pytest.mark.parametrize("bad", ["3 parsecs", "1m x", "s"])
def test_parse_rejects_what_is_not_a_trace_figure(bad):
    with pytest.raises(ValueError):
        S.parse_duration(bad) if "parsec" not in bad else S.parse_size(bad)


def test_trace_summary_per_process(tmp_path):
    (tmp_path / "t.txt").write_text(TRACE)
    p = S.summarize_trace(S.read_trace(tmp_path / "t.txt"))
    assert set(p) == {"PREDICT_PLAN", "PREDICT", "MULTIQC"}
    pr = p["PREDICT"]
    assert (pr["tasks"], pr["cached"], pr["failed"]) == (2, 1, 1)
    assert pr["wall_s"] == pytest.approx(36.8 + 62)
    assert pr["cpu_s"] == pytest.approx(36.8 * 0.155 + 62, abs=1e-3)
    assert pr["peak_rss_bytes"] == int(1.5 * GiB)  # completed tasks only: the failed 3 GB is not counted
    assert pr["max_wchar_bytes"] == 725_504
    assert p["MULTIQC"]["peak_rss_bytes"] == 0 and p["MULTIQC"]["cpu_s"] == 0


# --------------------------------------------------------------------------------------------------
# the bounds
# --------------------------------------------------------------------------------------------------
def _proc(rss: int, tasks: int = 1) -> dict:
    return {"tasks": tasks, "peak_rss_bytes": rss}


def test_task_memory_bound():
    assert S.check_task_memory({"PREDICT": _proc(2 * GiB)}) == []
    (bad,) = S.check_task_memory({"PREDICT": _proc(2 * GiB + 1), "BIGWIG": _proc(GiB)})
    assert bad.startswith("PREDICT: peak RSS 2.00 GiB > 2 GiB")
    name = next(iter(S.IN_MEMORY))
    assert S.check_task_memory({name: _proc(50 * GiB)}) == []  # a named in-memory stage is exempt


def test_flat_memory_bound():
    small = {"PREDICT": _proc(500 * MiB), "BIGWIG": _proc(300 * MiB)}
    assert S.check_flat(small, {"PREDICT": _proc(600 * MiB), "BIGWIG": _proc(300 * MiB)}) == []
    (bad,) = S.check_flat(small, {"PREDICT": _proc(500 * MiB), "BIGWIG": _proc(800 * MiB)})
    assert bad.startswith("BIGWIG:") and "not flat" in bad
    name = next(iter(S.IN_MEMORY))  # a named in-memory stage may grow
    assert S.check_flat({name: _proc(100 * MiB)}, {name: _proc(5 * GiB)}) == []


def test_disk_bound():
    assert S.check_disk(99 * MiB, 30 * MiB, 5 * MiB) == []  # 35 + 64 MiB slack
    assert S.check_disk(100 * MiB, 30 * MiB, 5 * MiB)
    (bad,) = S.check_disk(1000 * MiB, 300 * MiB, 50 * MiB)
    assert "work/ peaked at 1000 MiB" in bad and "= 414 MiB" in bad  # 350 + max(64, 17.5)


def _rows(*pairs) -> list[dict]:
    return [{"process": "CHROMAFLOW:PREDICT", "name": f"PREDICT (x {i}/4)", "status": st} for i, st in pairs]


def test_resume_bound_only_unfinished_shards_rerun():
    killed = _rows((1, "COMPLETED"), (2, "COMPLETED"))
    good = _rows((1, "CACHED"), (2, "CACHED"), (3, "COMPLETED"), (4, "COMPLETED"))
    bad, counts = S.check_resume(killed, good)
    assert bad == [] and counts == {
        "shards": 4,
        "finished_before_kill": 2,
        "rerun": 2,
        "cached": 2,
        "unfinished_at_kill": 2,
    }
    rerun_all = _rows((1, "COMPLETED"), (2, "CACHED"), (3, "COMPLETED"), (4, "COMPLETED"))
    bad, _ = S.check_resume(killed, rerun_all)
    assert bad and "finished before the kill ran again" in bad[0]
    bad, _ = S.check_resume([], _rows((1, "COMPLETED")))
    assert bad and "no PREDICT shard had finished" in bad[0]


def _h5(path: Path, values: np.ndarray, chunks) -> None:
    with h5py.File(path, "w") as f:
        f.create_dataset("prediction/predictions", data=values, chunks=chunks, compression="gzip")
        f.create_dataset("data/seqids", data=np.array([b"chr1"] * len(values)))


def test_output_digests_compare_contents(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        (d / "asm" / "predictions").mkdir(parents=True)
        (d / "pipeline_info").mkdir()
        (d / "pipeline_info" / "trace.tsv").write_text(str(d))  # reports are not outputs
        (d / "asm" / "igv_session.xml").write_text(str(d))  # nor browser sessions (their own paths)
    x = np.arange(5000 * 3, dtype=np.float32).reshape(5000, 3)
    _h5(a / "asm" / "predictions" / "p.h5", x, (100, 3))
    _h5(b / "asm" / "predictions" / "p.h5", x, (1000, 3))  # other chunks: other bytes, same contents
    assert S.compare_digests(S.output_digests(a), S.output_digests(b)) == []
    y = x.copy()
    y[4999, 2] += 1
    _h5(b / "asm" / "predictions" / "p.h5", y, (1000, 3))
    assert S.compare_digests(S.output_digests(a), S.output_digests(b)) == ["asm/predictions/p.h5: contents differ"]


def test_unreadable_browser_files_are_found_and_fail_the_case(quick_cases, tmp_path):
    """A bigWig that libBigWig cannot open (here: cut short; before 9b50e98 every file of > 256 chromosomes) is
    listed, and a listed file fails the size case; digests alone compare bytes, not readability."""
    from chromaflow.bigwig.bigwigfile import BigWigWriter

    out = tmp_path / "out" / "asm" / "tracks"
    out.mkdir(parents=True)
    sizes = [(f"c{i}", 1000) for i in range(300)]
    w = BigWigWriter(out / "good.bw", sizes)
    w.write("c299", np.array([1]), np.array([9]), np.array([1.0], np.float32))
    w.close()
    (out / "bad.bw").write_bytes((out / "good.bw").read_bytes()[:200])
    assert S.unreadable_browser_files(tmp_path / "out") == ["asm/tracks/bad.bw"]
    _, cases = quick_cases
    d = tmp_path / "run"
    d.mkdir()
    rec = _scale_record(500 * MiB)
    (d / "scale.json").write_text(json.dumps(rec))
    assert cases["size_1Mbp"].agree({"pipeline": d})["ok"]
    rec["unreadable_browser_files"] = ["asm/tracks/bad.bw"]
    (d / "scale.json").write_text(json.dumps(rec))
    ag = cases["size_1Mbp"].agree({"pipeline": d})
    assert not ag["ok"] and "bad.bw: pyBigWig cannot open it" in ag["detail"]


# --------------------------------------------------------------------------------------------------
# a failed bound is a failed case; the table
# --------------------------------------------------------------------------------------------------
def _scale_record(rss: int, work: int = 10 * MiB) -> dict:
    return {
        "exit": 0,
        "wall_s": 60.0,
        "tasks": 5,
        "driver_peak_rss_bytes": 400 * MiB,
        "driver_cpu_s": 20.0,
        "driver_cpu_s_per_task": 4.0,
        "peak_work_bytes": work,
        "peak_outdir_bytes": 8 * MiB,
        "outputs_bytes": 8 * MiB,
        "digests": {"g/predictions/g_predictions.h5": "h5:0"},
        "report_html_bytes": {},
        "processes": {
            "PREDICT": {
                "tasks": 4,
                "cached": 0,
                "failed": 0,
                "wall_s": 40.0,
                "cpu_s": 30.0,
                "peak_rss_bytes": rss,
                "max_wchar_bytes": MiB,
            },
            "BIGWIG": {
                "tasks": 1,
                "cached": 0,
                "failed": 0,
                "wall_s": 4.0,
                "cpu_s": 3.0,
                "peak_rss_bytes": 300 * MiB,
                "max_wchar_bytes": MiB,
            },
        },
    }


@pytest.fixture
def quick_cases(tmp_path):
    ctx = Ctx(peers=tmp_path, work=tmp_path / "work", quick=True, repeats=1, log=lambda m: None)
    warm, cases = SC.build(ctx)
    return ctx, {c.name: c for c in cases}


@pytest.mark.parametrize(
    "rss,work,ok", [(500 * MiB, 10 * MiB, True), (3 * GiB, 10 * MiB, False), (500 * MiB, 500 * MiB, False)]
)
def test_a_failed_bound_fails_the_size_case(quick_cases, tmp_path, rss, work, ok):
    ctx, cases = quick_cases
    assert set(cases) == {"size_1Mbp", "size_10Mbp", "resume_10Mbp", "many_10"}
    d = tmp_path / "run"
    d.mkdir()
    (d / "scale.json").write_text(json.dumps(_scale_record(rss, work)))
    ag = cases["size_1Mbp"].agree({"pipeline": d})
    assert ag["ok"] is ok, ag
    assert bool(ag["failed_bounds"]) is not ok


def test_flatness_is_checked_against_the_smaller_genome(quick_cases, tmp_path):
    ctx, cases = quick_cases
    d = tmp_path / "run"
    d.mkdir()
    (d / "scale.json").write_text(json.dumps(_scale_record(500 * MiB)))
    cases["size_1Mbp"].per_run("pipeline", d)  # records the small genome's per-process figures
    (d / "scale.json").write_text(json.dumps(_scale_record(1500 * MiB)))
    ag = cases["size_10Mbp"].agree({"pipeline": d})
    assert ag["ok"] is False and "PREDICT" in ag["detail"] and "not flat" in ag["detail"]


def test_full_size_runs_are_not_retried(quick_cases, tmp_path):
    """A full scale case takes hours: a failure is recorded, not run a second time (which removed the failed
    attempt's logs); the quick cases keep the harness's one retry."""
    ctx, cases = quick_cases
    assert {c.retries for case in cases.values() for c in case.contenders} == {1}
    full = SC.build(Ctx(peers=tmp_path, work=tmp_path / "full", quick=False, repeats=1, log=lambda m: None))[1]
    assert {c.retries for case in full for c in case.contenders} == {0}


def test_flatness_falls_back_to_the_results_files_record_of_the_smaller_genome(tmp_path):
    """On a fresh machine the smaller genome has not run in the work dir: its passed record in the results file the
    run adds to is the reference (named in the detail); a failed record is not used."""
    small = _scale_record(500 * MiB)
    rec = {
        "id": "scale/size_1Mbp",
        "git": {"commit": "0123456789abcdef"},
        "machine": {"cpu_model": "AMD EPYC"},
        "agreement": {"ok": True},
        "runs": [{"exit": 0, "scale": {"processes": small["processes"]}}],
    }
    ctx = Ctx(
        peers=tmp_path, work=tmp_path / "work", quick=True, repeats=1, log=lambda m: None, earlier={rec["id"]: rec}
    )
    cases = {c.name: c for c in SC.build(ctx)[1]}
    d = tmp_path / "run"
    d.mkdir()
    (d / "scale.json").write_text(json.dumps(_scale_record(1500 * MiB)))
    ag = cases["size_10Mbp"].agree({"pipeline": d})
    assert ag["ok"] is False and "PREDICT: peak RSS 1500 MiB" in ag["detail"] and "not flat" in ag["detail"]
    (d / "scale.json").write_text(json.dumps(_scale_record(600 * MiB)))
    ag = cases["size_10Mbp"].agree({"pipeline": d})
    assert ag["ok"] is True and "flat vs 1Mbp (its record in the results file: 0123456, AMD EPYC)" in ag["detail"]
    rec["agreement"] = {"ok": False}
    ag = cases["size_10Mbp"].agree({"pipeline": d})
    assert "flatness not checked" in ag["detail"]


def test_a_case_is_refused_before_it_starts_without_the_disk_it_needs(quick_cases, tmp_path, monkeypatch):
    """A size or resume case whose work dir has less free disk than the genome needs is not started (a 4 Gbp run
    ran out of space after 2 h 30 min): the reason names the folder and both sizes, and an earlier measurement of
    the case stays in the results file."""
    from benchmarks.harness import core
    from benchmarks.harness import main as M

    ctx, cases = quick_cases
    started = tmp_path / "started"
    monkeypatch.setattr(S, "DISK_NEED_PER_BP", 1e9)  # 1 Mbp would need ~930 TiB
    for name in ("size_1Mbp", "resume_1Mbp"):
        case = cases.get(name)
        if case is None:  # the quick config resumes the 10 Mbp genome
            continue
        case.contenders[0].argv = lambda d, r: [sys.executable, "-c", f"open({str(started)!r}, 'w')"]
        rec = core.run_case(case, ctx.work, 1, log=lambda m: None)
        assert rec["runs"] == [] and not started.exists()
        assert rec["skipped"].startswith(f"{ctx.work}: ") and "GiB free, the 1Mbp run needs about" in rec["skipped"]
    resume = cases["resume_10Mbp"]
    with pytest.raises(core.NotRunnable, match="the 10Mbp run needs"):
        cases["size_10Mbp"].prepare()  # writes its FASTA and sheet first: the resume case's other condition
    with pytest.raises(core.NotRunnable, match="the resume_10Mbp run needs"):
        resume.prepare()
    monkeypatch.setattr(S, "DISK_NEED_PER_BP", 12.0)
    cases["size_1Mbp"].prepare()  # ~12 MB: there is room
    earlier = {"cases": [{"id": "scale/size_1Mbp", "runs": [{"wall_s": 1.0}]}]}
    M._store(earlier, {**rec, "id": "scale/size_1Mbp"}, tmp_path / "results.json")
    assert earlier["cases"] == [{"id": "scale/size_1Mbp", "runs": [{"wall_s": 1.0}]}]
    assert not (tmp_path / "results.json").exists()


def test_table_renders_every_case_and_marks_a_failed_bound():
    rec = _scale_record(500 * MiB)
    rec.pop("digests")
    cases = [
        {
            "stage": "scale",
            "case": "size_1Mbp",
            "params": {"genome": "1Mbp", "total_bp": 1_000_000},
            "runs": [{"scale": rec, "wall_s": 61.0, "cpu_s": 50.0, "load_before": [3.0], "load_after": [4.0]}],
            "agreement": {"ok": True, "detail": "bounds hold"},
        },
        {
            "stage": "scale",
            "case": "size_10Mbp",
            "params": {"genome": "10Mbp", "total_bp": 10_000_000},
            "runs": [{"scale": rec, "wall_s": 99.0, "cpu_s": 80.0, "load_before": [3.0], "load_after": [4.0]}],
            "agreement": {"ok": False, "detail": "PREDICT: not flat"},
        },
    ]
    text = scale_render.render({"quick": False, "cases": cases}, "x.json")
    assert "`--quick`" not in text
    assert "`--quick`" in scale_render.render({"quick": True, "cases": cases}, "x-quick.json")
    rows = [r for r in text.splitlines() if r.startswith("| size_")]
    assert len(rows) == 2 and "| 1,000,000 |" in rows[0] and "✔ bounds hold" in rows[0]
    assert "✘ PREDICT: not flat" in rows[1]
    assert "| PREDICT | 4 / 30.0 / 500 | 4 / 30.0 / 500 |" in text
    assert "Extrapolated, not measured" in text and "×400" in text


def test_many_case_compares_grouped_and_ungrouped_prediction(quick_cases, tmp_path):
    """many_<n> runs the sheet with PREDICT_GROUP (the default --predict_group_mbp) and with --predict_group_mbp 0:
    the outputs must be the same, and docs/scale.md shows both runs' prediction tasks and CPU."""
    ctx, cases = quick_cases
    case = cases["many_10"]
    assert [c.key for c in case.contenders] == ["pipeline", "ungrouped"] and case.pairs == [("pipeline", "ungrouped")]
    argv = {c.key: c.argv(tmp_path, 0) for c in case.contenders}
    assert argv["pipeline"][-2:] == ["--extra=--predict_group_mbp", f"--extra={SC.SCALE_GROUP_MBP}"]
    assert argv["ungrouped"][-2:] == ["--extra=--predict_group_mbp", "--extra=0"]
    digests = {f"a{i}/predictions/a{i}_predictions.h5": f"h5:{i}" for i in range(1, 11)}
    digests.update({f"a{i}/network/a{i}.genie3_links.tsv.gz": "x" for i in (1, 2)})
    dirs = {}
    for key, changed in (("pipeline", {}), ("ungrouped", {"a3/predictions/a3_predictions.h5": "h5:other"})):
        dirs[key] = tmp_path / key
        dirs[key].mkdir()
        rec = dict(_scale_record(500 * MiB), digests={**digests, **changed})
        (dirs[key] / "scale.json").write_text(json.dumps(rec))
    ag = case.agree(dirs)
    assert ag["ok"] is False and "a3/predictions/a3_predictions.h5: contents differ" in ag["detail"]
    (dirs["ungrouped"] / "scale.json").write_text(json.dumps(dict(_scale_record(500 * MiB), digests=digests)))
    assert case.agree(dirs)["ok"] is True
    grouped = dict(_scale_record(500 * MiB), tasks=3)
    grouped["processes"] = {"PREDICT_GROUP": dict(grouped["processes"]["PREDICT"], tasks=1, cpu_s=5.0)}
    runs = [
        {"contender": "pipeline", "scale": grouped, "wall_s": 30.0, "cpu_s": 20.0},
        {"contender": "ungrouped", "scale": _scale_record(500 * MiB), "wall_s": 60.0, "cpu_s": 50.0},
    ]
    text = scale_render.render(
        {
            "quick": True,
            "cases": [
                {
                    "stage": "scale",
                    "case": "many_10",
                    "runs": runs,
                    "params": {"predict_group_mbp": 20},
                    "agreement": {"ok": True, "detail": "ok"},
                }
            ],
        },
        "q.json",
    )
    assert (
        "`many_10`, prediction grouped (`--predict_group_mbp` 20) and not (`0`): 1 vs 4 prediction tasks, "
        "5.0 vs 30.0 CPU s in them; the whole run 30.0 vs 60.0 s wall, 20.0 vs 50.0 CPU s, 3 vs 5 tasks"
    ) in text
    assert "| many_10 | – | 30.0 | 20.0 | 3 |" in text  # the table row is the grouped (default) run's


def test_plan_for_many_large_genomes_is_arithmetic_on_the_measured_rates(tmp_path):
    """The on-paper plan (100 × 4 Gbp): GPU hours from the GPU file's loop rate and per-task fixed cost, shards at
    the default rows, CPU stages scaled from the largest size case; none for a --quick file or without GPU figures."""
    rec = _scale_record(500 * MiB)
    rec["processes"]["PEAKS"] = {
        "tasks": 1,
        "cached": 0,
        "failed": 0,
        "wall_s": 9.0,
        "cpu_s": 7.0,
        "peak_rss_bytes": MiB,
        "max_wchar_bytes": MiB,
    }
    cases = [
        {
            "stage": "scale",
            "case": "size_400Mbp",
            "params": {"total_bp": 400_000_000},
            "runs": [{"scale": rec, "wall_s": 99.0, "cpu_s": 80.0}],
            "agreement": {"ok": True, "detail": "ok"},
        }
    ]
    (tmp_path / "g.json").write_text(
        json.dumps(
            {
                "started": "2026-01-01",
                "machine": {"gpu": "Some GPU"},
                "model_preset": "release-bihybrid",
                "mbp": 200,
                "precisions": [
                    {"precision": "fp32", "run": "cached", "bp_per_s_loop": 5e7, "wall_s": 30.0, "loop_s": 20.0}
                ],
            }
        )
    )
    gpu = scale_render.gpu_rates(tmp_path)
    assert gpu == [
        {
            "precision": "fp32",
            "run": "cached",
            "loop_bp_s": 5e7,
            "task_fixed_s": 10.0,
            "gpu": "Some GPU",
            "file": "g.json",
            "model": "release-bihybrid",
            "mbp": 200,
        }
    ]
    text = "\n".join(scale_render.plan_lines(cases, gpu))
    shards = -(-8_000_000_000 // (21_384 * 20_000))  # 19 shards of both strands' rows
    per_h = (shards * 10.0 + 8e9 / 5e7) / 3600
    assert f"{shards} per assembly" in text
    assert f"| fp32 (probed once, cached) | {per_h:,.3f} | {per_h * 100:,.2f} | {per_h * 25:,.2f} |" in text
    cpu_h = (3.0 + 7.0) * 10 / 3600  # BIGWIG + PEAKS, ×10 to 4 Gbp
    assert f"{cpu_h:,.2f} CPU h per assembly" in text
    assert "Planned on paper, not measured" in text
    # memory per task: what the size case's flatness bounds said, in the words check_flat writes them
    assert "(no process failed the flatness bound in `size_400Mbp`)" in text
    cases[0]["agreement"] = {
        "ok": False,
        "failed_bounds": S.check_flat(
            {"PEAKS": {"tasks": 1, "peak_rss_bytes": 100 * MiB}, "BIGWIG": {"tasks": 1, "peak_rss_bytes": 100 * MiB}},
            {"PEAKS": {"tasks": 1, "peak_rss_bytes": 900 * MiB}, "BIGWIG": {"tasks": 1, "peak_rss_bytes": 110 * MiB}},
        )
        + ["BIGWIG: peak RSS 2.10 GiB > 2 GiB per task"],
    }  # over the bound, not a flatness failure
    assert "(not flat in `size_400Mbp` for PEAKS: see its bounds above)" in "\n".join(
        scale_render.plan_lines(cases, gpu)
    )
    assert scale_render.plan_lines(cases, []) == []
    assert "Planned" not in scale_render.render({"quick": True, "cases": cases}, "q.json", gpu)
    assert "Planned" in scale_render.render({"quick": False, "cases": cases}, "f.json", gpu)


def test_scale_doc_is_generated():
    """docs/scale.md's block is what benchmarks/render makes (render.published covers it)."""
    doc = ROOT / "docs" / "scale.md"
    assert render.published()[doc] == doc.read_text()


def _task(work: Path, h: str, name: str, exitcode: str | None) -> None:
    d = work / h[:2] / h[2:]
    d.mkdir(parents=True)
    # the header Nextflow 24.10 writes into every .command.run
    (d / ".command.run").write_text(f"#!/bin/bash\n### ---\n### name: '{name}'\n### cpus: 1\n")
    (d / ".command.begin").touch()
    if exitcode is not None:
        (d / ".exitcode").write_text(exitcode)


def test_task_dirs_finds_finished_and_running_tasks_of_a_process(tmp_path):
    """What the resume case waits for before it kills the driver: PREDICT tasks finished (exit 0) and running."""
    _task(tmp_path, "aa1111", "CHROMAFLOW:PREDICT (g 1/3)", "0")
    _task(tmp_path, "bb2222", "CHROMAFLOW:PREDICT (g 2/3)", None)
    _task(tmp_path, "cc3333", "CHROMAFLOW:PREDICT (g 3/3)", "1")
    _task(tmp_path, "dd4444", "CHROMAFLOW:PREDICT_MERGE (g)", None)
    _task(tmp_path, "ee5555", "CHROMAFLOW:REPORTING:MULTIQC (1)", "0")
    assert S.task_dirs(tmp_path, "PREDICT") == (1, 1)
    assert S.task_dirs(tmp_path, "MULTIQC") == (1, 0)


def test_completed_tasks_as_the_driver_recorded_them(tmp_path):
    """The kill waits for a PREDICT task the driver's trace lists as completed (a task's own .exitcode is not
    enough: a driver killed before it polled that file has not recorded the task, and -resume reruns it)."""
    assert S._completed(tmp_path / "none.txt", "PREDICT") == 0
    (tmp_path / "t.txt").write_text(TRACE)
    assert S._completed(tmp_path / "t.txt", "PREDICT") == 2
    assert S._completed(tmp_path / "t.txt", "PREDICT_PLAN") == 1


def test_resume_case_checks_the_recorded_traces(quick_cases, tmp_path):
    """The resume case's verdict from what harness.scale records (trace_rows of both runs) and the digests of the
    uninterrupted size_ run of the same genome."""
    ctx, cases = quick_cases
    d = tmp_path / "run"
    d.mkdir()
    rows = lambda text: S.trace_rows(list(csv.DictReader(io.StringIO(text), delimiter="\t")))  # noqa: E731
    head = TRACE.splitlines()[0]
    killed = head + "\n" + "\n".join(ln for ln in TRACE.splitlines() if "(q4 1/4)" in ln or "PLAN" in ln)
    resumed = (
        TRACE.replace("COMPLETED\t0\t36.8s", "CACHED\t0\t36.8s")
        .replace("CACHED\t0\t40s", "COMPLETED\t0\t40s")
        .replace("FAILED\t137", "COMPLETED\t0")
    )  # shard 1 cached, 2-4 run
    rec = dict(_scale_record(500 * MiB), trace_rows=rows(resumed), killed_run={"trace_rows": rows(killed)})
    (d / "scale.json").write_text(json.dumps(rec))
    ag = cases["resume_10Mbp"].agree({"pipeline": d})
    assert ag["ok"] is False and "run the case size_10Mbp first" in ag["detail"]
    (ctx.work / "scale" / "digests-10Mbp.json").write_text(json.dumps(rec["digests"]))
    ag = cases["resume_10Mbp"].agree({"pipeline": d})
    assert ag["ok"] is True, ag
    assert ag["shards"] == {"shards": 4, "finished_before_kill": 1, "rerun": 3, "cached": 1, "unfinished_at_kill": 3}
    (ctx.work / "scale" / "digests-10Mbp.json").write_text(json.dumps({"g/predictions/g_predictions.h5": "h5:1"}))
    assert cases["resume_10Mbp"].agree({"pipeline": d})["ok"] is False
