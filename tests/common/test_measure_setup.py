"""``scripts/measure-setup`` fails early and leaves what it needs to say why.

On 2026-12-01 a run's suite failed half-way on a full disk, and the message named a log inside the scratch folder that
the clean-up had just removed. Now the script checks the free space of ``$TMPDIR`` before anything (one line, nothing
made) and keeps its commands' logs beside the scratch folder, so a failing command's log is still there.

Both cases stop in seconds: a fake ``df`` reporting 1 GB free; a command 1 whose virtualenv cannot be built (a
requirements file naming a wheel that does not exist, ``CHROMAFLOW_REQUIREMENTS``, the override
tests/common/test_env_setup.py uses; ``CHROMAFLOW_SKIP_TOOLS=1``: no Nextflow download).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from helpers.environment import unavailable

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "measure-setup"


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CHROMAFLOW_VENV", "PYTHONHOME")}
    return dict(env, TMPDIR=str(tmp), **extra)


def test_too_little_free_space_stops_before_anything_with_one_line(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "df").write_text(
        "#!/bin/sh\necho 'Filesystem 1024-blocks Used Available Capacity Mounted on'\n"
        "echo '/dev/x 100000000 99000000 1048576 99% /'\n"
    )
    (fake / "df").chmod(0o755)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = _env(tmp, PATH=f"{fake}:{os.environ['PATH']}")
    p = subprocess.run([str(SCRIPT), "--no-tests"], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and re.search(rf"{re.escape(str(tmp))} has 1 GB free; a run needs about 9 GB", lines[0])
    assert list(tmp.iterdir()) == [], "made something before the check"


def test_a_failing_commands_log_outlives_the_clean_up(tmp_path):
    if not (ROOT / ".." / "shared").is_dir():
        unavailable("../shared is not beside the clone (measure-setup needs it)")
    req = tmp_path / "requirements.txt"
    req.write_text(f"{tmp_path / 'no-such-0.0-py3-none-any.whl'}\n")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = _env(tmp, CHROMAFLOW_REQUIREMENTS=str(req), CHROMAFLOW_SKIP_TOOLS="1")
    p = subprocess.run([str(SCRIPT), "--no-tests"], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 1, p.stderr
    m = re.search(r"command 1, cold .*\(exit [1-9]\d*, load \S+; log (\S+)\)", p.stderr)
    assert m, p.stderr
    log = Path(m.group(1))
    assert log.is_file() and log.parent.parent == tmp, log
    assert "no-such-0.0" in log.read_text(), log.read_text()[-2000:]
    assert [d.name for d in tmp.iterdir() if d.name.startswith("cf-measure-setup.")] == [], "scratch folder left"
