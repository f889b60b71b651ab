"""``discover-motifs``' report.html: one self-contained page (logos embedded as PNG, no other file), like chrombpnet's
modisco report: per pattern its seqlet count, its contribution logo (CWM) on both strands over the trimmed span, and
its best database matches with their logos (information content) and q-values."""

from __future__ import annotations

import base64
import html
import io

import numpy as np

#: the logos' letters, in the matrices' column order
LETTERS = ["A", "C", "G", "T"]


def _logo_png(matrix: np.ndarray, height: float = 1.4) -> str:
    """A sequence logo of ``matrix`` ((w, 4), A C G T; letters scaled by the values) as a base64 PNG."""
    import logomaker
    import pandas as pd
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(max(1.5, 0.28 * len(matrix)), height))
    try:
        logomaker.Logo(pd.DataFrame(matrix, columns=LETTERS), ax=ax, color_scheme="classic")
        ax.axhline(0, color="0.6", lw=0.5)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        ax.set_xticks([])
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=72, bbox_inches="tight", metadata={"Software": None})
    finally:
        plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _information(ppm: np.ndarray) -> np.ndarray:
    """(w, 4): the PPM's letters scaled by each column's information content (bits, uniform background)."""
    p = np.clip(ppm / ppm.sum(axis=1, keepdims=True), 1e-9, 1.0)
    ic = 2.0 + (p * np.log2(p)).sum(axis=1)
    return p * ic[:, None]


def _img(png: str, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{png}">'


def report_html(o, contrib, patterns, matches, database) -> str:
    """The page (``o``: DiscoverOptions; ``contrib``: Contributions; ``patterns``/``matches``: discover.py's)."""
    import matplotlib

    matplotlib.use("Agg")
    logos: dict[int, str] = {}  # database motif -> its logo: a motif that matches several patterns is drawn once
    by_pattern: dict[int, list] = {}
    for m in matches:
        by_pattern.setdefault(m.pattern, []).append(m)
    attrs = contrib.attrs
    head = (
        f"{contrib.regions} regions x {contrib.width} bp from <code>{html.escape(str(contrib.path))}</code>"
        f" (method {html.escape(str(attrs.get('method', '?')))}, dataset {html.escape(str(attrs.get('dataset', '?')))},"
        f" strand {html.escape(str(attrs.get('strand', '?')))}, model {html.escape(str(attrs.get('model', '?')))});"
        f" database <code>{html.escape(o.database)}</code> ({len(database)} motifs); TOMTOM q-values"
        f" (Benjamini-Hochberg per pattern), significant below {o.max_qvalue:g} (bold)."
    )
    rows = []
    for i, p in enumerate(patterns):
        cwm = p.cwm[max(p.lo - 2, 0) : p.hi + 2]
        cells = [
            f"<td>{html.escape(p.name)}</td><td>{p.metacluster}</td><td>{p.n_seqlets}</td>",
            f"<td>{_img(_logo_png(cwm), p.name + ' CWM')}</td>",
            f"<td>{_img(_logo_png(cwm[::-1, ::-1]), p.name + ' CWM reverse complement')}</td>",
        ]
        for m in by_pattern.get(i, []):
            d = database[m.motif]
            if m.motif not in logos:
                logos[m.motif] = _logo_png(_information((d.counts / d.counts.sum(axis=0, keepdims=True)).T), 1.0)
            label = f"{html.escape(d.id)} {html.escape(d.name)}<br>{html.escape(d.family or 'NA')}<br>q {m.qvalue:.3g}"
            if m.qvalue < o.max_qvalue:
                label = f"<b>{label}</b>"
            cells.append(f"<td>{label}<br>{_img(logos[m.motif], d.id)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    match_heads = "".join(f"<th>match {r}</th>" for r in range(1, o.top_matches + 1))
    table = (
        "<table><tr><th>pattern</th><th>sign</th><th>seqlets</th><th>contribution (CWM)</th>"
        f"<th>reverse complement</th>{match_heads}</tr>" + "".join(rows) + "</table>"
        if patterns
        else "<p>TF-MoDISco found no patterns in these contributions.</p>"
    )
    return (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>chromaflow discover-motifs</title><style>"
        "body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px;vertical-align:top;font-size:13px}"
        "</style></head><body><h1>Motifs learned by the model</h1>"
        f"<p>{head}</p>{table}</body></html>\n"
    )
