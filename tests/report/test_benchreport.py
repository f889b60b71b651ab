"""``chromaflow benchmark-report`` on a metrics.jsonl built from real stage runs on the embedded test data.

The stages run through the real CLI (``chromaflow.cli.main``, in-process so torch is imported once); their
metrics JSONs are annotated exactly as workflows/chromaflow.nf does (``assembly``, ``shard``/``shards``,
``chunk``/``chunks``). The Nextflow trace is written in Nextflow's own format with one retried task and one
half-written row. The HTML report is rendered in headless Chromium and the screenshot checked for content.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from chromaflow.report import tasks as report_tasks
from chromaflow.cli import main as cli_main
from helpers.cli import assert_one_line_error, chromaflow
from helpers.environment import ci

ROOT = Path(__file__).resolve().parents[2]
TEST = ROOT / "assets" / "test"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")

SECTIONS = [
    "Stage summary",
    "Throughput per stage",
    "Wall time vs subsequences",
    "Data-wait and GPU utilisation",
    "Peak memory",
    "Extrapolation",
    "Tasks",
    "Software versions",
    "Machine",
]


def _cli(*args: str) -> None:
    assert cli_main([str(a) for a in args]) == 0, args


def _annotated(path: Path, **extra) -> str:
    m = json.loads(path.read_text())
    m.update(extra)
    return json.dumps(m)


@pytest.fixture(scope="session")
def real_run(tmp_path_factory):
    """Run every stage on the test data, like the pipeline's test profile; return (dir, metrics.jsonl, trace)."""
    d = tmp_path_factory.mktemp("benchreport")
    os.environ["CHROMAFLOW_PROGRESS"] = "0"
    lines = []
    for asm, fasta, sp in (("asmA", "asmA.fa", "Testus_primus"), ("asmB", "asmB.fa.gz", "Testus_secundus")):
        _cli(
            "fasta2h5",
            "--fasta",
            TEST / fasta,
            "--species",
            sp,
            "--out",
            d / f"{asm}.h5",
            "--subsequence-length",
            "2000",
            "--threads",
            "1",
            "--metrics",
            d / f"{asm}.fasta2h5.json",
        )
        lines.append(_annotated(d / f"{asm}.fasta2h5.json", assembly=asm))
    _cli("make-test-model", "--out", d / "m.ckpt", "--seed", "0")
    for i in (1, 2):
        _cli(
            "predict",
            "--h5",
            d / "asmA.h5",
            "--model",
            d / "m.ckpt",
            "--out",
            d / f"asmA.{i}.h5",
            "--batch-size",
            "8",
            "--device",
            "cpu",
            "--threads",
            "1",
            "--shard",
            f"{i}/2",
            "--metrics",
            d / f"asmA.predict{i}.json",
        )
        lines.append(_annotated(d / f"asmA.predict{i}.json", assembly="asmA", shard=i, shards=2))
    _cli(
        "predict",
        "--h5",
        d / "asmB.h5",
        "--model",
        d / "m.ckpt",
        "--out",
        d / "asmB.pred.h5",
        "--batch-size",
        "8",
        "--device",
        "cpu",
        "--threads",
        "1",
        "--metrics",
        d / "asmB.predict.json",
    )
    lines.append(_annotated(d / "asmB.predict.json", assembly="asmB", shard=1, shards=1))
    _cli(
        "predict-merge",
        d / "asmA.1.h5",
        d / "asmA.2.h5",
        "--out",
        d / "asmA.pred.h5",
        "--metrics",
        d / "asmA.merge.json",
    )
    lines.append(_annotated(d / "asmA.merge.json", assembly="asmA"))
    (d / "tracks").mkdir()
    _cli(
        "bigwig",
        "--predictions",
        d / "asmB.pred.h5",
        "--outdir",
        d / "tracks",
        "--basename",
        "asmB",
        "--threads",
        "1",
        "--metrics",
        d / "asmB.bigwig.json",
    )
    lines.append(_annotated(d / "asmB.bigwig.json", assembly="asmB"))
    _cli(
        "genie3",
        "--expression",
        TEST / "genie3" / "expression.tsv",
        "--layout",
        "samples-x-genes",
        "--regulators",
        TEST / "genie3" / "regulators.txt",
        "--n-trees",
        "20",
        "--threads",
        "1",
        "--targets-chunk",
        "1/2",
        "--out",
        d / "part1.npz",
        "--metrics",
        d / "genie3.json",
    )
    lines.append(_annotated(d / "genie3.json", assembly="asmA", chunk=1, chunks=2))
    metrics = d / "metrics.jsonl"
    metrics.write_text("\n".join(lines) + "\n")

    header = (
        "task_id\thash\tnative_id\tprocess\ttag\tname\tstatus\texit\tcpus\tattempt\trealtime\t%cpu\tpeak_rss\tpeak_vmem"
    )
    rows = [
        "1\tab/cdef12\t11\tCHROMAFLOW:FASTA2H5\tasmA\tCHROMAFLOW:FASTA2H5 (asmA)\tCOMPLETED\t0\t1\t1\t1.2s\t85.0%\t"
        "40 MB\t300 MB",
        "2\tab/cdef13\t12\tCHROMAFLOW:PREDICT\tasmA 1/2\tCHROMAFLOW:PREDICT (asmA 1/2)\tFAILED\t137\t1\t1\t"
        "3.1s\t99.0%\t500 MB\t1 GB",
        "3\tab/cdef14\t13\tCHROMAFLOW:PREDICT\tasmA 1/2\tCHROMAFLOW:PREDICT (asmA 1/2)\tCOMPLETED\t0\t1\t2\t"
        "1m 2s\t97.5%\t1.5 GB\t2 GB",
        "4\tab/cdef15\t14\tCHROMAFLOW:GENIE3\tasmA 1/2\tCHROMAFLOW:GENIE3 (asmA 1/2)\tCOMPLETED\t0\t1\t1\t"
        "500ms\t50.0%\t100 MB\t200 MB",
        "5\tab/cdef16\t15\tCHROMAFLOW:BIGWIG\tasmB\tCHROMA",  # being written right now
    ]
    trace = d / "trace.txt"
    trace.write_text(header + "\n" + "\n".join(rows) + "\n")
    versions = d / "software_versions.yml"
    versions.write_text(
        '"CHROMAFLOW:FASTA2H5":\n    chromaflow: 0.1.0\n    h5py: 3.11.0\n'
        '"CHROMAFLOW:PREDICT":\n    chromaflow: 0.1.0\n    torch: 2.13.0\n'
    )
    return d, metrics, trace, versions


