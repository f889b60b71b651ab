"""Shared pytest fixtures (the plain helpers they use are in tests/helpers/).

``reference_dir`` points at ``../shared/reference`` (read in place, never copied). Where it is absent
the tests that need it are skipped with the reason stated, except under ``CI=true``, where a missing
reference folder is a failure (``helpers.environment.unavailable``, the one rule for every missing piece).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from helpers.environment import REFERENCE, ROOT, unavailable
from helpers.nftest_run import NEEDED_BY, NfTestRun

from chromaflow.interpret.discover import guard_numba_import

# tests/ is on sys.path (its folders have no __init__.py, on purpose), so `import coverage` finds tests/coverage/ as a
# namespace package, which numba (discover-motifs: TF-MoDISco, TOMTOM) would take for coverage.py: the package's own
# guard (chromaflow.interpret.discover.guard_numba_import, also run when that module is imported) covers this process
guard_numba_import()

#: ``--cpu-report FILE``: every test's CPU seconds, children included (where the suite's time goes)
pytest_plugins = ("helpers.cpu_report",)

#: the background nf-test run of this session (helpers/nftest_run.py), when its tests are selected
NFTEST_RUN = pytest.StashKey[NfTestRun]()

# The suite starts ~90 JVMs (Nextflow runs, nf-test and the Nextflow each of its cases runs), each a short run whose
# cost is mostly compiling Nextflow's and Groovy's classes: the client compiler alone (C1, as the official launcher
# uses for every command but `run`) halves the CPU of one launch here (hello-world run: 8.3 s -> 4.9 s user+sys).
# The serial collector then takes another ~12 % (a -stub test-profile run, 3 alternated pairs: 23.7 -> 20.7 CPU-s;
# G1's parallel and concurrent threads cost more than they save on a heap this small and a life this short).
# Tests only: a user's long pipeline run keeps the launcher's default (C2). A value the caller set wins.
_JVM_TEST = "-XX:+TieredCompilation -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ.setdefault("NXF_OPTS", f"-Xms256m -Xmx1g {_JVM_TEST}")
os.environ.setdefault("NFT_JAVA_OPTS", f"-Xmx2g {_JVM_TEST}")
# Idle OpenMP threads (torch's and scikit-learn's libgomp) sleep instead of spinning. The suite runs two workers on
# two cores and most tests' commands use every core (--threads 0): a spinning thread then burns the CPU the other
# worker's process needs. Measured (2 cores, load ~5): test_resume_is_exact + the SIGTERM train test 68 -> 45 CPU-s,
# 121 -> 78 s. How threads wait changes no result. Tests only; a value the caller set wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


#: pytest-xdist groups (``scripts/test``: ``-n 2 --dist loadgroup``, pytest_xdist_make_scheduler) of the pipeline
# tests that share a session
#: resource, each run on one worker: the session's test-profile run, podman's event log and the nf-test run; the
#: SLURM cluster. Every other test file is a group of its own (its module fixtures are built once, on one worker).
SHARED_GROUPS = {
    "pipeline-run": ("test_pipeline.py", "test_containers.py", "test_resume.py", "test_nftest.py"),
    "pipeline-cluster": ("test_pipeline_slurm.py", "test_slurm_cluster.py"),
}
#: the longest groups first (longest-first scheduling: a long group started last would end the run alone); the
#: other files follow in collection order
LONGEST_FIRST = (
    "pipeline-run",
    "pipeline-cluster",
    "tests/pipeline/test_pipeline_train.py",
    "tests/pipeline/test_outdir_lock.py",
    "tests/benchmarks/test_harness_quick_run.py",
    "tests/train/test_train.py",
    "tests/common/test_signals.py",
    "tests/bigwig/test_bigwig.py",
    "tests/benchmarks/test_dev_stages_quick_run.py",
)
PIPELINE = ROOT / "tests" / "pipeline"


def _xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def xdist_group(path: Path) -> str:
    if path.parent == PIPELINE:
        for group, files in SHARED_GROUPS.items():
            if path.name in files:
                return group
    return str(path.relative_to(ROOT))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest groups first (LONGEST_FIRST), the rest in collection order (the scheduler below keeps this order:
    ``--no-loadscope-reorder``). Within ``pipeline-run`` the files keep their order, so its worker waits for
    nf-test early (test_nftest.py is second) instead of running the pipeline tests beside it: measured both ways
    (warm, 2 cores), running them beside nf-test took 1416 s and 2607 CPU-s against 1238 s and 2264 CPU-s (every
    process slower on two oversubscribed cores)."""
    rank = {g: i for i, g in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(xdist_group(Path(item.path)), len(rank)))  # stable


