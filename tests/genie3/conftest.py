"""Fixtures shared by the genie3 test files."""

from __future__ import annotations

import pytest

from helpers.environment import unavailable


@pytest.fixture(scope="session")
def genie3_kernel():
    """The fast engine's C kernel; it needs a C compiler: without one the tests that use it skip (CI: fail)."""
    from chromaflow.genie3.fast import KernelUnavailable, load_kernel

    try:
        return load_kernel()
    except KernelUnavailable as exc:
        unavailable(f"fast genie3 kernel unavailable: {exc}")