@pytest.fixture(scope="session")
def report(real_run):
    d, metrics, trace, versions = real_run
    out = d / "report"
    out.mkdir()
    _cli(
        "benchmark-report",
        "--metrics",
        metrics,
        "--versions",
        versions,
        "--trace",
        trace,
        "--outdir",
        out,
        "--extrapolate-genome-gbp",
        "2.2",
        "--extrapolate-genomes",
        "10",
        "--extrapolate-workers",
        "4",
    )
    return out


def _rows(out: Path) -> list[dict]:
    lines = (out / "benchmark.tsv").read_text().splitlines()
    head = lines[0].split("\t")
    return [dict(zip(head, line.split("\t"))) for line in lines[1:]]


def test_outputs_exist(report):
    for name in (
        "benchmark.json",
        "benchmark.tsv",
        "report.html",
        "chromaflow_benchmark_mqc.tsv",
        "chromaflow_throughput_mqc.json",
    ):
        assert (report / name).stat().st_size > 0, name
    assert not list(report.glob(".*.part"))


def test_tsv_one_row_per_task_with_measured_fields_only(report, real_run):
    _, metrics, _, _ = real_run
    n = len(metrics.read_text().splitlines())
    rows = _rows(report)
    assert len(rows) == n == 8
    assert [r["stage"] for r in rows] == [
        "fasta2h5",
        "fasta2h5",
        "predict",
        "predict",
        "predict",
        "predict-merge",
        "bigwig",
        "genie3",
    ]
    pred = [r for r in rows if r["stage"] == "predict"]
    assert [(r["assembly"], r["shard"]) for r in pred] == [("asmA", "1/2"), ("asmA", "2/2"), ("asmB", "1/1")]
    for r in pred:
        assert float(r["data_wait_pct"]) >= 0 and r["device"] == "cpu"
        assert float(r["bp_per_s"]) == pytest.approx(float(r["bp"]) / float(r["wall_s"]), rel=1e-4)
        assert int(r["subsequences"]) > 0 and r["peak_gpu_bytes"] == ""  # CPU: no GPU memory, not 0
    g = next(r for r in rows if r["stage"] == "genie3")
    assert g["bp"] == g["subsequences"] == g["data_wait_pct"] == g["bp_per_s"] == ""  # not invented
    assert int(g["targets"]) > 0
    merge = next(r for r in rows if r["stage"] == "predict-merge")
    assert merge["bp"] == "" and int(merge["subsequences"]) == 36
    fa = next(r for r in rows if r["stage"] == "fasta2h5" and r["assembly"] == "asmA")
    assert int(fa["bp"]) == 33156 and int(fa["subsequences"]) == 36
    # prediction covers both strands: its bp are twice the genome's (the extrapolation's s = 2)
    fb = next(r for r in rows if r["stage"] == "fasta2h5" and r["assembly"] == "asmB")
    pb = next(r for r in pred if r["assembly"] == "asmB")
    assert int(pb["bp"]) == report_tasks.STRANDS["predict"] * int(fb["bp"])
    assert sum(int(r["bp"]) for r in pred if r["assembly"] == "asmA") == 2 * int(fa["bp"])


