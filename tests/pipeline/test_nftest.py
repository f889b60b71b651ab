"""Every nf-test spec, run by the real nf-test on the test profile (so scripts/test and CI run them after the rest).

nf-test 0.9.5 is ``../shared/tools/nf-test/nf-test`` here (or ``nf-test`` on PATH elsewhere, e.g. from
bioconda or get.nf-test.com). It runs once per session with ``--ci`` (a missing snapshot is a failure, not a
new snapshot) and ``--junitxml``; each spec file is then one pytest test that fails when any of its test
cases failed, naming them. The specs snapshot content (tests/helpers/nftest/digest.py) and have a ``-stub`` test each.

Takes about 5.5 min on a 2-core machine (40 cases; the JVMs use the client compiler, tests/conftest.py). Skips with the reason where nf-test or Java is missing (fails under CI=true).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from helpers.environment import unavailable

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted(str(p.relative_to(ROOT)) for p in [ROOT / "tests" / "pipeline" / "main.nf.test", *ROOT.glob("modules/local/*/tests/main.nf.test")])

pytestmark = pytest.mark.pipeline


def nf_test_bin() -> str | None:
    shared = ROOT / ".." / "shared" / "tools" / "nf-test" / "nf-test"
    if shared.is_file():
        return str(shared.resolve())
    return shutil.which("nf-test")


@pytest.fixture(scope="session")
def nftest_results(tmp_path_factory, nextflow_bin) -> dict[str, list[tuple[str, str | None]]]:
    """{spec file: [(test name, failure message or None), ...]} from one nf-test run over all specs."""
    nft = nf_test_bin()
    if nft is None or shutil.which("java") is None:
        unavailable("nf-test not found (../shared/tools/nf-test/nf-test or nf-test on PATH) or no java")
    work = tmp_path_factory.mktemp("nftest")
    junit = work / "junit.xml"
    env = dict(os.environ, NFT_WORKDIR=str(work / "nft"), NXF_ANSI_LOG="false", NXF_OFFLINE="true",
               CHROMAFLOW_PROGRESS="0")
    res = subprocess.run([nft, "test", "--ci", f"--junitxml={junit}", "--log", str(work / "nf-test.log"), *SPECS],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=5400)
    (work / "stdout.txt").write_text(res.stdout + res.stderr)
    assert junit.is_file(), f"nf-test wrote no results (exit {res.returncode}):\n{res.stdout[-4000:]}\n{res.stderr[-2000:]}"
    results: dict[str, list[tuple[str, str | None]]] = {}
    for suite in ET.parse(junit).getroot().iter("testsuite"):
        cases = []
        for case in suite.iter("testcase"):
            bad = case.find("failure") if case.find("failure") is not None else case.find("error")
            if bad is not None:
                cases.append((case.get("name"), (bad.get("message") or bad.text or "failed")[:2000]))
            elif case.get("status", "PASSED") != "PASSED":
                cases.append((case.get("name"), f"status {case.get('status')}"))
            else:
                cases.append((case.get("name"), None))
        results.setdefault(suite.get("name"), []).extend(cases)
    assert res.returncode == 0 or any(m for c in results.values() for _, m in c), res.stdout[-4000:]
    return results


def _spec_results(results: dict, spec: str) -> list[tuple[str, str | None]]:
    """The test cases of one spec file: nf-test's JUnit report names each suite by the spec's `name`."""
    name = re.search(r'^\s*name\s+"([^"]+)"', (ROOT / spec).read_text(), re.M).group(1)
    return results.get(name, [])


@pytest.mark.parametrize("spec", SPECS)
def test_nf_test_spec_passes(nftest_results, spec):
    cases = _spec_results(nftest_results, spec)
    assert cases, f"nf-test reported no test cases for {spec} (suites: {sorted(nftest_results)})"
    assert len(cases) == len(re.findall(r'^\s+test\("', (ROOT / spec).read_text(), re.M)), cases
    failed = [f"{name}: {msg}" for name, msg in cases if msg]
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize("spec", SPECS)
def test_every_spec_snapshots_content_and_has_a_stub_test(spec):
    text = (ROOT / spec).read_text()
    assert "snapshot(" in text and ".match()" in text, spec
    assert 'options "-stub"' in text, f"{spec}: no -stub test"
    assert (ROOT / f"{spec}.snap").is_file(), f"{spec}.snap is not committed"
