"""The review page (``chromaflow review-page``, igv-reports) opened in headless Chromium as a user opens it: one file,
igv.js inlined (``--igvjs``, the igv.js scripts/install-igvjs installs), no server. A probe script added to a copy of
the page waits for the page's own igv.js browser and table, then loads the session of one row of each section the way
a click does and reports, per track, the features igv.js reads at the row's locus and the sequence it shows."""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path

import pysam
import pytest
from helpers.cli import run_in_process
from helpers.environment import ROOT
from igvjs import CHROMIUM, dump_dom, igvjs_dir, missing

from chromaflow.genome.fasta import FastaReader

pytestmark = pytest.mark.skipif(missing() is not None, reason=missing() or "")

#: the committed test assembly (the same as tests/browsers/conftest.py's)
ASM_FASTA = ROOT / "assets" / "test" / "asmA.fa"

#: the probe: for rows ROWS (ids of the page's table), load the row's session as a click does and report what loaded
_PROBE = """
<script>
const probeOut = {errors: [], rows: {}};
window.addEventListener("error", e => probeOut.errors.push(String(e.message)));
async function probe() {
  while (typeof igvBrowser === "undefined" || !document.getElementById("variant_table")) {
    await new Promise(r => setTimeout(r, 50));
  }
  probeOut.tableRows = document.querySelectorAll("#variant_table tbody tr").length;
  for (const id of ROWS) {
    await igvBrowser.loadSession({url: sessionDictionary[id]});
    const f = igvBrowser.referenceFrameList[0];
    const cells = document.querySelector(`#variant_table tbody tr[data-id="${id}"]`).querySelectorAll("td");
    const r = {chr: f.chr, start: Math.round(f.start), end: Math.round(f.end), tracks: [],
               cells: Array.from(cells).map(c => c.textContent)};
    r.bases = await igvBrowser.genome.getSequence(f.chr, Math.round(f.start), Math.round(f.start) + 10);
    for (const tv of igvBrowser.trackViews) {
      const t = tv.track;
      if (!t.getFeatures || t.type === "sequence" || t.type === "ruler") continue;
      const feats = await t.getFeatures(f.chr, Math.round(f.start), Math.round(f.end), f.bpPerPixel) || [];
      const values = feats.filter(x => x.value !== undefined).map(x => x.value);
      const max = values.length ? Math.max(...values) : null;
      r.tracks.push({name: t.name, type: t.type, features: feats.length, max});
    }
    probeOut.rows[id] = r;
  }
  document.getElementById("probeResult").textContent = JSON.stringify(probeOut);
}
probe().catch(e => {
  probeOut.errors.push(String(e));
  document.getElementById("probeResult").textContent = JSON.stringify(probeOut);
});
</script>
<pre id="probeResult"></pre>
"""


def open_page(page: Path, rows: list[str], workdir: Path, timeout: float = 90) -> dict:
    """Open a copy of ``page`` with the probe in headless Chromium (file://) and return the probe's report."""
    probed = workdir / f"probed.{page.name}"
    text = page.read_text()
    head, sep, tail = text.rpartition("</body>")  # the page's own (inlined igv.js holds the string too)
    assert sep, "no </body> in the page"
    probed.write_text(head + _PROBE.replace("ROWS", json.dumps(rows)) + sep + tail)
    dom = dump_dom(probed.as_uri(), workdir / ".chromium", timeout)
    m = re.search(r'<pre id="probeResult">(.*?)</pre>', dom, re.S)
    if not m or not m.group(1).strip():
        raise AssertionError(f"the review page wrote no probe result; DOM tail: {dom[-2000:]}")
    return json.loads(html.unescape(m.group(1)))


def screenshot(page: Path, png: Path, workdir: Path) -> None:
    """A headless Chromium screenshot of ``page`` (for a person to look at; not asserted)."""
    subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            f"--user-data-dir={workdir / '.chromium'}",
            "--window-size=1400,1500",
            "--virtual-time-budget=20000",
            f"--screenshot={png}",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=90,
        check=False,
    )


@pytest.fixture(scope="module")
def review_page(tmp_path_factory, asm_predictions) -> tuple[Path, Path]:
    """asmA's tracks (chromaflow bigwig, strand average), its peaks (chromaflow peaks) and a page of them."""
    d = tmp_path_factory.mktemp("review_page")
    tracks = d / "tracks"
    run_in_process(
        "bigwig", "--predictions", asm_predictions, "--outdir", tracks, "--basename", "asmA", "--fasta", ASM_FASTA
    )
    bws = sorted(tracks.glob("*_avg_strand.bw"))
    peaks = []
    for bw in bws:
        ds = bw.name.removeprefix("asmA_").removesuffix("_avg_strand.bw")
        out = tracks / f"asmA_{ds}.narrowPeak"
        run_in_process("peaks", "--bigwig", bw, "--out", out, "--cutoff", 50, "--min-length", 50)
        peaks.append(out)
    page = d / "asmA.review.html"
    run_in_process(
        "review-page",
        "--fasta",
        tracks / "asmA.fa",
        "--name",
        "asmA",
        "--out",
        page,
        "--tracks",
        *bws,
        "--peaks",
        *peaks,
        "--top-peaks",
        3,
        "--flank",
        500,
        "--igvjs",
        igvjs_dir() / "dist" / "igv.min.js",
    )
    return page, d


def test_review_page_renders_its_tracks_in_chromium(review_page):
    """Every row of the first table loads its locus: sequence, the predicted signal (values > 0) and the peaks."""
    page, d = review_page
    screenshot(page, d / "review.png", d)
    assert "cdn.jsdelivr" not in page.read_text()  # igv.js inlined: the page opens offline
    out = open_page(page, ["0", "3"], d)
    assert out["errors"] == []
    assert out["tableRows"] == 6  # 3 peaks of each of the 2 datasets
    sizes = {rec.seqid: len(rec.seq) for rec in FastaReader(ASM_FASTA)}
    fasta = pysam.FastaFile(str(d / "tracks" / "asmA.fa"))
    assert {row["cells"][0] for row in out["rows"].values()} == {"peak"}
    for row in out["rows"].values():
        # the view is the row's peak (its locus cell, 1-based) with 500 bp either side, clipped to the sequence
        chrom, start, end = re.fullmatch(r"(.+):(\d+)-(\d+)", row["cells"][3]).groups()
        assert (row["chr"], row["start"], row["end"]) == (
            chrom,
            max(0, int(start) - 1 - 500),
            min(sizes[chrom], int(end) + 500),
        )
        assert row["bases"].upper() == fasta.fetch(chrom, row["start"], row["start"] + 10).upper()
        tracks = {t["name"]: t for t in row["tracks"]}
        assert set(tracks) == {
            "asmA atacseq avg",
            "asmA h3k4me3 avg",
            "asmA atacseq peaks",
            "asmA h3k4me3 peaks",
        }
        for name in ("asmA atacseq avg", "asmA h3k4me3 avg"):
            assert tracks[name]["features"] > 0 and tracks[name]["max"] > 0, tracks[name]
        assert tracks["asmA atacseq peaks"]["features"] + tracks["asmA h3k4me3 peaks"]["features"] >= 1
