"""``chromaflow predict-plan``: the shards of one assembly's prediction (``chromaflow predict --shard i/n``).

The rows (subsequences) are counted from the FASTA (the rows ``fasta2h5`` writes and ``predict --fasta`` cuts) or
read from a genome h5. A FASTA is laid out from its index (``<fasta>.fai``, and ``.gzi`` for bgzip), which the plan
makes beside the FASTA where there is none and verifies against the reader in one pass
(:func:`chromaflow.genome.faidx.plan_index`), so that ``predict --fasta --shard`` reads only its own rows; where
no index can give the reader's records (plain gzip, lines htslib refuses, ids it reads otherwise) the plan scans,
and says so (``"index": "scan"`` and ``"index_reason"``); ``--shards`` is a count or ``auto`` (one shard per
``--shard-rows`` rows), never more shards than rows and at least one. The plan lists every shard with its row
range (:func:`chromaflow.utils.sharding.part_bounds`, the split ``predict --shard`` makes), so whoever fans the
prediction out and the prediction itself cannot disagree, and a bad FASTA stops here with the reader's one line.
"""

from __future__ import annotations

import argparse
import math

from ..utils.errors import ChromaflowError
from ..utils.inputs import open_h5_input
from ..utils.outputs import check_outputs, emit_json
from ..utils.sharding import shard_list
from ..genome.encoding import DEFAULT_L, check_length

DEFAULT_SHARD_ROWS = 20000


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): FASTA or genome h5, subsequence length, shard count or rows per shard, index
    use and output JSON."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--fasta", help="the assembly's FASTA (plain, gzip or bgzip): rows counted at --subsequence-length"
    )
    src.add_argument("--h5", help="the assembly's genome h5 (chromaflow fasta2h5): rows read from data/X")
    p.add_argument(
        "--subsequence-length",
        type=int,
        default=DEFAULT_L,
        metavar="L",
        help=f"chunk length L of --fasta (default {DEFAULT_L})",
    )
    p.add_argument(
        "--shards",
        default="1",
        metavar="N|auto",
        help="number of shards, or auto: one per --shard-rows rows (default 1)",
    )
    p.add_argument(
        "--shard-rows",
        type=int,
        default=DEFAULT_SHARD_ROWS,
        metavar="R",
        help=f"rows per shard with --shards auto (default {DEFAULT_SHARD_ROWS})",
    )
    p.add_argument(
        "--index",
        choices=("auto", "none"),
        default="auto",
        help="--fasta: auto (default) = lay the FASTA out from <fasta>.fai (made beside it where missing, "
        "verified against the reader) so shards read only their rows; none = scan, make no index",
    )
    p.add_argument("--out", help="write the plan JSON here (default: print it on stdout)")


def shard_count(rows: int, shards: str, shard_rows: int) -> int:
    """Shards for ``rows`` rows: ``shards`` is an integer >= 1 or ``auto`` (ceil(rows / shard_rows)); at least one,
    never more than ``rows``."""
    text = str(shards).strip()
    if text == "auto":
        if shard_rows < 1:
            raise ChromaflowError(f"--shard-rows must be >= 1 (got {shard_rows})")
        return max(1, math.ceil(rows / shard_rows))
    if not text.isdigit() or int(text) < 1:
        raise ChromaflowError(f"--shards {shards!r}: expected an integer >= 1 or auto")
    return max(1, min(int(text), rows))


def plan(rows: int, shards: str, shard_rows: int) -> dict:
    """The shard list: ``shard`` (as ``predict --shard`` takes it), ``index``/``count`` and the [start, end) rows."""
    n = shard_count(rows, shards, shard_rows)
    return {"subsequences": rows, "shard_count": n, "shards": shard_list(n, rows)}


def run(args: argparse.Namespace) -> int:
    """Run the command: count the input's rows and write the shard plan as JSON; returns the exit status."""
    check_outputs([("--out", args.out)], [("--fasta", args.fasta), ("--h5", args.h5)])
    shard_count(1, args.shards, args.shard_rows)  # bad options fail before any index is made
    if args.fasta:
        from ..genome.faidx import plan_index
        from ..genome.layout import scan_layout

        L = check_length(args.subsequence_length)
        idx, how = plan_index(str(args.fasta), use=args.index == "auto")
        lay = scan_layout(args.fasta, L) if idx is None else idx.layout(L)
        source = {"fasta": str(args.fasta), **lay.summary(), **how}
        rows = lay.n_rows
    else:
        with open_h5_input(args.h5, "genome h5") as fh:
            if "data/X" not in fh:
                raise ChromaflowError(f"{args.h5}: no data/X (not a genome h5 from chromaflow fasta2h5)")
            shape = fh["data/X"].shape
        source = {"h5": str(args.h5), "subsequence_length": int(shape[1])}
        rows = int(shape[0])
    result = {**source, **plan(rows, args.shards, args.shard_rows)}
    emit_json(result, args.out)
    return 0
