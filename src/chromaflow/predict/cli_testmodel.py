"""``chromaflow make-test-model``: a seeded Predmoter-layout checkpoint with MEANINGLESS weights.

The weights are random numbers from a seeded generator (plus plausible BatchNorm running statistics). They
exist so that tests, benchmarks and the pipeline's test profile can run ``chromaflow predict`` (and real Predmoter)
end to end without a real model. Their predictions mean nothing biologically. Same options and seed -> the same
bytes.
"""
from __future__ import annotations

import argparse

from ..cli_options import add_run_options
from ..errors import ChromaflowError
from ..outputs import atomic_output, check_outputs

#: architecture presets; options given on the command line override them
PRESETS = {
    # small and fast: tests and the pipeline's test profile
    "tiny": dict(model_type="bi-hybrid", cnn_layers=1, filter_size=8, kernel_size=9, step=2, up=2, dilation=1,
                 lstm_layers=1, hidden_size=8, bnorm=True, dropout=0.0),
    # the architecture of Predmoter's released bi-hybrid models (FORMATS.md §2.9: 3 conv + 3 transposed conv,
    # 2 BiLSTM, 6 batch norms, dropout between the LSTMs; 1,534,358 parameters with 2 datasets)
    "release-bihybrid": dict(model_type="bi-hybrid", cnn_layers=3, filter_size=64, kernel_size=9, step=2, up=2,
                             dilation=1, lstm_layers=2, hidden_size=128, bnorm=True, dropout=0.3),
    # Predmoter's command-line defaults (FORMATS.md §2.7: 210,390 parameters with 2 datasets)
    "predmoter-default": dict(model_type="bi-hybrid", cnn_layers=1, filter_size=64, kernel_size=9, step=2, up=2,
                              dilation=1, lstm_layers=1, hidden_size=128, bnorm=True, dropout=0.0),
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="checkpoint to write (.ckpt)")
    p.add_argument("--seed", type=int, default=0, help="random seed; same seed + options = identical bytes")
    p.add_argument("--preset", choices=sorted(PRESETS), default="tiny",
                   help="architecture preset (default tiny); release-bihybrid = the released models' architecture")
    p.add_argument("--model-type", choices=("cnn", "hybrid", "bi-hybrid"), default=None)
    for name in ("cnn-layers", "filter-size", "kernel-size", "step", "up", "dilation", "lstm-layers", "hidden-size"):
        p.add_argument(f"--{name}", type=int, default=None)
    p.add_argument("--bnorm", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--dropout", type=float, default=None)
    p.add_argument("--seq-len", type=int, default=21384, help="recorded training seq_len (prediction uses the input's L)")
    p.add_argument("--datasets", nargs="+", default=["atacseq", "h3k4me3"])
    add_run_options(p, force=True)


def run(args: argparse.Namespace) -> int:
    from .checkpoint import write_test_checkpoint
    from .model import ModelConfig

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