@pytest.hookimpl(optionalhook=True)  # an xdist hook: no error where xdist is off (-p no:xdist)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadgroup`` with our groups (``xdist_group``): a work unit is a group, sent whole to one worker.
    pytest-xdist 3.8's own loadgroup reads ``xdist_group`` markers by renaming node ids through ``item._nodeid``,
    which pytest 9 no longer reads (a node id is ``Node._id`` now): its groups silently became single tests. The
    group of a test is known from its file, so the scheduler maps each node id to it instead."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group(ROOT / nodeid.split("::", 1)[0])

    return GroupScheduling(config, log)


def _start_nftest(config: pytest.Config) -> None:
    run = NfTestRun(config._tmp_path_factory.mktemp("nftest"))
    run.start()
    config.stash[NFTEST_RUN] = run


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start nf-test in the background once the selection is known (it overlaps the rest of the suite). Under
    xdist every worker collects every test: the worker that runs the "pipeline-run" group (test_nftest.py's) starts
    it, at that group's first test (pytest_runtest_setup)."""
    if (
        session.config.option.collectonly
        or _xdist_worker(session.config)
        or not any(NEEDED_BY in item.nodeid for item in session.items)
    ):
        return
    _start_nftest(session.config)


def pytest_runtest_setup(item: pytest.Item) -> None:
    config = item.config
    if (
        _xdist_worker(config)
        and NFTEST_RUN not in config.stash
        and xdist_group(Path(item.path)) == "pipeline-run"
        and any(NEEDED_BY in i.nodeid for i in item.session.items)
    ):
        _start_nftest(config)


def pytest_sessionfinish(session: pytest.Session) -> None:
    run = session.config.stash.get(NFTEST_RUN, None)
    if run is not None:
        run.stop()


@pytest.fixture(scope="session")
def nftest_run(request, tmp_path_factory) -> NfTestRun:
    """The session's nf-test run (started at collection; started here when a test asks and none was)."""
    run = request.config.stash.get(NFTEST_RUN, None)
    if run is None:
        run = NfTestRun(tmp_path_factory.mktemp("nftest"))
        run.start()
        request.config.stash[NFTEST_RUN] = run
    if run.missing:
        unavailable(run.missing)
    return run


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    if not REFERENCE.is_dir():
        # CI=true makes a missing reference folder a failure, unless CHROMAFLOW_REQUIRE_REFERENCE=0 says this CI
        # (e.g. a public mirror's) has no reference folder by design
        unavailable(
            f"reference data folder {REFERENCE} is absent (expected ../shared/reference beside the checkout)",
            waiver="CHROMAFLOW_REQUIRE_REFERENCE",
        )
    return REFERENCE


@pytest.fixture(scope="session")
def nextflow_bin() -> str:
    nf = shutil.which("nextflow")
    if nf is None:
        unavailable("nextflow not on PATH (run: source scripts/env.sh)")
    return nf


@pytest.fixture(scope="session")
def test_run(request, tmp_path_factory, nextflow_bin):
    """The session's one real ``nextflow run main.nf -profile test`` (a :class:`helpers.pipeline_utils.PipelineRun`).

    The first BIGWIG attempts are made to exit 137 (as if OOM-killed) and the first GENIE3_MERGE attempt 75 (an output
    another process is writing) to exercise the retry strategy (CHROMAFLOW_TEST_FAIL, read by tests/nextflow.config).
    When the session runs nf-test (its tests are selected), this is the pipeline spec's test-profile case, with the same
    injected failures (helpers/nftest_run.py): nf-test gives it its own trace file (-with-trace) and runs it -quiet
    (the log is its nextflow.log). Otherwise the run is made here.
    """
    from helpers.pipeline_utils import TEST_RUN_FAULTS, PipelineRun, run_nextflow, trace_file

    nft = request.config.stash.get(NFTEST_RUN, None)
    if nft is not None and nft.procs:
        return nft.pipeline_run()
    work = tmp_path_factory.mktemp("pipeline")
    outdir = work / "results"
    run_nextflow(
        ["-profile", "test", "--outdir", str(outdir)],
        cwd=work,
        # as nf-test's pipeline case: the injected failures, --interpret and Nextflow's HTML reports
        env={"CHROMAFLOW_TEST_FAIL": TEST_RUN_FAULTS, "CHROMAFLOW_TEST_INTERPRET": "1", "CHROMAFLOW_TEST_REPORTS": "1"},
    )
    return PipelineRun(work, outdir, (work / ".nextflow.log").read_text(errors="replace"), trace_file(outdir))
