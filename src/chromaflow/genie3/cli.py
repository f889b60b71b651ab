"""``chromaflow genie3``: GENIE3 network inference from an expression matrix (see docs/genie3.md).

The command parses its options into :class:`~chromaflow.genie3.network.NetworkOptions` and calls the core,
:func:`chromaflow.genie3.network.run`, which validates them.
"""

from __future__ import annotations

import argparse

from ..utils.cli_options import add_run_options, options_from
from .core import ENGINES, IMPORTANCES, METHODS
from .expression import LAYOUTS
from .network import PRIOR_CHECKS, NetworkOptions
from .network import run as infer_network
from .report import add_output_arguments


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): expression matrix and layout, regulators, forest and importance settings,
    engine, target chunk, prior and repeats, and the outputs."""
    _add_input_options(p)
    _add_forest_options(p)
    _add_prior_options(p)
    p.add_argument(
        "--repeats",
        type=int,
        default=1,
        metavar="R",
        help="grow R independent forests per target (seeds from --seed and the repeat index) and add "
        "the columns confidence (fraction of repeats ranking the link within --top) and mean_rank; "
        "1 (default): the plain link list",
    )
    add_output_arguments(
        p, "ranked link list (.tsv.gz: gzip; any other name: plain text), or the part file with --targets-chunk"
    )


def _add_input_options(p: argparse.ArgumentParser) -> None:
    """The expression matrix, its layout and the regulators."""
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


def _add_forest_options(p: argparse.ArgumentParser) -> None:
    """How the forests are grown: tree method, features per split, trees, seed, threads, importance, engine, and
    which targets (a chunk)."""
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


def _add_prior_options(p: argparse.ArgumentParser) -> None:
    """The regulator -> target prior, its strength and its check against the expression."""
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
        choices=PRIOR_CHECKS,
        help="auto (default): before the weighted forest, test whether the prior is related to the expression "
        "more than the same prior with its gene ids swapped (Mantel's relabelling test of the pairs' double-centred "
        "Spearman rho^2, two-sided, 999 seeded relabellings) and run without it (alpha 0: the bytes of no prior) "
        "when p >= --prior-check-level; correlation: the one-sided test before issue 56 (do the prior's regulators "
        "correlate more with each target than its other regulators?); prediction: grow a sample of targets' "
        "forests with the prior and with its values permuted over each target's regulators and keep the prior only "
        "when it predicts the out-of-bag samples better (one-sided Wilcoxon signed-rank p < --prior-check-level); "
        "off: always use the prior",
    )
    p.add_argument(
        "--prior-check-level",
        type=float,
        default=None,
        metavar="P",
        help="level of the prior check's test (default 0.01)",
    )
    p.add_argument(
        "--prior-check-targets",
        type=float,
        default=None,
        metavar="F",
        help="--prior-check prediction: the share of the genes it samples as targets, in (0, 1] (default 0.1; at "
        "least 30 targets); it costs up to 2 x F forests per gene on top of the run (F when it keeps an RF prior)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the command: infer the regulator-target network of the expression matrix with GENIE3 (all targets, or one
    ``--targets-chunk``) and write its outputs (:func:`chromaflow.genie3.network.run`); returns the exit status."""
    return infer_network(options_from(args, NetworkOptions))
