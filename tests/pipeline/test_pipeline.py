"""The real pipeline on its embedded test data (``-profile test``), run once per session by real Nextflow.

Checks what a user gets: per-assembly outputs, the reports in pipeline_info/, and that every stage's output
inside the pipeline equals the same stage run directly through the CLI (so sharding, merging and chunking
inside Nextflow change nothing). The run (fixture ``test_run`` in conftest.py) also injects an OOM-like exit 137 into
the first BIGWIG
attempt; a test checks that the task was retried with more memory and the run still succeeded.
"""

from __future__ import annotations

import functools
import gzip
import json
import re
import shutil
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pyBigWig
import pytest

from helpers.environment import ci
from helpers.pipeline_utils import ROOT, read_trace, read_trace_file
from helpers.cli import chromaflow

pytestmark = pytest.mark.pipeline

TEST_DIR = ROOT / "assets" / "test"


cli = functools.partial(chromaflow, check=True, timeout=None)

#: the variant tasks of asmA's vcf in the test profile (8 (variant, ALT) rows, --variant_shard_size 3: 3 shards)
VARIANT_TASKS = ["VARIANT_PLAN"] + ["VARIANT_EFFECT"] * 3 + ["VARIANT_MERGE", "VARIANT_BROWSER"]


def test_run_succeeds_and_reports_exist(test_run):
    outdir = test_run.outdir
    assert "chromaflow: done" in test_run.log
    info = outdir / "pipeline_info"
    # the trace is in pipeline_info/ too unless the run was given another file (nf-test's -with-trace: the other
    # pipeline runs of the suite read theirs from pipeline_info/)
    assert test_run.trace.stat().st_size > 0
    for pattern in (
        "execution_timeline_*.html",
        "execution_report_*.html",
        "pipeline_dag_*.html",
        *(["execution_trace_*.txt"] if test_run.trace.parent == info else []),
    ):
        files = list(info.glob(pattern))
        assert len(files) == 1 and files[0].stat().st_size > 0, pattern
    versions = (info / "software_versions.yml").read_text()
    # every process under the subworkflow that runs it (workflows/chromaflow.nf reads as the data flow)
    processes = (
        "FASTA2H5",
        *(
            f"PREDICT_ASSEMBLIES:{p}"
            for p in ("PREDICT_PLAN", "MAKE_TEST_MODEL", "PREDICT", "PREDICT_MERGE", "PREDICT_VIEW")
        ),
        "TRACKS:BIGWIG",
        "TRACKS:PEAKS",
        "TRACKS:VARIANT_BROWSER",
        "VARIANT_EFFECTS:VARIANT_PLAN",
        "VARIANT_EFFECTS:VARIANT_EFFECT",
        "VARIANT_EFFECTS:VARIANT_MERGE",
        "GENES_AND_MOTIFS:GENE_ACCESSIBILITY",
        "GENES_AND_MOTIFS:MOTIF_PRIOR",
        "NETWORK:GENIE3_PLAN",
        "NETWORK:GENIE3",
        "NETWORK:GENIE3_MERGE",
        "REVIEW:REVIEW_PAGE",
        "INTERPRET:ATTRIBUTE",
        "INTERPRET:DISCOVER_MOTIFS",
        "REPORTING:BENCHMARK",
        "REPORTING:MULTIQC",
    )
    assert sorted(re.findall(r'^"CHROMAFLOW:([\w:]+)":$', versions, re.M)) == sorted(processes)
    assert "\n    multiqc: 1.35\n" in versions
    trace = read_trace_file(test_run.trace)
    assert {"peak_rss", "realtime", "%cpu", "attempt"} <= set(trace[0])
    done = [r["process"].split(":")[-1] for r in trace if r["status"] == "COMPLETED"]
    # 2 FASTA2H5, 2 shard plans, 1 model, 4 PREDICT shards, 2 merges, 2 views, 2 BIGWIG, 2 PEAKS, asmA's vcf: 1
    # VARIANT_PLAN, 3
    # VARIANT_EFFECT shards (8 rows, --variant_shard_size 3), 1 VARIANT_MERGE, 1 VARIANT_BROWSER; GENE_ACCESSIBILITY and
    # MOTIF_PRIOR of asmA (the only row with an annotation), 1 GENIE3 plan, 3 GENIE3 chunks, 1 merge, 2 REVIEW_PAGE,
    # BENCHMARK, MULTIQC; --interpret (CHROMAFLOW_TEST_INTERPRET=1): ATTRIBUTE and DISCOVER_MOTIFS per assembly
    assert sorted(done) == sorted(
        ["FASTA2H5"] * 2
        + ["PREDICT_PLAN"] * 2
        + ["MAKE_TEST_MODEL"]
        + ["PREDICT"] * 4
        + ["PREDICT_MERGE"] * 2
        + ["PREDICT_VIEW"] * 2
        + ["BIGWIG"] * 2
        + ["PEAKS"] * 2
        + VARIANT_TASKS
        + ["GENE_ACCESSIBILITY", "MOTIF_PRIOR"]
        + ["GENIE3_PLAN"]
        + ["GENIE3"] * 3
        + ["GENIE3_MERGE", "BENCHMARK", "MULTIQC"]
        + ["REVIEW_PAGE"] * 2
        + ["ATTRIBUTE", "DISCOVER_MOTIFS"] * 2
    )


