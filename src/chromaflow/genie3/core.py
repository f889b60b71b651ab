"""GENIE3 driver: options, per-target seeding, target loop over an engine, threads."""

from __future__ import annotations

import hashlib
import math
import sys
from dataclasses import asdict, dataclass

import numpy as np

from ..utils.errors import ChromaflowError
from ..utils.progress import Progress

ENGINES = ("fast", "sklearn")
METHODS = ("RF", "ET")
#: unnormalised: the reference GENIE3's (and the paper's) importance, the mean over trees of the summed
#: variance decrease / n; tree-normalised: scikit-learn's feature_importances_ (as arboreto), each tree's
#: importances divided by their sum before averaging
IMPORTANCES = ("unnormalised", "tree-normalised")


@dataclass(frozen=True)
class Options:
    """The options of a GENIE3 run: tree method ('RF' or 'ET'), features per split, trees, seed, engine, importance, and
    the optional prior (its weight and file SHA-256) and repeats."""

    tree_method: str = "RF"
    max_features: str = "sqrt"
    n_trees: int = 1000
    seed: int = 0
    engine: str = "fast"
    importance: str = "unnormalised"
    prior_alpha: float | None = None  # None: no prior
    prior: str | None = None  # the prior file's SHA-256 (parts of one run must agree)
    repeats: int = 1

    def as_dict(self) -> dict:
        """The options; the prior and repeat fields only when used (a plain run's summary is unchanged)."""
        d = asdict(self)
        for k, plain in (("prior_alpha", None), ("prior", None), ("repeats", 1)):
            if d[k] == plain:
                del d[k]
        return d


def parse_max_features(value: str) -> str:
    """``--max-features`` normalised: 'sqrt', 'all' or a positive integer as text (case and blanks ignored);
    ChromaflowError otherwise."""
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


