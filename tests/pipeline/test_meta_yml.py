"""Every module and subworkflow has an nf-core ``meta.yml`` that says what its ``main.nf`` declares.

nf-core's layout (https://nf-co.re/docs/guidelines/components/modules): ``modules/local/<name>/meta.yml`` beside the
process, ``subworkflows/local/<name>/meta.yml`` beside the workflow. A module's ``input`` is a list of channels in
the order of the ``input:`` block: a channel of one element is that element (``- model: {...}``), a tuple is the
list of its elements (``- - meta: {...}``). Its ``output`` maps each ``emit:`` name, in order, to the channel's
elements; an output element is named by the ``val``'s name or the ``path``'s pattern as written in ``main.nf``
(``${prefix}.h5``). A subworkflow lists its ``take:`` names as ``input`` and its ``emit:`` names as ``output``.
``main.nf`` is read with regexes, as ``nf-core modules lint`` reads it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted(d for d in (ROOT / "modules" / "local").iterdir() if d.is_dir())
SUBWORKFLOWS = sorted(d for d in (ROOT / "subworkflows" / "local").iterdir() if d.is_dir())

#: ``val(x)``, ``path(x, stageAs: ...)``, ``val x``, ``path "x"``, ``path("x", includeInputs: true)``: the element's
#: name (a quoted pattern keeps its text without the quotes)
ELEMENT = re.compile(
    r"""\b(?:val|path|env|eval)(?:\s*\(\s*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<word>[^,)\s]+))"""
    r"""|\s+(?:"(?P<dq2>[^"]*)"|'(?P<sq2>[^']*)'|(?P<word2>[^,\s]+)))"""
)
EMIT = re.compile(r"\bemit:\s*(\w+)")


def _elements(line: str) -> list[str]:
    return [next(g for g in m.groups() if g is not None) for m in ELEMENT.finditer(line)]


def _block(body: str, label: str, ends: str) -> list[str]:
    """The lines of a process's ``label:`` block, up to the next of the labels ``ends``, without comments."""
    m = re.search(rf"^\s*{label}:\s*\n(.*?)^\s*(?:{ends}):", body, re.M | re.S)
    assert m, f"no {label}: block"
    lines = [re.sub(r"\s//.*$", "", ln).rstrip() for ln in m.group(1).splitlines()]
    return [ln for ln in lines if ln.strip() and not ln.strip().startswith("//")]


def process(main_nf: Path) -> tuple[str, list, dict[str, list]]:
    """The process name, its inputs (a str per single-element channel, a list per tuple) and its outputs
    ({emit: [element or [tuple elements]]}) as ``main.nf`` declares them."""
    text = main_nf.read_text()
    found = re.findall(r"^process (\w+) \{\n(.*?)^\}", text, re.M | re.S)
    assert len(found) == 1, f"{main_nf}: expected one process, found {len(found)}"
    name, body = found[0]
    inputs: list = []
    for line in _block(body, "input", "output"):
        names = _elements(line)
        assert names, f"{main_nf}: input line without an element: {line.strip()!r}"
        inputs.append(names if line.strip().startswith("tuple") else names[0])
    outputs: dict[str, list] = {}
    for line in _block(body, "output", "when|script|exec"):
        emit = EMIT.search(line)
        assert emit, f"{main_nf}: output without emit: {line.strip()!r}"
        names = _elements(line[: emit.start()])
        outputs[emit.group(1)] = [names if line.strip().startswith("tuple") else names[0]]
    return name, inputs, outputs


def _channel_names(channel) -> str | list[str]:
    """A meta.yml channel's element names: a str for a single element, a list for a tuple."""
    if isinstance(channel, list):
        return [_one_key(e) for e in channel]
    return _one_key(channel)


def _one_key(element) -> str:
    assert isinstance(element, dict) and len(element) == 1, f"an element is a map of one name: {element!r}"
    return next(iter(element))


def _elements_of(channel) -> list[tuple[str, dict]]:
    items = channel if isinstance(channel, list) else [channel]
    return [next(iter(e.items())) for e in items]


def load(folder: Path) -> dict:
    path = folder / "meta.yml"
    assert path.is_file(), f"{folder.relative_to(ROOT)} has no meta.yml"
    meta = yaml.safe_load(path.read_text())
    assert isinstance(meta, dict), f"{path.relative_to(ROOT)} is not a YAML mapping"
    return meta


