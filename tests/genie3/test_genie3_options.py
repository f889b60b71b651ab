"""genie3's options: the features per split, target chunks and per-target seeds, and the option checks of
chromaflow.genie3.network.NetworkOptions, from the command line and from Python (no CLI)."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from chromaflow.cli import main
from chromaflow.utils.cli_options import options_from
from chromaflow.utils.errors import ChromaflowError
from chromaflow.genie3 import cli as genie3_cli
from chromaflow.genie3.core import resolve_k, target_seed, target_seeds
from chromaflow.genie3.network import NetworkOptions, ResolvedOptions
from chromaflow.genie3.network import run as infer_network
from chromaflow.utils.sharding import part_bounds
from genie3_cli_helpers import run_cli
from helpers.genie3_files import EXPR, REGS, base


def test_resolve_k_matches_python_reference():
    assert resolve_k("sqrt", 99) == 9  # floor, like the Python GENIE3 (MATLAB ceil = 10, R round = 10)
    assert resolve_k("sqrt", 4) == 2
    assert resolve_k("all", 99) == 99
    assert resolve_k("5", 3) == 3
    assert resolve_k("sqrt", 1) == 1


def test_chunk_bounds_cover_targets_once():
    for T in (1, 7, 20, 101):
        for n in (1, 2, 3, 7):
            spans = [part_bounds(i, n, T) for i in range(1, n + 1)]
            assert spans[0][0] == 0 and spans[-1][1] == T
            assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))


def test_target_seed_is_the_documented_name_derivation():
    """docs/genie3.md: a target's 64-bit seed = the first 8 bytes (little-endian) of BLAKE2b(name, key = run seed
    as 8 little-endian bytes, person chromaflow-g3) -- computed here with hashlib, independently of the code."""
    import hashlib

    for seed, g in ((0, "G1"), (0, "TF3"), (1, "TF3"), (7, "AT1G01010"), (2**63 + 5, "x\u00e9")):
        key = (seed & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")
        h = hashlib.blake2b(g.encode(), digest_size=8, key=key, person=b"chromaflow-g3").digest()
        assert target_seed(seed, g) == int.from_bytes(h, "little")
    names = [f"G{i}" for i in range(1000)]
    many = target_seeds(0, names)
    assert len(set(many.tolist())) == 1000
    assert target_seeds(0, ["G500", "G3"]).tolist() == [many[500], many[3]]  # position plays no part
    assert target_seed(1, "G3") != target_seed(0, "G3") and target_seed(0, "G4") != target_seed(0, "G3")


def test_bad_options(tmp_path, capsys):
    rc, err = run_cli(base(tmp_path, "--max-features", "zero"), capsys)
    assert rc == 1 and "--max-features" in err
    rc, err = run_cli(base(tmp_path, "--targets-chunk", "3/2"), capsys)
    assert rc == 1 and "--targets-chunk" in err


# ------------------------------------------------------------------ NetworkOptions from Python (no command line)
def _options(**fields) -> NetworkOptions:
    """Valid options of a plain run of the fixture, with ``fields`` replaced."""
    return NetworkOptions(**{"expression": str(EXPR), "layout": "samples-x-genes", "out": "links.tsv.gz", **fields})


BAD_OPTIONS = [
    ({"n_trees": 0}, "--n-trees must be >= 1 (got 0)"),
    ({"top": -1}, "--top and --max-links must be >= 0"),
    ({"max_links": -5}, "--top and --max-links must be >= 0"),
    ({"repeats": 0}, "--repeats must be >= 1 (got 0)"),
    ({"repeats": 3, "top": 0}, "--repeats needs --top >= 1 (the rank a link must reach to count as confident)"),
    ({"prior_alpha": 0.5}, "--prior-alpha needs --prior"),
    ({"prior": "p.tsv", "prior_alpha": 1.5}, "--prior-alpha must be in [0, 1] (got 1.5)"),
    (
        {"prior_check_level": 0.05},
        "--prior-check-level needs --prior with --prior-check auto, correlation or prediction",
    ),
    (
        {"prior": "p.tsv", "prior_check": "off", "prior_check_level": 0.05},
        "--prior-check-level needs --prior with --prior-check auto, correlation or prediction",
    ),
    ({"prior": "p.tsv", "prior_check_level": 1.0}, "--prior-check-level must be in (0, 1) (got 1.0)"),
    (
        {"prior": "p.tsv", "prior_check_targets": 0.5},
        "--prior-check-targets needs --prior with --prior-check prediction",
    ),
    (
        {"prior": "p.tsv", "prior_check": "prediction", "prior_check_targets": 0.0},
        "--prior-check-targets must be in (0, 1] (got 0.0)",
    ),
    (
        {"prior": "p.tsv", "engine": "sklearn"},
        "--prior with --prior-alpha > 0 needs --engine fast: scikit-learn has no per-feature candidate weights "
        "(see docs/genie3.md, Prior)",
    ),
    ({"max_features": "zero"}, "--max-features must be sqrt, all or a positive integer (got 'zero')"),
    ({"max_features": "0"}, "--max-features must be a positive integer (got '0')"),
    ({"targets_chunk": "3/2"}, "--targets-chunk '3/2': expected I/N with 1 <= I <= N (parts are numbered from 1)"),
    (
        {"targets_chunk": "1/2", "summary": "s.json"},
        "--weights/--summary/--plot are written by genie3-merge when --targets-chunk is used",
    ),
    # what argparse's choices refuse on the command line
    ({"layout": "rows"}, "--layout 'rows': expected one of genes-x-samples, samples-x-genes"),
    ({"tree_method": "rf"}, "--tree-method 'rf': expected one of RF, ET"),
    ({"importance": "gini"}, "--importance 'gini': expected one of unnormalised, tree-normalised"),
    ({"engine": "gpu"}, "--engine 'gpu': expected one of fast, sklearn"),
    ({"prior_check": "on"}, "--prior-check 'on': expected one of auto, correlation, prediction, off"),
    # several bad options: the first in the command's order is named
    ({"n_trees": 0, "repeats": 0, "prior_alpha": 2.0}, "--n-trees must be >= 1 (got 0)"),
]


@pytest.mark.parametrize(
    "fields,message", BAD_OPTIONS, ids=[f"{i}-{next(iter(b[0]))}" for i, b in enumerate(BAD_OPTIONS)]
)
def test_network_options_validate_names_the_bad_option(fields, message):
    """A library caller gets the command's checks: one line naming the option (the command line's text)."""
    with pytest.raises(ChromaflowError) as exc:
        _options(**fields).validate()
    assert str(exc.value) == message


def test_network_options_resolve():
    """validate() returns what the options resolve to: max-features normalised, the chunk parsed, the prior's alpha
    (0.5 by default, None without a prior) and the prior check's level (0.01 by default)."""
    assert _options().validate() == ResolvedOptions(max_features="sqrt", chunk=None, alpha=None, level=0.01)
    got = _options(max_features=" ALL ", targets_chunk="2/3", prior="p.tsv", prior_check_level=0.2).validate()
    assert got == ResolvedOptions(max_features="all", chunk=(2, 3), alpha=0.5, level=0.2)
    assert _options(prior="p.tsv", prior_alpha=0.0, engine="sklearn").validate().alpha == 0.0  # alpha 0: no weights


