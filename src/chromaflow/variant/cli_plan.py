"""``chromaflow variant-plan``: the shards of one VCF's variant effects (``chromaflow variant-effect --shard i/n``).

The (variant, ALT) rows are counted by the reader ``variant-effect`` uses (:func:`chromaflow.variant.vcf.read_variants`,
so a bad VCF stops here with its one line), then split into shards of at most ``--shard-size`` rows: ceil(rows /
size) shards, at least one. The plan lists every shard with its row range
(:func:`chromaflow.utils.sharding.part_bounds`, the split ``variant-effect --shard`` makes), as ``predict-plan``
does for prediction.
"""

from __future__ import annotations

import argparse
import math

from ..utils.errors import ChromaflowError
from ..utils.outputs import check_outputs, emit_json
from ..utils.sharding import shard_list

#: (variant, ALT) rows per shard: each costs a reference and an alternative window on both strands, 4 model rows
#: (fewer where ALTs share a reference window), so 5000 variants are about the 20,000 model rows of a default
#: prediction shard (predict-plan --shard-rows): a shard of either kind is about the same work for one GPU
DEFAULT_SHARD_SIZE = 5000


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): VCF, region, shard size and output JSON."""
    p.add_argument("--vcf", required=True, help="variants: VCF, bgzipped VCF or BCF (read with pysam)")
    p.add_argument(
        "--region",
        default=None,
        metavar="CHR[:START-END]",
        help="only the variants in this region, as variant-effect --region (needs a .tbi or .csi index)",
    )
    p.add_argument(
        "--shard-size",
        type=int,
        default=DEFAULT_SHARD_SIZE,
        metavar="V",
        help=f"at most V (variant, ALT) rows per shard (default {DEFAULT_SHARD_SIZE})",
    )
    p.add_argument("--out", help="write the plan JSON here (default: print it on stdout)")


def check_shard_size(shard_size: int) -> None:
    """Refuse a ``--shard-size`` below 1.

    Raises
    ------
    ChromaflowError
        One line naming the option (``--shard-size must be >= 1, got 0``).
    """
    if shard_size < 1:
        raise ChromaflowError(f"--shard-size must be >= 1, got {shard_size}")


def plan(rows: int, shard_size: int) -> dict:
    """The shard list: ``shard`` (as ``variant-effect --shard`` takes it), ``index``/``count`` and the [start, end)
    rows of each (``shard_size`` checked by :func:`check_shard_size`)."""
    check_shard_size(shard_size)
    n = max(1, math.ceil(rows / shard_size))
    return {"variants": rows, "shard_size": shard_size, "shard_count": n, "shards": shard_list(n, rows)}


def run(args: argparse.Namespace) -> int:
    """Run the command: count the VCF's (variant, ALT) rows and write the shard plan as JSON; returns the exit
    status."""
    from .vcf import read_variants

    check_shard_size(args.shard_size)
    check_outputs([("--out", args.out)], [("--vcf", args.vcf)])
    variants = read_variants(args.vcf, args.region)
    emit_json(
        {
            "vcf": str(args.vcf),
            **({"region": args.region} if args.region else {}),
            **plan(len(variants), args.shard_size),
        },
        args.out,
    )
    return 0
