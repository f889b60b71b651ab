"""``chromaflow peaks``: narrowPeak calls on a predicted track, equal to MACS3 ``bdgpeakcall`` (docs/peaks.md).

The command parses its options into :class:`~chromaflow.peaks.core.PeaksOptions` and calls the core,
:func:`chromaflow.peaks.core.run`, which checks them, calls the peaks (``--cutoff auto``: the F1-best cutoff against
measured coverage when there is some) and writes the narrowPeak file, its summary JSON and the browser entries.
"""

from __future__ import annotations

import argparse

from ..utils.cli_options import add_run_options, options_from
from .core import DEFAULT_CUTOFF, DEFAULT_MAX_GAP, DEFAULT_MIN_LENGTH, PeaksOptions
from .core import run as call_track_peaks


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): the track (predictions dataset or bigWig), outputs, cutoff, peak length and
    gap, smoothing, observed coverage for ``--cutoff auto``, peak names and browser files."""
    _add_track_options(p)
    _add_calling_options(p)
    _add_observed_options(p)
    _add_naming_options(p)
    add_run_options(p, threads="worker threads reading --predictions (default: all CPUs)", metrics=True, force=True)


def _add_track_options(p: argparse.ArgumentParser) -> None:
    """The track (--predictions or --bigwig), --out, --summary and --dataset."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--predictions", metavar="P.h5", help="predictions h5 (chromaflow predict / Predmoter)")
    src.add_argument("--bigwig", metavar="T.bw", help="a coverage bigWig (regions without data count as 0)")
    p.add_argument(
        "--out",
        required=True,
        metavar="peaks.narrowPeak",
        help="narrowPeak output (ENCODE BED6+4; a name ending in .gz: gzip, any other: plain text)",
    )
    p.add_argument(
        "--summary",
        metavar="JSON",
        default=None,
        help="summary JSON: cutoff used and how it was chosen, the F1 table of --cutoff auto, counts "
        "(default: <out without .narrowPeak[.gz]>.summary.json)",
    )
    p.add_argument(
        "--dataset", metavar="D", default=None, help="dataset of --predictions (required when the file holds several)"
    )


def _add_calling_options(p: argparse.ArgumentParser) -> None:
    """How peaks are called: --cutoff, --min-length, --max-gap (bdgpeakcall's) and --window-size."""
    p.add_argument(
        "--cutoff",
        default="auto",
        metavar="N|auto",
        help=f"a run is in a peak when its value >= N (> 0); auto (default): the F1-best cutoff against "
        f"measured coverage when there is some, else {DEFAULT_CUTOFF:g}",
    )
    p.add_argument(
        "--min-length",
        type=int,
        default=DEFAULT_MIN_LENGTH,
        metavar="BP",
        help=f"shortest peak kept, end - start (default {DEFAULT_MIN_LENGTH}, as bdgpeakcall)",
    )
    p.add_argument(
        "--max-gap",
        type=int,
        default=DEFAULT_MAX_GAP,
        metavar="BP",
        help=f"above-cutoff stretches at most this far apart join one peak (default {DEFAULT_MAX_GAP}, as bdgpeakcall)",
    )
    p.add_argument(
        "--window-size",
        type=int,
        default=None,
        metavar="W",
        help="--predictions: smooth the strand average with a W-bp moving average first (chromaflow "
        "bigwig --window-size, exact rounding); default: no smoothing",
    )


def _add_observed_options(p: argparse.ArgumentParser) -> None:
    """The measured coverage ``--cutoff auto`` scores against: --observed, --observed-dataset, --observed-cutoff."""
    p.add_argument(
        "--observed",
        metavar="G.h5",
        default=None,
        help="--cutoff auto: genome h5 with measured evaluation/<dataset>_coverage (chromaflow "
        "add-coverage); default: the predictions h5 itself when it holds it",
    )
    p.add_argument(
        "--observed-dataset", metavar="D", default=None, help="the coverage name in --observed (default: --dataset)"
    )
    p.add_argument(
        "--observed-cutoff",
        type=float,
        default=DEFAULT_CUTOFF,
        metavar="N",
        help=f"cutoff of the measured peaks --cutoff auto scores against (default {DEFAULT_CUTOFF:g})",
    )


def _add_naming_options(p: argparse.ArgumentParser) -> None:
    """Peak names and where the peaks are shown: --name, --browser-dir, --track-line."""
    p.add_argument(
        "--name",
        default=None,
        metavar="NAME",
        help="peak names are NAME_narrowPeak<i> (as bdgpeakcall --o-prefix; default: the dataset, or "
        "the bigWig's file stem)",
    )
    p.add_argument(
        "--browser-dir",
        metavar="D",
        default=None,
        help="add the peaks to the IGV session (and UCSC hub: a bigNarrowPeak .bb beside --out) that "
        "chromaflow bigwig wrote in D",
    )
    p.add_argument("--track-line", action="store_true", help="start the file with a UCSC 'track type=narrowPeak' line")


def run(args: argparse.Namespace) -> int:
    """Run the command: call peaks on the track, write the narrowPeak file and its summary JSON and, with
    ``--browser-dir``, add the peaks to the genome-browser files (:func:`chromaflow.peaks.core.run`); returns the exit
    status."""
    return call_track_peaks(options_from(args, PeaksOptions))
