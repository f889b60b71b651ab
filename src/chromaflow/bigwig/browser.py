"""Genome-browser companion files for ``chromaflow bigwig``: chrom.sizes, an IGV session, a UCSC track hub.

* ``chrom.sizes``: ``seqid<TAB>size`` in the chromosome order of the converted file.
* ``igv_session.xml``: IGV session (IGV desktop and igv.js); every track is a Resource with a path relative to the
  XML. The genome attribute is ``<basename>.fa`` (written beside it from ``--fasta``: genome_files.py), else
  ``--genome`` (e.g. ``hg38``), else the placeholder ``chrom.sizes`` (no browser opens that unedited).
* ``hub.txt`` (bigWig output only): with ``--fasta`` a single-file assembly hub (``useOneFile on``, ``twoBitPath``
  ``<basename>.2bit``), which UCSC and igv.js both read (igv.js reads no other kind, and igv-webapp knows a hub URL
  by its name ``hub.txt``); without it the three-file track hub ``hub.txt`` / ``genomes.txt`` / ``trackDb.txt`` on a
  genome UCSC must know (``--genome``). Every track is a separate ``type bigWig`` track with
  ``autoScale on`` and ``visibility full``; the tracks of one dataset share a colour (a fixed palette, in dataset
  order). Short labels are at most 17 characters and never cut mid-word (:func:`short_label`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Sequence
from urllib.parse import quote
from xml.sax.saxutils import quoteattr

from ..utils.outputs import write_texts_atomic

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

#: kept as they are in bigDataUrl (RFC 3986 sub-delimiters but '+', ':' and '@' may stand in a URL path); anything
#: else outside letters, digits and '_.-~' is percent-escaped: a space becomes %20, and '+' %2B (object stores and
#: some web servers read a '+' in a path as a space)
URL_SAFE = "/:@!$&'()*,;="

STRAND_WORD = {"avg": "strand average", "+": "plus strand", "-": "minus strand"}
STRAND_ID = {"avg": "avg", "+": "plus", "-": "minus"}
#: UCSC's limits on a track's labels
SHORT_LABEL_MAX, LONG_LABEL_MAX = 17, 76
#: the line that makes hub.txt a single-file hub (its track stanzas in it, no genomes.txt / trackDb.txt)
ONE_FILE = "useOneFile on"
#: bases shown when a hub opens (``defaultPos``): the first 20 kb of the first sequence
DEFAULT_POS_BP = 20_000


def short_label(text: str, suffix: str = "", prefix: str = "", keep: str = "start") -> str:
    """A UCSC ``shortLabel`` (at most :data:`SHORT_LABEL_MAX` characters) of ``prefix text suffix``, never cut mid-word.

    When the whole does not fit, the words of ``text`` (split at spaces, '_', '-', '.') are kept whole while they
    fit, from its start (``keep`` 'start') or from its end ('end': drops a leading assembly id). Only when not even
    one word fits is that word abbreviated, explicitly: its first letters and a '.'.

    Parameters
    ----------
    text : str
        The name (a dataset, a peak track's name).
    suffix, prefix : str
        Words kept whole (each a few characters: a strand, 'peaks', 'v1 alt').
    keep : {'start', 'end'}
        Which words of ``text`` are kept first.

    Returns
    -------
    str
        The label, deterministic for its arguments.
    """
    fixed = [w for w in (prefix, suffix) if w]
    full = " ".join([prefix, text, suffix]).strip() if text else " ".join(fixed)
    if len(full) <= SHORT_LABEL_MAX:
        return full
    room = SHORT_LABEL_MAX - sum(len(w) + 1 for w in fixed)
    words = [w for w in re.split(r"[\s_.\-]+", text) if w]
    order = words if keep == "start" else words[::-1]
    kept: list[str] = []
    for w in order:
        if len(" ".join(kept + [w])) > room:
            break
        kept.append(w)
    if not kept and order:
        kept = [order[0][: max(1, room - 1)] + "."]
    middle = " ".join(kept if keep == "start" else kept[::-1])
    return " ".join(w for w in (prefix, middle, suffix) if w)


def long_label(text: str) -> str:
    """``text`` as a UCSC ``longLabel``: at most :data:`LONG_LABEL_MAX` characters, cut at a word boundary and
    ended by '...' where it is longer."""
    if len(text) <= LONG_LABEL_MAX:
        return text
    cut = text[: LONG_LABEL_MAX - 3].rsplit(" ", 1)[0]
    return cut + "..."


def url(path: str) -> str:
    """``path`` (relative, '/'-separated) as a bigDataUrl: every character but letters, digits, '_.-~' and
    :data:`URL_SAFE` percent-escaped (UTF-8)."""
    return quote(path, safe=URL_SAFE)


def browser_file_names(fmt: str, basename: str = "", fasta: bool = False) -> list[str]:
    """The names of the genome browser files written beside the tracks.

    chrom.sizes and the IGV session; with ``fasta`` the genome files (``<basename>.fa``, ``.fa.fai``, ``.2bit``);
    for ``fmt`` 'bigwig' the UCSC hub: with ``fasta`` the single-file hub.txt, else hub.txt, genomes.txt and
    trackDb.txt.
    """
    from .genome_files import genome_file_names

    names = ["chrom.sizes", "igv_session.xml"]
    if fasta:
        names += genome_file_names(basename)
    if fmt == "bigwig":
        names += ["hub.txt"] if fasta else ["hub.txt", "genomes.txt", "trackDb.txt"]
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
    fasta: bool = False,
) -> list[Path]:
    """Write the browser files (all or none).

    Parameters
    ----------
    outdir : path
        The tracks' folder.
    chroms : list of (str, int), shape (chromosomes,)
        Sequence names and sizes, in track order.
    tracks : list of (str, str, str), shape (tracks,)
        (dataset, strand, file name relative to ``outdir``).
    fmt, basename, genome : str
        Track format, the call's basename, ``--genome``.
    features : sequence of str
        BED files (relative to ``outdir``, e.g. gene-accessibility's promoter windows) added to the IGV session.
    hub_tracks : sequence of str
        bigBed 6 files (relative to ``outdir``, e.g. the same windows) added to the hub.
    fasta : bool
        The genome files (genome_files.py) are written beside: the session's genome is ``<basename>.fa`` and the
        hub a single-file assembly hub on ``<basename>.2bit``.
    """
    outdir = Path(outdir)
    datasets = list(dict.fromkeys(d for d, _, _ in tracks))
    colour = {d: PALETTE[i % len(PALETTE)] for i, d in enumerate(datasets)}
    session_genome = f"{basename}.fa" if fasta else genome or "chrom.sizes"
    texts = {
        "chrom.sizes": "".join(f"{c}\t{s}\n" for c, s in chroms),
        "igv_session.xml": _igv_session(chroms, tracks, colour, fmt, basename, session_genome, list(features)),
    }
    if fmt == "bigwig":  # UCSC track hub (bigWig only: UCSC hubs cannot serve bedGraph)
        texts.update(_track_hub(tracks, colour, basename, genome, list(hub_tracks), chroms if fasta else None))
    paths = {outdir / name: text for name, text in texts.items()}
    write_texts_atomic(paths)  # written together at the end: all or none
    return list(paths)


def session_name(basename: str, ds: str, strand: str) -> str:
    """The IGV session's name of a coverage track: ``<basename> <dataset> <avg|plus|minus>``, the hub's words."""
    return f"{basename} {ds} {STRAND_ID[strand]}"


def feature_stem(basename: str, path: str) -> str:
    """The name of a feature file without its folder, extension (.bed, .bb) and a leading ``<basename>.`` or
    ``<basename>_`` (``../genes/asmA.promoters.bb`` -> ``promoters``): the track is named once, by the basename."""
    name = Path(path).name
    for ext in (".bed.gz", ".bed", ".bb"):
        if name.endswith(ext):
            name = name[: -len(ext)]
            break
    for sep in (".", "_"):
        if name.startswith(basename + sep) and len(name) > len(basename) + 1:
            return name[len(basename) + 1 :]
    return name


def _igv_session(
    chroms: list[tuple[str, int]],
    tracks: list[tuple[str, str, str]],
    colour: dict[str, tuple[int, int, int]],
    fmt: str,
    basename: str,
    genome: str,
    features: Sequence[str] = (),
) -> str:
    """igv_session.xml: one Resource and one Track per track file (and a feature track per BED of ``features``),
    the view on the first 20 kb of the first chromosome; ``genome`` as written in the Session element."""
    first, size = chroms[0]
    lines = [
        '<?xml version="1.0" encoding="UTF-8" standalone="no"?>',
        f'<Session genome={quoteattr(genome)} locus={quoteattr(f"{first}:1-{min(size, DEFAULT_POS_BP)}")} version="8">',
        "    <Resources>",
    ]
    kind = "bw" if fmt == "bigwig" else "bedgraph"
    # a Resource names its file; the Track of the same id names the track (IGV desktop and igv.js take its name)
    lines += [f"        <Resource path={quoteattr(path)} type={quoteattr(kind)}/>" for _, _, path in tracks]
    lines += [f'        <Resource path={quoteattr(path)} type="bed"/>' for path in features]
    lines += ["    </Resources>", '    <Panel name="DataPanel">']
    for ds, strand, path in tracks:
        r, g, b = colour[ds]
        lines.append(
            f"        <Track attributeKey={quoteattr(path)} autoScale=\"true\" "
            f"clazz=\"org.broad.igv.track.DataSourceTrack\" "
            f"color=\"{r},{g},{b}\" id={quoteattr(path)} name={quoteattr(session_name(basename, ds, strand))} "
            f"renderer=\"BAR_CHART\" visible=\"true\" windowFunction=\"mean\"/>"
        )
    lines.append("    </Panel>")
    if features:
        lines.append('    <Panel name="FeaturePanel">')
        for path in features:
            lines.append(
                f"        <Track attributeKey={quoteattr(path)} clazz=\"org.broad.igv.track.FeatureTrack\" "
                f"displayMode=\"EXPANDED\" id={quoteattr(path)} "
                f"name={quoteattr(f'{basename} {feature_stem(basename, path)}')} visible=\"true\"/>"
            )
        lines.append("    </Panel>")
    lines += ["</Session>", ""]
    return "\n".join(lines)


def _track_hub(
    tracks: list[tuple[str, str, str]],
    colour: dict[str, tuple[int, int, int]],
    basename: str,
    genome: str | None,
    hub_tracks: Sequence[str] = (),
    chroms: list[tuple[str, int]] | None = None,
) -> dict[str, str]:
    """The UCSC hub's files, by file name: hub.txt, genomes.txt and trackDb.txt; with ``chroms`` (the genome files
    are written) hub.txt alone, a single-file assembly hub on ``<basename>.2bit``."""
    hub_lines = [
        f"hub {track_ident(basename)}_chromaflow",
        f"shortLabel {short_label(basename, 'tracks')}",
        long_label(f"longLabel chromaflow predicted coverage tracks of {basename}"),
    ]
    about = ["email nobody@example.org", "descriptionUrl https://github.com/weberlab-hhu/Predmoter"]
    gid = genome or basename
    stanzas = [_bigwig_stanza(basename, ds, strand, path, colour[ds]) for ds, strand, path in tracks]
    # bigBed 6 feature tracks, e.g. gene-accessibility's promoter windows
    stanzas += [_bigbed_stanza(basename, path) for path in hub_tracks]
    trackdb = "\n".join(stanzas)
    if chroms is None:
        genomes = [
            "# set 'genome' to the UCSC assembly name of the sequences (e.g. hg38), or make this an assembly hub",
            "# with chromaflow bigwig --fasta (see docs/bigwig.md)",
            f"genome {gid}",
        ]
    else:
        first, size = chroms[0]
        genomes = [
            f"genome {gid}",
            f"twoBitPath {url(basename + '.2bit')}",
            "chromSizes chrom.sizes",
            f"organism {basename}",
            f"defaultPos {first}:1-{min(size, DEFAULT_POS_BP)}",
            f"description {basename} (chromaflow predicted tracks)",
            f"scientificName {basename}",
        ]
    if chroms is not None:
        head = "\n".join(hub_lines + [ONE_FILE] + about) + "\n\n" + "\n".join(genomes) + "\n\n"
        return {"hub.txt": head + trackdb}
    return {
        "hub.txt": "\n".join(hub_lines + ["genomesFile genomes.txt"] + about + [""]),
        "genomes.txt": "\n".join(genomes + ["trackDb trackDb.txt", ""]),
        "trackDb.txt": trackdb,
    }


def _bigwig_stanza(basename: str, ds: str, strand: str, path: str, colour: tuple[int, int, int]) -> str:
    """The trackDb.txt stanza of one bigWig track (``path`` relative to the hub) of dataset ``ds``."""
    r, g, b = colour
    return "\n".join(
        [
            f"track {track_ident(basename)}_{track_ident(ds)}_{STRAND_ID[strand]}",
            f"bigDataUrl {url(path)}",
            f"shortLabel {short_label(ds, STRAND_ID[strand])}",
            long_label(f"longLabel {basename} {ds} predicted coverage, {STRAND_WORD[strand]}"),
            "type bigWig",
            "autoScale on",
            "visibility full",
            "maxHeightPixels 100:48:8",
            f"color {r},{g},{b}",
            "",
        ]
    )


def _bigbed_stanza(basename: str, path: str) -> str:
    """The trackDb.txt stanza of one bigBed 6 feature track (``path`` relative to the hub): named
    ``<basename>_<stem>`` once (``asmA_promoters`` for ``../genes/asmA.promoters.bb``)."""
    stem = feature_stem(basename, path)
    return "\n".join(
        [
            f"track {track_ident(basename)}_{track_ident(stem)}",
            f"bigDataUrl {url(path)}",
            f"shortLabel {short_label(stem)}",
            long_label(f"longLabel {basename} {stem} ({Path(path).name})"),
            "type bigBed 6",
            "visibility pack",
            "",
        ]
    )


def track_ident(s: str) -> str:
    """``s`` as a UCSC track/hub identifier (letters, digits, '_'); also used for the peaks' hub stanzas."""
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in s)


def track_stanza_files(browser_dir: Path) -> list[Path]:
    """The files of ``browser_dir`` that hold the hub's track stanzas, where peaks and variant-browser add theirs:
    trackDb.txt (a three-file hub) or hub.txt when it is a single-file hub; none where no hub was written."""
    trackdb, hub = browser_dir / "trackDb.txt", browser_dir / "hub.txt"
    if hub.is_file() and ONE_FILE in hub.read_text().split("\n\n", 1)[0].splitlines():
        return [hub]  # first: a trackDb.txt beside it is a leftover of an earlier run without --fasta
    return [trackdb] if trackdb.is_file() else []


def replace_stanzas(text: str, prefix: str, stanzas: list[str]) -> str:
    """A trackDb (or single-file hub) ``text`` without its stanzas whose ``track`` starts with ``prefix``, with
    ``stanzas`` appended (so a rerun of peaks or variant-browser replaces its stanzas instead of adding more)."""
    kept = [s for s in text.split("\n\n") if s.strip() and not s.lstrip("\n").startswith(f"track {prefix}")]
    return "\n\n".join(s.strip("\n") for s in kept + stanzas) + "\n"
