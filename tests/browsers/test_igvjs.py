"""The browser files of one assembly opened in a real client: igv.js 3.8.10 in headless Chromium.

Made here as the pipeline makes them, from the committed test assembly (assets/test/asmA.fa) and predictions of two
datasets (conftest.py): ``bigwig --strand all --fasta`` with the promoter windows (--feature-track/--hub-track),
``peaks --browser-dir`` for atacseq, and ``variant-browser`` with one variant's ref/alt bigWigs. Then one Chromium
opens the IGV session and the single-file hub with igv.js, unedited, and the test asserts that the genome (the
written FASTA / 2bit: names and bases) and every track load, each with data at chr1:1-20000.

Checked to fail on the files of the code before it (``8b97c2c``): the session's genome ``chrom.sizes`` ("The genome
could not be loaded") and the three-file hub without twoBitPath ("Cannot read properties of undefined (reading
'filter')").
Skips with its reason where Chromium or igv.js is missing (scripts/install-igvjs), fails under CI=true.
"""

from __future__ import annotations

from pathlib import Path

from browsers.conftest import LOCUS
from browsers.igvjs import missing, open_in_igvjs
from helpers.environment import unavailable

from chromaflow.genome.fasta import FastaReader

#: the igv.js messages of a page with no network (its list of hosted genomes): not about our files
OFFLINE = "igv.org/genomes"


def check_report(report: dict, fasta: Path, expected: dict[str, int]) -> None:
    """Every target of the igv.js ``report`` loaded: no error, the genome's sequences and first bases those of
    ``fasta``, ``expected[key]`` tracks, each named once and each with data at :data:`LOCUS`."""
    records = {rec.seqid: bytes(rec.seq).decode() for rec in FastaReader(fasta)}
    errors = [e for e in report.get("errors", []) if OFFLINE not in e]
    problems = [f"page: {e}" for e in errors]
    for key, n in expected.items():
        got = report.get(key, {})
        if "error" in got or "tracks" not in got:
            problems.append(f"{key}: did not load: {got.get('error')}")
            continue
        if got["chromosomes"] != list(records) or got.get("bases", "").upper() != records["chr1"][:20].upper():
            problems.append(f"{key}: genome {got['genome']}: {got['chromosomes']} {got.get('bases')!r}")
        names = [t["name"] for t in got["tracks"]]
        if len(names) != n or len(set(names)) != n:
            problems.append(f"{key}: {n} tracks expected, named once; got {names}")
        for t in got["tracks"]:
            if t["error"] or not t["withData"]:
                problems.append(f"{key}: track {t['name']} ({t['url']}): no data at {LOCUS} {t['error'] or ''}")
    assert not problems, "\n".join(problems)


def test_session_and_hub_open_in_igvjs(asm_browser_files):
    why = missing()
    if why:
        unavailable(f"igv.js test: {why}")
    tracks = asm_browser_files
    targets = [("session", "igv_session.xml"), ("hub", "hub.txt")]
    report = open_in_igvjs(tracks.parent, tracks.name, targets, LOCUS)
    # 6 coverage tracks, promoters, peaks, the variant's ref and alt: in the session and in the hub
    check_report(report, tracks / "asmA.fa", {"session": 10, "hub": 10})
    hub = {t["name"] for t in report["hub"]["tracks"]}
    assert {"atacseq plus", "promoters", "atacseq peaks", "v1 alt h3k4me3"} <= hub, hub
