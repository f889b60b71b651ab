"""The stages of ``benchmarks/run``, one module each: its sizes (``FULL``, ``QUICK``), the peers it needs
(``PEERS``), its builder (``build(ctx)`` -> (warm-up commands, cases)) and its helpers.

``STAGES`` is the run order; ``OPT_IN`` stages run only when ``--stages`` names them."""

from __future__ import annotations

import importlib
from types import ModuleType

STAGES = (
    "fasta2h5",
    "predict",
    "predict_routes",
    "predict_feed",
    "fasta_shards",
    "bigwig",
    "bigwig_writers",
    "peaks",
    "genie3",
    "genie3_prior",
    "network",
    "coverage",
    "train",
    "variant",
    "interpret",
    "gpu",
    "genie3scale",
    "scale",
    "scaling",
)
#: stages run only when --stages names them (the scale stage's full run takes hours of the whole pipeline; the
#: predict_routes, predict_feed and fasta_shards stages are development measurements of predict's inputs;
#: bigwig_writers compares bigWig writer libraries; variant and interpret write to their own folders,
#: benchmarks/variant/results and benchmarks/interpret/results;
#: gpu needs a CUDA device and writes to benchmarks/gpu/results: benchmarks/gpu/run)
OPT_IN = ("scale", "predict_routes", "predict_feed", "fasta_shards", "bigwig_writers", "variant", "interpret", "gpu")


def stage(name: str) -> ModuleType:
    """The module of stage ``name`` (one of :data:`STAGES`)."""
    if name not in STAGES:
        raise KeyError(f"unknown stage {name!r}; choose from {', '.join(STAGES)}")
    return importlib.import_module(f"{__name__}.{name}")


def sizes(quick: bool) -> dict:
    """Every stage's sizes in one dict (``QUICK`` or ``FULL``; the keys carry the stage's name)."""
    out: dict = {}
    for name in STAGES:
        out.update(stage(name).QUICK if quick else stage(name).FULL)
    return out
