"""``chromaflow gene-accessibility``: predicted coverage of each gene's promoter (a strand-aware TSS window).

One row per gene (or transcript): ``gene_id seqid strand tss window_start window_end`` (0-based, half-open, after
clipping at the record's ends), then per dataset ``mean_<ds> max_<ds> percentile_<ds>`` over the strand-averaged
track, and from a predictions h5 also ``mean_<ds>_same_strand max_<ds>_same_strand percentile_<ds>_same_strand``
over the gene's own strand. ``percentile``: 100 x the fraction of the other genes whose mean is strictly lower
(ties share the lower value; 0 = the lowest, 100 = the highest). Rows are sorted by the sequences' order in the
predictions (or the first bigWig), then TSS, then id, so the table does not depend on the annotation's order.
See docs/networks.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path


from ..utils.cli_options import add_run_options
from ..utils.errors import ChromaflowError
from ..utils.metrics import StageMetrics
from ..utils.outputs import atomic_outputs, check_outputs, naming_errors, write_table_text
from .accessibility import bed_text, bigwig_columns, predictions_columns, table_text, write_bigbed
from .gff import read_genes
from .windows import GeneWindows, add_window_options, check_windows, gene_metrics


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): annotation, predictions or bigWigs, the TSS window and the outputs (table,
    BED, bigBed)."""
    p.add_argument(
        "--annotation",
        required=True,
        metavar="GFF",
        help="GFF3 or GTF (plain or gzip, any order; the format from the name: .gff3/.gff or .gtf)",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--predictions", metavar="P.h5", help="predictions h5 (chromaflow predict / Predmoter)")
    src.add_argument(
        "--bigwig",
        nargs="+",
        metavar="T.bw",
        help="bigWig tracks; each is a dataset named by its file name without .bw",
    )
    p.add_argument(
        "--out", required=True, metavar="TSV", help="the per-gene table (.gz: gzip; any other name: plain text)"
    )
    p.add_argument(
        "--bed",
        default=None,
        metavar="BED",
        help="also the promoter windows as BED6 (name = gene id, score = 10 x the first dataset's "
        "percentile, 0-1000), sorted like the table, for a genome browser (.gz: gzip; else plain text)",
    )
    p.add_argument(
        "--bigbed",
        default=None,
        metavar="BB",
        help="also the same windows as a bigBed 6 (the UCSC track hub's format; chromosome sizes from "
        "the predictions or the first bigWig)",
    )
    add_window_options(p)
    add_run_options(p, force=True, metrics=True)


def run(args: argparse.Namespace) -> int:
    """Run the command: the coverage (predictions or bigWigs) of each gene's TSS window, written as the per-gene
    table and, where asked, a BED and bigBed; returns the exit status."""
    check_windows(args.upstream, args.downstream)
    inputs = [("--annotation", args.annotation), ("--predictions", args.predictions)]
    inputs += [("--bigwig", b) for b in (args.bigwig or [])]
    check_outputs(
        [("--out", args.out), ("--bed", args.bed), ("--bigbed", args.bigbed), ("--metrics", args.metrics)], inputs
    )
    for out in (args.out, args.bed, args.bigbed):
        if out and not args.force and Path(out).exists():
            raise ChromaflowError(f"{out}: output exists (use --force to overwrite)")
    with StageMetrics("gene-accessibility", args.metrics) as metrics:
        gene_counts: dict = {}
        genes = read_genes(args.annotation, args.feature, gene_counts)
        if args.predictions:
            from .accessibility import predictions_sizes

            sizes, source = predictions_sizes(args.predictions), args.predictions
        else:
            from .accessibility import bigwig_sizes

            sizes, source = bigwig_sizes(args.bigwig[0]), args.bigwig[0]
        gw = GeneWindows(genes, sizes, args.annotation, source, args.upstream, args.downstream)
        if args.predictions:
            datasets, cols, _ = predictions_columns(gw, args.predictions)
        else:
            datasets, cols = bigwig_columns(gw, args.bigwig)
        bed = bed_text(gw, cols[f"percentile_{datasets[0]}"]) if (args.bed or args.bigbed) else ""
        # all outputs or none: each goes to a temporary, renamed together at the end
        with atomic_outputs([args.out, args.bed, args.bigbed]) as (t_out, t_bed, t_bb):
            assert t_out is not None  # --out is required
            write_table_text(t_out, args.out, table_text(gw, cols))  # gzip when the name ends in .gz
            if t_bed:
                write_table_text(t_bed, args.bed, bed)
            if t_bb:
                with naming_errors(args.bigbed):
                    write_bigbed(t_bb, sizes, bed)
        metrics.set(
            genes=len(gw.genes),
            **gene_metrics(gene_counts, gw),
            datasets=datasets,
            feature=args.feature,
            upstream=args.upstream,
            downstream=args.downstream,
            source="predictions" if args.predictions else "bigwig",
        )
    return 0
