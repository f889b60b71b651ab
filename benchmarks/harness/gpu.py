"""The GPU stage's tools (``benchmarks/stages/gpu.py``): its launcher, the device record, NVML utilisation per run,
and the output checks it runs as child processes.

    python -m benchmarks.harness.gpu run [--set KEY=VALUE ...] [benchmarks/run options]   (benchmarks/gpu/run)
    python -m benchmarks.harness.gpu check-cpu FASTA MODEL OUT.h5 --rows K [--threads N]
    python -m benchmarks.harness.gpu deviation A.h5 B.h5
    python -m benchmarks.harness.gpu chunk-bytes A.h5 B.h5
    python -m benchmarks.harness.gpu forward MODEL --batch B --out JSON [--device cuda]

``run`` is the harness's run of the ``gpu`` stage (``--stages gpu``), refused (one line, exit 2) where CUDA is not
available unless ``--quick`` (then the stage runs on the CPU at toy sizes: a check of the stage before device time
is spent); ``--set`` changes one of the stage's sizes (``benchmarks/stages/gpu.py`` FULL/QUICK, e.g.
``--set train_chunks=3600``). It writes the results file under ``--out`` (default ``benchmarks/gpu/results``; with
``--quick`` a temporary folder) and the GPU page, ``RESULTS.md``, beside that folder. The checks print one JSON line.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from .env import ROOT

#: where the GPU stage's results files live (benchmarks/render publishes RESULTS.md beside it)
RESULTS = ROOT / "benchmarks" / "gpu" / "results"
NO_CUDA = (
    "benchmarks/gpu/run: no CUDA device here (torch.cuda.is_available() is False); this benchmark needs an NVIDIA "
    "GPU (--quick runs it on the CPU at toy sizes)"
)


# --------------------------------------------------------------------------------------------------
# the launcher (benchmarks/gpu/run)
# --------------------------------------------------------------------------------------------------
def cuda_available() -> bool | None:
    """Whether torch sees a CUDA device; None where torch is not importable."""
    try:
        import torch
    except ImportError:
        return None
    return bool(torch.cuda.is_available())


def launch(argv: list[str]) -> int:
    """``benchmarks/gpu/run``: the harness's main with ``--stages gpu``, then the GPU page beside the results."""
    ap = argparse.ArgumentParser(
        prog="benchmarks/gpu/run",
        description="The GPU benchmark: benchmarks/run --stages gpu (benchmarks/stages/gpu.py).",
        epilog="Every other option is benchmarks/run's (--cases predict,peer,train,cuda: cuda is the variant stage's "
        "case on the GPU; --workdir, --peers, ...).",
    )
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="one of the stage's sizes")
    ap.add_argument("--quick", action="store_true", help="toy sizes; on the CPU where there is no GPU")
    ap.add_argument("--out", default=None, help="results folder (default benchmarks/gpu/results; --quick: a temp)")
    a, rest = ap.parse_known_args(argv)
    cuda = cuda_available()
    if cuda is None:
        print("benchmarks/gpu/run: torch is not importable (source scripts/env.sh first)", file=sys.stderr)
        return 2
    if not cuda and not a.quick:
        print(NO_CUDA, file=sys.stderr)
        return 2
    from ..stages import gpu as stage
    from .main import main as harness_main

    stage.override(a.set)
    if a.out:
        out = Path(a.out)
    else:  # a quick run's results stay out of the published folder
        out = Path(tempfile.mkdtemp(prefix="gpu-quick-")) / "results" if a.quick else RESULTS
    rc = harness_main(["--stages", "gpu", "--out", str(out), *(["--quick"] if a.quick else []), *rest])
    page = out.parent / "RESULTS.md"
    page.write_text(stage.results_page(out))
    print(f"benchmarks/gpu/run: wrote {page}", file=sys.stderr)
    return rc


