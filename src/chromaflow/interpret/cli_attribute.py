"""``chromaflow attribute``: per-base contribution scores of a Predmoter-compatible model for regions.

The command parses its options into :class:`~chromaflow.interpret.core.AttributeOptions` and calls the core,
:func:`chromaflow.interpret.core.run` (docs/interpret.md).
"""

from __future__ import annotations

import argparse

from ..model.options import add_inference_options
from ..utils.cli_options import add_run_options, options_from
from .core import DEFAULT_WINDOW, AttributeOptions
from .core import run as attribute
from .methods import DEFAULT_STEPS, METHODS, STRANDS


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): genome, regions, dataset and strand, method, window, outputs and the model's
    runtime options."""
    genome = p.add_mutually_exclusive_group(required=True)
    genome.add_argument("--fasta", default=None, help="the genome FASTA (plain, gzip or BGZF)")
    genome.add_argument("--h5", default=None, help="the genome as a Helixer-layout h5 (fasta2h5's output)")
    p.add_argument(
        "--regions", required=True, help="BED or narrowPeak (plain or gzip); a narrowPeak summit is the centre"
    )
    p.add_argument("--dataset", required=True, help="the model's dataset whose predicted coverage is explained")
    p.add_argument(
        "--strand", choices=STRANDS, default="avg", help="plus, minus or their mean (avg, default), as predict's tracks"
    )
    p.add_argument(
        "--method",
        choices=METHODS,
        default="ig",
        help="ig: Integrated Gradients (captum; default, fast: --steps passes per region); ism: in-silico saturation "
        "mutagenesis (exact, 3 x --window passes per region)",
    )
    p.add_argument(
        "--window",
        type=int,
        default=DEFAULT_WINDOW,
        metavar="W",
        help=f"bases reported around each region's centre (default {DEFAULT_WINDOW}; at most the model's seq_len)",
    )
    p.add_argument(
        "--steps", type=int, default=DEFAULT_STEPS, help=f"Integrated Gradients' path steps (default {DEFAULT_STEPS})"
    )
    p.add_argument(
        "--ism-regions",
        type=int,
        default=0,
        metavar="N",
        help="with --method ig: also run ISM on the first N regions and store the agreement (regions/ism_pearson)",
    )
    p.add_argument(
        "--context",
        type=int,
        default=None,
        metavar="N",
        help="model input bases around each centre (default: the model's seq_len); shorter is proportionally faster, "
        "and the model then sees less of the region's surroundings than it was trained with",
    )
    p.add_argument(
        "--top",
        type=int,
        default=0,
        metavar="N",
        help="only the N regions of highest score (narrowPeak signalValue, BED score; default 0: every region)",
    )
    p.add_argument("--out", required=True, help="contributions (HDF5: onehot, hypothetical, observed, regions/)")
    p.add_argument(
        "--bigwig",
        default=None,
        metavar="PREFIX",
        help="also a bigWig of the observed bases' contributions (PREFIX.bw)",
    )
    add_inference_options(
        p,
        model_help="Predmoter checkpoint (.ckpt); its seq_len is the model input around each region",
        batch_help="model rows per call (mutants for ism, path points for ig), or auto (default): 8",
        precision_help="fp32 = exact (default); bf16/fp16 = autocast, faster on GPUs, not exact",
    )
    add_run_options(
        p, threads="torch CPU threads (default: all usable CPUs)", threads_default=None, metrics=True, force=True
    )


def run(args: argparse.Namespace) -> int:
    """Run the command: attribute the regions (:func:`chromaflow.interpret.core.run`); returns the exit status."""
    return attribute(options_from(args, AttributeOptions))
