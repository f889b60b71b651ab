"""``add-coverage``'s options checked from Python (:class:`chromaflow.coverage.core.AddCoverageOptions`), without the
command line: each rule gives the command's one-line message naming the option, before any file is read."""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
import pytest

from chromaflow.utils.cli_options import options_from
from chromaflow.coverage.add import DEFAULT_WINDOW_BP
from chromaflow.coverage.cli import add_arguments
from chromaflow.coverage.core import AddCoverageOptions, run
from chromaflow.coverage.sources import CountOptions
from chromaflow.utils.errors import ChromaflowError


def _options(**kw) -> AddCoverageOptions:
    """Valid options (BAM input, unstranded) with ``kw`` changed; the files need not exist (validate reads none)."""
    base = {"h5": "genome.h5", "prefix": "atacseq", "bam": ["a.bam"], "strand_mode": "unstranded"}
    return AddCoverageOptions(**{**base, **kw})


@pytest.mark.parametrize(
    "change,message",
    [
        ({"bigwig": ["t.bw"]}, "give one of --bam and --bigwig (not both)"),
        ({"bam": None}, "give one of --bam and --bigwig (not both)"),
        (
            {"strand_mode": None},
            "strand mode None: give one of --unstranded ('unstranded'), --first-read-is-sense-strand ('first') and "
            "--second-read-is-sense-strand ('second')",
        ),
        ({"bam": None, "bigwig": ["t.bw"], "bam_index": ["a.bai"]}, "--bam-index goes with --bam"),
        ({"strand_mode": "first", "shift": True}, "--shift is only allowed with --unstranded (as in Helixer)"),
        ({"strand_mode": "second", "shift": True}, "--shift is only allowed with --unstranded (as in Helixer)"),
        (
            {"bam": None, "bigwig": ["t.bw"], "strand_mode": "second"},
            "--bigwig input has no read strands: use --unstranded",
        ),
        (
            {"bam": None, "bigwig": ["t.bw"], "shift": True},
            "--shift applies to reads (BAM input), not to bigWig values",
        ),
        ({"min_mapq": -1}, "--min-mapq must be >= 0, got -1"),
        ({"window_bp": -5}, "--window-bp must be >= 1, got -5"),
        ({"bigwig_split": "third"}, "--bigwig-split 'third': expected one of half, both"),
    ],
)
def test_validate_names_the_option(change, message):
    """Each broken rule: a ChromaflowError whose one line is the command's message; run() stops on it before
    touching any file (none of these paths exists)."""
    opts = _options(**change)
    with pytest.raises(ChromaflowError) as exc:
        opts.validate()
    assert str(exc.value) == message
    assert "\n" not in str(exc.value)
    with pytest.raises(ChromaflowError) as exc:
        run(opts)
    assert str(exc.value) == message


def test_check_order_follows_the_command():
    """Several broken rules: the first in the command's order is reported (--bam-index before --shift, --shift
    before --min-mapq, --min-mapq before --window-bp)."""
    opts = _options(bam=None, bigwig=["t.bw"], bam_index=["a.bai"], shift=True, min_mapq=-1, window_bp=-1)
    with pytest.raises(ChromaflowError, match="^--bam-index goes with --bam$"):
        opts.validate()
    opts = _options(strand_mode="first", shift=True, min_mapq=-1, window_bp=-1)
    with pytest.raises(ChromaflowError, match="^--shift is only allowed"):
        opts.validate()
    with pytest.raises(ChromaflowError, match="^--min-mapq must be >= 0, got -1$"):
        _options(min_mapq=-1, window_bp=-1).validate()


def test_valid_options_and_derived_values():
    """Valid options pass; the input kind, paths, window (0 or None: the default) and counting options follow."""
    opts = _options(bam_index=["a.bai"], min_mapq=3, skip_duplicates=True, window_bp=0)
    opts.validate()
    assert (opts.kind, opts.paths, opts.window) == ("bam", ["a.bam"], DEFAULT_WINDOW_BP)
    assert opts.count_options() == CountOptions("unstranded", False, 3, True, "half")
    bw = _options(bam=None, bigwig=["t.bw", "u.bw"], bigwig_split="both", window_bp=7)
    bw.validate()
    assert (bw.kind, bw.paths, bw.window) == ("bigwig", ["t.bw", "u.bw"], 7)
    assert bw.count_options() == CountOptions("unstranded", False, 0, False, "both")


def test_defaults_match_the_command_line():
    """Every field is an option of the command, with the command's default (a library caller gets what the
    command line gets)."""
    p = argparse.ArgumentParser()
    add_arguments(p)
    args = p.parse_args(["--h5", "g.h5", "--prefix", "x", "--bam", "a.bam", "--unstranded"])
    got = options_from(args, AddCoverageOptions)
    assert got == _options(h5="g.h5", prefix="x")
    for f in dataclasses.fields(AddCoverageOptions):
        if f.default is not dataclasses.MISSING and f.name not in ("bam", "strand_mode"):
            assert getattr(args, f.name) == f.default, f.name


def test_chunks_filtered_in_c_equal_hdf5s(monkeypatch):
    """add-coverage's chunks through HDF5's shuffle and the LZF encoder in one C call are the bytes and filter masks
    an in-memory HDF5 file gives: coverage with padding, all-zero rows (cached), and incompressible rows, where HDF5
    skips LZF (mask 2). (The encoder itself against h5py's: tests/coverage/test_coverage_lzf.py.)"""
    from chromaflow.bigwig import _native
    from chromaflow.coverage import add

    if _native.load() is None:
        pytest.skip("no C compiler")
    rng = np.random.default_rng(3)
    L = 5000
    rows = np.repeat(rng.integers(0, 40, (6, L // 50)), 50, axis=1).astype(np.int64)
    rows[1, 4000:] = -1  # a chromosome's last row: padding
    rows[2] = 0
    rows[3] = rng.integers(-(2**62), 2**62, L)  # LZF cannot shorten it
    rows[4, :4321] = 0
    rows[4, 4321:] = -1
    valid = [L, 4000, L, L, 4321, L]
    monkeypatch.setattr(add, "_ZERO_CHUNKS", {})
    c = add._compress(rows, valid, "int64")
    assert [m for m, _ in c][3] == 2 and all(m == 0 for i, (m, _) in enumerate(c) if i != 3)
    monkeypatch.setattr(add, "_ZERO_CHUNKS", {})
    monkeypatch.setattr(add, "_shuffle_lzf", lambda rows, todo, out: False)
    assert add._compress(rows, valid, "int64") == c
