"""Whole-dataset reads and writes of the one-row-chunked datasets of a genome or predictions h5.

Helixer and Predmoter store ``data/seqids`` and ``data/start_ends`` with chunks of one row ((1,) and (1, 2)).
HDF5 builds a record for every chunk one read or write call touches (~1-3 KB each) and glibc keeps most of that
memory after the call: a whole 400k-row dataset at once took 2.9 GB in predict-merge, and bigwig's read of a
1.2 Gbp genome's 1.2M rows (chunk length 2000) 4.9 GB. Every stage reads and writes such datasets through these
two functions, ROW_BLOCK rows per call, which keeps that to one block's chunks whatever the genome size.
"""

from __future__ import annotations

import h5py
import numpy as np

#: rows per HDF5 call on a one-row-chunked dataset
ROW_BLOCK = 4096


def read_rows(ds: h5py.Dataset, start: int = 0, stop: int | None = None) -> np.ndarray:
    """Rows ``start:stop`` of ``ds`` (all of them by default; rows along axis 0), ROW_BLOCK rows per read."""
    stop = ds.shape[0] if stop is None else min(stop, ds.shape[0])
    start = min(start, stop)
    out = np.empty((stop - start, *ds.shape[1:]), dtype=ds.dtype)
    for a in range(start, stop, ROW_BLOCK):
        b = min(a + ROW_BLOCK, stop)
        out[a - start : b - start] = ds[a:b]
    return out


def write_rows(ds: h5py.Dataset, values: np.ndarray) -> None:
    """``ds[:len(values)] = values``, ROW_BLOCK rows per write."""
    for a in range(0, len(values), ROW_BLOCK):
        b = min(a + ROW_BLOCK, len(values))
        ds[a:b] = values[a:b]
