"""The core of ``chromaflow bigwig`` (its command: cli.py): predictions h5 -> bigWig / bedGraph tracks with Predmoter's
semantics, and the genome-browser files beside them.

Semantics: FORMATS.md §5 and docs/bigwig.md (deliberate deviations: exact smoothing at .5 ties, the empty-block
defect fixed, smoothed intervals clipped at chromosome ends unless ``--no-clip``). :class:`BigWigOptions` holds the
options and checks them (:meth:`BigWigOptions.validate`, one line naming the option); :func:`run` calls it first, so
a library caller gets the command line's checks and messages. The conversion loop is :mod:`.convert`.
"""

from __future__ import annotations

import contextlib
import ctypes
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..utils.cli_options import resolve_threads
from ..utils.errors import ChromaflowError, OutputExistsError
from ..utils.metrics import StageMetrics
from ..utils.outputs import NAME_MAX_BYTES, atomic_output, check_outputs, safe_name
from ..utils.progress import Progress
from .bedgraph import BedGraphWriter
from .bigwigfile import BigWigWriter, PyBigWigWriter
from .convert import Track, convert
from .h5input import PredictionsInput

#: default deflate level (libdeflate) of bigWig blocks and bedGraph gzip members: on prediction tracks level 1
#: gives about the size of pyBigWig's zlib level 6 blocks and of Predmoter's gzip level 9 bedGraph, in a
#: fraction of the time (benchmarks/run --stages bigwig_writers,bigwig)
DEFAULT_LEVEL = {"bigwig": 1, "bedgraph": 1}

#: the values of --format (bw and bg: short for bigwig and bedgraph), --strand, --smoothing and --bigwig-writer
FORMATS = ("bigwig", "bw", "bedgraph", "bg")
STRANDS = ("avg", "+", "-", "all")
SMOOTHINGS = ("exact", "numpy")
BIGWIG_WRITERS = ("chromaflow", "pybigwig")


@dataclass
class BigWigOptions:
    """What ``bigwig`` converts and where its outputs go: the command's options, one field each (``None`` where an
    option is not given).

    :meth:`validate` checks them once (one line naming the option); :func:`run` calls it, so a library caller gets
    the same checks as the command line. ``datasets`` None: every dataset, in file order; ``compression_level``
    None: :data:`DEFAULT_LEVEL`; ``threads`` 0: all usable CPUs.
    """

    predictions: str
    outdir: str
    basename: str
    format: str = "bigwig"
    strand: str = "avg"
    window_size: int | None = None
    smoothing: str = "exact"
    blacklist: str | None = None
    datasets: list[str] | None = None
    experimental: bool = False
    no_clip: bool = False
    bigwig_writer: str = "chromaflow"
    compression_level: int | None = None
    force: bool = False
    metrics: str | None = None
    no_browser_files: bool = False
    feature_track: list[str] = field(default_factory=list)
    hub_track: list[str] = field(default_factory=list)
    genome: str | None = None
    fasta: str | None = None
    threads: int | None = 0

    def validate(self) -> tuple[str, int]:
        """Check the options' own rules (no file is read), in the command's order.

        Returns
        -------
        tuple of (str, int)
            The output format ('bigwig' or 'bedgraph': ``format`` with bw/bg spelled out) and the deflate level
            (``compression_level`` or the format's default).

        Raises
        ------
        ChromaflowError
            The first rule broken, one line naming the option (e.g. ``--compression-level must be 1..12 (got 0)``).
        """
        # argparse's choices, for library callers
        for opt, value, allowed in (
            ("--format", self.format, FORMATS),
            ("--strand", self.strand, STRANDS),
            ("--smoothing", self.smoothing, SMOOTHINGS),
            ("--bigwig-writer", self.bigwig_writer, BIGWIG_WRITERS),
        ):
            if value not in allowed:
                raise ChromaflowError(f"{opt} {value!r}: expected one of {', '.join(allowed)}")
        fmt = {"bw": "bigwig", "bg": "bedgraph"}.get(self.format, self.format)
        ws = self.window_size
        if ws is not None and ws <= 0:
            raise ChromaflowError(f"--window-size must be a positive integer (got {ws})")
        level = self.compression_level if self.compression_level is not None else DEFAULT_LEVEL[fmt]
        if not 1 <= level <= 12:
            raise ChromaflowError(f"--compression-level must be 1..12 (got {level})")
        if "/" in self.basename or not self.basename:
            raise ChromaflowError(f"--basename {self.basename!r}: must be a non-empty file name without '/'")
        if len(self.basename.encode()) > BASENAME_MAX_BYTES:
            raise ChromaflowError(
                f"--basename {self.basename[:20]!r}...: {len(self.basename.encode())} bytes, at most "
                f"{BASENAME_MAX_BYTES} (the track names add the dataset, strand and window)"
            )
        self._validate_fasta()
        return fmt, level

    def _validate_fasta(self) -> None:
        """``fasta``: a file, and only where browser files are written (its records are checked as it is read)."""
        if self.fasta is None:
            return
        if self.no_browser_files:
            raise ChromaflowError(
                f"--fasta {self.fasta}: the genome files go with the browser files (drop --no-browser-files)"
            )
        if not Path(self.fasta).is_file():
            raise ChromaflowError(f"--fasta {self.fasta}: file does not exist or is not a file")