def check_common(meta: dict, folder: Path) -> None:
    where = folder.relative_to(ROOT)
    assert meta.get("name") == folder.name, f"{where}/meta.yml: name {meta.get('name')!r}, folder {folder.name!r}"
    assert isinstance(meta.get("description"), str) and meta["description"].strip(), where
    keywords = meta.get("keywords")
    assert isinstance(keywords, list) and len(set(keywords)) == len(keywords) >= 3, f"{where}: 3 or more keywords"
    for key in ("authors", "maintainers"):
        assert isinstance(meta.get(key), list) and meta[key], f"{where}: {key}"


@pytest.mark.parametrize("folder", MODULES, ids=[d.name for d in MODULES])
def test_module_meta_yml_matches_main_nf(folder):
    meta = load(folder)
    check_common(meta, folder)
    name, inputs, outputs = process(folder / "main.nf")
    assert name == folder.name.upper(), f"{folder.name}: process {name}"

    assert [_channel_names(c) for c in meta.get("input") or []] == inputs, f"{folder.name}: input"
    assert isinstance(meta.get("output"), dict), f"{folder.name}: output maps emit names to channels"
    assert list(meta["output"]) == list(outputs), f"{folder.name}: output emit names"
    for emit, channels in meta["output"].items():
        assert [_channel_names(c) for c in channels] == outputs[emit], f"{folder.name}: output {emit}"


@pytest.mark.parametrize("folder", MODULES, ids=[d.name for d in MODULES])
def test_module_meta_yml_describes_tools_and_elements(folder):
    """nf-core's meta-schema, the parts we rely on: each tool has a description, a homepage or documentation, a
    licence list and an ``identifier`` (``""`` where bio.tools has none); each element a type and a description, and
    each file a pattern."""
    meta = load(folder)
    assert meta.get("tools"), f"{folder.name}: tools"
    for tool in meta["tools"]:
        (tool_name, t), *rest = tool.items()
        assert not rest and t.get("description"), f"{folder.name}: tool {tool_name}"
        assert t.get("homepage") or t.get("documentation"), f"{folder.name}: tool {tool_name}: homepage"
        assert isinstance(t.get("licence"), list) and t["licence"], f"{folder.name}: tool {tool_name}: licence"
        assert "identifier" in t, f"{folder.name}: tool {tool_name}: identifier"
    channels = list(meta.get("input") or []) + [c for cs in meta["output"].values() for c in cs]
    for channel in channels:
        for element, props in _elements_of(channel):
            assert props.get("type") and props.get("description"), f"{folder.name}: {element}"
            if props["type"] == "file":
                assert props.get("pattern"), f"{folder.name}: {element}: pattern"
            if element in ("meta", "metas"):
                assert props["type"] in ("map", "list"), f"{folder.name}: {element} is a map"


def _names(text: str, label: str) -> list[str]:
    m = re.search(rf"^\s*{label}:\s*\n(.*?)(?=^\s*(?:take|main|emit):|^\}}|\Z)", text, re.M | re.S)
    return [re.match(r"\s*(\w+)", ln).group(1) for ln in m.group(1).splitlines() if re.match(r"\s*\w", ln)] if m else []


@pytest.mark.parametrize("folder", SUBWORKFLOWS, ids=[d.name for d in SUBWORKFLOWS])
def test_subworkflow_meta_yml_matches_main_nf(folder):
    meta = load(folder)
    check_common(meta, folder)
    text = (folder / "main.nf").read_text()
    bodies = [body for _, body in re.findall(r"^workflow (\w+) \{\n(.*?)^\}", text, re.M | re.S)]
    takes = [n for body in bodies for n in _names(body, "take")]
    emits = [n for body in bodies for n in _names(body, "emit")]
    assert [_one_key(i) for i in meta.get("input") or []] == takes, f"{folder.name}: input"
    assert [_one_key(o) for o in meta.get("output") or []] == emits, f"{folder.name}: output"


def test_every_component_folder_is_checked():
    """No module or subworkflow escapes the checks above: each folder holds a main.nf (and so needs a meta.yml)."""
    assert len(MODULES) >= 20 and len(SUBWORKFLOWS) >= 5
    for folder in MODULES + SUBWORKFLOWS:
        assert (folder / "main.nf").is_file(), folder.relative_to(ROOT)
