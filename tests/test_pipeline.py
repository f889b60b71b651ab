"""The real pipeline on its embedded test data (``-profile test``), run once per session by real Nextflow.

Checks what a user gets: per-assembly outputs, the reports in pipeline_info/, and that every stage's output
inside the pipeline equals the same stage run directly through the CLI (so sharding, merging and chunking
inside Nextflow change nothing). The run (fixture ``test_run`` in conftest.py) also injects an OOM-like exit 137 into the first BIGWIG
attempt; a test checks that the task was retried with more memory and the run still succeeded.
"""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pyBigWig
import pytest

from pipeline_utils import ROOT, read_trace

pytestmark = pytest.mark.pipeline

TEST_DIR = ROOT / "assets" / "test"


def cli(*args: str, cwd: Path | None = None) -> None:
    subprocess.run([sys.executable, "-m", "chromaflow", *args], check=True, cwd=cwd, capture_output=True)


def test_run_succeeds_and_reports_exist(test_run):
    work, outdir, res = test_run
    assert "chromaflow: done" in res.stdout
    info = outdir / "pipeline_info"
    for pattern in ("execution_timeline_*.html", "execution_report_*.html", "execution_trace_*.txt",
                    "pipeline_dag_*.html"):
        files = list(info.glob(pattern))
        assert len(files) == 1 and files[0].stat().st_size > 0, pattern
    versions = (info / "software_versions.yml").read_text()
    for process in ("FASTA2H5", "PREDICT", "BIGWIG", "GENIE3"):
        assert f"CHROMAFLOW:{process}\":" in versions
    trace = read_trace(outdir)
    assert {"peak_rss", "realtime", "%cpu", "attempt"} <= set(trace[0])


def test_injected_oom_exit_is_retried_with_more_memory(test_run):
    _, outdir, _ = test_run
    bigwig = [r for r in read_trace(outdir) if r["process"].endswith("BIGWIG")]
    failed = [r for r in bigwig if r["status"] == "FAILED"]
    done = [r for r in bigwig if r["status"] == "COMPLETED"]
    assert failed and all(r["exit"] == "137" and r["attempt"] == "1" for r in failed)
    assert len(done) == 2 and all(r["attempt"] == "2" for r in done)
    mem = lambda r: float(r["memory"].split()[0])  # noqa: E731  e.g. "1 GB" -> "2 GB"
    assert mem(done[0]) == 2 * mem(failed[0])


def test_fasta2h5_in_pipeline_equals_direct_cli(test_run, tmp_path):
    _, outdir, _ = test_run
    for asm, fasta, species in (("asmA", "asmA.fa", "Testus_primus"), ("asmB", "asmB.fa.gz", "Testus_secundus")):
        direct = tmp_path / f"{asm}.h5"
        cli("fasta2h5", "--fasta", str(TEST_DIR / fasta), "--species", species, "--out", str(direct),
            "--subsequence-length", "2000")
        with h5py.File(outdir / asm / "h5" / f"{asm}.h5") as a, h5py.File(direct) as b:
            assert sorted(a["data"]) == ["X", "seqids", "species", "start_ends"]
            for name in a["data"]:
                np.testing.assert_array_equal(a["data"][name][()], b["data"][name][()])
            assert a["data/X"].shape[1] == 2000


def test_sharded_predictions_equal_one_unsharded_run(test_run, tmp_path):
    _, outdir, _ = test_run
    model = next((outdir / "test_model").glob("*.ckpt"))
    for asm in ("asmA", "asmB"):
        merged = outdir / asm / "predictions" / f"{asm}_predictions.h5"
        direct = tmp_path / f"{asm}_direct.h5"
        cli("predict", "--h5", str(outdir / asm / "h5" / f"{asm}.h5"), "--model", str(model),
            "--out", str(direct), "--device", "cpu")
        with h5py.File(merged) as a, h5py.File(direct) as b:
            pa, pb = a["prediction/predictions"][()], b["prediction/predictions"][()]
            assert pa.shape == pb.shape and pa.shape[0] > 2   # several rows, split over 2 shards
            np.testing.assert_array_equal(pa, pb)
            np.testing.assert_array_equal(a["data/start_ends"][()], b["data/start_ends"][()])
            assert list(a["prediction/datasets"][()]) == [b"atacseq", b"h3k4me3"]


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
    _, outdir, _ = test_run
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
                    assert all(a[1] == b[0] for a, b in zip(iv, iv[1:]))   # tiles the chromosome
            finally:
                bw.close()
        chrom_sizes = dict(line.split("\t") for line in (tracks / "chrom.sizes").read_text().splitlines())
        assert {k: int(v) for k, v in chrom_sizes.items()} == sizes
        assert (tracks / "igv_session.xml").exists() and (tracks / "hub.txt").exists()


def test_genie3_chunks_merge_to_the_single_task_result(test_run, tmp_path):
    _, outdir, _ = test_run
    net = outdir / "asmA" / "network"
    links = net / "asmA.genie3_links.tsv.gz"
    direct = tmp_path / "direct.npz"
    cli("genie3", "--expression", str(TEST_DIR / "genie3" / "expression.tsv"), "--layout", "samples-x-genes",
        "--regulators", str(TEST_DIR / "genie3" / "regulators.txt"), "--n-trees", "100", "--seed", "0",
        "--targets-chunk", "1/1", "--out", str(direct))
    direct_links = tmp_path / "direct.tsv.gz"
    cli("genie3-merge", "--out", str(direct_links), str(direct))
    assert gzip.decompress(links.read_bytes()) == gzip.decompress(direct_links.read_bytes())
    lines = gzip.decompress(links.read_bytes()).decode().splitlines()
    assert len(lines) > 10
    summary = json.loads((net / "asmA.genie3_summary.json").read_text())
    assert summary
    assert (net / "asmA.genie3_weights.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # asmB has no expression matrix: no network
    assert not (outdir / "asmB" / "network").exists()
    trace = read_trace(outdir)
    assert len([r for r in trace if r["process"].endswith(":GENIE3") and r["status"] == "COMPLETED"]) == 3


def test_benchmark_stage_reports_every_stage(test_run):
    _, outdir, _ = test_run
    bench = outdir / "benchmark"
    tasks = json.loads((bench / "benchmark.json").read_text())["tasks"]
    stages = {t["stage"] for t in tasks}
    assert {"fasta2h5", "predict", "predict-merge", "bigwig", "genie3", "genie3-merge"} <= stages
    predict = [t for t in tasks if t["stage"] == "predict"]
    assert len(predict) == 4 and all(t["assembly"] in ("asmA", "asmB") and t["device"] == "cpu" for t in predict)
    html = (bench / "report.html").read_text()
    assert "data:image/png;base64," in html and "<h2 id='extrapolation'>Extrapolation</h2>" in html
    assert all(t["trace_status"] == "COMPLETED" for t in predict)   # joined with Nextflow's trace
    assert (bench / "benchmark.tsv").read_text().count("\n") >= len(tasks)
    assert list(bench.glob("*_mqc.tsv"))
