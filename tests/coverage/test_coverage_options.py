"""``add-coverage``'s options checked from Python (:class:`chromaflow.coverage.core.AddCoverageOptions`), without the
command line: each rule gives the command's one-line message naming the option, before any file is read."""

from __future__ import annotations

import argparse
import dataclasses

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
