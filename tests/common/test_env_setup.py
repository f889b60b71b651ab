"""First-time set-up by ``scripts/env.sh`` is safe when two shells run it at once (issue 13 §3).

Two ``bash -c 'source scripts/env.sh; ...'`` start together with one fresh, shared ``CHROMAFLOW_CACHE``. To keep
it cheap the venv is made from a one-package requirements file (``CHROMAFLOW_REQUIREMENTS``, an override used
only here) and the Nextflow/hadolint/Groovy-parser installs are left out (``CHROMAFLOW_SKIP_TOOLS=1``); the
venv code path (flock, marker written last, hash-keyed folder) is the same one the real requirements take.

Checked: both shells succeed; exactly one of them says it creates the venv; both end up with the same venv on
PATH, which is complete and holds the package; there is only that one venv folder; and the second shell really
started before the first had finished (else the test proved nothing about concurrency and fails). What it does
not show: concurrent installs of Nextflow and the other tools (one lock, same pattern), or many (>2) shells.
Needs PyPI (pip upgrades itself and installs the package); where PyPI cannot be reached it skips with the reason
(fails under CI=true).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from helpers.environment import unavailable

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "iniconfig==2.1.0"  # small, pure-Python, no dependencies

SCRIPT = r"""
date +%s.%N > "$1"
source scripts/env.sh || exit 3
python -c 'import sys, iniconfig; print("PREFIX", sys.prefix); print("MODULE", iniconfig.__file__)'
"""


def test_two_concurrent_first_setups_build_one_venv(tmp_path):
    cache = tmp_path / "cache"
    req = tmp_path / "requirements.txt"
    req.write_text(PACKAGE + "\n")
    env = dict(os.environ, CHROMAFLOW_CACHE=str(cache), CHROMAFLOW_REQUIREMENTS=str(req), CHROMAFLOW_SKIP_TOOLS="1")
    for var in ("VIRTUAL_ENV", "CHROMAFLOW_VENV", "PYTHONHOME"):
        env.pop(var, None)
    procs = [
        subprocess.Popen(
            ["bash", "-c", SCRIPT, "setup", str(tmp_path / f"start{i}")],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    results = [p.communicate(timeout=900) for p in procs]
    codes = [p.returncode for p in procs]
    errs = "\n".join(f"--- shell {i}: rc={c}\n{o}\n{e}" for i, (c, (o, e)) in enumerate(zip(codes, results)))
    if codes != [0, 0] and "pip" in errs and any(s in errs for s in ("Could not", "NewConnectionError", "SSLError")):
        unavailable("PyPI unreachable, the concurrent set-up could not be exercised:\n" + errs[-2000:])
    assert codes == [0, 0], errs

    creators = [i for i, (_, e) in enumerate(results) if "creating virtualenv" in e]
    assert len(creators) == 1, f"venv created {len(creators)} times:\n{errs}"

    venvs = sorted(p.name for p in cache.glob("venv-*"))
    assert len(venvs) == 1, venvs
    venv = cache / venvs[0]
    assert (venv / ".complete").is_file()
    for out, _ in results:
        lines = dict(ln.split(" ", 1) for ln in out.splitlines() if ln.startswith(("PREFIX ", "MODULE ")))
        assert Path(lines["PREFIX"]).resolve() == venv.resolve(), out
        assert Path(lines["MODULE"]).resolve().is_relative_to(venv.resolve()), out

    # the shells overlapped: the one that did not build started before the build was committed
    done = (venv / ".complete").stat().st_mtime
    starts = [float((tmp_path / f"start{i}").read_text()) for i in range(2)]
    waiter = 1 - creators[0]
    assert starts[waiter] < done, (
        f"shell {waiter} started {starts[waiter] - done:.2f} s after the venv was "
        "complete: no concurrency was exercised"
    )
    # a third, later shell reuses it without rebuilding
    r = subprocess.run(
        ["bash", "-c", SCRIPT, "setup", str(tmp_path / "start2")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0 and "creating virtualenv" not in r.stderr, r.stderr
    assert f"PREFIX {venv}\n" in r.stdout, r.stdout


def test_the_nextflow_launcher_maps_a_usable_class_archive():
    """scripts/install-nextflow makes an archive of Nextflow's classes for the Java it picked (an AOT cache on Java 25+,
    a CDS archive before) and the launcher passes it. A JVM that cannot use one (another Java, another class path,
    other module options) starts without it and says nothing, so the check is that the launcher's JVM loads
    Nextflow's own classes from it (-Xlog:class+load, appended as a user's NXF_JVM_ARGS, names each class's source)."""
    import re
    import shutil

    nf = shutil.which("nextflow")
    if nf is None:
        unavailable("nextflow not on PATH (run: source scripts/env.sh)")
    text = Path(nf).read_text()
    m = re.search(r"-XX:(?:SharedArchiveFile|AOTCache)=(\S+)", text)
    assert m, f"{nf}: no -XX:SharedArchiveFile or -XX:AOTCache (scripts/install-nextflow made no archive)"
    assert Path(m.group(1)).is_file(), m.group(1)
    p = subprocess.run(
        [nf, "-version"],
        capture_output=True,
        text=True,
        env=dict(os.environ, NXF_OFFLINE="true", NXF_JVM_ARGS="-Xlog:class+load=info"),
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert "WARNING" not in p.stderr, p.stderr  # Java 25's native-access and Unsafe warnings are allowed away
    shared = [ln for ln in p.stdout.splitlines() if re.search(r"\bnextflow\.\S+ source: shared objects file", ln)]
    assert len(shared) > 50, f"{len(shared)} Nextflow classes from the archive {m.group(1)}"
