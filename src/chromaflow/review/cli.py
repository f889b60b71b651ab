"""``chromaflow review-page``: a self-contained HTML review page of an assembly's predictions (igv-reports): the
strongest variant effects (with the variants' ref/alt tracks), the strongest peaks and the promoters of the genes
with the highest and lowest predicted accessibility, each a row of a table that moves an embedded igv.js there.

Any of the three inputs may be missing: the page has the sections it has inputs for. With no locus at all (no
input, or inputs without rows) no page is written and the command says so on stderr (exit 0).

The command parses its options into :class:`~chromaflow.review.core.ReviewOptions` and calls the core,
:func:`chromaflow.review.core.run`, which checks them and writes the page.
"""

from __future__ import annotations

import argparse

from ..utils.cli_options import options_from
from .core import DEFAULT_FLANK, DEFAULT_TOP_GENES, DEFAULT_TOP_PEAKS, DEFAULT_TOP_VARIANTS, ReviewOptions
from .core import run as write_review_page


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): inputs, output, how many loci of each kind and the flank."""
    p.add_argument("--fasta", required=True, help="the assembly's FASTA, indexed (<fasta>.fai beside it)")
    p.add_argument("--name", required=True, help="assembly name, in the page's title")
    p.add_argument("--out", required=True, metavar="HTML", help="the page")
    p.add_argument("--tracks", nargs="*", default=[], metavar="BIGWIG", help="predicted tracks shown at every locus")
    p.add_argument("--peaks", nargs="*", default=[], metavar="NARROWPEAK", help="chromaflow peaks calls, per dataset")
    p.add_argument("--effects", metavar="TSV", help="chromaflow variant-effect table (.tsv or .tsv.gz)")
    p.add_argument(
        "--variant-tracks",
        nargs="*",
        default=[],
        metavar="BIGWIG",
        help="variant-effect --tracks ref/alt bigWigs (<rank>_<CHROM>_<POS>_<row>.<dataset>.<ref|alt>.bw)",
    )
    p.add_argument("--genes", metavar="TSV", help="chromaflow gene-accessibility table")
    p.add_argument("--promoters", metavar="BED", help="the promoter windows (gene-accessibility --bed), as a track")
    p.add_argument(
        "--top-variants",
        type=int,
        default=DEFAULT_TOP_VARIANTS,
        metavar="N",
        help="strongest variants shown (default 20)",
    )
    p.add_argument(
        "--top-peaks",
        type=int,
        default=DEFAULT_TOP_PEAKS,
        metavar="N",
        help="strongest peaks shown per narrowPeak file (default 20)",
    )
    p.add_argument(
        "--top-genes",
        type=int,
        default=DEFAULT_TOP_GENES,
        metavar="N",
        help="promoters shown of the N most and the N least accessible genes (default 10)",
    )
    p.add_argument(
        "--gene-dataset",
        metavar="NAME",
        help="dataset whose promoter mean ranks the genes (default: the table's first)",
    )
    p.add_argument("--flank", type=int, default=DEFAULT_FLANK, metavar="BP", help="bases shown either side of a locus")
    p.add_argument(
        "--igvjs",
        metavar="FILE",
        help="a local igv.min.js to inline (the page then opens offline; default: igv.js from jsDelivr)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the command: the page of the loci worth a first look (:func:`chromaflow.review.core.run`); returns the
    exit status."""
    return write_review_page(options_from(args, ReviewOptions))
