"""The core of ``chromaflow peaks`` (its command: cli.py): narrowPeak calls on a predicted track, equal to MACS3
``bdgpeakcall`` (docs/peaks.md).

Input: one dataset of a predictions h5 (the strand average ``chromaflow bigwig`` writes, optionally smoothed with
``--window-size``) or a bigWig. ``--cutoff auto`` picks the cutoff whose peaks agree best (base-wise F1) with the
peaks of measured coverage when there is some (``--observed`` genome h5, or evaluation/<dataset>_coverage in the
predictions h5), else :data:`DEFAULT_CUTOFF`. The choice goes in the summary JSON and the metrics.

:class:`PeaksOptions` holds the options and checks them (:meth:`PeaksOptions.validate`, one line naming the option);
:func:`run` calls it first, so a library caller gets the command line's checks and messages.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np

from ..bigwig.browser import track_stanza_files
from ..utils.cli_options import resolve_threads
from ..utils.errors import ChromaflowError
from ..utils.metrics import StageMetrics
from ..utils.outputs import atomic_output, check_outputs, naming_errors, open_table, write_json_atomic
from .browser import add_to_browser_files, bigbed_name, narrowpeak_base, write_bignarrowpeak
from .call import call_peaks, overlap_bp, scores

#: fixed cutoff when --cutoff auto has no measured coverage: Predmoter's README calls peaks on its predicted
#: ATAC-seq tracks with ``macs3 bdgpeakcall --cutoff 25``
DEFAULT_CUTOFF = 25.0
#: MACS3 bdgpeakcall's own defaults (--min-length 200, --max-gap 30)
DEFAULT_MIN_LENGTH = 200
DEFAULT_MAX_GAP = 30


@dataclass
class PeaksOptions:
    """What ``peaks`` calls and where its outputs go: the command's options, one field each (``None`` where an
    option is not given; exactly one of ``predictions`` and ``bigwig``).

    :meth:`validate` checks them once (one line naming the option); :func:`run` calls it, so a library caller gets
    the same checks as the command line. ``cutoff`` is ``'auto'`` or a number (as text from the command line).
    """

    out: str
    predictions: str | None = None
    bigwig: str | None = None
    summary: str | None = None
    dataset: str | None = None
    cutoff: str | float = "auto"
    min_length: int = DEFAULT_MIN_LENGTH
    max_gap: int = DEFAULT_MAX_GAP
    window_size: int | None = None
    observed: str | None = None
    observed_dataset: str | None = None
    observed_cutoff: float = DEFAULT_CUTOFF
    name: str | None = None
    browser_dir: str | None = None
    track_line: bool = False
    threads: int | None = 0
    metrics: str | None = None
    force: bool = False

    def validate(self) -> float | None:
        """Check the options' own rules (no file is read), in the command's order.

        Returns
        -------
        float or None
            The fixed ``cutoff``, or None for ``'auto'``.

        Raises
        ------
        ChromaflowError
            The first rule broken, one line naming the option (e.g. ``--max-gap must be >= 0 (got -3)``).
        """
        if (self.predictions is None) == (self.bigwig is None):  # argparse's required group, for library callers
            raise ChromaflowError("give one of --predictions and --bigwig (not both)")
        cutoff = parse_cutoff(self.cutoff)
        if self.min_length < 0:
            raise ChromaflowError(f"--min-length must be >= 0 (got {self.min_length})")
        if self.max_gap < 0:
            raise ChromaflowError(f"--max-gap must be >= 0 (got {self.max_gap})")
        if self.window_size is not None and (self.window_size <= 0 or self.bigwig):
            raise ChromaflowError(
                "--window-size must be a positive integer and goes with --predictions"
                if self.bigwig
                else f"--window-size must be a positive integer (got {self.window_size})"
            )
        if self.observed_cutoff <= 0 or not np.isfinite(self.observed_cutoff):
            raise ChromaflowError(f"--observed-cutoff must be a number > 0 (got {self.observed_cutoff})")
        if cutoff is not None and self.observed:
            raise ChromaflowError("--observed goes with --cutoff auto (a fixed --cutoff does not use it)")
        if self.bigwig and self.dataset:
            raise ChromaflowError("--dataset goes with --predictions (a bigWig holds one track)")
        if self.bigwig and self.observed and not self.observed_dataset:
            raise ChromaflowError("--observed with --bigwig needs --observed-dataset (the coverage name in it)")
        if self.name is not None and (not self.name or any(ch.isspace() for ch in self.name)):
            raise ChromaflowError(f"--name {self.name!r}: peak names must be non-empty, without whitespace")
        return cutoff


def parse_cutoff(text: str | float) -> float | None:
    """The value of ``--cutoff``: None for ``'auto'``, else a finite number > 0 (ChromaflowError naming the option
    otherwise)."""
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
    """The default summary path of a narrowPeak output: its name with ``.narrowPeak`` or ``.narrowPeak.gz`` (where it
    ends so) replaced by ``.summary.json``."""
    return narrowpeak_base(out) + ".summary.json"


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


def _observed_source(options: PeaksOptions, predictions_has: bool) -> str | None:
    if options.observed:
        return options.observed
    if options.predictions and predictions_has:
        return options.predictions
    return None


def _has_coverage(path: str, name: str | None) -> bool:
    import h5py

    try:
        with h5py.File(path, "r") as h5:
            return name is not None and f"evaluation/{name}_coverage" in h5
    except OSError:
        return False


def write_narrowpeak(
    path: Path, chroms, peaks: dict, name: str, track_line: bool, out: str | os.PathLike | None = None
) -> int:
    """ENCODE narrowPeak, sorted by chromosome (byte order, as bdgpeakcall and ``LC_ALL=C sort``) and start; gzip
    when the output's name (``out``, whose temporary ``path`` is; default ``path``) ends in ``.gz``
    (:func:`chromaflow.utils.outputs.wants_gzip`), else plain text."""
    n = 0
    with open_table(path, path if out is None else out) as fh:
        if track_line:
            # bdgpeakcall's own track line (its default; ours only with --track-line)
            fh.write(f'track type=narrowPeak name="{name}" description="{name}" nextItemButton=on\n')
        for chrom in sorted((c for c, _ in chroms), key=lambda c: c.encode()):
            p = peaks[chrom]
            if not len(p):
                continue
            fh.write(_narrowpeak_text(chrom, p, name, n))
            n += len(p)
    return n


def _narrowpeak_text(chrom: str, p, name: str, n0: int) -> str:
    """The narrowPeak lines of one chromosome's peaks ``p``, numbered from ``n0 + 1``: formatted in C
    (``bigwig/_kernels.c`` cf_narrowpeak, ~20 ns a line) where it is built, else in Python (~0.8 us a line: 0.3 s of
    a 200 Mbp track's 370,000 peaks). Each distinct summit value is formatted once (``%.6g`` of the float32 value,
    as MACS3 prints it)."""
    from ..bigwig import _native

    uniq, inv = np.unique(p.values, return_inverse=True)
    text = [f"{v:.6g}" for v in uniq.astype(np.float64).tolist()]
    sc = scores(p.values)
    offs = p.summits - p.starts
    head, tag = f"{chrom}\t", f"\t{name}_narrowPeak"
    lib = _native.load()
    if lib is None or len(p) == 0 or int(min(sc.min(), offs.min(), p.starts.min())) < 0:
        return "".join(
            f"{head}{s}\t{e}{tag}{k}\t{c}\t.\t{text[i]}\t-1\t-1\t{o}\n"
            for s, e, k, c, i, o in zip(
                p.starts.tolist(),
                p.ends.tolist(),
                range(n0 + 1, n0 + len(p) + 1),
                sc.tolist(),
                inv.tolist(),
                offs.tolist(),
            )
        )
    hb, tb = head.encode(), tag.encode()
    vb = [t.encode() for t in text]
    vlen = np.array([len(b) for b in vb], np.int32)
    voff = np.concatenate([[0], np.cumsum(vlen)[:-1]]).astype(np.int32)
    cols = [np.ascontiguousarray(a, np.int64) for a in (p.starts, p.ends, sc, offs)]
    idx = np.ascontiguousarray(inv, np.int32)
    width = len(hb) + len(tb) + int(vlen.max()) + 14 + 5 * 20  # 5 integers of at most 20 digits, 14 fixed bytes
    buf = np.empty(len(p) * width, np.uint8)
    got = lib.cf_narrowpeak(
        hb,
        len(hb),
        tb,
        len(tb),
        cols[0].ctypes.data,
        cols[1].ctypes.data,
        n0,
        cols[2].ctypes.data,
        idx.ctypes.data,
        b"".join(vb),
        voff.ctypes.data,
        vlen.ctypes.data,
        cols[3].ctypes.data,
        len(p),
        buf.ctypes.data,
    )
    return buf[:got].tobytes().decode()


def run(options: PeaksOptions) -> int:
    """Call peaks on the track, write the narrowPeak file and its summary JSON and, with ``browser_dir``, add the
    peaks to the genome-browser files.

    Parameters
    ----------
    options : PeaksOptions
        The command's options; checked first (:meth:`PeaksOptions.validate`), then the outputs (the output rule:
        none may be an input, an existing one only with ``force``).

    Returns
    -------
    int
        The exit status, 0 (errors a user can fix raise :class:`~chromaflow.utils.errors.ChromaflowError`).
    """
    cutoff = options.validate()
    summary, bigbed = _check_outputs(options)
    threads = resolve_threads(options.threads)
    with StageMetrics("peaks", options.metrics, threads=threads) as metrics:
        dataset, name = _track_name(options)
        choice = {
            "min_length": options.min_length,
            "max_gap": options.max_gap,
            "window_size": options.window_size,
            "input": os.path.basename(cast(str, options.predictions or options.bigwig)),
            "dataset": dataset,
        }
        cutoff, obs_path, obs_name = _cutoff_source(options, cutoff, dataset, choice)
        chroms, peaks, n_runs, cutoff = _call(options, cutoff, dataset, (obs_path, obs_name), threads, choice)
        n = _write_outputs(options, chroms, peaks, name, (summary, bigbed), choice)
        metrics.set(
            bp=choice["genome_bp"],
            chromosomes=len(chroms),
            peaks=n,
            peak_bp=choice["peak_bp"],
            cutoff=cutoff,
            cutoff_method=choice["cutoff_method"],
            min_length=options.min_length,
            max_gap=options.max_gap,
            window_size=options.window_size,
            dataset=dataset,
            runs=int(n_runs),
        )
    return 0


def _check_outputs(options: PeaksOptions) -> tuple[str, str | None]:
    """The summary path and, when ``browser_dir`` holds a UCSC hub, the bigNarrowPeak path, both checked with --out
    before anything is read: ``browser_dir`` written by ``chromaflow bigwig``, the output rule, --force."""
    summary = options.summary or default_summary(options.out)
    bigbed = None
    if options.browser_dir:
        bdir = Path(options.browser_dir)
        if not (bdir / "igv_session.xml").is_file():
            raise ChromaflowError(f"--browser-dir {bdir}: no igv_session.xml (write the tracks with chromaflow bigwig)")
        if track_stanza_files(bdir):  # a UCSC hub: trackDb.txt, or the single-file hub.txt of bigwig --fasta
            bigbed = bigbed_name(options.out)
    check_outputs(
        [("--out", options.out), ("--summary", summary), ("--metrics", options.metrics), ("--browser-dir", bigbed)],
        [("--predictions", options.predictions), ("--bigwig", options.bigwig), ("--observed", options.observed)],
    )
    if not options.force:
        for p in (options.out, summary, bigbed):
            if p is not None and os.path.exists(p):
                raise ChromaflowError(f"{p}: output exists (use --force to overwrite)")
    return summary, bigbed


def _track_name(options: PeaksOptions) -> tuple[str | None, str]:
    """The dataset of --predictions (None for a bigWig) and the peaks' name: --name, else the dataset or the
    bigWig's file stem."""
    from .tracks import h5_dataset

    if options.predictions:
        dataset = h5_dataset(options.predictions, options.dataset)
        name = options.name or dataset
    else:
        dataset = None
        stem = Path(cast(str, options.bigwig)).name
        name = options.name or (stem[:-3] if stem.endswith(".bw") else stem)
    if any(ch.isspace() for ch in name):
        raise ChromaflowError(f"--name {name!r}: peak names cannot hold whitespace")
    return dataset, name


