"""One nf-test run over every spec, started in the background as soon as pytest has collected its tests.

nf-test runs its 40-odd cases one after another, each a Nextflow JVM that spends much of its time starting up and
polling; the rest of the suite meanwhile leaves a core idle most of the time. Started at collection
(``tests/conftest.py``), the run overlaps the other tests instead of adding its whole length at the end; the
``nftest_results`` fixture of ``pipeline/test_nftest.py`` waits for it and reads its JUnit report. When the nf-test
tests are not selected (``pytest tests/genie3``, ``-k ...``) nothing starts.

The pipeline spec runs first (nf-test sorts the specs it is given by file name, so it gets one nf-test run of its
own before the module specs' run), and its test-profile case is also the session's test-profile run that the pytest
pipeline tests read (fixture ``test_run``): the case writes where its outputs, log and trace are into the file named
by ``CHROMAFLOW_NFT_HANDOFF`` (:meth:`NfTestRun.pipeline_run` waits for it), with the pytest run's injected failures
(``CHROMAFLOW_TEST_FAIL``; tests/nextflow.config fails only the pipeline's tasks, never a module spec's). One
test-profile run instead of two.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from helpers.environment import ROOT
from helpers.pipeline_utils import TEST_RUN_FAULTS, PipelineRun

#: the pipeline's spec: run first (its test-profile case is the pytest tests' run too)
PIPELINE_SPEC = "tests/pipeline/main.nf.test"
#: the module specs, run after it
MODULE_SPECS = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("modules/local/*/tests/main.nf.test"))
#: the subworkflow specs (their wiring, as -stub runs), run with the module specs
SUBWORKFLOW_SPECS = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("subworkflows/local/*/tests/main.nf.test"))
#: every spec nf-test runs
SPECS = [PIPELINE_SPEC, *MODULE_SPECS, *SUBWORKFLOW_SPECS]
#: runs the pipeline spec, then the module specs: sh -c SCRIPT sh NF_TEST JUNIT1 LOG1 SPEC JUNIT2 LOG2 SPECS...; the
#: exit status is the first run's when it failed, else the second's
_TWO_RUNS = (
    'n="$1"; "$n" test --ci --junitxml="$2" --log "$3" "$4"; a=$?; j="$5"; l="$6"; shift 6; '
    '"$n" test --ci --junitxml="$j" --log "$l" "$@"; b=$?; [ "$a" -ne 0 ] && exit "$a"; exit "$b"'
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
    """nf-test over :data:`SPECS` in ``work``: ``--ci`` (a missing snapshot fails), two runs (the pipeline spec, then
    the module specs), JUnit reports ``work/junit-pipeline.xml`` and ``work/junit-modules.xml``."""

    def __init__(self, work: Path):
        self.work = work
        self.junits = [work / "junit-pipeline.xml", work / "junit-modules.xml"]
        self.output = work / "stdout.txt"
        self.handoff = work / "pipeline-run.json"
        self.proc: subprocess.Popen | None = None
        self.missing: str | None = None

    def start(self) -> None:
        nft = nf_test_bin()
        if nft is None or shutil.which("java") is None or shutil.which("nextflow") is None:
            self.missing = (
                "nf-test not found (../shared/tools/nf-test/nf-test or nf-test on PATH), or no java, "
                "or nextflow not on PATH (run: source scripts/env.sh)"
            )
            return
        env = dict(
            os.environ,
            NFT_WORKDIR=str(self.work / "nft"),
            NXF_ANSI_LOG="false",
            NXF_OFFLINE="true",
            CHROMAFLOW_PROGRESS="0",
            CHROMAFLOW_TEST_FAIL=TEST_RUN_FAULTS,
            CHROMAFLOW_NFT_HANDOFF=str(self.handoff),
        )
        for k in ("CHROMAFLOW_TEST_HOLD", "CHROMAFLOW_TEST_GATE"):
            env.pop(k, None)
        with open(self.output, "w") as out:
            # its own session: a stop of pytest (Ctrl-C, -x) ends nf-test and every Nextflow it started (stop())
            self.proc = subprocess.Popen(
                [
                    "sh",
                    "-c",
                    _TWO_RUNS,
                    "sh",
                    nft,
                    str(self.junits[0]),
                    str(self.work / "nf-test-pipeline.log"),
                    PIPELINE_SPEC,
                    str(self.junits[1]),
                    str(self.work / "nf-test-modules.log"),
                    *MODULE_SPECS,
                    *SUBWORKFLOW_SPECS,
                ],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def wait(self) -> int:
        """nf-test's exit status, once it has ended."""
        assert self.proc is not None
        return self.proc.wait(timeout=TIMEOUT_S)

    def pipeline_run(self) -> PipelineRun:
        """The pipeline spec's test-profile case, once it has ended (it runs first): what it wrote into the
        hand-off file. Fails naming nf-test's output when nf-test ended without writing it."""
        assert self.proc is not None
        deadline = time.time() + TIMEOUT_S
        while not self.handoff.is_file():
            if self.proc.poll() is not None or time.time() > deadline:
                raise AssertionError(
                    f"nf-test's pipeline case wrote no {self.handoff.name} (nf-test exit "
                    f"{self.proc.poll()}):\n{self.tail()}"
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
        return self.output.read_text(errors="replace")[-n:] if self.output.is_file() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
