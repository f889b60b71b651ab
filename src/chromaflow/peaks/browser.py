"""Peaks in the genome-browser files ``chromaflow bigwig`` wrote (``--browser-dir``): the narrowPeak as a feature
track of igv_session.xml (in its one ``FeaturePanel``) and, where the UCSC hub exists, the peaks as bigBed (UCSC's
bigNarrowPeak fields, BED6+4, bigbedfile.py) in a ``type bigBed 6 +`` stanza of trackDb.txt or of the single-file
hub.txt (bigwig --fasta): igv.js skips ``type bigNarrowPeak`` stanzas, and UCSC reads the same file as
``bigBed 6 +``. Existing entries of the same file are replaced, so a rerun does not add a second
track."""

from __future__ import annotations

import os
import re
from pathlib import Path
from xml.sax.saxutils import quoteattr

from ..bigwig.bigbedfile import bed_rows, write_bigbed
from ..bigwig.browser import long_label, replace_stanzas, short_label, track_ident, track_stanza_files, url
from ..utils.errors import ChromaflowError
from ..utils.outputs import write_texts_atomic


def narrowpeak_base(narrowpeak: str) -> str:
    """The name of a narrowPeak file without ``.narrowPeak`` or ``.narrowPeak.gz`` (where it ends so)."""
    for ext in (".narrowPeak", ".narrowPeak.gz"):
        if narrowpeak.endswith(ext):
            return narrowpeak[: -len(ext)]
    return narrowpeak


def bigbed_name(narrowpeak: str) -> str:
    """The bigBed file name of a narrowPeak file: its name with ``.narrowPeak`` or ``.narrowPeak.gz`` (where it ends
    so) replaced by ``.bb``."""
    return narrowpeak_base(narrowpeak) + ".bb"


#: UCSC's bigNarrowPeak.as (BED6+4): a hub's "type bigNarrowPeak" expects it
BIGNARROWPEAK_AUTOSQL = """table bigNarrowPeak
"BED6+4 Peaks of signal enrichment based on pooled, normalized (interpreted) data."
    (
    string chrom;        "Reference sequence chromosome or scaffold"
    uint   chromStart;   "Start position in chromosome"
    uint   chromEnd;     "End position in chromosome"
    string name;         "Name given to a region (preferably unique). Use . if no name is assigned"
    uint   score;        "Indicates how dark the peak will be displayed in the browser (0-1000) "
    char[1]  strand;     "+ or - or . for unknown"
    float  signalValue;  "Measurement of average enrichment for the region"
    float  pValue;       "Statistical significance of signal value (-log10). Set to -1 if not used."
    float  qValue;       "Statistical significance with multiple-test correction applied (FDR -log10). Set to -1 if not used."
    int   peak;         "Point-source called for this peak; 0-based offset from chromStart. Set to -1 if no point-source called."
    )
"""
#: BED6+4: 10 fields of which 6 are BED's, as UCSC's bedToBigBed -type=bed6+4 writes them
NARROWPEAK_FIELDS, BED_DEFINED_FIELDS = 10, 6


def write_bignarrowpeak(path: Path, chroms: list[tuple[str, int]], narrowpeak: str | os.PathLike) -> int:
    """bigBed of the narrowPeak file's rows (sorted as write_narrowpeak writes them: chromosome name bytes, then
    start), with UCSC's bigNarrowPeak autoSql and its 6 defined fields, streamed (bigbedfile.py)."""
    return write_bigbed(
        path, chroms, lambda: bed_rows(narrowpeak), BIGNARROWPEAK_AUTOSQL, NARROWPEAK_FIELDS, BED_DEFINED_FIELDS
    )


def display_name(name: str, dataset: str | None) -> str:
    """The peaks' name as the browser files show it: ``<id> <dataset>`` for the pipeline's ``<id>_<dataset>`` (the
    way chromaflow bigwig names its tracks, ``<id> <dataset> <strand>``), else ``name`` as given."""
    if dataset and name.endswith("_" + dataset) and len(name) > len(dataset) + 1:
        return f"{name[: -len(dataset) - 1]} {dataset}"
    return name