def test_injected_oom_exit_is_retried_with_more_memory(test_run):
    bigwig = [r for r in read_trace_file(test_run.trace) if r["process"].endswith("BIGWIG")]
    failed = [r for r in bigwig if r["status"] == "FAILED"]
    done = [r for r in bigwig if r["status"] == "COMPLETED"]
    assert failed and all(r["exit"] == "137" and r["attempt"] == "1" for r in failed)
    assert len(done) == 2 and all(r["attempt"] == "2" for r in done)
    mem = lambda r: float(r["memory"].split()[0])  # noqa: E731  e.g. "1 GB" -> "2 GB"
    assert mem(done[0]) == 2 * mem(failed[0])


def test_output_busy_exit_is_retried(test_run):
    """Exit 75 (chromaflow's OutputBusyError: an output another live process is writing, e.g. an orphaned task when
    -resume reruns it in the same work directory) is retried, in a work directory of its own."""
    merge = [r for r in read_trace_file(test_run.trace) if r["process"].endswith("GENIE3_MERGE")]
    assert [(r["attempt"], r["status"], r["exit"]) for r in merge] == [("1", "FAILED", "75"), ("2", "COMPLETED", "0")]
    assert merge[0]["workdir"] != merge[1]["workdir"]


def test_fasta2h5_in_pipeline_equals_direct_cli(test_run, tmp_path):
    outdir = test_run.outdir
    for asm, fasta, species in (("asmA", "asmA.fa", "Testus_primus"), ("asmB", "asmB.fa.gz", "Testus_secundus")):
        direct = tmp_path / f"{asm}.h5"
        cli(
            "fasta2h5",
            "--fasta",
            str(TEST_DIR / fasta),
            "--species",
            species,
            "--out",
            str(direct),
            "--subsequence-length",
            "2000",
        )
        with h5py.File(outdir / asm / "h5" / f"{asm}.h5") as a, h5py.File(direct) as b:
            assert sorted(a["data"]) == ["X", "seqids", "species", "start_ends"]
            for name in a["data"]:
                np.testing.assert_array_equal(a["data"][name][()], b["data"][name][()])
            assert a["data/X"].shape[1] == 2000


def test_sharded_predictions_equal_one_unsharded_run(test_run, tmp_path):
    outdir = test_run.outdir
    model = next((outdir / "test_model").glob("*.ckpt"))
    for asm in ("asmA", "asmB"):
        merged = outdir / asm / "predictions" / f"{asm}_predictions.h5"
        direct = tmp_path / f"{asm}_direct.h5"
        cli(
            "predict",
            "--h5",
            str(outdir / asm / "h5" / f"{asm}.h5"),
            "--model",
            str(model),
            "--out",
            str(direct),
            "--device",
            "cpu",
        )
        with h5py.File(merged) as a, h5py.File(direct) as b:
            pa, pb = a["prediction/predictions"][()], b["prediction/predictions"][()]
            assert pa.shape == pb.shape and pa.shape[0] > 2  # several rows, split over 2 shards
            np.testing.assert_array_equal(pa, pb)
            np.testing.assert_array_equal(a["data/start_ends"][()], b["data/start_ends"][()])
            assert list(a["prediction/datasets"][()]) == [b"atacseq", b"h3k4me3"]
            assert not a["prediction/predictions"].is_virtual  # the published file holds its values
    # work/ holds the predictions once, as the shards: the merged file was moved to --outdir (not copied), and the
    # tasks that read predictions (BIGWIG here) read PREDICT_VIEW's view, staged with the shards beside it
    done = {r["name"]: Path(r["workdir"]) for r in read_trace_file(test_run.trace) if r["status"] == "COMPLETED"}
    for asm in ("asmA", "asmB"):
        assert not (done[f"CHROMAFLOW:PREDICT_ASSEMBLIES:PREDICT_MERGE ({asm})"] / f"{asm}_predictions.h5").exists()
        view = done[f"CHROMAFLOW:PREDICT_ASSEMBLIES:PREDICT_VIEW ({asm})"] / f"{asm}_predictions.h5"
        with h5py.File(view) as f:
            assert f["prediction/predictions"].is_virtual and view.stat().st_size < 64 << 10
        bigwig = done[f"CHROMAFLOW:TRACKS:BIGWIG ({asm})"]
        assert sorted(p.name for p in bigwig.glob("*_predictions.h5")) == [
            f"{asm}.shard1of2_predictions.h5",
            f"{asm}.shard2of2_predictions.h5",
            f"{asm}_predictions.h5",
        ]
        assert (bigwig / f"{asm}_predictions.h5").resolve() == view.resolve()


