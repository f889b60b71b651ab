"""nextflow_schema.json documents exactly the params of nextflow.config, with matching defaults."""
from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def config_params() -> dict[str, object]:
    text = (ROOT / "nextflow.config").read_text()
    block = re.search(r"^params \{\n(.*?)^\}", text, re.S | re.M).group(1)
    out: dict[str, object] = {}
    for line in block.splitlines():
        m = re.match(r"\s+(\w+)\s*=\s*(.+?)\s*(//.*)?$", line)
        if not m:
            continue
        raw = m.group(2)
        if raw == "null":
            val: object = None
        elif raw in ("true", "false"):
            val = raw == "true"
        elif re.fullmatch(r"-?\d+", raw):
            val = int(raw)
        elif re.fullmatch(r"-?\d+\.\d+", raw):
            val = float(raw)
        else:
            val = raw.strip("'\"")
        out[m.group(1)] = val
    return out


def schema_params() -> dict[str, dict]:
    schema = json.loads((ROOT / "nextflow_schema.json").read_text())
    props: dict[str, dict] = {}
    for group in schema["$defs"].values():
        props.update(group["properties"])
    assert len(schema["allOf"]) == len(schema["$defs"])
    return props


def test_schema_lists_every_param_and_nothing_else():
    assert set(schema_params()) == set(config_params())


def test_schema_defaults_match_the_config():
    cfg = config_params()
    for name, spec in schema_params().items():
        assert spec.get("default") == cfg[name], name
        assert spec.get("description"), name
        if "enum" in spec and cfg[name] is not None:
            assert cfg[name] in spec["enum"], name