def add_to_browser_files(
    browser_dir: Path, narrowpeak: Path, name: str, bigbed: str | None, dataset: str | None = None
) -> list[Path]:
    """Add the peak track to ``browser_dir``/igv_session.xml (required) and, with ``bigbed``, to the hub's track
    stanzas (trackDb.txt or the single-file hub.txt, where there is a hub), labelled ``display_name(name, dataset)``.

    Parameters
    ----------
    browser_dir : Path
        chromaflow bigwig's output folder.
    narrowpeak : Path
        The narrowPeak file, relative to ``browser_dir``.
    name : str
        The peaks' name (``--name``: the pipeline gives ``<id>_<dataset>``).
    bigbed : str or None
        The bigBed of the peaks, relative to ``browser_dir``.
    dataset : str or None
        The predictions' dataset the peaks were called on (None for a bigWig's).

    Returns
    -------
    list of Path
        The files updated.
    """
    session = browser_dir / "igv_session.xml"
    if not session.is_file():
        raise ChromaflowError(f"{session}: no IGV session to add the peaks to (write it with chromaflow bigwig)")
    rel = str(narrowpeak)
    label = display_name(name, dataset)
    texts = {session: _igv(session.read_text(), rel, label)}
    if bigbed is not None:
        for hub in track_stanza_files(browser_dir):
            texts[hub] = _trackdb(hub.read_text(), bigbed, name, label)
    write_texts_atomic(texts)
    return list(texts)


#: the one panel of feature tracks (promoters, peaks) of a chromaflow session
_FEATURES = re.compile(r'    <Panel name="FeaturePanel">\n((?:        <Track [^\n]*\n)*)    </Panel>\n')


def _igv(xml: str, rel: str, name: str) -> str:
    """The session ``xml`` with the peaks of ``rel`` (a narrowPeak relative to it) named ``<name> peaks`` in its one
    feature panel, an older entry of the same file replaced."""
    if "</Resources>" not in xml or "</Panel>" not in xml:
        raise ChromaflowError("igv_session.xml: no <Resources> or <Panel> element (not a chromaflow bigwig session)")
    label = quoteattr(name + " peaks")
    res = f'        <Resource path={quoteattr(rel)} type="narrowPeak"/>\n'
    track = (
        f'        <Track attributeKey={quoteattr(rel)} clazz="org.broad.igv.track.FeatureTrack" id={quoteattr(rel)} '
        f'name={label} displayMode="COLLAPSED" visible="true"/>\n'
    )
    xml = re.sub(r"        <Resource [^\n]*path=" + re.escape(quoteattr(rel)) + r' type="narrowPeak"/>\n', "", xml)
    xml = re.sub(r"        <Track attributeKey=" + re.escape(quoteattr(rel)) + r"[^\n]*\n", "", xml)
    xml = xml.replace('    <Panel name="FeaturePanel">\n    </Panel>\n', "")
    xml = xml.replace("    </Resources>", res + "    </Resources>", 1)
    panel = _FEATURES.search(xml)
    if panel:
        return xml[: panel.end(1)] + track + xml[panel.end(1) :]
    return xml.replace("</Session>", f'    <Panel name="FeaturePanel">\n{track}    </Panel>\n</Session>', 1)


def _trackdb(text: str, bigbed: str, name: str, label: str) -> str:
    """A trackDb (or single-file hub) ``text`` with the peaks' ``type bigBed 6 +`` stanza (track ``<name>_peaks``,
    long label ``<label> peaks ...``), an older one replaced."""
    ident = f"{track_ident(name)}_peaks"
    stanza = "\n".join(
        [
            f"track {ident}",
            f"bigDataUrl {url(bigbed)}",
            f"shortLabel {short_label(label, 'peaks', keep='end')}",
            long_label(f"longLabel {label} peaks on the predicted track (chromaflow peaks)"),
            "type bigBed 6 +",
            "visibility dense",
        ]
    )
    return replace_stanzas(text, ident + "\n", [stanza])