# --------------------------------------------------------------------------------------------------
# the device and its utilisation
# --------------------------------------------------------------------------------------------------
def device_record() -> dict:
    """The GPU of this run and its CUDA stack (torch's view), or the CPU dry run's stand-in."""
    import torch

    if not torch.cuda.is_available():
        return {"gpu": "none (CPU dry run)", "torch": torch.__version__, "cuda": None, "cudnn": None}
    props = torch.cuda.get_device_properties(0)
    return {
        "gpu": torch.cuda.get_device_name(0),
        "gpu_memory_bytes": int(props.total_memory),
        "gpu_capability": f"{props.major}.{props.minor}",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
    }


def busy_utilisation(samples: list) -> dict | None:
    """NVML samples (time, utilisation %, memory bytes) of one process's run: the mean over all of them and over the
    busy span (first to last sample above 0 %), the span's length, the largest utilisation and memory."""
    if not samples:
        return None
    utils = [u for _, u, _ in samples]
    busy = [i for i, u in enumerate(utils) if u > 0]
    span = utils[busy[0] : busy[-1] + 1] if busy else []
    return {
        "mean_pct": sum(utils) / len(utils),
        "busy_span_mean_pct": (sum(span) / len(span)) if span else 0.0,
        "busy_span_s": (samples[busy[-1]][0] - samples[busy[0]][0]) if busy else 0.0,
        "max_pct": max(utils),
        "memory_used_max_bytes": max(m for _, _, m in samples),
    }


class GpuWindows:
    """NVML utilisation of CUDA device 0, sampled in the harness's process (outside the timed process tree) by the
    package's sampler (:class:`chromaflow.predict.gpumetrics.NvmlSampler`, the one ``chromaflow predict`` reports
    from inside), cut into one window per run: a contender's ``setup`` opens its run's window just before the
    harness starts it (:meth:`open`), the case's ``per_run`` reads it (:meth:`busy`, :meth:`epochs`). The sampler
    starts with the first window and stops when the process ends; on the CPU nothing is sampled."""

    def __init__(self, cuda: bool, interval_s: float = 0.1):
        self.cuda, self.interval = cuda, interval_s
        self.nvml = None
        self.opened: dict[str, tuple[float, float]] = {}  # run dir -> (perf_counter, unix time) at its start

    def open(self, d: Path, r: int = 0) -> None:
        if self.cuda and self.nvml is None:
            from chromaflow.predict.gpumetrics import NvmlSampler

            self.nvml = NvmlSampler([0], interval_s=self.interval).__enter__()
            atexit.register(self.nvml.__exit__)
        self.opened[str(d)] = (time.perf_counter(), time.time())

    def samples(self, d: Path) -> list:
        """The samples since run ``d``'s window opened."""
        if self.nvml is None or str(d) not in self.opened:
            return []
        t0 = self.opened[str(d)][0]
        return [s for s in list(self.nvml.samples.get(0) or []) if s[0] >= t0]

    def busy(self, d: Path) -> dict | None:
        return busy_utilisation(self.samples(d))

    def epochs(self, d: Path, curve: list[dict]) -> None:
        """Mean utilisation inside each epoch's training part (``train_start_unix``/``train_end_unix`` of our
        metrics), as ``gpu_util_train_pct`` of the epoch."""
        samples = self.samples(d)
        if not samples:
            return
        t0, unix0 = self.opened[str(d)]
        for e in curve:
            if e.get("train_start_unix") is None:
                continue
            a, b = e["train_start_unix"] - unix0 + t0, e["train_end_unix"] - unix0 + t0
            inside = [u for t, u, _ in samples if a <= t <= b]
            e["gpu_util_train_pct"] = sum(inside) / len(inside) if inside else None


# --------------------------------------------------------------------------------------------------
# the output checks (run as child processes of the harness)
# --------------------------------------------------------------------------------------------------
L = 21384


