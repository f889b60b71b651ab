"""Where the tests run: the checkout, the reference data beside it, and what a missing piece means.

``unavailable(msg)`` is the one rule for a test that cannot run here (no reference folder, no peer, no engine, no
network): it skips with the reason, except under ``CI=true``, where it fails, unless the variable named by
``waiver`` is ``0`` (a CI that lacks that piece by design, e.g. ``CHROMAFLOW_REQUIRE_REFERENCE=0``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = (ROOT / ".." / "shared" / "reference").resolve()


def ci() -> bool:
    """True under CI (``CI`` is 1, true or yes): a test that cannot run then fails instead of skipping."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(msg: str, waiver: str | None = None) -> NoReturn:
    """Skip with ``msg``; under CI fail, unless the environment variable ``waiver`` is ``0``."""
    if ci() and not (waiver and os.environ.get(waiver, "1") == "0"):
        pytest.fail(msg)
    pytest.skip(msg)
