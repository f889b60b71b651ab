"""The option checks of ``chromaflow peaks`` called from Python (no command line): :class:`PeaksOptions` refuses a
bad option with the command's one-line message naming it, before any file is read or written."""

from __future__ import annotations

import re

import pytest

from chromaflow.utils.errors import ChromaflowError
from chromaflow.peaks.core import DEFAULT_CUTOFF, PeaksOptions, run


POSITIVE = "expected a number > 0 or 'auto'"


def _options(tmp_path, **changes) -> PeaksOptions:
    return PeaksOptions(**{"out": str(tmp_path / "x.narrowPeak"), "predictions": str(tmp_path / "p.h5"), **changes})


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"cutoff": "0"}, f"--cutoff '0': {POSITIVE} (bdgpeakcall's summit rule breaks at 0 and below)"),
        ({"cutoff": "x"}, f"--cutoff 'x': {POSITIVE}"),
        ({"cutoff": "nan"}, f"--cutoff 'nan': {POSITIVE} (bdgpeakcall's summit rule breaks at 0 and below)"),
        ({"min_length": -1}, "--min-length must be >= 0 (got -1)"),
        ({"max_gap": -3}, "--max-gap must be >= 0 (got -3)"),
        ({"window_size": 0}, "--window-size must be a positive integer (got 0)"),
        ({"observed_cutoff": 0.0}, "--observed-cutoff must be a number > 0 (got 0.0)"),
        ({"observed_cutoff": float("inf")}, "--observed-cutoff must be a number > 0 (got inf)"),
        (
            {"cutoff": "5", "observed": "obs.h5"},
            "--observed goes with --cutoff auto (a fixed --cutoff does not use it)",
        ),
        ({"name": "a b"}, "--name 'a b': peak names must be non-empty, without whitespace"),
        ({"name": ""}, "--name '': peak names must be non-empty, without whitespace"),
        ({"predictions": None}, "give one of --predictions and --bigwig (not both)"),
        ({"bigwig": "t.bw"}, "give one of --predictions and --bigwig (not both)"),
    ],
)
def test_bad_option_one_line(tmp_path, changes, message):
    opts = _options(tmp_path, **changes)
    with pytest.raises(ChromaflowError) as exc:
        opts.validate()
    assert str(exc.value) == message
    # the core checks them first: nothing is read (p.h5 does not exist) and nothing is written
    with pytest.raises(ChromaflowError, match="^" + re.escape(message) + "$"):
        run(opts)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"window_size": 10}, "--window-size must be a positive integer and goes with --predictions"),
        ({"dataset": "atacseq"}, "--dataset goes with --predictions (a bigWig holds one track)"),
        ({"observed": "obs.h5"}, "--observed with --bigwig needs --observed-dataset (the coverage name in it)"),
    ],
)
def test_bigwig_input_rules(tmp_path, changes, message):
    opts = _options(tmp_path, predictions=None, bigwig=str(tmp_path / "t.bw"), **changes)
    with pytest.raises(ChromaflowError) as exc:
        opts.validate()
    assert str(exc.value) == message


def test_checks_in_the_command_order(tmp_path):
    """Several bad options: the first of the command's order is named (--cutoff before --min-length before
    --max-gap)."""
    with pytest.raises(ChromaflowError, match="^--cutoff 'x'"):
        _options(tmp_path, cutoff="x", min_length=-1, max_gap=-1).validate()
    with pytest.raises(ChromaflowError, match="^--min-length"):
        _options(tmp_path, min_length=-1, max_gap=-1).validate()


def test_good_options_give_the_cutoff(tmp_path):
    assert _options(tmp_path).validate() is None  # auto
    assert _options(tmp_path, cutoff="2.5").validate() == 2.5
    assert _options(tmp_path, cutoff=7).validate() == 7.0  # a number from Python
    opts = _options(tmp_path, predictions=None, bigwig="t.bw", observed="o.h5", observed_dataset="atacseq")
    assert opts.validate() is None and opts.observed_cutoff == DEFAULT_CUTOFF
