"""``chromaflow add-coverage``: BAM (or bigWig) read coverage -> ``evaluation/<prefix>_coverage`` in a genome h5.

Helixer ``add_ngs_coverage.py``-compatible datasets and counts (FORMATS.md §7.1); the h5 is updated atomically. The
command parses its options into :class:`~chromaflow.coverage.core.AddCoverageOptions` and calls the core,
:func:`chromaflow.coverage.core.run`, which checks them and adds the coverage.
"""

from __future__ import annotations

import argparse

from ..utils.cli_options import add_run_options, options_from


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): the genome h5 and prefix, BAMs (with their indexes) or bigWigs, strandedness
    and read filters, bigWig strand split, window size and ``--out``."""
    _add_input_options(p)
    _add_counting_options(p)
    _add_output_options(p)


def _add_input_options(p: argparse.ArgumentParser) -> None:
    """--h5, --prefix and the sources: --bam (with --bam-index) or --bigwig."""
    p.add_argument(
        "--h5",
        required=True,
        help="genome h5 (Helixer layout, e.g. from chromaflow fasta2h5); updated "
        "atomically (a temporary copy beside it is renamed over it at the end)",
    )
    p.add_argument(
        "--prefix",
        required=True,
        help="dataset prefix = the dataset name a model trains on, e.g. atacseq, h3k4me3 "
        "(writes evaluation/<prefix>_coverage, _spliced_coverage, _meta/bam_files; an existing "
        "prefix gets new columns appended, as in Helixer)",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--bam",
        nargs="+",
        metavar="BAM",
        help="coordinate-sorted, indexed BAM file(s), one coverage column (replicate) each",
    )
    p.add_argument(
        "--bam-index",
        nargs="+",
        metavar="BAI",
        default=None,
        help="index of each --bam, in the same order (default: <bam>.bai or .csi beside it)",
    )
    src.add_argument(
        "--bigwig",
        nargs="+",
        metavar="BW",
        help="bigWig coverage file(s), one column each (float32 values; needs --unstranded)",
    )


def _add_counting_options(p: argparse.ArgumentParser) -> None:
    """How reads are counted: the strand mode, --shift, --species rows, the read filters and --bigwig-split."""
    strand = p.add_mutually_exclusive_group(required=True)
    strand.add_argument(
        "--unstranded",
        dest="strand_mode",
        action="store_const",
        const="unstranded",
        help="count each read once, on the strand it aligned to (ATAC-seq, ChIP-seq)",
    )
    strand.add_argument(
        "--first-read-is-sense-strand",
        dest="strand_mode",
        action="store_const",
        const="first",
        help="stranded library whose first read is sense: second mates are flipped",
    )
    strand.add_argument(
        "--second-read-is-sense-strand",
        dest="strand_mode",
        action="store_const",
        const="second",
        help="dUTP library: single-end reads and first mates are flipped",
    )
    p.add_argument(
        "--shift",
        action="store_true",
        help="ATAC Tn5 offset: count each read's aligned span trimmed by 4 bp at a + read's 5' end and "
        "5 bp at a - read's (only with --unstranded; BAM only)",
    )
    p.add_argument(
        "--species",
        default=None,
        help="only rows of this data/species (other rows stay -1, as Helixer's -s); default: all rows",
    )
    p.add_argument(
        "--min-mapq",
        type=int,
        default=0,
        metavar="Q",
        help="skip reads with MAPQ < Q (default 0: count all, as Helixer)",
    )
    p.add_argument(
        "--skip-duplicates",
        action="store_true",
        help="skip reads flagged duplicate (0x400); default: count them, as Helixer",
    )
    p.add_argument(
        "--bigwig-split",
        choices=("half", "both"),
        default="half",
        help="unstranded bigWig value per strand row: half of it on each strand (default; the scale of "
        "--unstranded BAM counts) or the full value on both",
    )


def _add_output_options(p: argparse.ArgumentParser) -> None:
    """--threads, --window-bp, --out, --force and --metrics."""
    add_run_options(p, threads="worker processes counting and compressing windows (default: all usable CPUs)")
    p.add_argument(
        "--window-bp",
        type=int,
        default=None,
        help="genomic window per task (default 16 chunks); memory grows with it, not with the genome",
    )
    p.add_argument(
        "--out",
        default=None,
        help="write the result to this new h5 instead of updating --h5 in place (--h5 is left untouched)",
    )
    add_run_options(p, force=True, metrics=True)


def run(args: argparse.Namespace) -> int:
    """Run the command: add the coverage of the BAMs or bigWigs to the genome h5, in place or into ``--out``
    (:func:`chromaflow.coverage.core.run`); returns the exit status."""
    from .core import AddCoverageOptions
    from .core import run as add_coverage

    return add_coverage(options_from(args, AddCoverageOptions))
