"""``chromaflow predict``: Predmoter-compatible predictions h5 from a genome h5 (Helixer layout) or straight
from a FASTA (cut exactly as ``fasta2h5`` cuts it, no h5 written), and a checkpoint."""
from __future__ import annotations

import argparse
import gc
import os

from ..common import (ChromaflowError, OutputExistsError, Phases, StageMetrics, add_run_options, atomic_output,
                      check_outputs, part_bounds, parse_part, process_age_s, resolve_threads)
from ..genome.encoding import DEFAULT_L


def _batch_size(text: str) -> str | int:
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1 or 'auto', got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1 or 'auto', got {text!r}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--h5", help="input genome h5 (Helixer fasta2h5 layout, data/X)")
    src.add_argument("--fasta", help="input FASTA (plain, gzip or bgzip): rows are cut as fasta2h5 cuts them, "
                                     "nothing else is written")
    p.add_argument("--species", default=None, help="--fasta only: species stored in data/species (ASCII, <= 25 bytes)")
    p.add_argument("--subsequence-length", type=int, default=None, metavar="L",
                   help=f"--fasta only: chunk length L (default {DEFAULT_L}); must be divisible by the model's "
                        "step**cnn_layers")
    p.add_argument("--model", required=True, help="Predmoter checkpoint (.ckpt); stored as typed in prediction/model_name")
    p.add_argument("--out", required=True, help="output predictions h5 (Predmoter layout)")
    p.add_argument("--batch-size", type=_batch_size, default="auto",
                   help="subsequences per batch, or auto (default): on CUDA the largest batch that fits (probed), "
                        "on CPU 120. Results do not depend on it")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="auto = cuda if available, else cpu (default auto)")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="predict only shard I of N (1-based, contiguous row ranges); join with predict-merge")
    add_run_options(p, threads="torch CPU threads (default: all usable CPUs)", threads_default=None)
    p.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32",
                   help="fp32 = exact (default); bf16/fp16 = autocast, faster on GPUs, not exact (the deviation "
                        "from fp32 on a sample of rows is written to the metrics)")
    p.add_argument("--precision-check-rows", type=int, default=64, metavar="N",
                   help="bf16/fp16: rows also run in fp32 to measure the deviation (default 64, 0 = none)")
    p.add_argument("--num-workers", type=int, default=2,
                   help="prefetch depth of the background reader, in batches (default 2)")
    p.add_argument("--streams", type=int, default=None,
                   help="CPU: concurrent model streams, each with threads/streams torch threads "
                        "(default = --threads, i.e. one torch thread per stream; CUDA always 1)")
    p.add_argument("--reader", choices=("auto", "thread", "process"), default="auto",
                   help="--fasta: parse the FASTA in a thread or in a child process (own core); "
                        "auto = process on CUDA, thread on CPU")
    p.add_argument("--deflate", default="auto", metavar="ENGINE[:LEVEL]",
                   help="how the predictions' gzip chunks are compressed (values are the same with every choice): "
                        "zlib (level 9 without :LEVEL: Predmoter's own bytes), libdeflate (default level 6) or "
                        "isal (level 1; its bytes may differ between CPUs). auto (default): zlib:9 on CPU, "
                        "zlib:1 on CUDA, where level 9 cannot keep up with the GPU (measured: docs/predict.md, "
                        "GPU); level 1 files are about 2-3x larger than level 9's")
    add_run_options(p, metrics=True, force=True)


#: levels used when --deflate names an engine without one (predictions: zlib 9 = Predmoter's bytes)
DEFLATE_DEFAULT_LEVEL = {"zlib": 9, "libdeflate": 6, "isal": 1}


def parse_deflate(text: str, device_type: str | None = None) -> tuple[str, int] | None:
    """``--deflate`` -> (engine, level); ``auto`` gives None until ``device_type`` is known (zlib 9 on CPU, zlib 1
    on CUDA). One-line errors for an unknown engine or level (:func:`chromaflow.fasta2h5.deflate.parse_engine`)."""
    from ..fasta2h5.deflate import parse_engine

    if str(text).strip().lower() == "auto":
        return None if device_type is None else ("zlib", 1) if device_type == "cuda" else ("zlib", 9)
    return parse_engine(text, DEFLATE_DEFAULT_LEVEL, " for predictions")


