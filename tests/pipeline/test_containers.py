"""Container images and the container profiles.

1. Recipes (no engine needed): ``containers/Dockerfile`` / ``Dockerfile.cuda`` pass the real hadolint and have
   the essentials (base image and torch index as build arguments with pinned public defaults, procps, the pinned
   requirements, the package from this repository, no compiler in the final stage, no ENTRYPOINT, ...).
2. Real images and real engines (podman 4.3 here, as root): ``scripts/build-images cpu`` builds the CPU image
   (skipped when its content hash is unchanged), then the real pipeline runs ``-profile test,podman`` on the
   test sheet's asmA (every process of the test profile: asmA has every optional input, asmB only adds tasks of the
   same processes; the set of process names must equal the plain run's, and asmA's and the run-level tasks are the
   plain run's by name) and ``-profile test,docker,gpu`` on one assembly (prediction only, the CPU image
   standing in for the CUDA one) -- the latter with the Docker CLI talking to podman's Docker-compatible socket
   (``podman system service``, started and stopped here). Docker's run is the short one because both engines
   get the same image and container directives from the same config; what differs is the engine's command line,
   which the short run shows. Proof that every task ran in the image: each task's
   ``.command.run`` launches it with ``podman run``/``docker run ... chromaflow:0.1.0``, the trace's
   ``container`` column names the image for every task, podman's own event log shows one container started
   from that image per task, and the pipeline's ``bin/chromaflow`` run in the image with the tasks' mounts (which
   include this clone) imports the image's installed package, not the clone's ``src/``. The outputs are then
   compared with the plain ``-profile test`` run (fixture ``test_run``; podman's: every file but asmB's folder,
   docker's: the files it makes): byte-identical, except the genome h5 (equal datasets and attributes, only
   ``timestamp`` differs), the test checkpoint (equal zip members; their names start with a random temporary folder
   name) and the run reports (pipeline_info/, benchmark/, multiqc/: timings).
   GPU flags, for real where possible: ``-profile test,podman,gpu`` makes podman resolve the CDI device
   ``nvidia.com/gpu=all`` for PREDICT only (it fails there: no GPU/CDI spec on this machine, the other tasks
   succeed); ``-profile test,docker,gpu`` puts ``--gpus all`` on PREDICT only -- podman 4.3's Docker API
   accepts and ignores it, so that run shows the command line, not GPU passthrough.
   These tests skip (with the reason in the pytest summary) only where podman is not installed or cannot run
   a container; under CI=true they fail instead.
3. Singularity/Apptainer (not packaged for Debian 12, not available here): ``-stub -profile test,<engine>,gpu`` with a
   **fake engine executable** first on PATH that records its arguments and runs the task's command on the host.
   It is a shim, not a container: it shows which image and options Nextflow passes per process (CUDA image and
   ``--nv`` on PREDICT only), NOT that the images work under Singularity/Apptainer, that ``docker://`` pulls
   succeed, or that ``--nv`` exposes a GPU.
4. ``nextflow config``: no profile sets a GPU flag globally; the CUDA image and a GPU request (``accelerator``) only
   under ``gpu``/``slurm_gpu``, none under a CPU profile (the 15 profile lists rendered in one JVM by Nextflow's own
   config code: helpers.pipeline_utils.render_configs).
"""

from __future__ import annotations

import filecmp
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest

from helpers.environment import unavailable
from helpers.pipeline_utils import MAIN_NF, ROOT, read_trace, read_trace_file, render_configs

CONTAINERS = ROOT / "containers"
SHIM_ENGINES = ("singularity", "apptainer")


def _unavailable(msg: str, engine: bool = False):
    """Skip with the reason; fail under CI=true -- for the container engine unless CHROMAFLOW_REQUIRE_PODMAN=0
    says this CI cannot run one by design (GitHub's pytest job runs inside a Docker container)."""
    unavailable(msg, waiver="CHROMAFLOW_REQUIRE_PODMAN" if engine else None)


def _conf_param(name: str) -> str:
    m = re.search(rf"^\s*{name}\s*=\s*'([^']+)'", (ROOT / "nextflow.config").read_text(), re.M)
    assert m, name
    return m.group(1)


CPU_IMAGE = _conf_param("container")
GPU_IMAGE = _conf_param("container_gpu")


