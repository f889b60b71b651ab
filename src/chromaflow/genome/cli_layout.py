"""``chromaflow fasta-layout``: the rows (subsequences) a FASTA gives at chunk length L, without writing anything
(the same count ``predict-plan --fasta`` plans the pipeline's prediction shards from)."""

from __future__ import annotations

import argparse
import json
import os

from ..utils.errors import ChromaflowError
from ..utils.outputs import write_json_atomic
from .encoding import DEFAULT_L, check_length
from .layout import scan_layout


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): the FASTA, the subsequence length and the output JSON."""
    p.add_argument("--fasta", required=True, help="input FASTA (plain, gzip or bgzip; detected by content)")
    p.add_argument(
        "--subsequence-length", type=int, default=DEFAULT_L, metavar="L", help=f"chunk length L (default {DEFAULT_L})"
    )
    p.add_argument("--out", default=None, help="write the JSON here (default: stdout)")


def run(args: argparse.Namespace) -> int:
    """Run the command: scan the FASTA's layout and write its summary (subsequence length, records, bp, subsequences) as
    JSON to ``--out`` or stdout; returns the exit status."""
    L = check_length(args.subsequence_length)
    if not os.path.exists(args.fasta) or os.path.isdir(args.fasta):
        raise ChromaflowError(f"{args.fasta}: no such file")
    lay = scan_layout(args.fasta, L)
    obj = {"fasta": args.fasta, **lay.summary()}
    if args.out:
        write_json_atomic(args.out, obj)
    else:
        print(json.dumps(obj, sort_keys=True))
    return 0
