"""``chromaflow bigwig``: predictions h5 -> bigWig / bedGraph tracks with Predmoter's semantics (thin CLI).

Semantics: FORMATS.md §5 and docs/bigwig.md (deliberate deviations: exact smoothing at .5 ties, the empty-block
defect fixed, smoothed intervals clipped at chromosome ends unless ``--no-clip``).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..cli_options import add_run_options, resolve_threads
from ..errors import ChromaflowError, OutputExistsError
from ..metrics import StageMetrics
from ..outputs import atomic_output, check_outputs
from ..progress import Progress
from .bedgraph import BedGraphWriter
from .bigwigfile import BigWigWriter, PyBigWigWriter
from .convert import Track, convert
from .h5input import PredictionsInput

#: default deflate level (libdeflate) of bigWig blocks and bedGraph gzip members: on prediction tracks level 1
#: gives about the size of pyBigWig's zlib level 6 blocks and of Predmoter's gzip level 9 bedGraph, in a
#: fraction of the time (benchmarks/bigwig/bench_writers.py, bench_bigwig.py)
DEFAULT_LEVEL = {"bigwig": 1, "bedgraph": 1}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): predictions file, output folder and names, format, strands, smoothing,
    blacklist, datasets, writer and compression, and the genome-browser files."""
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
        choices=["bigwig", "bw", "bedgraph", "bg"],
        default="bigwig",
        help="bigwig -> .bw, bedgraph -> .bg.gz (default: bigwig)",
    )
    p.add_argument(
        "--strand",
        choices=["avg", "+", "-", "all"],
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
        choices=["exact", "numpy"],
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
    p.add_argument(
        "--bigwig-writer",
        choices=["chromaflow", "pybigwig"],
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
    add_run_options(p, force="overwrite existing outputs", metrics=True)
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
        help="genome name for the UCSC hub / IGV session (default: chrom.sizes placeholder)",
    )
    add_run_options(p, threads="worker threads (default: all CPUs)")


def output_name(basename: str, dataset: str, strand: str, bl: bool, ws: int | None, fmt: str) -> str:
    """The file name of one track: ``<basename>_<dataset>_<strand>_strand[_bl][_ws=<window>].bw`` (``.bg.gz`` for
    bedGraph)."""
    ext = "bw" if fmt == "bigwig" else "bg.gz"
    return f"{basename}_{dataset}_{strand}_strand{'_bl' if bl else ''}{'' if ws is None else f'_ws={ws}'}.{ext}"


def read_blacklist(path: str) -> set[str]:
    """The seqids of a blacklist file: the first field of every non-blank line; ChromaflowError if it cannot be read."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ChromaflowError(f"{path}: cannot read blacklist ({getattr(exc, 'strerror', None) or exc})") from None
    return {line.split()[0] for line in text.splitlines() if line.split()}


def _keep_freed_memory() -> None:
    """Let glibc reuse freed blocks instead of returning them to the kernel: numpy's per-piece arrays of tens of
    MB otherwise come back as fresh pages, and with transparent huge pages the kernel's zeroing of them cost
    ~20 % of the CPU time. One arena: worker threads' own arenas are 64 MB heaps that glibc unmaps when they
    empty. Arrays above 32 MiB are still mmapped."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD (glibc's maximum on 64-bit: 32 MiB)
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
        libc.mallopt(-8, 1)  # M_ARENA_MAX
    except (OSError, AttributeError):  # not glibc: nothing to tune
        pass


def run(args: argparse.Namespace) -> int:
    """Run the command: convert the predictions into bigWig or bedGraph tracks (all renamed into place only if every
    one succeeds) and, where asked, the genome-browser files; returns the exit status."""
    fmt = {"bw": "bigwig", "bg": "bedgraph"}.get(args.format, args.format)
    ws = args.window_size
    if ws is not None and ws <= 0:
        raise ChromaflowError(f"--window-size must be a positive integer (got {ws})")
    level = args.compression_level if args.compression_level is not None else DEFAULT_LEVEL[fmt]
    if not 1 <= level <= 12:
        raise ChromaflowError(f"--compression-level must be 1..12 (got {level})")
    if "/" in args.basename or not args.basename:
        raise ChromaflowError(f"--basename {args.basename!r}: must be a non-empty file name without '/'")
    outdir = Path(args.outdir)
    threads = resolve_threads(args.threads)
    _keep_freed_memory()
    blacklist = read_blacklist(args.blacklist) if args.blacklist else set()

    with StageMetrics("bigwig", args.metrics, threads=threads) as metrics:
        inp = PredictionsInput(
            args.predictions, experimental=args.experimental, datasets=args.datasets, blacklist=blacklist
        )
        with contextlib.ExitStack() as stack:
            stack.callback(inp.close)
            tracks, browser = _outputs(args, inp.datasets, outdir, fmt)
            pool = ThreadPoolExecutor(threads, thread_name_prefix="bigwig") if threads > 1 else None
            if pool is not None:
                stack.callback(pool.shutdown, cancel_futures=True)
            header = [(c.name, c.size) for c in inp.chroms]
            writers = []
            for t in tracks:  # every file is renamed into place only if the whole call succeeds
                tmp = stack.enter_context(atomic_output(t.path, force=True))
                if fmt == "bedgraph":
                    t.writer = BedGraphWriter(tmp, pool, level)
                elif args.bigwig_writer == "pybigwig":
                    t.writer = PyBigWigWriter(tmp, header)
                else:
                    t.writer = BigWigWriter(tmp, header, pool, level)
                writers.append(t.writer)
            total_bp = sum(c.size for c in inp.chroms)
            try:
                with Progress(total_bp, "bigwig", "bp") as prog:
                    convert(
                        inp, tracks, window=ws, smoothing=args.smoothing, clip=not args.no_clip, pool=pool, prog=prog
                    )
                for t in tracks:
                    t.close()
            except BaseException:
                for w in writers:
                    try:
                        w.abort()
                    except Exception:  # pragma: no cover - the original error matters
                        pass
                raise
            if browser:
                from .browser import write_browser_files

                write_browser_files(
                    outdir,
                    chroms=header,
                    tracks=[(t.dataset, t.strand, t.path.name) for t in tracks],
                    fmt=fmt,
                    basename=args.basename,
                    genome=args.genome,
                    force=True,
                    features=args.feature_track,
                    hub_tracks=args.hub_track,
                )
        metrics.set(
            bp=total_bp,
            chromosomes=len(inp.chroms),
            datasets=inp.datasets,
            tracks=len(tracks),
            format=fmt,
            strand=args.strand,
            window_size=ws,
            smoothing=args.smoothing if ws is not None else None,
            bigwig_writer=args.bigwig_writer if fmt == "bigwig" else None,
            compression_level=level,
            experimental=bool(args.experimental),
            outputs=[t.path.name for t in tracks],
            intervals=sum(t.writer.count for t in tracks),
        )
    return 0


def _outputs(args: argparse.Namespace, datasets: list[str], outdir: Path, fmt: str) -> tuple[list[Track], list[Path]]:
    """The tracks and browser files this call writes, checked before any is written: the output rule
    (:func:`chromaflow.outputs.check_outputs`, which also creates ``--outdir``) and, without --force, all or nothing."""
    strands = ["avg", "+", "-"] if args.strand == "all" else [args.strand]
    tracks = [
        Track(d, c, s, outdir / output_name(args.basename, d, s, bool(args.blacklist), args.window_size, fmt))
        for c, d in enumerate(datasets)
        for s in strands
    ]
    browser = [] if args.no_browser_files else _browser_paths(outdir, fmt)
    paths = [t.path for t in tracks] + browser
    check_outputs(
        [("--outdir", p) for p in paths] + [("--metrics", args.metrics)],
        [("--predictions", args.predictions), ("--blacklist", args.blacklist)],
        [("--outdir", outdir)],
    )
    if not args.force:
        for p in paths:
            if p.exists():
                raise OutputExistsError(f"{p}: output exists (use --force to overwrite)")
    return tracks, browser


def _browser_paths(outdir: Path, fmt: str) -> list[Path]:
    from .browser import browser_file_names

    return [outdir / n for n in browser_file_names(fmt)]
