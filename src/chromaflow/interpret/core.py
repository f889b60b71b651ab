"""The core of ``chromaflow attribute`` (its command: cli_attribute.py): per-base contribution scores of a
Predmoter-compatible model for regions (docs/interpret.md).

Geometry of a region (centre c: the narrowPeak summit or the midpoint): the model input is the genome [c − L // 2, c −
L // 2 + L) (L: the checkpoint's ``seq_len``, or ``--context``, shorter and cheaper; positions outside the record are
padding, as predict pads a record's ends), the reported window the W positions [c − W // 2, c − W // 2 + W)
(``--window``, W <= L), and the target the predicted coverage summed over the region's own positions inside the input.
Inputs are checked in full (regions against the genome, the dataset against the model) before the model runs; the
outputs are written atomically, only when every region succeeded.

Output (``--out``, HDF5, format ``chromaflow-contributions/1``): ``onehot`` and ``hypothetical`` (N x 4 x W float32,
columns **A, C, G, T**: the genome h5's C, A, T, G reordered), ``observed`` (N x W: the observed bases'
contributions), ``regions/`` (chrom, start, end, name, centre, window_start, target, baseline_target (ig),
ism_pearson: the Pearson correlation of the region's observed contributions with ISM's, NaN where ISM was not run)
and attributes (method, dataset, strand, window, steps, model and its SHA-256, genome). ``--bigwig``: the observed
contributions per base (overlapping windows: their mean).
"""

from __future__ import annotations

import os
import time
import zipfile
from dataclasses import dataclass

import numpy as np

from ..utils.errors import ChromaflowError
from ..utils.metrics import StageMetrics
from ..utils.outputs import atomic_outputs, check_outputs
from ..utils.progress import Progress
from .contributions import FORMAT
from .methods import DEFAULT_STEPS, METHODS, STRANDS, observed
from .regions import Region, check_against, read_regions, top_regions

#: default reported window (bp): about one accessible region and its flanks
DEFAULT_WINDOW = 1000
#: model rows per call when --batch-size is auto (a gradient pass holds the activations of every row)
AUTO_BATCH = 8
#: genome h5 column order C, A, T, G -> the output's A, C, G, T
ACGT = [1, 0, 3, 2]


@dataclass
class AttributeOptions:
    """What ``attribute`` explains and where its outputs go: the command's options, one field each. :meth:`validate`
    checks them once (one line naming the option); :func:`run` calls it, so a library caller gets the same checks."""

    model: str
    regions: str
    dataset: str
    out: str
    fasta: str | None = None
    h5: str | None = None
    strand: str = "avg"
    method: str = "ig"
    window: int = DEFAULT_WINDOW
    steps: int = DEFAULT_STEPS
    ism_regions: int = 0
    top: int = 0
    context: int | None = None
    bigwig: str | None = None
    batch_size: int | str = "auto"
    device: str = "auto"
    precision: str = "fp32"
    threads: int | None = None
    metrics: str | None = None
    force: bool = False

    def validate(self) -> None:
        """The options' own rules and the inputs' existence."""
        from ..model.options import check_batch_size, check_device, check_precision

        if (self.fasta is None) == (self.h5 is None):
            raise ChromaflowError("give exactly one of --fasta and --h5 (the genome)")
        if self.method not in METHODS:
            raise ChromaflowError(f"--method {self.method!r}: expected one of {', '.join(METHODS)}")
        if self.strand not in STRANDS:
            raise ChromaflowError(f"--strand {self.strand!r}: expected one of {', '.join(STRANDS)}")
        if self.window < 1:
            raise ChromaflowError(f"--window must be >= 1, got {self.window}")
        if self.steps < 2:
            raise ChromaflowError(f"--steps must be >= 2, got {self.steps}")
        if self.ism_regions < 0:
            raise ChromaflowError(f"--ism-regions must be >= 0, got {self.ism_regions}")
        if self.top < 0:
            raise ChromaflowError(f"--top must be >= 0, got {self.top}")
        if self.context is not None and self.context < self.window:
            raise ChromaflowError(f"--context {self.context}: shorter than --window {self.window}")
        if self.threads is not None and self.threads < 1:
            raise ChromaflowError(f"--threads must be >= 1, got {self.threads}")
        check_device(self.device)
        check_precision(self.precision)
        check_batch_size(self.batch_size)
        for opt, path in (
            ("--fasta", self.fasta),
            ("--h5", self.h5),
            ("--model", self.model),
            ("--regions", self.regions),
        ):
            if path is not None and not os.path.isfile(path):
                raise ChromaflowError(f"{path}: {opt} does not exist or is not a file")
        if not zipfile.is_zipfile(self.model):
            raise ChromaflowError(f"{self.model}: not a PyTorch zip checkpoint (no zip archive)")

    @property
    def bigwig_path(self) -> str | None:
        """The bigWig file: ``--bigwig`` itself when it ends in .bw/.bigWig, else PREFIX.bw."""
        if self.bigwig is None:
            return None
        return self.bigwig if self.bigwig.lower().endswith((".bw", ".bigwig")) else self.bigwig + ".bw"


