"""``chromaflow genie3-plan``: how many target chunks one expression matrix needs.

The pipeline splits GENIE3 into tasks of ``--chunk-size`` target genes. The number of genes is counted
here, by the same reader ``chromaflow genie3`` uses (:func:`chromaflow.genie3.expression.read_expression`: TSV or
CSV, optionally gzip, both layouts), so the plan and the GENIE3 tasks can never disagree, and a bad matrix
stops the run with the reader's one-line error before any GENIE3 task starts.
"""

from __future__ import annotations

import argparse
import math

from ..utils.errors import ChromaflowError
from ..utils.outputs import check_outputs, emit_json
from ..utils.sharding import part_bounds
from .network import warn
from .expression import LAYOUTS, read_expression, read_regulators


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): expression matrix, layout, regulators, chunk size and output JSON."""
    p.add_argument("--expression", required=True, help="expression matrix, TSV or CSV (optionally .gz)")
    p.add_argument(
        "--layout", required=True, choices=LAYOUTS, help="orientation of the matrix: genes-x-samples or samples-x-genes"
    )
    p.add_argument("--regulators", help="candidate regulators file: checked against the matrix's genes")
    p.add_argument(
        "--chunk-size", type=int, default=500, metavar="N", help="target genes per GENIE3 task (default 500)"
    )
    p.add_argument("--out", help="write the plan JSON here (default: print it on stdout)")


def plan(genes: int, chunk_size: int) -> dict:
    """Chunk count and the [start, end) target range of each chunk (``genie3 --targets-chunk i/n``)."""
    chunks = max(1, math.ceil(genes / chunk_size))
    return {
        "genes": genes,
        "chunk_size": chunk_size,
        "chunks": chunks,
        "ranges": [list(part_bounds(i, chunks, genes)) for i in range(1, chunks + 1)],
    }


def run(args: argparse.Namespace) -> int:
    """Run the command: count the matrix's genes and write the plan of target chunks as JSON; returns the exit
    status."""
    if args.chunk_size < 1:
        raise ChromaflowError(f"--chunk-size must be >= 1 (got {args.chunk_size})")
    check_outputs([("--out", args.out)], [("--expression", args.expression), ("--regulators", args.regulators)])
    expr = read_expression(args.expression, args.layout)
    for line in expr.warnings:
        warn(line)
    regulators = None
    if args.regulators:
        regulators = len(read_regulators(args.regulators, expr))
    result = {
        "expression": str(args.expression),
        "layout": args.layout,
        "samples": int(expr.n_samples),
        "regulators": regulators,
        **plan(int(expr.n_genes), args.chunk_size),
    }
    emit_json(result, args.out)
    return 0
