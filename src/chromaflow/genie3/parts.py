"""Part files: the weight columns of one ``genie3 --targets-chunk`` task, merged by ``genie3-merge``."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from ..utils.errors import ChromaflowError
from ..utils.outputs import atomic_output

PART_FORMAT = "chromaflow-genie3-part/1"


def write_part(path: str | Path, W: np.ndarray, meta: dict, repeats: np.ndarray | None = None) -> None:
    """A target-chunk result: .npz with the float64 weight columns and a JSON metadata string (with
    ``--repeats`` > 1 also each repeat's columns, ``repeats``: repeats x R x T)."""
    meta = dict(meta, format=PART_FORMAT)
    buf = io.BytesIO()
    extra: dict[str, Any] = {} if repeats is None else {"repeats": np.ascontiguousarray(repeats, dtype=np.float64)}
    np.savez_compressed(
        buf, weights=np.ascontiguousarray(W, dtype=np.float64), meta=np.array(json.dumps(meta, sort_keys=True)), **extra
    )
    with atomic_output(path) as tmp:
        tmp.write_bytes(buf.getvalue())


def read_meta(path: str | Path) -> dict:
    """The JSON metadata of a part alone (the weights stay on disk: ``np.load`` of an .npz reads members lazily),
    so genie3-merge checks a whole set of parts before it holds any of their weights."""
    path = Path(path)
    if not path.is_file():
        raise ChromaflowError(f"{path}: part file not found")
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
    except Exception as exc:  # noqa: BLE001 - any unreadable file is a user error here
        raise ChromaflowError(f"{path}: not a chromaflow genie3 part file ({type(exc).__name__}: {exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != PART_FORMAT:
        fmt = meta.get("format") if isinstance(meta, dict) else None
        raise ChromaflowError(f"{path}: not a chromaflow genie3 part file (format {fmt!r})")
    return meta


def read_weights(path: str | Path, meta: dict, genes: list[str]) -> tuple[np.ndarray, np.ndarray | None]:
    """(weights, repeats or None) of a part whose metadata :func:`read_meta` returned: the shape checked against
    the metadata and every value checked finite as the part is read (a NaN or inf weight is a damaged part, named
    by regulator and target; ``genes``: the run's gene names), so no pass over the merged matrix is needed."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            W = z["weights"]
            reps = z["repeats"] if "repeats" in z.files else None
    except Exception as exc:  # noqa: BLE001 - any unreadable file is a user error here
        raise ChromaflowError(f"{path}: not a chromaflow genie3 part file ({type(exc).__name__}: {exc})") from None
    shape = (len(meta["regulators"]), len(meta["targets"]))
    if W.shape != shape or W.dtype != np.float64:
        raise ChromaflowError(
            f"{path}: weight array shape {W.shape} ({W.dtype}) does not match its metadata ({shape}, float64)"
        )
    n = int(meta.get("options", {}).get("repeats", 1))
    if n > 1 and (reps is None or reps.shape != (n, *W.shape)):
        raise ChromaflowError(f"{path}: its {n} repeats' weights are missing or of the wrong shape")
    for arr in (W,) if reps is None or n <= 1 else (W, reps):
        bad = ~np.isfinite(arr)  # one bool per value of this part only
        if bad.any():
            pos = np.unravel_index(int(np.flatnonzero(bad.ravel())[0]), arr.shape)
            r, t = pos[-2], pos[-1]
            raise ChromaflowError(
                f"{path}: non-finite weight {arr[pos]!r} (regulator "
                f"{genes[meta['regulators'][r]]!r}, target {genes[meta['targets'][t]]!r}): "
                f"a damaged part file"
            )
    return W, (reps if n > 1 else None)
