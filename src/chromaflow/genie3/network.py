"""The core of ``chromaflow genie3`` (its command: cli.py): GENIE3 network inference from an expression matrix, for
all targets or one ``--targets-chunk``, with an optional prior and repeats (docs/genie3.md).

:class:`NetworkOptions` holds the command's options and checks them once (:meth:`NetworkOptions.validate`: a
one-line :class:`~chromaflow.utils.errors.ChromaflowError` naming the option); :func:`run` validates them, reads the
inputs, grows the forests (:func:`chromaflow.genie3.core.compute_weights`) and writes the link list and its
companions (:func:`chromaflow.genie3.report.finish_outputs`), or a chunk's part file for ``genie3-merge``. A library
caller gets the same checks as the command line.
"""

from __future__ import annotations

import hashlib
import sys
import time
from dataclasses import dataclass, replace

import numpy as np

from ..utils.cli_options import resolve_threads
from ..utils.errors import ChromaflowError
from ..utils.metrics import StageMetrics
from ..utils.outputs import check_outputs
from ..utils.sharding import parse_part, part_bounds
from .core import ENGINES, IMPORTANCES, METHODS, Options, compute_weights, parse_max_features, repeat_seed
from .expression import LAYOUTS, Expression, read_expression, read_regulators
from .parts import write_part
from .prior_check import LEVEL as PRIOR_CHECK_LEVEL
from .prior_gate import FRACTION as GATE_FRACTION
from .report import output_options

#: ``--prior-check``: auto (the relabelling test: is the prior related to the data more than with its gene ids
#: swapped? two-sided), correlation (the one-sided test before issue 56: do the prior's regulators correlate more
#: with their targets?), prediction (the prediction gate: does the forest grown with the prior predict held-out
#: samples better than one grown with the prior's values permuted?) or off (always use the prior)
PRIOR_CHECKS = ("auto", "correlation", "prediction", "off")
#: the weight of a ``--prior`` (DIOgene's alpha) when ``--prior-alpha`` is not given
DEFAULT_PRIOR_ALPHA = 0.5


def warn(msg: str) -> None:
    """Print ``msg`` on stderr as a genie3 warning (one line, ``chromaflow genie3: warning: <msg>``)."""
    print(f"chromaflow genie3: warning: {msg}", file=sys.stderr)


@dataclass(frozen=True)
class ResolvedOptions:
    """What valid :class:`NetworkOptions` resolve to (returned by :meth:`NetworkOptions.validate`).

    Attributes
    ----------
    max_features : str
        ``max_features`` normalised by :func:`chromaflow.genie3.core.parse_max_features`: 'sqrt', 'all' or a
        positive integer as text.
    chunk : tuple of (int, int) or None
        The parsed ``targets_chunk`` (i, n), 1 <= i <= n; None for all targets.
    alpha : float or None
        The prior's weight in [0, 1] (``prior_alpha``, else 0.5); None without a prior.
    level : float
        The level of the prior check's one-sided test in (0, 1) (``prior_check_level``, else 0.01).
    fraction : float
        The share of the genes the prediction gate samples as targets, in (0, 1] (``prior_check_targets``, else
        0.1).
    """

    max_features: str
    chunk: tuple[int, int] | None
    alpha: float | None
    level: float
    fraction: float = GATE_FRACTION


