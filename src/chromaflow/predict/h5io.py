"""Input validation and the Predmoter predictions-h5 layout (FORMATS.md §4)."""

from __future__ import annotations

from dataclasses import dataclass

import h5py
import numpy as np

from ..utils.errors import ChromaflowError
from ..utils.inputs import open_h5_input
from ..genome.h5rows import read_rows, write_rows
from ..genome.layout import input_fingerprint

#: root attributes of a shard file (absent from a complete predictions file)
SHARD_ATTRS = (
    "chromaflow_shard_index",
    "chromaflow_shard_count",
    "chromaflow_row_start",
    "chromaflow_row_end",
    "chromaflow_total_rows",
    "chromaflow_input_fingerprint",
    "chromaflow_input_path",
    "chromaflow_model_sha256",
)


@dataclass
class InputInfo:
    """What :func:`open_input` learnt of an input h5: its path, rows, row length, the species of its first row
    (``species0``) and its input fingerprint."""

    path: str
    n_rows: int
    length: int
    species0: bytes
    fingerprint: str


def open_input(path: str) -> tuple[h5py.File, InputInfo]:
    """Open a Helixer-layout genome h5 and validate what prediction needs."""
    fh = open_h5_input(path, "input h5")
    try:
        info = _inspect(fh, path)
    except ChromaflowError:
        fh.close()
        raise
    except (OSError, KeyError, ValueError, RuntimeError) as exc:
        fh.close()
        raise ChromaflowError(f"{path}: corrupt or truncated HDF5 file ({str(exc).splitlines()[0]})") from None
    return fh, info


def _inspect(fh: h5py.File, path: str) -> InputInfo:
    for name in ("data/X", "data/seqids", "data/start_ends"):
        if name not in fh or not isinstance(fh[name], h5py.Dataset):
            raise ChromaflowError(f"{path}: dataset {name} is missing (not a Helixer genome h5?)")
    X = fh["data/X"]
    if X.ndim != 3 or X.shape[2] != 4:
        raise ChromaflowError(f"{path}: data/X has shape {X.shape}, expected (N, L, 4)")
    n, length = int(X.shape[0]), int(X.shape[1])
    if n == 0:
        raise ChromaflowError(f"{path}: data/X has no rows")
    if X.dtype not in (np.dtype("<f2"), np.dtype("<f4"), np.dtype(">f2"), np.dtype(">f4")):
        raise ChromaflowError(f"{path}: data/X has dtype {X.dtype}, expected float16 (Helixer's one-hot)")
    seqids = read_rows(fh["data/seqids"])
    start_ends = read_rows(fh["data/start_ends"])
    if seqids.shape != (n,) or start_ends.shape != (n, 2):
        raise ChromaflowError(
            f"{path}: data/seqids {seqids.shape} / data/start_ends {start_ends.shape} do not match data/X rows ({n})"
        )
    species0 = b""
    if "data/species" in fh and fh["data/species"].shape[0] > 0:
        species0 = bytes(fh["data/species"][0])
    return InputInfo(
        path=path,
        n_rows=n,
        length=length,
        species0=species0,
        fingerprint=input_fingerprint(n, length, seqids, start_ends, species0),
    )


def create_predictions(
    fh: h5py.File,
    *,
    n_rows: int,
    length: int,
    datasets: list[str],
    species0: bytes,
    model_name: str,
    seqids: np.ndarray | None = None,
    start_ends: np.ndarray | None = None,
    row_blocks=None,
    level: int = 9,
) -> h5py.Dataset:
    """Create Predmoter's predictions layout in an open, empty file; return prediction/predictions.
    The rows' seqids and start_ends: as two arrays, or ``row_blocks`` yielding (seqids, start_ends) of consecutive
    rows in ROW_BLOCK blocks (the same writes, without holding every row: predict-merge).
    ``level``: the deflate level the predictions' chunks are written with (Predmoter: 9), declared in the filter."""
    d = len(datasets)
    data = fh.create_group("data")
    pred = fh.create_group("prediction")
    create_species(data, n_rows, species0)
    sq = data.create_dataset("seqids", shape=(n_rows,), dtype="S50", chunks=(1,), maxshape=(None,))
    se = data.create_dataset("start_ends", shape=(n_rows, 2), dtype="int64", chunks=(1, 2), maxshape=(None, 2))
    if row_blocks is not None:
        at = 0
        for ids, s_e in row_blocks:
            sq[at : at + len(ids)] = np.asarray(ids).astype("S50")
            se[at : at + len(ids)] = np.asarray(s_e).astype("int64")
            at += len(ids)
        if at != n_rows:
            raise ValueError(f"row_blocks gave {at} rows for {n_rows}")
    elif n_rows:
        write_rows(sq, np.asarray(seqids).astype("S50"))
        write_rows(se, np.asarray(start_ends).astype("int64"))
    preds = pred.create_dataset(
        "predictions",
        shape=(n_rows, length, d),
        dtype="int64",
        chunks=(1, length, 1),
        maxshape=(None, length, None),
        compression="gzip",
        compression_opts=level,
        shuffle=False,
        fillvalue=-1,
    )
    # held to the end: the order HDF5 closes the objects in (data, pred, sq, se, ds) is part of the file's bytes
    ds = create_model_fields(pred, model_name, datasets)  # noqa: F841
    return preds


def create_species(data: h5py.Group, n_rows: int, species0: bytes) -> None:
    """``data/species``: never written, the value lives in the fill value (the input's species[0]). Created
    first in a predictions file (the order datasets are created in is part of the file's bytes)."""
    data.create_dataset(
        "species", shape=(n_rows,), dtype="S50", chunks=(1,), maxshape=(None,), fillvalue=np.bytes_(species0[:50])
    )


def create_model_fields(pred: h5py.Group, model_name: str, datasets: list[str]) -> h5py.Dataset:
    """``prediction/model_name`` (in its fill value) and ``prediction/datasets``: created last. Returns the
    latter, open."""
    pred.create_dataset(
        "model_name",
        shape=(1,),
        dtype="S256",
        chunks=(1,),
        maxshape=(None,),
        fillvalue=np.bytes_(model_name.encode("utf-8")[:256]),
    )
    ds = pred.create_dataset("datasets", shape=(len(datasets),), dtype="S25", chunks=True, maxshape=(None,))
    ds[:] = np.array([n.encode("utf-8")[:25] for n in datasets], dtype="S25")
    return ds


def finalize_rows(fh: h5py.File, *, seqids: np.ndarray, start_ends: np.ndarray) -> None:
    """Give every dataset of a predictions file made with ``n_rows=0`` (rows grown while predicting) its final
    row count and write seqids/start_ends (FASTA route: the rows are known only at the end)."""
    n = len(seqids)
    for name in ("data/species", "data/seqids", "data/start_ends", "prediction/predictions"):
        fh[name].resize(n, axis=0)
    if n:
        write_rows(fh["data/seqids"], np.asarray(seqids).astype("S50"))
        write_rows(fh["data/start_ends"], np.asarray(start_ends).astype("int64"))
