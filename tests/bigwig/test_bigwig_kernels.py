"""Same bytes on every CPU: ``chromaflow bigwig`` run under other numeric kernels of the same libraries.

Each variant is a subprocess with an environment that makes numpy/OpenBLAS pick the kernels another machine
would get: ``OPENBLAS_CORETYPE`` (Haswell = AVX2-only machines, Sandybridge = AVX, SkylakeX where the CPU has
AVX-512) and ``NPY_DISABLE_CPU_FEATURES`` (numpy's AVX-512 / AVX2 dispatch turned off). Every variant must
write byte-identical bigWig and bedGraph files. Predmoter's arithmetic (``--smoothing numpy``) is run too: it
may round exact .5 ties differently per kernel (FORMATS.md §5.4; e.g. Chrom2:58621 of pred_data_1's
h3k4me3 at w = 150 under Haswell), but it must differ from the exact default only at ties.
"""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import kernel_variants
from helpers.bigwig_helpers import bg_intervals, bg_text, compare_with_ties, smoothing_ties

pytestmark = pytest.mark.reference

if platform.machine() not in ("x86_64", "AMD64"):
    pytest.skip("the kernel variants are x86-64 ones", allow_module_level=True)


@pytest.fixture(scope="module")
def inputs(reference_dir, repo_root, tmp_path_factory):
    """pred_data_1 (12 ties at w = 150) and a generated file with ~3 bp runs (thousands of ties at w = 10)."""
    d = tmp_path_factory.mktemp("kernels")
    synth = d / "synth_predictions.h5"
    subprocess.run(
        [
            sys.executable,
            str(repo_root / "benchmarks" / "harness" / "synth_predictions.py"),
            "--mbp",
            "0.3",
            "--mode",
            "realistic",
            "--seed",
            "5",
            "--chromosomes",
            "2",
            "--pool",
            "8",
            "--out",
            str(synth),
        ],
        check=True,
        capture_output=True,
    )
    return [(reference_dir / "predmoter" / "pred_data_1_predictions.h5", 150), (synth, 10)]


def _run(pred: Path, w: int, out: Path, extra: dict[str, str]) -> None:
    out.mkdir(parents=True)
    base = [
        sys.executable,
        "-m",
        "chromaflow",
        "bigwig",
        "--predictions",
        str(pred),
        "--outdir",
        str(out),
        "--basename",
        "k",
        "--no-browser-files",
        "--threads",
        "2",
    ]
    for args in (
        ["--format", "bw", "--window-size", str(w)],
        ["--format", "bg", "--window-size", str(w)],
        ["--format", "bg", "--strand", "all"],
    ):
        proc = subprocess.run(base + args, env=kernel_variants.env(extra), capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    numpy_dir = out / "numpy"
    numpy_dir.mkdir()
    proc = subprocess.run(
        base[:7] + [str(numpy_dir)] + base[8:] + ["--format", "bg", "--window-size", str(w), "--smoothing", "numpy"],
        env=kernel_variants.env(extra),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr


def test_identical_bytes_under_every_kernel(inputs, tmp_path):
    vs = kernel_variants.applied()
    numpy_outputs: dict[str, set] = {}
    for k, (pred, w) in enumerate(inputs):
        files = None
        for name, extra in vs:
            out = tmp_path / f"{k}-{name}"
            _run(pred, w, out, extra)
            got = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()}
            assert len(got) == 2 * 1 + 2 * 1 + 2 * 3  # 2 datasets x (bw, bg, 3 strands bg)
            if files is None:
                files = got
            else:
                assert got.keys() == files.keys()
                for fn in files:
                    assert got[fn] == files[fn], f"{fn} differs under {name} ({extra})"
            # Predmoter's arithmetic: tie-only differences from the exact default, whatever the kernel
            for i, ds in enumerate(("atacseq", "h3k4me3")):
                fn = f"k_{ds}_avg_strand_ws={w}.bg.gz"
                text = bg_text(out / "numpy" / fn)
                numpy_outputs.setdefault(f"{k}:{fn}", set()).add(text)
                compare_with_ties(bg_intervals(text), bg_intervals(bg_text(out / fn)), smoothing_ties(pred, i, w))
    # (on the AVX-512 machine this was written on, Haswell/Sandybridge flip pred_data_1 h3k4me3 Chrom2:58621)
    print({k: len(v) for k, v in numpy_outputs.items()})
