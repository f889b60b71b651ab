"""``chromaflow add-coverage``: BAM (or bigWig) read coverage -> ``evaluation/<prefix>_coverage`` in a genome h5.

Helixer ``add_ngs_coverage.py``-compatible datasets and counts (FORMATS.md §7.1); the h5 is updated atomically.
"""

from __future__ import annotations

import argparse

from ..cli_options import add_run_options, resolve_threads
from ..errors import ChromaflowError
from ..metrics import StageMetrics
from ..outputs import check_outputs


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): the genome h5 and prefix, BAMs (with their indexes) or bigWigs, strandedness
    and read filters, bigWig strand split, window size and ``--out``."""
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
    add_run_options(p, threads="worker processes counting and compressing windows (default: all usable CPUs)")
    p.add_argument(
        "--window-bp",
        type=int,
        default=None,
        help="genomic window per task (default 64 chunks); memory grows with it, not with the genome",
    )
    p.add_argument(
        "--out",
        default=None,
        help="write the result to this new h5 instead of updating --h5 in place (--h5 is left untouched)",
    )
    add_run_options(p, force=True, metrics=True)


def run(args: argparse.Namespace) -> int:
    """Run the command: add the coverage of the BAMs or bigWigs to the genome h5 (in place, or into ``--out``);
    returns the exit status."""
    from .add import DEFAULT_WINDOW_BP, add_coverage
    from .sources import CountOptions

    kind = "bam" if args.bam else "bigwig"
    paths = args.bam or args.bigwig
    if args.bam_index is not None and not args.bam:
        raise ChromaflowError("--bam-index goes with --bam")
    if args.shift and args.strand_mode != "unstranded":
        raise ChromaflowError("--shift is only allowed with --unstranded (as in Helixer)")
    if kind == "bigwig":
        if args.strand_mode != "unstranded":
            raise ChromaflowError("--bigwig input has no read strands: use --unstranded")
        if args.shift:
            raise ChromaflowError("--shift applies to reads (BAM input), not to bigWig values")
    if args.min_mapq < 0:
        raise ChromaflowError(f"--min-mapq must be >= 0, got {args.min_mapq}")
    window = args.window_bp or DEFAULT_WINDOW_BP
    if window < 1:
        raise ChromaflowError(f"--window-bp must be >= 1, got {window}")
    if args.out is not None:
        import os

        if os.path.exists(args.out) and not args.force:
            raise ChromaflowError(f"{args.out}: output exists (use --force to overwrite)")
        if os.path.exists(args.out) and os.path.samefile(args.out, args.h5):
            args.out = None  # same file: an in-place update
    inputs = (
        [("--h5", args.h5)] + [(f"--{kind}", p) for p in paths] + [("--bam-index", p) for p in args.bam_index or []]
    )
    check_outputs([("--out", args.out), ("--metrics", args.metrics)], inputs)
    threads = resolve_threads(args.threads)
    opt = CountOptions(
        strand_mode=args.strand_mode,
        shift=args.shift,
        min_mapq=args.min_mapq,
        skip_duplicates=args.skip_duplicates,
        bigwig_split=args.bigwig_split,
    )
    with StageMetrics(
        "add_coverage",
        args.metrics,
        threads=threads,
        prefix=args.prefix,
        input_kind=kind,
        strand_mode=args.strand_mode,
        shift=args.shift,
    ) as m:
        res = add_coverage(
            args.h5,
            args.prefix,
            paths,
            kind,
            opt,
            threads=threads,
            species=args.species,
            window_bp=window,
            out=args.out,
            indexes=args.bam_index,
        )
        m.set(
            bp=res.bp,
            subsequences=res.rows,
            columns=res.columns,
            reads_counted=res.reads_counted,
            tasks=res.units * len(res.reads_counted),
            appended=res.appended,
        )
    return 0
