"""Training runs read back: Predmoter's ``-m train`` logs and ``chromaflow train``'s metrics, per epoch.

Used by the harness's ``train`` stage (seconds per epoch and the loss curve of every run) and by the ``gpu`` stage's
training case (the same, on a GPU), which read back what each run wrote.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import statistics
from pathlib import Path

ARCH = {
    "default": [],  # Predmoter's CLI defaults: bi-hybrid, 1 cnn layer, 64 filters, 1 BiLSTM of 128, bnorm
    "small": ["--cnn-layers", "1", "--filter-size", "16", "--hidden-size", "16"],
}
#: the per-epoch columns both tools report (Predmoter's metrics.log, chromaflow's metrics.tsv)
CURVE_KEYS = ("avg_train_loss", "avg_val_loss", "avg_train_accuracy", "avg_val_accuracy")
_STAMP = r"(\d\d\.\d\d\.\d{4} \d\d:\d\d:\d\d), INFO: Training "


def predmoter_curve(path: Path) -> list[dict]:
    """Predmoter's metrics.log (whitespace-separated columns, one row per epoch) as a list of dicts."""
    lines = [ln for ln in Path(path).read_text().splitlines() if ln.strip()]
    cols = lines[0].split()
    return [dict(zip(cols, map(float, ln.split()))) for ln in lines[1:]]


def ours_curve(path: Path) -> list[dict]:
    """chromaflow train's metrics.tsv (tab-separated, one row per epoch) as a list of dicts."""
    lines = [ln for ln in Path(path).read_text().splitlines() if ln.strip()]
    cols = lines[0].split("\t")
    return [dict(zip(cols, map(float, ln.split("\t")))) for ln in lines[1:]]


def predmoter_run(out: Path) -> dict:
    """What a Predmoter ``-m train -o OUT`` run reports: seconds per epoch (its log's "Training started" and
    "Training ended" times, 1-s resolution, over the epochs) and the per-epoch curve."""
    log = (Path(out) / "predmoter.log").read_text()
    t0 = dt.datetime.strptime(re.search(_STAMP + "started", log).group(1), "%d.%m.%Y %H:%M:%S")
    t1 = dt.datetime.strptime(re.search(_STAMP + "ended", log).group(1), "%d.%m.%Y %H:%M:%S")
    curve = predmoter_curve(Path(out) / "metrics.log")
    return {"epoch_s": (t1 - t0).total_seconds() / max(len(curve), 1), "epochs": len(curve), "curve": curve}


def ours_run(metrics_json: Path) -> dict:
    """What a ``chromaflow train --metrics JSON`` run reports: seconds per epoch (the mean of the epochs'
    epoch_s, validation included), throughput, data wait and the per-epoch curve."""
    m = json.loads(Path(metrics_json).read_text())
    ep = m["epochs"]
    return {
        "epoch_s": statistics.fmean(e["epoch_s"] for e in ep),
        "epochs": len(ep),
        "samples_per_s": m["train_samples_per_s"],
        "bp_per_s": m["train_bp_per_s"],
        "data_wait_fraction": m["data_wait_fraction"],
        "curve": [
            {
                k: e.get(k)
                for k in ("epoch", *CURVE_KEYS, "epoch_s", "data_wait_fraction", "train_start_unix", "train_end_unix")
            }
            for e in ep
        ],
    }


def chunks(folder: Path) -> int:
    """Training chunks (rows of data/X) of the h5 files of a folder."""
    import h5py

    n = 0
    for f in sorted(Path(folder).glob("*.h5")):
        with h5py.File(f, "r") as fh:
            n += fh["data/X"].shape[0]
    return n