def _requirements(path: Path = ROOT / "requirements.txt") -> dict[str, str]:
    """name (lower case) -> pinned version of a requirements file."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[name.lower()] = version
    return out


def _instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(
        r"\\\n", " ", "\n".join(ln for ln in path.read_text().splitlines() if not ln.lstrip().startswith("#"))
    )
    return [(m.group(1).upper(), m.group(2)) for m in re.finditer(r"^\s*(\w+)\s+(.*)$", text, re.M)]


def _stages(path: Path) -> list[list[tuple[str, str]]]:
    """Instructions per build stage (the ARGs before the first FROM are stage 0's prologue)."""
    stages: list[list[tuple[str, str]]] = []
    for kind, args in _instructions(path):
        if kind == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((kind, args))
    return stages


# ----------------------------------------------------------------------------------------------- recipes
@pytest.fixture(scope="module")
def hadolint() -> str:
    cand = shutil.which("hadolint") or str(
        Path(os.environ.get("CHROMAFLOW_CACHE", Path.home() / ".cache" / "chromaflow"))
        / "hadolint"
        / "bin"
        / "hadolint"
    )
    if not os.access(cand, os.X_OK):
        _unavailable("hadolint not installed (run scripts/install-hadolint; Debian bookworm has no hadolint package)")
    return cand


@pytest.mark.parametrize("name", ["Dockerfile", "Dockerfile.cuda"])
def test_hadolint_passes(hadolint, name):
    r = subprocess.run(
        [hadolint, "--no-color", "--failure-threshold", "info", str(CONTAINERS / name)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("name", ["Dockerfile", "Dockerfile.cuda"])
def test_dockerfile_essentials(name):
    path = CONTAINERS / name
    ins = _instructions(path)
    # the base image is a build argument with a pinned public default, used by the first stage
    base = re.search(r"^ARG BASE=(\S+)$", path.read_text(), re.M)
    assert base, "ARG BASE=<public default> before the first FROM"
    repo, _, tag = base.group(1).rpartition(":")
    assert repo and tag and tag != "latest" and "$" not in base.group(1), f"default base not pinned: {base.group(1)}"
    assert ins.index(("ARG", f"BASE={base.group(1)}")) < [k for k, _ in ins].index("FROM")
    stages = _stages(path)
    assert stages[0][0][1].split()[0] == "${BASE}", stages[0][0]
    # the torch index is a build argument, used by the pip install of torch
    assert re.search(r"^ARG TORCH_INDEX_URL=https://\S+$", path.read_text(), re.M), "ARG TORCH_INDEX_URL=<default>"
    assert re.search(r"^ARG TORCH_VERSION=(\S+)$", path.read_text(), re.M).group(1) == _requirements()["torch"]
    kinds = [k for k, _ in ins]
    assert "ENTRYPOINT" not in kinds, "Nextflow runs tasks with bash: no ENTRYPOINT"
    runs = [a for k, a in ins if k == "RUN"]
    pips = [seg for r in runs for seg in r.split("&&") if re.search(r"\bpip install\b", seg)]
    assert any('--index-url "${TORCH_INDEX_URL}"' in p and '"torch==${TORCH_VERSION}"' in p for p in pips), pips
    assert pips and all("--no-cache-dir" in p for p in pips), pips
    for r in runs:
        if "apt-get install" in r:
            assert "--no-install-recommends" in r and "rm -rf /var/lib/apt/lists/*" in r, r
            assert "apt-get update" in r, "update and install in one layer"
    copies = [a for k, a in ins if k == "COPY"]
    assert "requirements.txt scripts/build-moods /opt/chromaflow/" in copies
    # the pinned requirements are used: MOODS-python's pin built portably by scripts/build-moods (no -march=native),
    # every other pin installed from requirements.txt less that line, with the wheel just built
    steps = [seg.strip() for r in runs for seg in r.split("&&")]
    assert "/opt/chromaflow/build-moods python3 /opt/chromaflow/requirements.txt /tmp/moods" in steps, steps
    assert "grep -vi '^MOODS-python==' /opt/chromaflow/requirements.txt > /tmp/requirements.txt" in steps, steps
    assert any("-r /tmp/requirements.txt /tmp/moods/*.whl" in p for p in pips), pips
    # test- and benchmark-only pins stay out of the image: they are in requirements-test.txt, never copied in, and
    # none of them is in requirements.txt (the runtime pins)
    assert not any("requirements-test" in a for a in copies + runs)
    test_pins = _requirements(ROOT / "requirements-test.txt")
    assert {"pytest", "macs3", "gffutils", "grnlab"} <= set(test_pins)
    assert not set(test_pins) & set(_requirements()), "a test pin is in the runtime requirements"
    # the final stage: built FROM the runtime stage, chromaflow installed from this repository, the compiled
    # C kernels copied from the compiler stage, procps (ps: Nextflow's task metrics) and no compiler
    final = stages[-1]
    final_runs = [a for k, a in final if k == "RUN"]
    final_copies = [a for k, a in final if k == "COPY"]
    assert final[0][1].split()[0] == "runtime"
    assert "src /opt/chromaflow/src" in final_copies
    assert any(re.search(r"pip install --no-cache-dir --no-deps /opt/chromaflow(\s|$)", r) for r in final_runs)
    assert "--from=kernel /opt/chromaflow-cache /opt/chromaflow-cache" in final_copies
    runtime_runs = " ".join(a for k, a in stages[0] if k == "RUN")
    assert "procps" in runtime_runs and "gcc" not in runtime_runs + " ".join(final_runs)
    assert "gcc" in " ".join(a for k, a in stages[1] if k == "RUN")
    # every C kernel is compiled in the compiler stage and proven to load in the final one (without it, fasta2h5's
    # default engine would fall back to other compressed bytes inside the image)
    assert "python3 -m chromaflow.native.prebuild" in " ".join(a for k, a in stages[1] if k == "RUN")
    assert "python3 -m chromaflow.native.prebuild" in " ".join(final_runs)
    # installing the requirements comes before copying the sources (the dependency layer survives code edits)
    assert copies.index("requirements.txt scripts/build-moods /opt/chromaflow/") < copies.index(
        "src /opt/chromaflow/src"
    )
    assert final[-1][0] in ("USER", "WORKDIR") and any(k == "USER" for k, _ in final)


def test_public_defaults_for_users():
    """Public defaults stay: the CPU image from python:*-slim and the PyTorch CPU index, the GPU image from
    nvidia/cuda:*-runtime-* and PyPI (whose torch is the CUDA build)."""
    cpu, cuda = (CONTAINERS / "Dockerfile").read_text(), (CONTAINERS / "Dockerfile.cuda").read_text()
    assert re.search(r"^ARG BASE=python:3\.\d+[\w.]*-slim", cpu, re.M)
    assert re.search(r"^ARG TORCH_INDEX_URL=https://download\.pytorch\.org/whl/cpu$", cpu, re.M)
    assert re.search(r"^ARG BASE=nvidia/cuda:[\d.]+-runtime-ubuntu", cuda, re.M)
    assert re.search(r"^ARG TORCH_INDEX_URL=https://pypi\.org/simple$", cuda, re.M)


def test_dockerignore_keeps_the_package_and_drops_the_rest():
    lines = {
        ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines() if ln.strip() and not ln.startswith("#")
    }
    assert {".git", "work", "results", ".nextflow", "tests", "**/__pycache__"} <= lines
    for needed in ("src", "pyproject.toml", "requirements.txt", "README.md"):
        assert needed not in lines and f"/{needed}" not in lines, needed


# ------------------------------------------------------------------------------- real images, real engines
@pytest.fixture(scope="module")
def podman(tmp_path_factory) -> str:
    exe = shutil.which("podman")
    if exe is None:
        _unavailable(
            "podman not installed (as root, scripts/install-system-deps installs podman, runc, "
            "mmdebstrap, uidmap); real container tests not run",
            engine=True,
        )
    r = subprocess.run([exe, "info", "--format", "{{.Host.OCIRuntime.Name}}"], capture_output=True, text=True)
    if r.returncode != 0:
        _unavailable(f"podman cannot run here (`podman info` failed): {r.stderr.strip()[-500:]}", engine=True)
    # can it start a container at all (namespaces, mounts, runtime, network)? A root file system of /bin/true and
    # its libraries needs no image and no registry
    rootfs = tmp_path_factory.mktemp("probe-rootfs")
    true = Path(shutil.which("true")).resolve()
    libs = re.findall(r"(/\S+\.so[.\d]*)", subprocess.run(["ldd", str(true)], capture_output=True, text=True).stdout)
    for f in [true, *map(Path, libs)]:
        (rootfs / f.relative_to("/")).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, rootfs / f.relative_to("/"))
    r = subprocess.run(
        [exe, "run", "--rm", "--rootfs", str(rootfs), f"/{true.relative_to('/')}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if r.returncode != 0:
        hint = (
            " (/etc/containers/containers.conf needs default_ulimits = []; scripts/install-system-deps writes it)"
            if "rlimit" in r.stderr
            else ""
        )
        _unavailable(f"podman cannot start a container here{hint}: {r.stderr.strip()[-500:]}", engine=True)
    return exe


@pytest.fixture(scope="module")
def cpu_image(podman) -> str:
    """The CPU image, built by scripts/build-images (skipped when its inputs' hash is unchanged)."""
    r = subprocess.run([str(ROOT / "scripts" / "build-images"), "cpu"], capture_output=True, text=True, timeout=3600)
    sys.stderr.write(r.stderr[-600:])
    assert r.returncode == 0, r.stdout + r.stderr[-6000:]
    assert re.search(r"cpu: (built|.* up to date)", r.stderr), r.stderr[-2000:]
    probe = subprocess.run(
        [
            podman,
            "run",
            "--rm",
            CPU_IMAGE,
            "sh",
            "-c",
            "command -v python3; command -v chromaflow; chromaflow --version; id -u",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == [
        "/opt/venv/bin/python3",
        "/opt/venv/bin/chromaflow",
        "chromaflow",
        "0.1.0",
        "1000",
    ], probe.stdout
    return CPU_IMAGE


@pytest.fixture(scope="module")
def docker_host(podman, tmp_path_factory):
    """The Docker CLI pointed at podman's Docker-compatible API, served for this module only."""
    if shutil.which("docker") is None:
        _unavailable(
            "no Docker CLI on PATH (scripts/install-system-deps unpacks one from Debian's docker.io as "
            "root); the docker profile was not run",
            engine=True,
        )
    sock = tmp_path_factory.mktemp("podman-api") / "podman.sock"
    svc = subprocess.Popen(
        [podman, "system", "service", "--time=0", f"unix://{sock}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    env = dict(os.environ, DOCKER_HOST=f"unix://{sock}")
    try:
        for _ in range(120):
            if sock.exists() and subprocess.run(["docker", "version"], env=env, capture_output=True).returncode == 0:
                break
            if svc.poll() is not None:
                pytest.fail(f"podman system service exited: {svc.stderr.read()}")
            time.sleep(0.5)
        else:
            pytest.fail("podman's Docker API socket did not answer within 60 s")
        yield f"unix://{sock}"
    finally:
        svc.send_signal(signal.SIGTERM)
        try:
            svc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            svc.kill()
            svc.wait()


def _nextflow(args: list[str], cwd: Path, env_extra: dict | None = None) -> subprocess.Popen:
    env = dict(
        os.environ,
        NXF_ANSI_LOG="false",
        NXF_OFFLINE="true",
        NXF_OPTS=os.environ.get("NXF_OPTS", "-Xms256m -Xmx1g"),
        **(env_extra or {}),
    )
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        ["nextflow", "run", str(MAIN_NF), "-ansi-log", "false", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(proc: subprocess.Popen, timeout: float) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=max(1.0, timeout))
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        return -9, out + "\n[killed: timeout]"
    return proc.returncode, out


def _event_epoch(t: str) -> float:
    """Seconds since the epoch of a podman event's RFC 3339 time (nanoseconds, 'Z' or an offset)."""
    from datetime import datetime

    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)", t)
    assert m, f"podman event time {t!r}"
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.fromisoformat(m.group(1) + tz).timestamp() + float(m.group(2) or 0.0)


def _events(podman: str, since: float, until: float) -> list[dict]:
    """Containers started between the two times, from podman's own event log. The end is applied here, not with
    ``--until``: podman 4.3's file event logger returns no event at all for ``--until`` once its log has been
    rotated (events_logfile_max_size, 1 MB: a machine that ran several CI jobs)."""
    r = subprocess.run(
        [podman, "events", "--stream=false", "--since", str(int(since)), "--filter", "event=start", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    events = [json.loads(ln) for ln in r.stdout.splitlines() if ln.strip()]
    return [e for e in events if _event_epoch(e["Time"]) <= until + 1]


# The GPU-flag run (one assembly, prediction only): `-profile test,<engine>,gpu` with the CPU image standing in for
# the CUDA one (--container_gpu). Docker's full-profile run would repeat what podman's shows (the same image and
# container directives; only the engine differs), so docker gets this run alone: it shows the Docker CLI path, the
# CPU image on every task and `--gpus all` on PREDICT only, at a third of a full run's cost.
GPU_FLAG_ARGS = [
    "--container_gpu",
    CPU_IMAGE,
    "--predict_shards",
    "1",
    "--skip_genie3",
    "--skip_tracks",
    "--skip_benchmark",
    "--skip_multiqc",  # MultiQC runs without the benchmark too: this run is prediction only
]


def _one_assembly_sheet(base: Path, every_input: bool = False) -> Path:
    """asmA as the test profile's sheet names it (its species is in the genome h5 and the predictions): its FASTA
    only, or (``every_input``) its whole row -- expression, regulators, annotation, motifs, VCF -- with the sheet's
    relative paths made absolute (the sheet is written elsewhere)."""
    test = ROOT / "assets" / "test"
    rows = (test / "samplesheet.csv").read_text().splitlines()
    row = next(r.split(",") for r in rows[1:] if r.startswith("asmA,"))
    if every_input:
        sheet = base / "sheet_asmA.csv"
        sheet.write_text(
            f"{rows[0]}\n" + ",".join(str(test / f) if f and (test / f).is_file() else f for f in row) + "\n"
        )
    else:
        sheet = base / "sheet.csv"
        sheet.write_text(f"id,fasta,species\nasmA,{test / 'asmA.fa'},{row[2]}\n")
    return sheet


@pytest.fixture(scope="module")
def engine_runs(nextflow_bin, cpu_image, podman, docker_host, tmp_path_factory):
    """The test profile inside the CPU image with podman on asmA alone, then the GPU-flag run (one assembly) with
    docker through podman's API, one after the other (so podman's event log tells them apart).

    podman's run is ``-profile test,podman`` with the test sheet's asmA row (every optional input: expression and
    regulators, annotation, motifs, VCF), not both assemblies: asmB (a FASTA only) adds no process of its own, only
    more tasks of the processes asmA runs too (FASTA2H5, PREDICT_PLAN, PREDICT x2, PREDICT_MERGE, PREDICT_VIEW,
    BIGWIG, PEAKS, REVIEW_PAGE: 9 of the profile's 34 tasks at present, each a container start). What the run
    must show is checked against the plain run, so it cannot silently cover less: the same set of processes
    (test_every_task_ran_in_the_cpu_image: a process that the plain run has and this one lacks fails it), asmA's
    tasks and the run-level ones (the model, the reports) by name, and their outputs byte for byte
    (test_outputs_equal_the_run_without_containers)."""
    base = tmp_path_factory.mktemp("engine_runs")
    sheet = _one_assembly_sheet(base)
    # podman's run: four one-CPU tasks at a time instead of two: a container task spends much of its time starting
    # (the full run was 220 s of wall for 86 CPU-s in the suite), so starts overlap; what runs where is unchanged
    overlap = base / "overlap.config"
    overlap.write_text("executor.cpus = 4\n")
    runs = {}
    for engine in ("podman", "docker"):
        d = base / engine
        extra = {"DOCKER_HOST": docker_host} if engine == "docker" else {}
        args = (
            ["-profile", "test,podman", "--genomes", str(_one_assembly_sheet(base, every_input=True))]
            if engine == "podman"
            else ["-profile", "test,docker,gpu", "--genomes", str(sheet), *GPU_FLAG_ARGS]
        )
        t0 = time.time()
        conf = ["-c", str(overlap)] if engine == "podman" else []  # docker's run has four tasks
        rc, out = _finish(_nextflow([*args, *conf, "--outdir", str(d / "results")], d, extra), 3600)
        runs[engine] = {
            "dir": d,
            "rc": rc,
            "stdout": out,
            "events": _events(podman, t0, time.time()),
            "docker_host": docker_host,
        }
    return runs


def _tasks(run_dir: Path) -> dict[str, str]:
    """task name -> its .command.run text."""
    tasks = {}
    for f in (run_dir / "work").glob("*/*/.command.run"):
        text = f.read_text()
        m = re.search(r"^### name: '(.+)'$", text, re.M)
        tasks[m.group(1)] = text
    return tasks


def _process(task: str) -> str:
    """A task's process: its name less the tag ("CHROMAFLOW:TRACKS:BIGWIG (asmA)" -> "CHROMAFLOW:TRACKS:BIGWIG")."""
    return re.sub(r" \(.*", "", task)


def _engine_line(text: str, engine: str) -> str:
    lines = [
        ln for ln in text.splitlines() if re.search(rf"\b{engine} (run|exec)\b", ln) and not ln.lstrip().startswith("#")
    ]
    assert lines, f"no '{engine} run/exec' line in .command.run"
    return lines[0]


@pytest.mark.pipeline
@pytest.mark.parametrize("engine", ["podman", "docker"])
def test_every_task_ran_in_the_cpu_image(engine_runs, test_run, engine):
    run = engine_runs[engine]
    assert run["rc"] == 0, run["stdout"][-4000:]
    assert "chromaflow: done" in run["stdout"]
    outdir = run["dir"] / "results"
    trace = read_trace(outdir)
    if engine == "podman":
        # asmA alone (engine_runs): first, every process of the plain run (both assemblies) ran in the image -- the
        # set of process names, not the task count, so no process goes untested (e.g. one that only asmB's inputs
        # started, or one a skip option dropped, fails here)
        # (the plain run's injected, retried BIGWIG and GENIE3_MERGE failures are not COMPLETED rows)
        done = [r["name"] for r in read_trace_file(test_run.trace) if r["status"] == "COMPLETED"]
        processes = {_process(n) for n in done}
        assert {_process(r["name"]) for r in trace} == processes, (
            f"processes of the run without containers not run in the image: "
            f"{sorted(processes - {_process(r['name']) for r in trace})}; "
            f"extra: {sorted({_process(r['name']) for r in trace} - processes)}"
        )
        # then the same tasks as the plain run's, less asmB's: asmA's and the run-level ones (the model, the reports)
        plain = sorted(n for n in done if not re.search(r"\(asmB\b", n))
        assert sorted(r["name"] for r in trace) == plain
    else:  # the GPU-flag run: one assembly, prediction only
        plain = sorted(r["name"] for r in trace)
        assert sorted({_process(n) for n in plain}) == [
            "CHROMAFLOW:FASTA2H5",
            "CHROMAFLOW:PREDICT_ASSEMBLIES:MAKE_TEST_MODEL",
            "CHROMAFLOW:PREDICT_ASSEMBLIES:PREDICT",
            "CHROMAFLOW:PREDICT_ASSEMBLIES:PREDICT_PLAN",
        ]
    for row in trace:
        assert row["status"] == "COMPLETED", row
        assert row["container"] == CPU_IMAGE, row  # PREDICT too: no CUDA image (podman: no `gpu` profile; docker:
        #                                             --container_gpu is the CPU image)
    tasks = _tasks(run["dir"])
    assert sorted(tasks) == plain
    mounts = set()
    for name, text in tasks.items():
        line = _engine_line(text, engine)
        assert f" {CPU_IMAGE} /bin/bash" in line, (name, line)
        assert "-u $(id -u):$(id -g)" in line, (name, line)
        gpu = engine == "docker" and name.startswith("CHROMAFLOW:PREDICT_ASSEMBLIES:PREDICT ")
        assert ("--gpus all" in line) == gpu and "nvidia.com/gpu" not in line, (name, line)
        mounts |= set(re.findall(r"-v (\S+:\S+)", line))
    # The tasks call the pipeline's bin/chromaflow, which Nextflow mounts into the container -- here together with
    # the whole clone (Nextflow mounts the common parent of bin/ and the inputs in assets/test). The image's
    # installed package must run, not the mounted clone's src/: run the launcher in the image with the tasks'
    # mounts and see where Python imports chromaflow from.
    probe = subprocess.run(
        [
            engine,
            "run",
            "--rm",
            *[a for m in sorted(mounts) for a in ("-v", m)],
            "-e",
            "PYTHONVERBOSE=1",
            CPU_IMAGE,
            str(ROOT / "bin" / "chromaflow"),
            "--version",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, DOCKER_HOST=run["docker_host"]) if engine == "docker" else None,
    )
    assert probe.returncode == 0 and probe.stdout.strip() == "chromaflow 0.1.0", probe.stderr[-3000:]
    # the clone is visible in the tasks' containers (mounted itself, or a parent folder such as /tmp when the clone
    # and the work directory share one) ...
    assert any(ROOT == Path(m.split(":")[0]) or Path(m.split(":")[0]) in ROOT.parents for m in mounts), mounts
    loaded = set(re.findall(r"(/\S+?)/chromaflow/__init__\.py", probe.stderr))
    assert loaded and all(p.startswith("/opt/venv/") for p in loaded), loaded  # ... but the image's package ran
    # podman's own record: one container per task, each started from the CPU image
    started = [e for e in run["events"] if e.get("Name", "").startswith("nxf-")]
    assert len(started) == len(trace), [(e.get("Name"), e.get("Image")) for e in run["events"]]
    assert {e["Image"].removeprefix("localhost/") for e in started} == {CPU_IMAGE}, started


_REPORTS = ("pipeline_info", "benchmark", "multiqc")  # timings, dates, run names: never equal between runs
_STAMP = ".chromaflow_run.json"  # each sample folder's record of the run that wrote it: its session, never equal


def _files(outdir: Path) -> dict[str, Path]:
    return {
        str(p.relative_to(outdir)): p
        for p in sorted(outdir.rglob("*"))
        if p.is_file() and p.relative_to(outdir).parts[0] not in _REPORTS and p.name != _STAMP
    }


def _h5_tree(path: Path) -> dict:
    out = {}
    with h5py.File(path) as h5:

        def visit(name, obj):
            attrs = {k: np.asarray(v).tolist() for k, v in obj.attrs.items() if k != "timestamp"}
            data = obj[()] if isinstance(obj, h5py.Dataset) else None
            out[name] = (attrs, None if data is None else (data.dtype.str, data.shape, data.tobytes()))

        visit("/", h5)
        h5.visititems(visit)
    return out


def _zip_members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {i.filename.split("/", 1)[-1]: z.read(i) for i in z.infolist()}


@pytest.mark.pipeline
@pytest.mark.parametrize("engine", ["podman", "docker"])
def test_outputs_equal_the_run_without_containers(engine_runs, test_run, engine):
    run = engine_runs[engine]
    assert run["rc"] == 0, run["stdout"][-4000:]
    ours, plain = _files(run["dir"] / "results"), _files(test_run.outdir)
    # the comparison covers every kind of result (so it cannot pass on an empty or partial tree)
    kinds = {
        "predictions h5": r"/predictions/.*\.h5$",
        "bigWig": r"/tracks/.*\.bw$",
        "hub": r"/tracks/hub\.txt$",
        "GENIE3 links": r"/network/.*genie3_links\.tsv\.gz$",
        "genome h5": r"/h5/.*\.h5$",
    }
    if engine == "podman":  # asmA alone (engine_runs): every file of the plain run but asmB's folder
        plain = {rel: path for rel, path in plain.items() if rel.split("/")[0] != "asmB"}
        assert sorted(ours) == sorted(plain)
    else:  # the GPU-flag run makes asmA's genome h5 and predictions (with one shard: the same bytes as merged shards)
        assert set(ours) <= set(plain), sorted(set(ours) - set(plain))
        kinds = {k: v for k, v in kinds.items() if k in ("predictions h5", "genome h5")}
        plain = {rel: path for rel, path in plain.items() if rel in ours}
    for kind, pattern in kinds.items():
        assert any(re.search(pattern, "/" + rel) for rel in plain), kind
    differ = []
    for rel, path in plain.items():
        if re.search(r"(^|/)h5/[^/]+\.h5$", rel):
            # the genome h5 stores its creation time in the `timestamp` attribute; everything else must be equal
            if _h5_tree(path) != _h5_tree(ours[rel]):
                differ.append(rel)
        elif rel.endswith(".ckpt") and not filecmp.cmp(path, ours[rel], shallow=False):
            # the test checkpoint is a torch zip whose record names start with a random temporary folder name
            # (until make-test-model writes it reproducibly): equal members, names without that first part
            if _zip_members(path) != _zip_members(ours[rel]):
                differ.append(rel)
        elif not filecmp.cmp(path, ours[rel], shallow=False):
            differ.append(rel)
    assert not differ, f"{engine}: outputs differ from the run without containers: {differ}"


@pytest.fixture(scope="module")
def podman_gpu_run(nextflow_bin, cpu_image, podman, tmp_path_factory):
    """The GPU-flag run with podman (docker's is in ``engine_runs``): only what the GPU flags touch."""
    base = tmp_path_factory.mktemp("gpu_flags")
    d = base / "podman"
    proc = _nextflow(
        [
            "-profile",
            "test,podman,gpu",
            "--outdir",
            str(d / "results"),
            "--genomes",
            str(_one_assembly_sheet(base)),
            *GPU_FLAG_ARGS,
        ],
        d,
    )
    return (d, *_finish(proc, 1800))


@pytest.mark.pipeline
def test_podman_gpu_profile_requests_the_cdi_gpu_on_predict_only(podman_gpu_run):
    """Real podman: PREDICT's container asks for the CDI device nvidia.com/gpu=all, which podman tries to
    resolve and cannot here (no GPU, no CDI spec) -- so PREDICT fails with podman's CDI error while the CPU tasks
    (same image, no GPU flag) succeed. On a GPU host with `nvidia-ctk cdi generate` the same flag exposes the
    GPUs (not exercised here)."""
    d, rc, out = podman_gpu_run
    assert rc != 0, out[-3000:]
    tasks = _tasks(d)
    predict = [n for n in tasks if n.startswith("CHROMAFLOW:PREDICT_ASSEMBLIES:PREDICT ")]
    others = [n for n in tasks if not n.startswith("CHROMAFLOW:PREDICT_ASSEMBLIES:PREDICT ")]
    assert predict and others, sorted(tasks)
    for name, text in tasks.items():
        line = _engine_line(text, "podman")
        assert ("--device nvidia.com/gpu=all" in line) == (name in predict), (name, line)
    for name in predict:
        wd = next(p.parent for p in (d / "work").glob("*/*/.command.run") if f"### name: '{name}'" in p.read_text())
        log = (wd / ".command.log").read_text() if (wd / ".command.log").exists() else ""
        assert "unresolvable CDI devices nvidia.com/gpu=all" in log + out, (name, log[-2000:])
    done = {r["name"] for r in read_trace(d / "results") if r["status"] == "COMPLETED"}
    assert set(others) <= done and not (set(predict) & done), (sorted(done), predict)


@pytest.mark.pipeline
def test_docker_gpu_profile_puts_gpus_all_on_predict_only(engine_runs):
    """Real Docker CLI through podman's API: `--gpus all` on PREDICT's `docker run` only, every task runs. podman
    4.3's Docker API accepts and ignores --gpus, so this proves the command line, not GPU passthrough."""
    run = engine_runs["docker"]
    d, rc, out = run["dir"], run["rc"], run["stdout"]
    assert rc == 0, out[-3000:]
    tasks = _tasks(d)
    assert sorted(_process(n) for n in tasks) == [
        "CHROMAFLOW:FASTA2H5",
        "CHROMAFLOW:PREDICT_ASSEMBLIES:MAKE_TEST_MODEL",
        "CHROMAFLOW:PREDICT_ASSEMBLIES:PREDICT",
        "CHROMAFLOW:PREDICT_ASSEMBLIES:PREDICT_PLAN",
    ]
    for name, text in tasks.items():
        line = _engine_line(text, "docker")
        assert ("--gpus all" in line) == name.startswith("CHROMAFLOW:PREDICT_ASSEMBLIES:PREDICT "), (name, line)
        assert f" {CPU_IMAGE} /bin/bash" in line


# ------------------------------------------------------------------- singularity/apptainer: engine shims
SHIM = r"""#!/usr/bin/env bash
# FAKE container engine for tests/pipeline/test_containers.py (singularity/apptainer are not available here):
# records its arguments and runs the command after the image on the host. NOT a container.
log={log}
# one write per call: tasks and pulls run concurrently, and piecewise appends interleaved their lines (a CI flake)
args=""; (($#)) && printf -v args ' %q' "$@"
printf '%s%s\n' "$(basename "$0")" "$args" >> "$log"
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
    */chromaflow-*.img) i=$((i+1)); break ;;
  esac
  i=$((i+1))
done
[ -n "$wd" ] && cd "$wd"
exec "${{args[@]:$i}}"
"""


@pytest.fixture(scope="module")
def shim_runs(tmp_path_factory, nextflow_bin):
    """One real pipeline run per engine (concurrently), each with its fake engine on PATH. To keep them cheap: -stub
    (what is checked is the engine's command line Nextflow writes into each task's .command.run, the same for a stub),
    one assembly (asmA) and the committed test checkpoint (tests/data/nftest: make-test-model's output, checked by
    test_nftest_fixtures.py) instead of a MAKE_TEST_MODEL task each."""
    base = tmp_path_factory.mktemp("engines")
    sheet = base / "sheet.csv"
    sheet.write_text(f"id,fasta\nasmA,{ROOT / 'assets' / 'test' / 'asmA.fa'}\n")
    model = ROOT / "tests" / "data" / "nftest" / "chromaflow_tiny_seed0.ckpt"
    procs = {}
    for engine in SHIM_ENGINES:
        d = base / engine
        (d / "bin").mkdir(parents=True)
        shim = d / "bin" / engine
        shim.write_text(SHIM.format(log=shlex.quote(str(d / "engine.log"))))
        shim.chmod(0o755)
        env = dict(
            os.environ,
            NXF_ANSI_LOG="false",
            NXF_OFFLINE="true",
            NXF_OPTS=os.environ.get("NXF_OPTS", "-Xms256m -Xmx1g"),
            PATH=f"{d / 'bin'}{os.pathsep}{os.environ['PATH']}",
        )
        env.pop("NXF_SINGULARITY_CACHEDIR", None)
        env.pop("NXF_APPTAINER_CACHEDIR", None)
        cmd = [
            nextflow_bin,
            "run",
            str(MAIN_NF),
            "-ansi-log",
            "false",
            "-stub",
            "-profile",
            f"test,{engine},gpu",
            "--outdir",
            str(d / "results"),
            "--genomes",
            str(sheet),
            "--test_model",
            "false",
            "--model",
            str(model),
            "--predict_shards",
            "1",
            "--skip_genie3",
            "--skip_tracks",
            "--skip_benchmark",
            "--skip_multiqc",
        ]
        procs[engine] = (
            d,
            subprocess.Popen(cmd, cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
        )
    deadline = time.monotonic() + 600
    return {engine: (d, *_finish(p, deadline - time.monotonic())) for engine, (d, p) in procs.items()}


@pytest.mark.pipeline
@pytest.mark.parametrize("engine", SHIM_ENGINES)
def test_singularity_apptainer_command_lines(shim_runs, engine):
    """Fake engine (see the module docstring): the image and the --nv flag Nextflow passes per task, only."""
    d, rc, stdout = shim_runs[engine]
    assert rc == 0, stdout[-4000:]
    assert "chromaflow: done" in stdout
    tasks = _tasks(d)
    names = sorted(_process(n) for n in tasks)
    assert names == [
        "CHROMAFLOW:FASTA2H5",
        "CHROMAFLOW:PREDICT_ASSEMBLIES:PREDICT",
        "CHROMAFLOW:PREDICT_ASSEMBLIES:PREDICT_PLAN",
    ], names
    for name, text in tasks.items():
        line = _engine_line(text, engine)
        gpu = name.startswith("CHROMAFLOW:PREDICT_ASSEMBLIES:PREDICT ")
        image = (GPU_IMAGE if gpu else CPU_IMAGE).replace(":", "-") + ".img"
        assert f"/{image} /bin/bash" in line, (name, line)
        assert ("--nv" in line.split()) == gpu, (name, line)
    # the fake engine really was called for every task, and both images were "pulled"
    calls = (d / "engine.log").read_text().splitlines()
    assert len([c for c in calls if c.split()[1] in ("run", "exec")]) == len(tasks)
    pulled = sorted(re.search(r"docker://(\S+)", c).group(1) for c in calls if c.split()[1] == "pull")
    assert pulled == sorted([CPU_IMAGE, GPU_IMAGE])
    assert (d / "results" / "asmA" / "predictions" / "asmA_predictions.h5").is_file()


# --------------------------------------------------------------------------------------- nextflow config
CONFIG_PROFILES = [
    "local",
    "test",
    "test_full",
    "slurm",
    "docker",
    "podman",
    "test,podman",
    "singularity",
    "docker,gpu",
    "podman,gpu",
    "singularity,gpu",
    "apptainer,gpu",
    "slurm_gpu",
    "slurm_gpu,singularity",
    "slurm_gpu,singularity,gpu",
]


@pytest.fixture(scope="module")
def rendered_configs(nextflow_bin, tmp_path_factory) -> dict[str, str]:
    """`nextflow config -profile <list> -flat` of every list, rendered in one JVM (helpers.pipeline_utils)."""
    return render_configs(CONFIG_PROFILES, tmp_path_factory.mktemp("configs"))


@pytest.mark.parametrize("profiles", CONFIG_PROFILES)
def test_profiles_images_and_no_global_gpu_flags(rendered_configs, profiles):
    flat = rendered_configs[profiles]
    for line in flat.splitlines():
        if re.match(r"(docker|podman|singularity|apptainer)\.(runOptions|engineOptions)\b", line) or re.match(
            r"process\.(containerOptions|clusterOptions|accelerator)\b", line
        ):
            assert (
                "--gpus" not in line and "--nv" not in line and "gres" not in line and "nvidia.com/gpu" not in line
            ), line
    assert f"process.container = '{CPU_IMAGE}'" in flat
    wants_gpu = bool({"gpu", "slurm_gpu"} & set(profiles.split(",")))
    # the CUDA image only when a GPU profile asks for it
    assert (f"process.'withLabel:process_gpu'.container = '{GPU_IMAGE}'" in flat) == wants_gpu
    assert ("process.'withLabel:process_gpu'.containerOptions" in flat) == wants_gpu
    # a GPU request only under a GPU profile: a CPU profile's tasks, process_gpu ones included, ask for none
    requests = [line for line in flat.splitlines() if re.match(r"process\.\S*accelerator = ", line)]
    if wants_gpu:
        assert sorted(requests) == [
            "process.'withLabel:process_gpu'.accelerator = 1",
            "process.'withName:TRAIN'.accelerator = { params.train_gpus as int }",
        ], requests
    else:
        assert requests == [], f"{profiles}: a CPU profile asks for a GPU: {requests}"
    engines = [e for e in ("docker", "podman", "singularity", "apptainer") if e in profiles.split(",")]
    for e in ("docker", "podman", "singularity", "apptainer"):
        assert (f"{e}.enabled = true" in flat) == (e in engines), (e, profiles)
    if engines and engines[0] in ("docker", "podman"):
        assert f"{engines[0]}.runOptions = '-u $(id -u):$(id -g)'" in flat
    if wants_gpu:
        forks = re.search(r"process\.'withLabel:process_gpu'\.maxForks = (\d+)", flat).group(1)
        # one machine: bounded by gpu_max_forks; SLURM: every job has its own GRES, only the queue bounds it
        assert forks == ("50" if profiles.startswith("slurm_gpu") else "1")
