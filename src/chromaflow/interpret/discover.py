"""The core of ``chromaflow discover-motifs`` (its command: cli_discover.py): the motifs a model learned, read from its
contribution scores (``chromaflow attribute``'s output) by TF-MoDISco, and matched against a motif database
(docs/interpret.md).

1. TF-MoDISco-lite (``modisco-lite``, ``modiscolite.tfmodisco.TFMoDISco``) on the one-hot and hypothetical scores:
   seqlets (short windows of high contribution), clustered into patterns per sign ("pos_patterns": bases that raise
   the predicted coverage, "neg_patterns": bases that lower it). Its results file is kept (``modisco.h5``, its own
   layout: ``modisco report`` reads it).
2. Each pattern's PPM, trimmed as modisco's report trims it (the positions whose summed |CWM| is at least 0.3 of the
   pattern's maximum), is compared with every motif of the database by TOMTOM (memelite's ``tomtom``: the same
   algorithm's complete-score p-values over the best alignment, both strands, Euclidean distance between PPM
   columns; the database's own columns are the background). q-values: Benjamini-Hochberg over the database's motifs,
   per pattern (MEME's TOMTOM reports Storey's q over a query's matches; BH is the conservative case of it).
3. Outputs in ``--outdir``: ``motifs.meme`` (the trimmed PPMs, MEME minimal format, nsites = seqlets),
   ``matches.tsv`` (each pattern's ``--top-matches`` best matches), ``report.html`` (one self-contained page: the
   patterns' contribution logos, their matches' logos, seqlet counts and q-values) and ``modisco.h5``. All four are
   written together, atomically, or none; the same input gives the same bytes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..utils.errors import ChromaflowError
from ..utils.metrics import StageMetrics
from ..utils.outputs import atomic_outputs, check_outputs
from ..utils.progress import Progress


def guard_numba_import() -> None:
    """Import numba safely from any working directory. numba probes ``import coverage`` for coverage.py and, finding a
    module of that name, subclasses its classes at import; ``python -m chromaflow`` puts the working directory first
    on sys.path, so a folder named ``coverage`` there (a genomics user's coverage output, our own benchmarks/coverage/)
    is found as a namespace package and numba's import fails. Where coverage.py itself is not installed, the probe is
    given the ImportError it expects. Called when this module is imported, before anything here imports numba
    (TF-MoDISco, TOMTOM, the thread setting); tests/conftest.py calls it for the test process."""
    import importlib.util
    import sys

    if "numba" in sys.modules or "coverage" in sys.modules:
        return
    spec = importlib.util.find_spec("coverage")
    if spec is not None and spec.origin is None:  # a namespace package: a plain folder, not coverage.py
        sys.modules["coverage"] = None  # type: ignore[assignment]


guard_numba_import()

#: the database when neither --jaspar nor --motif-db is given: pyjaspar's bundled JASPAR, CORE plants
DEFAULT_JASPAR = "CORE/plants"
#: modisco's report trims a pattern to the positions whose summed |CWM| reaches this share of the maximum
TRIM_THRESHOLD = 0.3
#: the output files in --outdir
OUTPUTS = ("motifs.meme", "matches.tsv", "report.html", "modisco.h5")
#: matches.tsv's columns
COLUMNS = (
    "motif",
    "metacluster",
    "n_seqlets",
    "rank",
    "jaspar_id",
    "jaspar_name",
    "tf_family",
    "tf_class",
    "pvalue",
    "qvalue",
)


@dataclass
class DiscoverOptions:
    """What ``discover-motifs`` reads and writes: the command's options, one field each. :meth:`validate` checks them
    once (one line naming the option); :func:`run` calls it. The TF-MoDISco settings keep ``modisco motifs``'
    defaults (``--max-seqlets`` excepted: it has none)."""

    contributions: str
    outdir: str
    max_seqlets: int = 2000
    window: int | None = None
    jaspar: str | None = None
    motif_db: str | None = None
    top_matches: int = 3
    max_qvalue: float = 0.05
    n_leiden: int = 2
    seqlet_size: int = 20
    seqlet_flank: int = 5
    trim_size: int = 30
    initial_flank: int = 10
    final_flank: int = 0
    threads: int | None = None
    metrics: str | None = None
    force: bool = False

    def validate(self) -> None:
        """The options' own rules and the inputs' existence."""
        if self.jaspar is not None and self.motif_db is not None:
            raise ChromaflowError("give at most one of --jaspar and --motif-db (the motif database)")
        for opt, value, low in (
            ("--max-seqlets", self.max_seqlets, 1),
            ("--top-matches", self.top_matches, 1),
            ("--n-leiden", self.n_leiden, 1),
            ("--seqlet-size", self.seqlet_size, 4),
            ("--seqlet-flank", self.seqlet_flank, 0),
            ("--trim-size", self.trim_size, 4),
            ("--initial-flank", self.initial_flank, 0),
            ("--final-flank", self.final_flank, 0),
        ):
            if value < low:
                raise ChromaflowError(f"{opt} must be >= {low}, got {value}")
        if self.window is not None and self.window < self.seqlet_size + 2 * self.seqlet_flank:
            raise ChromaflowError(
                f"--window {self.window}: shorter than a seqlet ({self.seqlet_size} + 2 x {self.seqlet_flank} flank)"
            )
        if not 0 < self.max_qvalue <= 1:
            raise ChromaflowError(f"--max-qvalue must be in (0, 1], got {self.max_qvalue}")
        if self.threads is not None and self.threads < 1:
            raise ChromaflowError(f"--threads must be >= 1, got {self.threads}")
        if not os.path.isfile(self.contributions):
            raise ChromaflowError(f"{self.contributions}: --contributions does not exist or is not a file")
        if self.motif_db is not None and not os.path.isfile(self.motif_db):
            raise ChromaflowError(f"{self.motif_db}: --motif-db does not exist or is not a file")

    @property
    def database(self) -> str:
        """The database as chromaflow.motifs reads it: a file, or ``jaspar:<COLLECTION>/<tax group>[@release]``."""
        return self.motif_db if self.motif_db is not None else "jaspar:" + (self.jaspar or DEFAULT_JASPAR)

    def path(self, name: str) -> str:
        """The output ``name`` (one of OUTPUTS) in --outdir."""
        return os.path.join(self.outdir, name)


@dataclass(frozen=True)
class Pattern:
    """One TF-MoDISco pattern: ``name`` (``pos_patterns.pattern_0``), its sign, seqlets, ``ppm`` and ``cwm`` ((w, 4)
    float64, A C G T, the whole pattern) and the trimmed span ``[lo, hi)`` the database is matched with."""

    name: str
    metacluster: str
    n_seqlets: int
    ppm: np.ndarray
    cwm: np.ndarray
    lo: int
    hi: int

    @property
    def trimmed_ppm(self) -> np.ndarray:
        """(hi - lo, 4) float64: the PPM over the trimmed span."""
        return self.ppm[self.lo : self.hi]


@dataclass(frozen=True)
class Match:
    """One database motif matched to a pattern: its rank (1 = best) among the pattern's matches, the motif's index
    in the database, TOMTOM's p-value and the per-pattern BH q-value."""

    pattern: int
    rank: int
    motif: int
    pvalue: float
    qvalue: float


def run(o: DiscoverOptions) -> int:
    """Discover the patterns of ``o.contributions``, match them and write the outputs; returns the exit status (0)."""
    o.validate()
    from ..motifs.motifs import load_motifs
    from .contributions import read_contributions

    # the inputs are read (and refused) before --outdir is made: a bad input leaves no folder behind; a database
    # that does not parse stops here, before TF-MoDISco's minutes
    contrib = read_contributions(o.contributions, o.window)
    database = load_motifs(o.database, "--motif-db" if o.motif_db else "--jaspar")
    check_outputs(
        [(f"--outdir {name}", o.path(name)) for name in OUTPUTS] + [("--metrics", o.metrics)],
        [("--contributions", o.contributions), ("--motif-db", o.motif_db)],
        [("--outdir", o.outdir)],
    )
    if not o.force:
        for name in OUTPUTS:
            if os.path.exists(o.path(name)):
                raise ChromaflowError(f"{o.path(name)}: output exists (use --force to overwrite)")
    with StageMetrics("discover-motifs", o.metrics, database=o.database) as metrics:
        bar = Progress(3, "discover-motifs", unit=" step")
        with atomic_outputs([o.path(n) for n in OUTPUTS], force=o.force) as (meme, tsv, html, h5):
            _set_threads(o.threads)
            n_seqlets = _modisco(o, contrib, str(h5))
            bar.update(1)
            patterns = read_patterns(str(h5))
            matches = match_patterns(patterns, database, o.top_matches)
            bar.update(1)
            _write_text(str(meme), meme_text(patterns))
            _write_text(str(tsv), matches_tsv(patterns, matches, database))
            from .report import report_html

            _write_text(str(html), report_html(o, contrib, patterns, matches, database))
            bar.update(1)
        bar.close()
        significant = sorted({m.pattern for m in matches if m.qvalue < o.max_qvalue})
        metrics.set(
            regions=contrib.regions,
            width=contrib.width,
            seqlets=n_seqlets,
            patterns=len(patterns),
            patterns_matched=len(significant),
            database_motifs=len(database),
        )
    return 0


def _set_threads(threads: int | None) -> None:
    """numba's threads (TF-MoDISco's and TOMTOM's kernels): ``--threads``, else every usable CPU."""
    import numba

    from ..utils.cli_options import resolve_threads

    numba.set_num_threads(min(resolve_threads(threads), int(numba.config.NUMBA_NUM_THREADS)))  # type: ignore[attr-defined]


#: TF-MoDISco's modules that hold its numba kernels (:func:`cache_modisco_kernels`)
MODISCO_KERNEL_MODULES = ("affinitymat", "aggregator", "gapped_kmer", "util")


def cache_modisco_kernels() -> list[str]:
    """Turn on numba's on-disk cache for TF-MoDISco's kernels; returns the names of those it could turn it on for.

    modisco-lite compiles its ~30 numba kernels in every process (~15 CPU-s of a run that finds patterns: most of a
    small run). Its own ``precompile.start()`` caches them only where it can fork compiling children (numba's
    threading layer not started, no other thread, a thread to spare), which a ``discover-motifs`` run never allows
    (``--threads`` starts the layer first), so each run compiled them again. With the cache on, the first run on a
    machine writes them (numba's locations: ``NUMBA_CACHE_DIR``, else beside the package, else the user's cache
    folder) and later runs load them in milliseconds: the same machine code as a fresh compile for this CPU (numba
    keys each entry on the CPU and its features, and on the kernel's source file: an upgrade compiles anew). Where
    numba has nowhere to write (a read-only image, no home), a kernel stays uncached and compiles as before."""
    import importlib

    from numba.core.dispatcher import Dispatcher

    cached = []
    for name in MODISCO_KERNEL_MODULES:
        module = importlib.import_module(f"modiscolite.{name}")
        for attr, obj in sorted(vars(module).items()):
            if isinstance(obj, Dispatcher):
                try:
                    obj.enable_caching()
                except RuntimeError:  # no cache location numba can write ("cannot cache function ...")
                    continue
                cached.append(f"{name}.{attr}")
    return cached


def _modisco(o: DiscoverOptions, contrib, h5_path: str) -> int:
    """Run TF-MoDISco on the contributions and save its results to ``h5_path``; returns the seqlets it clustered."""
    import modiscolite.io
    import modiscolite.tfmodisco

    cache_modisco_kernels()
    try:
        pos, neg = modiscolite.tfmodisco.TFMoDISco(
            one_hot=contrib.onehot,
            hypothetical_contribs=contrib.hypothetical,
            max_seqlets_per_metacluster=o.max_seqlets,
            sliding_window_size=o.seqlet_size,
            flank_size=o.seqlet_flank,
            trim_to_window_size=o.trim_size,
            initial_flank_to_add=o.initial_flank,
            final_flank_to_add=o.final_flank,
            target_seqlet_fdr=0.05,
            n_leiden_runs=o.n_leiden,
            verbose=False,
        )
    except ValueError as exc:  # e.g. fewer seqlets than its windows need: say so on one line
        msg = " ".join(str(exc).split())
        raise ChromaflowError(f"{o.contributions}: TF-MoDISco found no usable seqlets ({msg})") from None
    modiscolite.io.save_hdf5(h5_path, pos, neg, contrib.width)
    return sum(len(p.seqlets) for group in (pos, neg) if group for p in group)


def read_patterns(h5_path: str) -> list[Pattern]:
    """The patterns of a TF-MoDISco results file (``modisco motifs -o``), positive then negative, each in its
    metacluster's order (pattern_0, pattern_1, ...: most seqlets first), trimmed as modisco's report trims them."""
    import h5py

    out = []
    with h5py.File(h5_path, "r") as f:
        for group in ("pos_patterns", "neg_patterns"):
            if group not in f:
                continue
            for key in sorted(f[group], key=lambda k: int(k.rsplit("_", 1)[-1])):
                p = f[group][key]
                ppm = np.asarray(p["sequence"][:], dtype=np.float64)
                cwm = np.asarray(p["contrib_scores"][:], dtype=np.float64)
                score = np.abs(cwm).sum(axis=1)
                keep = np.flatnonzero(score >= score.max() * TRIM_THRESHOLD)
                out.append(
                    Pattern(
                        f"{group}.{key}",
                        group[:3],
                        int(p["seqlets"]["n_seqlets"][0]),
                        ppm,
                        cwm,
                        int(keep[0]),
                        int(keep[-1]) + 1,
                    )
                )
    return out


def match_patterns(patterns: list[Pattern], database: list, top: int) -> list[Match]:
    """Each pattern's ``top`` best database motifs by TOMTOM p-value (ties: database order), with BH q-values over
    the whole database. ``database``: chromaflow.motifs.motifs.Motif, counts (4, L)."""
    if not patterns:
        return []
    import warnings

    from memelite.tomtom import tomtom

    queries = [np.ascontiguousarray(p.trimmed_ppm.T) for p in patterns]
    targets = [np.ascontiguousarray(m.counts / m.counts.sum(axis=0, keepdims=True)) for m in database]
    with warnings.catch_warnings():  # its small-database warning: docs/interpret.md says what a small one means
        warnings.simplefilter("ignore")
        pvalues = np.asarray(tomtom(queries, targets)[0], dtype=np.float64)  # (patterns, motifs)
    matches = []
    for i, row in enumerate(pvalues):
        q = bh_qvalues(row)
        order = np.lexsort((np.arange(len(row)), row))[:top]
        matches += [Match(i, r + 1, int(j), float(row[j]), float(q[j])) for r, j in enumerate(order)]
    return matches


def bh_qvalues(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg q-values of the p-values ``p`` (n,): the smallest FDR at which each is declared."""
    p = np.asarray(p, dtype=np.float64)
    n = len(p)
    order = np.argsort(p, kind="stable")
    scaled = p[order] * n / np.arange(1, n + 1)
    q = np.minimum.accumulate(scaled[::-1])[::-1]
    out = np.empty(n)
    out[order] = np.minimum(q, 1.0)
    return out


def meme_text(patterns: list[Pattern]) -> str:
    """MEME minimal format of the patterns' trimmed PPMs (uniform background; nsites: the pattern's seqlets)."""
    lines = ["MEME version 5", "", "ALPHABET= ACGT", "", "strands: + -", "", "Background letter frequencies"]
    lines += ["A 0.25 C 0.25 G 0.25 T 0.25", ""]
    for p in patterns:
        ppm = p.trimmed_ppm
        lines.append(f"MOTIF {p.name} {p.metacluster}_{p.name.rsplit('_', 1)[-1]}")
        lines.append(f"letter-probability matrix: alength= 4 w= {len(ppm)} nsites= {p.n_seqlets} E= 0")
        lines += [" ".join(f"{v:.6f}" for v in row) for row in ppm]
        lines.append("")
    return "\n".join(lines)


def matches_tsv(patterns: list[Pattern], matches: list[Match], database: list) -> str:
    """The matches table (COLUMNS; p and q with 4 significant digits); ``NA`` where the database names no family."""
    rows = ["\t".join(COLUMNS)]
    for m in matches:
        p, d = patterns[m.pattern], database[m.motif]
        rows.append(
            "\t".join(
                [
                    p.name,
                    p.metacluster,
                    str(p.n_seqlets),
                    str(m.rank),
                    d.id,
                    d.name,
                    d.family or "NA",
                    d.tf_class or "NA",
                    f"{m.pvalue:.4g}",
                    f"{m.qvalue:.4g}",
                ]
            )
        )
    return "\n".join(rows) + "\n"


def _write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