def _cutoff_source(
    options: PeaksOptions, cutoff: float | None, dataset: str | None, choice: dict
) -> tuple[float | None, str | None, str | None]:
    """The cutoff when known before reading the track (a fixed --cutoff, or the default when --cutoff auto finds no
    measured coverage; noted in ``choice``), else None with the measured coverage's file and name."""
    if cutoff is not None:
        choice.update(cutoff=cutoff, cutoff_method="fixed (--cutoff)")
        return cutoff, None, None
    obs_name = options.observed_dataset or dataset
    obs_path = _observed_source(
        options, options.predictions is not None and _has_coverage(options.predictions, obs_name)
    )
    if obs_path is None:
        cutoff = DEFAULT_CUTOFF
        choice.update(
            cutoff=cutoff, cutoff_method=f"default {DEFAULT_CUTOFF:g} (--cutoff auto without measured coverage)"
        )
    return cutoff, obs_path, obs_name


def _call(
    options: PeaksOptions,
    cutoff: float | None,
    dataset: str | None,
    observed: tuple[str | None, str | None],
    threads: int,
    choice: dict,
) -> tuple[list, dict, int, float]:
    """The track's chromosomes, their peaks, the track's merged-run count and the cutoff used: streamed at a known
    ``cutoff``, else (--cutoff auto against the measured coverage ``observed``, its path and name) scored on the
    whole track."""
    from . import tracks

    if cutoff is not None:  # known before reading: peaks called as the track streams (memory: one piece)
        if options.predictions:
            chroms, peaks, n_runs = tracks.h5_peaks(
                options.predictions,
                cast(str, dataset),  # set with --predictions
                cutoff,
                options.min_length,
                options.max_gap,
                window=options.window_size,
                threads=threads,
            )
        else:
            chroms, peaks, n_runs = tracks.bigwig_peaks(
                cast(str, options.bigwig), cutoff, options.min_length, options.max_gap
            )
        return chroms, peaks, n_runs, cutoff
    # --cutoff auto against measured peaks: every candidate cutoff is scored on the whole track
    if options.predictions:
        chroms, runs, _ = tracks.h5_track(options.predictions, dataset, window=options.window_size, threads=threads)
    else:
        chroms, runs = tracks.bigwig_track(cast(str, options.bigwig))
    # still auto: obs_path was found (else the default cutoff was taken before)
    obs_path, obs_name = observed
    cutoff = _auto(options, chroms, runs, cast(str, obs_path), obs_name, threads, choice)
    peaks = all_peaks(chroms, runs, cutoff, options.min_length, options.max_gap)
    return chroms, peaks, int(sum(len(r[0]) for r in runs.values())), cutoff


