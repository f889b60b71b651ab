"""Peaks in the genome-browser files ``chromaflow bigwig`` wrote (``--browser-dir``): the narrowPeak as a feature
track of igv_session.xml and, where the UCSC hub exists, a bigNarrowPeak (bigBed 6+4, pybigtools) stanza in
trackDb.txt. Existing entries of the same file are replaced, so a rerun does not add a second track."""
from __future__ import annotations

import os
import re
import struct
import tempfile
from pathlib import Path
from urllib.parse import quote
from xml.sax.saxutils import quoteattr

from ..bigwig.browser import URL_SAFE, track_ident
from ..common import ChromaflowError, atomic_output, naming_errors, write_texts_atomic


def bigbed_name(narrowpeak: str) -> str:
    base = narrowpeak[: -len(".narrowPeak")] if narrowpeak.endswith(".narrowPeak") else narrowpeak
    return base + ".bb"


#: UCSC's bigNarrowPeak.as (BED6+4): without it pybigtools declares bed3, which a hub's "type bigNarrowPeak" does
#: not match
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
#: the bbi header's definedFieldCount (uint16 at byte 34: after magic, version, zoom levels, three offsets and
#: fieldCount); BED6+4 defines 6 standard fields, as UCSC's bedToBigBed -type=bed6+4 writes
DEFINED_FIELD_COUNT_AT, BED_DEFINED_FIELDS = 34, 6


def write_bignarrowpeak(path: Path, chroms: list[tuple[str, int]], lines: list[list[str]]) -> None:
    """bigBed of the narrowPeak rows (chromosome order of ``chroms``, as bigBed wants the rows sorted the same way
    its chromosome list is), with UCSC's bigNarrowPeak autoSql and its 6 defined fields."""
    import pybigtools

    order = {c: i for i, (c, _) in enumerate(sorted(chroms, key=lambda x: x[0].encode()))}
    rows = sorted(lines, key=lambda r: (order[r[0]], int(r[1])))
    with atomic_output(path) as tmp, naming_errors(path):
        # pybigtools picks the format from the name's extension, which the .part temporary lacks
        with tempfile.TemporaryDirectory(dir=tmp.parent, prefix=f".{path.name}.") as d:
            bb = pybigtools.open(os.path.join(d, "peaks.bb"), "w")
            bb.write(dict(sorted(chroms, key=lambda x: x[0].encode())),
                     ((r[0], int(r[1]), int(r[2]), "\t".join(r[3:])) for r in rows), autosql=BIGNARROWPEAK_AUTOSQL)
            # pybigtools counts every autoSql field as defined (10); the format's own value for bed6+4 is 6
            with open(os.path.join(d, "peaks.bb"), "r+b") as fh:
                fh.seek(DEFINED_FIELD_COUNT_AT)
                fh.write(struct.pack("<H", BED_DEFINED_FIELDS))
            os.replace(os.path.join(d, "peaks.bb"), tmp)


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
    track = (f'    <Panel name="FeaturePanel">\n        <Track attributeKey={quoteattr(rel)} '
             f'clazz="org.broad.igv.track.FeatureTrack" id={quoteattr(rel)} name={quoteattr(name + " peaks")} '
             f'displayMode="COLLAPSED" visible="true"/>\n    </Panel>\n')
    xml = xml.replace(res, "")
    xml = re.sub(r'    <Panel name="FeaturePanel">\n        <Track attributeKey=' + re.escape(quoteattr(rel))
                 + r'[^\n]*\n    </Panel>\n', "", xml)
    xml = xml.replace("    </Resources>", res + "    </Resources>", 1)
    return xml.replace("</Session>", track + "</Session>", 1)


def _trackdb(text: str, bigbed: str, name: str) -> str:
    ident = f"{track_ident(name)}_peaks"
    stanzas = [s for s in text.split("\n\n") if s.strip() and not s.startswith(f"track {ident}\n")]
    stanzas.append("\n".join([
        f"track {ident}",
        f"bigDataUrl {quote(bigbed, safe=URL_SAFE)}",
        f"shortLabel {name[:11]} peaks",
        f"longLabel {name} peaks on the predicted track (chromaflow peaks)",
        "type bigNarrowPeak",
        "visibility dense",
    ]))
    return "\n\n".join(s.strip("\n") for s in stanzas) + "\n"
