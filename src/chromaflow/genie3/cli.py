"""``chromaflow genie3``: GENIE3 network inference from an expression matrix (see docs/genie3.md)."""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from ..common import (ChromaflowError, StageMetrics, add_run_options, check_outputs, part_bounds, parse_part,
                      resolve_threads)
from .expression import LAYOUTS, read_expression, read_regulators
from .parts import write_part
from .core import ENGINES, IMPORTANCES, METHODS, Options, compute_weights, parse_max_features
from .report import add_output_arguments, output_options


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--expression", required=True, help="expression matrix, TSV or CSV (optionally .gz)")
    p.add_argument("--layout", required=True, choices=LAYOUTS,
                   help="orientation of the matrix: genes-x-samples (a gene per line) or samples-x-genes (a gene "
                        "per column). Only partly checkable: refused when gene names look like numbers, fewer than "
                        "3 samples or 2 genes result, or all --regulators are sample labels; a matrix with names on "
                        "both axes otherwise reads either way, so a swapped one is not caught")
    p.add_argument("--regulators", help="file of candidate regulator names, one per line (default: all genes)")
    p.add_argument("--tree-method", default="RF", choices=METHODS, help="RF (bootstrap) or ET (extra-trees)")
    p.add_argument("--max-features", default="sqrt", help="features per split: sqrt (floor), all, or an integer")
    p.add_argument("--n-trees", type=int, default=1000, help="trees per target (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="run seed; each target's RNG derives from (seed, gene index)")
    add_run_options(p, threads="worker threads (0 = all usable CPUs)")
    p.add_argument("--importance", default="unnormalised", choices=IMPORTANCES,
                   help="unnormalised (default): the reference GENIE3's mean variance decrease; tree-normalised: "
                        "scikit-learn's feature_importances_, as arboreto")
    p.add_argument("--engine", default="fast", choices=ENGINES,
                   help="fast (compiled kernel; falls back to sklearn without a C compiler) or sklearn")
    p.add_argument("--targets-chunk", metavar="i/n",
                   help="compute only the i-th of n contiguous target slices; OUT is then a part (.npz) for genie3-merge")
    add_output_arguments(p, "ranked link list (.tsv.gz), or the part file with --targets-chunk")


def warn(msg: str) -> None:
    print(f"chromaflow genie3: warning: {msg}", file=sys.stderr)


def _engine(requested: str, samples: int) -> str:
    """The engine that runs: sklearn, with a warning, where the fast one cannot (no compiler, > 65535 samples)."""
    if requested != "fast":
        return requested
    from .fast import KernelUnavailable, load_kernel
    try:
        load_kernel()
        if samples > 65535:
            raise KernelUnavailable("more than 65535 samples")
    except KernelUnavailable as exc:
        warn(f"fast engine unavailable ({exc}); using --engine sklearn")
        return "sklearn"
    return "fast"


def run(args: argparse.Namespace) -> int:
    if args.n_trees < 1:
        raise ChromaflowError(f"--n-trees must be >= 1 (got {args.n_trees})")
    if args.top < 0 or args.max_links < 0:
        raise ChromaflowError("--top and --max-links must be >= 0")
    max_features = parse_max_features(args.max_features)
    chunk = parse_part(args.targets_chunk, "--targets-chunk")
    if chunk and (args.weights or args.summary or args.plot):
        raise ChromaflowError("--weights/--summary/--plot are written by genie3-merge when --targets-chunk is used")
    threads = resolve_threads(args.threads)
    check_outputs(output_options(args), [("--expression", args.expression), ("--regulators", args.regulators)])
    with StageMetrics("genie3", args.metrics, threads=threads) as m:
        expr = read_expression(args.expression, args.layout)
        for line in expr.warnings:
            warn(line)
        if args.regulators:
            reg_idx = np.asarray(read_regulators(args.regulators, expr), dtype=np.int64)
        else:
            reg_idx = np.arange(expr.n_genes, dtype=np.int64)
        all_targets = np.arange(expr.n_genes, dtype=np.int64)
        lo, hi = part_bounds(*chunk, len(all_targets)) if chunk else (0, len(all_targets))
        tgt_idx = all_targets[lo:hi]
        engine = _engine(args.engine, expr.n_samples)
        opts = Options(tree_method=args.tree_method, max_features=max_features, n_trees=args.n_trees,
                       seed=args.seed, engine=engine, importance=args.importance)
        t0 = time.perf_counter()
        W, info = compute_weights(expr.values, expr.genes, reg_idx, tgt_idx, opts, threads, warn=warn)
        elapsed = time.perf_counter() - t0
        meta = {
            "genes": expr.genes,
            "regulators": reg_idx.tolist(),
            "targets": tgt_idx.tolist(),
            "n_targets_total": int(len(all_targets)),
            "target_range": [int(lo), int(hi)],
            "chunk": list(chunk) if chunk else [1, 1],
            "options": opts.as_dict(),
            "fingerprint": expr.fingerprint(),
            "samples": int(expr.n_samples),
            "expression": str(args.expression),
            "constant_targets": info["constant_targets"],
        }
        if chunk:
            write_part(args.out, W, meta)
        else:
            from .report import finish_outputs
            finish_outputs(W, meta, args.out, weights=args.weights, summary=args.summary, plot=args.plot,
                           top=args.top, max_links=args.max_links, threads=threads)
        m.set(genes=expr.n_genes, samples=expr.n_samples, regulators=int(len(reg_idx)),
              targets=int(len(tgt_idx)), trees=args.n_trees, engine=engine, engine_requested=args.engine,
              tree_method=args.tree_method, max_features=max_features, seed=args.seed, importance=args.importance,
              chunk=args.targets_chunk, compute_s=round(elapsed, 6),
              targets_per_s=(len(tgt_idx) / elapsed if elapsed > 0 else None),
              constant_targets=len(info["constant_targets"]))
    return 0
