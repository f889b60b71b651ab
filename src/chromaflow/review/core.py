"""The review page's core: :class:`ReviewOptions` (``chromaflow review-page``'s options, validated once) and
:func:`run`: choose the loci (strongest variant effects, strongest peaks, extreme promoters), cut the tracks to their
windows and write the page with igv-reports (:mod:`.page`).

Any of the three inputs may be missing: the page has the sections it has inputs for. With no locus at all (no
input, or inputs without rows) no page is written and :func:`run` says so on stderr (exit status 0).
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..utils.errors import ChromaflowError
from ..utils.outputs import atomic_output, check_outputs
from . import loci as L
from .page import ALLELE_COLOUR, PALETTE, PageTracks, render
from .slices import bigwig_intervals, narrowpeak_to_bed, variant_intervals, write_bedgraph

#: how many loci of each kind and the flank, by default (the command's defaults)
DEFAULT_TOP_VARIANTS = 20
DEFAULT_TOP_PEAKS = 20
DEFAULT_TOP_GENES = 10
DEFAULT_FLANK = 1000


@dataclass
class ReviewOptions:
    """What ``review-page`` shows and where the page goes: the command's options, one field each (``None`` or an
    empty list where an option is not given).

    :meth:`validate` checks them once (one line naming the option); :func:`run` calls it, so a library caller gets
    the same checks as the command line.
    """

    fasta: str
    name: str
    out: str
    tracks: list[str] = field(default_factory=list)
    peaks: list[str] = field(default_factory=list)
    effects: str | None = None
    variant_tracks: list[str] = field(default_factory=list)
    genes: str | None = None
    promoters: str | None = None
    top_variants: int = DEFAULT_TOP_VARIANTS
    top_peaks: int = DEFAULT_TOP_PEAKS
    top_genes: int = DEFAULT_TOP_GENES
    gene_dataset: str | None = None
    flank: int = DEFAULT_FLANK
    igvjs: str | None = None

    def validate(self) -> None:
        """Check the options: counts and flank not negative, --variant-tracks with --effects, --out not one of the
        inputs (nor existing), every input a file, the FASTA indexed; one-line :class:`ChromaflowError` otherwise."""
        for opt in ("top_variants", "top_peaks", "top_genes", "flank"):
            if getattr(self, opt) < 0:
                raise ChromaflowError(f"--{opt.replace('_', '-')} {getattr(self, opt)}: must be 0 or more")
        if self.variant_tracks and not self.effects:
            raise ChromaflowError("--variant-tracks: needs --effects (the table that ranks the variants)")
        inputs = [
            ("--fasta", self.fasta),
            ("--effects", self.effects),
            ("--genes", self.genes),
            ("--promoters", self.promoters),
            ("--igvjs", self.igvjs),
        ]
        inputs += [("--tracks", t) for t in self.tracks] + [("--peaks", t) for t in self.peaks]
        inputs += [("--variant-tracks", t) for t in self.variant_tracks]
        check_outputs([("--out", self.out)], inputs)
        for opt, path in inputs:
            if path and not Path(path).is_file():
                raise ChromaflowError(f"{opt} {path}: does not exist or is not a file")
        if not Path(f"{self.fasta}.fai").is_file():
            raise ChromaflowError(f"--fasta {self.fasta}: no index {self.fasta}.fai (samtools faidx)")


#: the strand part of chromaflow bigwig's file names, as its IGV session names the tracks
_STRANDS = {"avg": "avg", "+": "plus", "-": "minus"}


def track_label(stem: str, name: str, kind: str = "") -> str:
    """A track's name on the page, as chromaflow bigwig's IGV session and hub name it: ``<name> <dataset> <strand>``
    for a bigWig stem ``<name>_<dataset>_<avg|+|->_strand``, ``<name> <dataset> peaks`` for peaks ``<name>_<dataset>``
    (``kind`` ``"peaks"``); any other stem as it is (with `` peaks``)."""
    rest = stem[len(name) + 1 :] if stem.startswith(name + "_") and len(stem) > len(name) + 1 else None
    if kind == "peaks":
        return f"{name} {rest} peaks" if rest else f"{stem} peaks"
    if rest and rest.endswith("_strand") and "_" in rest[: -len("_strand")]:
        dataset, strand = rest[: -len("_strand")].rsplit("_", 1)
        if strand in _STRANDS:
            return f"{name} {dataset} {_STRANDS[strand]}"
    return stem


def choose_loci(options: ReviewOptions, sizes: dict[str, int]) -> list[L.Locus]:
    """The page's loci, section by section (variants, peaks, promoters), with their windows."""
    loci = []
    if options.effects:
        loci += L.top_variants(options.effects, options.top_variants, sizes)
    loci += L.top_peaks(options.peaks, options.top_peaks, sizes)
    if options.genes:
        loci += L.promoter_extremes(options.genes, options.top_genes, sizes, options.gene_dataset)
    return L.with_views(loci, options.flank, sizes)


def build_tracks(options: ReviewOptions, loci: list[L.Locus], workdir: Path) -> PageTracks:
    """The page's tracks cut to the loci's windows in ``workdir``: predicted signal, variant ref/alt, peaks,
    promoters."""
    tracks = PageTracks()
    windows = L.merged_windows(loci)
    for i, bw in enumerate(options.tracks):
        out = workdir / f"track{i}.bedgraph"
        write_bedgraph(out, bigwig_intervals(bw, windows))
        tracks.signal(out, track_label(Path(bw).name.removesuffix(".bw"), options.name), PALETTE[i % len(PALETTE)])
    variants = [x for x in loci if x.section == "variant"]
    for (dataset, allele), intervals in variant_intervals(options.variant_tracks, variants).items():
        out = workdir / f"variant_{len(tracks.configs)}.bedgraph"
        write_bedgraph(out, intervals)
        tracks.signal(out, f"{options.name} variant {dataset} {allele}", ALLELE_COLOUR[allele])
    for i, peaks in enumerate(options.peaks):
        out = workdir / f"peaks{i}.bed"
        narrowpeak_to_bed(peaks, out)
        label = track_label(Path(peaks).name.removesuffix(".narrowPeak"), options.name, "peaks")
        tracks.features(out, label, PALETTE[i % len(PALETTE)])
    if options.promoters:
        tracks.features(options.promoters, f"{options.name} promoters")
    return tracks


def run(options: ReviewOptions) -> int:
    """Run the command: choose the loci, cut the tracks to them and write the page; returns the exit status."""
    options.validate()
    sizes = L.read_sizes(f"{options.fasta}.fai")
    loci = choose_loci(options, sizes)
    if not loci:
        print(
            f"chromaflow review-page: no locus to show for {options.name} (no variants, peaks or genes): "
            "no page written",
            file=sys.stderr,
        )
        return 0
    with tempfile.TemporaryDirectory(prefix=".review.", dir=Path(options.out).resolve().parent) as tmp:
        workdir = Path(tmp)
        tracks = build_tracks(options, loci, workdir)
        with atomic_output(options.out, suffix=".html") as part:
            render(
                part,
                options.fasta,
                loci,
                tracks,
                name=options.name,
                flank=options.flank,
                workdir=workdir,
                igvjs=options.igvjs,
            )
    return 0
