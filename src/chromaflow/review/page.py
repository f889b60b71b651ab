"""The review page itself: the loci and track slices handed to igv-reports' ``create_report`` (its CLI, run with
this interpreter), which embeds every locus' sequence and track data in one HTML file.

igv-reports' page loads igv.js from jsDelivr when it is opened; with ``igvjs`` (a local ``igv.min.js``) the
script is inlined too (igv-reports' ``--standalone``, reading it through a ``file://`` URL in a copy of its
template), so the page opens without network.
"""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..utils.errors import ChromaflowError
from .loci import Locus

#: igv-reports' create_report, its data URIs gzipped with mtime 0: the same inputs give the same page, byte for byte
_CREATE_REPORT = (
    "import functools, gzip; from igv_reports import datauri, report; "
    "datauri.compress = functools.partial(gzip.compress, mtime=0); report.main()"
)
#: the columns of the table igv-reports shows, one row per locus
SHOWN = ["section", "rank", "name", "locus", "score", "detail"]
#: Paul Tol's bright scheme: the predicted tracks, in order
PALETTE = ["68,119,170", "34,136,51", "204,187,68", "102,204,238", "170,51,119", "238,102,119"]
#: variant ref grey, alt wine, as in the IGV session and hub (chromaflow variant-browser)
ALLELE_COLOUR = {"ref": "128,128,128", "alt": "136,34,85"}
SECTION_TEXT = {
    "variant": "strongest variant effects",
    "peak": "strongest peaks",
    "promoter high": "promoters of the most accessible genes",
    "promoter low": "promoters of the least accessible genes",
}


@dataclass
class PageTracks:
    """The track files of a page (already cut to the loci, in igv-reports' formats), in display order."""

    configs: list[dict] = field(default_factory=list)

    def signal(self, path: str | Path, name: str, colour: str) -> None:
        """A bedGraph track."""
        self.configs.append(
            {
                "name": name,
                "url": str(Path(path).resolve()),
                "format": "bedgraph",
                "type": "wig",
                "color": f"rgb({colour})",
                "autoscale": True,
                "height": 50,
            }
        )

    def features(self, path: str | Path, name: str, colour: str = "0,0,0") -> None:
        """A BED track."""
        self.configs.append(
            {
                "name": name,
                "url": str(Path(path).resolve()),
                "format": "bed",
                "type": "annotation",
                "color": f"rgb({colour})",
                "displayMode": "EXPANDED",
            }
        )


def write_sites(path: str | Path, loci: list[Locus]) -> None:
    """The sites table igv-reports reads (tab-separated, a header; the window in columns 7-9, 0-based)."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\t".join(SHOWN + ["chrom", "view_start", "view_end"]) + "\n")
        for x in loci:
            where = f"{x.chrom}:{x.start + 1}-{x.end}"
            cells = [
                x.section,
                str(x.rank),
                x.name,
                where,
                f"{x.score:.4g}",
                x.detail,
                x.chrom,
                str(x.view_start),
                str(x.view_end),
            ]
            fh.write("\t".join(c.replace("\t", " ") for c in cells) + "\n")


def header_html(name: str, loci: list[Locus], flank: int) -> str:
    """The text above the table: what the page is and what each section holds."""
    counts = {s: sum(1 for x in loci if x.section == s) for s in SECTION_TEXT}
    items = "".join(f"<li>{html.escape(text)}: {counts[s]}</li>" for s, text in SECTION_TEXT.items() if counts[s])
    return (
        '<div id="chromaflowReview" style="margin: 8px">'
        f"<h2>chromaflow review: {html.escape(name)}</h2>"
        f"<p>Predicted chromatin tracks around {len(loci)} loci ({flank} bp either side); click a row to go "
        f"there.</p><ul>{items}</ul></div>\n"
    )


def _template(igvjs: str | Path | None, workdir: Path) -> Path:
    """A copy of igv-reports' page template: its table's title "Variants" made "Loci" (the page lists more than
    variants) and, with ``igvjs``, the igv.js script the local file (inlined by --standalone)."""
    import igv_reports

    src = Path(igv_reports.__file__).parent / "templates" / "variant_template.html"
    lines = src.read_text(encoding="utf-8").splitlines(keepends=True)
    lines = [line.replace('class="lbl-toggle">Variants<', 'class="lbl-toggle">Loci<') for line in lines]
    if igvjs is not None:
        igvjs = Path(igvjs)
        if not igvjs.is_file():
            raise ChromaflowError(f"--igvjs {igvjs}: does not exist or is not a file")
        scripts = [i for i, ln in enumerate(lines) if ln.strip().startswith("<script") and "igv" in ln and '.js"' in ln]
        if len(scripts) != 1:
            raise ChromaflowError(
                f"{src}: no single igv.js <script> line to replace (igv-reports changed its template)"
            )
        lines[scripts[0]] = f'    <script src="{igvjs.resolve().as_uri()}"></script>\n'
    out = workdir / "template.html"
    out.write_text("".join(lines), encoding="utf-8")
    return out


def render(
    out: str | Path,
    fasta: str | Path,
    loci: list[Locus],
    tracks: PageTracks,
    *,
    name: str,
    flank: int,
    workdir: Path,
    igvjs: str | Path | None = None,
) -> None:
    """Write the page with igv-reports.

    Parameters
    ----------
    out
        Where (the caller's temporary name: igv-reports writes it directly).
    fasta
        The indexed FASTA the loci's sequence is cut from.
    loci
        The table's rows, in order (their windows set).
    tracks
        The track files, already cut to the windows (:class:`PageTracks`).
    name, flank
        The assembly's name and the flank, for the title and the text above the table.
    workdir
        A folder for the sites table, track config, header and template igv-reports reads.
    igvjs
        A local ``igv.min.js`` to inline, or None (the page loads igv.js from jsDelivr when opened).

    Raises
    ------
    ChromaflowError
        igv-reports failed (its last stderr line).
    """
    sites, config, header = workdir / "loci.tsv", workdir / "tracks.json", workdir / "header.html"
    write_sites(sites, loci)
    config.write_text(json.dumps(tracks.configs, indent=1), encoding="utf-8")
    header.write_text(header_html(name, loci, flank), encoding="utf-8")
    cmd = [
        sys.executable,
        "-c",
        _CREATE_REPORT,
        str(sites),
        "--fasta",
        str(fasta),
        "--sequence",
        "7",
        "--begin",
        "8",
        "--end",
        "9",
        "--zero_based",
        "true",
        "--flanking",
        "0",
        "--info-columns",
        *SHOWN,
        "--title",
        f"chromaflow review: {name}",
        "--header",
        str(header),
        "--output",
        str(out),
    ]
    if tracks.configs:
        cmd += ["--track-config", str(config)]
    cmd += ["--template", str(_template(igvjs, workdir))] + (["--standalone"] if igvjs is not None else [])
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise ChromaflowError(f"igv-reports create_report failed (exit {proc.returncode}): {last}")
