"""The package's one error type for bad input and its two refinements.

Stages raise :class:`ChromaflowError` for every bad input; the CLI (:mod:`chromaflow.cli`) turns it into a single
line on stderr and the error's ``exit_code``. This module imports nothing of the package, so every module may use it.
"""

from __future__ import annotations


class ChromaflowError(Exception):
    """A user-facing error: the message is printed as one line, naming the file/record/line at fault."""

    exit_code = 1

    def __init__(self, message: str):
        # keep the message on one line whatever the caller passed in
        super().__init__(" ".join(str(message).split()))


class OutputExistsError(ChromaflowError):
    """An output already exists and the caller did not ask to overwrite it."""


class OutputBusyError(ChromaflowError):
    """Another live process is writing the same output. Exit 75 (EX_TEMPFAIL, "try again later"): the pipeline
    retries it (conf/base.config), and a retry runs in a work directory of its own."""

    exit_code = 75
