"""Samplesheet validation in the real pipeline: every bad sheet stops the run before any task, with one line
naming the sheet, the line and the problem; every odd-but-valid sheet (BOM, CRLF, trailing empty lines, quoted
fields, paths with spaces, URLs that answer) gives exactly the rows it says.

The sheets are validated by the pipeline's own function (subworkflows/local/utils_chromaflow/samplesheet.nf) in one
Nextflow JVM
(tests/pipeline/nextflow/validate_sheets.nf); two tests run main.nf itself (one here: an unfetchable URL, found only
when the run stages it; the other is the pipeline nf-test spec's invalid-samplesheet case). URLs are served by a local
http server on
loopback that the test starts (tests/helpers/pipeline_utils.LocalHttpServer).
"""

from __future__ import annotations

import json
import re
import shutil

import pytest

from helpers.pipeline_utils import ROOT, LocalHttpServer, free_port, run_nextflow, validate_sheets

pytestmark = pytest.mark.pipeline

TEST = ROOT / "assets" / "test"
FASTA = TEST / "asmA.fa"

# case -> (sheet text with {fasta}, {dir} (the sheet's folder) and {url} (the http server) filled in,
#          expected: a regex the one error line must match, or the rows as [id, species, layout, fasta, expr, regs])
CASES: dict[str, tuple[str | bytes, object]] = {
    "missing_column": ("id,species\nA,sp\n", r"line 1: missing required column\(s\): fasta"),
    "extra_column": ("id,fasta,colour\nA,{fasta},red\n", r"line 1: unknown column\(s\): colour"),
    "duplicate_header_names": ("id,fasta,ID\nA,{fasta},B\n", r"line 1: duplicate column\(s\): id"),
    "duplicate_id": ("id,fasta\nA,{fasta}\nA,{fasta}\n", r"line 3: duplicate id 'A' \(first on line 2\)"),
    "missing_file": (
        "id,fasta\nA,/nonexistent/genome.fa\n",
        r"line 2: column 'fasta': file not found: /nonexistent/genome.fa",
    ),
    "fasta_is_a_directory": ("id,fasta\nA,{dir}\n", r"line 2: column 'fasta': not a regular file: "),
    "vcf_not_found": (
        "id,fasta,vcf\nA,{fasta},{dir}/no_such.vcf.gz\n",
        r"line 2: column 'vcf': file not found: .*no_such.vcf.gz",
    ),
    "id_with_space": ("id,fasta\nmy genome,{fasta}\n", r"line 2: column 'id': 'my genome' may only contain"),
    "id_with_slash": ("id,fasta\na/b,{fasta}\n", r"line 2: column 'id': 'a/b' may only contain"),
    "id_too_long": (
        "id,fasta\n" + "a" * 101 + ",{fasta}\n",
        r"line 2: column 'id': 'a{20}\.\.\.' is 101 characters; at most 100",
    ),
    "empty_sheet": ("id,fasta\n", r"no assemblies \(only a header line\)"),
    "empty_file": ("", r"file is empty"),
    "only_empty_lines": ("\n\n\r\n", r"file is empty"),
    "field_count": ("id,fasta\nA,{fasta},extra\n", r"line 2: 3 fields, but the header has 2"),
    "long_species": (
        "id,fasta,species\nA,{fasta}," + "x" * 26 + "\n",
        r"line 2: column 'species': 'x{26}' is 26 characters; at most 25 \(the Helixer layout stores 25 bytes",
    ),
    "unknown_layout": (
        "id,fasta,expression,expression_layout\nA,{fasta},{expr},genes-by-samples\n",
        r"line 2: column 'expression_layout': 'genes-by-samples' must be genes-x-samples or samples-x-genes",
    ),
    "regulators_without_expression": (
        "id,fasta,regulators\nA,{fasta},{regs}\n",
        r"line 2: column 'regulators' is set but 'expression' is empty",
    ),
    "empty_line_between_records": ("id,fasta\nA,{fasta}\n\nB,{fasta}\n", r"line 3: empty line"),
    "unterminated_quote": ('id,fasta\nA,"{fasta}\n', r"line 2: unterminated quoted field"),
    "url_not_found": (
        "id,fasta\nA,{url}/missing.fa\n",
        r"line 2: column 'fasta': cannot fetch http://127\.0\.0\.1:\d+/missing\.fa \(HTTP 404\)",
    ),
    "url_refused": (
        "id,fasta\nA,http://127.0.0.1:{dead_port}/asmA.fa\n",
        r"line 2: column 'fasta': cannot fetch http://127\.0\.0\.1:\d+/asmA\.fa \(ConnectException: Connection refused",
    ),
    # valid
    "bom_crlf": (
        b"\xef\xbb\xbfid,fasta,species\r\nA,{fasta},Sp_a\r\n",
        [["A", "Sp_a", "genes-x-samples", "{fasta}", None, None]],
    ),
    "trailing_empty_lines": ("id,fasta\nA,{fasta}\n\n  \n\r\n", [["A", "A", "genes-x-samples", "{fasta}", None, None]]),
    "quoted_fields": (
        '"id","fasta","species"\n"A","{dir}/with, comma.fa","Sp ""q"""\n',
        r"line 2: column 'species': 'Sp \"q\"' must be printable ASCII without spaces",
    ),
    "quoted_fields_valid": (
        '"id","fasta","species"\n"A","{dir}/with, comma.fa","Sp_""q"""\n',
        [["A", 'Sp_"q"', "genes-x-samples", "{dir}/with, comma.fa", None, None]],
    ),
    "path_with_spaces": (
        "id,fasta,expression,regulators,expression_layout\nA,my data/asm A.fa,my data/expr one.tsv.gz,"
        "my data/regs.txt,samples-x-genes\n",
        [
            [
                "A",
                "A",
                "samples-x-genes",
                "{dir}/my data/asm A.fa",
                "{dir}/my data/expr one.tsv.gz",
                "{dir}/my data/regs.txt",
            ]
        ],
    ),
    "url_ok": ("id,fasta\nA,{url}/asmA.fa\n", [["A", "A", "genes-x-samples", "{url}/asmA.fa", None, None]]),
    # annotation / motifs / tf_motifs (docs/networks.md): the prior needs all three; motifs may name pyjaspar's db
    "motifs_without_annotation": (
        "id,fasta,motifs,tf_motifs\nA,{fasta},{fasta},{fasta}\n",
        r"line 2: column 'motifs' is set but 'annotation' is empty",
    ),
    "motifs_without_tf_motifs": (
        "id,fasta,annotation,motifs\nA,{fasta},{fasta},{fasta}\n",
        r"line 2: column 'motifs' is set but 'tf_motifs' is empty",
    ),
    "tf_motifs_without_motifs": (
        "id,fasta,annotation,tf_motifs\nA,{fasta},{fasta},{fasta}\n",
        r"line 2: column 'tf_motifs' is set but 'motifs' is empty",
    ),
    "annotation_missing": (
        "id,fasta,annotation\nA,{fasta},/nonexistent/genes.gff3\n",
        r"line 2: column 'annotation': file not found: /nonexistent/genes.gff3",
    ),
    "bad_jaspar_spec": (
        "id,fasta,annotation,motifs,tf_motifs\nA,{fasta},{fasta},jaspar:CORE plants,{fasta}\n",
        r"line 2: column 'motifs': 'jaspar:CORE plants' must be jaspar:<COLLECTION>",
    ),
    "jaspar_db_ok": (
        "id,fasta,annotation,motifs,tf_motifs\nA,{fasta},{fasta},jaspar:CORE/plants,{fasta}\n",
        [["A", "A", "genes-x-samples", "{fasta}", None, None]],
    ),
    "relative_and_absolute": (
        "id,fasta\nA,asmA.fa\nB,{fasta}\n",
        [
            ["A", "A", "genes-x-samples", "{dir}/asmA.fa", None, None],
            ["B", "B", "genes-x-samples", "{fasta}", None, None],
        ],
    ),
}


