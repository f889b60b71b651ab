"""Peaks in the genome-browser files ``chromaflow bigwig`` wrote (``--browser-dir``): the narrowPeak as a feature
track of igv_session.xml and, where the UCSC hub exists, a bigNarrowPeak (bigBed 6+4, bigbedfile.py) stanza in
trackDb.txt. Existing entries of the same file are replaced, so a rerun does not add a second track."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import quote
from xml.sax.saxutils import quoteattr

from ..bigwig.bigbedfile import bed_rows, write_bigbed
from ..bigwig.browser import URL_SAFE, track_ident
from ..errors import ChromaflowError
from ..outputs import write_texts_atomic


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


def add_to_browser_files(browser_dir: Path, narrowpeak: Path, name: str, bigbed: str | None) -> list[Path]:
    """Add the peak track to ``browser_dir``/igv_session.xml (required) and trackDb.txt (when present)."""
    session = browser_dir / "igv_session.xml"
    if not session.is_file():
        raise ChromaflowError(f"{session}: no IGV session to add the peaks to (write it with chromaflow bigwig)")
    rel = str(narrowpeak)
    texts = {session: _igv(session.read_text(), rel, name)}
    trackdb = browser_dir / "trackDb.txt"
    if trackdb.is_file() and bigbed is not None:
        texts[trackdb] = _trackdb(trackdb.read_text(), bigbed, name)
    write_texts_atomic(texts)
    return list(texts)


def _igv(xml: str, rel: str, name: str) -> str:
    if "</Resources>" not in xml or "</Panel>" not in xml:
        raise ChromaflowError("igv_session.xml: no <Resources> or <Panel> element (not a chromaflow bigwig session)")
    res = f'        <Resource path={quoteattr(rel)} type="narrowPeak"/>\n'
    track = (
        f'    <Panel name="FeaturePanel">\n        <Track attributeKey={quoteattr(rel)} '
        f'clazz="org.broad.igv.track.FeatureTrack" id={quoteattr(rel)} name={quoteattr(name + " peaks")} '
        f'displayMode="COLLAPSED" visible="true"/>\n    </Panel>\n'
    )
    xml = xml.replace(res, "")
    xml = re.sub(
        r'    <Panel name="FeaturePanel">\n        <Track attributeKey='
        + re.escape(quoteattr(rel))
        + r'[^\n]*\n    </Panel>\n',
        "",
        xml,
    )
    xml = xml.replace("    </Resources>", res + "    </Resources>", 1)
    return xml.replace("</Session>", track + "</Session>", 1)


def _trackdb(text: str, bigbed: str, name: str) -> str:
    ident = f"{track_ident(name)}_peaks"
    stanzas = [s for s in text.split("\n\n") if s.strip() and not s.startswith(f"track {ident}\n")]
    stanzas.append(
        "\n".join(
            [
                f"track {ident}",
                f"bigDataUrl {quote(bigbed, safe=URL_SAFE)}",
                f"shortLabel {name[:11]} peaks",
                f"longLabel {name} peaks on the predicted track (chromaflow peaks)",
                "type bigNarrowPeak",
                "visibility dense",
            ]
        )
    )
    return "\n\n".join(s.strip("\n") for s in stanzas) + "\n"
