"""``chromaflow make-test-model``: a tiny seeded Predmoter-layout checkpoint with MEANINGLESS weights.

The weights are random numbers from a seeded generator (plus plausible BatchNorm running statistics). They
exist so that tests and the pipeline's test profile can run ``chromaflow predict`` end to end without a real
model. Their predictions mean nothing biologically.
"""
from __future__ import annotations

import argparse

from ..common import ChromaflowError, atomic_output


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="checkpoint to write (.ckpt)")
    p.add_argument("--seed", type=int, default=0, help="random seed; same seed + options = identical weights")
    p.add_argument("--model-type", choices=("cnn", "hybrid", "bi-hybrid"), default="bi-hybrid")
    p.add_argument("--cnn-layers", type=int, default=1)
    p.add_argument("--filter-size", type=int, default=8)
    p.add_argument("--kernel-size", type=int, default=9)
    p.add_argument("--step", type=int, default=2)
    p.add_argument("--up", type=int, default=2)
    p.add_argument("--dilation", type=int, default=1)
    p.add_argument("--lstm-layers", type=int, default=1)
    p.add_argument("--hidden-size", type=int, default=8)
    p.add_argument("--bnorm", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--seq-len", type=int, default=21384, help="recorded training seq_len (prediction uses the input's L)")
    p.add_argument("--datasets", nargs="+", default=["atacseq", "h3k4me3"])
    p.add_argument("--force", action="store_true", help="overwrite an existing --out")


def run(args: argparse.Namespace) -> int:
    from .checkpoint import write_test_checkpoint
    from .model import ModelConfig

    if not 0.0 <= args.dropout < 1.0:
        raise ChromaflowError(f"--dropout must be in [0, 1), got {args.dropout}")
    cfg = ModelConfig(
        model_type=args.model_type, cnn_layers=args.cnn_layers, filter_size=args.filter_size,
        kernel_size=args.kernel_size, step=args.step, up=args.up, dilation=args.dilation,
        lstm_layers=args.lstm_layers, hidden_size=args.hidden_size, bnorm=args.bnorm, dropout=args.dropout,
        datasets=tuple(args.datasets), seq_len=args.seq_len,
    )
    cfg.validate("make-test-model")
    cfg.check_length(cfg.seq_len, "--seq-len")
    with atomic_output(args.out, force=args.force) as tmp:
        write_test_checkpoint(tmp, cfg, args.seed)
    return 0
