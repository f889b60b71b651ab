"""The cloud profiles (awsbatch, google_batch, k8s), rendered as `nextflow config -flat` renders them, by Nextflow's
own code in one JVM (tests/pipeline/nextflow/render_configs.nf; one rendering compared with the command's output)
(issue 30 §3).

None of them can run from our test machines (no AWS account, Google project or Kubernetes cluster): what is checked
is the routing they promise -- the executor, the CPU image on every task and the CUDA image only on the GPU tasks,
and a GPU request on every GPU task and on no other. The GPU tasks are the modules labelled ``process_gpu``
(read from modules/local/*/main.nf), plus TRAIN's own ``accelerator`` (conf/modules.config).
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from helpers.environment import ROOT
from helpers.pipeline_utils import render_configs

pytestmark = pytest.mark.pipeline

CPU_IMAGE, GPU_IMAGE = "chromaflow:0.1.0", "chromaflow:0.1.0-cuda"
EXECUTOR = {"awsbatch": "awsbatch", "google_batch": "google-batch", "k8s": "k8s"}


def _gpu_modules() -> set[str]:
    found = set()
    for main in ROOT.glob("modules/local/*/main.nf"):
        text = main.read_text()
        if re.search(r"^\s*label\s+'process_gpu'", text, re.M):
            found.add(re.search(r"^process\s+(\w+)", text, re.M).group(1))
    return found


@pytest.fixture(scope="module")
def all_rendered(nextflow_bin, tmp_path_factory) -> dict[str, str]:
    """{profile: `nextflow config -profile <profile> -flat`}, the three rendered in one JVM (helpers.pipeline_utils)."""
    return render_configs(sorted(EXECUTOR), tmp_path_factory.mktemp("cloud"))


@pytest.fixture(scope="module", params=sorted(EXECUTOR))
def rendered(request, all_rendered) -> tuple[str, dict[str, str]]:
    """(profile, {flat config key: value})."""
    flat = dict(line.split(" = ", 1) for line in all_rendered[request.param].splitlines() if " = " in line)
    return request.param, flat


def test_the_one_jvm_rendering_is_what_nextflow_config_prints(all_rendered, nextflow_bin, tmp_path):
    """The batch driver renders what the real command prints, line for line, but for the launch time in the
    report file names (params.trace_report_suffix: the time each JVM started)."""
    r = subprocess.run(
        [nextflow_bin, "config", str(ROOT), "-profile", "google_batch", "-flat"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, NXF_OFFLINE="true", NXF_ANSI_LOG="false"),
    )
    assert r.returncode == 0, r.stdout + r.stderr

    def masked(text: str) -> list[str]:
        return re.sub(r"\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d", "<launch time>", text).splitlines()

    assert masked(all_rendered["google_batch"]) == masked(r.stdout)
    assert len(masked(r.stdout)) > 100


def test_prediction_and_training_are_gpu_modules():
    assert {"PREDICT", "TRAIN"} <= _gpu_modules()


def test_executor_and_images(rendered):
    profile, flat = rendered
    assert flat["process.executor"] == f"'{EXECUTOR[profile]}'"
    assert flat["process.container"] == f"'{CPU_IMAGE}'"
    assert flat["process.'withLabel:process_gpu'.container"] == f"'{GPU_IMAGE}'"
    # the CUDA image nowhere else, and no container engine flag (the cloud runs the container itself)
    assert [k for k, v in flat.items() if GPU_IMAGE in v and not k.startswith("params.")] == [
        "process.'withLabel:process_gpu'.container"
    ]
    assert not [k for k in flat if k.endswith("containerOptions")]
    assert not [
        k for k, v in flat.items() if re.fullmatch(r"(docker|podman|singularity|apptainer)\.enabled", k) and v == "true"
    ]


def test_every_gpu_task_and_no_other_asks_for_a_gpu(rendered):
    profile, flat = rendered
    gpu = _gpu_modules()
    requests = {k: v for k, v in flat.items() if k.endswith(".accelerator")}
    assert "process.'withLabel:process_gpu'.accelerator" in requests
    for key, value in requests.items():
        sel = re.fullmatch(r"process\.'with(Label|Name):(\w+)'\.accelerator", key)
        assert sel, f"{profile}: a GPU request outside a process selector: {key} = {value}"
        kind, name = sel.groups()
        assert (name == "process_gpu") if kind == "Label" else (name in gpu), (profile, key)
        if profile == "google_batch":  # Google Batch needs the GPU type with every request
            assert "type" in value and ("nvidia-tesla-t4" in value or "google_gpu_type" in value), (key, value)


def test_queues_and_cloud_settings(rendered):
    profile, flat = rendered
    if profile == "awsbatch":
        # CPU tasks and GPU tasks have their own job queue (a GPU compute environment), both from params
        assert {"process.queue", "process.'withLabel:process_gpu'.queue"} <= set(flat)
        assert flat["aws.region"] == "'us-east-1'" and "aws.batch.cliPath" in flat
    elif profile == "google_batch":
        assert flat["google.location"] == "'us-central1'" and "google.project" in flat
        assert flat["google.batch.spot"] == "false"
    else:
        assert flat["k8s.namespace"] == "'default'" and flat["k8s.storageMountPath"] == "'/workspace'"
        assert "k8s.storageClaimName" in flat
