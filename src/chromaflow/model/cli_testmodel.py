"""``chromaflow make-test-model``: a seeded Predmoter-layout checkpoint with MEANINGLESS weights.

The weights are random numbers from a seeded generator (plus plausible BatchNorm running statistics). They
exist so that tests, benchmarks and the pipeline's test profile can run ``chromaflow predict`` (and real Predmoter)
end to end without a real model. Their predictions mean nothing biologically. Same options and seed -> the same
bytes.
"""

from __future__ import annotations

import argparse

from ..utils.cli_options import add_run_options
from ..utils.errors import ChromaflowError
from ..utils.outputs import atomic_output, check_outputs
from .hparams import PRESETS, add_architecture_options


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): output, seed, architecture preset and overrides, seq_len, datasets."""
    p.add_argument("--out", required=True, help="checkpoint to write (.ckpt)")
    p.add_argument("--seed", type=int, default=0, help="random seed; same seed + options = identical bytes")
    p.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default="tiny",
        help="architecture preset (default tiny); release-bihybrid = the released models' architecture",
    )
    add_architecture_options(p, preset=True)
    p.add_argument(
        "--seq-len", type=int, default=21384, help="recorded training seq_len (prediction uses the input's L)"
    )
    p.add_argument("--datasets", nargs="+", default=["atacseq", "h3k4me3"])
    add_run_options(p, force=True)


def run(args: argparse.Namespace) -> int:
    """Run the command: write a test checkpoint with random weights (from ``--seed``) for the preset's architecture with
    the options given; returns the exit status."""
    from .checkpoint import write_test_checkpoint
    from .network import ModelConfig

    opts = dict(PRESETS[args.preset])
    for key in opts:
        given = getattr(args, key)
        if given is not None:
            opts[key] = given
    if not 0.0 <= opts["dropout"] < 1.0:
        raise ChromaflowError(f"--dropout must be in [0, 1), got {opts['dropout']}")
    cfg = ModelConfig(datasets=tuple(args.datasets), seq_len=args.seq_len, **opts)
    cfg.validate("make-test-model")
    cfg.check_length(cfg.seq_len, "--seq-len")
    check_outputs([("--out", args.out)])
    with atomic_output(args.out, force=args.force) as tmp:
        write_test_checkpoint(tmp, cfg, args.seed)
    return 0