def _rows_of(fasta: Path, rows: list[int]) -> tuple[dict, dict]:
    """The codes and strands of ``rows`` of the assembly, cut by the FASTA feed as predict cuts them."""
    import threading

    from chromaflow.predict.feed import BufferPool, FastaFeed

    wanted = set(rows)
    codes, strands = {}, {}
    pool = BufferPool(4, 64, L)
    for b in FastaFeed(str(fasta), L, 64, pool, reader="thread").batches(threading.Event()):
        for i in range(b.n):
            if b.row0 + i in wanted:
                codes[b.row0 + i], strands[b.row0 + i] = b.codes[i].copy(), int(b.strand[i])
        pool.release(b.slot)
    return codes, strands


def check_rows_on_cpu(fasta: Path, ckpt: Path, gpu_out: Path, rows: list[int], threads: int | None = None) -> dict:
    """fp32 rows of a GPU prediction vs the CPU path (the same rows cut from the FASTA, the model on the CPU): equal
    but at the documented near-ties (``chromaflow.predict.compare``)."""
    import h5py
    import numpy as np
    import torch

    from chromaflow.model.checkpoint import build_model, load_checkpoint
    from chromaflow.predict.compare import compare_arrays, near_ties
    from chromaflow.predict.executors import Encoder, rounded

    codes, strands = _rows_of(fasta, rows)
    torch.set_num_threads(threads or min(8, len(os.sched_getaffinity(0))))
    model = build_model(load_checkpoint(ckpt))
    c = torch.from_numpy(np.stack([codes[r] for r in rows]))
    s = torch.tensor([strands[r] for r in rows], dtype=torch.uint8)
    x, pad = Encoder(torch.device("cpu")).codes(c, s)
    with torch.inference_mode():
        cpu = torch.cat([rounded(model(x[i : i + 4]), pad[i : i + 4]) for i in range(0, len(rows), 4)]).numpy()
    ties = near_ties(model, x.numpy())  # (index in the sample, position, dataset)
    with h5py.File(gpu_out) as f:
        gpu = np.stack([f["prediction/predictions"][r] for r in rows])
    out = compare_arrays(gpu, cpu, ties).as_dict()
    for key in ("allowed", "unexpected"):  # sample index -> row of the assembly
        out[key] = [[rows[t[0]], *t[1:]] for t in out[key]]
    out.update(rows=rows, near_ties_in_sample=len(ties))
    return out


def spaced_rows(out: Path, k: int) -> list[int]:
    """``k`` evenly spaced rows of a predictions file (first and last included)."""
    import h5py

    with h5py.File(out) as f:
        n = f["prediction/predictions"].shape[0]
    k = max(1, min(k, n))
    return sorted({round(i * (n - 1) / max(1, k - 1)) for i in range(k)})


def deviation(a: Path, b: Path) -> dict:
    """Values of ``prediction/predictions`` that differ between two files, and the largest difference."""
    import h5py
    import numpy as np

    with h5py.File(a) as fa, h5py.File(b) as fb:
        pa, pb = fa["prediction/predictions"], fb["prediction/predictions"]
        n = differ = max_abs = 0
        for r in range(0, pa.shape[0], 256):
            d = np.abs(pa[r : r + 256] - pb[r : r + 256])
            n += d.size
            differ += int((d != 0).sum())
            max_abs = max(max_abs, int(d.max()))
    return {"values": n, "differ": differ, "fraction": differ / n if n else None, "max_abs": max_abs}


def chunk_bytes_equal(a: Path, b: Path, samples: int = 64) -> dict:
    """Raw (compressed) chunk bytes of ``prediction/predictions`` in two files, on evenly spaced (row, dataset)
    chunks: equal when both wrote the same values with the same deflate."""
    import h5py

    with h5py.File(a) as fa, h5py.File(b) as fb:
        da, db = fa["prediction/predictions"], fb["prediction/predictions"]
        n, d = da.shape[0], da.shape[2]
        picks = sorted({(round(i * (n - 1) / max(1, samples - 1)), i % d) for i in range(samples)})
        same = sum(da.id.read_direct_chunk((r, 0, k))[1] == db.id.read_direct_chunk((r, 0, k))[1] for r, k in picks)
    return {"chunks": len(picks), "identical": int(same)}