def _seed_key(seed: int) -> bytes:
    return (int(seed) & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")


def target_seeds(seed: int, names) -> np.ndarray:
    """64-bit seeds of targets, from (run seed, the target gene's NAME): the first 8 bytes (little-endian) of
    BLAKE2b(name, key = the seed as 8 little-endian bytes, person ``chromaflow-g3``). Independent of the
    gene's position in the file, of threads, chunking and of which other targets run."""
    key = _seed_key(seed)
    return np.array(
        [
            int.from_bytes(
                hashlib.blake2b(str(g).encode(), digest_size=8, key=key, person=b"chromaflow-g3").digest(), "little"
            )
            for g in names
        ],
        dtype=np.uint64,
    )


def target_seed(seed: int, name: str) -> int:
    """The seed of one target (see :func:`target_seeds`)."""
    return int(target_seeds(seed, [name])[0])


def repeat_seed(seed: int, repeat: int) -> int:
    """Run seed of repeat ``repeat`` (0-based) of ``--repeats``: the run seed itself for repeat 0 (so one repeat
    is the plain run), else BLAKE2b("repeat <r>", key = the seed) as a 64-bit integer."""
    if repeat == 0:
        return int(seed)
    return int.from_bytes(
        hashlib.blake2b(
            f"repeat {repeat}".encode(), digest_size=8, key=_seed_key(seed), person=b"chromaflow-g3r"
        ).digest(),
        "little",
    )


def sample_order(values: np.ndarray, gene_order: np.ndarray) -> np.ndarray:
    """The canonical order of the samples (columns of ``values``): by BLAKE2b of each column's float32 bytes with
    the genes in canonical (name) order, so labels (absent in some layouts, or duplicated) play no part and
    identical columns, the only ties, are interchangeable."""
    gene_order = np.asarray(gene_order, dtype=np.int64)
    keys = [
        hashlib.blake2b(np.ascontiguousarray(values[gene_order, j]).tobytes(), digest_size=16).digest()
        for j in range(values.shape[1])
    ]  # one column at a time: no copy of the matrix
    return np.array(sorted(range(len(keys)), key=lambda j: keys[j]), dtype=np.int64)


def compute_weights(
    values: np.ndarray,
    genes: list[str],
    reg_idx: np.ndarray,
    tgt_idx: np.ndarray,
    opts: Options,
    threads: int,
    warn=None,
    prior=None,
    oob: np.ndarray | None = None,
) -> tuple[np.ndarray, dict]:
    """Weight matrix W (len(reg_idx) x len(tgt_idx), float64): W[r, t] = importance of regulator r for
    target t; self-links are 0. ``values`` is genes x samples float32. ``prior``: a
    :class:`chromaflow.genie3.prior.Prior` (with ``opts.prior_alpha``), or None. ``oob`` (fast engine only): None,
    or a len(tgt_idx) x 2 float64 array that receives each target's out-of-bag mean squared error of the scaled
    target and the samples predicted (:func:`chromaflow.genie3.fast.run`; the prior gate's measure).

    Order invariance: the forests are grown in a canonical order -- genes and regulators sorted by name, samples
    by content (:func:`sample_order`), each target seeded from its name -- and W is mapped back to the order
    given, so permuting the rows or columns of the expression file or the regulator list changes nothing but
    that order."""
    genes = list(genes)
    reg_idx = np.asarray(reg_idx, dtype=np.int64)
    tgt_idx = np.asarray(tgt_idx, dtype=np.int64)
    gorder = np.argsort(np.array(genes, dtype=object), kind="stable")
    sorder = sample_order(values, gorder)
    if np.array_equal(sorder, np.arange(len(sorder))):
        vals = np.ascontiguousarray(values, dtype=np.float32)  # no copy when already so
    else:
        vals = np.ascontiguousarray(values[:, sorder], dtype=np.float32)  # one reordered copy of the matrix
    rperm: list[int] | np.ndarray = sorted(range(len(reg_idx)), key=lambda i: genes[int(reg_idx[i])])
    rperm = np.asarray(rperm, dtype=np.int64)
    Wc, info = _compute_canonical(vals, genes, reg_idx[rperm], tgt_idx, opts, threads, warn, prior, oob)
    W = np.empty_like(Wc)
    W[rperm] = Wc
    return W, info


def _compute_canonical(values, genes, reg_idx, tgt_idx, opts: Options, threads: int, warn, prior, oob=None):
    warn = warn or (lambda msg: print(f"chromaflow genie3: warning: {msg}", file=sys.stderr))
    reg_idx = np.asarray(reg_idx, dtype=np.int64)
    tgt_idx = np.asarray(tgt_idx, dtype=np.int64)
    R, T = len(reg_idx), len(tgt_idx)
    n = values.shape[1]
    W = np.zeros((R, T), dtype=np.float64)
    info = {"constant_targets": [], "engine": opts.engine}
    info["constant_regulators"] = _warn_constant_regulators(values, genes, reg_idx, warn)
    if opts.engine == "fast":
        pw = None
        if prior is not None and opts.prior_alpha is not None:
            from .prior import PriorWeights

            pw = PriorWeights(prior, opts.prior_alpha, reg_idx)
        _fast_weights(values, reg_idx, tgt_idx, opts, threads, W, genes, info, warn, pw, oob)
    else:
        if oob is not None:
            raise ValueError("out-of-bag errors need the fast engine")
        _sklearn_weights(values, reg_idx, tgt_idx, opts, threads, W, genes, info, warn)
    if n < 10:
        warn(f"only {n} samples: importances will be very noisy")
    return W, info


def _fast_weights(values, reg_idx, tgt_idx, opts, threads, W, genes, info, warn, pw=None, oob=None) -> None:
    """All targets through the compiled kernel, in blocks of targets (one call per block, the kernel's own
    threads inside a call) so that the progress bar moves."""
    from . import fast

    lib = fast.load_kernel()  # KernelUnavailable handled by the caller
    values = np.ascontiguousarray(values, dtype=np.float32)  # no copy when already so
    R, T = len(reg_idx), len(tgt_idx)
    tables = fast.build_tables(values, reg_idx) if opts.tree_method == "RF" else None
    seeds = target_seeds(opts.seed, [genes[int(j)] for j in tgt_idx])
    k_in = resolve_k(opts.max_features, max(R - 1, 1))  # the target is one of the regulators
    k_out = resolve_k(opts.max_features, R)  # it is not
    block = max(1, min(T, max(256, T // 50)))  # one kernel call per ~2 % of the targets (at least 256)
    with Progress(T, "genie3", unit=" targets") as prog:
        for lo in range(0, T, block):
            hi = min(T, lo + block)
            status = fast.run(
                lib,
                values,
                tables,
                reg_idx,
                tgt_idx[lo:hi],
                seeds[lo:hi],
                opts.n_trees,
                k_in,
                k_out,
                opts.tree_method,
                threads,
                W[:, lo:hi],
                importance=opts.importance,
                prior=None if pw is None else pw.block(tgt_idx[lo:hi]),
                oob=None if oob is None else oob[lo:hi],
            )
            for t in np.flatnonzero(status == 1):
                _note_constant(genes[int(tgt_idx[lo + t])], info, warn)
            prog.update(hi - lo)


def _sklearn_weights(values, reg_idx, tgt_idx, opts, threads, W, genes, info, warn) -> None:
    from . import skengine

    T = len(tgt_idx)
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
            W[keep, t] = skengine.target_importances(
                X_in,
                y,
                opts.n_trees,
                K,
                opts.tree_method,
                random_state=target_seed(opts.seed, genes[j]) % (2**32),
                n_jobs=threads,
                importance=opts.importance,
            )


def _warn_constant_regulators(values: np.ndarray, genes: list[str], reg_idx: np.ndarray, warn) -> list[str]:
    """The regulators whose values are all equal (in ``reg_idx``'s order), a warning line for each of the first 10
    and one line counting the rest: no split can use such a regulator, so every link from it is 0 (and, where it
    is also a target, every link to it: it has no variance to explain)."""
    const = [genes[int(j)] for j in reg_idx if values[int(j)].min() == values[int(j)].max()]
    for gene in const[:10]:
        warn(f"regulator {gene!r} is constant over the samples: it cannot be chosen by any split; its links are 0")
    if len(const) > 10:
        warn(f"{len(const) - 10} more regulators are constant over the samples (not listed): their links are 0")
    return const


def _note_constant(gene: str, info: dict, warn) -> None:
    info["constant_targets"].append(gene)
    k = len(info["constant_targets"])
    if k <= 10 and gene not in info["constant_regulators"]:  # a constant regulator was named already
        warn(
            f"target gene {gene!r} is constant across samples: its incoming importances are all 0"
            + (" (further constant targets are counted in the metrics, not listed)" if k == 10 else "")
        )
