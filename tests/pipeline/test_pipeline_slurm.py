"""The real pipeline under ``-profile test,slurm_gpu`` on a real single-node SLURM cluster
(tests/helpers/slurm_cluster.py).

Nextflow's SLURM executor submits every task with the real ``sbatch``; the per-job records written by
slurmctld show where each job ran and what it asked for. Checks: the prediction (label process_gpu: here one
PREDICT_GROUP job for both small assemblies, the default --predict_group_mbp) and VARIANT_EFFECT jobs ran in
partition ``gpu`` with GRES ``gpu:1``; every other job ran in ``cpu`` without a GRES; every job completed; the
trace's ``native_id`` is the SLURM job id of that task; the outputs exist.

The cluster's "GPU" is an empty file that SLURM counts (see docs/slurm-testing.md): PREDICT runs with
``--predict_device auto`` and so on the CPU -- this tests the routing, not CUDA. GENIE3 and the benchmark are
skipped, and prediction is not sharded, to keep the run short (~2 min: the single GPU GRES serialises the
PREDICT jobs); sharding and merging under the local executor are covered by tests/pipeline/test_pipeline.py.
"""

from __future__ import annotations

import re

import h5py
import pytest

from helpers.pipeline_utils import read_trace, run_nextflow
from helpers.slurm_cluster import slurm_cluster  # noqa: F401  (session fixture)

pytestmark = [pytest.mark.slurm, pytest.mark.pipeline]

# test-only tuning: poll the scheduler every second instead of every 5 s (conf/slurm.config), and the node's size
FAST_POLL = """
process.resourceLimits = [cpus: 2, memory: 8.GB, time: 1.h]
executor {
    pollInterval      = '1 sec'
    queueStatInterval = '2 sec'
    submitRateLimit   = '50/1s'
}
"""


@pytest.fixture(scope="module")
def slurm_run(slurm_cluster, nextflow_bin, tmp_path_factory):  # noqa: F811
    work = tmp_path_factory.mktemp("pipeline_slurm")
    outdir = work / "results"
    (work / "fast_poll.config").write_text(FAST_POLL)
    before = {j["JobId"] for j in slurm_cluster.jobs()}
    res = run_nextflow(
        [
            "-profile",
            "test,slurm_gpu",
            "-c",
            str(work / "fast_poll.config"),
            "--outdir",
            str(outdir),
            "--predict_shards",
            "1",
            "--skip_genie3",
            "--skip_benchmark",
            "--skip_multiqc",
        ],
        cwd=work,
        env=slurm_cluster.env,
        timeout=600,
    )
    jobs = [j for j in slurm_cluster.jobs() if j["JobId"] not in before and j["JobName"].startswith("nf-")]
    return work, outdir, res, jobs


def test_run_succeeds_and_outputs_exist(slurm_run):
    _, outdir, res, _ = slurm_run
    assert "chromaflow: done" in res.stdout
    for asm in ("asmA", "asmB"):
        with h5py.File(outdir / asm / "h5" / f"{asm}.h5") as h5:
            assert h5["data/X"].shape[1] == 2000
        with h5py.File(outdir / asm / "predictions" / f"{asm}_predictions.h5") as h5:
            assert list(h5["prediction/datasets"][()]) == [b"atacseq", b"h3k4me3"]
            assert h5["prediction/predictions"].shape[0] > 2
        names = {p.name for p in (outdir / asm / "tracks").glob("*.bw")}
        assert names == {f"{asm}_{ds}_{s}_strand.bw" for ds in ("atacseq", "h3k4me3") for s in ("avg", "+", "-")}
    assert not (outdir / "asmA" / "network").exists()  # --skip_genie3
    versions = (outdir / "pipeline_info" / "software_versions.yml").read_text()
    assert "CHROMAFLOW:PREDICT_ASSEMBLIES:PREDICT_GROUP\":" in versions


GPU_PROCESSES = ("PREDICT", "PREDICT_GROUP", "VARIANT_EFFECT")  # the process_gpu tasks of this run
GPU_JOB = rf"^nf-CHROMAFLOW_(PREDICT_ASSEMBLIES|VARIANT_EFFECTS)_({'|'.join(GPU_PROCESSES)})_\("