def _write_outputs(
    options: PeaksOptions, chroms, peaks: dict, name: str, paths: tuple[str, str | None], choice: dict
) -> int:
    """Write the narrowPeak file, with ``browser_dir`` the bigNarrowPeak and browser entries, then the summary JSON
    (``paths``: its path and the bigNarrowPeak's or None); ``choice`` gains the counts. Returns the peak count."""
    summary, bigbed = paths
    with atomic_output(options.out) as tmp, naming_errors(options.out):
        n = write_narrowpeak(tmp, chroms, peaks, name, options.track_line, options.out)
    choice.update(
        peaks=n,
        peak_bp=sum(p.bp for p in peaks.values()),
        genome_bp=sum(s for _, s in chroms),
        chromosomes=len(chroms),
        output=os.path.basename(options.out),
    )
    if options.browser_dir:
        bdir = Path(options.browser_dir)
        if bigbed is not None:
            write_bignarrowpeak(Path(bigbed), chroms, options.out)
        updated = add_to_browser_files(
            bdir,
            Path(os.path.relpath(options.out, bdir)),
            name,
            os.path.relpath(bigbed, bdir) if bigbed else None,
            choice["dataset"],
        )
        choice.update(browser_files=sorted(p.name for p in updated))
    write_json_atomic(summary, choice)
    return n


