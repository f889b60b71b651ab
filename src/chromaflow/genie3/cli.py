"""``chromaflow genie3``: GENIE3 network inference from an expression matrix (see docs/genie3.md)."""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from dataclasses import replace

import numpy as np

from ..cli_options import add_run_options, resolve_threads
from ..errors import ChromaflowError
from ..metrics import StageMetrics
from ..outputs import check_outputs
from ..sharding import part_bounds, parse_part
from .expression import LAYOUTS, read_expression, read_regulators
from .parts import write_part
from .prior_check import LEVEL as PRIOR_CHECK_LEVEL
from .core import ENGINES, IMPORTANCES, METHODS, Options, compute_weights, parse_max_features, repeat_seed
from .report import add_output_arguments, output_options


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): expression matrix and layout, regulators, forest and importance settings,
    engine, target chunk, prior and repeats, and the outputs."""
    p.add_argument("--expression", required=True, help="expression matrix, TSV or CSV (optionally .gz)")
    p.add_argument(
        "--layout",
        required=True,
        choices=LAYOUTS,
        help="orientation of the matrix: genes-x-samples (a gene per line) or samples-x-genes (a gene "
        "per column). Only partly checkable: refused when gene names look like numbers, fewer than "
        "3 samples or 2 genes result, or all --regulators are sample labels; a matrix with names on "
        "both axes otherwise reads either way, so a swapped one is not caught",
    )
    p.add_argument("--regulators", help="file of candidate regulator names, one per line (default: all genes)")
    p.add_argument("--tree-method", default="RF", choices=METHODS, help="RF (bootstrap) or ET (extra-trees)")
    p.add_argument("--max-features", default="sqrt", help="features per split: sqrt (floor), all, or an integer")
    p.add_argument("--n-trees", type=int, default=1000, help="trees per target (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="run seed; each target's RNG derives from (seed, gene NAME)")
    add_run_options(p, threads="worker threads (0 = all usable CPUs)")
    p.add_argument(
        "--importance",
        default="unnormalised",
        choices=IMPORTANCES,
        help="unnormalised (default): the reference GENIE3's mean variance decrease; tree-normalised: "
        "scikit-learn's feature_importances_, as arboreto",
    )
    p.add_argument(
        "--engine",
        default="fast",
        choices=ENGINES,
        help="fast (compiled kernel; falls back to sklearn without a C compiler) or sklearn",
    )
    p.add_argument(
        "--targets-chunk",
        metavar="i/n",
        help="compute only the i-th of n contiguous target slices; OUT is then a part (.npz) for genie3-merge",
    )
    p.add_argument(
        "--prior",
        metavar="FILE",
        help="regulator -> target prior (motif-prior's long table regulator,target,prior or a targets x "
        "regulators matrix; TSV/CSV, optionally .gz): split candidates are drawn with probability "
        "proportional to its weights (iRafNet; fast engine only)",
    )
    p.add_argument(
        "--prior-alpha",
        type=float,
        default=None,
        metavar="A",
        help="strength of the prior in [0, 1] (DIOgene's link; default 0.5 with --prior): 0 = plain "
        "GENIE3 (the same bytes), 1 = only motif-supported regulators are candidates",
    )
    p.add_argument(
        "--prior-check",
        default="auto",
        choices=("auto", "off"),
        help="auto (default): before the weighted forest, test whether the prior agrees with the "
        "expression (per target, a permutation test of the regulators' Spearman rho^2 against "
        "their prior values) and run without it (alpha 0: the bytes of no prior) when p >= "
        "--prior-check-level; off: always use the prior",
    )
    p.add_argument(
        "--prior-check-level",
        type=float,
        default=None,
        metavar="P",
        help="level of the prior check's one-sided test (default 0.01)",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=1,
        metavar="R",
        help="grow R independent forests per target (seeds from --seed and the repeat index) and add "
        "the columns confidence (fraction of repeats ranking the link within --top) and mean_rank; "
        "1 (default): the plain link list",
    )
    add_output_arguments(p, "ranked link list (.tsv.gz), or the part file with --targets-chunk")


def warn(msg: str) -> None:
    """Print ``msg`` on stderr as a genie3 warning."""
    print(f"chromaflow genie3: warning: {msg}", file=sys.stderr)


def _sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _engine(requested: str, samples: int, need_fast: bool = False) -> str:
    """The engine that runs: sklearn, with a warning, where the fast one cannot (no compiler, > 65535 samples);
    ``need_fast`` (a weighted prior): an error instead."""
    if requested != "fast":
        return requested
    from .fast import KernelUnavailable, load_kernel

    try:
        load_kernel()
        if samples > 65535:
            raise KernelUnavailable("more than 65535 samples")
    except KernelUnavailable as exc:
        if need_fast:
            raise ChromaflowError(f"--prior with --prior-alpha > 0 needs the fast engine, unavailable here ({exc})")
        warn(f"fast engine unavailable ({exc}); using --engine sklearn")
        return "sklearn"
    return "fast"


def run(args: argparse.Namespace) -> int:
    """Run the command: infer the regulator-target network of the expression matrix with GENIE3 (all targets, or one
    ``--targets-chunk``) and write its outputs; returns the exit status."""
    if args.n_trees < 1:
        raise ChromaflowError(f"--n-trees must be >= 1 (got {args.n_trees})")
    if args.top < 0 or args.max_links < 0:
        raise ChromaflowError("--top and --max-links must be >= 0")
    if args.repeats < 1:
        raise ChromaflowError(f"--repeats must be >= 1 (got {args.repeats})")
    if args.repeats > 1 and args.top < 1:
        raise ChromaflowError("--repeats needs --top >= 1 (the rank a link must reach to count as confident)")
    if args.prior_alpha is not None and not args.prior:
        raise ChromaflowError("--prior-alpha needs --prior")
    alpha = (0.5 if args.prior_alpha is None else args.prior_alpha) if args.prior else None
    if alpha is not None and not (0.0 <= alpha <= 1.0):
        raise ChromaflowError(f"--prior-alpha must be in [0, 1] (got {args.prior_alpha})")
    if args.prior_check_level is not None and not (args.prior and args.prior_check == "auto"):
        raise ChromaflowError("--prior-check-level needs --prior with --prior-check auto")
    level = PRIOR_CHECK_LEVEL if args.prior_check_level is None else args.prior_check_level
    if not (0.0 < level < 1.0):
        raise ChromaflowError(f"--prior-check-level must be in (0, 1) (got {args.prior_check_level})")
    if alpha and args.engine == "sklearn":
        raise ChromaflowError(
            "--prior with --prior-alpha > 0 needs --engine fast: scikit-learn has no per-feature "
            "candidate weights (see docs/genie3.md, Prior)"
        )
    max_features = parse_max_features(args.max_features)
    chunk = parse_part(args.targets_chunk, "--targets-chunk")
    if chunk and (args.weights or args.summary or args.plot):
        raise ChromaflowError("--weights/--summary/--plot are written by genie3-merge when --targets-chunk is used")
    threads = resolve_threads(args.threads)
    check_outputs(
        output_options(args),
        [("--expression", args.expression), ("--regulators", args.regulators), ("--prior", args.prior)],
    )
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
        prior = None
        if args.prior:
            from .prior import read_prior

            prior = read_prior(args.prior, expr.genes)
            if prior.ignored:
                warn(
                    f"{args.prior}: {prior.ignored} of its {prior.pairs_read} prior values name genes absent from "
                    f"the expression matrix: ignored"
                )
        engine = _engine(args.engine, expr.n_samples, need_fast=bool(alpha))
        check = None  # the prior check (after the engine: the fast one, <= 65535 samples, is certain)
        if prior is not None and alpha and args.prior_check == "auto":
            from .prior_check import check_prior

            t_check = time.perf_counter()
            check = check_prior(expr.values, expr.genes, reg_idx, prior, level)
            check["check_s"] = round(time.perf_counter() - t_check, 6)
            if check["decision"] == "off":
                warn(
                    f"{args.prior}: no evidence that the prior agrees with the expression (prior check: z = "
                    f"{check['z']}, one-sided p = {check['p']:.3g} >= {level:g}): running without it (alpha 0, the "
                    f"links of a run without --prior); --prior-check off uses it anyway"
                )
        opts = Options(
            tree_method=args.tree_method,
            max_features=max_features,
            n_trees=args.n_trees,
            seed=args.seed,
            engine=engine,
            importance=args.importance,
            prior_alpha=alpha,
            prior=_sha256(args.prior) if args.prior else None,
            repeats=args.repeats,
        )
        t0, c0 = time.perf_counter(), time.process_time()
        reps: list[np.ndarray] | np.ndarray | None  # each repeat's W, then stacked (None for one)
        reps = []
        for r in range(args.repeats):
            W, info = compute_weights(
                expr.values,
                expr.genes,
                reg_idx,
                tgt_idx,
                replace(opts, seed=repeat_seed(args.seed, r)),
                threads,
                warn=warn if r == 0 else (lambda msg: None),
                prior=None if check and check["decision"] == "off" else prior,
            )
            reps.append(W)
        if args.repeats > 1:
            reps = np.stack(reps)
            W = reps.mean(axis=0)
        else:
            reps = None
        elapsed = time.perf_counter() - t0
        compute_cpu = time.process_time() - c0
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
        if check is not None:
            meta["prior_check"] = {k: v for k, v in check.items() if k != "check_s"}
        if chunk:
            write_part(args.out, W, meta, repeats=reps)
        else:
            from .report import finish_outputs

            finish_outputs(
                W,
                meta,
                args.out,
                weights=args.weights,
                summary=args.summary,
                plot=args.plot,
                top=args.top,
                max_links=args.max_links,
                threads=threads,
                repeats=reps,
                consume=True,
            )
        m.set(
            genes=expr.n_genes,
            samples=expr.n_samples,
            regulators=int(len(reg_idx)),
            targets=int(len(tgt_idx)),
            trees=args.n_trees,
            engine=engine,
            engine_requested=args.engine,
            tree_method=args.tree_method,
            max_features=max_features,
            seed=args.seed,
            importance=args.importance,
            chunk=args.targets_chunk,
            compute_s=round(elapsed, 6),
            compute_cpu_s=round(compute_cpu, 6),
            targets_per_s=(len(tgt_idx) / elapsed if elapsed > 0 else None),
            constant_targets=len(info["constant_targets"]),
            prior=args.prior,
            prior_alpha=alpha,
            repeats=args.repeats,
            prior_check=None if check is None else check["decision"],
            prior_check_p=None if check is None else check["p"],
            prior_check_s=None if check is None else check["check_s"],
        )
    return 0
