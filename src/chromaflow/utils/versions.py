"""``chromaflow versions``: a task's ``versions.yml`` (nf-core's layout) without importing the packages it names.

nf-core modules write ``versions.yml`` with one ``python3 -c 'import torch; print(torch.__version__)'`` per
package. Importing torch to read its version costs about 2 CPU-seconds, paid again by every PREDICT, TRAIN,
VARIANT_EFFECT and MAKE_TEST_MODEL task (lightning, scikit-learn, matplotlib cost 0.5-1 s each): as much as a small
prediction itself. The versions are read from the installed distributions' metadata instead
(:func:`importlib.metadata.version`), which gives the same strings for every package the pipeline reports, except:

- ``torch``: its ``__version__`` carries the build's local label (``2.13.0+cu130``, ``2.13.0+cpu``), which the metadata
  of some wheels leave out; it is read from ``torch/version.py`` (a generated file of constants) without importing
  torch;
- ``hdf5``: the HDF5 library h5py was built with (``h5py.version.hdf5_version``), which needs h5py (0.15 s).

Output (the same bytes as the modules' heredocs)::

    "<process>":
        chromaflow: 0.1.0
        torch: 2.13.0+cu130
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import importlib.util
import sys
from pathlib import Path

from .. import __version__
from .errors import ChromaflowError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): the task's process name and the packages to report."""
    p.add_argument("process", help="the task's process name (Nextflow's ${task.process}): the YAML's top key")
    p.add_argument(
        "packages",
        nargs="*",
        metavar="package",
        help="distributions to report after chromaflow (e.g. torch lightning pysam; 'hdf5' = the HDF5 library of h5py)",
    )


def _torch_version() -> str:
    """torch's ``__version__`` from ``torch/version.py``, parsed (not imported: that would import torch)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise importlib.metadata.PackageNotFoundError("torch")
    path = Path(list(spec.submodule_search_locations)[0]) / "version.py"
    try:
        for node in ast.parse(path.read_text()).body:
            target = (
                node.targets[0]
                if isinstance(node, ast.Assign) and len(node.targets) == 1
                else node.target
                if isinstance(node, ast.AnnAssign)
                else None
            )
            if (
                isinstance(node, (ast.Assign, ast.AnnAssign))
                and isinstance(target, ast.Name)
                and target.id == "__version__"
                and isinstance(node.value, ast.Constant)
            ):
                return str(node.value.value)
    except (OSError, SyntaxError):
        pass
    return importlib.metadata.version("torch")


def version_of(package: str) -> str:
    """The installed version of ``package`` (a distribution name, or ``hdf5``)."""
    if package == "torch":
        return _torch_version()
    if package == "hdf5":
        import h5py.version  # the library's version is known only to the compiled module

        return h5py.version.hdf5_version
    return importlib.metadata.version(package)


def run(args: argparse.Namespace) -> int:
    """Run the command: print the ``versions.yml`` of the process (chromaflow, then each package's version);
    ChromaflowError for a package that is not installed. Returns the exit status."""
    lines = [f'"{args.process}":', f"    chromaflow: {__version__}"]
    for package in args.packages:
        try:
            lines.append(f"    {package}: {version_of(package)}")
        except importlib.metadata.PackageNotFoundError:
            raise ChromaflowError(f"package {package!r} is not installed in this environment ({sys.prefix})") from None
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
