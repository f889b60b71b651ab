"""``chromaflow variant-effect``: predicted chromatin effects of the variants of a VCF/BCF, one row per (variant, ALT).

The command parses its options into :class:`~chromaflow.variant.score.VariantEffectOptions` and calls the core,
:func:`chromaflow.variant.score.run` (docs/variants.md).
"""

from __future__ import annotations

import argparse

from ..utils.cli_options import add_run_options, options_from
from ..model.options import add_inference_options
from .score import DEFAULT_FLANK, VariantEffectOptions
from .score import run as score_variants


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): VCF, FASTA, output table, flank, region, ref/alt tracks, shard and inference
    settings."""
    p.add_argument("--vcf", required=True, help="variants: VCF, bgzipped VCF or BCF (read with pysam)")
    p.add_argument("--fasta", required=True, help="the reference FASTA the VCF was called against (plain or gzip)")
    p.add_argument("--out", required=True, help="effects table (.tsv.gz: gzip; any other name: plain text)")
    p.add_argument(
        "--flank",
        type=int,
        default=DEFAULT_FLANK,
        metavar="F",
        help=f"mean coverage over F bp each side of the variant (default {DEFAULT_FLANK})",
    )
    p.add_argument(
        "--region",
        default=None,
        metavar="CHR[:START-END]",
        help="only the variants in this region (the VCF needs a .tbi or .csi index)",
    )
    add_inference_options(
        p,
        model_help="Predmoter checkpoint (.ckpt); its seq_len is the window length",
        batch_help="model rows (windows x 2 strands) per batch, or auto (default): on CUDA the largest that "
        "fits (probed, as predict does), on CPU 120. Results do not depend on it",
        precision_help="fp32 = exact (default); bf16/fp16 = autocast, faster on GPUs, not exact",
    )
    p.add_argument(
        "--tracks",
        type=int,
        default=0,
        metavar="N",
        help="write ref and alt bigWigs (strand average, per dataset) of the N strongest variants",
    )
    p.add_argument("--tracks-dir", default=None, metavar="DIR", help="folder for --tracks (created)")
    p.add_argument(
        "--shard",
        default=None,
        metavar="I/N",
        help="score only shard I of N: the (variant, ALT) rows [(I-1)*T//N, I*T//N) of the T rows the VCF "
        "gives (VCF order); the table then starts with a #chromaflow shard line, --tracks N writes "
        "the shard's N strongest as candidates; join the shards with chromaflow variant-merge",
    )
    add_run_options(
        p, threads="torch CPU threads (default: all usable CPUs)", threads_default=None, metrics=True, force=True
    )


def run(args: argparse.Namespace) -> int:
    """Run the command: score the predicted effects of the VCF's variants (:func:`chromaflow.variant.score.run`);
    returns the exit status."""
    return score_variants(options_from(args, VariantEffectOptions))
