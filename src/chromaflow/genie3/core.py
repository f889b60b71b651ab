"""GENIE3 driver: options, per-target seeding, target loop over an engine, threads."""
from __future__ import annotations

import math
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

import numpy as np

from ..common import ChromaflowError, Progress

ENGINES = ("fast", "sklearn")
METHODS = ("RF", "ET")


@dataclass(frozen=True)
class Options:
    tree_method: str = "RF"
    max_features: str = "sqrt"
    n_trees: int = 1000
    seed: int = 0
    engine: str = "fast"

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


def target_seed(seed: int, gene_index: int) -> int:
    """64-bit seed of one target, from (run seed, target's 0-based index in the expression file).

    Independent of threads, chunking and of which other targets run."""
    ss = np.random.SeedSequence([int(seed) & 0xFFFFFFFFFFFFFFFF, int(gene_index), 0x6E3])
    return int(ss.generate_state(1, dtype=np.uint64)[0])


def compute_weights(values: np.ndarray, genes: list[str], reg_idx: np.ndarray, tgt_idx: np.ndarray,
                    opts: Options, threads: int, warn=None) -> tuple[np.ndarray, dict]:
    """Weight matrix W (len(reg_idx) x len(tgt_idx), float64): W[r, t] = importance of regulator r for
    target t; self-links are 0. ``values`` is genes x samples float32 (not copied per target)."""
    warn = warn or (lambda msg: print(f"chromaflow genie3: warning: {msg}", file=sys.stderr))
    R, T = len(reg_idx), len(tgt_idx)
    n = values.shape[1]
    W = np.zeros((R, T), dtype=np.float64)
    info = {"constant_targets": [], "engine": opts.engine}

    lib = order = pos = feat_values = None
    if opts.engine == "fast":
        from . import fast
        lib = fast.load_kernel()  # KernelUnavailable handled by the caller
        values = np.ascontiguousarray(values, dtype=np.float32)  # no copy when already so
        # feature tables cover the regulators only (row r = regulator r); no copy when regulators = all genes
        identity = len(reg_idx) == values.shape[0] and np.array_equal(reg_idx, np.arange(values.shape[0]))
        feat_values = values if identity else np.ascontiguousarray(values[reg_idx])
        if opts.tree_method == "RF":
            order, pos = fast.sort_orders(feat_values)

    def one(t: int):
        j = int(tgt_idx[t])
        x = values[j].astype(np.float64)
        sd = float(np.std(x))
        keep = [r for r in range(R) if int(reg_idx[r]) != j]
        if not keep:
            return t, None, None
        inputs = reg_idx[keep]
        if sd == 0.0 or not np.isfinite(sd):
            return t, keep, "constant"
        y = x / sd
        K = resolve_k(opts.max_features, len(inputs))
        s64 = target_seed(opts.seed, j)
        if opts.engine == "fast":
            imp = fast.target_importances(lib, feat_values, order, pos, np.asarray(keep, dtype=np.int32), y,
                                          opts.n_trees, K, opts.tree_method, s64)
        else:
            from . import skengine
            X_in = np.ascontiguousarray(values[inputs].T)  # one n x |inputs| float32 copy per target in flight
            imp = skengine.target_importances(X_in, y, opts.n_trees, K, opts.tree_method,
                                              random_state=s64 % (2**32), n_jobs=threads)
        return t, keep, imp

    with Progress(T, "genie3", unit=" targets") as prog:
        if opts.engine == "fast" and threads > 1 and T > 1:
            with ThreadPoolExecutor(max_workers=threads) as ex:
                results = ex.map(one, range(T))
                for t, keep, imp in results:
                    _store(W, t, keep, imp, genes, tgt_idx, info, warn)
                    prog.update(1)
        else:
            for t in range(T):
                _, keep, imp = one(t)
                _store(W, t, keep, imp, genes, tgt_idx, info, warn)
                prog.update(1)
    if n < 10:
        warn(f"only {n} samples: importances will be very noisy")
    return W, info


def _store(W, t, keep, imp, genes, tgt_idx, info, warn):
    if keep is None:
        return
    if isinstance(imp, str):  # constant target
        g = genes[int(tgt_idx[t])]
        info["constant_targets"].append(g)
        if len(info["constant_targets"]) <= 10:
            warn(f"target gene {g!r} is constant across samples: its incoming importances are all 0"
                 + (" (further constant targets are counted in the metrics, not listed)"
                    if len(info["constant_targets"]) == 10 else ""))
        return
    W[keep, t] = imp
