"""Genome-browser companion files for ``chromaflow bigwig``: chrom.sizes, an IGV session, a UCSC track hub.

* ``chrom.sizes``: ``seqid<TAB>size`` in the chromosome order of the converted file.
* ``igv_session.xml``: IGV desktop session; every track is a Resource with a path relative to the XML.
  The genome attribute is ``chrom.sizes`` (relative) unless ``--genome`` names one (e.g. ``hg38``).
* ``hub.txt`` / ``genomes.txt`` / ``trackDb.txt`` (bigWig output only): a UCSC track hub. Every track is a
  separate ``type bigWig`` track with ``autoScale on`` and ``visibility full``; the tracks of one dataset
  share a colour (a fixed palette, in dataset order). ``genome`` is ``--genome`` or the basename; for a
  genome UCSC does not know, turn the hub into an assembly hub (``twoBitPath``) - see docs/bigwig.md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence
from urllib.parse import quote
from xml.sax.saxutils import quoteattr

from ..outputs import write_texts_atomic

#: colour per dataset, in dataset order (Okabe-Ito, colour-blind safe)
PALETTE = [
    (0, 114, 178),
    (213, 94, 0),
    (0, 158, 115),
    (204, 121, 167),
    (230, 159, 0),
    (86, 180, 233),
    (240, 228, 66),
    (0, 0, 0),
]

#: kept as they are in bigDataUrl (RFC 3986 sub-delimiters, ':' and '@' may stand in a URL path); anything else
#: outside letters, digits and '_.-~' is percent-escaped: a space in a dataset name becomes %20
URL_SAFE = "/:@!$&'()*+,;="

STRAND_WORD = {"avg": "strand average", "+": "plus strand", "-": "minus strand"}
STRAND_ID = {"avg": "avg", "+": "plus", "-": "minus"}


def browser_file_names(fmt: str) -> list[str]:
    """The names of the genome browser files written beside the tracks: chrom.sizes and the IGV session, and for ``fmt``
    'bigwig' also the UCSC hub files (hub.txt, genomes.txt, trackDb.txt)."""
    names = ["chrom.sizes", "igv_session.xml"]
    if fmt == "bigwig":
        names += ["hub.txt", "genomes.txt", "trackDb.txt"]
    return names


def write_browser_files(
    outdir: str | os.PathLike,
    *,
    chroms: list[tuple[str, int]],
    tracks: list[tuple[str, str, str]],
    fmt: str,
    basename: str,
    genome: str | None = None,
    force: bool = True,
    features: Sequence[str] = (),
    hub_tracks: Sequence[str] = (),
) -> list[Path]:
    """Write the browser files; ``tracks`` = (dataset, strand, file name relative to outdir); ``features``: BED
    files (paths relative to outdir, e.g. gene-accessibility's promoter windows) added to the IGV session;
    ``hub_tracks``: bigBed 6 files (relative to outdir, e.g. the same windows as bigBed) added to the hub."""
    outdir = Path(outdir)
    datasets = list(dict.fromkeys(d for d, _, _ in tracks))
    colour = {d: PALETTE[i % len(PALETTE)] for i, d in enumerate(datasets)}
    texts = {
        "chrom.sizes": "".join(f"{c}\t{s}\n" for c, s in chroms),
        "igv_session.xml": _igv_session(chroms, tracks, colour, fmt, basename, genome, list(features)),
    }
    if fmt == "bigwig":  # UCSC track hub (bigWig only: UCSC hubs cannot serve bedGraph)
        texts.update(_track_hub(tracks, colour, basename, genome, list(hub_tracks)))
    paths = {outdir / name: text for name, text in texts.items()}
    write_texts_atomic(paths)  # written together at the end: all or none
    return list(paths)


def _igv_session(
    chroms: list[tuple[str, int]],
    tracks: list[tuple[str, str, str]],
    colour: dict[str, tuple[int, int, int]],
    fmt: str,
    basename: str,
    genome: str | None,
    features: Sequence[str] = (),
) -> str:
    """igv_session.xml: one Resource and one Track per track file (and a feature track per BED of ``features``),
    the view on the first chromosome."""
    first, size = chroms[0]
    lines = [
        '<?xml version="1.0" encoding="UTF-8" standalone="no"?>',
        f'<Session genome={quoteattr(genome or "chrom.sizes")} locus={quoteattr(f"{first}:1-{size}")} version="8">',
        "    <Resources>",
    ]
    for _, _, path in tracks:
        lines.append(
            f"        <Resource path={quoteattr(path)} type={quoteattr('bw' if fmt == 'bigwig' else 'bedgraph')}/>"
        )
    for path in features:
        lines.append(f"        <Resource path={quoteattr(path)} type=\"bed\"/>")
    lines += ["    </Resources>", '    <Panel name="DataPanel">']
    for ds, strand, path in tracks:
        r, g, b = colour[ds]
        lines.append(
            f"        <Track attributeKey={quoteattr(path)} autoScale=\"true\" "
            f"clazz=\"org.broad.igv.track.DataSourceTrack\" "
            f"color=\"{r},{g},{b}\" id={quoteattr(path)} name={quoteattr(f'{basename} {ds} {strand}')} "
            f"renderer=\"BAR_CHART\" visible=\"true\" windowFunction=\"mean\"/>"
        )
    for path in features:
        lines.append(
            f"        <Track attributeKey={quoteattr(path)} clazz=\"org.broad.igv.track.FeatureTrack\" "
            f"displayMode=\"EXPANDED\" id={quoteattr(path)} name={quoteattr(Path(path).name)} visible=\"true\"/>"
        )
    lines += ["    </Panel>", "</Session>", ""]
    return "\n".join(lines)


def _track_hub(
    tracks: list[tuple[str, str, str]],
    colour: dict[str, tuple[int, int, int]],
    basename: str,
    genome: str | None,
    hub_tracks: Sequence[str] = (),
) -> dict[str, str]:
    """hub.txt, genomes.txt and trackDb.txt of the UCSC track hub, by file name."""
    hub = "\n".join(
        [
            f"hub {track_ident(basename)}_chromaflow",
            f"shortLabel {basename[:17]} coverage",
            f"longLabel chromaflow predicted coverage tracks of {basename}",
            "genomesFile genomes.txt",
            "email nobody@example.org",
            "descriptionUrl https://github.com/weberlab-hhu/Predmoter",
            "",
        ]
    )
    genomes = "\n".join(
        [
            "# set 'genome' to the UCSC assembly name of the sequences (e.g. hg38), or make this an assembly hub",
            "# by adding twoBitPath/organism/defaultPos lines (see docs/bigwig.md)",
            f"genome {genome or basename}",
            "trackDb trackDb.txt",
            "",
        ]
    )
    stanzas = [_bigwig_stanza(basename, ds, strand, path, colour[ds]) for ds, strand, path in tracks]
    # bigBed 6 feature tracks, e.g. gene-accessibility's promoter windows
    stanzas += [_bigbed_stanza(basename, path) for path in hub_tracks]
    return {"hub.txt": hub, "genomes.txt": genomes, "trackDb.txt": "\n".join(stanzas)}


def _bigwig_stanza(basename: str, ds: str, strand: str, path: str, colour: tuple[int, int, int]) -> str:
    """The trackDb.txt stanza of one bigWig track (``path`` relative to the hub) of dataset ``ds``."""
    r, g, b = colour
    return "\n".join(
        [
            f"track {track_ident(basename)}_{track_ident(ds)}_{STRAND_ID[strand]}",
            f"bigDataUrl {quote(path, safe=URL_SAFE)}",
            f"shortLabel {ds[:9]} {STRAND_ID[strand]}",
            f"longLabel {basename} {ds} predicted coverage, {STRAND_WORD[strand]}",
            "type bigWig",
            "autoScale on",
            "visibility full",
            "maxHeightPixels 100:48:8",
            f"color {r},{g},{b}",
            "",
        ]
    )


def _bigbed_stanza(basename: str, path: str) -> str:
    """The trackDb.txt stanza of one bigBed 6 feature track (``path`` relative to the hub)."""
    name = Path(path).name
    stem = name[:-3] if name.endswith(".bb") else name
    return "\n".join(
        [
            f"track {track_ident(basename)}_{track_ident(stem)}",
            f"bigDataUrl {quote(path, safe=URL_SAFE)}",
            f"shortLabel {stem[:17]}",
            f"longLabel {basename} {stem} ({name})",
            "type bigBed 6",
            "visibility pack",
            "",
        ]
    )


def track_ident(s: str) -> str:
    """``s`` as a UCSC track/hub identifier (letters, digits, '_'); also used for the peaks' hub stanzas."""
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in s)