def _check_args(args) -> None:
    parse_deflate(args.deflate)
    for name in ("num_workers", "streams", "threads"):
        v = getattr(args, name)
        if v is not None and v < 1:
            raise ChromaflowError(f"--{name.replace('_', '-')} must be >= 1, got {v}")
    if args.precision_check_rows < 0:
        raise ChromaflowError(f"--precision-check-rows must be >= 0, got {args.precision_check_rows}")
    if args.h5 is not None:
        if args.species is not None or args.subsequence_length is not None:
            raise ChromaflowError("--species and --subsequence-length belong to --fasta (an h5 already has them)")
    else:
        from ..genome.encoding import check_length, check_species

        if args.species is None:
            raise ChromaflowError("--fasta needs --species (the name fasta2h5 would store)")
        check_species(args.species)
        args.subsequence_length = check_length(args.subsequence_length if args.subsequence_length is not None
                                               else DEFAULT_L)
        if not os.path.exists(args.fasta):
            raise ChromaflowError(f"{args.fasta}: FASTA does not exist")
        if not os.path.isfile(args.fasta):
            raise ChromaflowError(f"{args.fasta}: FASTA is not a regular file")


def run(args: argparse.Namespace) -> int:
    import zipfile

    from . import h5io

    args.phases, args.process_age_s = Phases(), process_age_s()  # start-up profile (metrics "phases_s")
    _check_args(args)
    shard = parse_part(args.shard, "--shard")
    check_outputs([("--out", args.out), ("--metrics", args.metrics)],
                  [("--h5", args.h5), ("--fasta", args.fasta), ("--model", args.model)])
    if os.path.exists(args.out) and not args.force:
        raise OutputExistsError(f"{args.out}: output exists (use --force to overwrite)")
    # cheap checks first, so bad input fails fast without importing torch
    if not os.path.isfile(args.model):
        raise ChromaflowError(f"{args.model}: checkpoint does not exist")
    if not zipfile.is_zipfile(args.model):
        raise ChromaflowError(f"{args.model}: not a PyTorch zip checkpoint (no zip archive)")
    if args.fasta is not None:
        return _predict(args, shard, None, None)
    fh, info = h5io.open_input(args.h5)
    with fh:
        return _predict(args, shard, fh, info)


