"""Training runs read back: Predmoter's ``-m train`` logs and ``chromaflow train``'s metrics, per epoch.

Used by the harness's ``train`` stage (``cases.train``: seconds per epoch and the loss curve of every run) and by
``benchmarks/gpu/run`` (``run_predmoter``/``run_ours``: one timed run each, with the benchmarks' process timer).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

PEER = Path(__file__).resolve().parents[3] / "shared" / "peers" / "bin" / "peer-predmoter"
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


# --------------------------------------------------------------------------------------------------
# one timed run each (benchmarks/gpu/run)
# --------------------------------------------------------------------------------------------------
def _timed(cmd, log: Path, env=None) -> dict:
    """Run cmd with the benchmarks' process timer, the tree sampled: wall, CPU seconds of the whole process tree
    (the larger of wait4's and the sampled descendants': DDP ranks are not waited for) and peak RSS (the larger of
    ru_maxrss and the sampled summed RSS of the tree)."""
    from .timer import measure

    with open(log, "w") as fh:
        r = measure(cmd, env=env, stdin=None, stdout=fh, stderr=subprocess.STDOUT, sample_tree=True)
    if r["exit"] != 0:
        raise SystemExit(f"{cmd[0]} failed (rc {r['exit']}); see {log}")
    return {k: r[k] for k in ("wall_s", "cpu_s", "peak_rss_bytes", "processes")}


def run_predmoter(
    data: Path, out: Path, epochs: int, arch: list[str], *, device: str = "cpu", peer: list | None = None
) -> dict:
    """Predmoter ``-m train`` (``peer``: the launcher, default the peers kit's; ``device``: its --device, cpu|gpu)."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    r = _timed(
        [
            *(peer or [PEER]),
            "-m",
            "train",
            "-i",
            data,
            "-o",
            out,
            "--seed",
            "1",
            "--device",
            device,
            "-e",
            str(epochs),
            "-b",
            "120",
            *arch,
        ],
        out / "stdout.log",
    )
    r.update(predmoter_run(out))
    return r


def run_ours(data: Path, out: Path, epochs: int, arch: list[str], extra: list[str], *, device: str = "cpu") -> dict:
    """``chromaflow train`` (``device``: cpu|cuda) with ``extra`` options; the metrics JSON's epochs and curve."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    metrics = out / "metrics.json"
    r = _timed(
        [
            sys.executable,
            "-m",
            "chromaflow",
            "train",
            "--input-dir",
            data,
            "--out",
            out / "run",
            "--seed",
            "1",
            "--epochs",
            str(epochs),
            "--device",
            device,
            *arch,
            *extra,
            "--metrics",
            metrics,
            "--force",
        ],
        out / "stdout.log",
        env=dict(os.environ, CHROMAFLOW_PROGRESS="0"),
    )
    r.update(ours_run(metrics))
    return r
