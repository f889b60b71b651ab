"""``chromaflow evaluate``: Predmoter's test mode (``-m test``) for one or more genome h5 files with coverage.

Writes a TSV with one row per file and Predmoter's columns (``file total_avg_val_loss total_avg_val_accuracy
<ds>_avg_val_loss <ds>_avg_val_accuracy ...``; ``nan`` for a dataset the file lacks) and, with ``--plots DIR``, one
PNG per file and dataset: observed vs predicted along the chunk with the most signal, and a predicted-vs-observed
density plot over all positions.
"""

from __future__ import annotations

import argparse
import os

from ..cli_options import add_run_options, resolve_threads
from ..errors import ChromaflowError
from ..model.options import add_device_option
from ..metrics import StageMetrics
from ..outputs import check_outputs


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
    """Run the command: evaluate the model on each h5 file, write the TSV and, with ``--plots``, the plots; returns
    the exit status."""
    import torch

    from ..model.checkpoint import build_model, load_checkpoint
    from .evaluate import evaluate_file, plot_file, write_tsv

    if args.batch_size < 1:
        raise ChromaflowError(f"--batch-size must be >= 1, got {args.batch_size}")
    stems: dict[str, str] = {}
    for h5 in args.h5:
        s = os.path.basename(h5).split(".", 1)[0]
        if s in stems and stems[s] != h5:
            raise ChromaflowError(f"{h5}: same file label {s!r} as {stems[s]} (labels are names cut at the first '.')")
        stems[s] = h5
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ChromaflowError("--device cuda: no CUDA device is available")
    device = torch.device(
        "cuda" if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available()) else "cpu"
    )
    threads = resolve_threads(args.threads)
    torch.set_num_threads(threads)
    with StageMetrics("evaluate", args.metrics, threads=threads, device=str(device), batch_size=args.batch_size) as m:
        ckpt = load_checkpoint(args.model)
        datasets = tuple(ckpt.datasets)
        pngs = [os.path.join(args.plots, f"{s}_{d}.png") for s in stems for d in datasets] if args.plots else []
        check_outputs(
            [("--out", args.out), ("--metrics", args.metrics)] + [("--plots", p) for p in pngs],
            [("--model", args.model)] + [("--h5", h5) for h5 in args.h5],
            [("--plots", args.plots)],
        )
        model = build_model(ckpt).to(device)
        results = [
            evaluate_file(model, datasets, h5, batch_size=args.batch_size, device=device, blacklist=args.blacklist)
            for h5 in args.h5
        ]
        write_tsv(args.out, results, datasets)
        plots = []
        if args.plots:
            for r in results:
                for d in r.datasets:
                    png = os.path.join(args.plots, f"{r.stem}_{d}.png")
                    plot_file(r, d, png, os.path.basename(args.model))
                    plots.append(png)
        chunks = sum(r.chunks for r in results)
        m.set(
            subsequences=chunks,
            files=len(results),
            plots=len(plots),
            datasets=list(datasets),
            results={r.stem: r.values for r in results},
        )
    return 0