#: the most bytes of --basename: the rest of a track's name (dataset, strand, window, extension) keeps at least
#: 48 bytes of :data:`chromaflow.utils.outputs.NAME_MAX_BYTES` for the dataset name
BASENAME_MAX_BYTES = 100


def output_name(
    basename: str, dataset: str, strand: str, bl: bool, ws: int | None, fmt: str, source: str = "predictions"
) -> str:
    """The file name of one track: ``<basename>_<dataset>_<strand>_strand[_bl][_ws=<window>].bw`` (``.bg.gz`` for
    bedGraph), the dataset name (read from ``source``) made safe by :func:`~chromaflow.utils.outputs.safe_name` and cut
    to what the name leaves it of :data:`chromaflow.utils.outputs.NAME_MAX_BYTES`."""
    ext = "bw" if fmt == "bigwig" else "bg.gz"
    tail = f"_{strand}_strand{'_bl' if bl else ''}{'' if ws is None else f'_ws={ws}'}.{ext}"
    room = max(48, NAME_MAX_BYTES - len(basename.encode()) - 1 - len(tail.encode()))
    return f"{basename}_{safe_name(dataset, f'{source}: dataset {dataset!r}', room)}{tail}"


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


def run(options: BigWigOptions) -> int:
    """Convert the predictions into bigWig or bedGraph tracks (all renamed into place only if every one succeeds)
    and, unless ``no_browser_files``, write the genome-browser files.

    Parameters
    ----------
    options : BigWigOptions
        The command's options; checked first (:meth:`BigWigOptions.validate`), then the input, then the outputs (the
        output rule, which also creates ``outdir``; without ``force``, all or nothing).

    Returns
    -------
    int
        The exit status, 0 (errors a user can fix raise :class:`~chromaflow.utils.errors.ChromaflowError`).
    """
    fmt, level = options.validate()
    outdir = Path(options.outdir)
    threads = resolve_threads(options.threads)
    _keep_freed_memory()
    blacklist = read_blacklist(options.blacklist) if options.blacklist else set()

    with StageMetrics("bigwig", options.metrics, threads=threads) as metrics:
        inp = PredictionsInput(
            options.predictions, experimental=options.experimental, datasets=options.datasets, blacklist=blacklist
        )
        with contextlib.ExitStack() as stack:
            stack.callback(inp.close)
            tracks, browser = _outputs(options, inp.datasets, outdir, fmt)
            pool = ThreadPoolExecutor(threads, thread_name_prefix="bigwig") if threads > 1 else None
            if pool is not None:
                stack.callback(pool.shutdown, cancel_futures=True)
            header = [(c.name, c.size) for c in inp.chroms]
            writers = _open_writers(stack, tracks, header, fmt, options.bigwig_writer, pool, level)
            total_bp = sum(c.size for c in inp.chroms)
            if browser and options.fasta:
                from .genome_files import write_genome_files

                write_genome_files(
                    stack, options.fasta, header, blacklist, outdir, options.basename, options.predictions
                )
            _convert_tracks(inp, tracks, writers, options, pool, total_bp)
            if browser:
                _write_browser_files(options, outdir, header, tracks, fmt)
        metrics.set(
            bp=total_bp,
            chromosomes=len(inp.chroms),
            datasets=inp.datasets,
            tracks=len(tracks),
            format=fmt,
            strand=options.strand,
            window_size=options.window_size,
            smoothing=options.smoothing if options.window_size is not None else None,
            bigwig_writer=options.bigwig_writer if fmt == "bigwig" else None,
            compression_level=level,
            experimental=bool(options.experimental),
            outputs=[t.path.name for t in tracks],
            intervals=sum(t.writer.count for t in tracks),
        )
    return 0


