"""The IGV session of one assembly opened in IGV desktop (Debian's ``igv`` 2.16) in batch mode under Xvfb.

The same files as the igv.js test (conftest.make_browser_files). IGV runs ``load <session>``, ``goto``, ``snapshot``
with a private home (its prefs: the written FASTA as default genome, so the offline default hg19 does not stop the
batch) and is killed with its process group after a timeout. The test asserts from IGV's log that the genome (the
written FASTA) and every Resource of the session were loaded with no error, and from the snapshot that every track
colour of the session is drawn (data at the locus, not only a track name).

Checked to fail on the files of the code before it (``8b97c2c``): the session's genome ``chrom.sizes`` goes to
IGV's FASTA loader. Skips with its reason where igv or xvfb-run is missing (scripts/install-system-deps).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from browsers.conftest import LOCUS
from helpers.environment import unavailable

#: IGV's log lines of a machine without network (OAuth, hosted genome lists): not about our files
OFFLINE = re.compile(r"UnknownHostException|Error fetching (genome list|oAuth)|GenomeListManager|OAuthUtils")


def run_igv_batch(session: Path, work: Path, timeout: float = 90) -> tuple[str, Path]:
    """Open ``session`` in IGV desktop (batch, Xvfb), go to :data:`LOCUS` and snapshot it.

    Returns
    -------
    tuple of (str, Path)
        IGV's output (stdout and stderr) and the snapshot PNG.
    """
    home = work / "home"
    (home / "igv").mkdir(parents=True)
    fasta = session.parent / f"{session.parent.parent.name}.fa"
    (home / "igv" / "prefs.properties").write_text(f"DEFAULT_GENOME_KEY={fasta}\n")
    batch = work / "batch.txt"
    batch.write_text(f"load {session}\ngoto {LOCUS}\nsnapshotDirectory {work}\nsnapshot igv.png\nexit\n")
    env = dict(os.environ, JAVA_TOOL_OPTIONS=f"-Duser.home={home}")
    proc = subprocess.Popen(
        ["xvfb-run", "-a", "igv", "-b", str(batch)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        out += f"\n(killed after {timeout} s)"
    return out, work / "igv.png"


def test_session_opens_in_igv_desktop(asm_browser_files, tmp_path):
    for tool in ("igv", "xvfb-run"):
        if not shutil.which(tool):
            unavailable(f"IGV desktop test: {tool} not installed (apt-get install igv xvfb xauth)")
    from PIL import Image

    session = asm_browser_files / "igv_session.xml"
    log, png = run_igv_batch(session, tmp_path)
    root = ET.parse(session).getroot()
    genome = (session.parent / root.get("genome")).resolve()
    assert f"Loading genome: {genome}" in log, log[-3000:]
    for res in root.iter("Resource"):
        assert f"Loading resource:  {(session.parent / res.get('path')).resolve()}" in log, (
            res.get("path"),
            log[-3000:],
        )
    bad = [ln for ln in log.splitlines() if re.match(r"(SEVERE|ERROR)", ln) and not OFFLINE.search(ln)]
    assert not bad, "\n".join(bad)
    assert png.is_file(), log[-3000:]
    colours = {tuple(int(v) for v in t.get("color").split(",")) for t in root.iter("Track") if t.get("color")}
    drawn = {c for _, c in Image.open(png).convert("RGB").getcolors(1 << 20) or []}
    assert colours <= drawn, f"track colours not drawn: {colours - drawn}"