@pytest.fixture(scope="module")
def sheets_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("sheets")
    shutil.copy(FASTA, d / "asmA.fa")
    shutil.copy(FASTA, d / "with, comma.fa")
    (d / "my data").mkdir()
    shutil.copy(FASTA, d / "my data" / "asm A.fa")
    (d / "my data" / "expr one.tsv.gz").write_bytes(b"")
    shutil.copy(TEST / "genie3" / "regulators.txt", d / "my data" / "regs.txt")
    return d


@pytest.fixture(scope="module")
def validation_results(sheets_dir, nextflow_bin):
    """All sheets validated by the pipeline's own function in one Nextflow JVM (fast)."""
    with LocalHttpServer(sheets_dir) as server:
        subs = {
            "fasta": str(FASTA),
            "dir": str(sheets_dir),
            "url": server.url,
            "dead_port": str(free_port()),
            "expr": str(TEST / "genie3" / "expression.tsv"),
            "regs": str(TEST / "genie3" / "regulators.txt"),
        }

        def fill(x):
            if isinstance(x, bytes):
                return fill(x.decode()).encode()
            if isinstance(x, str):
                return re.sub(r"\{(\w+)\}", lambda m: subs.get(m.group(1), m.group(0)), x)
            if isinstance(x, list):
                return [fill(i) for i in x]
            return x

        sheets = {}
        for case, (text, _) in CASES.items():
            p = sheets_dir / f"{case}.csv"
            t = fill(text)
            p.write_bytes(t if isinstance(t, bytes) else t.encode())
            sheets[case] = p
        results = validate_sheets(sheets_dir, sheets.values())
    expected = {case: fill(exp) for case, (_, exp) in CASES.items()}
    return {case: results.get(str(p)) for case, p in sheets.items()}, sheets, expected