def _predict(args, shard, fh, info) -> int:
    import h5py
    import numpy as np
    import torch  # heavy: only now

    from ..fasta2h5.deflate import byte_compressor
    from ..common import tune_malloc
    from . import h5io
    from .checkpoint import build_model, load_checkpoint
    from .engine import predict_feed
    from .executors import EngineStats, pinned_pool, resolve_device
    from .feed import FastaFeed, H5Feed
    from .probe import batch_cache_path, resolve_batch_size
    from .writer import PredictionWriter
    from .gpumetrics import NvmlSampler

    phases = args.phases
    phases.mark("checks_imports")
    tune_malloc()  # model activations and read blocks reuse heap memory instead of page-faulting fresh mmaps
    threads = resolve_threads(args.threads)
    torch.set_num_threads(threads)
    device = resolve_device(args.device)
    fasta = args.fasta
    stats = EngineStats()

    with StageMetrics("predict", args.metrics, threads=threads, batch_size_requested=args.batch_size,
                      num_workers=args.num_workers, precision=args.precision, shard=args.shard,
                      device=str(device), input="fasta" if fasta else "h5") as metrics:
        ckpt = load_checkpoint(args.model)
        cfg = ckpt.config
        layout = None
        if fasta:
            from ..genome.layout import scan_layout

            L = args.subsequence_length
            cfg.check_length(L, f"{fasta} (--subsequence-length)")
            species0 = args.species.encode("ascii")
            if shard is not None:  # the row count and fingerprint are needed before predicting: one scan
                layout = scan_layout(fasta, L, species0)
                n_total = layout.n_rows
            else:
                n_total = None
        else:
            L = info.length
            cfg.check_length(L, args.h5)
            species0, n_total = info.species0, info.n_rows
        model = build_model(ckpt)
        phases.mark("model_load")
        # torch and the model are long-lived: keep the cyclic GC from traversing them during the run and again
        # at interpreter exit (measured: ~0.5 CPU-s per process at exit)
        gc.freeze()
        if shard is None:
            row_start, row_end = 0, n_total
        else:
            row_start, row_end = part_bounds(*shard, n_total)
        n_out = None if row_end is None else row_end - row_start
        D = len(cfg.datasets)
        batch = resolve_batch_size(args.batch_size, model=model, device=device, L=L, D=D,
                                   precision=args.precision, rows=n_out, stats=stats,
                                   cache=batch_cache_path() if device.type == "cuda" else None)
        phases.mark("batch_size")
        use_cuda = device.type == "cuda"
        engine, level = parse_deflate(args.deflate, device.type)
        reader = args.reader if args.reader != "auto" else ("process" if use_cuda else "thread")
        pool = None
        collected: list = []
        with atomic_output(args.out, force=args.force) as tmp:
            with h5py.File(tmp, "w") as out:
                if fasta:
                    if layout is not None:
                        seqids, start_ends = layout.seqids()[row_start:row_end], layout.start_ends()[row_start:row_end]
                    else:
                        seqids, start_ends = np.zeros(0, "S50"), np.zeros((0, 2), np.int64)
                else:
                    seqids, start_ends = fh["data/seqids"][row_start:row_end], fh["data/start_ends"][row_start:row_end]
                dset = h5io.create_predictions(
                    out, n_rows=n_out or 0, length=L, datasets=list(cfg.datasets), species0=species0,
                    model_name=args.model, seqids=seqids, start_ends=start_ends, level=level)
                if shard is not None:
                    out.attrs.update({
                        "chromaflow_shard_index": shard[0], "chromaflow_shard_count": shard[1],
                        "chromaflow_row_start": row_start, "chromaflow_row_end": row_end,
                        "chromaflow_total_rows": n_total,
                        "chromaflow_input_fingerprint": layout.fingerprint() if fasta else info.fingerprint,
                        "chromaflow_input_path": fasta or args.h5, "chromaflow_model_sha256": ckpt.sha256,
                    })
                if fasta:
                    depth = max(1, args.num_workers)
                    pool = pinned_pool(depth + 3 + (2 if use_cuda else 0), batch, L, pin=use_cuda)
                    feed = FastaFeed(fasta, L, batch, pool, row_start=row_start, row_end=row_end, reader=reader)
                else:
                    feed = H5Feed(fh["data/X"], args.h5, batch, row_start=row_start, row_end=row_end,
                                  threads=threads, mode="x")
                writer = PredictionWriter(dset, row_start, pool_threads=threads, depth=2, grow=n_out is None,
                                          compress=byte_compressor(engine, level))
                on_batch = (lambda b: collected.append((b.seqids, b.start_ends))) if fasta else None
                release = (lambda b: pool.release(b.slot)) if pool is not None else None
                with NvmlSampler([device.index or 0] if use_cuda else None) as nvml:
                    phases.mark("setup")
                    predict_feed(model, feed, writer, n_rows=n_out, batch_size=batch, device=device,
                                 precision=args.precision, threads=threads, streams=args.streams or threads,
                                 num_workers=args.num_workers, check_rows=args.precision_check_rows,
                                 on_batch=on_batch, release=release, stats=stats)
                    phases.mark("loop_and_drain")
                if fasta:
                    got_ids = [s for ids, _ in collected for s in ids]
                    got_se = np.concatenate([se for _, se in collected]) if collected else np.zeros((0, 2), np.int64)
                    if layout is None:
                        h5io.finalize_rows(out, seqids=np.array(got_ids, dtype="S50"), start_ends=got_se)
                    elif not (np.array_equal(got_se, start_ends) and list(seqids) == got_ids):
                        raise ChromaflowError(f"{fasta}: rows changed between the layout scan and prediction "
                                              "(was the file modified while it was read?)")
        phases.mark("finish")
        loop = stats.loop_s
        timing = stats.gpu_timing or {}
        gpu = nvml.result()
        fields = dict(
            subsequences=stats.rows, bp=stats.bp, bp_rows=stats.rows * L, seq_len=L,
            data_wait_fraction=timing.get("data_wait_fraction", (stats.wait_s / loop) if loop > 0 else 0.0),
            data_wait_source="cuda events (compute-stream idle time)" if timing else "host wait for the reader",
            host_wait_fraction=(stats.wait_s / loop) if loop > 0 else 0.0, loop_s=loop,
            write_wait_s=stats.write_wait_s, deflate=f"{engine}:{level}", device=stats.device, precision=stats.precision,
            batch_size=batch, batch_probe=stats.batch_probe or None, batch_probe_source=stats.batch_probe_source,
            batch_size_final=stats.final_batch, drain_s=stats.drain_s,
            phases_s=dict(before_run=args.process_age_s, **phases.as_dict()),
            streams=stats.streams, intra_threads=stats.intra_threads,
            peak_gpu_bytes=stats.peak_gpu_bytes, gpu=gpu, gpu_timing=stats.gpu_timing,
            gpu_util_pct=gpu["devices"][0]["utilization_mean_pct"] if gpu.get("available") else None,
            transfer_dtypes=stats.transfer_dtypes or None, h2d_bytes=stats.h2d_bytes or None,
            d2h_bytes=stats.d2h_bytes or None, precision_check=stats.precision_check,
            rows=[row_start, row_start + stats.rows], total_rows=n_total if n_total is not None else stats.rows,
            model_type=cfg.model_type, datasets=list(cfg.datasets), notes=stats.notes,
        )
        if fasta:
            fields.update(fasta=fasta, species=args.species, subsequence_length=L, reader=reader,
                          records=len(feed.records) if layout is None else len(layout.records))
        metrics.set(**fields)
    return 0
