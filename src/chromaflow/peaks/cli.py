"""``chromaflow peaks``: narrowPeak calls on a predicted track, equal to MACS3 ``bdgpeakcall`` (docs/peaks.md).

Input: one dataset of a predictions h5 (the strand average ``chromaflow bigwig`` writes, optionally smoothed with
``--window-size``) or a bigWig. ``--cutoff auto`` picks the cutoff whose peaks agree best (base-wise F1) with the
peaks of measured coverage when there is some (``--observed`` genome h5, or evaluation/<dataset>_coverage in the
predictions h5), else :data:`DEFAULT_CUTOFF`. The choice goes in the summary JSON and the metrics.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import cast

import numpy as np

from ..cli_options import add_run_options, resolve_threads
from ..errors import ChromaflowError
from ..metrics import StageMetrics
from ..outputs import atomic_output, check_outputs, naming_errors, write_json_atomic
from .browser import add_to_browser_files, bigbed_name, write_bignarrowpeak
from .call import call_peaks, overlap_bp, scores

#: fixed cutoff when --cutoff auto has no measured coverage: Predmoter's README calls peaks on its predicted
#: ATAC-seq tracks with ``macs3 bdgpeakcall --cutoff 25``
DEFAULT_CUTOFF = 25.0
#: MACS3 bdgpeakcall's own defaults (--min-length 200, --max-gap 30)
DEFAULT_MIN_LENGTH = 200
DEFAULT_MAX_GAP = 30


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): the track (predictions dataset or bigWig), outputs, cutoff, peak length and
    gap, smoothing, observed coverage for ``--cutoff auto``, peak names and browser files."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--predictions", metavar="P.h5", help="predictions h5 (chromaflow predict / Predmoter)")
    src.add_argument("--bigwig", metavar="T.bw", help="a coverage bigWig (regions without data count as 0)")
    p.add_argument("--out", required=True, metavar="peaks.narrowPeak", help="narrowPeak output (ENCODE BED6+4)")
    p.add_argument(
        "--summary",
        metavar="JSON",
        default=None,
        help="summary JSON: cutoff used and how it was chosen, the F1 table of --cutoff auto, counts "
        "(default: <out without .narrowPeak>.summary.json)",
    )
    p.add_argument(
        "--dataset", metavar="D", default=None, help="dataset of --predictions (required when the file holds several)"
    )
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
    add_run_options(p, threads="worker threads reading --predictions (default: all CPUs)", metrics=True, force=True)


def _cutoff_arg(text: str) -> float | None:
    if text == "auto":
        return None
    try:
        c = float(text)
    except ValueError:
        raise ChromaflowError(f"--cutoff {text!r}: expected a number > 0 or 'auto'") from None
    if not np.isfinite(c) or c <= 0:
        raise ChromaflowError(
            f"--cutoff {text!r}: expected a number > 0 or 'auto' (bdgpeakcall's summit rule breaks at 0 and below)"
        )
    return c


def default_summary(out: str) -> str:
    """The default summary path of a narrowPeak output: its name with ``.narrowPeak`` (where it ends so) replaced by
    ``.summary.json``."""
    base = out[: -len(".narrowPeak")] if out.endswith(".narrowPeak") else out
    return base + ".summary.json"


def candidate_cutoffs(runs: dict) -> list[float]:
    """Cutoffs --cutoff auto tries: 1, 2, ... 100, then 32 geometric steps to the track's maximum (tracks are
    integer coverage; every value above the maximum calls nothing)."""
    top = max((float(v.max()) for _, _, v in runs.values() if len(v)), default=0.0)
    if top <= 0:
        return [DEFAULT_CUTOFF]
    c = set(np.arange(1, min(100, int(np.floor(top))) + 1, dtype=float).tolist())
    if top > 100:
        c.update(np.unique(np.round(np.geomspace(100, top, 32))).tolist())
    return sorted(x for x in c if x <= top) or [top]


def all_peaks(chroms, runs: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], cutoff, min_length, max_gap) -> dict:
    """{chromosome: :func:`call_peaks` of its runs} for every (name, size) of ``chroms``, at ``cutoff``."""
    return {name: call_peaks(*runs[name], cutoff, min_length, max_gap) for name, _ in chroms}


def f1_table(chroms, runs, measured, min_length, max_gap) -> list[dict]:
    """Predmoter's peak F1, base-wise over the genome, of each candidate cutoff's peaks against ``measured``."""
    m_bp = sum(p.bp for p in measured.values())
    rows = []
    for c in candidate_cutoffs(runs):
        peaks = all_peaks(chroms, runs, c, min_length, max_gap)
        p_bp = sum(p.bp for p in peaks.values())
        tp = sum(overlap_bp(peaks[n].starts, peaks[n].ends, measured[n].starts, measured[n].ends) for n, _ in chroms)
        precision = tp / p_bp if p_bp else 0.0
        recall = tp / m_bp if m_bp else 0.0
        f1 = 2 * tp / (p_bp + m_bp) if p_bp + m_bp else 0.0
        rows.append(
            {
                "cutoff": c,
                "peaks": sum(len(p) for p in peaks.values()),
                "peak_bp": p_bp,
                "tp_bp": tp,
                "precision": round(precision, 6),
                "recall": round(recall, 6),
                "f1": round(f1, 6),
            }
        )
    return rows


def _observed_source(args, predictions_has: bool) -> str | None:
    if args.observed:
        return args.observed
    if args.predictions and predictions_has:
        return args.predictions
    return None


def _has_coverage(path: str, name: str | None) -> bool:
    import h5py

    try:
        with h5py.File(path, "r") as h5:
            return name is not None and f"evaluation/{name}_coverage" in h5
    except OSError:
        return False


def write_narrowpeak(path: Path, chroms, peaks: dict, name: str, track_line: bool) -> int:
    """ENCODE narrowPeak, sorted by chromosome (byte order, as bdgpeakcall and ``LC_ALL=C sort``) and start."""
    n = 0
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        if track_line:
            # bdgpeakcall's own track line (its default; ours only with --track-line)
            fh.write(f'track type=narrowPeak name="{name}" description="{name}" nextItemButton=on\n')
        for chrom in sorted((c for c, _ in chroms), key=lambda c: c.encode()):
            p = peaks[chrom]
            if not len(p):
                continue
            sc = scores(p.values)
            offs = p.summits - p.starts
            lines = []
            for i in range(len(p)):
                n += 1
                lines.append(
                    f"{chrom}\t{p.starts[i]}\t{p.ends[i]}\t{name}_narrowPeak{n}\t{sc[i]}\t.\t"
                    f"{float(p.values[i]):.6g}\t-1\t-1\t{offs[i]}\n"
                )
            fh.write("".join(lines))
    return n


def run(args: argparse.Namespace) -> int:
    """Run the command: call peaks on the track, write the narrowPeak file and its summary JSON and, with
    ``--browser-dir``, add the peaks to the genome-browser files; returns the exit status."""
    cutoff = _cutoff_arg(args.cutoff)
    if args.min_length < 0:
        raise ChromaflowError(f"--min-length must be >= 0 (got {args.min_length})")
    if args.max_gap < 0:
        raise ChromaflowError(f"--max-gap must be >= 0 (got {args.max_gap})")
    if args.window_size is not None and (args.window_size <= 0 or args.bigwig):
        raise ChromaflowError(
            "--window-size must be a positive integer and goes with --predictions"
            if args.bigwig
            else f"--window-size must be a positive integer (got {args.window_size})"
        )
    if args.observed_cutoff <= 0 or not np.isfinite(args.observed_cutoff):
        raise ChromaflowError(f"--observed-cutoff must be a number > 0 (got {args.observed_cutoff})")
    if cutoff is not None and args.observed:
        raise ChromaflowError("--observed goes with --cutoff auto (a fixed --cutoff does not use it)")
    if args.bigwig and args.dataset:
        raise ChromaflowError("--dataset goes with --predictions (a bigWig holds one track)")
    if args.bigwig and args.observed and not args.observed_dataset:
        raise ChromaflowError("--observed with --bigwig needs --observed-dataset (the coverage name in it)")
    if args.name is not None and (not args.name or any(ch.isspace() for ch in args.name)):
        raise ChromaflowError(f"--name {args.name!r}: peak names must be non-empty, without whitespace")
    summary = args.summary or default_summary(args.out)
    src = args.predictions or args.bigwig
    bigbed = None
    if args.browser_dir:
        bdir = Path(args.browser_dir)
        if not (bdir / "igv_session.xml").is_file():
            raise ChromaflowError(f"--browser-dir {bdir}: no igv_session.xml (write the tracks with chromaflow bigwig)")
        if (bdir / "trackDb.txt").is_file():
            bigbed = bigbed_name(args.out)
    check_outputs(
        [("--out", args.out), ("--summary", summary), ("--metrics", args.metrics), ("--browser-dir", bigbed)],
        [("--predictions", args.predictions), ("--bigwig", args.bigwig), ("--observed", args.observed)],
    )
    if not args.force:
        for p in (args.out, summary, bigbed):
            if p is not None and os.path.exists(p):
                raise ChromaflowError(f"{p}: output exists (use --force to overwrite)")
    threads = resolve_threads(args.threads)

    with StageMetrics("peaks", args.metrics, threads=threads) as metrics:
        from . import tracks

        if args.predictions:
            dataset = tracks.h5_dataset(args.predictions, args.dataset)
            name = args.name or dataset
        else:
            dataset = None
            stem = Path(args.bigwig).name
            name = args.name or (stem[:-3] if stem.endswith(".bw") else stem)
        if any(ch.isspace() for ch in name):
            raise ChromaflowError(f"--name {name!r}: peak names cannot hold whitespace")
        choice = {
            "min_length": args.min_length,
            "max_gap": args.max_gap,
            "window_size": args.window_size,
            "input": os.path.basename(src),
            "dataset": dataset,
        }
        obs_path = obs_name = None
        if cutoff is not None:
            choice.update(cutoff=cutoff, cutoff_method="fixed (--cutoff)")
        else:
            obs_name = args.observed_dataset or dataset
            obs_path = _observed_source(
                args, args.predictions is not None and _has_coverage(args.predictions, obs_name)
            )
            if obs_path is None:
                cutoff = DEFAULT_CUTOFF
                choice.update(
                    cutoff=cutoff, cutoff_method=f"default {DEFAULT_CUTOFF:g} (--cutoff auto without measured coverage)"
                )
        if cutoff is not None:  # known before reading: peaks called as the track streams (memory: one piece)
            if args.predictions:
                chroms, peaks, n_runs = tracks.h5_peaks(
                    args.predictions,
                    cast(str, dataset),  # set with --predictions
                    cutoff,
                    args.min_length,
                    args.max_gap,
                    window=args.window_size,
                    threads=threads,
                )
            else:
                chroms, peaks, n_runs = tracks.bigwig_peaks(args.bigwig, cutoff, args.min_length, args.max_gap)
        else:  # --cutoff auto against measured peaks: every candidate cutoff is scored on the whole track
            if args.predictions:
                chroms, runs, _ = tracks.h5_track(args.predictions, dataset, window=args.window_size, threads=threads)
            else:
                chroms, runs = tracks.bigwig_track(args.bigwig)
            # still auto: obs_path was found (else the default cutoff was taken above)
            cutoff = _auto(args, chroms, runs, cast(str, obs_path), obs_name, threads, choice)
            peaks = all_peaks(chroms, runs, cutoff, args.min_length, args.max_gap)
            n_runs = int(sum(len(r[0]) for r in runs.values()))
        with atomic_output(args.out) as tmp, naming_errors(args.out):
            n = write_narrowpeak(tmp, chroms, peaks, name, args.track_line)
        total_bp = sum(s for _, s in chroms)
        peak_bp = sum(p.bp for p in peaks.values())
        choice.update(
            peaks=n, peak_bp=peak_bp, genome_bp=total_bp, chromosomes=len(chroms), output=os.path.basename(args.out)
        )
        if args.browser_dir:
            bdir = Path(args.browser_dir)
            if bigbed is not None:
                write_bignarrowpeak(Path(bigbed), chroms, args.out)
            add_to_browser_files(
                bdir, Path(os.path.relpath(args.out, bdir)), name, os.path.relpath(bigbed, bdir) if bigbed else None
            )
            choice.update(browser_files=sorted(["igv_session.xml"] + (["trackDb.txt"] if bigbed else [])))
        write_json_atomic(summary, choice)
        metrics.set(
            bp=total_bp,
            chromosomes=len(chroms),
            peaks=n,
            peak_bp=peak_bp,
            cutoff=cutoff,
            cutoff_method=choice["cutoff_method"],
            min_length=args.min_length,
            max_gap=args.max_gap,
            window_size=args.window_size,
            dataset=dataset,
            runs=int(n_runs),
        )
    return 0


def _auto(args, chroms, runs, obs_path: str, obs_name: str | None, threads: int, choice: dict) -> float:
    """The F1-best cutoff against the peaks of measured coverage (ties: the smallest cutoff)."""
    from .tracks import h5_track

    if obs_name is None:
        raise ChromaflowError("--cutoff auto with --observed needs --observed-dataset or --dataset")
    ochroms, oruns, _ = h5_track(obs_path, obs_name, experimental=True, threads=threads, what="--observed")
    if dict(ochroms) != dict(chroms):
        mine, theirs = dict(chroms), dict(ochroms)
        diff = sorted(set(mine.items()) ^ set(theirs.items()))[0]
        raise ChromaflowError(
            f"{obs_path}: chromosomes differ from {args.predictions or args.bigwig} "
            f"(first difference: {diff[0]} {diff[1]} bp)"
        )
    measured = all_peaks(chroms, oruns, args.observed_cutoff, args.min_length, args.max_gap)
    table = f1_table(chroms, runs, measured, args.min_length, args.max_gap)
    best = max(table, key=lambda r: (r["f1"], -r["cutoff"]))
    choice.update(
        cutoff=best["cutoff"],
        cutoff_method="auto: F1-best against measured peaks",
        observed=os.path.basename(obs_path),
        observed_dataset=obs_name,
        observed_cutoff=args.observed_cutoff,
        observed_peaks=sum(len(p) for p in measured.values()),
        observed_peak_bp=sum(p.bp for p in measured.values()),
        f1=best["f1"],
        f1_table=table,
    )
    return best["cutoff"]
