"""Every nf-test spec, run by the real nf-test on the test profile (in the background, beside the rest of the suite).

nf-test 0.9.5 is ``../shared/tools/nf-test/nf-test`` here (or ``nf-test`` on PATH elsewhere, e.g. from
bioconda or get.nf-test.com). It runs once per session with ``--ci`` (a missing snapshot is a failure, not a
new snapshot) and ``--junitxml``, in two lanes side by side (helpers/nftest_run.py's LANES: the pipeline spec first,
in a run of its own, since its test-profile case is also the pytest pipeline tests' run, fixture ``test_run``),
started in the background as soon as pytest has collected (tests/conftest.py) so that it overlaps the rest of the
suite; each spec file is then one pytest test that waits for the run and fails when any of its test cases failed,
naming them. The pipeline and module specs snapshot content (tests/helpers/nftest/digest.py); every module's stub
block runs in at least one ``-stub`` case (its own spec's, or a pipeline/subworkflow ``-stub`` case that names its
process: test_every_module_stub_runs_in_a_stub_case).

The run took about 8 min beside the rest of the suite on a 2-core machine with 68 cases (53 now; the JVMs use the
client compiler, tests/conftest.py). Skips with the reason where nf-test or Java is missing (fails under CI=true).
"""

from __future__ import annotations

import functools
import json
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
def test_every_spec_snapshots_content(spec):
    text = (ROOT / spec).read_text()
    assert "snapshot(" in text and ".match()" in text, spec
    assert (ROOT / f"{spec}.snap").is_file(), f"{spec}.snap is not committed"


def test_the_pipeline_spec_has_a_stub_run():
    """The whole pipeline as a -stub run: every predict-mode module's stub block, wired as in a real run."""
    assert any(_is_stub(case) for _, case in _cases((ROOT / PIPELINE_SPEC).read_text())), PIPELINE_SPEC


#: the processes of the modules: {process name: module folder}
MODULE_PROCESSES = {
    re.search(r"^process\s+(\w+)", p.read_text(), re.M).group(1): p.parent.name
    for p in sorted(ROOT.glob("modules/local/*/main.nf"))
}


def _cases(text: str) -> list[tuple[str, str]]:
    """(name, text) of each test case of a spec."""
    return [(c.split('"', 1)[0], c) for c in re.split(r'^\s+test\("', text, flags=re.M)[1:]]


def _is_stub(case: str) -> bool:
    return re.search(r'^\s*options\s+"(?:[^"]*\s)?-stub(?:\s[^"]*)?"', case, re.M) is not None


def _named(text: str, runs: list[str]) -> set[str]:
    """The module processes ``text`` names as tasks of a run of the workflows ``runs``: ``<run>[:<sub>...]:NAME``
    (``'TRACKS:BIGWIG (asmA)'``, ``'CHROMAFLOW:NETWORK:GENIE3 '``) or ``:NAME (<tag>`` (``':PREDICT ('``); not a
    bare word or another workflow's name (``"CHROMAFLOW:FASTA2H5":`` in a versions.yml the case writes), nor on a line
    saying the process did not run (``== 0``, ``assert !``)."""
    found = set()
    run = "|".join(runs)
    for line in text.splitlines():
        if re.search(r"==\s*0\b|assert\s*!", line):
            continue
        found |= {
            p
            for p in MODULE_PROCESSES
            if re.search(rf"(?<![A-Za-z0-9_])(?:{run})(?::[A-Z][A-Z0-9_]*)*:{p}(?![A-Za-z0-9_])|:{p} \(", line)
        }
    return found


def _runs(spec: str, text: str) -> list[str]:
    """The workflow names a spec's task names start with: a subworkflow spec's ``workflow "NAME"``; for the pipeline
    spec, the named workflows main.nf runs (workflows/*.nf)."""
    if spec == PIPELINE_SPEC:
        return [
            m
            for p in sorted(ROOT.glob("workflows/*.nf"))
            for m in re.findall(r"^workflow\s+(\w+)", p.read_text(), re.M)
        ]
    return re.findall(r'^\s*workflow\s+"(\w+)"', text, re.M)