@dataclass
class NetworkOptions:
    """What ``genie3`` infers and where its outputs go: the command's options, one field each, named as the option
    without its dashes (``None`` where an option is not given; docs/genie3.md). :meth:`validate` checks them once
    (one line naming the option); :func:`run` calls it, so a library caller gets the same checks as the command line.

    Attributes
    ----------
    expression : str
        Expression matrix, TSV or CSV, plain or gzip.
    layout : str
        'genes-x-samples' (a gene per line) or 'samples-x-genes' (a gene per column).
    out : str
        The ranked link list (gzip when the name ends in ``.gz``, else plain text), or the part file (.npz) with
        ``targets_chunk``.
    regulators : str or None
        File of candidate regulator names, one per line; None: every gene.
    tree_method : str
        'RF' (bootstrap) or 'ET' (extra-trees).
    max_features : str
        Features tried per split: 'sqrt' (floor), 'all' or a positive integer (as text).
    n_trees : int
        Trees per target, >= 1.
    seed : int
        Run seed; each target's RNG derives from (seed, gene name).
    threads : int
        Worker threads; 0: all usable CPUs.
    importance : str
        'unnormalised' (the reference GENIE3's) or 'tree-normalised' (scikit-learn's).
    engine : str
        'fast' (the compiled kernel; falls back to 'sklearn' without a C compiler) or 'sklearn'.
    targets_chunk : str or None
        'i/n': only the i-th of n contiguous target slices (``out`` is then a part for ``genie3-merge``).
    prior : str or None
        Regulator -> target prior table (:func:`chromaflow.genie3.prior.read_prior`).
    prior_alpha : float or None
        Strength of the prior in [0, 1]; needs ``prior``; None: 0.5 with a prior.
    prior_check : str
        'auto' (the relabelling test, :func:`chromaflow.genie3.prior_relabel.check_prior_relabel`), 'correlation'
        (the one-sided rho^2 test, :func:`chromaflow.genie3.prior_check.check_prior`), 'prediction' (the prediction
        gate, :func:`chromaflow.genie3.prior_gate.gate_prior`) or 'off'.
    prior_check_level : float or None
        Level of the prior check's test in (0, 1); needs ``prior`` with a check; None: 0.01.
    prior_check_targets : float or None
        The share of the genes the prediction gate samples as targets, in (0, 1]; needs ``prior`` with
        ``prior_check`` 'prediction'; None: 0.1.
    repeats : int
        Independent forests per target, >= 1; above 1 the link list gains confidence and mean_rank (needs
        ``top`` >= 1).
    weights, summary, plot : str or None
        The optional full weight matrix (gzip when the name ends in ``.gz``, else plain text), summary JSON and PNG
        plot (not with ``targets_chunk``).
    top : int
        Top-N links of the summary and of the confidence column, >= 0.
    max_links : int
        Write only the first M links, >= 0 (0: all).
    metrics : str or None
        The stage metrics JSON.
    """

    expression: str
    layout: str
    out: str
    regulators: str | None = None
    tree_method: str = "RF"
    max_features: str = "sqrt"
    n_trees: int = 1000
    seed: int = 0
    threads: int = 0
    importance: str = "unnormalised"
    engine: str = "fast"
    targets_chunk: str | None = None
    prior: str | None = None
    prior_alpha: float | None = None
    prior_check: str = "auto"
    prior_check_level: float | None = None
    prior_check_targets: float | None = None
    repeats: int = 1
    weights: str | None = None
    summary: str | None = None
    plot: str | None = None
    top: int = 1000
    max_links: int = 0
    metrics: str | None = None

    def validate(self) -> ResolvedOptions:
        """Check the options' own rules (not the files): raise a one-line ChromaflowError naming the first bad
        option, in the command's order; return what they resolve to (:class:`ResolvedOptions`)."""
        self._check_choices()
        self._check_counts()
        alpha, level, fraction = self._check_prior()
        max_features = parse_max_features(self.max_features)
        chunk = parse_part(self.targets_chunk, "--targets-chunk")
        if chunk and (self.weights or self.summary or self.plot):
            raise ChromaflowError("--weights/--summary/--plot are written by genie3-merge when --targets-chunk is used")
        return ResolvedOptions(max_features=max_features, chunk=chunk, alpha=alpha, level=level, fraction=fraction)

    def _check_choices(self) -> None:
        """The options with a fixed set of values (argparse's ``choices`` on the command line)."""
        for option, value, choices in (
            ("--layout", self.layout, LAYOUTS),
            ("--tree-method", self.tree_method, METHODS),
            ("--importance", self.importance, IMPORTANCES),
            ("--engine", self.engine, ENGINES),
            ("--prior-check", self.prior_check, PRIOR_CHECKS),
        ):
            if value not in choices:
                raise ChromaflowError(f"{option} {value!r}: expected one of {', '.join(choices)}")

    def _check_counts(self) -> None:
        """Trees, repeats and the link-list cuts."""
        if self.n_trees < 1:
            raise ChromaflowError(f"--n-trees must be >= 1 (got {self.n_trees})")
        if self.top < 0 or self.max_links < 0:
            raise ChromaflowError("--top and --max-links must be >= 0")
        if self.repeats < 1:
            raise ChromaflowError(f"--repeats must be >= 1 (got {self.repeats})")
        if self.repeats > 1 and self.top < 1:
            raise ChromaflowError("--repeats needs --top >= 1 (the rank a link must reach to count as confident)")

    def _check_prior(self) -> tuple[float | None, float, float]:
        """The prior's options; returns its weight alpha (None without a prior), the prior check's level and the
        prediction gate's share of targets."""
        if self.prior_alpha is not None and not self.prior:
            raise ChromaflowError("--prior-alpha needs --prior")
        alpha = (DEFAULT_PRIOR_ALPHA if self.prior_alpha is None else self.prior_alpha) if self.prior else None
        if alpha is not None and not (0.0 <= alpha <= 1.0):
            raise ChromaflowError(f"--prior-alpha must be in [0, 1] (got {self.prior_alpha})")
        if self.prior_check_level is not None and not (self.prior and self.prior_check != "off"):
            raise ChromaflowError(
                "--prior-check-level needs --prior with --prior-check auto, correlation or prediction"
            )
        level = PRIOR_CHECK_LEVEL if self.prior_check_level is None else self.prior_check_level
        if not (0.0 < level < 1.0):
            raise ChromaflowError(f"--prior-check-level must be in (0, 1) (got {self.prior_check_level})")
        if self.prior_check_targets is not None and not (self.prior and self.prior_check == "prediction"):
            raise ChromaflowError("--prior-check-targets needs --prior with --prior-check prediction")
        fraction = GATE_FRACTION if self.prior_check_targets is None else self.prior_check_targets
        if not (0.0 < fraction <= 1.0):
            raise ChromaflowError(f"--prior-check-targets must be in (0, 1] (got {self.prior_check_targets})")
        if alpha and self.engine == "sklearn":
            raise ChromaflowError(
                "--prior with --prior-alpha > 0 needs --engine fast: scikit-learn has no per-feature "
                "candidate weights (see docs/genie3.md, Prior)"
            )
        return alpha, level, fraction


