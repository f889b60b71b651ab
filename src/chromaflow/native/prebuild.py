"""Compile every C kernel of the package into ``$CHROMAFLOW_CACHE`` now, and fail if one cannot be built.

    python3 -m chromaflow.native.prebuild

The kernels (GENIE3's forest and link-list ranking/printing, fasta2h5's onehot deflate encoder, the bigwig
per-base loops and add-coverage's LZF, add-coverage's BAM counting over pysam's htslib) are normally compiled on
first use. Container images have no compiler at run time, and without the kernels three stages fall back to other
code: bigwig to numpy (same bytes, slower), add-coverage to pysam's reads and an in-memory HDF5 file (same
datasets, slower), fasta2h5's ``--deflate auto`` to libdeflate (same values, other compressed bytes). So the image
recipes run this in a build stage that has gcc and copy the cache into the final image, and the final image runs it
again to prove every kernel loads without a compiler.
"""

from __future__ import annotations

import sys


def main() -> int:
    """Build and load every native kernel (GENIE3, fasta2h5's onehot deflate, bigWig, GENIE3's link list, BAM
    counting), print each library's path; returns 1 (with an error on stderr) if one cannot be built, else 0."""
    from chromaflow.fasta2h5 import deflate as chunkdeflate
    from chromaflow.bigwig import _native
    from chromaflow.coverage import _native as coverage_native
    from chromaflow.genie3 import fast
    from chromaflow.genie3 import links

    built = []
    try:
        built.append(("genie3", fast.load_kernel()._name))
        built.append(("fasta2h5 onehot deflate", chunkdeflate.load_kernel()._name))
    except Exception as exc:  # KernelUnavailable / EngineUnavailable: say which and stop
        print(f"chromaflow.native.prebuild: error: {exc}", file=sys.stderr)
        return 1
    # loaders that fall back quietly (None) instead of raising
    for what, lib, why in (
        ("bigwig", _native.load(), "CHROMAFLOW_BIGWIG_NO_CC=1"),
        (
            "genie3 link list",
            links.links_kernel(),
            "CHROMAFLOW_GENIE3_NO_CC=1, or a locale whose decimal point is not '.'",
        ),
        ("add-coverage BAM counting", coverage_native.load(), "no pysam headers, CHROMAFLOW_COVERAGE_NO_CC=1"),
    ):
        if lib is None:
            print(
                f"chromaflow.native.prebuild: error: the {what} kernel could not be built or loaded (no C compiler, "
                f"{why})",
                file=sys.stderr,
            )
            return 1
        built.append((what, lib._name))
    for what, path in built:
        print(f"chromaflow.native.prebuild: {what}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