def test_network_options_match_the_command_line():
    """Every option of the command is a field of NetworkOptions, with the same default."""
    p = argparse.ArgumentParser()
    genie3_cli.add_arguments(p)
    args = p.parse_args(["--expression", str(EXPR), "--layout", "samples-x-genes", "--out", "links.tsv.gz"])
    assert set(vars(args)) == {f.name for f in dataclasses.fields(NetworkOptions)}
    assert options_from(args, NetworkOptions) == _options()


def test_run_from_python_checks_before_any_work_and_writes_the_command_bytes(tmp_path):
    """network.run from Python: a bad option fails before anything is read or written; valid options write the
    bytes of the command line."""
    with pytest.raises(ChromaflowError, match=r"^--repeats must be >= 1 \(got 0\)$"):
        infer_network(_options(expression=str(tmp_path / "absent.tsv"), repeats=0, out=str(tmp_path / "o.tsv.gz")))
    assert list(tmp_path.iterdir()) == []
    assert main(base(tmp_path, out="cli.tsv.gz")) == 0
    opts = _options(regulators=str(REGS), n_trees=50, out=str(tmp_path / "py.tsv.gz"))
    assert infer_network(opts) == 0
    assert (tmp_path / "py.tsv.gz").read_bytes() == (tmp_path / "cli.tsv.gz").read_bytes()