def run(options: NetworkOptions) -> int:
    """Infer the regulator-target network of the expression matrix with GENIE3 and write the outputs.

    Parameters
    ----------
    options : NetworkOptions
        The run's inputs, settings and outputs; validated first (:meth:`NetworkOptions.validate`), then the outputs
        checked (:func:`chromaflow.utils.outputs.check_outputs`) before any work.

    Returns
    -------
    int
        The exit status, 0 (every failure is an exception: :class:`~chromaflow.utils.errors.ChromaflowError` for bad
        input).
    """
    o = options
    r = o.validate()
    threads = resolve_threads(o.threads)
    check_outputs(
        output_options(o),
        [("--expression", o.expression), ("--regulators", o.regulators), ("--prior", o.prior)],
    )
    with StageMetrics("genie3", o.metrics, threads=threads) as m:
        expr, reg_idx = _read_inputs(o)
        all_targets = np.arange(expr.n_genes, dtype=np.int64)
        lo, hi = part_bounds(*r.chunk, len(all_targets)) if r.chunk else (0, len(all_targets))
        tgt_idx = all_targets[lo:hi]
        prior = _read_prior(o.prior, expr.genes) if o.prior else None
        engine = _engine(o.engine, expr.n_samples, need_fast=bool(r.alpha))
        opts = Options(
            tree_method=o.tree_method,
            max_features=r.max_features,
            n_trees=o.n_trees,
            seed=o.seed,
            engine=engine,
            importance=o.importance,
            prior_alpha=r.alpha,
            prior=_sha256(o.prior) if o.prior else None,
            repeats=o.repeats,
        )
        check, gate = _check_prior(o, r, expr, reg_idx, prior, opts, threads)  # the fast engine is certain here
        use_prior = None if check and check["decision"] == "off" else prior
        W, reps, info, elapsed, compute_cpu = _grow(expr, reg_idx, tgt_idx, opts, threads, use_prior, gate)
        meta = _meta(o, r, expr, reg_idx, tgt_idx, (lo, hi), opts, info, check)
        _write_outputs(o, r, W, meta, reps, threads)
        m.set(**_metrics(o, r, expr, reg_idx, tgt_idx, engine, info, check, elapsed, compute_cpu))
    return 0


