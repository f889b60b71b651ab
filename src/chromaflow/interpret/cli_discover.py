"""``chromaflow discover-motifs``: the motifs a model learned, from its contribution scores (TF-MoDISco-lite), matched
against JASPAR or a motif file (TOMTOM).

The command parses its options into :class:`~chromaflow.interpret.discover.DiscoverOptions` and calls the core,
:func:`chromaflow.interpret.discover.run` (docs/interpret.md).
"""

from __future__ import annotations

import argparse

from ..utils.cli_options import add_run_options, options_from
from .discover import DEFAULT_JASPAR, DiscoverOptions
from .discover import run as discover


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): contributions, output folder, database, TF-MoDISco's settings."""
    p.add_argument("--contributions", required=True, help="chromaflow attribute's --out (HDF5)")
    p.add_argument(
        "--outdir", required=True, help="folder of motifs.meme, matches.tsv, report.html and modisco.h5 (created)"
    )
    p.add_argument(
        "--max-seqlets",
        type=int,
        default=2000,
        metavar="N",
        help="seqlets clustered per sign (TF-MoDISco's max_seqlets_per_metacluster; default 2000)",
    )
    p.add_argument(
        "--window",
        type=int,
        default=None,
        metavar="W",
        help="the central W bases of each region only (default: all the contributions' bases)",
    )
    db = p.add_mutually_exclusive_group()
    db.add_argument(
        "--jaspar",
        default=None,
        metavar="COLLECTION/TAX_GROUP[@RELEASE]",
        help=f"pyjaspar's bundled JASPAR (offline; default {DEFAULT_JASPAR})",
    )
    db.add_argument("--motif-db", default=None, metavar="FILE", help="a MEME or JASPAR motif file instead of JASPAR")
    p.add_argument("--top-matches", type=int, default=3, metavar="N", help="matches listed per pattern (default 3)")
    p.add_argument(
        "--max-qvalue",
        type=float,
        default=0.05,
        metavar="Q",
        help="a match below this q-value is significant (report, metrics; default 0.05)",
    )
    m = p.add_argument_group("TF-MoDISco (modisco motifs' defaults)")
    m.add_argument("--n-leiden", type=int, default=2, help="Leiden clusterings (seeds 1..N; default 2)")
    m.add_argument("--seqlet-size", type=int, default=20, help="seqlet core width (sliding_window_size; default 20)")
    m.add_argument("--seqlet-flank", type=int, default=5, help="flank added to each seqlet (flank_size; default 5)")
    m.add_argument("--trim-size", type=int, default=30, help="patterns trimmed to this width (default 30)")
    m.add_argument("--initial-flank", type=int, default=10, help="initial_flank_to_add (default 10)")
    m.add_argument("--final-flank", type=int, default=0, help="final_flank_to_add (default 0)")
    add_run_options(p, threads="numba threads (default: all usable CPUs)", threads_default=None, metrics=True)
    p.add_argument("--force", action="store_true", help="overwrite existing outputs in --outdir")


def run(args: argparse.Namespace) -> int:
    """Run the command (:func:`chromaflow.interpret.discover.run`); returns the exit status."""
    return discover(options_from(args, DiscoverOptions))