def _auto(
    options: PeaksOptions, chroms, runs, obs_path: str, obs_name: str | None, threads: int, choice: dict
) -> float:
    """The F1-best cutoff against the peaks of measured coverage (ties: the smallest cutoff)."""
    from .tracks import h5_track

    if obs_name is None:
        raise ChromaflowError("--cutoff auto with --observed needs --observed-dataset or --dataset")
    ochroms, oruns, _ = h5_track(obs_path, obs_name, experimental=True, threads=threads, what="--observed")
    if dict(ochroms) != dict(chroms):
        mine, theirs = dict(chroms), dict(ochroms)
        diff = sorted(set(mine.items()) ^ set(theirs.items()))[0]
        raise ChromaflowError(
            f"{obs_path}: chromosomes differ from {options.predictions or options.bigwig} "
            f"(first difference: {diff[0]} {diff[1]} bp)"
        )
    measured = all_peaks(chroms, oruns, options.observed_cutoff, options.min_length, options.max_gap)
    table = f1_table(chroms, runs, measured, options.min_length, options.max_gap)
    best = max(table, key=lambda r: (r["f1"], -r["cutoff"]))
    choice.update(
        cutoff=best["cutoff"],
        cutoff_method="auto: F1-best against measured peaks",
        observed=os.path.basename(obs_path),
        observed_dataset=obs_name,
        observed_cutoff=options.observed_cutoff,
        observed_peaks=sum(len(p) for p in measured.values()),
        observed_peak_bp=sum(p.bp for p in measured.values()),
        f1=best["f1"],
        f1_table=table,
    )
    return best["cutoff"]
