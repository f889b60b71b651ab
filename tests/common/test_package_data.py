"""Every C source of the package ships with it: an installed chromaflow (the container images install the wheel;
their final stage has no compiler and loads the kernels a build stage compiled from the same files) must hold each
``.c`` file its loaders hash and compile, so each is listed in pyproject.toml's package data."""

from __future__ import annotations

import tomllib

from helpers.environment import ROOT


def test_every_c_source_is_package_data():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    src = ROOT / "src"
    missing = []
    for c in sorted(src.rglob("*.c")):
        package = ".".join(c.parent.relative_to(src).parts)
        if c.name not in data.get(package, []):
            missing.append(f"{package}: {c.name}")
    assert not missing, f"C sources missing from [tool.setuptools.package-data] in pyproject.toml: {missing}"
    assert len(list(src.rglob("*.c"))) >= 5