@pytest.mark.parametrize("case", sorted(CASES))
def test_samplesheet_case(validation_results, case):
    results, sheets, expected = validation_results
    got = results[case]
    assert got is not None, f"no result for {case}"
    kind, rest = got
    want = expected[case]
    if isinstance(want, str):  # an error: one line naming the sheet and the line
        assert kind == "ERROR", rest
        assert "\\n" not in rest, rest
        assert re.search(want, rest), f"expected /{want}/ in {rest!r}"
        if case not in ("missing_file",):
            assert rest.startswith(f"samplesheet {sheets[case]}"), rest
    else:
        assert kind == "OK", rest
        rows = [[m["id"], m["species"], m["expression_layout"], f, e, r] for m, f, e, r in json.loads(rest)]
        assert rows == want


def _stops_before_any_task(sheet, tmp_path) -> str:
    """Run the real pipeline on ``sheet``: it must fail before any task ran; returns stdout + stderr."""
    res = run_nextflow(
        ["--input", str(sheet), "--skip_predict", "--outdir", str(tmp_path / "out")],
        cwd=tmp_path,
        check=False,
        timeout=300,
    )
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    work = tmp_path / "work"
    assert not work.exists() or not any(work.iterdir()), "a task ran although the sheet was invalid"
    return out


def test_unfetchable_url_stops_the_real_pipeline_with_one_line(tmp_path, nextflow_bin):
    with LocalHttpServer(tmp_path) as server:
        sheet = tmp_path / "sheet.csv"
        sheet.write_text(f"id,fasta\nA,{server.url}/nothing-here.fa\n")
        out = _stops_before_any_task(sheet, tmp_path)
    lines = [ln for ln in out.splitlines() if "nothing-here.fa" in ln]
    assert lines == [
        f"samplesheet {sheet} line 2: column 'fasta': cannot fetch {server.url}/nothing-here.fa (HTTP 404)"
    ], out