def _fasta_lengths(path: Path) -> dict[str, int]:
    opener = gzip.open if path.suffix == ".gz" else open
    sizes: dict[str, int] = {}
    name = None
    with opener(path, "rt") as fh:
        for line in fh:
            line = line.rstrip()
            if line.startswith(">"):
                name = line[1:].split(" ")[0]
                sizes[name] = 0
            elif line:
                sizes[name] += len(line)
    return sizes


def test_tracks_cover_every_chromosome_on_both_strands(test_run):
    outdir = test_run.outdir
    for asm, fasta in (("asmA", "asmA.fa"), ("asmB", "asmB.fa.gz")):
        sizes = _fasta_lengths(TEST_DIR / fasta)
        tracks = outdir / asm / "tracks"
        names = sorted(p.name for p in tracks.glob("*.bw"))
        assert names == sorted(f"{asm}_{ds}_{s}_strand.bw" for ds in ("atacseq", "h3k4me3") for s in ("avg", "+", "-"))
        for bw_path in tracks.glob("*.bw"):
            bw = pyBigWig.open(str(bw_path))
            try:
                assert bw.chroms() == sizes
                for chrom, size in sizes.items():
                    iv = bw.intervals(chrom)
                    assert iv[0][0] == 0 and iv[-1][1] == size
                    assert all(a[1] == b[0] for a, b in zip(iv, iv[1:]))  # tiles the chromosome
            finally:
                bw.close()
        chrom_sizes = dict(line.split("\t") for line in (tracks / "chrom.sizes").read_text().splitlines())
        assert {k: int(v) for k, v in chrom_sizes.items()} == sizes
        assert (tracks / "igv_session.xml").exists() and (tracks / "hub.txt").exists()
        # the sheet's FASTA (asmB's gzip) gives the genome files beside the tracks, the session's genome and one
        # single-file hub (hub.txt holds the track stanzas): the folder opens unedited in IGV and igv.js
        fai = [ln.split("\t")[:2] for ln in (tracks / f"{asm}.fa.fai").read_text().splitlines()]
        assert {k: int(v) for k, v in fai} == sizes and (tracks / f"{asm}.fa").is_file()
        assert (tracks / f"{asm}.2bit").is_file()
        assert not (tracks / "genomes.txt").exists() and not (tracks / "trackDb.txt").exists()
        assert f'genome="{asm}.fa"' in (tracks / "igv_session.xml").read_text()
        hub = (tracks / "hub.txt").read_text()
        assert "useOneFile on" in hub.splitlines() and f"twoBitPath {asm}.2bit" in hub.splitlines()
        # PEAKS: one narrowPeak per dataset, added to the published IGV session and hub
        for ds in ("atacseq", "h3k4me3"):
            assert (tracks / f"{asm}_{ds}.narrowPeak").exists() and (tracks / f"{asm}_{ds}.bb").exists()
            assert f'path="{asm}_{ds}.narrowPeak"' in (tracks / "igv_session.xml").read_text()
            assert f"bigDataUrl {asm}_{ds}.bb" in hub


def test_variant_shards_merge_to_one_cli_run_and_reach_the_browser_files(test_run, tmp_path):
    """asmA's vcf in 3 VARIANT_EFFECT shards (--variant_shard_size 3): the published table and top-variant bigWigs are
    those of one unsharded CLI run with the run's test model; VARIANT_BROWSER put every bigWig into the published IGV
    session and hub after PEAKS' tracks, with paths relative to tracks/; asmB (no vcf) has none."""
    outdir = test_run.outdir
    trace = read_trace_file(test_run.trace)
    assert sorted(r["tag"] for r in trace if r["process"].endswith(":VARIANT_EFFECT")) == [
        "asmA 1/3",
        "asmA 2/3",
        "asmA 3/3",
    ]
    plan_tasks = [r for r in trace if r["process"].endswith(":VARIANT_PLAN")]
    assert len(plan_tasks) == 1 and plan_tasks[0]["status"] == "COMPLETED"
    variants = outdir / "asmA" / "variants"
    assert sorted(p.name for p in variants.iterdir()) == ["asmA.effects.tsv.gz", "variant_tracks"]
    model = next((outdir / "test_model").glob("*.ckpt"))
    cli(
        "variant-effect",
        "--vcf",
        TEST_DIR / "asmA.vcf",
        "--fasta",
        TEST_DIR / "asmA.fa",
        "--model",
        model,
        "--out",
        tmp_path / "e.tsv.gz",
        "--tracks",
        10,
        "--tracks-dir",
        tmp_path / "t",
        "--device",
        "cpu",
    )
    assert (variants / "asmA.effects.tsv.gz").read_bytes() == (tmp_path / "e.tsv.gz").read_bytes()
    bws = sorted(p.name for p in (variants / "variant_tracks").iterdir())
    assert bws == sorted(p.name for p in (tmp_path / "t").iterdir()) and len(bws) == 7 * 2 * 2  # 7 scored, all kept
    assert all((variants / "variant_tracks" / b).read_bytes() == (tmp_path / "t" / b).read_bytes() for b in bws)
    tracks = outdir / "asmA" / "tracks"
    session, trackdb = (tracks / "igv_session.xml").read_text(), (tracks / "hub.txt").read_text()  # single-file hub
    paths = re.findall(r'<Resource path="(\.\./variants/variant_tracks/[^"]+)" type="bw"/>', session)
    assert sorted(paths) == [f"../variants/variant_tracks/{b}" for b in bws]
    assert all((tracks / p).is_file() for p in paths)
    assert sorted(re.findall(r"^bigDataUrl (\.\./variants/variant_tracks/\S+)$", trackdb, re.M)) == sorted(paths)
    # PEAKS' tracks and the promoter BED are still there
    assert 'path="asmA_atacseq.narrowPeak"' in session and "bigDataUrl asmA_h3k4me3.bb" in trackdb
    assert 'path="../genes/asmA.promoters.bed"' in session
    for f in ("igv_session.xml", "hub.txt"):
        assert "variant" not in (outdir / "asmB" / "tracks" / f).read_text()


