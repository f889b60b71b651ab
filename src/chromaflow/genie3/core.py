"""GENIE3 driver: options, per-target seeding, target loop over an engine, threads."""
from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass

import numpy as np

from ..common import ChromaflowError, Progress

ENGINES = ("fast", "sklearn")
METHODS = ("RF", "ET")
#: unnormalised: the reference GENIE3's (and the paper's) importance, the mean over trees of the summed
#: variance decrease / n; tree-normalised: scikit-learn's feature_importances_ (as arboreto), each tree's
#: importances divided by their sum before averaging
IMPORTANCES = ("unnormalised", "tree-normalised")


@dataclass(frozen=True)
class Options:
    tree_method: str = "RF"
    max_features: str = "sqrt"
    n_trees: int = 1000
    seed: int = 0
    engine: str = "fast"
    importance: str = "unnormalised"

    def as_dict(self) -> dict:
        return asdict(self)


def parse_max_features(value: str) -> str:
    v = str(value).strip().lower()
    if v in ("sqrt", "all"):
        return v
    try:
        k = int(v)
    except ValueError:
        raise ChromaflowError(f"--max-features must be sqrt, all or a positive integer (got {value!r})") from None
    if k < 1:
        raise ChromaflowError(f"--max-features must be a positive integer (got {value!r})")
    return str(k)


def resolve_k(max_features: str, n_inputs: int) -> int:
    """Features tried per split: sqrt -> floor(sqrt(#inputs)) (as the Python reference), all -> #inputs,
    an integer -> min(int, #inputs). Always >= 1."""
    if max_features == "sqrt":
        k = int(math.floor(math.sqrt(n_inputs)))
    elif max_features == "all":
        k = n_inputs
    else:
        k = min(int(max_features), n_inputs)
    return max(1, k)


def target_seeds(seed: int, gene_indices) -> np.ndarray:
    """64-bit seeds of targets, from (run seed, the target's 0-based index in the expression file): word
    ``index`` of ``numpy.random.SeedSequence([seed, 0x6E3]).generate_state(..., uint64)`` (word i of that stream
    does not depend on how many words are drawn). Independent of threads, chunking and of which other targets run;
    one call for all targets."""
    idx = np.asarray(gene_indices, dtype=np.int64)
    if idx.size == 0:
        return np.zeros(0, dtype=np.uint64)
    ss = np.random.SeedSequence([int(seed) & 0xFFFFFFFFFFFFFFFF, 0x6E3])
    return ss.generate_state(int(idx.max()) + 1, dtype=np.uint64)[idx]


def target_seed(seed: int, gene_index: int) -> int:
    """The seed of one target (see :func:`target_seeds`)."""
    return int(target_seeds(seed, [gene_index])[0])


def compute_weights(values: np.ndarray, genes: list[str], reg_idx: np.ndarray, tgt_idx: np.ndarray,
                    opts: Options, threads: int, warn=None) -> tuple[np.ndarray, dict]:
    """Weight matrix W (len(reg_idx) x len(tgt_idx), float64): W[r, t] = importance of regulator r for
    target t; self-links are 0. ``values`` is genes x samples float32 (not copied per target)."""
    warn = warn or (lambda msg: print(f"chromaflow genie3: warning: {msg}", file=sys.stderr))
    reg_idx = np.asarray(reg_idx, dtype=np.int64)
    tgt_idx = np.asarray(tgt_idx, dtype=np.int64)
    R, T = len(reg_idx), len(tgt_idx)
    n = values.shape[1]
    W = np.zeros((R, T), dtype=np.float64)
    info = {"constant_targets": [], "engine": opts.engine}
    if opts.engine == "fast":
        _fast_weights(values, reg_idx, tgt_idx, opts, threads, W, genes, info, warn)
    else:
        _sklearn_weights(values, reg_idx, tgt_idx, opts, threads, W, genes, info, warn)
    if n < 10:
        warn(f"only {n} samples: importances will be very noisy")
    return W, info


def _fast_weights(values, reg_idx, tgt_idx, opts, threads, W, genes, info, warn) -> None:
    """All targets through the compiled kernel, in blocks of targets (one call per block, the kernel's own
    threads inside a call) so that the progress bar moves."""
    from . import fast

    lib = fast.load_kernel()  # KernelUnavailable handled by the caller
    values = np.ascontiguousarray(values, dtype=np.float32)  # no copy when already so
    R, T = len(reg_idx), len(tgt_idx)
    tables = fast.build_tables(values, reg_idx) if opts.tree_method == "RF" else None
    seeds = target_seeds(opts.seed, tgt_idx)
    k_in = resolve_k(opts.max_features, max(R - 1, 1))   # the target is one of the regulators
    k_out = resolve_k(opts.max_features, R)              # it is not
    block = max(1, min(T, max(256, T // 50)))  # one kernel call per ~2 % of the targets (at least 256)
    with Progress(T, "genie3", unit=" targets") as prog:
        for lo in range(0, T, block):
            hi = min(T, lo + block)
            status = fast.run(lib, values, tables, reg_idx, tgt_idx[lo:hi], seeds[lo:hi], opts.n_trees, k_in,
                              k_out, opts.tree_method, threads, W[:, lo:hi], importance=opts.importance)
            for t in np.flatnonzero(status == 1):
                _note_constant(genes[int(tgt_idx[lo + t])], info, warn)
            prog.update(hi - lo)


def _sklearn_weights(values, reg_idx, tgt_idx, opts, threads, W, genes, info, warn) -> None:
    from . import skengine

    R, T = len(reg_idx), len(tgt_idx)
    with Progress(T, "genie3", unit=" targets") as prog:
        for t in range(T):
            j = int(tgt_idx[t])
            keep = np.flatnonzero(reg_idx != j)
            prog.update(1)
            if keep.size == 0:
                continue
            x = values[j].astype(np.float64)
            sd = float(np.std(x))
            if sd == 0.0 or not np.isfinite(sd):
                _note_constant(genes[j], info, warn)
                continue
            y = x / sd
            K = resolve_k(opts.max_features, int(keep.size))
            X_in = np.ascontiguousarray(values[reg_idx[keep]].T)  # one n x |inputs| float32 copy per target
            W[keep, t] = skengine.target_importances(X_in, y, opts.n_trees, K, opts.tree_method,
                                                     random_state=target_seed(opts.seed, j) % (2**32),
                                                     n_jobs=threads, importance=opts.importance)


def _note_constant(gene: str, info: dict, warn) -> None:
    info["constant_targets"].append(gene)
    k = len(info["constant_targets"])
    if k <= 10:
        warn(f"target gene {gene!r} is constant across samples: its incoming importances are all 0"
             + (" (further constant targets are counted in the metrics, not listed)" if k == 10 else ""))


