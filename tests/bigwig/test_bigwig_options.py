"""The option checks of ``chromaflow bigwig`` called from Python (no command line): :class:`BigWigOptions` refuses a
bad option with the command's one-line message naming it, before any file is read or the output folder created."""

from __future__ import annotations

import re

import pytest

from chromaflow.bigwig.core import DEFAULT_LEVEL, BigWigOptions, run
from chromaflow.utils.errors import ChromaflowError


def _options(tmp_path, **changes) -> BigWigOptions:
    fields = {"predictions": str(tmp_path / "p.h5"), "outdir": str(tmp_path / "out"), "basename": "b", **changes}
    return BigWigOptions(**fields)


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"window_size": 0}, "--window-size must be a positive integer (got 0)"),
        ({"window_size": -5}, "--window-size must be a positive integer (got -5)"),
        ({"compression_level": 0}, "--compression-level must be 1..12 (got 0)"),
        ({"compression_level": 13, "format": "bg"}, "--compression-level must be 1..12 (got 13)"),
        ({"basename": "a/b"}, "--basename 'a/b': must be a non-empty file name without '/'"),
        ({"basename": ""}, "--basename '': must be a non-empty file name without '/'"),
        ({"format": "wig"}, "--format 'wig': expected one of bigwig, bw, bedgraph, bg"),
        ({"strand": "both"}, "--strand 'both': expected one of avg, +, -, all"),
        ({"smoothing": "float"}, "--smoothing 'float': expected one of exact, numpy"),
        ({"bigwig_writer": "kent"}, "--bigwig-writer 'kent': expected one of chromaflow, pybigwig"),
    ],
)
def test_bad_option_one_line(tmp_path, changes, message):
    opts = _options(tmp_path, **changes)
    with pytest.raises(ChromaflowError) as exc:
        opts.validate()
    assert str(exc.value) == message
    # the core checks them first: the input (absent) is not opened and --outdir is not created
    with pytest.raises(ChromaflowError, match="^" + re.escape(message) + "$"):
        run(opts)
    assert list(tmp_path.iterdir()) == []


def test_checks_in_the_command_order(tmp_path):
    """Several bad options: the first of the command's order is named (--window-size, --compression-level,
    --basename)."""
    bad = {"window_size": 0, "compression_level": 99, "basename": "a/b"}
    with pytest.raises(ChromaflowError, match="^--window-size"):
        _options(tmp_path, **bad).validate()
    with pytest.raises(ChromaflowError, match="^--compression-level"):
        _options(tmp_path, **{**bad, "window_size": None}).validate()


def test_good_options_give_format_and_level(tmp_path):
    assert _options(tmp_path).validate() == ("bigwig", DEFAULT_LEVEL["bigwig"])
    assert _options(tmp_path, format="bg").validate() == ("bedgraph", DEFAULT_LEVEL["bedgraph"])
    assert _options(tmp_path, format="bw", compression_level=12, window_size=1).validate() == ("bigwig", 12)
    a, b = _options(tmp_path), _options(tmp_path)
    assert a.feature_track == a.hub_track == [] and a.feature_track is not b.feature_track  # no shared list