def test_trace_join_prefers_completed_attempt_and_skips_partial_row(report):
    rep = json.loads((report / "benchmark.json").read_text())
    t = {(x["stage"], x["assembly"], x["part"]): x for x in rep["tasks"]}
    p = t[("predict", "asmA", "1/2")]
    assert p["trace_realtime_s"] == pytest.approx(62.0)
    assert p["trace_cpu_pct"] == pytest.approx(97.5)
    assert p["trace_peak_rss_bytes"] == pytest.approx(1.5 * 2**30)
    assert p["trace_attempts"] == 2
    assert t[("genie3", "asmA", "1/2")]["trace_realtime_s"] == pytest.approx(0.5)
    assert t[("fasta2h5", "asmA", None)]["trace_peak_rss_bytes"] == 40 * 2**20
    assert t[("bigwig", "asmB", None)]["trace_realtime_s"] is None  # its row was half-written
    assert any("incomplete row" in n for n in rep["notes"])


def test_json_extrapolation_matches_measured_rates(report):
    rep = json.loads((report / "benchmark.json").read_text())
    assert rep["schema"] == report_tasks.SCHEMA
    ex = rep["extrapolation"]
    assert (ex["genome_gbp"], ex["genomes"], ex["workers"]) == (2.2, 10, 4)
    stages = {s["stage"]: s for s in rep["stages"]}
    pred = [t for t in rep["tasks"] if t["stage"] == "predict"]
    rate = sum(t["bp"] for t in pred) / sum(t["wall_s"] for t in pred)
    assert stages["predict"]["bp_per_s"] == pytest.approx(rate)
    row = next(r for r in ex["rows"] if r["stage"] == "predict")
    assert row["strands"] == 2  # prediction's bp count both strands
    assert row["hours_per_genome"] == pytest.approx(2 * 2.2e9 / rate / 3600)
    assert row["hours_total"] == pytest.approx(10 * 2 * 2.2e9 / rate / 3600 / 4)
    fa = next(r for r in ex["rows"] if r["stage"] == "fasta2h5")
    assert fa["strands"] == 1
    assert fa["hours_per_genome"] == pytest.approx(2.2e9 / stages["fasta2h5"]["bp_per_s"] / 3600)
    g = next(r for r in ex["rows"] if r["stage"] == "genie3")
    assert g["hours_total"] is None and g["why_na"]
    fit = stages["predict"]["fit"]
    assert fit is not None and stages["predict"]["fit_points"] == 3
    assert stages["bigwig"]["fit"] is None  # bigwig has no subsequence count


def test_multiqc_custom_content(report):
    text = (report / "chromaflow_benchmark_mqc.tsv").read_text().splitlines()
    for key in ("# id:", "# section_name:", "# description:", "# plot_type: 'table'"):
        assert any(line.startswith(key) for line in text), key
    body = [line for line in text if not line.startswith("#")]
    assert body[0].split("\t")[0] == "task" and len(body) == 9
    names = [line.split("\t")[0] for line in body[1:]]
    assert len(set(names)) == len(names)  # MultiQC needs unique sample names
    j = json.loads((report / "chromaflow_throughput_mqc.json").read_text())
    assert j["plot_type"] == "bargraph" and "predict" in j["data"]


def test_html_sections_and_embedded_plots(report):
    text = (report / "report.html").read_text()
    for s in SECTIONS:
        assert f">{s}</h2>" in text, s
    assert (
        text.count('<img alt=')
        == text.count('src="data:image/png;base64,') + text.count("src='data:image/png;base64,")
        >= 4
    )
    for alt in ("throughput per stage", "wall time vs subsequences", "data-wait per task", "peak memory per task"):
        assert f"<img alt='{alt}' src='data:image/png;base64," in text, alt
    # self-contained: nothing fetched (the one script, which sorts the tables, is inline)
    assert "http://" not in text and "https://" not in text and "<script src" not in text
    assert text.count("<script>") == 1 and "<table class='sortable'>" in text
    assert "N × t_genome ÷ K" in text and "Predmoter GPU" not in text and "× s ÷ r" in text
    assert "torch" in text and "2.13.0" in text  # versions
    assert "CPU model" in text


