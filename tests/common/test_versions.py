"""``chromaflow versions``: each task's versions.yml, read from metadata, equals what importing each package reports.

The modules used to write ``python3 -c 'import torch; print(torch.__version__)'`` per package; the reference here is
that same import, so a metadata read that drifts from the module's ``__version__`` (a local build label, a renamed
distribution) fails.
"""

from __future__ import annotations

import importlib
import re


from helpers.cli import assert_one_line_error, chromaflow
from helpers.environment import ROOT

#: distribution name -> (module to import, attribute path of its version) as the modules' heredocs read them
IMPORTED = {
    "torch": ("torch", "__version__"),
    "lightning": ("lightning", "__version__"),
    "pysam": ("pysam", "__version__"),
    "pyBigWig": ("pyBigWig", "__version__"),
    "matplotlib": ("matplotlib", "__version__"),
    "scikit-learn": ("sklearn", "__version__"),
    "h5py": ("h5py", "__version__"),
    "numpy": ("numpy", "__version__"),
    "hdf5": ("h5py", "version.hdf5_version"),
    "MOODS-python": ("MOODS", None),
    "pyjaspar": ("pyjaspar", None),
    "igv-reports": ("igv_reports", "__version__"),
    "captum": ("captum", "__version__"),
    "modisco-lite": ("modiscolite", "__version__"),
    "memelite": ("memelite", "__version__"),
    "numba": ("numba", "__version__"),
}


def _imported_version(package: str) -> str | None:
    module, attr = IMPORTED[package]
    value = importlib.import_module(module)
    if attr is None:
        return None
    for part in attr.split("."):
        value = getattr(value, part)
    return str(value)


def test_every_package_the_modules_report_equals_its_imported_version():
    named = sorted(
        {
            p
            for f in ROOT.glob("modules/local/*/main.nf")
            for m in re.finditer(r'chromaflow versions "\$\{task\.process\}"([^>]*)>', f.read_text())
            for p in m.group(1).split()
        }
    )
    assert set(named) <= set(IMPORTED), named
    assert "torch" in named and "hdf5" in named
    proc = chromaflow("versions", "SOME:PROCESS", *named, check=True)
    lines = proc.stdout.splitlines()
    assert lines[0] == '"SOME:PROCESS":'
    from chromaflow import __version__

    assert lines[1] == f"    chromaflow: {__version__}"
    got = dict(ln.strip().split(": ", 1) for ln in lines[2:])
    assert list(got) == named
    for package in named:
        want = _imported_version(package)
        if want is not None:
            assert got[package] == want, package
        else:  # no __version__ attribute: the distribution's metadata is the only version there is
            assert re.fullmatch(r"\d+(\.\d+)+\S*", got[package]), (package, got[package])


def test_every_module_writes_its_versions_without_importing_packages():
    for f in sorted(ROOT.glob("modules/local/*/main.nf")):
        text = f.read_text()
        script = text.split("script:", 1)[1].split("stub:", 1)[0]
        if f.parent.name == "multiqc":  # runs MultiQC, not chromaflow: its own --version, as nf-core's module does
            assert "multiqc: \\$(multiqc --version" in script and "chromaflow" not in script, f
            continue
        assert 'chromaflow versions "${task.process}"' in script, f
        assert "print(" not in script.split("chromaflow versions", 1)[1], f


def test_a_missing_package_is_one_line():
    proc = chromaflow("versions", "P", "torch", "no-such-distribution")
    assert_one_line_error(proc, "versions", "'no-such-distribution' is not installed")
    assert proc.stdout == ""
