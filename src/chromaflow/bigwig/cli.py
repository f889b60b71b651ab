"""``chromaflow bigwig``: predictions h5 -> bigWig / bedGraph tracks with Predmoter's semantics (thin CLI).

The command parses its options into :class:`~chromaflow.bigwig.core.BigWigOptions` and calls the core,
:func:`chromaflow.bigwig.core.run`. Semantics: FORMATS.md §5 and docs/bigwig.md (deliberate deviations: exact
smoothing at .5 ties, the empty-block defect fixed, smoothed intervals clipped at chromosome ends unless
``--no-clip``).
"""

from __future__ import annotations

import argparse

from ..utils.cli_options import add_run_options, options_from
from .core import BIGWIG_WRITERS, FORMATS, SMOOTHINGS, STRANDS, BigWigOptions
from .core import run as convert_predictions


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): predictions file, output folder and names, format, strands, smoothing,
    blacklist, datasets, writer and compression, and the genome-browser files."""
    _add_input_output_options(p)
    _add_track_options(p)
    _add_writer_options(p)
    add_run_options(p, force="overwrite existing outputs", metrics=True)
    _add_browser_options(p)
    add_run_options(p, threads="worker threads (default: all CPUs)")


def _add_input_output_options(p: argparse.ArgumentParser) -> None:
    """--predictions, --outdir, --basename and --format."""
    p.add_argument(
        "--predictions",
        required=True,
        metavar="P.h5",
        help="predictions h5 (or, with --experimental, a training-style h5 with evaluation/<ds>_coverage)",
    )
    p.add_argument("--outdir", required=True, metavar="D", help="output directory (created when absent)")
    p.add_argument("--basename", required=True, metavar="B", help="file name prefix")
    p.add_argument(
        "--format",
        choices=list(FORMATS),
        default="bigwig",
        help="bigwig -> .bw, bedgraph -> .bg.gz (default: bigwig)",
    )


def _add_track_options(p: argparse.ArgumentParser) -> None:
    """What the tracks hold: --strand, --window-size, --smoothing, --blacklist, --datasets, --experimental and
    --no-clip."""
    p.add_argument(
        "--strand",
        choices=list(STRANDS),
        default="avg",
        help="avg (rounded half-to-even mean of both strands, default), + , - or all three",
    )
    p.add_argument(
        "--window-size",
        type=int,
        default=None,
        metavar="W",
        help="smooth with a W-bp moving average per 21.384 Mbp block (Predmoter semantics)",
    )
    p.add_argument(
        "--smoothing",
        choices=list(SMOOTHINGS),
        default="exact",
        help="exact (default): the window mean S/W rounded half-to-even in integer arithmetic, the same "
        "bytes on every CPU; numpy: Predmoter's float64 numpy.convolve, whose exact .5 ties round "
        "either way depending on the CPU's BLAS/SIMD kernels",
    )
    p.add_argument(
        "--blacklist",
        metavar="FILE",
        default=None,
        help="text file; first whitespace-separated column = seqids to leave out",
    )
    p.add_argument(
        "--datasets", nargs="+", metavar="DS", default=None, help="datasets to convert (default: all, in file order)"
    )
    p.add_argument(
        "--experimental",
        action="store_true",
        help="convert evaluation/<ds>_coverage (mean over BAMs) of a training-style h5",
    )
    p.add_argument(
        "--no-clip",
        action="store_true",
        help="with --window-size: keep the reference's intervals past the end of chromosomes "
        "shorter than the window (breaks genome browsers)",
    )


def _add_writer_options(p: argparse.ArgumentParser) -> None:
    """How the files are written: --bigwig-writer and --compression-level."""
    p.add_argument(
        "--bigwig-writer",
        choices=list(BIGWIG_WRITERS),
        default="chromaflow",
        help="chromaflow (default): our streaming writer, blocks deflated in threads (same intervals, "
        "exact zoom levels); pybigwig: the pyBigWig library, byte-identical to Predmoter's .bw "
        "files, ~10x slower on predictions",
    )
    p.add_argument(
        "--compression-level",
        type=int,
        default=None,
        metavar="N",
        help="deflate level 1-12 (libdeflate) of bigWig blocks or bedGraph gzip members (default 1: "
        "fastest, about the size of pyBigWig's and Predmoter's files); ignored by --bigwig-writer "
        "pybigwig (zlib level 6)",
    )


def _add_browser_options(p: argparse.ArgumentParser) -> None:
    """The genome-browser files: --no-browser-files, --feature-track, --hub-track, --genome and --fasta."""
    p.add_argument(
        "--no-browser-files",
        action="store_true",
        help="do not write chrom.sizes, igv_session.xml and the UCSC hub files",
    )
    p.add_argument(
        "--feature-track",
        action="append",
        default=[],
        metavar="BED",
        help="a BED file to show in the IGV session too, its path relative to --outdir (it need not exist "
        "yet; e.g. ../genes/<id>.promoters.bed of gene-accessibility); repeatable",
    )
    p.add_argument(
        "--hub-track",
        action="append",
        default=[],
        metavar="BB",
        help="a bigBed 6 file to add to the UCSC hub's trackDb.txt, its path relative to --outdir (it need "
        "not exist yet; e.g. ../genes/<id>.promoters.bb of gene-accessibility --bigbed); repeatable; "
        "bigWig output only (a bedGraph run writes no hub)",
    )
    p.add_argument(
        "--genome",
        default=None,
        metavar="NAME",
        help="genome name for the UCSC hub (and, without --fasta, the IGV session; default: the basename in the hub, "
        "a chrom.sizes placeholder in the session)",
    )
    p.add_argument(
        "--fasta",
        default=None,
        metavar="FILE",
        help="the assembly's FASTA (plain or gzip; its records = the predictions' sequences): writes <basename>.fa "
        "+ .fa.fai (the IGV session's genome) and <basename>.2bit (the hub's twoBitPath; hub.txt is then one "
        "file, useOneFile on) beside the tracks, so IGV desktop, igv.js and UCSC open them unedited",
    )


def run(args: argparse.Namespace) -> int:
    """Run the command: convert the predictions into bigWig or bedGraph tracks (all renamed into place only if every
    one succeeds) and, where asked, the genome-browser files (:func:`chromaflow.bigwig.core.run`); returns the exit
    status."""
    return convert_predictions(options_from(args, BigWigOptions))
