"""nextflow_schema.json documents exactly the params of nextflow.config, with matching defaults, and its enums are
values the CLI options they are passed to (through ext.args in conf/modules.config) accept.

The schema is the one source of the rules the pipeline enforces (subworkflows/local/utils_chromaflow/schema.nf reads it;
tests/pipeline/test_params.py checks each rule in the real Nextflow); this file keeps it in step with the config and
the CLI.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from chromaflow.cli import _build_parser

ROOT = Path(__file__).resolve().parents[2]
DYNAMIC = object()  # a default computed when the config is read (e.g. the launch time)


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
        elif re.fullmatch(r"'[^']*'|\"[^\"$]*\"", raw):
            val = raw[1:-1]
        else:
            val = DYNAMIC
        out[m.group(1)] = val
    return out


def schema() -> dict:
    return json.loads((ROOT / "nextflow_schema.json").read_text())


def schema_params() -> dict[str, dict]:
    s = schema()
    props: dict[str, dict] = {}
    for group in s["$defs"].values():
        props.update(group["properties"])
    assert len(s["allOf"]) == len(s["$defs"])
    return props


def test_schema_lists_every_param_and_nothing_else():
    assert set(schema_params()) == set(config_params())


def test_schema_defaults_match_the_config():
    cfg = config_params()
    for name, spec in schema_params().items():
        assert spec.get("description"), name
        if cfg[name] is DYNAMIC:
            assert "default" not in spec, f"{name}: computed when the config is read; the schema cannot state it"
            continue
        assert spec.get("default") == cfg[name], name
        if "enum" in spec and cfg[name] is not None:
            assert cfg[name] in spec["enum"], name


def test_outdir_is_required_and_has_no_default():
    io = schema()["$defs"]["input_output_options"]
    assert io["required"] == ["outdir"]
    assert config_params()["outdir"] is None


# schema enum -> (chromaflow command, CLI option): the value is passed through ext.args in conf/modules.config
ENUM_TO_CLI = {
    "h5_compression": ("fasta2h5", "--compression"),
    "predict_device": ("predict", "--device"),
    "predict_precision": ("predict", "--precision"),
    "track_format": ("bigwig", "--format"),
    "track_strand": ("bigwig", "--strand"),
    "genie3_layout": ("genie3", "--layout"),
    "genie3_tree_method": ("genie3", "--tree-method"),
    "genie3_engine": ("genie3", "--engine"),
    "genie3_importance": ("genie3", "--importance"),
    "genie3_prior_check": ("genie3", "--prior-check"),
    "interpret_method": ("attribute", "--method"),
    "train_device": ("train", "--device"),
    "train_precision": ("train", "--precision"),
    "train_data_mode": ("train", "--data-mode"),
}


def _choices(command: str, option: str) -> list[str]:
    parser = _build_parser(command)
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    action = next(a for a in sub._actions if option in a.option_strings)
    return list(action.choices)


def test_every_enum_param_is_mapped_to_a_cli_option():
    enums = {n for n, s in schema_params().items() if "enum" in s}
    # mode and publish_dir_mode are Nextflow's own, not a CLI option; predict_from chooses the workflow's route
    # (PREDICT's --h5 or --fasta input: tests/pipeline/test_pipeline.py runs both)
    assert enums - {"mode", "publish_dir_mode", "predict_from"} == set(ENUM_TO_CLI)


@pytest.mark.parametrize("param", sorted(ENUM_TO_CLI))
def test_schema_enum_values_are_accepted_by_the_cli(param):
    command, option = ENUM_TO_CLI[param]
    assert set(schema_params()[param]["enum"]) <= set(_choices(command, option)), (param, command, option)
    modules = (ROOT / "conf" / "modules.config").read_text()
    if param != "genie3_layout":  # the layout reaches GENIE3 through the samplesheet meta, not ext.args
        assert f"{option} ${{params.{param}}}" in modules, f"{param} is not passed as {option} in conf/modules.config"
