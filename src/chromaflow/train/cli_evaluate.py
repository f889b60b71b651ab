"""``chromaflow evaluate``: Predmoter's test mode (``-m test``) for one or more genome h5 files with coverage.

Writes a TSV with one row per file and Predmoter's columns (``file total_avg_val_loss total_avg_val_accuracy
<ds>_avg_val_loss <ds>_avg_val_accuracy ...``; ``nan`` for a dataset the file lacks) and, with ``--plots DIR``, one
PNG per file and dataset: observed vs predicted along the chunk with the most signal, and a predicted-vs-observed
density plot over all positions.

The command parses its options into :class:`~chromaflow.train.evaluate.EvaluateOptions` and calls the core,
:func:`chromaflow.train.evaluate.run`.
"""

from __future__ import annotations

import argparse

from ..utils.cli_options import add_run_options, options_from
from ..model.options import add_device_option


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): checkpoint, genome h5 files, output TSV, plots folder, batch size, blacklist
    and device."""
    p.add_argument("--model", required=True, help="checkpoint (.ckpt; Predmoter's or ours)")
    p.add_argument("--h5", nargs="+", required=True, help="genome h5 file(s) with evaluation/<dataset>_coverage")
    p.add_argument("--out", required=True, help="metrics TSV to write (atomically)")
    p.add_argument("--plots", default=None, metavar="DIR", help="write <stem>_<dataset>.png plots into this folder")
    p.add_argument("--batch-size", type=int, default=10, help="chunks per forward pass (default 10)")
    p.add_argument("--blacklist", action="store_true", help="drop chunks with data/blacklist == 0 (Predmoter -bl)")
    add_device_option(p)
    add_run_options(p, threads="torch threads (default: all usable CPUs)", metrics=True)


def run(args: argparse.Namespace) -> int:
    """Run the command: evaluate the model on each h5 file, write the TSV and, with ``--plots``, the plots
    (:func:`chromaflow.train.evaluate.run`); returns the exit status."""
    from .evaluate import EvaluateOptions  # the core imports torch: only when the command runs, not for --help
    from .evaluate import run as evaluate

    return evaluate(options_from(args, EvaluateOptions))
