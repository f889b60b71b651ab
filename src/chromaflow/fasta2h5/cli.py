"""``chromaflow fasta2h5``: FASTA -> Helixer-layout genome HDF5 (the conversion: :mod:`.convert`)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..utils.cli_options import add_run_options, resolve_threads
from ..utils.errors import ChromaflowError
from ..utils.metrics import StageMetrics
from ..utils.outputs import atomic_output, check_outputs
from ..genome.encoding import DEFAULT_L, check_length
from . import deflate as chunkdeflate
from .convert import convert


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): FASTA, species, output, subsequence length, compression and deflate engine."""
    p.add_argument("--fasta", required=True, help="input FASTA (plain, gzip or bgzip; detected by content)")
    p.add_argument("--species", required=True, help="species name stored on every row (ASCII, <= 25 bytes)")
    p.add_argument("--out", required=True, help="output .h5 (written atomically)")
    p.add_argument(
        "--subsequence-length", type=int, default=DEFAULT_L, metavar="L", help=f"chunk length L (default {DEFAULT_L})"
    )
    p.add_argument(
        "--compression",
        choices=("gzip", "lzf"),
        default="gzip",
        help="HDF5 filter after shuffle (default gzip, as Helixer)",
    )
    p.add_argument(
        "--deflate",
        default="auto",
        metavar="ENGINE[:LEVEL]",
        help="deflate engine for the gzip chunks; the level used is the one the file declares. "
        "auto (default): onehot if it can be built, else libdeflate. onehot (level 1): our "
        "encoder for one-hot chunks, several times less CPU than zlib level 4 and a smaller "
        "file; compiled with the system C compiler on first use. zlib (level 4): chunk bytes "
        "identical to Helixer's, slowest. libdeflate (level 4): about Helixer's size, ~2x zlib's "
        "speed. isal (level 1): fast, larger file. Measured speed and size: docs/fasta2h5.md",
    )
    add_run_options(p, threads="compression threads (default: all usable CPUs)", metrics=True, force=True)


def check_input(path: str) -> None:
    """The FASTA path must name a readable regular file: one line naming it otherwise."""
    if not path or not os.path.exists(path):
        raise ChromaflowError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ChromaflowError(f"{path}: is a directory, not a FASTA file")
    try:
        with open(path, "rb"):
            pass
    except PermissionError:
        raise ChromaflowError(f"{path}: permission denied (the FASTA file is not readable)") from None
    except OSError as exc:
        raise ChromaflowError(f"{path}: cannot open ({exc.strerror or exc})") from None


def run(args: argparse.Namespace) -> int:
    """Run the command: convert the FASTA into a Helixer-layout genome h5; returns the exit status."""
    threads = resolve_threads(args.threads)
    out = Path(args.out)
    check_length(args.subsequence_length)
    if args.compression == "gzip":
        engine, level = chunkdeflate.parse_engine(args.deflate)
        if chunkdeflate.auto_fallback_reason and args.deflate.strip().lower() == "auto":
            print(
                f"chromaflow fasta2h5: warning: {chunkdeflate.auto_fallback_reason}; using libdeflate level "
                f"{level} (same file size, slower)",
                file=sys.stderr,
            )
        args.deflate = f"{engine}:{level}"
    check_input(args.fasta)
    check_outputs([("--out", out), ("--metrics", args.metrics)], [("--fasta", args.fasta)])
    if out.exists() and not args.force:
        raise ChromaflowError(f"{out}: output exists (use --force to overwrite)")
    with StageMetrics("fasta2h5", args.metrics, threads=threads) as m:
        with atomic_output(out, force=args.force) as tmp:
            counts = convert(
                args.fasta,
                tmp,
                args.species,
                args.subsequence_length,
                compression=args.compression,
                deflate=args.deflate,
                threads=threads,
                input_path_attr=args.fasta,
            )
        m.set(
            **counts,
            compression=args.compression,
            subsequence_length=args.subsequence_length,
            output_bytes=out.stat().st_size,
        )
    return 0
