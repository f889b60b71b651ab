"""Same bytes on every CPU: ``chromaflow bigwig`` run under other numeric kernels of the same libraries.

Each variant is a subprocess with an environment that makes numpy/OpenBLAS pick the kernels another machine
would get: ``OPENBLAS_CORETYPE`` (Haswell = AVX2-only machines, Sandybridge = AVX, SkylakeX where the CPU has
AVX-512) and ``NPY_DISABLE_CPU_FEATURES`` (numpy's AVX-512 / AVX2 dispatch turned off). Every variant must
write byte-identical bigWig and bedGraph files. Predmoter's arithmetic (``--smoothing numpy``) is run too: it
may round exact .5 ties differently per kernel (FORMATS.md §5.4; e.g. Chrom2:58621 of pred_data_1's
h3k4me3 at w = 150 under Haswell), but it must differ from the exact default only at ties.
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from bigwig_helpers import bg_intervals, bg_text, compare_with_ties, smoothing_ties

pytestmark = pytest.mark.reference

if platform.machine() not in ("x86_64", "AMD64"):
    pytest.skip("the kernel variants are x86-64 ones", allow_module_level=True)


def _features() -> dict[str, bool]:
    from numpy._core._multiarray_umath import __cpu_features__

    return dict(__cpu_features__)


def variants() -> list[tuple[str, dict[str, str]]]:
    f = _features()
    out = [("default", {}), ("openblas-Haswell", {"OPENBLAS_CORETYPE": "Haswell"}),
           ("openblas-Sandybridge", {"OPENBLAS_CORETYPE": "Sandybridge"})]
    if f.get("AVX512F"):
        out.append(("openblas-SkylakeX", {"OPENBLAS_CORETYPE": "SkylakeX"}))
    # numpy >= 2.4 groups its dispatch targets (X86_V4 = AVX-512, X86_V3 = AVX2/FMA); older numpy names them
    for names in (["AVX512_ICL", "X86_V4"], ["AVX512_ICL", "X86_V4", "X86_V3"],
                  ["AVX512_ICL", "AVX512_SKX", "AVX512F"], ["AVX512_ICL", "AVX512_SKX", "AVX512F", "AVX2", "FMA3"]):
        have = [n for n in names if f.get(n)]
        if have and len(have) == len([n for n in names if n in f]):
            out.append(("numpy-no-" + "-".join(have), {"NPY_DISABLE_CPU_FEATURES": " ".join(have)}))
    return out


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES")}
    env.update(extra)
    return env


def _effective(extra: dict[str, str]) -> tuple[frozenset, str | None]:
    """What the child's numpy runs: (the dispatch features it has turned off, the OpenBLAS core type or None
    when threadpoolctl cannot tell)."""
    code = ("import numpy, io, contextlib\n"
            "from numpy._core._multiarray_umath import __cpu_features__ as f\n"
            "buf = io.StringIO()\n"
            "with contextlib.redirect_stdout(buf):\n"
            "    numpy.show_runtime()\n"
            "arch = [l.split(':')[1].strip(\" ',\") for l in buf.getvalue().splitlines() if \"'architecture'\" in l]\n"
            "print(' '.join(sorted(k for k, v in f.items() if not v)))\n"
            "print(arch[0] if arch else '')\n")
    off, arch = subprocess.run([sys.executable, "-c", code], env=_env(extra), capture_output=True, text=True,
                               check=True).stdout.split("\n")[:2]
    return frozenset(off.split()), arch or None


@pytest.fixture(scope="module")
def inputs(reference_dir, repo_root, tmp_path_factory):
    """pred_data_1 (12 ties at w = 150) and a generated file with ~3 bp runs (thousands of ties at w = 10)."""
    d = tmp_path_factory.mktemp("kernels")
    synth = d / "synth_predictions.h5"
    subprocess.run([sys.executable, str(repo_root / "benchmarks" / "bigwig" / "synth_predictions.py"), "--mbp", "0.3",
                    "--mode", "realistic", "--seed", "5", "--chromosomes", "2", "--pool", "8", "--out", str(synth)],
                   check=True, capture_output=True)
    return [(reference_dir / "predmoter" / "pred_data_1_predictions.h5", 150), (synth, 10)]


def _run(pred: Path, w: int, out: Path, extra: dict[str, str]) -> None:
    out.mkdir(parents=True)
    base = [sys.executable, "-m", "chromaflow", "bigwig", "--predictions", str(pred), "--outdir", str(out),
            "--basename", "k", "--no-browser-files", "--threads", "2"]
    for args in (["--format", "bw", "--window-size", str(w)], ["--format", "bg", "--window-size", str(w)],
                 ["--format", "bg", "--strand", "all"]):
        proc = subprocess.run(base + args, env=_env(extra), capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    numpy_dir = out / "numpy"
    numpy_dir.mkdir()
    proc = subprocess.run(base[:7] + [str(numpy_dir)] + base[8:] + ["--format", "bg", "--window-size", str(w),
                                                                    "--smoothing", "numpy"],
                          env=_env(extra), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_identical_bytes_under_every_kernel(inputs, tmp_path):
    base = _effective({})
    vs = [("default", {})]
    changed = 0
    for name, extra in variants()[1:]:  # keep the variants that are in effect in a child process
        off, arch = _effective(extra)
        if "NPY_DISABLE_CPU_FEATURES" in extra:
            if not set(extra["NPY_DISABLE_CPU_FEATURES"].split()) <= off:
                continue  # names this numpy cannot turn off (e.g. pre-2.4 names on numpy 2.4)
        elif arch is not None:
            assert arch == extra["OPENBLAS_CORETYPE"], (name, arch)
        vs.append((name, extra))
        changed += (off, arch) != base
    if _features().get("AVX2"):
        assert any("NPY_DISABLE_CPU_FEATURES" in e for _, e in vs), "no numpy SIMD variant could be applied"
    assert changed >= 2  # not vacuous: at least two variants run other kernels than the default
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