# -----------------------------------------------------------------------------------------------------------------
# the train sheet (--mode train) goes through the same CSV reader and the same id/species rules
# -----------------------------------------------------------------------------------------------------------------
TRAIN = ROOT / "assets" / "train_test"
TRAIN_HEAD = "id,split,fasta,species,dataset,file,library,shift\n"
TRAIN_ROW = "{id},{split},{t}/{fa},{species},atacseq,{t}/{bam},unstranded,true\n"

# case -> (id, species): the same bad value in a samplesheet and in a train sheet gives the same message
RULE_CASES = {
    "id_with_space": ("my genome", "Sp_a"),
    "id_with_slash": ("a/b", "Sp_a"),
    "species_with_space": ("A", "Sp a"),
    "long_species": ("A", "x" * 26),
}


def _train_sheet(rows: list[dict]) -> str:
    return TRAIN_HEAD + "".join(TRAIN_ROW.format(t=TRAIN, **r) for r in rows)


@pytest.fixture(scope="module")
def rule_results(tmp_path_factory, nextflow_bin):
    d = tmp_path_factory.mktemp("rules")
    sheets, trains = {}, {}
    for case, (id_, species) in RULE_CASES.items():
        sheets[case] = d / f"{case}.csv"
        sheets[case].write_text(f"id,fasta,species\n{id_},{FASTA},{species}\n")
        trains[case] = d / f"train_{case}.csv"
        trains[case].write_text(
            _train_sheet([dict(id=id_, split="train", fa="trainA.fa", species=species, bam="trainA_atacseq_1.bam")])
        )
    trains["duplicate_column"] = d / "train_duplicate_column.csv"
    trains["duplicate_column"].write_text(TRAIN_HEAD.replace(",shift", ",SPLIT") + "A,train,a.fa,,x,a.bam,,\n")
    trains["valid"] = d / "train_valid.csv"
    trains["valid"].write_text(
        _train_sheet(
            [
                dict(id="trainA", split="train", fa="trainA.fa", species="", bam="trainA_atacseq_2.bam"),
                dict(id="trainA", split="train", fa="trainA.fa", species="", bam="trainA_atacseq_1.bam"),
                dict(id="valA", split="val", fa="valA.fa", species="Testus_val", bam="valA_atacseq_1.bam"),
            ]
        )
    )
    results = validate_sheets(d, sheets.values(), trains.values())
    return (
        {c: results[str(p)] for c, p in sheets.items()},
        {c: results[str(p)] for c, p in trains.items()},
        sheets,
        trains,
    )


@pytest.mark.parametrize("case", sorted(RULE_CASES))
def test_train_sheet_and_samplesheet_share_the_id_and_species_rules(rule_results, case):
    sheet_results, train_results, sheets, trains = rule_results
    (kind, sheet_msg), (tkind, train_msg) = sheet_results[case], train_results[case]
    assert kind == tkind == "ERROR", (sheet_msg, train_msg)
    assert sheet_msg.startswith(f"samplesheet {sheets[case]} line 2: ")
    assert train_msg.startswith(f"train sheet {trains[case]} line 2: ")
    assert sheet_msg.split(" line 2: ", 1)[1] == train_msg.split(" line 2: ", 1)[1]


def test_train_sheet_read_by_the_shared_reader(rule_results):
    _, train_results, _, trains = rule_results
    kind, msg = train_results["duplicate_column"]
    assert kind == "ERROR" and msg == f"train sheet {trains['duplicate_column']} line 1: duplicate column(s): split"
    kind, rows = train_results["valid"]
    assert kind == "OK", rows
    rows = json.loads(rows)
    assert [r[0] for r in rows] == [
        {"id": "trainA", "species": "trainA", "split": "train"},
        {"id": "valA", "species": "Testus_val", "split": "val"},
    ]
    # one spec per dataset; replicates in sheet order, each with its own index
    (spec,) = rows[0][2]
    assert {k: spec[k] for k in ("dataset", "kind", "library", "shift")} == {
        "dataset": "atacseq",
        "kind": "bam",
        "library": "unstranded",
        "shift": True,
    }
    assert spec["files"] == [str(TRAIN / "trainA_atacseq_2.bam"), str(TRAIN / "trainA_atacseq_1.bam")]
    assert spec["indexes"] == [str(TRAIN / "trainA_atacseq_2.bam.bai"), str(TRAIN / "trainA_atacseq_1.bam.bai")]