def _job_name(task: str) -> str:
    """Nextflow names the job nf-<task name> with ':', ' ' and '/' made '_'."""
    return "nf-" + re.sub(r"[:\s/]", "_", task)


def test_predict_jobs_ran_in_gpu_partition_with_one_gpu(slurm_run):
    _, _, _, jobs = slurm_run
    gpu = [j for j in jobs if re.search(GPU_JOB, j["JobName"])]
    predict = [j for j in gpu if re.search(r"^nf-CHROMAFLOW_PREDICT_ASSEMBLIES_PREDICT(_GROUP)?_\(", j["JobName"])]
    # one shard per assembly (--predict_shards 1), both far under --predict_group_mbp: one PREDICT_GROUP job
    assert [j["JobName"] for j in predict] == [
        _job_name("CHROMAFLOW:PREDICT_ASSEMBLIES:PREDICT_GROUP (2 assemblies: asmA .. asmB)")
    ]
    # and asmA's variants (the test sheet's vcf) scored with the same model in 3 shards (--variant_shard_size 3 of
    # the test profile), also GPU jobs
    assert sorted(j["JobName"] for j in gpu if j not in predict) == [
        f"nf-CHROMAFLOW_VARIANT_EFFECTS_VARIANT_EFFECT_(asmA_{i}_3)" for i in (1, 2, 3)
    ]
    for j in gpu:
        assert j["Partition"] == "gpu", j
        assert j["Gres"] == "gpu:1", j
        assert j["State"] == "COMPLETED" and j["ExitCode"] == "0:0", j
    # the node has one GPU GRES: the scheduler ran the GPU jobs one after the other
    spans = sorted((j["StartTime"], j["EndTime"]) for j in gpu)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans


def test_cpu_jobs_ran_in_cpu_partition_without_gres(slurm_run):
    _, _, _, jobs = slurm_run
    others = [j for j in jobs if not re.search(GPU_JOB, j["JobName"])]
    kinds = {re.sub(r"^nf-CHROMAFLOW_([A-Z0-9_]+?)(_\(.*\))?$", r"\1", j["JobName"]) for j in others}
    assert kinds == {
        "FASTA2H5",
        "PREDICT_ASSEMBLIES_PREDICT_PLAN",
        "PREDICT_ASSEMBLIES_MAKE_TEST_MODEL",
        "TRACKS_BIGWIG",
        "TRACKS_PEAKS",
        "GENES_AND_MOTIFS_GENE_ACCESSIBILITY",
        "VARIANT_EFFECTS_VARIANT_PLAN",
        "VARIANT_EFFECTS_VARIANT_MERGE",
        "TRACKS_VARIANT_BROWSER",
        "REVIEW_REVIEW_PAGE",
    }, kinds
    for j in others:
        assert j["Partition"] == "cpu", j
        assert j["Gres"] == "", j
        assert "gpu" not in j["Tres"], j
        assert j["State"] == "COMPLETED" and j["ExitCode"] == "0:0", j


def test_trace_native_ids_are_the_slurm_job_ids(slurm_run):
    _, outdir, _, jobs = slurm_run
    by_id = {j["JobId"]: j for j in jobs}
    trace = read_trace(outdir)
    # 2 FASTA2H5, 2 PREDICT_PLAN, 1 test model, 1 PREDICT_GROUP, 2 BIGWIG, 2 PEAKS, 1 GENE_ACCESSIBILITY, and for asmA's
    # vcf 1 VARIANT_PLAN, 3 VARIANT_EFFECT shards, 1 VARIANT_MERGE, 1 VARIANT_BROWSER (asmA's vcf and annotation), 2
    # REVIEW_PAGE
    assert len(trace) == len(jobs) == 19
    for row in trace:
        assert row["status"] == "COMPLETED", row
        assert row["native_id"].isdigit(), row
        job = by_id[row["native_id"]]
        assert job["JobName"] == _job_name(row["name"]), (row["name"], job)
        gpu = row["process"].split(":")[-1] in GPU_PROCESSES  # the process_gpu tasks
        assert row["queue"] == ("gpu" if gpu else "cpu") == job["Partition"]
        # the profile adds to conf/base.config's process_gpu settings instead of replacing them
        assert row["container"] == ("chromaflow:0.1.0-cuda" if gpu else "chromaflow:0.1.0"), row