@dataclass
class Result:
    """One region's scores: hypothetical (W, 4) and one-hot (W, 4), genome column order; targets; ISM agreement."""

    hyp: np.ndarray
    onehot: np.ndarray
    window_start: int
    target: float
    baseline: float
    ism_pearson: float


def run(o: AttributeOptions) -> int:
    """Attribute every region of ``o.regions`` and write the outputs; returns the exit status (0)."""
    o.validate()
    check_outputs(
        [("--out", o.out), ("--bigwig", o.bigwig_path), ("--metrics", o.metrics)],
        [("--model", o.model), ("--regions", o.regions), ("--fasta", o.fasta), ("--h5", o.h5)],
    )
    if not o.force:
        for path in (o.out, o.bigwig_path):
            if path and os.path.exists(path):
                raise ChromaflowError(f"{path}: output exists (use --force to overwrite)")
    from .genome import Genome

    regions = read_regions(o.regions)
    genome = Genome(o.fasta, o.h5)
    check_against(regions, genome.lengths, o.regions, genome.path)
    regions = top_regions(regions, o.top)
    with StageMetrics("attribute", o.metrics, method=o.method, strand=o.strand, window=o.window) as metrics:
        results, info = _attribute_all(o, regions, genome)
        _write(o, regions, results, info, genome.lengths)
        metrics.set(regions=len(regions), **info)
    return 0


