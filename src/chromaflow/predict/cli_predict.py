"""``chromaflow predict``: Predmoter-compatible predictions h5 from a Helixer genome h5 and a checkpoint."""
from __future__ import annotations

import argparse
import os

from ..common import (ChromaflowError, OutputExistsError, StageMetrics, atomic_output, part_bounds, parse_part,
                      resolve_threads)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--h5", required=True, help="input genome h5 (Helixer fasta2h5 layout, data/X)")
    p.add_argument("--model", required=True, help="Predmoter checkpoint (.ckpt); stored as typed in prediction/model_name")
    p.add_argument("--out", required=True, help="output predictions h5 (Predmoter layout)")
    p.add_argument("--batch-size", type=int, default=120, help="subsequences per batch (default 120)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="auto = cuda if available, else cpu (default auto)")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="predict only shard I of N (1-based, contiguous row ranges); join with predict-merge")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: all usable CPUs)")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="fp32 = exact (default); bf16 = autocast, faster where supported, not exact")
    p.add_argument("--num-workers", type=int, default=2,
                   help="prefetch depth of the background h5 reader, in batches (default 2)")
    p.add_argument("--streams", type=int, default=None,
                   help="CPU: concurrent model streams, each with threads/streams torch threads "
                        "(default = --threads, i.e. one torch thread per stream; CUDA always 1)")
    p.add_argument("--metrics", default=None, help="write stage metrics JSON here")
    p.add_argument("--force", action="store_true", help="overwrite an existing --out")


def run(args: argparse.Namespace) -> int:
    import zipfile

    from . import h5io

    if args.batch_size < 1:
        raise ChromaflowError(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.num_workers < 1:
        raise ChromaflowError(f"--num-workers must be >= 1, got {args.num_workers}")
    if args.streams is not None and args.streams < 1:
        raise ChromaflowError(f"--streams must be >= 1, got {args.streams}")
    shard = parse_part(args.shard, "--shard")
    if os.path.exists(args.out) and not args.force:
        raise OutputExistsError(f"{args.out}: output exists (use --force to overwrite)")
    # cheap checks first, so bad input fails fast without importing torch
    if not os.path.isfile(args.model):
        raise ChromaflowError(f"{args.model}: checkpoint does not exist")
    if not zipfile.is_zipfile(args.model):
        raise ChromaflowError(f"{args.model}: not a PyTorch zip checkpoint (no zip archive)")
    fh, info = h5io.open_input(args.h5)
    with fh:
        return _predict(args, shard, fh, info)


def _predict(args, shard, fh, info) -> int:
    import h5py
    import torch  # heavy: only now

    from . import h5io
    from .checkpoint import build_model, load_checkpoint
    from .engine import resolve_device, run_prediction

    threads = resolve_threads(args.threads)
    torch.set_num_threads(threads)
    device = resolve_device(args.device)

    with StageMetrics("predict", args.metrics, threads=threads, batch_size=args.batch_size,
                      num_workers=args.num_workers, precision=args.precision, shard=args.shard,
                      device=str(device)) as metrics:
        ckpt = load_checkpoint(args.model)
        cfg = ckpt.config
        cfg.check_length(info.length, args.h5)
        model = build_model(ckpt)
        row_start, row_end = (0, info.n_rows) if shard is None else part_bounds(*shard, info.n_rows)
        n_out = row_end - row_start
        with atomic_output(args.out, force=args.force) as tmp:
            with h5py.File(tmp, "w") as out:
                dset = h5io.create_predictions(
                    out, n_rows=n_out, length=info.length, datasets=list(cfg.datasets), species0=info.species0,
                    model_name=args.model, seqids=fh["data/seqids"][row_start:row_end],
                    start_ends=fh["data/start_ends"][row_start:row_end])
                if shard is not None:
                    out.attrs.update({
                        "chromaflow_shard_index": shard[0], "chromaflow_shard_count": shard[1],
                        "chromaflow_row_start": row_start, "chromaflow_row_end": row_end,
                        "chromaflow_total_rows": info.n_rows, "chromaflow_input_fingerprint": info.fingerprint,
                        "chromaflow_input_path": args.h5, "chromaflow_model_sha256": ckpt.sha256,
                    })
                stats = run_prediction(model, fh["data/X"], dset, row_start=row_start, row_end=row_end,
                                       batch_size=args.batch_size, device=device, precision=args.precision,
                                       threads=threads, num_workers=args.num_workers,
                                       streams=args.streams or threads)
        loop = stats.loop_s
        metrics.set(
            subsequences=stats.rows, bp=stats.bp, bp_rows=stats.rows * info.length, seq_len=info.length,
            data_wait_fraction=(stats.wait_s / loop) if loop > 0 else 0.0, loop_s=loop,
            write_wait_s=stats.write_wait_s, device=stats.device, precision=stats.precision,
            batch_size_final=stats.final_batch, streams=stats.streams, intra_threads=stats.intra_threads,
            peak_gpu_bytes=stats.peak_gpu_bytes,
            rows=[row_start, row_end], total_rows=info.n_rows, model_type=cfg.model_type,
            datasets=list(cfg.datasets), notes=stats.notes,
        )
    return 0
