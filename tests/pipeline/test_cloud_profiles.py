"""The cloud profiles (awsbatch, google_batch, k8s), rendered by the real `nextflow config` (issue 30 §3).

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


@pytest.fixture(scope="module", params=sorted(EXECUTOR))
def rendered(request, nextflow_bin, tmp_path_factory) -> tuple[str, dict[str, str]]:
    """(profile, {flat config key: value}) from `nextflow config -profile <profile> -flat`."""
    r = subprocess.run([nextflow_bin, "config", str(ROOT), "-profile", request.param, "-flat"],
                       cwd=tmp_path_factory.mktemp("cloud"), capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, NXF_OFFLINE="true", NXF_ANSI_LOG="false"))
    assert r.returncode == 0, r.stdout + r.stderr
    flat = dict(line.split(" = ", 1) for line in r.stdout.splitlines() if " = " in line)
    return request.param, flat


def test_prediction_and_training_are_gpu_modules():
    assert {"PREDICT", "TRAIN"} <= _gpu_modules()


def test_executor_and_images(rendered):
    profile, flat = rendered
    assert flat["process.executor"] == f"'{EXECUTOR[profile]}'"
    assert flat["process.container"] == f"'{CPU_IMAGE}'"
    assert flat["process.'withLabel:process_gpu'.container"] == f"'{GPU_IMAGE}'"
    # the CUDA image nowhere else, and no container engine flag (the cloud runs the container itself)
    assert [k for k, v in flat.items() if GPU_IMAGE in v and not k.startswith("params.")] == \
        ["process.'withLabel:process_gpu'.container"]
    assert not [k for k in flat if k.endswith("containerOptions")]
    assert not [k for k, v in flat.items() if re.fullmatch(r"(docker|podman|singularity|apptainer)\.enabled", k)
                and v == "true"]


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
