"""Every nf-test spec, run by the real nf-test on the test profile (in the background, beside the rest of the suite).

nf-test 0.9.5 is ``../shared/tools/nf-test/nf-test`` here (or ``nf-test`` on PATH elsewhere, e.g. from
bioconda or get.nf-test.com). It runs once per session with ``--ci`` (a missing snapshot is a failure, not a
new snapshot) and ``--junitxml``, in two lanes side by side (helpers/nftest_run.py's LANES: the pipeline spec first,
in a run of its own, since its test-profile case is also the pytest pipeline tests' run, fixture ``test_run``),
started in the background as soon as pytest has collected (tests/conftest.py) so that it overlaps the rest of the
suite; each spec file is then one pytest test that waits for the run and fails when any of its test cases failed,
naming them. The specs snapshot content (tests/helpers/nftest/digest.py) and have a ``-stub`` test each.

The run takes about 8 min beside the rest of the suite on a 2-core machine (68 cases; the JVMs use the client
compiler, tests/conftest.py). Skips with the reason where nf-test or Java is missing (fails under CI=true).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from helpers.environment import ROOT
from helpers.nftest_run import MODULE_SPECS, PIPELINE_SPEC, SPECS, SUBWORKFLOW_SPECS

pytestmark = pytest.mark.pipeline


@pytest.fixture(scope="session")
def nftest_results(nftest_run) -> dict[str, list[tuple[str, str | None]]]:
    """{spec file: [(test name, failure message or None), ...]} from the session's one nf-test run over all specs."""
    code = nftest_run.wait()
    missing = [j.name for j in nftest_run.junits if not j.is_file()]
    assert not missing, f"nf-test wrote no {missing} (exit {code}):\n{nftest_run.tail()}"
    results: dict[str, list[tuple[str, str | None]]] = {}
    for suite in (s for j in nftest_run.junits for s in ET.parse(j).getroot().iter("testsuite")):
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
    assert code == 0 or any(m for c in results.values() for _, m in c), nftest_run.tail()
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


@pytest.mark.parametrize("spec", [PIPELINE_SPEC, *MODULE_SPECS])
def test_every_spec_snapshots_content_and_has_a_stub_test(spec):
    text = (ROOT / spec).read_text()
    assert "snapshot(" in text and ".match()" in text, spec
    assert 'options "-stub"' in text, f"{spec}: no -stub test"
    assert (ROOT / f"{spec}.snap").is_file(), f"{spec}.snap is not committed"


@pytest.mark.parametrize("spec", SUBWORKFLOW_SPECS)
def test_every_subworkflow_spec_checks_its_wiring(spec):
    """A subworkflow's spec tests its wiring as -stub runs (the tasks' outputs are the module and pipeline specs'):
    every test case runs with -stub, checks the run succeeded and asserts on what ran or what came out (the trace or
    the emitted channels), not on a snapshot of our own earlier output. The one exception is content the subworkflow
    itself writes that only a real task shows (REPORTING's MultiQC sections): a case named ``(real, ...)`` that
    asserts on what it must hold and snapshots nothing."""
    text = (ROOT / spec).read_text()
    cases = re.split(r'^\s+test\("', text, flags=re.M)[1:]
    assert cases, f"{spec}: no test case"
    for case in cases:
        name = case.split('"', 1)[0]
        assert "workflow.success" in case, f"{spec}: {name}: does not check the run succeeded"
        assert "workflow.trace" in case or "workflow.out" in case, f"{spec}: {name}: checks neither tasks nor outputs"
        real = "(real" in name.split(":")[0]
        if real:
            assert "snapshot(" not in case, f"{spec}: {name}: a real case snapshots our own output"
        else:
            assert 'options "-stub"' in case or "workflow.out.samplesheet" in case, f"{spec}: {name}: not a -stub run"
