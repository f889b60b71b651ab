"""Files for the predict tests (CPU, CUDA and the FASTA route): a small genome h5, and the comparison of two
predictions files (layout, storage properties and values)."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np


def write_genome_h5(path: Path, n_rows: int, length: int, seed: int = 0) -> np.ndarray:
    """A small Helixer-layout genome h5: random one-hot, some N (0.25) and padded rows."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n_rows, length, 4), dtype=np.float16)
    X[np.arange(n_rows)[:, None], np.arange(length)[None, :], rng.integers(0, 4, (n_rows, length))] = 1
    X[0, 3:9] = 0.25
    valid = [length] * n_rows
    for r in range(1, n_rows, 3):
        valid[r] = int(rng.integers(1, length))
        X[r, valid[r] :] = 0
    with h5py.File(path, "w") as f:
        f.create_dataset(
            "data/X", data=X, chunks=(1, length, 4), maxshape=(None, length, 4), compression="gzip", shuffle=True
        )
        f.create_dataset(
            "data/seqids",
            data=np.array([b"chr%d" % (r // 2) for r in range(n_rows)], dtype="S50"),
            chunks=(1,),
            maxshape=(None,),
        )
        f.create_dataset(
            "data/species", data=np.array([b"Testus_specius"] * n_rows, dtype="S25"), chunks=(1,), maxshape=(None,)
        )
        se = np.array([[r * length, r * length + valid[r]] for r in range(n_rows)], dtype=np.int64)
        f.create_dataset("data/start_ends", data=se, chunks=(1, 2), maxshape=(None, 2))
    return X


def layout(path: Path, skip_model_name: bool = False) -> dict:
    out = {}
    with h5py.File(path, "r") as f:

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                t = obj.id.get_type()
                fill = obj.fillvalue
                out[name] = (
                    obj.shape,
                    obj.dtype.str,
                    obj.chunks,
                    obj.maxshape,
                    obj.compression,
                    obj.compression_opts,
                    obj.shuffle,
                    None if (skip_model_name and name == "prediction/model_name") else fill,
                    dict(obj.attrs),
                    obj.id.get_create_plist().get_nfilters(),
                    getattr(t, "get_cset", lambda: None)(),
                    getattr(t, "get_strpad", lambda: None)(),
                )

        f.visititems(visit)
        out["/attrs"] = dict(f.attrs)
        out["/groups"] = sorted(f.keys())
    return out


def assert_same_file(a: Path, b: Path, skip_model_name: bool = True) -> None:
    assert layout(a, skip_model_name) == layout(b, skip_model_name)
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        for name in ("data/seqids", "data/start_ends", "data/species", "prediction/datasets", "prediction/predictions"):
            assert np.array_equal(fa[name][()], fb[name][()]), name
        assert fa["data/species"].id.get_storage_size() == 0
        assert fa["prediction/model_name"].id.get_storage_size() == 0
