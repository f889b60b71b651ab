"""docs/architecture.md stays true to the tree: every package of ``src/chromaflow`` (``<name>/``), every module at the
package's top (``<name>.py``), every workflow and every local subworkflow is named in its tree, and nothing the tree
names under ``src/chromaflow/`` is gone. A newcomer reads that page first; a stage added without it, or a module
renamed without it, fails here."""

from __future__ import annotations

import re

from helpers.environment import ROOT

DOC = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "src" / "chromaflow"


def _tree() -> str:
    """The fenced block under '## The tree'."""
    text = DOC.read_text()
    section = text[text.index("## The tree") :]
    return section[section.index("```") + 3 : section.index("```", section.index("```") + 3)]


def _named(tree: str) -> set[str]:
    """The first word of every tree line: ``cli.py``, ``genome/``, ``workflows/chromaflow.nf``, ..."""
    return {m.group(1) for m in re.finditer(r"^ {0,2}([\w./<>-]+)\s", tree, re.M)}  # entries: columns 0-2


def test_every_package_and_top_module_is_named():
    named = _named(_tree())
    packages = {f"{d.name}/" for d in PACKAGE.iterdir() if (d / "__init__.py").is_file()}
    modules = {f.name for f in PACKAGE.glob("*.py") if f.name not in ("__init__.py", "__main__.py")}
    assert packages and modules
    missing = sorted((packages | modules) - named)
    assert not missing, f"docs/architecture.md's tree does not name {missing}"


def test_every_workflow_and_subworkflow_is_named():
    text = DOC.read_text()
    files = [
        *ROOT.glob("workflows/*.nf"),
        *ROOT.glob("subworkflows/local/*.nf"),
        *ROOT.glob("subworkflows/local/*/main.nf"),
    ]
    assert files
    missing = []
    for f in files:
        name = f.parent.name if f.name == "main.nf" else f.name
        if name not in text:
            missing.append(str(f.relative_to(ROOT)))
    assert not missing, f"docs/architecture.md does not name {missing}"


def test_what_the_tree_names_in_the_package_exists():
    """A line of the package's part of the tree (indented under ``src/chromaflow/``) names a file or folder that is
    there: a removed or renamed module does not linger in the docs."""
    tree = _tree()
    block = tree[tree.index("src/chromaflow/") : tree.index("\ntests/")]
    gone = [name for name in _named(block) if name != "src/chromaflow/" and not (PACKAGE / name.rstrip("/")).exists()]
    assert not gone, f"docs/architecture.md names {gone}, which src/chromaflow/ does not have"


def _block(text: str, label: str) -> list[str]:
    """The names listed under ``take:`` or ``emit:`` of a workflow's text (up to the next label or the end)."""
    m = re.search(rf"^\s*{label}:\s*\n(.*?)(?=^\s*(?:take|main|emit):|^}}|\Z)", text, re.M | re.S)
    if not m:
        return []
    return [re.match(r"\s*(\w+)", ln).group(1) for ln in m.group(1).splitlines() if re.match(r"\s*\w", ln)]


def test_every_subworkflow_has_its_folder_meta_and_spec():
    """nf-core's layout: ``subworkflows/local/<name>/`` with ``main.nf``, a ``meta.yml`` whose inputs and outputs are
    the workflow's ``take:`` and ``emit:`` names, in order, and an nf-test spec (``<name>/tests/main.nf.test``)."""
    import yaml

    folders = sorted(d for d in (ROOT / "subworkflows" / "local").iterdir() if d.is_dir())
    assert folders and not list((ROOT / "subworkflows" / "local").glob("*.nf")), "a flat subworkflow file"
    for d in folders:
        assert (d / "main.nf").is_file() and (d / "tests" / "main.nf.test").is_file(), d
        meta = yaml.safe_load((d / "meta.yml").read_text())
        assert meta["name"] == d.name
        text = (d / "main.nf").read_text()
        workflows = re.findall(r"^workflow (\w+) \{\n(.*?)^\}", text, re.M | re.S)
        takes = [n for _, body in workflows for n in _block(body, "take")]
        emits = [n for _, body in workflows for n in _block(body, "emit")]
        assert [next(iter(i)) for i in meta["input"]] == takes, d.name
        assert [next(iter(o)) for o in meta["output"]] == emits, d.name


