"""Open browser files in igv.js (npm ``igv``, installed by scripts/install-igvjs) in headless Chromium.

A tiny HTTP server on 127.0.0.1 with Range requests (igv.js reads bigWig/bigBed/2bit by ranges; Python's
http.server has none) serves a folder, igv.js and one generated page. The page loads the IGV session with
``igv.createBrowser(div, {sessionURL})`` under a ``<base href>`` at the session's folder (igv.js resolves a session's
paths against the page) and the hub with ``{sessionURL: <hub.txt>}``, goes to a locus, and writes what loaded as JSON
into ``<pre id="result">``: the genome's sequences and first bases and, for every track, its name, type and the
features ``getFeatures`` returns at the locus. Chromium runs once with ``--dump-dom`` and a virtual-time budget;
the result is read from the dumped DOM.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

IGV_VERSION = "3.8.10"
CHROMIUM = "/usr/bin/chromium"


def igvjs_dir() -> Path:
    """Where scripts/install-igvjs puts igv.js (``$CHROMAFLOW_CACHE/igvjs/node_modules/igv``)."""
    cache = os.environ.get("CHROMAFLOW_CACHE") or str(Path.home() / ".cache" / "chromaflow")
    return Path(cache) / "igvjs" / "node_modules" / "igv"


def missing() -> str | None:
    """Why igv.js cannot run here (no Chromium, igv.js not installed or another version), or None."""
    if not (shutil.which("chromium") or Path(CHROMIUM).is_file()):
        return "chromium not installed (scripts/install-system-deps)"
    pkg = igvjs_dir() / "package.json"
    if not (igvjs_dir() / "dist" / "igv.min.js").is_file() or not pkg.is_file():
        return f"igv.js not installed in {igvjs_dir()} (scripts/install-igvjs; needs npm)"
    if json.loads(pkg.read_text()).get("version") != IGV_VERSION:
        return f"igv.js in {igvjs_dir()} is not {IGV_VERSION} (rerun scripts/install-igvjs)"
    return None


class RangeHandler(SimpleHTTPRequestHandler):
    """Static files with single byte-range requests (206 Partial Content); ``/igv.min.js`` and ``/page.html`` are
    served from the class attributes."""

    igv_js: Path
    page: bytes

    def log_message(self, format, *args):  # noqa: A002 - quiet
        pass

    def do_GET(self):
        if self.path.split("?")[0] == "/page.html":
            return self._send(self.page, "text/html")
        if self.path.split("?")[0] == "/igv.min.js":
            return self._send(self.igv_js.read_bytes(), "application/javascript")
        path = Path(self.translate_path(self.path))
        if not path.is_file():
            return self.send_error(404)
        data = path.read_bytes()
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if not m:
            return self._send(data, self.guess_type(str(path)))
        start = int(m.group(1))
        end = min(int(m.group(2)) if m.group(2) else len(data) - 1, len(data) - 1)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self._body(data[start : end + 1], self.guess_type(str(path)))

    def do_HEAD(self):
        path = Path(self.translate_path(self.path))
        if not path.is_file():
            return self.send_error(404)
        self.send_response(200)
        self.send_header("Content-Length", str(path.stat().st_size))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()

    def _send(self, data: bytes, ctype: str) -> None:
        self.send_response(200)
        self._body(data, ctype)

    def _body(self, data: bytes, ctype: str) -> None:
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        self.wfile.write(data)


_SCRIPT = """
const out = {errors: []};
window.addEventListener("error", e => out.errors.push(String(e.message)));
window.addEventListener("unhandledrejection", e => out.errors.push(String(e.reason && e.reason.message || e.reason)));
const origError = console.error;
console.error = (...a) => { out.errors.push(a.map(String).join(" ")); origError(...a); };
async function report(browser, locus) {
  await browser.search(locus);
  const [chr, range] = locus.split(":");
  const [s, e] = range.split("-").map(Number);
  const r = {genome: browser.genome.id, chromosomes: browser.genome.chromosomeNames.slice(0, 20), tracks: []};
  try { r.bases = await browser.genome.getSequence(chr, s - 1, s + 19); } catch (err) { r.bases = "ERROR " + err; }
  for (const tv of browser.trackViews) {
    const t = tv.track;
    if (!t.url) continue;
    let feats = [], err = null;
    try { feats = await t.getFeatures(chr, s - 1, e, (e - s + 1) / 1000) || []; } catch (x) { err = String(x); }
    const withData = feats.filter(f => f.value === undefined || f.value > 0).length;
    r.tracks.push({name: t.name, type: t.type, url: String(t.url), features: feats.length, withData, error: err});
  }
  return r;
}
async function main() {
  for (const [key, url, div] of TARGETS) {
    try {
      const b = await igv.createBrowser(document.getElementById(div), {sessionURL: url});
      out[key] = await report(b, LOCUS);
    } catch (err) { out[key] = {error: String(err && err.message || err)}; }
  }
  document.getElementById("result").textContent = JSON.stringify(out);
}
main();
"""


def _page(base: str, targets: list[tuple[str, str]], locus: str) -> bytes:
    """The page: ``<base href>`` at the session folder, one div per (key, url relative to base) target."""
    divs = "".join(f'<div id="d{i}" style="width:1000px"></div>' for i in range(len(targets)))
    tj = json.dumps([[k, u, f"d{i}"] for i, (k, u) in enumerate(targets)])
    script = _SCRIPT.replace("TARGETS", tj).replace("LOCUS", json.dumps(locus))
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><base href="{html.escape(base)}">'
        f'<script src="/igv.min.js"></script></head><body>{divs}<pre id="result"></pre>'
        f"<script>{script}</script></body></html>"
    ).encode()


def dump_dom(url: str, profile: Path, timeout: float) -> str:
    """The DOM of ``url`` after headless Chromium has run its scripts (30 s of virtual time), ``profile`` its
    user-data folder."""
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=30000",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    ).stdout


def open_in_igvjs(root: Path, folder: str, targets: list[tuple[str, str]], locus: str, timeout: float = 60) -> dict:
    """Serve ``root``, open every ``(key, file)`` of ``targets`` (paths relative to ``root/folder``) in igv.js with
    one headless Chromium, and return the page's report: ``{key: {genome, chromosomes, bases, tracks}, errors}``
    (``{key: {error}}`` where a load failed)."""
    handler = type(
        "Handler",
        (RangeHandler,),
        {"igv_js": igvjs_dir() / "dist" / "igv.min.js", "page": _page(f"/{folder}/", targets, locus)},
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/page.html"
        dom = dump_dom(url, root / ".chromium", timeout)
    finally:
        server.shutdown()
        server.server_close()
    m = re.search(r'<pre id="result">(.*?)</pre>', dom, re.S)
    if not m or not m.group(1).strip():
        raise AssertionError(f"igv.js page wrote no result; DOM tail: {dom[-2000:]}")
    return json.loads(html.unescape(m.group(1)))