def _setup(o: AttributeOptions):
    """The checkpoint, its model on the chosen device, the target's dataset column, L and rows per call."""
    import torch

    from ..model.checkpoint import build_model, load_checkpoint
    from ..predict.executors import autocast_dtype, bf16_supported, resolve_device
    from ..utils.cli_options import resolve_threads

    torch.set_num_threads(resolve_threads(o.threads))
    ckpt = load_checkpoint(o.model)
    datasets = list(ckpt.config.datasets)
    if o.dataset not in datasets:
        raise ChromaflowError(f"{o.model}: the model has no dataset {o.dataset!r} (it predicts {', '.join(datasets)})")
    L = ckpt.config.seq_len
    if o.context is not None:
        if o.context > L:
            raise ChromaflowError(
                f"--context {o.context}: longer than the model's input length {L} ({o.model} seq_len)"
            )
        L = o.context
    if o.window > L:
        raise ChromaflowError(f"--window {o.window}: longer than the model's input length {L} ({o.model} seq_len)")
    device = resolve_device(o.device)
    precision = o.precision if o.precision != "bf16" or bf16_supported(device) else "fp32"
    model = build_model(ckpt).to(device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    if L != ckpt.config.seq_len:  # the layers must give back the shorter length: one line now, not per region
        with torch.no_grad():
            try:
                model(torch.zeros((1, L, 4), device=device))
            except ChromaflowError:
                raise ChromaflowError(
                    f"--context {L}: the model's layers do not give back {L} bases (try a multiple of "
                    f"{_stride(ckpt.config)})"
                ) from None
    batch = AUTO_BATCH if o.batch_size == "auto" else int(o.batch_size)
    return ckpt, model, datasets.index(o.dataset), L, device, autocast_dtype(precision), batch, precision


def _attribute_all(o: AttributeOptions, regions: list[Region], genome) -> tuple[list[Result], dict]:
    """Every region's :class:`Result` (file order) and the metrics' figures."""
    import torch

    from ..predict.feed import ONEHOT_LUT
    from .methods import Target, integrated_gradients, ism

    ckpt, model, d, L, device, amp, batch, precision = _setup(o)
    target = Target(model, d, o.strand, amp)
    by_chrom: dict[str, list[int]] = {}
    for k, r in enumerate(regions):
        by_chrom.setdefault(r.chrom, []).append(k)
    results: list[Result | None] = [None] * len(regions)
    bar = Progress(len(regions), "attribute", unit=" reg")
    t0 = time.perf_counter()
    ism_s = 0.0
    for name, codes in genome.records(set(by_chrom)):
        for k in by_chrom[name]:
            r = regions[k]
            s = r.centre - L // 2
            window = _window(codes, s, L)
            x = torch.from_numpy(ONEHOT_LUT[window]).to(device).unsqueeze(0)
            mask = torch.zeros((1, L), dtype=torch.float32, device=device)
            mask[0, max(r.start, s) - s : min(r.end, s + L) - s] = 1.0
            lo = L // 2 - o.window // 2
            hi = lo + o.window
            base = float("nan")
            if o.method == "ism":
                hyp, tgt = ism(target, x, mask, lo, hi, batch)
            else:
                hyp, tgt, base = integrated_gradients(target, x, mask, lo, hi, o.steps, batch)
            onehot = x[0, lo:hi].cpu().numpy().astype(np.float64)
            agree = float("nan")
            if o.method == "ig" and k < o.ism_regions:
                t1 = time.perf_counter()
                ref, _ = ism(target, x, mask, lo, hi, batch)
                ism_s += time.perf_counter() - t1
                agree = _pearson(observed(onehot, hyp), observed(onehot, ref))
            results[k] = Result(hyp, onehot, s + lo, tgt, base, agree)
            bar.update(1)
    bar.close()
    loop_s = time.perf_counter() - t0
    info = {
        "model_sha256": ckpt.sha256,
        "model_type": ckpt.config.model_type,
        "seq_len": L,
        "dataset": o.dataset,
        "batch_size": batch,
        "precision": precision,
        "device": str(device),
        "loop_s": loop_s,
        "ism_check_s": ism_s,
        "bp_per_s": (len(regions) * o.window / (loop_s - ism_s)) if loop_s > ism_s else None,
    }
    return [r for r in results if r is not None], info


def _stride(cfg) -> int:
    """The length a model input must be a multiple of: the CNN's total down-sampling (step ** layers)."""
    return int(getattr(cfg, "step", 1) or 1) ** int(getattr(cfg, "cnn_layers", 0) or 0)


def _window(codes: np.ndarray, s: int, L: int) -> np.ndarray:
    """(L,) uint8 codes of the genome [s, s + L); 0 (padding) outside the record."""
    out = np.zeros(L, dtype=np.uint8)
    lo, hi = max(0, s), min(len(codes), s + L)
    if hi > lo:
        out[lo - s : hi - s] = codes[lo:hi]
    return out


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson's r of two vectors; NaN where either is constant."""
    a, b = a - a.mean(), b - b.mean()
    den = float(np.sqrt((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / den) if den > 0 else float("nan")


def _write(o: AttributeOptions, regions: list[Region], results: list[Result], info: dict, lengths: dict) -> None:
    """The contributions h5 and, with --bigwig, the observed contributions' bigWig (atomically, together)."""
    with atomic_outputs([o.out, o.bigwig_path], force=o.force) as (h5_tmp, bw_tmp):
        _write_h5(str(h5_tmp), o, regions, results, info)
        if bw_tmp is not None:
            _write_bigwig(str(bw_tmp), regions, results, lengths)


def _write_h5(path: str, o: AttributeOptions, regions: list[Region], results: list[Result], info: dict) -> None:
    """The contributions h5 (module docstring); no time stamps, so the same run gives the same bytes."""
    import h5py

    hyp = np.stack([r.hyp[:, ACGT].T for r in results]).astype(np.float32)
    onehot = np.stack([r.onehot[:, ACGT].T for r in results]).astype(np.float32)
    attrs = {
        "format": FORMAT,
        "method": o.method,
        "dataset": o.dataset,
        "strand": o.strand,
        "window": o.window,
        "steps": o.steps if o.method == "ig" else 0,
        "model": os.path.basename(o.model),
        "model_sha256": info["model_sha256"],
        "genome": os.path.basename(o.fasta or o.h5 or ""),
        "columns": "A,C,G,T",
        "baseline": "N (0.25 each)",
    }
    text = {"chrom": [r.chrom for r in regions], "name": [r.name for r in regions]}
    ints = {
        "start": [r.start for r in regions],
        "end": [r.end for r in regions],
        "centre": [r.centre for r in regions],
        "window_start": [x.window_start for x in results],
    }
    floats = {
        "target": [x.target for x in results],
        "baseline_target": [x.baseline for x in results],
        "ism_pearson": [x.ism_pearson for x in results],
    }
    with h5py.File(path, "w", track_order=True) as f:
        f.attrs.update(attrs)
        for name, arr in (("onehot", onehot), ("hypothetical", hyp), ("observed", observed(onehot, hyp))):
            f.create_dataset(name, data=arr, compression="gzip", compression_opts=4, shuffle=True, track_times=False)
        g = f.create_group("regions")
        for key, vals in text.items():
            g.create_dataset(key, data=np.array(vals, dtype=object), dtype=h5py.string_dtype(), track_times=False)
        for key, ivals in ints.items():
            g.create_dataset(key, data=np.asarray(ivals, dtype=np.int64), track_times=False)
        for key, fvals in floats.items():
            g.create_dataset(key, data=np.asarray(fvals, dtype=np.float64), track_times=False)


def _write_bigwig(path: str, regions: list[Region], results: list[Result], lengths: dict) -> None:
    """Per base the observed contribution of the windows that cover it (their mean), records in genome order."""
    import pyBigWig

    per: dict[str, list[tuple[int, np.ndarray]]] = {}
    for r, x in zip(regions, results):
        per.setdefault(r.chrom, []).append((x.window_start, observed(x.onehot, x.hyp)))
    bw = pyBigWig.open(path, "w")
    try:
        bw.addHeader([(c, n) for c, n in lengths.items()], maxZooms=4)
        for chrom, n in lengths.items():
            if chrom not in per:
                continue
            lo = max(0, min(s for s, _ in per[chrom]))
            hi = min(n, max(s + len(v) for s, v in per[chrom]))
            total, count = np.zeros(hi - lo), np.zeros(hi - lo)
            for s, v in per[chrom]:
                a, b = max(s, 0), min(s + len(v), n)
                total[a - lo : b - lo] += v[a - s : b - s]
                count[a - lo : b - lo] += 1
            for a, b in _runs(count > 0):
                bw.addEntries(chrom, lo + a, values=(total[a:b] / count[a:b]).tolist(), span=1, step=1)
    finally:
        bw.close()


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) runs of True in ``flags``."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], flags.astype(np.int8), [0]])))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))
