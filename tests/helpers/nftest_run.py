"""One nf-test run over every spec, started in the background as soon as pytest has collected its tests.

nf-test runs its 40-odd cases one after another, each a Nextflow JVM that spends much of its time starting up and
polling; the rest of the suite meanwhile leaves a core idle most of the time. Started at collection
(``tests/conftest.py``), the run overlaps the other tests instead of adding its whole length at the end; the
``nftest_results`` fixture of ``pipeline/test_nftest.py`` waits for it and reads its JUnit report. When the nf-test
tests are not selected (``pytest tests/genie3``, ``-k ...``) nothing starts.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

from helpers.environment import ROOT

#: the specs nf-test runs: the pipeline's and one per module
SPECS = sorted(str(p.relative_to(ROOT)) for p in [ROOT / "tests" / "pipeline" / "main.nf.test",
                                                    *ROOT.glob("modules/local/*/tests/main.nf.test")])
#: the pytest test that needs the run (any of its parametrized cases)
NEEDED_BY = "pipeline/test_nftest.py::test_nf_test_spec_passes"
TIMEOUT_S = 5400


def nf_test_bin() -> str | None:
    shared = ROOT / ".." / "shared" / "tools" / "nf-test" / "nf-test"
    if shared.is_file():
        return str(shared.resolve())
    return shutil.which("nf-test")


class NfTestRun:
    """nf-test over :data:`SPECS` in ``work``: ``--ci`` (a missing snapshot fails), JUnit report ``work/junit.xml``."""

    def __init__(self, work: Path):
        self.work = work
        self.junit = work / "junit.xml"
        self.output = work / "stdout.txt"
        self.proc: subprocess.Popen | None = None
        self.missing: str | None = None

    def start(self) -> None:
        nft = nf_test_bin()
        if nft is None or shutil.which("java") is None or shutil.which("nextflow") is None:
            self.missing = ("nf-test not found (../shared/tools/nf-test/nf-test or nf-test on PATH), or no java, "
                            "or nextflow not on PATH (run: source scripts/env.sh)")
            return
        env = dict(os.environ, NFT_WORKDIR=str(self.work / "nft"), NXF_ANSI_LOG="false", NXF_OFFLINE="true",
                   CHROMAFLOW_PROGRESS="0")
        with open(self.output, "w") as out:
            # its own session: a stop of pytest (Ctrl-C, -x) ends nf-test and every Nextflow it started (stop())
            self.proc = subprocess.Popen(
                [nft, "test", "--ci", f"--junitxml={self.junit}", "--log", str(self.work / "nf-test.log"), *SPECS],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)

    def wait(self) -> int:
        """nf-test's exit status, once it has ended."""
        assert self.proc is not None
        return self.proc.wait(timeout=TIMEOUT_S)

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
