"""One nf-test run over every spec, started in the background as soon as pytest has collected its tests.

nf-test runs its cases one after another, each a Nextflow JVM that spends much of its time starting up and polling;
the rest of the suite meanwhile leaves a core idle much of the time. Started at collection (``tests/conftest.py``),
the run overlaps the other tests instead of adding its whole length at the end, in two lanes side by side
(:data:`LANES`); the ``nftest_results`` fixture of ``pipeline/test_nftest.py`` waits for both and reads their JUnit
reports. When the nf-test tests are not selected (``pytest tests/genie3``, ``-k ...``) nothing starts.

The pipeline spec has an nf-test run of its own at the head of its lane, and its test-profile case is also the
session's test-profile run that the pytest pipeline tests read (fixture ``test_run``): the case writes where its
outputs, log and trace are into the file named by ``CHROMAFLOW_NFT_HANDOFF`` (:meth:`NfTestRun.pipeline_run` waits
for it), with the pytest run's injected failures (``CHROMAFLOW_TEST_FAIL``; tests/nextflow.config fails only the
pipeline's tasks, never a module spec's). One test-profile run instead of two.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

from helpers.environment import ROOT
from helpers.pipeline_utils import TEST_RUN_FAULTS, TEST_SWITCHES, PipelineRun

#: the pipeline's spec: run first (its test-profile case is the pytest tests' run too)
PIPELINE_SPEC = "tests/pipeline/main.nf.test"
#: the module specs, run after it
MODULE_SPECS = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("modules/local/*/tests/main.nf.test"))
#: the subworkflow specs (their wiring, as -stub runs), run with the module specs
SUBWORKFLOW_SPECS = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("subworkflows/local/*/tests/main.nf.test"))
#: every spec nf-test runs
SPECS = [PIPELINE_SPEC, *MODULE_SPECS, *SUBWORKFLOW_SPECS]
#: the module specs that run after the pipeline spec, in its lane (the torch-heavy ones); the other module specs
#: have the second lane. Chosen to even the lanes out (measured in the suite, 2 cores: the pipeline spec ~230 s, the
#: subworkflow specs ~75 s, evaluate + train + make_test_model ~75 s, the other modules ~370 s)
AFTER_PIPELINE = tuple(f"modules/local/{m}/tests/main.nf.test" for m in ("evaluate", "make_test_model", "train"))
#: the two lanes, run side by side: (name, [(run name, specs), ...]); one nf-test run after the other in a lane.
#: nf-test sorts the specs of one run by path, so the pipeline spec (its test-profile case is the pytest tests' run,
#: wanted early) has a run of its own at the head of its lane
LANES = (
    ("pipeline", [("pipeline", [PIPELINE_SPEC]), ("after", [*AFTER_PIPELINE, *SUBWORKFLOW_SPECS])]),
    ("modules", [("modules", [s for s in MODULE_SPECS if s not in AFTER_PIPELINE])]),
)
#: the pytest test that needs the run (any of its parametrized cases)
NEEDED_BY = "pipeline/test_nftest.py::test_nf_test_spec_passes"
TIMEOUT_S = 5400


def nf_test_bin() -> str | None:
    shared = ROOT / ".." / "shared" / "tools" / "nf-test" / "nf-test"
    if shared.is_file():
        return str(shared.resolve())
    return shutil.which("nf-test")


class NfTestRun:
    """nf-test over :data:`SPECS` in ``work``: ``--ci`` (a missing snapshot fails), in the two :data:`LANES` side by
    side, each with its own work folder; every nf-test run with its log and JUnit report (``work/junit-<run>.xml``).

    Side by side, not one after the other: each nf-test case is a short Nextflow run that mostly waits (JVM start,
    task polling), and on two cores the suite left ~40 % of one core idle while the pipeline tests' worker waited
    for nf-test; the lanes share no file (their work folders differ and every spec publishes into its own launch
    folder)."""

    def __init__(self, work: Path):
        self.work = work
        self.junits = [work / f"junit-{run}.xml" for _, runs in LANES for run, _ in runs]
        self.outputs = [work / f"stdout-{lane}.txt" for lane, _ in LANES]
        self.handoff = work / "pipeline-run.json"
        self.procs: list[subprocess.Popen] = []
        self.missing: str | None = None

    def lane_script(self, nft: str, runs: list[tuple[str, list[str]]]) -> str:
        """The shell script of a lane: its nf-test runs one after the other (each with its JUnit report and log);
        the exit status is the first non-zero one."""
        lines = ["rc=0"]
        for run, specs in runs:
            cmd = [nft, "test", "--ci", "--junitxml", str(self.work / f"junit-{run}.xml")]
            cmd += ["--log", str(self.work / f"nf-test-{run}.log"), *specs]
            # the pipeline spec's runs render Nextflow's HTML reports (its test-profile case checks them; the other
            # specs' launches skip them: tests/nextflow.config)
            env = "CHROMAFLOW_TEST_REPORTS=1 " if PIPELINE_SPEC in specs else ""
            lines.append(f'{env}{shlex.join(cmd)} || {{ s=$?; [ "$rc" -ne 0 ] || rc=$s; }}')
        return "\n".join([*lines, 'exit "$rc"'])

    def start(self) -> None:
        """Starts both lanes in the background (or records in ``missing`` why nf-test cannot run here)."""
        nft = nf_test_bin()
        if nft is None or shutil.which("java") is None or shutil.which("nextflow") is None:
            self.missing = (
                "nf-test not found (../shared/tools/nf-test/nf-test or nf-test on PATH), or no java, "
                "or nextflow not on PATH (run: source scripts/env.sh)"
            )
            return
        env = dict(
            {k: v for k, v in os.environ.items() if k not in TEST_SWITCHES},
            NXF_ANSI_LOG="false",
            NXF_OFFLINE="true",
            CHROMAFLOW_PROGRESS="0",
            CHROMAFLOW_TEST_FAIL=TEST_RUN_FAULTS,
            CHROMAFLOW_TEST_INTERPRET="1",  # the pipeline case is the session's test-profile run: --interpret kept
            CHROMAFLOW_NFT_HANDOFF=str(self.handoff),
        )
        for (lane, runs), output in zip(LANES, self.outputs):
            with open(output, "w") as out:
                # its own session: a stop of pytest (Ctrl-C, -x) ends nf-test and every Nextflow it started (stop())
                self.procs.append(
                    subprocess.Popen(
                        ["sh", "-c", self.lane_script(nft, runs)],
                        cwd=ROOT,
                        env=dict(env, NFT_WORKDIR=str(self.work / f"nft-{lane}")),
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        start_new_session=True,
                    )
                )

    def wait(self) -> int:
        """0 once both lanes have ended with 0, else the first non-zero exit status."""
        assert self.procs
        deadline = time.time() + TIMEOUT_S
        codes = [p.wait(timeout=max(1.0, deadline - time.time())) for p in self.procs]
        return next((c for c in codes if c != 0), 0)

    def pipeline_run(self) -> PipelineRun:
        """The pipeline spec's test-profile case, once it has ended (it runs first): what it wrote into the
        hand-off file. Fails naming nf-test's output when nf-test ended without writing it."""
        assert self.procs
        deadline = time.time() + TIMEOUT_S
        while not self.handoff.is_file():
            if self.procs[0].poll() is not None or time.time() > deadline:
                raise AssertionError(
                    f"nf-test's pipeline case wrote no {self.handoff.name} (nf-test exit "
                    f"{self.procs[0].poll()}):\n{self.tail()}"
                )
            time.sleep(0.5)
        h = json.loads(self.handoff.read_text())
        meta = Path(h["meta"])
        log = meta / "nextflow.log"
        return PipelineRun(
            Path(h["launch"]),
            Path(h["outdir"]),
            log.read_text(errors="replace") if log.is_file() else "",
            meta / "trace.csv",
        )

    def tail(self, n: int = 4000) -> str:
        """The last ``n`` characters of each nf-test run's output."""
        return "\n".join(f"--- {o.name}:\n" + o.read_text(errors="replace")[-n:] for o in self.outputs if o.is_file())

    def stop(self) -> None:
        """Ends what is still running of both nf-test runs (their whole process groups)."""
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(timeout=30)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