def _read_inputs(o: NetworkOptions) -> tuple[Expression, np.ndarray]:
    """The expression matrix (its reader's warnings printed) and the regulators' gene indices (int64)."""
    expr = read_expression(o.expression, o.layout)
    for line in expr.warnings:
        warn(line)
    if o.regulators:
        reg_idx = np.asarray(read_regulators(o.regulators, expr), dtype=np.int64)
    else:
        reg_idx = np.arange(expr.n_genes, dtype=np.int64)
    return expr, reg_idx


def _read_prior(path: str, genes: list[str]):
    """The ``--prior`` table against the expression's genes (:func:`chromaflow.genie3.prior.read_prior`); a warning
    where some of its values name genes absent from the matrix."""
    from .prior import read_prior

    prior = read_prior(path, genes)
    if prior.ignored:
        warn(
            f"{path}: {prior.ignored} of its {prior.pairs_read} prior values name genes absent from "
            f"the expression matrix: ignored"
        )
    return prior


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


def _check_prior(o: NetworkOptions, r: ResolvedOptions, expr: Expression, reg_idx: np.ndarray, prior, opts, threads):
    """The prior check's result (with a weighted prior and ``--prior-check`` other than off; None otherwise),
    its time in ``check_s``, and the prediction gate's forests (None but for prediction); a warning line where it
    turns the prior off, and where the prediction gate keeps it a line of what it measured."""
    if prior is None or not r.alpha or o.prior_check == "off":
        return None, None
    from .prior_check import check_prior, off_warning
    from .prior_gate import gate_line, gate_prior
    from .prior_relabel import check_prior_relabel, relabel_line

    t_check = time.perf_counter()
    gate = None
    line: str | None
    if o.prior_check == "prediction":
        gate = gate_prior(expr, reg_idx, prior, opts, threads, r.level, r.fraction)
        check = gate.result
        line = gate_line(check, str(o.prior))
    elif o.prior_check == "correlation":
        check = check_prior(expr.values, expr.genes, reg_idx, prior, r.level)
        line = off_warning(check, str(o.prior), r.level) if check["decision"] == "off" else None
    else:  # auto: the relabelling test
        check = check_prior_relabel(expr.values, expr.genes, reg_idx, prior, r.level, opts.seed)
        line = relabel_line(check, str(o.prior))
    check["check_s"] = round(time.perf_counter() - t_check, 6)
    if line is not None:  # what it measured and decided: a warning where it turns the prior off
        kept = check["decision"] == "kept"
        print(f"chromaflow genie3: {'' if kept else 'warning: '}{line}", file=sys.stderr)
    return check, gate


