"""``chromaflow variant-browser``: the ref/alt bigWigs of the strongest variants (``variant-effect --tracks``) in the
genome-browser files ``chromaflow bigwig`` wrote (and ``chromaflow peaks`` may have added to).

igv_session.xml gets one Resource per bigWig and a panel of its own (``VariantPanel``) with a track per bigWig, in
rank order, ref before alt, datasets in file order; the hub's track stanzas (trackDb.txt, or the single-file hub.txt
of bigwig --fasta; where a UCSC hub exists) get a ``type bigWig`` stanza per bigWig, coloured ref grey and alt wine
(colours no dataset has). Paths are relative to the browser folder, as the other tracks' (the pipeline publishes
``<id>/tracks/`` beside ``<id>/variants/variant_tracks/``: ``../variants/variant_tracks/<file>``). A rerun replaces
the variant entries (the panel and its Resources, the ``<name>_variant_*`` stanzas) instead of adding more; with no
bigWigs the files are written without variant entries.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from xml.sax.saxutils import quoteattr

from ..bigwig.browser import long_label, replace_stanzas, short_label, track_ident, track_stanza_files, url
from ..utils.errors import ChromaflowError
from ..utils.outputs import check_outputs, write_texts_atomic

#: ``<rank>_<CHROM>_<POS>_<row>.<dataset>.<ref|alt>.bw``, the names variant-effect --tracks writes
_NAME = re.compile(r"(\d+)_(.+)_(\d+)_(\d+)\.(.+)\.(ref|alt)\.bw")
#: ref grey, alt wine (Paul Tol's), whatever the dataset: neither is a dataset colour of the palette (tested)
COLOUR = {"ref": "128,128,128", "alt": "136,34,85"}
_PANEL = re.compile(r'    <Panel name="VariantPanel">\n(?:        <Track [^\n]*\n)*    </Panel>\n')


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): the variant tracks, the browser folder and the assembly name."""
    p.add_argument(
        "tracks",
        nargs="*",
        metavar="BIGWIG",
        help="the bigWigs of variant-effect --tracks (<rank>_<CHROM>_<POS>_<row>.<dataset>.<ref|alt>.bw)",
    )
    p.add_argument(
        "--browser-dir",
        required=True,
        metavar="D",
        help="the folder of chromaflow bigwig's igv_session.xml (and trackDb.txt, when a hub was written)",
    )
    p.add_argument(
        "--name",
        required=True,
        help="assembly name in the track labels and hub identifiers (the pipeline: the assembly id)",
    )


def _parse(paths: list[str]) -> list[tuple]:
    out = []
    for path in paths:
        m = _NAME.fullmatch(os.path.basename(path))
        if m is None:
            raise ChromaflowError(
                f"{path}: not a variant-effect --tracks bigWig name (<rank>_<CHROM>_<POS>_<row>.<dataset>.<ref|alt>.bw)"
            )
        if not os.path.isfile(path):
            raise ChromaflowError(f"{path}: BIGWIG does not exist or is not a file")
        rank, chrom, pos, _row, ds, allele = m.groups()
        out.append((int(rank), chrom, int(pos), ds, allele, path))
    datasets = list(dict.fromkeys(t[3] for t in out))
    return sorted(out, key=lambda t: (t[0], datasets.index(t[3]), t[4] == "alt"))


def igv_text(xml: str, tracks: list[tuple[str, str]]) -> str:
    """``xml`` without its old variant entries, with (relative path, track name) ``tracks`` added."""
    if "</Resources>" not in xml or "</Session>" not in xml:
        raise ChromaflowError("igv_session.xml: no <Resources> element (not a chromaflow bigwig session)")
    old = _PANEL.search(xml)
    if old:
        for rel in re.findall(r' id="([^"]*)"', old.group(0)):
            xml = xml.replace(f'        <Resource path="{rel}" type="bw"/>\n', "")
        xml = xml.replace(old.group(0), "")
    if not tracks:
        return xml
    res = "".join(f"        <Resource path={quoteattr(rel)} type=\"bw\"/>\n" for rel, _ in tracks)
    panel = (
        '    <Panel name="VariantPanel">\n'
        + "".join(
            f"        <Track attributeKey={quoteattr(rel)} autoScale=\"true\" "
            f"clazz=\"org.broad.igv.track.DataSourceTrack\" color=\"{COLOUR[allele]}\" id={quoteattr(rel)} "
            f"name={quoteattr(name)} renderer=\"BAR_CHART\" visible=\"true\" windowFunction=\"mean\"/>\n"
            for (rel, name), allele in ((t, t[1].rsplit(" ", 1)[-1]) for t in tracks)
        )
        + "    </Panel>\n"
    )
    xml = xml.replace("    </Resources>", res + "    </Resources>", 1)
    return xml.replace("</Session>", panel + "</Session>", 1)


def trackdb_text(text: str, ident: str, stanzas: list[str]) -> str:
    """``text`` without its old ``<ident>_variant_*`` stanzas, with ``stanzas`` added."""
    return replace_stanzas(text, f"{ident}_variant_", stanzas)


def run(args: argparse.Namespace) -> int:
    """Run the command: add the variants' ref/alt bigWigs to the genome-browser files of ``--browser-dir``; returns
    the exit status."""
    bdir = Path(args.browser_dir)
    session = bdir / "igv_session.xml"
    if not session.is_file():
        raise ChromaflowError(f"--browser-dir {bdir}: no igv_session.xml (write the tracks with chromaflow bigwig)")
    hubs = track_stanza_files(bdir)
    check_outputs([("--browser-dir", p) for p in [session, *hubs]], [("BIGWIG", t) for t in args.tracks])
    tracks = _parse(args.tracks)
    name = args.name
    if not name or any(ch.isspace() for ch in name):
        raise ChromaflowError(f"--name {name!r}: names cannot be empty or hold whitespace")
    ident = track_ident(name)
    igv, stanzas = [], []
    for rank, chrom, pos, ds, allele, path in tracks:
        rel = os.path.relpath(path, bdir)
        igv.append((rel, f"{name} variant {rank} {chrom}:{pos} {ds} {allele}"))
        stanzas.append(
            "\n".join(
                [
                    f"track {ident}_variant_{rank:03d}_{track_ident(ds)}_{allele}",
                    f"bigDataUrl {url(rel)}",
                    f"shortLabel {short_label(ds, prefix=f'v{rank} {allele}')}",
                    long_label(
                        f"longLabel {name} variant {rank} ({chrom}:{pos}) {ds} {allele} allele, predicted (chromaflow "
                        f"variant-effect)"
                    ),
                    "type bigWig",
                    "autoScale on",
                    "visibility full",
                    "maxHeightPixels 100:32:8",
                    f"color {COLOUR[allele]}",
                ]
            )
        )
    texts = {session: igv_text(session.read_text(), igv)}
    for hub in hubs:
        texts[hub] = trackdb_text(hub.read_text(), ident, stanzas)
    write_texts_atomic(texts)
    return 0
