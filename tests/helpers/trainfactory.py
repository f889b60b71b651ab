"""Small seeded training files for the tests: :mod:`chromaflow.train.synthetic` (L = 1000 by default) and the
tiny architecture the training tests use."""

from __future__ import annotations

from chromaflow.train.synthetic import make_file, make_input_dir  # noqa: F401 - re-exported for the tests

TINY = [
    "--model-type",
    "bi-hybrid",
    "--cnn-layers",
    "1",
    "--filter-size",
    "4",
    "--hidden-size",
    "4",
    "--lstm-layers",
    "1",
]
