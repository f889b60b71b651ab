"""The modules' output declarations are method calls, ``path("x", emit: y)``, not command expressions
``path "x", emit: y``: Groovy's parser (Nextflow 24.10 ships Groovy 4's ANTLR4 parser) predicts a command expression
that ends in named arguments with its slow full-context mode, ~40 ms a module for every launch even when warm.
Measured on this project (2 cores): parsing the 42 scripts of a whole-pipeline launch 1.64 s warm and 3.78 s cold
as command expressions against 0.31 s and 2.66 s as calls, and ``nextflow run main.nf --help`` 11.1 → 9.3 s wall;
every launch pays it (each nf-test case, each pytest pipeline run, each user's run or ``-resume``). The same
elements, channels and emit names: ``tests/pipeline/test_meta_yml.py`` reads both forms."""

from __future__ import annotations

import re

from helpers.environment import ROOT

#: an output element written as a command expression with named arguments: ``tuple val(meta), path(x), emit: y``
COMMAND_FORM = re.compile(r"^\s*(tuple|path|val|env|eval|stdout|file)\s+[^(\s].*\b\w+:\s*\S")


def command_form_outputs(text: str) -> list[str]:
    """The lines of the ``output:`` blocks of ``text`` that declare an element as a command expression with named
    arguments (the slow form)."""
    found, section = [], None
    for line in text.splitlines():
        label = re.match(r"^\s*(input|output|when|script|stub|exec|shell):\s*$", line)
        if label:
            section = label.group(1)
        elif section == "output" and COMMAND_FORM.match(line) and not line.lstrip().startswith("//"):
            found.append(line.strip())
    return found


def test_module_outputs_are_method_calls():
    """Every module's output elements are calls; the check finds the command form (and only it) in a sample."""
    sample = 'process X {\n    output:\n    path "v.yml", emit: versions\n    path("w.yml", emit: w)\n'
    sample += '    script:\n    "echo x"\n}'
    assert command_form_outputs(sample) == ['path "v.yml", emit: versions']
    mains = sorted(ROOT.glob("modules/local/*/main.nf"))
    assert mains
    slow = {str(m.relative_to(ROOT)): lines for m in mains if (lines := command_form_outputs(m.read_text()))}
    assert not slow, f"output elements written as command expressions (write path(..., emit: x)): {slow}"