def _outputs(options: BigWigOptions, datasets: list[str], outdir: Path, fmt: str) -> tuple[list[Track], list[Path]]:
    """The tracks and browser files this call writes, checked before any is written: the output rule
    (:func:`~chromaflow.utils.outputs.check_outputs`, which also creates ``--outdir``) and, without --force, all or
    nothing."""
    strands = ["avg", "+", "-"] if options.strand == "all" else [options.strand]
    bl, ws, src = bool(options.blacklist), options.window_size, options.predictions
    tracks = [
        Track(d, c, s, outdir / output_name(options.basename, d, s, bl, ws, fmt, src))
        for c, d in enumerate(datasets)
        for s in strands
    ]
    browser = [] if options.no_browser_files else _browser_paths(outdir, fmt, options)
    paths = [t.path for t in tracks] + browser
    check_outputs(
        [("--outdir", p) for p in paths] + [("--metrics", options.metrics)],
        [("--predictions", options.predictions), ("--blacklist", options.blacklist), ("--fasta", options.fasta)],
        [("--outdir", outdir)],
    )
    if not options.force:
        for p in paths:
            if p.exists():
                raise OutputExistsError(f"{p}: output exists (use --force to overwrite)")
    return tracks, browser


def _browser_paths(outdir: Path, fmt: str, options: BigWigOptions) -> list[Path]:
    """The browser files' paths (genome files included with ``--fasta``)."""
    from .browser import browser_file_names

    return [outdir / n for n in browser_file_names(fmt, options.basename, options.fasta is not None)]


def _open_writers(
    stack: contextlib.ExitStack,
    tracks: list[Track],
    header: list[tuple[str, int]],
    fmt: str,
    bigwig_writer: str,
    pool: ThreadPoolExecutor | None,
    level: int,
) -> list:
    """Give every track its writer, into a temporary file that ``stack`` renames into place only if the whole call
    succeeds; the writers, in track order."""
    writers = []
    for t in tracks:
        tmp = stack.enter_context(atomic_output(t.path, force=True))
        if fmt == "bedgraph":
            t.writer = BedGraphWriter(tmp, pool, level)
        elif bigwig_writer == "pybigwig":
            t.writer = PyBigWigWriter(tmp, header)
        else:
            t.writer = BigWigWriter(tmp, header, pool, level)
        writers.append(t.writer)
    return writers


def _convert_tracks(
    inp: PredictionsInput,
    tracks: list[Track],
    writers: list,
    options: BigWigOptions,
    pool: ThreadPoolExecutor | None,
    total_bp: int,
) -> None:
    """Convert ``inp`` into ``tracks`` and close them; on any error every writer is aborted first."""
    try:
        with Progress(total_bp, "bigwig", "bp") as prog:
            convert(
                inp,
                tracks,
                window=options.window_size,
                smoothing=options.smoothing,
                clip=not options.no_clip,
                pool=pool,
                prog=prog,
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


def _write_browser_files(
    options: BigWigOptions, outdir: Path, header: list[tuple[str, int]], tracks: list[Track], fmt: str
) -> None:
    """chrom.sizes, the IGV session and (bigWig) the UCSC hub files of ``tracks`` in ``outdir`` (the genome files of
    ``--fasta`` are written before the conversion: genome_files.py)."""
    from .browser import write_browser_files

    write_browser_files(
        outdir,
        chroms=header,
        tracks=[(t.dataset, t.strand, t.path.name) for t in tracks],
        fmt=fmt,
        basename=options.basename,
        genome=options.genome,
        force=True,
        features=options.feature_track,
        hub_tracks=options.hub_track,
        fasta=options.fasta is not None,
    )