# --------------------------------------------------------------------------------------------------
# the model alone: eager vs cudnn.benchmark vs torch.compile (the stage's opt-in forward case)
# --------------------------------------------------------------------------------------------------
def forward_variants(ckpt: Path, batch: int, device: str = "cuda") -> list[dict]:
    """Forward-only throughput of the model, fp32 and bf16, eager / cudnn.benchmark / torch.compile, each with its
    largest difference to eager fp32."""
    import torch

    from chromaflow.model.checkpoint import build_model, load_checkpoint
    from chromaflow.predict.executors import configure_cuda_exact

    if device == "cuda":
        configure_cuda_exact()
    base = build_model(load_checkpoint(ckpt)).to(device)
    g = torch.Generator(device="cpu").manual_seed(0)
    x = torch.nn.functional.one_hot(torch.randint(0, 4, (batch, L), generator=g), 4).float().to(device)
    with torch.inference_mode():
        ref = base(x).float()
    out = [
        _forward_one(base, x, ref, prec, variant)
        for prec in ("fp32", "bf16")
        for variant in ("eager", "cudnn.benchmark", "torch.compile")
    ]
    torch.backends.cudnn.benchmark = False
    return out


def _forward_one(base, x, ref, prec: str, variant: str, reps: int = 3) -> dict:
    import torch

    torch.backends.cudnn.benchmark = variant == "cudnn.benchmark"
    rec: dict = {"precision": prec, "variant": variant, "batch": int(x.shape[0])}
    dev = x.device.type
    amp = torch.autocast(dev, dtype=torch.bfloat16, enabled=prec == "bf16")
    try:
        model = torch.compile(base) if variant == "torch.compile" else base
        with torch.inference_mode():
            for _ in range(2):  # warm-up (autotuning, compilation)
                with amp:
                    y = model(x)
            _sync(dev)
            t0 = time.perf_counter()
            for _ in range(reps):
                with amp:
                    y = model(x)
            _sync(dev)
        dt = (time.perf_counter() - t0) / reps
        rec.update(
            forward_s=dt,
            mbp_per_s=x.shape[0] * L / dt / 1e6,
            max_abs_vs_eager_fp32=float((y.float() - ref).abs().max()),
        )
    except Exception as exc:  # noqa: BLE001 - a variant that does not work here is recorded, not fatal
        rec["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return rec


def _sync(dev: str) -> None:
    if dev == "cuda":
        import torch

        torch.cuda.synchronize()


# --------------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------------
def _tool(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.harness.gpu")
    sub = ap.add_subparsers(dest="tool", required=True)
    c = sub.add_parser("check-cpu")
    for name in ("fasta", "model", "out"):
        c.add_argument(name, type=Path)
    c.add_argument("--rows", type=int, default=16)
    c.add_argument("--threads", type=int, default=None)
    for name in ("deviation", "chunk-bytes"):
        p = sub.add_parser(name)
        p.add_argument("a", type=Path)
        p.add_argument("b", type=Path)
    f = sub.add_parser("forward")
    f.add_argument("model", type=Path)
    f.add_argument("--batch", type=int, required=True)
    f.add_argument("--out", type=Path, required=True)
    f.add_argument("--device", default="cuda")
    a = ap.parse_args(argv)
    if a.tool == "check-cpu":
        res = check_rows_on_cpu(a.fasta, a.model, a.out, spaced_rows(a.out, a.rows), a.threads)
    elif a.tool == "deviation":
        res = deviation(a.a, a.b)
    elif a.tool == "chunk-bytes":
        res = chunk_bytes_equal(a.a, a.b)
    else:
        res = forward_variants(a.model, a.batch, a.device)
        a.out.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res))
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["run"]:
        return launch(argv[1:])
    return _tool(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