def _sha256(path) -> str:
    """The file's SHA-256 (hex): the prior's identity in the options (the parts of one run must agree)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _grow(expr: Expression, reg_idx: np.ndarray, tgt_idx: np.ndarray, opts: Options, threads: int, prior, gate=None):
    """The forests of every repeat: (W, repeats, info, seconds, CPU seconds). W: regulators x targets float64, the
    mean over the repeats; repeats: their stacked W (repeats x regulators x targets), None for one repeat. ``gate``:
    the prediction gate (:class:`chromaflow.genie3.prior_gate.Gate`) whose RF forests of the kept model repeat 0
    takes instead of growing them again (the same bytes), or None."""
    t0, c0 = time.perf_counter(), time.process_time()
    reps: list[np.ndarray] | np.ndarray | None  # each repeat's W, then stacked (None for one)
    reps = []
    for r in range(opts.repeats):
        o_r = replace(opts, seed=repeat_seed(opts.seed, r))
        say = warn if r == 0 else (lambda msg: None)
        reuse = gate if r == 0 and gate is not None and gate.weights is not None else None
        W, info = _weights_reusing(expr, reg_idx, tgt_idx, o_r, threads, say, prior, reuse)
        reps.append(W)
    if opts.repeats > 1:
        reps = np.stack(reps)
        W = reps.mean(axis=0)
    else:
        reps = None
    return W, reps, info, time.perf_counter() - t0, time.process_time() - c0


def _weights_reusing(expr: Expression, reg_idx, tgt_idx, opts: Options, threads: int, say, prior, gate):
    """One repeat's weights (regulators x targets float64) and info: the columns of the targets the gate grew (when
    ``gate`` is given) copied from its kept model, the others grown (:func:`chromaflow.genie3.core.compute_weights`)."""
    if gate is None:
        return compute_weights(expr.values, expr.genes, reg_idx, tgt_idx, opts, threads, warn=say, prior=prior)
    pos = np.minimum(np.searchsorted(gate.targets, tgt_idx), max(len(gate.targets) - 1, 0))
    hit = (gate.targets[pos] == tgt_idx) if len(gate.targets) else np.zeros(len(tgt_idx), dtype=bool)
    rest, info = compute_weights(expr.values, expr.genes, reg_idx, tgt_idx[~hit], opts, threads, warn=say, prior=prior)
    W = np.empty((len(reg_idx), len(tgt_idx)), dtype=np.float64)
    W[:, hit] = gate.weights[:, pos[hit]]
    W[:, ~hit] = rest
    info["reused_targets"] = int(hit.sum())
    return W, info


def _meta(o, r, expr, reg_idx, tgt_idx, bounds, opts: Options, info: dict, check: dict | None) -> dict:
    """The run's metadata: the summary's and a part file's (``genie3-merge`` checks the parts of a run against it)."""
    lo, hi = bounds
    meta = {
        "genes": expr.genes,
        "regulators": reg_idx.tolist(),
        "targets": tgt_idx.tolist(),
        "n_targets_total": int(expr.n_genes),
        "target_range": [int(lo), int(hi)],
        "chunk": list(r.chunk) if r.chunk else [1, 1],
        "options": opts.as_dict(),
        "fingerprint": expr.fingerprint(),
        "samples": int(expr.n_samples),
        "expression": str(o.expression),
        "constant_targets": info["constant_targets"],
    }
    if check is not None:
        meta["prior_check"] = {k: v for k, v in check.items() if k != "check_s"}
    return meta


def _write_outputs(o: NetworkOptions, r: ResolvedOptions, W, meta: dict, reps, threads: int) -> None:
    """A chunk's part file, or the link list and its companions (W may be overwritten: consumed)."""
    if r.chunk:
        write_part(o.out, W, meta, repeats=reps)
        return
    from .report import finish_outputs

    finish_outputs(
        W,
        meta,
        o.out,
        weights=o.weights,
        summary=o.summary,
        plot=o.plot,
        top=o.top,
        max_links=o.max_links,
        threads=threads,
        repeats=reps,
        consume=True,
    )


def _metrics(o, r, expr, reg_idx, tgt_idx, engine, info, check, elapsed, compute_cpu) -> dict:
    """The stage metrics' fields of the run (:meth:`chromaflow.utils.metrics.StageMetrics.set`)."""
    return dict(
        genes=expr.n_genes,
        samples=expr.n_samples,
        regulators=int(len(reg_idx)),
        targets=int(len(tgt_idx)),
        trees=o.n_trees,
        engine=engine,
        engine_requested=o.engine,
        tree_method=o.tree_method,
        max_features=r.max_features,
        seed=o.seed,
        importance=o.importance,
        chunk=o.targets_chunk,
        compute_s=round(elapsed, 6),
        compute_cpu_s=round(compute_cpu, 6),
        targets_per_s=(len(tgt_idx) / elapsed if elapsed > 0 else None),
        constant_targets=len(info["constant_targets"]),
        prior=o.prior,
        prior_alpha=r.alpha,
        repeats=o.repeats,
        prior_check=None if check is None else check["decision"],
        prior_check_p=None if check is None else check["p"],
        prior_check_s=None if check is None else check["check_s"],
        prior_check_gate=None if check is None else check.get("gate", "correlation"),  # the correlation test has none
        prior_check_trees=None if check is None else check.get("trees_grown"),
        prior_check_reused_targets=info.get("reused_targets"),
    )
