"""Parameter validation from nextflow_schema.json, one test per rule, in the real Nextflow.

Most cases run through the pipeline's own function (checkParams in subworkflows/local/utils_chromaflow/schema.nf, which
main.nf calls) in one JVM (tests/pipeline/nextflow/validate_params.nf), on the defaults of nextflow.config plus the
case's values. The cases are generated from the schema where a rule is generic (every enum, every minimum, every
integer/boolean/string type), so a parameter added to the schema is covered the day it is added; each case
checks the exact list of messages, so a rule that fires where it should not fails too. A few runs of main.nf
itself prove the pipeline calls the validation, stops before any task, and that --input is --genomes.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from helpers.pipeline_utils import ROOT, run_nextflow

pytestmark = pytest.mark.pipeline

SHEET = str(ROOT / "assets" / "test" / "samplesheet.csv")
TRAIN_SHEET = str(ROOT / "assets" / "train_test" / "sheet.csv")
BASE = {"outdir": "out", "input": SHEET, "test_model": True}


def _schema() -> dict[str, dict]:
    s = json.loads((ROOT / "nextflow_schema.json").read_text())
    props: dict[str, dict] = {}
    for group in s["$defs"].values():
        for name, spec in group["properties"].items():
            props[name] = dict(spec, required_=name in group.get("required", []))
    return props


SCHEMA = _schema()


def _types(spec: dict) -> list[str]:
    t = spec.get("type", [])
    return t if isinstance(t, list) else [t]


def _type_word(types: list[str]) -> str:
    words = {"integer": "an integer", "number": "a number", "boolean": "true or false", "string": "a string"}
    return " or ".join(words[t] for t in types)


def _fmt(v) -> str:
    return str(v).replace(".0", "") if isinstance(v, float) and v == int(v) else str(v)


# every case: (overrides of BASE, expected errors, expected warnings)
CASES: dict[str, tuple[dict, list[str], list[str]]] = {
    "valid_defaults": ({}, [], []),
    "valid_test_profile_values": (
        {
            "subsequence_length": 2000,
            "predict_batch_size": 8,
            "predict_shards": 2,
            "track_strand": "all",
            "genie3_n_trees": 100,
            "genie3_chunk_size": 8,
        },
        [],
        [],
    ),
    "valid_numeric_strings": ({"subsequence_length": "2000", "benchmark_genome_gbp": "0.5"}, [], []),
    "required_outdir": ({"outdir": None}, ["--outdir is required: " + SCHEMA["outdir"]["description"]], []),
    "input_missing": (
        {"input": None},
        ["--input (or its synonym --genomes) is required: a CSV samplesheet with columns id,fasta (see docs/usage.md)"],
        [],
    ),
    "genomes_is_input": ({"input": None, "genomes": SHEET}, [], []),
    "input_and_genomes_same_file": ({"genomes": SHEET}, [], []),
    "input_and_genomes_differ": (
        {"genomes": str(ROOT / "assets" / "test" / "other.csv")},
        [
            f"--genomes: file not found: {ROOT / 'assets' / 'test' / 'other.csv'}",
            f"--input and --genomes are the same parameter; they name different files "
            f"('{SHEET}' and '{ROOT / 'assets' / 'test' / 'other.csv'}'): give one",
        ],
        [],
    ),
    "input_not_found": ({"input": "/nonexistent/sheet.csv"}, ["--input: file not found: /nonexistent/sheet.csv"], []),
    "model_required": (
        {"test_model": False},
        ["--model is required (a Predmoter .ckpt path or https URL), or use --skip_predict"],
        [],
    ),
    "model_not_needed_with_skip_predict": ({"test_model": False, "skip_predict": True}, [], []),
    "model_not_found": (
        {"test_model": False, "model": "/nonexistent/m.ckpt"},
        ["--model: file not found: /nonexistent/m.ckpt"],
        [],
    ),
    "model_url_is_checked_when_staged": ({"test_model": False, "model": "https://example.org/m.ckpt"}, [], []),
    "blacklist_not_found": (
        {"track_blacklist": "/nonexistent/bl.txt"},
        ["--track_blacklist: file not found: /nonexistent/bl.txt"],
        [],
    ),
    "blacklist_is_a_directory": (
        {"track_blacklist": str(ROOT / "assets")},
        [f"--track_blacklist: is a directory, expected a file: {ROOT / 'assets'}"],
        [],
    ),
    "train_mode_needs_no_input": (
        {"mode": "train", "input": None, "test_model": False, "train_sheet": TRAIN_SHEET},
        [],
        [],
    ),
    "train_mode_needs_train_sheet": (
        {"mode": "train", "test_model": False},
        [
            "--train_sheet is required with --mode train: a CSV with columns id,split,fasta,"
            "species,dataset,file,library,shift (see docs/training.md)"
        ],
        [],
    ),
    "train_sheet_not_found": (
        {"mode": "train", "train_sheet": "/nonexistent/train.csv"},
        ["--train_sheet: file not found: /nonexistent/train.csv"],
        [],
    ),
    "train_init_not_found": (
        {"mode": "train", "train_sheet": TRAIN_SHEET, "train_init": "/nonexistent/m.ckpt"},
        ["--train_init: file not found: /nonexistent/m.ckpt"],
        [],
    ),
    "unknown_parameter_warns": (
        {"skip_predicts": True},
        [],
        ["unknown parameter --skip_predicts (not in nextflow_schema.json; ignored)"],
    ),
    "kebab_and_camel_spellings_are_known": ({"skip-predict": False, "skipPredict": False}, [], []),
    "several_problems_all_reported": (
        {"predict_device": "gpu", "genie3_n_trees": 0},
        ["--predict_device must be one of auto, cpu, cuda (got 'gpu')", "--genie3_n_trees must be >= 1 (got 0)"],
        [],
    ),
}

# pattern rule: a value each patterned parameter must refuse (the test below checks every pattern is listed)
PATTERN_BAD = {
    "input": "sheet.tsv",
    "genomes": "sheet.tsv",
    "predict_shards": "many",
    "genie3_max_features": "lots",
    "trace_report_suffix": "a/b",
    "train_sheet": "sheet.tsv",
    "peaks_cutoff": "lots",
    "interpret_jaspar": "CORE/plants;rm",
}


def _order(name: str) -> int:
    return list(SCHEMA).index(name)


def _generated() -> None:
    for name, spec in SCHEMA.items():
        types = _types(spec)
        if "enum" in spec:
            CASES[f"enum_{name}"] = (
                {name: "nope"},
                [f"--{name} must be one of {', '.join(map(str, spec['enum']))} (got 'nope')"],
                [],
            )
            for ok in spec["enum"]:
                extra = {"test_model": False, "skip_predict": True} if name == "mode" else {}
                if name == "mode" and ok == "train":
                    extra["train_sheet"] = TRAIN_SHEET
                CASES[f"enum_{name}_{ok}"] = ({name: ok, **extra}, [], [])
        if "minimum" in spec:
            lo = spec["minimum"]
            CASES[f"minimum_{name}"] = ({name: lo - 1}, [f"--{name} must be >= {_fmt(lo)} (got {_fmt(lo - 1)})"], [])
            CASES[f"minimum_{name}_ok"] = ({name: lo}, [], [])
        if "exclusiveMinimum" in spec:
            lo = spec["exclusiveMinimum"]
            CASES[f"exclusive_minimum_{name}"] = ({name: lo}, [f"--{name} must be > {_fmt(lo)} (got {_fmt(lo)})"], [])
        if types == ["integer"]:
            CASES[f"type_integer_{name}"] = ({name: "abc"}, [f"--{name} must be an integer (got 'abc')"], [])
            CASES[f"type_integer_{name}_fraction"] = ({name: 2.5}, [f"--{name} must be an integer (got '2.5')"], [])
        if types == ["number"]:
            CASES[f"type_number_{name}"] = ({name: "abc"}, [f"--{name} must be a number (got 'abc')"], [])
        if types == ["boolean"]:
            CASES[f"type_boolean_{name}"] = ({name: "yes"}, [f"--{name} must be true or false (got 'yes')"], [])
        if "string" in types and "boolean" not in types:
            # a bare --flag gives Nextflow the value true
            CASES[f"bare_flag_{name}"] = ({name: True}, [f"--{name} needs a value ({_type_word(types)})"], [])
        if "pattern" in spec:
            bad = PATTERN_BAD[name]
            CASES[f"pattern_{name}"] = ({name: bad}, [f"--{name} '{bad}' does not match {spec['pattern']}"], [])
    # rules across parameters fire after the per-parameter ones
    CASES["pattern_genomes"][1].append(
        f"--input and --genomes are the same parameter; they name different files ('{SHEET}' and 'sheet.tsv'): give one"
    )


_generated()


def test_every_pattern_has_a_case():
    assert {n for n, s in SCHEMA.items() if "pattern" in s} == set(PATTERN_BAD)


def test_every_rule_keyword_of_the_schema_is_checked():
    """A keyword the validator does not implement would silently not be enforced."""
    known = {
        "type",
        "default",
        "description",
        "help_text",
        "enum",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "format",
        "exists",
        "hidden",
        "required_",
        # annotations: the file's kind, and the sheet schema whose rules the sheet reader enforces
        # (subworkflows/local/utils_chromaflow/samplesheet.nf; tests/pipeline/test_samplesheet.py)
        "mimetype",
        "schema",
    }
    for name, spec in SCHEMA.items():
        assert set(spec) <= known, (name, set(spec) - known)
        if "format" in spec:
            assert spec["format"] in ("file-path", "directory-path"), name


@pytest.fixture(scope="module")
def results(tmp_path_factory, nextflow_bin):
    tmp = tmp_path_factory.mktemp("params")
    cases = {name: {**BASE, **over} for name, (over, _, _) in CASES.items()}
    (tmp / "cases.json").write_text(json.dumps(cases))
    res = subprocess.run(
        [
            "nextflow",
            "run",
            str(ROOT / "tests" / "pipeline" / "nextflow" / "validate_params.nf"),
            "-ansi-log",
            "false",
            "-c",
            str(ROOT / "nextflow.config"),
            "--cases",
            str(tmp / "cases.json"),
        ],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NXF_OFFLINE": "true"},
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    out = {}
    for line in res.stdout.splitlines():
        if line.startswith("RESULT\t"):
            _, name, payload = line.split("\t", 2)
            out[name] = json.loads(payload)
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_param_rule(results, case):
    _, errors, warnings = CASES[case]
    got = results[case]
    assert got["errors"] == errors
    assert got["warnings"] == warnings


# ---------------------------------------------------------------------------------------------------------------
# main.nf itself
# ---------------------------------------------------------------------------------------------------------------
def test_pipeline_stops_on_bad_params_before_any_task(tmp_path, nextflow_bin):
    """Bad values and a missing --outdir (without the test config, which gives nf-test's module specs one): every
    problem listed, no task run, nothing created -- no 'null/' or 'results/' folder, no reports."""
    res = run_nextflow(
        ["-profile", "test", "--predict_device", "gpu", "--genie3_chunk_size", "0", "--subsequence_length", "abc"],
        cwd=tmp_path,
        check=False,
        timeout=300,
        test_config=False,
    )
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert "chromaflow: invalid parameters (nextflow_schema.json):" in out
    for msg in (
        "--subsequence_length must be an integer (got 'abc')",
        "--predict_device must be one of auto, cpu, cuda (got 'gpu')",
        "--genie3_chunk_size must be >= 1 (got 0)",
        "--outdir is required: Where results are published (required).",
    ):
        assert f"  {msg}\n" in out, msg
    assert "Traceback" not in out and "Exception" not in out
    assert not (tmp_path / "work").exists() or not any((tmp_path / "work").iterdir())
    assert {p.name for p in tmp_path.iterdir()} <= {".nextflow", ".nextflow.log", "work"}


def test_help_is_built_from_the_schema(tmp_path, nextflow_bin):
    res = run_nextflow(["--help"], cwd=tmp_path, timeout=300)
    for name, spec in SCHEMA.items():
        line = next((ln for ln in res.stdout.splitlines() if ln.startswith(f"  --{name} ")), None)
        assert (line is None) == bool(spec.get("hidden")), name
        if line:
            assert spec["description"] in line, name
