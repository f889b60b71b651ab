"""Reading a contributions file (``chromaflow attribute --out``, format ``chromaflow-contributions/1``, core.py) for
motif discovery: its one-hot and hypothetical scores, checked once, with one line naming the file on anything that
cannot be used."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..utils.errors import ChromaflowError

#: the format tag attribute writes (core.py) and this reader accepts
FORMAT = "chromaflow-contributions/1"


@dataclass(frozen=True)
class Contributions:
    """A contributions file's arrays in TF-MoDISco's orientation and its provenance.

    ``onehot`` and ``hypothetical`` are (N, W, 4) float32, columns A, C, G, T (the file stores N x 4 x W);
    ``attrs`` the file's attributes (method, dataset, strand, model, ...)."""

    path: str
    onehot: np.ndarray
    hypothetical: np.ndarray
    attrs: dict

    @property
    def regions(self) -> int:
        """N: the regions (rows)."""
        return int(self.onehot.shape[0])

    @property
    def width(self) -> int:
        """W: the bases per region."""
        return int(self.onehot.shape[1])


def read_contributions(path: str, window: int | None = None) -> Contributions:
    """The arrays of ``path``, cut to the central ``window`` bases when given (TF-MoDISco's ``-w``).

    Refused with one line: a missing file, not HDF5, another format, missing or misshapen arrays, no regions,
    non-finite scores, a one-hot outside [0, 1] or above 1 per position, scores that are all zero, a window wider
    than the file's."""
    if not os.path.isfile(path):
        raise ChromaflowError(f"{path}: --contributions does not exist or is not a file")
    import h5py

    try:
        f = h5py.File(path, "r")
    except OSError:
        raise ChromaflowError(f"{path}: not an HDF5 file (expected chromaflow attribute's --out)") from None
    with f:
        fmt = f.attrs.get("format")
        if isinstance(fmt, bytes):
            fmt = fmt.decode()
        if fmt != FORMAT:
            raise ChromaflowError(f"{path}: format {fmt!r}, expected {FORMAT!r} (chromaflow attribute's --out)")
        for name in ("onehot", "hypothetical"):
            if name not in f or not isinstance(f[name], h5py.Dataset):
                raise ChromaflowError(f"{path}: no dataset {name!r}")
        shape = f["onehot"].shape
        if len(shape) != 3 or shape[1] != 4 or f["hypothetical"].shape != shape:
            raise ChromaflowError(
                f"{path}: onehot {shape} and hypothetical {f['hypothetical'].shape} must both be N x 4 x W"
            )
        if shape[0] == 0 or shape[2] == 0:
            raise ChromaflowError(f"{path}: no contributions (N x 4 x W = {' x '.join(map(str, shape))})")
        lo, hi = _window(path, shape[2], window)
        onehot = np.ascontiguousarray(f["onehot"][:, :, lo:hi].transpose(0, 2, 1), dtype=np.float32)
        hyp = np.ascontiguousarray(f["hypothetical"][:, :, lo:hi].transpose(0, 2, 1), dtype=np.float32)
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
    if not np.isfinite(hyp).all():
        raise ChromaflowError(f"{path}: hypothetical holds NaN or infinite scores")
    # an IUPAC code is its bases' shares (N: 0.25 each, as the genome h5 encodes it), padding 0: in [0, 1], summing to
    # at most 1 per position
    if (onehot < 0).any() or (onehot > 1).any() or (onehot.sum(axis=2) > 1 + 1e-5).any():
        raise ChromaflowError(
            f"{path}: onehot is not a one-hot encoding (values outside [0, 1] or above 1 per position)"
        )
    if not (onehot * hyp).any():
        raise ChromaflowError(f"{path}: every observed base's contribution is zero: nothing to discover")
    return Contributions(path, onehot, hyp, attrs)


def _window(path: str, width: int, window: int | None) -> tuple[int, int]:
    """[lo, hi): the central ``window`` of ``width`` bases (all of them when None), as attribute centres its own."""
    if window is None:
        return 0, width
    if window > width:
        raise ChromaflowError(f"--window {window}: wider than the contributions' {width} bases ({path})")
    lo = width // 2 - window // 2
    return lo, lo + window
