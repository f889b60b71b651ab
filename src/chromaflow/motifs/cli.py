"""``chromaflow motif-prior``: a (TF, target) prior for GENIE3 from motif hits in promoter windows.

The command parses its options into :class:`~chromaflow.motifs.prior.MotifPriorOptions` and calls the core,
:func:`chromaflow.motifs.prior.run` (what the prior is: its docstring and docs/networks.md).
"""

from __future__ import annotations

import argparse

from ..annotation.windows import add_window_options
from ..utils.cli_options import add_run_options, options_from
from .prior import MotifPriorOptions
from .prior import run as build_prior
from .scan import DEFAULT_P


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): FASTA, annotation, motifs and TF-motif table, regulators, accessibility
    source, p-value, TSS window and outputs."""
    p.add_argument("--fasta", required=True, metavar="G.fa", help="the assembly (plain or gzip)")
    p.add_argument("--annotation", required=True, metavar="GFF", help="GFF3 or GTF of its genes")
    p.add_argument(
        "--motifs",
        required=True,
        metavar="M",
        help="JASPAR or MEME motif file, or jaspar:<COLLECTION>/<tax group>[@<release>] from pyjaspar's "
        "bundled database (e.g. jaspar:CORE/plants)",
    )
    tfs = p.add_mutually_exclusive_group(required=True)
    tfs.add_argument(
        "--tf-motifs",
        metavar="TSV",
        help="TF<TAB>motif id (or unique name) per line; an empty motif lists a TF without motif",
    )
    tfs.add_argument(
        "--tf-families",
        metavar="TSV",
        help="TF<TAB>family (JASPAR's names) per line, for motifs a model learned: --motifs DIR/motifs.meme and "
        "--matches DIR/matches.tsv of discover-motifs; a TF gets the motifs matched to its family",
    )
    p.add_argument("--matches", metavar="TSV", default=None, help="discover-motifs' matches.tsv (with --tf-families)")
    p.add_argument(
        "--max-qvalue",
        type=float,
        default=0.05,
        metavar="Q",
        help="with --tf-families: a discovered motif's matches below this q-value count (default 0.05)",
    )
    p.add_argument(
        "--regulators",
        metavar="TXT",
        default=None,
        help="more regulators, one per line (those without a motif get NA); default: the TFs of --tf-motifs",
    )
    acc = p.add_mutually_exclusive_group()
    acc.add_argument("--predictions", metavar="P.h5", help="weight each hit by the predicted accessibility at it")
    acc.add_argument(
        "--accessibility",
        metavar="TSV",
        help="weight each hit by its window's percentile from a gene-accessibility table",
    )
    p.add_argument(
        "--dataset",
        default=None,
        metavar="DS",
        help="dataset whose accessibility weights hits (default: atacseq if present, else the first)",
    )
    p.add_argument("--p-value", type=float, default=DEFAULT_P, metavar="P", help=f"hit p-value (default {DEFAULT_P})")
    p.add_argument("--out", required=True, metavar="TSV[.gz]", help="the long prior table")
    p.add_argument("--matrix", default=None, metavar="TSV[.gz]", help="also a targets x regulators prior matrix")
    add_window_options(p)
    add_run_options(p, force=True, metrics=True)


def run(args: argparse.Namespace) -> int:
    """Run the command: build the motif prior for GENIE3 (:func:`chromaflow.motifs.prior.run`); returns the exit
    status."""
    return build_prior(options_from(args, MotifPriorOptions))