@functools.cache
def stub_coverage() -> dict[str, list[str]]:
    """{process: the -stub nf-test cases that run its stub block}, read from the specs and their snapshots:

    * a module spec's own -stub case runs its process (``process "NAME"``);
    * a pipeline or subworkflow -stub case runs the processes whose tasks its assertions (the ``then`` block) or its
      snapshot (the ``.snap`` entry of that case) name (_named), e.g. ``workflow.trace.succeeded()`` compared with
      ``'TRACKS:BIGWIG (asmA)'``: in a -stub run every task runs its stub block, and the case fails when the named
      task is missing.
    """
    cover: dict[str, list[str]] = {p: [] for p in MODULE_PROCESSES}
    for spec in MODULE_SPECS:
        text = (ROOT / spec).read_text()
        proc = re.search(r'^\s*process\s+"(\w+)"', text, re.M)
        for name, case in _cases(text):
            if proc and proc.group(1) in cover and _is_stub(case):
                cover[proc.group(1)].append(f"{spec}: {name}")
    for spec in [PIPELINE_SPEC, *SUBWORKFLOW_SPECS]:
        snap_file = ROOT / f"{spec}.snap"
        snap = json.loads(snap_file.read_text()) if snap_file.is_file() else {}
        text = (ROOT / spec).read_text()
        runs = _runs(spec, text)
        assert runs, f"{spec}: no workflow name"
        for name, case in _cases(text):
            if not _is_stub(case):
                continue
            then = case.split("then {", 1)[1] if "then {" in case else ""
            named = _named(then, runs) | _named(json.dumps(snap.get(name, {}).get("content", []), indent=0), runs)
            for p in named:
                cover[p].append(f"{spec}: {name}")
    return cover


@pytest.mark.parametrize("process", sorted(MODULE_PROCESSES))
def test_every_module_stub_runs_in_a_stub_case(process):
    """Every module's stub block runs in at least one -stub nf-test case (a stub that does not write its declared
    outputs fails the pipeline's -stub runs, the container and executor tests' short runs): its own spec's -stub case,
    or a pipeline/subworkflow -stub case that names its process (stub_coverage). A module spec needs no -stub case of
    its own where a bigger -stub run already names its process (each case is a Nextflow launch, ~6 CPU-s)."""
    cases = stub_coverage()[process]
    module = MODULE_PROCESSES[process]
    assert cases, (
        f"no -stub nf-test case runs {process}'s stub block: add a -stub case to "
        f"modules/local/{module}/tests/main.nf.test, or name {process} in the assertions or snapshot of a "
        f"pipeline/subworkflow -stub case that runs it"
    )


@pytest.mark.parametrize("spec", SUBWORKFLOW_SPECS)
def test_every_subworkflow_spec_checks_its_wiring(spec):
    """A subworkflow's spec tests its wiring as -stub runs (the tasks' outputs are the module and pipeline specs'):
    every test case runs with -stub, checks the run succeeded and asserts on what ran or what came out (the trace or
    the emitted channels), not on a snapshot of our own earlier output. The one exception is content the subworkflow
    itself writes that only a real task shows (REPORTING's MultiQC sections): a case named ``(real, ...)`` that
    asserts on what it must hold and snapshots nothing."""
    cases = _cases((ROOT / spec).read_text())
    assert cases, f"{spec}: no test case"
    for name, case in cases:
        assert "workflow.success" in case, f"{spec}: {name}: does not check the run succeeded"
        assert "workflow.trace" in case or "workflow.out" in case, f"{spec}: {name}: checks neither tasks nor outputs"
        real = "(real" in name.split(":")[0]
        if real:
            assert "snapshot(" not in case, f"{spec}: {name}: a real case snapshots our own output"
        else:
            assert _is_stub(case) or "workflow.out.samplesheet" in case, f"{spec}: {name}: not a -stub run"