#: a function longer than this needs its reason beside it: a comment ``# long: <why>`` on its ``def`` line or the
#: line above (issue 51: functions of ~60 lines at most, over 80 only with the reason written where it is read)
LONG_FUNCTION = 80


def long_functions(root, folders) -> list[str]:
    """``path:line name (N lines)`` (paths relative to ``root``) of every function over :data:`LONG_FUNCTION` lines
    without a ``# long:`` comment on its ``def`` line or the line above, in the Python files under ``folders``."""
    import ast

    found = []
    for folder in folders:
        for f in sorted(folder.rglob("*.py")):
            if "__pycache__" in f.parts:
                continue
            lines = f.read_text().splitlines()
            for node in ast.walk(ast.parse("\n".join(lines), str(f))):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                n = node.end_lineno - node.lineno + 1
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                beside = " ".join(lines[max(0, first - 2) : node.lineno])
                if n > LONG_FUNCTION and "# long:" not in beside:
                    found.append(f"{f.relative_to(root)}:{node.lineno} {node.name} ({n} lines)")
    return found


def test_functions_are_short_or_say_why(tmp_path):
    """Every function of the package and the benchmarks is at most LONG_FUNCTION lines or says why beside its def;
    the check itself finds a long function without the comment and accepts it with one."""
    body = "    x = 1\n" * LONG_FUNCTION
    (tmp_path / "a.py").write_text("def f():\n" + body + "\n\ndef g():  # long: one table\n" + body)
    assert long_functions(tmp_path, [tmp_path]) == [f"a.py:1 f ({LONG_FUNCTION + 1} lines)"]
    found = long_functions(ROOT, [PACKAGE, ROOT / "benchmarks"])
    assert not found, f"functions over {LONG_FUNCTION} lines without a '# long:' reason: {found}"


UTILS = PACKAGE / "utils"


def test_every_shared_module_is_named_under_utils():
    """``src/chromaflow/utils/`` (what every command shares) lists its modules one level deeper in the tree: each
    module there is named under ``utils/``, and each name there is a module."""
    tree = _tree()
    block = tree[tree.index("\n  utils/") + 1 :]
    block = block[: re.search(r"^  \S", block[3:], re.M).start() + 3]  # up to the next package-level entry
    named = {m.group(1) for m in re.finditer(r"^    ([\w.]+\.py)\s", block, re.M)}
    modules = {f.name for f in UTILS.glob("*.py") if f.name != "__init__.py"}
    assert modules, "src/chromaflow/utils/ has no module"
    assert named == modules, (
        f"docs/architecture.md's utils/ names {sorted(named - modules)} (gone), misses {sorted(modules - named)}"
    )


def test_utils_imports_no_stage():
    """The shared modules import one another, the standard library and third-party packages, never a stage's package
    (a stage depends on utils, not the other way round)."""
    stages = {d.name for d in PACKAGE.iterdir() if (d / "__init__.py").is_file()} - {"utils"}
    bad = []
    for f in sorted(UTILS.glob("*.py")):
        for m in re.finditer(r"^\s*(?:from\s+(\.+|chromaflow\.)(\w+)|import\s+chromaflow\.(\w+))", f.read_text(), re.M):
            dots, name = m.group(1), m.group(2) or m.group(3)
            top = name if dots in (None, "chromaflow.", "..") else None  # `.x` is a sibling in utils
            if top in stages:
                bad.append(f"{f.name}: {m.group(0).strip()}")
    assert not bad, f"src/chromaflow/utils/ imports a stage: {bad}"
