"""Opening an input file with one-line errors that tell a missing, a wrong and an unreadable file apart."""

from __future__ import annotations

import os

from .errors import ChromaflowError


def open_h5_input(path: str | os.PathLike, what: str = "input h5"):
    """Open an HDF5 file for reading, or raise a one-line :class:`ChromaflowError` naming it.

    Missing path, a directory, and a file HDF5 cannot open (not HDF5, truncated, corrupt) are told apart.
    """
    import h5py

    path = os.fspath(path)
    if not os.path.exists(path):
        raise ChromaflowError(f"{path}: {what} does not exist")
    if not os.path.isfile(path):
        raise ChromaflowError(f"{path}: {what} is not a regular file")
    try:
        return h5py.File(path, "r")
    except OSError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ChromaflowError(f"{path}: not a readable HDF5 file ({first})") from None
