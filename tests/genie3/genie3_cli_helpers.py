"""Small helpers shared by the genie3 test files: the command run in this process, and a link list read back."""

from __future__ import annotations

import gzip


def run_cli(argv, capsys=None):
    """(exit status, stderr) of ``chromaflow.cli.main(argv)`` run in this process (stderr only with ``capsys``)."""
    from chromaflow.cli import main

    rc = main(argv)
    err = capsys.readouterr().err if capsys else ""
    return rc, err


def read_links(path):
    """The rows of a gzip link list (header included), each a list of its TAB-separated fields."""
    with gzip.open(path, "rt") as fh:
        return [line.rstrip("\n").split("\t") for line in fh]
