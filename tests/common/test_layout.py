"""The tests' own layout (tests/README.md) and every place that cites a test.

* every test file is in a stage folder (``tests/<folder>/test_*.py``), never directly in ``tests/``, and no two test
  files share a base name (pytest imports them by base name: there are no ``__init__.py`` files in the folders);
* no test module imports another one (shared code is in ``tests/helpers/``);
* every ``tests/...`` path cited in the repository (docs, README, scripts, CI, benchmarks, comments in the code and
  in the tests) exists, and every ``tests/<folder>/test_x.py::test_name`` (and each ``::test_other`` after it on the
  same line) and
  every backticked ``test_name`` in the docs names a test function that exists.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from helpers.environment import ROOT

TESTS = ROOT / "tests"
SKIP_DIRS = {".git", ".nextflow", ".nf-test", "work", "results", "__pycache__", ".pytest_cache", "node_modules"}
TEXT_SUFFIXES = {".md", ".py", ".nf", ".test", ".config", ".groovy", ".yml", ".yaml", ".sh", ".toml", ".cfg", ""}
#: cited on purpose although absent (a test of the error naming a missing file; the nf-core template's pipeline test,
#: which .nf-core.yml tells nf-core's lint not to look for)
ABSENT_ON_PURPOSE = {"tests/nonexistent.csv", "tests/default.nf.test"}

PATH = re.compile(r"(?<![\w/.<-])tests/[\w./*<>-]*")
FUNC = re.compile(r"::(test_\w+)")
BARE = re.compile(r"`(test_\w+)(?:\[[^\]`]*\])?`")


def _text_files() -> list[Path]:
    out = []
    for p in ROOT.rglob("*"):
        rel = p.relative_to(ROOT).parts
        if any(part in SKIP_DIRS for part in rel) or not p.is_file() or p.suffix not in TEXT_SUFFIXES:
            continue
        if rel[:2] == ("benchmarks", "results") or p.stat().st_size > 2_000_000:
            continue
        try:
            out.append((p, p.read_text()))
        except UnicodeDecodeError:
            continue
    return out


FILES = _text_files()
TEST_FILES = sorted(TESTS.rglob("test_*.py"))
DEFINED = {m for f in TEST_FILES for m in re.findall(r"^\s*(?:async )?def (test_\w+)", f.read_text(), re.M)} | {
    m for f in TESTS.rglob("conftest.py") for m in re.findall(r"^def (test_\w+)", f.read_text(), re.M)
}
#: the pipeline's profiles (`test_full` in the docs is the profile, not a test function)
PROFILES = set(re.findall(r"^    (test_\w+) \{$", (ROOT / "nextflow.config").read_text(), re.M))


def test_every_test_file_is_in_a_stage_folder_with_a_unique_name():
    assert not list(TESTS.glob("test_*.py")), "a test file directly in tests/: put it in its stage's folder"
    assert not [f for f in TEST_FILES if "helpers" in f.relative_to(TESTS).parts], "a test file among the helpers"
    dup = [n for n, c in Counter(f.name for f in TEST_FILES).items() if c > 1]
    assert not dup, f"test files with the same base name (pytest imports them by it): {dup}"
    assert not [p for p in TESTS.rglob("__init__.py") if p.parent != TESTS / "helpers"]


def test_no_test_module_imports_another():
    bad = [
        f"{f.relative_to(ROOT)}: {m.group(0)}"
        for f in TEST_FILES
        for m in re.finditer(
            r"^\s*(?:from (?:test_\w+|conftest) import|import (?:test_\w+|conftest)\b).*", f.read_text(), re.M
        )
    ]
    assert not bad, "\n".join(bad)


def _citations():
    for path, text in FILES:
        for n, line in enumerate(text.splitlines(), 1):
            for m in PATH.finditer(line):
                yield f"{path.relative_to(ROOT)}:{n}", m.group(0).rstrip("./-"), line[m.end() :]


def test_every_cited_test_path_exists():
    missing = []
    for where, cited, _ in _citations():
        if "<" in cited or cited in ABSENT_ON_PURPOSE:  # a template (tests/<stage>/...) or absent on purpose
            continue
        hits = list(ROOT.glob(cited)) if "*" in cited else [ROOT / cited] if (ROOT / cited).exists() else []
        # a module attribute (tests/helpers/pipeline_utils.LocalHttpServer) names the module
        if not hits and "." in cited and (ROOT / cited).suffix != ".py":
            hits = [p for p in [ROOT / (cited.rsplit(".", 1)[0] + ".py")] if p.exists()]
        if not hits:
            missing.append(f"{where}: {cited}")
    assert not missing, "cited test paths that do not exist:\n" + "\n".join(missing)


def test_every_cited_test_function_exists():
    missing = []
    for where, cited, rest in _citations():
        if not cited.endswith(".py") or "*" in cited or not (ROOT / cited).is_file():
            continue
        names = set(re.findall(r"^\s*(?:async )?def (test_\w+)", (ROOT / cited).read_text(), re.M))
        # the names right after the path, and the ::names that follow on the line until the next tests/ path
        for name in FUNC.findall(rest.split("tests/")[0]):
            if name not in names:
                missing.append(f"{where}: {cited}::{name}")
    for path, text in FILES:
        if path.suffix != ".md":
            continue
        for n, line in enumerate(text.splitlines(), 1):
            missing += [
                f"{path.relative_to(ROOT)}:{n}: {name}" for name in BARE.findall(line) if name not in DEFINED | PROFILES
            ]
    assert not missing, "cited test functions that do not exist:\n" + "\n".join(missing)
