"""Part files: the weight columns of one ``genie3 --targets-chunk`` task, merged by ``genie3-merge``."""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from ..common import ChromaflowError, atomic_output

PART_FORMAT = "chromaflow-genie3-part/1"


def write_part(path: str | Path, W: np.ndarray, meta: dict, repeats: np.ndarray | None = None) -> None:
    """A target-chunk result: .npz with the float64 weight columns and a JSON metadata string (with
    ``--repeats`` > 1 also each repeat's columns, ``repeats``: repeats x R x T)."""
    meta = dict(meta, format=PART_FORMAT)
    buf = io.BytesIO()
    extra = {} if repeats is None else {"repeats": np.ascontiguousarray(repeats, dtype=np.float64)}
    np.savez_compressed(buf, weights=np.ascontiguousarray(W, dtype=np.float64),
                        meta=np.array(json.dumps(meta, sort_keys=True)), **extra)
    with atomic_output(path) as tmp:
        tmp.write_bytes(buf.getvalue())


def read_part(path: str | Path, with_repeats: bool = False):
    """(weights, meta), or (weights, meta, repeats or None) with ``with_repeats``."""
    path = Path(path)
    if not path.is_file():
        raise ChromaflowError(f"{path}: part file not found")
    try:
        with np.load(path, allow_pickle=False) as z:
            W = z["weights"]
            meta = json.loads(str(z["meta"]))
            reps = z["repeats"] if "repeats" in z.files else None
    except Exception as exc:  # noqa: BLE001 - any unreadable file is a user error here
        raise ChromaflowError(f"{path}: not a chromaflow genie3 part file ({type(exc).__name__}: {exc})") from None
    if meta.get("format") != PART_FORMAT:
        raise ChromaflowError(f"{path}: not a chromaflow genie3 part file (format {meta.get('format')!r})")
    if with_repeats:
        n = int(meta.get("options", {}).get("repeats", 1))
        if n > 1 and (reps is None or reps.shape != (n, *W.shape)):
            raise ChromaflowError(f"{path}: its {n} repeats' weights are missing or of the wrong shape")
        return W, meta, reps
    return W, meta