def test_genie3_chunks_merge_to_the_single_task_result(test_run, tmp_path):
    outdir = test_run.outdir
    net = outdir / "asmA" / "network"
    links = net / "asmA.genie3_links.tsv.gz"
    direct = tmp_path / "direct.npz"
    cli(
        "genie3",
        "--expression",
        str(TEST_DIR / "genie3" / "expression.tsv"),
        "--layout",
        "samples-x-genes",
        "--regulators",
        str(TEST_DIR / "genie3" / "regulators.txt"),
        "--n-trees",
        "100",
        "--seed",
        "0",
        "--targets-chunk",
        "1/1",
        "--out",
        str(direct),
    )
    direct_links = tmp_path / "direct.tsv.gz"
    cli("genie3-merge", "--out", str(direct_links), "--summary", str(tmp_path / "direct_summary.json"), str(direct))
    assert gzip.decompress(links.read_bytes()) == gzip.decompress(direct_links.read_bytes())
    lines = gzip.decompress(links.read_bytes()).decode().splitlines()
    # header + 5 regulators x 20 targets - 5 self-links, every regulator one of the listed ones
    assert lines[0] == "regulator\ttarget\timportance" and len(lines) == 96
    regulators = (TEST_DIR / "genie3" / "regulators.txt").read_text().split()
    assert {ln.split("\t")[0] for ln in lines[1:]} == set(regulators)
    summary = json.loads((net / "asmA.genie3_summary.json").read_text())
    assert summary == json.loads((tmp_path / "direct_summary.json").read_text())
    assert (summary["genes"], summary["regulators"], summary["targets"], summary["edges"]) == (20, 5, 20, 95)
    assert summary["options"]["n_trees"] == 100 and summary["options"]["seed"] == 0
    assert (net / "asmA.genie3_weights.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # asmB has no expression matrix: no network
    assert not (outdir / "asmB" / "network").exists()
    trace = read_trace_file(test_run.trace)
    assert len([r for r in trace if r["process"].endswith(":GENIE3") and r["status"] == "COMPLETED"]) == 3
    # the chunk count came from the Python reader's plan (20 genes, --genie3_chunk_size 8)
    plan = [r for r in trace if r["process"].endswith(":GENIE3_PLAN")]
    assert len(plan) == 1 and plan[0]["status"] == "COMPLETED"
    assert sorted(r["tag"] for r in trace if r["process"].endswith(":GENIE3")) == ["asmA 1/3", "asmA 2/3", "asmA 3/3"]


def test_benchmark_stage_reports_every_stage(test_run):
    outdir = test_run.outdir
    bench = outdir / "benchmark"
    tasks = json.loads((bench / "benchmark.json").read_text())["tasks"]
    stages = {t["stage"] for t in tasks}
    assert {
        "fasta2h5",
        "predict",
        "predict-merge",
        "bigwig",
        "peaks",
        "variant-effect",
        "gene-accessibility",
        "motif-prior",
        "genie3",
        "genie3-merge",
    } <= stages
    predict = [t for t in tasks if t["stage"] == "predict"]
    assert len(predict) == 4 and all(t["assembly"] in ("asmA", "asmB") and t["device"] == "cpu" for t in predict)
    html = (bench / "report.html").read_text()
    assert "data:image/png;base64," in html and "<h2 id='extrapolation'>Extrapolation</h2>" in html
    # joined with this run's trace (a staged input of BENCHMARK): every task has its row, realtime and peak_rss;
    # PEAKS writes one metrics JSON per dataset (2 tasks, 4 rows); 3 VARIANT_EFFECT shards and VARIANT_MERGE; 2 views;
    # --interpret: ATTRIBUTE and DISCOVER_MOTIFS per assembly
    assert len([t for t in tasks if t["stage"] == "predict-view"]) == 2
    assert {s: len([t for t in tasks if t["stage"] == s]) for s in ("attribute", "discover-motifs")} == {
        "attribute": 2,
        "discover-motifs": 2,
    }
    assert len(tasks) == 30 and len([t for t in tasks if t["stage"] == "peaks"]) == 4
    assert all(
        t["trace_status"] == "COMPLETED" and t["trace_realtime_s"] is not None and t["trace_peak_rss_bytes"]
        for t in tasks
    )
    bigwig = [t for t in tasks if t["stage"] == "bigwig"]
    assert all(t["trace_attempts"] == 2 for t in bigwig)  # the injected exit 137 and the retry
    assert json.loads((bench / "benchmark.json").read_text())["notes"] == []
    assert (bench / "benchmark.tsv").read_text().count("\n") == len(tasks) + 1
    assert sorted(p.name for p in bench.glob("*_mqc.*")) == [
        "chromaflow_benchmark_mqc.tsv",
        "chromaflow_throughput_mqc.json",
    ]


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(
    CHROMIUM is None and not ci(), reason="chromium not installed (apt-get install -y chromium); required under CI=true"
)
def test_multiqc_report_shows_our_sections_in_headless_chromium(test_run, tmp_path):
    """The MultiQC report rendered by a real browser: our sections are there after its JavaScript ran, the throughput
    bar plot was drawn by Plotly with one bar per measured stage, the benchmark table has a row per task and the
    software-versions table lists every process."""
    assert CHROMIUM, "chromium is required under CI=true"
    outdir = test_run.outdir
    report = outdir / "multiqc" / "multiqc_report.html"
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
        "--virtual-time-budget=20000",
        "--dump-dom",
        report.as_uri(),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    dom = res.stdout
    assert len(dom) > 100_000, res.stderr[-2000:]
    headings = dict(re.findall(r'<h2 class="mb-0" id="([a-z_-]+)">([^<]+?)\s*<', dom))
    assert headings == {
        "chromaflow_review": "Review pages",
        "chromaflow_motifs": "Motifs learned by the model",
        "chromaflow_throughput": "chromaflow throughput",
        "chromaflow_benchmark": "chromaflow benchmark",
        "multiqc_software_versions": "Software Versions",
        "chromaflow-summary": "chromaflow Workflow Summary",
        "chromaflow-methods-description": "chromaflow Methods Description",
    }, headings
    # the review and motifs sections link each assembly's page where the pipeline published it
    for asm in ("asmA", "asmB"):
        assert f'<a href="../{asm}/review/{asm}.review.html">{asm}</a>' in dom
        assert (report.parent / f"../{asm}/review/{asm}.review.html").resolve().is_file()
        assert f'<a href="../{asm}/motifs/report.html">{asm}</a>' in dom
        assert (report.parent / f"../{asm}/motifs/report.html").resolve().is_file()
    # Plotly ran: the plot div got its class and an SVG whose bar labels are the stages of the custom content
    plot = dom[dom.index('id="chromaflow_throughput_plot"') :]
    assert "js-plotly-plot" in plot[:2000] and 'class="main-svg"' in plot
    throughput = json.loads((outdir / "benchmark" / "chromaflow_throughput_mqc.json").read_text())["data"]
    labels = set(re.findall(r'data-unformatted="([^"]*)"', plot[: plot.index("</svg>")]))
    assert set(throughput) <= labels and len(throughput) >= 3, (sorted(throughput), sorted(labels))
    table = dom[dom.index('id="chromaflow_benchmark_table_table"') :]
    table = table[: table.index("</table>")]
    assert (
        table.count("<tr") == 1 + 30
    )  # header + one row per metrics JSON (PEAKS: one per dataset; 3 variant shards + merge; 2 predict views;
    #    ATTRIBUTE and DISCOVER_MOTIFS per assembly)
    versions = dom[dom.index('id="mqc_versions_table"') :]
    versions = versions[: versions.index("</table>")]
    for process in (
        "FASTA2H5",
        "PREDICT_ASSEMBLIES:PREDICT",
        "PREDICT_ASSEMBLIES:PREDICT_MERGE",
        "TRACKS:BIGWIG",
        "NETWORK:GENIE3_PLAN",
        "NETWORK:GENIE3",
        "NETWORK:GENIE3_MERGE",
    ):
        assert f"<td>CHROMAFLOW:{process}</td>" in versions, process


# -----------------------------------------------------------------------------------------------------------------
# odd but valid inputs through the whole pipeline
# -----------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def odd_inputs_run(tmp_path_factory, nextflow_bin):
    """One run on a sheet with: a FASTA in a folder and file with spaces; a FASTA fetched over http (a local
    server on loopback); a gzipped TSV expression matrix; a CSV matrix in the other layout; one prediction shard
    per assembly (published without a merge), read from the FASTAs (--predict_from fasta, the h5 still made), both
    small assemblies in one PREDICT_GROUP task (--predict_group_mbp's default)."""
    from helpers.pipeline_utils import LocalHttpServer, run_nextflow

    work = tmp_path_factory.mktemp("odd_inputs")
    data = work / "my data"
    data.mkdir()
    shutil.copy(TEST_DIR / "asmA.fa", data / "asm A.fa")
    (data / "expression one.tsv.gz").write_bytes(gzip.compress((TEST_DIR / "genie3" / "expression.tsv").read_bytes()))
    rows = [ln.split("\t") for ln in (TEST_DIR / "genie3" / "expression.tsv").read_text().splitlines()]
    genes = [g.strip('"') for g in rows[0]]
    csv_lines = [",".join(["gene"] + [f"s{i}" for i in range(1, len(rows))])]
    csv_lines += [",".join([g] + [r[j] for r in rows[1:]]) for j, g in enumerate(genes)]
    (data / "expression.csv").write_text("\n".join(csv_lines) + "\n")
    shutil.copy(TEST_DIR / "genie3" / "regulators.txt", data / "regulators.txt")
    served = work / "served"
    served.mkdir()
    shutil.copy(TEST_DIR / "asmB.fa.gz", served / "asmB.fa.gz")
    with LocalHttpServer(served) as server:
        sheet = work / "sheet.csv"
        sheet.write_text(
            "id,fasta,species,expression,regulators,expression_layout\n"
            "spaced,my data/asm A.fa,Testus_primus,my data/expression one.tsv.gz,my "
            "data/regulators.txt,samples-x-genes\n"
            f"remote,{server.url}/asmB.fa.gz,Testus_secundus,my data/expression.csv,my "
            f"data/regulators.txt,genes-x-samples\n"
        )
        outdir = work / "results"
        res = run_nextflow(
            [
                "-profile",
                "test",
                "--input",
                str(sheet),
                "--outdir",
                str(outdir),
                "--predict_shards",
                "1",
                "--predict_from",
                "fasta",
                "--skip_tracks",
                "--skip_benchmark",
                "--skip_multiqc",
            ],
            cwd=work,
        )
    return work, outdir, res


def test_odd_inputs_give_the_same_results_as_plain_ones(odd_inputs_run, test_run, tmp_path):
    work, outdir, res = odd_inputs_run
    reference = test_run.outdir
    assert f"2 assemblies from {work / 'sheet.csv'} " in res.stdout, res.stdout[-3000:]  # --input names the sheet
    trace = read_trace(outdir)
    done = sorted(r["process"].split(":")[-1] for r in trace if r["status"] == "COMPLETED")
    # one shard per assembly: no PREDICT_MERGE, and both assemblies (33 kbp each) in one PREDICT_GROUP task, which read
    # each FASTA (the one with spaces in its name staged as is); both matrices planned and split into 3 chunks
    assert done == sorted(
        ["FASTA2H5"] * 2
        + ["PREDICT_PLAN"] * 2
        + ["MAKE_TEST_MODEL"]
        + ["PREDICT_GROUP"]
        + ["GENIE3_PLAN"] * 2
        + ["GENIE3"] * 6
        + ["GENIE3_MERGE"] * 2
    )
    group = next(Path(r["workdir"]) for r in trace if r["process"].endswith(":PREDICT_GROUP"))
    table = [ln.split("\t") for ln in (group / "predict_group.tsv").read_text().splitlines()]
    assert [(Path(r[0]).name, r[1], r[2], r[3]) for r in table[1:]] == [
        ("asmB.fa.gz", "fasta", "Testus_secundus", "remote_predictions.h5"),
        ("asm A.fa", "fasta", "Testus_primus", "spaced_predictions.h5"),
    ]
    metrics = {p.name: json.loads(p.read_text()) for p in group.glob("*.predict.metrics.json")}
    assert sorted(metrics) == ["remote.predict.metrics.json", "spaced.predict.metrics.json"]
    assert all(m["input"] == "fasta" and m["subsequences"] > 0 for m in metrics.values())
    # the FASTA from a folder with spaces and the one fetched over http: the same h5 and predictions as the test
    # profile's asmA / asmB, and an unsharded prediction is published under the same name as a merged one
    for new, ref in (("spaced", "asmA"), ("remote", "asmB")):
        for a, b in (
            (f"{new}/h5/{new}.h5", f"{ref}/h5/{ref}.h5"),
            (f"{new}/predictions/{new}_predictions.h5", f"{ref}/predictions/{ref}_predictions.h5"),
        ):
            with h5py.File(outdir / a) as x, h5py.File(reference / b) as y:
                for name in ("data/X", "data/start_ends", "data/seqids", "prediction/predictions"):
                    if name in y:
                        np.testing.assert_array_equal(x[name][()], y[name][()], err_msg=f"{a}:{name}")
    assert sorted(p.name for p in (outdir / "spaced" / "predictions").iterdir()) == ["spaced_predictions.h5"]
    # the gzipped TSV and the CSV in the other layout give the network of the plain TSV
    want = gzip.decompress((reference / "asmA" / "network" / "asmA.genie3_links.tsv.gz").read_bytes())
    for new in ("spaced", "remote"):
        assert gzip.decompress((outdir / new / "network" / f"{new}.genie3_links.tsv.gz").read_bytes()) == want, new


def test_small_assemblies_are_grouped_in_id_order_up_to_predict_group_mbp(tmp_path):
    """--predict_group_mbp (a -stub run: the wiring; the bytes of a group are tests/predict/test_predict_group.py's and
    the odd-inputs run's): five one-shard assemblies of 33,156 bp, given out of order, with room for two per group ->
    groups (a1, a2), (a3, a4) in id order and a5 alone in a plain PREDICT task; every assembly's predictions are
    published under its own name."""
    from helpers.pipeline_utils import run_nextflow

    ids = ["a3", "a5", "a1", "a4", "a2"]
    sheet = tmp_path / "sheet.csv"
    sheet.write_text("id,fasta,species\n" + "".join(f"{i},{TEST_DIR / 'asmA.fa'},Testus_primus\n" for i in ids))
    outdir = tmp_path / "results"
    run_nextflow(
        [
            "-profile",
            "test",
            "-stub",
            "--input",
            str(sheet),
            "--outdir",
            str(outdir),
            "--predict_shards",
            "1",
            "--predict_group_mbp",
            "0.07",
            "--skip_tracks",
            "--skip_genie3",
            "--skip_variant_effect",
            "--skip_benchmark",
            "--skip_multiqc",
        ],
        cwd=tmp_path,
    )
    trace = [r for r in read_trace(outdir) if r["status"] == "COMPLETED"]
    groups = sorted(r["tag"] for r in trace if r["process"].endswith(":PREDICT_GROUP"))
    assert groups == ["2 assemblies: a1 .. a2", "2 assemblies: a3 .. a4"]
    assert [r["tag"] for r in trace if r["process"].endswith(":PREDICT")] == ["a5 1/1"]
    for i in ids:
        assert [p.name for p in (outdir / i / "predictions").iterdir()] == [f"{i}_predictions.h5"], i


def test_predict_from_fasta_gives_the_same_predictions_and_tracks_without_a_genome_h5(test_run, tmp_path):
    """--predict_from fasta --save_h5 false: PREDICT reads the FASTA (2 shards per assembly planned from
    PREDICT_PLAN's shard list, merged), FASTA2H5 does not run and no h5 is published, and the predictions and tracks
    are those of the h5 route (the test profile's run)."""
    from helpers.pipeline_utils import run_nextflow

    reference = test_run.outdir
    outdir = tmp_path / "results"
    # only what the route changes runs: no networks, variants, peaks or reports (the test profile's run has them).
    # The test sheet, its paths made absolute, is named with --genomes (the odd-inputs run names its own with --input:
    # the same parameter); the run log names it, not the test profile's default
    rows = (TEST_DIR / "samplesheet.csv").read_text().splitlines()
    sheet = tmp_path / "sheet.csv"
    sheet.write_text(
        "\n".join(
            [rows[0]]
            + [
                ",".join(f if i in (0, 2, 5) or not f else str(TEST_DIR / f) for i, f in enumerate(r.split(",")))
                for r in rows[1:]
            ]
        )
        + "\n"
    )
    res = run_nextflow(
        [
            "-profile",
            "test",
            "--genomes",
            str(sheet),
            "--outdir",
            str(outdir),
            "--predict_from",
            "fasta",
            "--save_h5",
            "false",
            "--skip_genie3",
            "--skip_variant_effect",
            "--skip_peaks",
            "--skip_benchmark",
            "--skip_multiqc",
        ],
        cwd=tmp_path,
    )
    assert f"2 assemblies from {sheet} " in res.stdout, res.stdout[-3000:]
    done = sorted(r["process"].split(":")[-1] for r in read_trace(outdir) if r["status"] == "COMPLETED")
    assert done == sorted(
        ["PREDICT_PLAN"] * 2
        + ["MAKE_TEST_MODEL"]
        + ["PREDICT"] * 4
        + ["PREDICT_MERGE"] * 2
        + ["PREDICT_VIEW"] * 2
        + ["BIGWIG"] * 2
        + ["GENE_ACCESSIBILITY"]
        + ["REVIEW_PAGE"] * 2  # the promoters of asmA's genes, tracks alone for asmB
    )
    # asmA.fa's shards read only their own rows through the index PREDICT_PLAN made; asmB.fa.gz (plain gzip) has
    # none and its shards scan it
    shards = [json.loads(p.read_text()) for p in (tmp_path / "work").glob("*/*/*.shard*of2.predict.metrics.json")]
    assert (
        sorted((Path(m["fasta"]).name, m["index"]) for m in shards)
        == [("asmA.fa", "fai")] * 2 + [("asmB.fa.gz", "scan")] * 2
    )
    assert all(m["fasta_bytes_read"] < m["fasta_bytes"] for m in shards if m["index"] == "fai")
    for asm in ("asmA", "asmB"):
        assert not (outdir / asm / "h5").exists()
        got, want = (d / asm / "predictions" / f"{asm}_predictions.h5" for d in (outdir, reference))
        with h5py.File(got) as x, h5py.File(want) as y:
            for name in (
                "data/species",
                "data/seqids",
                "data/start_ends",
                "prediction/predictions",
                "prediction/datasets",
            ):
                np.testing.assert_array_equal(x[name][()], y[name][()], err_msg=f"{asm}:{name}")
        # every bigWig (the peaks and the browser files PEAKS updates are not made here: --skip_peaks)
        tracks = sorted(p.name for p in (reference / asm / "tracks").glob("*.bw"))
        assert tracks and tracks == sorted(p.name for p in (outdir / asm / "tracks").glob("*.bw"))
        for name in tracks:
            assert (outdir / asm / "tracks" / name).read_bytes() == (reference / asm / "tracks" / name).read_bytes()


@pytest.fixture(scope="module")
def prior_stub_run(tmp_path_factory, nextflow_bin) -> Path:
    """The outdir of one -stub run with --genie3_prior_alpha 0.5 and --skip_tracks: the prior's wiring, and what
    VARIANT_BROWSER does without tracks (one launch for both tests)."""
    from helpers.pipeline_utils import run_nextflow

    work = tmp_path_factory.mktemp("prior_stub")
    outdir = work / "results"
    run_nextflow(
        [
            "-profile",
            "test",
            "-stub",
            "--outdir",
            str(outdir),
            "--genie3_prior_alpha",
            "0.5",
            "--genie3_repeats",
            "3",
            "--skip_tracks",
            "--skip_benchmark",
            "--skip_multiqc",
        ],
        cwd=work,
    )
    return outdir


def test_prior_alpha_makes_genie3_wait_for_the_motif_prior(test_run, prior_stub_run):
    """--genie3_prior_alpha > 0: asmA's GENIE3 tasks start after MOTIF_PRIOR and have its table staged (a -stub run:
    the wiring, not GENIE3's --prior, which docs/genie3.md covers); with the default 0 (the test profile's run) no
    GENIE3 task has it, and the prior table of the real run is published."""
    reference = test_run.outdir
    assert (reference / "asmA" / "network" / "asmA.prior.tsv.gz").is_file()
    assert (reference / "asmA" / "genes" / "asmA.gene_accessibility.tsv").is_file()
    # the promoter BED is in asmA's IGV session, its path relative to the session (asmB has no annotation)
    session = reference / "asmA" / "tracks" / "igv_session.xml"
    beds = [p for p in re.findall(r'<Resource path="([^"]+)" type="bed"/>', session.read_text())]
    assert beds == ["../genes/asmA.promoters.bed"] and (session.parent / beds[0]).is_file()
    assert 'type="bed"' not in (reference / "asmB" / "tracks" / "igv_session.xml").read_text()
    # ... and its bigBed in asmA's UCSC hub (the single-file hub.txt, relative to it), holding the BED's windows
    trackdb = (reference / "asmA" / "tracks" / "hub.txt").read_text()
    urls = re.findall(r"^bigDataUrl (\S+\.bb)$", trackdb, flags=re.M)
    assert "../genes/asmA.promoters.bb" in urls and "type bigBed 6" in trackdb
    import pyBigWig

    bb = pyBigWig.open(str(session.parent / "../genes/asmA.promoters.bb"))
    got = sorted(
        (c, str(s), str(e), *r.split("\t")) for c, n in bb.chroms().items() for s, e, r in bb.entries(c, 0, n) or []
    )
    assert got == sorted(tuple(ln.split("\t")) for ln in (session.parent / beds[0]).read_text().splitlines())
    assert "promoters" not in (reference / "asmB" / "tracks" / "hub.txt").read_text()
    plain = [
        r for r in read_trace_file(test_run.trace) if r["process"].endswith(":GENIE3") and r["status"] == "COMPLETED"
    ]
    assert plain and not any((Path(r["workdir"]) / "asmA.prior.tsv.gz").exists() for r in plain)
    trace = [r for r in read_trace(prior_stub_run) if r["status"] == "COMPLETED"]
    prior = [r for r in trace if r["process"].endswith(":MOTIF_PRIOR")]
    genie3 = [r for r in trace if r["process"].endswith(":GENIE3")]
    assert len(prior) == 1 and len(genie3) == 3
    # trace times are "YYYY-MM-DD HH:MM:SS.mmm": the string order is the time order
    assert all(g["submit"] >= prior[0]["complete"] for g in genie3), (prior, genie3)
    assert all((Path(g["workdir"]) / "asmA.prior.tsv.gz").is_symlink() for g in genie3)


def test_without_tracks_there_is_no_variant_browser(prior_stub_run):
    """-stub run (the wiring): with --skip_tracks (the prior run's, which also skips them) there are no browser files
    and no VARIANT_BROWSER, the variants are published alone. (--skip_peaks, where VARIANT_BROWSER takes BIGWIG's
    session and publishes it, is TRACKS' nf-test case: subworkflows/local/tracks/tests/main.nf.test.)"""
    outdir = prior_stub_run
    trace = read_trace(outdir)
    done = sorted(r["process"].split(":")[-1] for r in trace if r["status"] == "COMPLETED")
    browser = [r for r in trace if r["process"].endswith(":VARIANT_BROWSER")]
    assert (outdir / "asmA" / "variants" / "asmA.effects.tsv.gz").is_file()
    assert "VARIANT_EFFECT" in done or "VARIANT_MERGE" in done
    assert "BIGWIG" not in done and not browser and not (outdir / "asmA" / "tracks").exists()