# -----------------------------------------------------------------------------------------------------------------
# the sheets' rules live in their JSON schemas (assets/schema_input.json, assets/schema_train.json)
# -----------------------------------------------------------------------------------------------------------------
SCHEMA_INPUT = ROOT / "assets" / "schema_input.json"
SCHEMA_TRAIN = ROOT / "assets" / "schema_train.json"


def _registry():
    """The schemas a sheet schema $refs, by the URI its $id and relative $ref give (as nf-schema would load them)."""
    from referencing import Registry, Resource

    files = [SCHEMA_INPUT, SCHEMA_TRAIN, ROOT / "nextflow_schema.json", ROOT / "src/chromaflow/schemas/assembly.json"]
    resources = []
    for f in files:
        doc = json.loads(f.read_text())
        uri = "https://raw.githubusercontent.com/chromaflow/chromaflow/main/" + f.relative_to(ROOT).as_posix()
        assert doc["$id"] == uri, f"{f}: $id {doc['$id']} is not its place in the repository"
        resources.append((uri, Resource.from_contents(doc)))
    return Registry().with_resources(resources)


def _sheet_rows(path):
    import csv

    with open(path, newline="") as fh:
        return [{k: v for k, v in row.items() if v != ""} for row in csv.DictReader(fh)]


def test_sheet_parameters_name_their_schema_and_mimetype():
    """nextflow_schema.json names each sheet's schema (nf-schema's `schema`) and its mimetype; the sheet reader
    finds the schema through it."""
    params = {
        k: v
        for g in json.loads((ROOT / "nextflow_schema.json").read_text())["$defs"].values()
        for k, v in g["properties"].items()
    }
    for name, schema in (("input", SCHEMA_INPUT), ("genomes", SCHEMA_INPUT), ("train_sheet", SCHEMA_TRAIN)):
        assert params[name]["mimetype"] == "text/csv", name
        assert ROOT / params[name]["schema"] == schema, name


@pytest.mark.parametrize(
    "schema,sheet",
    [
        (SCHEMA_INPUT, TEST / "samplesheet.csv"),
        (SCHEMA_INPUT, ROOT / "assets" / "test_full" / "samplesheet.csv"),
        (SCHEMA_TRAIN, TRAIN / "sheet.csv"),
    ],
    ids=["input", "input_test_full", "train"],
)
def test_sheet_schemas_are_standard_json_schema_that_the_test_sheets_meet(schema, sheet):
    """The schemas are JSON Schema 2020-12 that a standard validator (python-jsonschema, $refs resolved as nf-schema
    resolves them) reads: the test profiles' sheets meet them (test_full's local files exist), and a bad id or
    species fails there as in our reader."""
    import jsonschema

    doc = json.loads(schema.read_text())
    jsonschema.Draft202012Validator.check_schema(doc)
    validator = jsonschema.Draft202012Validator(doc, registry=_registry())
    rows = _sheet_rows(sheet)
    assert list(validator.iter_errors(rows)) == []
    for row in rows:
        for column, value in row.items():
            if doc["items"]["properties"][column].get("format") == "file-path" and "://" not in value:
                assert (sheet.parent / value).is_file(), (sheet, column, value)
    for column, bad in (("id", "my genome"), ("id", "a" * 101), ("species", "Sp a"), ("species", "x" * 26)):
        errors = list(validator.iter_errors([{**rows[0], column: bad}]))
        assert [list(e.absolute_path) for e in errors] == [[0, column]], (column, bad, errors)


