"""The modules' output declarations (and inputs with named arguments) are method calls, ``path("x", emit: y)``, not
command expressions ``path "x", emit: y``: Groovy's parser (Nextflow 24.10 ships Groovy 4's ANTLR4 parser) takes ~40
ms a module for a command expression that ends in named arguments, for every launch, even with its DFA warm.
Measured on this project (2 cores): parsing the 42 scripts of a whole-pipeline launch 1.64 s warm and 3.78 s cold
as command expressions against 0.31 s and 2.66 s as calls, and ``nextflow run main.nf --help`` 11.1 → 9.3 s wall;
every launch pays it (each nf-test case, each pytest pipeline run, each user's run or ``-resume``). The same
elements, channels and emit names: ``tests/pipeline/test_meta_yml.py`` reads both forms."""

from __future__ import annotations

import re

from helpers.environment import ROOT

#: an input or output element written as a command expression: ``tuple val(meta), path(x), emit: y``
COMMAND_FORM = re.compile(r"^\s*(tuple|path|val|env|eval|stdout|file)\s+[^(\s]")
#: a named argument outside any parentheses (``emit: y``, ``stageAs: 'x/*'``)
TOP_NAMED = re.compile(r"\b\w+:\s*\S")


def _top_level(line: str) -> str:
    """``line`` without its strings, trailing comment and parenthesised parts (with their contents)."""
    line = re.sub(r"'[^']*'|\"[^\"]*\"", "''", line).split("//")[0]
    while (shorter := re.sub(r"\([^()]*\)", "", line)) != line:
        line = shorter
    return line


def command_form_elements(text: str) -> list[str]:
    """The lines of the ``input:`` and ``output:`` blocks of ``text`` that declare an element as a command expression
    with named arguments outside its calls' parentheses (the slow form)."""
    found, section = [], None
    for line in text.splitlines():
        label = re.match(r"^\s*(input|output|when|script|stub|exec|shell):\s*$", line)
        if label:
            section = label.group(1)
        elif section in ("input", "output") and COMMAND_FORM.match(line) and TOP_NAMED.search(_top_level(line)):
            found.append(line.strip())
    return found


def test_module_elements_with_named_arguments_are_calls():
    """Every module's input and output elements with named arguments are calls; the check finds the command form
    (and only it) in a sample."""
    sample = "process X {\n    input:\n    tuple val(m), path(x, stageAs: 'a/*')\n    path y, stageAs: 'b/*'\n"
    sample += '    output:\n    path "v.yml", emit: versions\n    path("w.yml", emit: w)\n    script:\n    "echo x"\n}'
    assert command_form_elements(sample) == ["path y, stageAs: 'b/*'", 'path "v.yml", emit: versions']
    mains = sorted(ROOT.glob("modules/local/*/main.nf"))
    assert mains
    slow = {str(m.relative_to(ROOT)): lines for m in mains if (lines := command_form_elements(m.read_text()))}
    assert not slow, f"elements written as command expressions with named arguments (write path(x, emit: y)): {slow}"