def test_many_tasks_are_drawn_as_distributions_not_one_bar_each(tmp_path):
    """A sheet of 100 assemblies: per-task bars would be a strip thousands of pixels wide with 480 unreadable
    labels; above PER_TASK_MAX tasks the data-wait and memory plots show each stage's distribution instead, in a
    figure of page width, with the highest tasks named."""
    import base64
    import struct

    from chromaflow.report import html as report_html

    def png_size(b64: str) -> tuple[int, int]:
        return struct.unpack(">II", base64.b64decode(b64)[16:24])

    def task(i: int, stage: str) -> dict:
        return {
            "stage": stage,
            "assembly": f"asm{i:03d}",
            "part": "1/1",
            "setting": None,
            "data_wait_pct": 1.0 + i % 7,
            "peak_rss_bytes": (100 + i) * 2**20,
            "trace_peak_rss_bytes": None,
        }

    few = [task(i, "predict") for i in range(report_html.PER_TASK_MAX)]
    many = [task(i, s) for i in range(100) for s in ("predict", "bigwig")]
    assert png_size(report_html.plot_memory(few))[0] > 1500  # one bar per task: it grows with the tasks
    for plot in (report_html.plot_memory, report_html.plot_data_wait):
        w, h = png_size(plot(many))
        assert w < 1300 and h > 250, (plot.__name__, w, h)


def test_missing_trace_and_versions_still_report(real_run, tmp_path):
    _, metrics, _, _ = real_run
    _cli(
        "benchmark-report",
        "--metrics",
        metrics,
        "--versions",
        tmp_path / "nope.yml",
        "--trace",
        tmp_path / "not_yet.txt",
        "--outdir",
        tmp_path,
    )
    rep = json.loads((tmp_path / "benchmark.json").read_text())
    assert all(t["trace_realtime_s"] is None for t in rep["tasks"])
    assert any("not found" in n for n in rep["notes"])
    assert (tmp_path / "report.html").stat().st_size > 0


def test_single_point_stage_says_no_fit(tmp_path):
    m = {
        "stage": "predict",
        "assembly": "x",
        "shard": 1,
        "shards": 1,
        "bp": 1000,
        "subsequences": 1,
        "wall_s": 2.0,
        "cpu_s": 1.0,
        "device": "cpu",
        "data_wait_fraction": 0.25,
    }
    (tmp_path / "m.jsonl").write_text(json.dumps(m) + "\n")
    _cli("benchmark-report", "--metrics", tmp_path / "m.jsonl", "--outdir", tmp_path)
    text = (tmp_path / "report.html").read_text()
    assert "no fit (&lt; 2 distinct sizes)" in text
    rep = json.loads((tmp_path / "benchmark.json").read_text())
    assert rep["warnings"] and rep["warnings"][0]["kind"] == "data-wait"
    assert "--num-workers" in rep["warnings"][0]["fix"] and "--batch-size" in rep["warnings"][0]["fix"]
    assert "25.0 %" in text


def test_bad_metrics_line_is_one_line_error(tmp_path):
    (tmp_path / "m.jsonl").write_text('{"stage": "predict"}\n{oops\n')
    res = chromaflow("benchmark-report", "--metrics", tmp_path / "m.jsonl", "--outdir", tmp_path)
    assert_one_line_error(res, "benchmark-report", "line 2")
    assert res.returncode == 1
    assert not (tmp_path / "benchmark.json").exists()


@pytest.mark.skipif(
    CHROMIUM is None and not ci(), reason="chromium not installed (apt-get install -y chromium); required under CI=true"
)
def test_report_renders_in_headless_chromium(report, tmp_path):
    assert CHROMIUM, "chromium is required under CI=true"
    import matplotlib.image as mpimg

    png = tmp_path / "report.png"
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1280,4000",
        f"--screenshot={png}",
        (report / "report.html").as_uri(),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert png.is_file() and png.stat().st_size > 10_000, res.stderr[-2000:]
    img = mpimg.imread(str(png))
    assert img.shape[0] == 4000 and img.shape[1] == 1280
    rgb = (img[..., :3] * 255).astype(np.uint8) if img.dtype != np.uint8 else img[..., :3]
    non_white = np.mean(np.any(rgb < 235, axis=-1))
    colours = len(np.unique(rgb.reshape(-1, 3)[::7], axis=0))
    assert non_white > 0.05, f"screenshot nearly blank ({non_white:.3f} non-white)"
    assert colours > 200, f"only {colours} distinct colours: plots did not render"
