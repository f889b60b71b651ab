"""The genome core's rules (chromaflow.genome.encoding): the one-hot table against Helixer's own, and the limits
every command shares (subsequence length, species)."""

from __future__ import annotations

import ast
import json

import numpy as np
import pytest

from chromaflow.utils.errors import ChromaflowError
from chromaflow.genome import encoding
from helpers.environment import ROOT, unavailable


def _helixer_decode() -> dict[str, list[float]]:
    """Helixer's AMBIGUITY_DECODE (helixer/export/numerify.py of the peers kit), read without importing Helixer."""
    found = sorted((ROOT / ".." / "shared" / "peers" / "src").glob("helixer-*/helixer/export/numerify.py"))
    if not found:
        unavailable("Helixer's numerify.py not found under ../shared/peers/src (the peers kit)")
    tree = ast.parse(found[-1].read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "AMBIGUITY_DECODE" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"no AMBIGUITY_DECODE in {found[-1]}")


def test_one_hot_table_is_helixers():
    decode = _helixer_decode()
    assert len(decode) == 15
    table = encoding.LUT16.view(np.float16)  # (256, 4) float16 columns C, A, T, G
    expected = np.zeros((256, 4), dtype=np.float16)
    for sym, cols in decode.items():
        expected[ord(sym)] = expected[ord(sym.lower())] = np.asarray(cols, dtype=np.float16)
    assert np.array_equal(table, expected)  # every other byte (padding 0 included) is all zero
    # the complement table is the column-reversed one: A<->T, C<->G
    assert np.array_equal(encoding.LUT16_RC.view(np.float16)[ord("A")], table[ord("T")])
    assert np.array_equal(encoding.LUT16_RC.view(np.float16)[ord("c")], table[ord("G")])


@pytest.mark.parametrize(
    "L, ok",
    [
        (1, True),
        (encoding.DEFAULT_L, True),
        (encoding.MAX_L, True),
        (0, False),
        (-3, False),
        (encoding.MAX_L + 1, False),
    ],
)
def test_subsequence_length_rule(L, ok):
    if ok:
        assert encoding.check_length(L) == L
    else:
        with pytest.raises(ChromaflowError, match=rf"^--subsequence-length {L}: must be between 1 and 1,048,576"):
            encoding.check_length(L)


@pytest.mark.parametrize(
    "species, message",
    [
        ("s" * 25, None),
        ("Arabidopsis_thaliana", None),
        ("s" * 26, "is 26 bytes long"),
        ("", "non-empty ASCII"),
        ("esp\u00e8ce", "non-empty ASCII"),
        # the samplesheet's rule (tests/pipeline/test_samplesheet.py refuses the same in the pipeline)
        ("Sp a", "must be printable ASCII without spaces"),
        ("Sp\ta", "must be printable ASCII without spaces"),
    ],
)
def test_species_rule(species, message):
    if message is None:
        assert encoding.check_species(species) == species.encode("ascii")
    else:
        with pytest.raises(ChromaflowError, match=message):
            encoding.check_species(species, "--species")


def test_the_pipeline_reads_the_same_species_and_id_rule():
    """One rule for the package and the pipeline: both sheets' schemas (assets/schema_input.json,
    schema_train.json, read by the pipeline's sheet reader) take their id and species rule by $ref from the package's
    schemas/assembly.json, the file check_species reads, and the sheet reader writes none of its own."""
    sheet = (ROOT / "subworkflows" / "local" / "utils_chromaflow" / "samplesheet.nf").read_text()
    for name in ("schema_input.json", "schema_train.json"):
        props = json.loads((ROOT / "assets" / name).read_text())["items"]["properties"]
        for column in ("id", "species"):
            assert props[column]["$ref"] == f"../src/chromaflow/schemas/assembly.json#/properties/{column}"
            assert set(props[column]) == {"$ref", "description"}, f"{name}: {column} has rules of its own"
    assert "x21" not in sheet and "[A-Za-z0-9._-]" not in sheet, "a pattern written in the sheet reader itself"
    rules = encoding.assembly_rules()
    assert rules["species"]["maxLength"] == encoding.MAX_SPECIES_BYTES