def test_the_sheet_reader_reads_its_rules_from_the_schema(tmp_path, nextflow_bin):
    """Change a rule in a copy of each schema (the id's pattern and reason, the split's values, the required
    columns): the pipeline's reader follows the copy, so no rule is written in the reader itself."""
    doc = json.loads(SCHEMA_INPUT.read_text())
    props = doc["items"]["properties"]
    props["id"] = {"type": "string", "pattern": "^[a-z]+$", "errorMessage": "is not lower-case letters"}
    doc["items"]["required"] = ["id", "fasta", "vcf"]
    del props["expression_layout"]["$ref"]
    props["expression_layout"]["enum"] = ["genes-x-samples", "sideways"]
    input_copy = tmp_path / "assets" / "schema_input.json"
    input_copy.parent.mkdir()
    # the copy's relative $refs resolve beside it: the assembly rules come along
    (tmp_path / "src/chromaflow/schemas").mkdir(parents=True)
    shutil.copy(ROOT / "src/chromaflow/schemas/assembly.json", tmp_path / "src/chromaflow/schemas/assembly.json")
    input_copy.write_text(json.dumps(doc))
    sheets = {
        "upper": f"id,fasta,vcf\nAbc,{FASTA},{FASTA}\n",
        "no_vcf": f"id,fasta,vcf\nabc,{FASTA},\n",
        "layout": f"id,fasta,vcf,expression_layout\nabc,{FASTA},{FASTA},samples-x-genes\n",
        "ok": f"id,fasta,vcf,expression_layout\nabc,{FASTA},{FASTA},sideways\n",
    }
    paths = {}
    for case, text in sheets.items():
        paths[case] = tmp_path / f"{case}.csv"
        paths[case].write_text(text)

    train = json.loads(SCHEMA_TRAIN.read_text())
    train["items"]["properties"]["split"]["enum"] = ["train", "val", "test", "holdout"]
    train["items"]["properties"]["library"]["default"] = "first"
    train_copy = tmp_path / "assets" / "schema_train.json"
    train_copy.write_text(json.dumps(train))
    head = "id,split,fasta,species,dataset,file,library,shift\n"
    bam = TRAIN / "trainA_atacseq_1.bam"
    tsheets = {"seen": tmp_path / "train_seen.csv", "ok": tmp_path / "train_ok.csv"}
    tsheets["seen"].write_text(
        head + f"A,holdout,{TRAIN}/trainA.fa,,atacseq,{bam},,false\nB,seen,{TRAIN}/trainA.fa,,x,{bam},,\n"
    )
    tsheets["ok"].write_text(
        head + f"A,train,{TRAIN}/trainA.fa,,atacseq,{bam},,false\nB,val,{TRAIN}/trainA.fa,,x,{bam},,\n"
    )
    # every sheet in one run of the reader (one JVM), each schema copy for its own kind of sheet
    results = validate_sheets(tmp_path, paths.values(), tsheets.values(), schema=input_copy, train_schema=train_copy)
    got = {case: results[str(p)] for case, p in paths.items()}
    assert got["upper"] == (
        "ERROR",
        f"samplesheet {paths['upper']} line 2: column 'id': 'Abc' is not lower-case letters",
    )
    assert got["no_vcf"] == ("ERROR", f"samplesheet {paths['no_vcf']} line 2: column 'vcf' is empty")
    assert got["layout"][1].endswith(
        "column 'expression_layout': 'samples-x-genes' must be genes-x-samples or sideways"
    )
    assert got["ok"][0] == "OK", got["ok"]

    assert results[str(tsheets["seen"])] == (
        "ERROR",
        f"train sheet {tsheets['seen']} line 3: column 'split': 'seen' must be train, val, test or holdout",
    )
    kind, rows = results[str(tsheets["ok"])]
    assert kind == "OK", rows
    assert [spec["library"] for row in json.loads(rows) for spec in row[2]] == ["first", "first"]
