"""Training: Predmoter ``-m train`` against ``chromaflow train`` (streaming, DDP over the CPUs).

The stage's sizes (``FULL`` for people, ``QUICK`` for CI), the peers it needs, its builder (``build(ctx)``:
(warm-up commands, cases)) and its helpers; ``benchmarks/stages/__init__.py`` lists the stages in run order.
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path

from ..harness.core import Case, Contender
from ..harness.stagekit import (
    Ctx,
    L,
    agree_child,
    count_chunks,
    gen,
    ours,
)

#: launchers of ../shared/peers/bin this stage needs
PEERS = ['peer-predmoter']
#: sizes of the full run (keys are the results files' and the docs' names; Ctx.cfg merges every stage's)
FULL = {
    # train: 1 training file of 10 chunks per strand (213,840 bp), a half-size validation file, Predmoter's default
    # architecture, 1 epoch; our variants (train_variants()) beside Predmoter -m train. Sized for 3 repeats in about
    # half an hour on a shared 2-core machine (a Predmoter run of 60 chunks took over 10 min there at load 15)
    "train_files": 1,
    "train_record_bp": 10 * L,
    "train_epochs": 1,
    "train_model": "default",
    "train_variants": ["ours", "ours_procs"],
}
#: sizes of the --quick run
QUICK = {
    "train_files": 1,
    "train_record_bp": 2 * L,
    "train_epochs": 1,
    "train_model": "small",
    "train_variants": ["ours"],  # Predmoter's start-up alone is ~20 CPU s: one of ours beside it
}


def _usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def train_variants(p: int) -> dict[str, tuple[str, list[str]]]:
    """Our training variants beside Predmoter: key -> (label, options after --batch-size 120). ``ours_procs``:
    DDP over p processes of one thread on one CPU (BatchNorm synchronised, global batch 120 = p x 120/p): the same
    arithmetic as one process."""
    return {
        "ours": ("chromaflow train --devices 1 (streaming data)", []),
        "ours_procs": (
            f"chromaflow train --devices {p} --threads 1 --batch-size {120 // p} (DDP)",
            ["--devices", str(p), "--threads", "1", "--batch-size", str(120 // p)],
        ),
        "ours_ram": ("chromaflow train --data-mode ram", ["--data-mode", "ram"]),
        "ours_bf16": ("chromaflow train --precision bf16-mixed", ["--precision", "bf16-mixed"]),
    }


def _train_peer(ctx: Ctx, data: Path, epochs: int, arch: list) -> Contender:
    """``Predmoter -m train`` on the CPU, batch 120, seed 1."""
    return Contender(
        "predmoter",
        f"Predmoter -m train --device cpu -b 120 ({epochs} epoch{'s' * (epochs > 1)})",
        "peer",
        lambda d, r: [
            ctx.peer("peer-predmoter"),
            "-m",
            "train",
            "-i",
            data,
            "-o",
            d,
            "--seed",
            "1",
            "--device",
            "cpu",
            "-e",
            str(epochs),
            "-b",
            "120",
            *arch,
        ],
    )


def _train_ours(key: str, label: str, options: list, data: Path, epochs: int, arch: list) -> Contender:
    """Our training variant ``key`` (:func:`train_variants`: its label and options after --batch-size 120)."""
    return Contender(
        key,
        label,
        "ours",
        lambda d, r: ours(
            "train",
            "--input-dir",
            data,
            "--out",
            d / "run",
            "--seed",
            1,
            "--epochs",
            epochs,
            "--device",
            "cpu",
            *arch,
            "--batch-size",
            120,
            *options,
            "--metrics",
            d / "metrics.json",
        ),
    )


def _train_per_run(key: str, d: Path) -> dict:
    """A run's seconds per epoch and loss curve from its tool's own record (the curve without its timestamps)."""
    from ..harness.training import ours_run, predmoter_run

    r = predmoter_run(d) if key == "predmoter" else ours_run(d / "metrics.json")
    for e in r["curve"]:
        e.pop("train_start_unix", None)
        e.pop("train_end_unix", None)
    return r


def _train_agree(mine: list[Contender]):
    """agree(): each of our loss curves against Predmoter's (bf16's is recorded, not expected equal)."""

    def agree(dirs: dict) -> dict:
        per = {
            c.key: agree_child("losscurve", dirs[c.key] / "run" / "metrics.tsv", dirs["predmoter"] / "metrics.log")
            for c in mine
            if c.key != "ours_bf16"
        }  # bf16: its curve is recorded, not expected equal
        return {
            "ok": all(v.get("ok") for v in per.values()),
            "per_contender": per,
            "detail": "; ".join(f"{k}: {v.get('detail')}" for k, v in per.items()),
        }

    return agree


def train(ctx: Ctx) -> tuple[list, list[Case]]:
    """Same files, seed 1, architecture, global batch 120, Adam lr 0.001 and epochs, on the CPU. Each run reports
    its seconds per epoch (Predmoter: its log's training start/end; ours: the metrics JSON, validation included)
    and its loss curve, which must equal Predmoter's (the fidelity test's rule)."""
    from ..harness.training import ARCH

    cfg = ctx.cfg
    files, bp, epochs, model = cfg["train_files"], cfg["train_record_bp"], cfg["train_epochs"], cfg["train_model"]
    arch = ARCH[model]
    data = ctx.inputs() / f"training_{files}x{bp}bp_seed1"
    p = _usable_cpus()
    variants = train_variants(p)
    peer = _train_peer(ctx, data, epochs, arch)
    mine = [_train_ours(v, variants[v][0], variants[v][1], data, epochs, arch) for v in cfg["train_variants"]]

    def prepare():
        if not data.exists():
            ctx.log(f"  generating {data.name}")
            gen("training", data, files, bp, 1)
        params["chunks"] = {s: count_chunks(data / s) for s in ("train", "val")}

    params = {
        "train_files": files,
        "bp_per_file": bp,
        "validation_bp": bp // 2,
        "epochs": epochs,
        "model": model,
        "arch_args": " ".join(arch) or "Predmoter defaults",
        "batch_size": 120,
        "seed": 1,
        "usable_cpus": p,
        "data": "gen.py training: fasta2h5 + add-coverage of seeded reads (atacseq --shift, h3k4me3)",
    }
    case = Case(
        "train",
        f"{files}x{bp / 1e3:g}kbp_{model}_{epochs}epoch",
        params,
        [peer, *mine],
        [(c.key, "predmoter") for c in mine],
        _train_agree(mine),
        per_run=_train_per_run,
        prepare=prepare,
        note="process wall and CPU (start-up included); s / epoch from each tool's own record (Predmoter: its "
        "log's 'Training started' to 'Training ended', 1-s resolution, over the epochs; ours: the "
        "metrics JSON's epoch_s, validation included); loss curves must equal Predmoter's (rel 1e-3 or "
        "abs 1e-5 per epoch)",
    )
    return [], [case]


build = train


# --------------------------------------------------------------------------------------------------
# the stage's tables and plots (benchmarks/render)
# --------------------------------------------------------------------------------------------------
def _epoch_s(c: dict, key: str) -> float | None:
    """Median seconds per epoch of a contender's runs of a train case (each tool's own log)."""
    v = [r["epoch_s"] for r in c.get("runs", []) if r["contender"] == key and r.get("epoch_s") is not None]
    return statistics.median(v) if v else None
