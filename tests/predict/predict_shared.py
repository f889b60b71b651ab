"""Code the predict test files share (tests/predict/): the path of a file of Predmoter's reference folder, and the
engine run on a small genome h5 that the engine tests and the CUDA-executor-logic tests make."""

from __future__ import annotations

from pathlib import Path

import h5py
import torch


def predmoter(reference_dir: Path, name: str) -> Path:
    """``name`` in the reference folder's ``predmoter/`` (Predmoter's files: mini_model.ckpt, pred_data_*)."""
    return reference_dir / "predmoter" / name


def engine_run(tmp_path, model, X, **kw):
    """Rows of the genome h5 ``tmp_path/g.h5`` (its data/X is ``X``) predicted by ``model`` on the CPU through
    :func:`chromaflow.predict.engine.run_prediction` (``kw``: its settings) into ``tmp_path/o.h5``; returns the
    engine's stats and the (n, L, 1) int64 predictions."""
    from chromaflow.predict import engine, h5io

    g = tmp_path / "g.h5"
    with h5py.File(g, "r") as f, h5py.File(tmp_path / "o.h5", "w") as out:
        dset = h5io.create_predictions(
            out,
            n_rows=X.shape[0],
            length=X.shape[1],
            datasets=["a"],
            species0=b"s",
            model_name="m",
            seqids=f["data/seqids"][()],
            start_ends=f["data/start_ends"][()],
        )
        kw.setdefault("streams", 1)
        stats = engine.run_prediction(
            model,
            f["data/X"],
            dset,
            row_start=0,
            row_end=X.shape[0],
            device=torch.device("cpu"),
            threads=1,
            num_workers=1,
            **kw,
        )
    with h5py.File(tmp_path / "o.h5") as out:
        return stats, out["prediction/predictions"][()]
