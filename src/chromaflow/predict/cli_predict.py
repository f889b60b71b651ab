"""``chromaflow predict``: Predmoter-compatible predictions h5 from a genome h5 (Helixer layout) or straight
from a FASTA (cut exactly as ``fasta2h5`` cuts it, no h5 written), and a checkpoint.

``--group TSV`` predicts several whole assemblies one after the other in one process, each into its own
predictions h5 and metrics JSON, the same bytes as one ``predict`` per assembly: a prediction task pays torch's
import, the model load and (on CUDA) the device start once instead of once per assembly (the pipeline's
``--predict_group_mbp``, for many small assemblies)."""

from __future__ import annotations

import argparse
import contextlib
import gc
import os

from ..cli_options import add_run_options, resolve_threads
from ..errors import ChromaflowError, OutputExistsError
from ..genome.encoding import DEFAULT_L
from ..metrics import Phases, StageMetrics, process_age_s
from ..model.options import add_inference_options
from ..outputs import atomic_output, check_outputs
from ..sharding import parse_part


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): input (genome h5, FASTA or ``--group``), species, subsequence length,
    output, shard, inference settings, reader and deflate engine."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--h5", help="input genome h5 (Helixer fasta2h5 layout, data/X)")
    src.add_argument(
        "--fasta",
        help="input FASTA (plain, gzip or bgzip): rows are cut as fasta2h5 cuts them, nothing else is written",
    )
    src.add_argument(
        "--group",
        metavar="TSV",
        help="several whole assemblies in one process: a TSV with the header 'input kind species out "
        "metrics' and one row per assembly (kind h5 or fasta; species for fasta, else empty; "
        "metrics may be empty); --out, --metrics, --species and --shard are then not given",
    )
    p.add_argument("--species", default=None, help="--fasta only: species stored in data/species (ASCII, <= 25 bytes)")
    p.add_argument(
        "--subsequence-length",
        type=int,
        default=None,
        metavar="L",
        help=f"--fasta only: chunk length L (default {DEFAULT_L}); must be divisible by the model's step**cnn_layers",
    )
    add_inference_options(
        p,
        model_help="Predmoter checkpoint (.ckpt); stored as typed in prediction/model_name",
        batch_help="subsequences per batch, or auto (default): on CUDA the largest batch that fits (probed), "
        "on CPU 120. Results do not depend on it",
        precision_help="fp32 = exact (default); bf16/fp16 = autocast, faster on GPUs, not exact (the deviation "
        "from fp32 on a sample of rows is written to the metrics)",
    )
    p.add_argument("--out", help="output predictions h5 (Predmoter layout); required except with --group")
    p.add_argument(
        "--shard",
        default=None,
        metavar="I/N",
        help="predict only shard I of N (1-based, contiguous row ranges); join with predict-merge",
    )
    add_run_options(p, threads="torch CPU threads (default: all usable CPUs)", threads_default=None)
    p.add_argument(
        "--precision-check-rows",
        type=int,
        default=64,
        metavar="N",
        help="bf16/fp16: rows also run in fp32 to measure the deviation (default 64, 0 = none)",
    )
    p.add_argument(
        "--num-workers", type=int, default=2, help="prefetch depth of the background reader, in batches (default 2)"
    )
    p.add_argument(
        "--streams",
        type=int,
        default=None,
        help="CPU: concurrent model streams, each with threads/streams torch threads "
        "(default = --threads, i.e. one torch thread per stream; CUDA always 1)",
    )
    p.add_argument(
        "--reader",
        choices=("auto", "thread", "process"),
        default="auto",
        help="--fasta: parse the FASTA in a thread or in a child process (own core); "
        "auto = process on CUDA, thread on CPU",
    )
    p.add_argument(
        "--index",
        choices=("auto", "none"),
        default="auto",
        help="--fasta --shard: auto (default) = read only the shard's rows through the FASTA's index "
        "<fasta>.fai (and <fasta>.gzi for bgzip; predict-plan makes them) where it exists, else "
        "scan the whole FASTA; none = always scan",
    )
    p.add_argument(
        "--deflate",
        default="auto",
        metavar="ENGINE[:LEVEL]",
        help="how the predictions' gzip chunks are compressed (values are the same with every choice): "
        "zlib (level 9 without :LEVEL: Predmoter's own bytes), libdeflate (default level 6) or "
        "isal (level 1; its bytes may differ between CPUs). auto (default): zlib:9 on CPU, "
        "zlib:1 on CUDA, where level 9 cannot keep up with the GPU (measured: docs/predict.md, "
        "GPU); level 1 files are about 2-3x larger than level 9's",
    )
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
    if args.out is None:
        raise ChromaflowError("--out is required (the predictions h5 to write)")
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
        args.subsequence_length = check_length(
            args.subsequence_length if args.subsequence_length is not None else DEFAULT_L
        )
        if not os.path.exists(args.fasta):
            raise ChromaflowError(f"{args.fasta}: FASTA does not exist")
        if not os.path.isfile(args.fasta):
            raise ChromaflowError(f"{args.fasta}: FASTA is not a regular file")


def _check_model(path: str) -> None:
    """Cheap checks first, so bad input fails fast without importing torch."""
    import zipfile

    if not os.path.isfile(path):
        raise ChromaflowError(f"{path}: checkpoint does not exist")
    if not zipfile.is_zipfile(path):
        raise ChromaflowError(f"{path}: not a PyTorch zip checkpoint (no zip archive)")


def run(args: argparse.Namespace) -> int:
    """Run the command: predict the input (or every assembly of ``--group``) with the checkpoint into a predictions
    h5; returns the exit status."""
    from .sources import open_source

    args.phases, args.process_age_s = Phases(), process_age_s()  # start-up profile (metrics "phases_s")
    if args.group is not None:
        return _run_group(args)
    _check_args(args)
    shard = parse_part(args.shard, "--shard")
    check_outputs(
        [("--out", args.out), ("--metrics", args.metrics)],
        [("--h5", args.h5), ("--fasta", args.fasta), ("--model", args.model)],
    )
    if os.path.exists(args.out) and not args.force:
        raise OutputExistsError(f"{args.out}: output exists (use --force to overwrite)")
    _check_model(args.model)
    with open_source(args) as source:
        return _predict(args, shard, source)


GROUP_COLUMNS = ("input", "kind", "species", "out", "metrics")


def read_group(path: str) -> list[dict]:
    """The rows of a ``--group`` TSV: {input, kind, species, out, metrics} with a one-line error naming the line."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ChromaflowError(f"{path}: cannot read the --group table ({e.__class__.__name__}: {e})") from None
    if not lines or tuple(lines[0].split("\t")) != GROUP_COLUMNS:
        raise ChromaflowError(f"{path} line 1: the header must be {' '.join(GROUP_COLUMNS)} (tab-separated)")
    rows = []
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = line.split("\t")
        if len(cells) != len(GROUP_COLUMNS):
            raise ChromaflowError(f"{path} line {n}: {len(cells)} columns, expected {len(GROUP_COLUMNS)}")
        row: dict[str, str | int] = dict(zip(GROUP_COLUMNS, cells))
        if row["kind"] not in ("h5", "fasta"):
            raise ChromaflowError(f"{path} line {n}: kind must be h5 or fasta (got {row['kind']!r})")
        if not row["input"] or not row["out"]:
            raise ChromaflowError(f"{path} line {n}: input and out must not be empty")
        row["line"] = n
        rows.append(row)
    if not rows:
        raise ChromaflowError(f"{path}: the --group table lists no assembly")
    return rows


def _member_args(args: argparse.Namespace, row: dict) -> argparse.Namespace:
    """The arguments of one ``--group`` row: those of a one-assembly ``predict`` with the row's input and outputs."""
    m = argparse.Namespace(**vars(args))
    m.group, m.shard = None, None
    m.h5 = row["input"] if row["kind"] == "h5" else None
    m.fasta = row["input"] if row["kind"] == "fasta" else None
    m.species = (row["species"] or None) if row["kind"] == "fasta" else None
    m.out, m.metrics = row["out"], row["metrics"] or None
    return m


def _run_group(args: argparse.Namespace) -> int:
    """``--group``: every row checked first (options, inputs, outputs: nothing is written when one is wrong), then
    predicted in row order, each output written atomically as by a one-assembly run."""
    from .sources import open_source

    for opt in ("out", "metrics", "species", "shard"):
        if getattr(args, opt) is not None:
            raise ChromaflowError(f"--{opt} is not given with --group (each row of {args.group} names its own)")
    rows = read_group(args.group)
    members = []
    for row in rows:
        m = _member_args(args, row)
        try:
            _check_args(m)
        except ChromaflowError as e:
            raise ChromaflowError(f"{args.group} line {row['line']}: {e}") from None
        members.append(m)
    outputs = [
        (f"{args.group} line {r['line']} {k}", getattr(m, k)) for r, m in zip(rows, members) for k in ("out", "metrics")
    ]
    inputs = [(f"{args.group} line {r['line']} input", r["input"]) for r in rows] + [("--model", args.model)]
    check_outputs(outputs, inputs)
    for r, m in zip(rows, members):
        if os.path.exists(m.out) and not args.force:
            raise OutputExistsError(f"{m.out}: output exists (use --force to overwrite; {args.group} line {r['line']})")
    _check_model(args.model)
    for i, m in enumerate(members):
        if i:  # the start-up profile of the process belongs to its first member
            m.phases, m.process_age_s = Phases(), 0.0
        with open_source(m) as source:
            _predict(m, None, source)
    return 0


def _predict(args, shard, source) -> int:
    import torch  # heavy: only now

    from ..model.checkpoint import build_model, load_checkpoint
    from ..native.memory import tune_malloc
    from .engine import predict_feed
    from .executors import EngineStats, resolve_device
    from .gpumetrics import NvmlSampler
    from .probe import batch_cache_path, resolve_batch_size

    phases = args.phases
    phases.mark("checks_imports")
    tune_malloc()  # model activations and read blocks reuse heap memory instead of page-faulting fresh mmaps
    threads = resolve_threads(args.threads)
    torch.set_num_threads(threads)
    device = resolve_device(args.device)
    stats = EngineStats()

    with StageMetrics(
        "predict",
        args.metrics,
        threads=threads,
        batch_size_requested=args.batch_size,
        num_workers=args.num_workers,
        precision=args.precision,
        shard=args.shard,
        device=str(device),
        input=source.kind,
    ) as metrics:
        ckpt = load_checkpoint(args.model)
        source.prepare(ckpt.config, sharded=shard is not None)
        model = build_model(ckpt)
        phases.mark("model_load")
        # torch and the model are long-lived: keep the cyclic GC from traversing them during the run and again
        # at interpreter exit (measured: ~0.5 CPU-s per process at exit)
        gc.freeze()
        rows = source.shard_range(shard)
        n_out = None if rows[1] is None else rows[1] - rows[0]
        batch = resolve_batch_size(
            args.batch_size,
            model=model,
            device=device,
            L=source.L,
            D=len(ckpt.config.datasets),
            precision=args.precision,
            rows=n_out,
            stats=stats,
            cache=batch_cache_path() if device.type == "cuda" else None,
        )
        phases.mark("batch_size")
        deflate = parse_deflate(args.deflate, device.type)
        with _predictions_file(
            args, source, ckpt, shard=shard, rows=rows, batch=batch, device=device, deflate=deflate, threads=threads
        ) as (feed, writer):
            with NvmlSampler([device.index or 0] if device.type == "cuda" else None) as nvml:
                phases.mark("setup")
                predict_feed(
                    model,
                    feed,
                    writer,
                    n_rows=n_out,
                    batch_size=batch,
                    device=device,
                    precision=args.precision,
                    threads=threads,
                    streams=args.streams or threads,
                    num_workers=args.num_workers,
                    check_rows=args.precision_check_rows,
                    on_batch=source.on_batch,
                    release=source.release,
                    stats=stats,
                )
                phases.mark("loop_and_drain")
        phases.mark("finish")
        fields = _metrics_fields(
            stats,
            source,
            batch=batch,
            rows=rows,
            deflate=deflate,
            gpu=nvml.result(),
            cfg=ckpt.config,
            phases_s=dict(before_run=args.process_age_s, **phases.as_dict()),
        )
        metrics.set(**fields, **source.metrics())
    return 0


@contextlib.contextmanager
def _predictions_file(args, source, ckpt, *, shard, rows, batch, device, deflate, threads):
    """``args.out``, written atomically: the predictions layout for rows [start, end) of ``source`` and the shard
    attributes; yields (feed, writer) for the loop that fills it, then lets the source complete or check the rows."""
    import h5py

    from ..fasta2h5.deflate import byte_compressor
    from . import h5io
    from .writer import PredictionWriter

    (start, end), (engine, level) = rows, deflate
    n_out = None if end is None else end - start
    with atomic_output(args.out, force=args.force) as tmp:
        with h5py.File(tmp, "w") as out:
            seqids, start_ends = source.rows(start, end)
            dset = h5io.create_predictions(
                out,
                n_rows=n_out or 0,
                length=source.L,
                datasets=list(ckpt.config.datasets),
                species0=source.species0,
                model_name=args.model,
                seqids=seqids,
                start_ends=start_ends,
                level=level,
            )
            if shard is not None:
                out.attrs.update(
                    {
                        "chromaflow_shard_index": shard[0],
                        "chromaflow_shard_count": shard[1],
                        "chromaflow_row_start": start,
                        "chromaflow_row_end": end,
                        "chromaflow_total_rows": source.n_total,
                        "chromaflow_input_fingerprint": source.fingerprint(),
                        "chromaflow_input_path": source.path,
                        "chromaflow_model_sha256": ckpt.sha256,
                    }
                )
            feed = source.feed(batch, start, end, threads=threads, device=device, num_workers=args.num_workers)
            yield (
                feed,
                PredictionWriter(
                    dset,
                    start,
                    pool_threads=threads,
                    depth=2,
                    grow=n_out is None,
                    compress=byte_compressor(engine, level),
                ),
            )
            source.finish(out)


def _metrics_fields(stats, source, *, batch, rows, deflate, gpu, cfg, phases_s) -> dict:
    """The metrics JSON's fields of a finished run (the source adds its own)."""
    loop, L = stats.loop_s, source.L
    timing = stats.gpu_timing or {}
    return dict(
        subsequences=stats.rows,
        bp=stats.bp,
        bp_rows=stats.rows * L,
        seq_len=L,
        data_wait_fraction=timing.get("data_wait_fraction", (stats.wait_s / loop) if loop > 0 else 0.0),
        data_wait_source="cuda events (compute-stream idle time)" if timing else "host wait for the reader",
        host_wait_fraction=(stats.wait_s / loop) if loop > 0 else 0.0,
        loop_s=loop,
        write_wait_s=stats.write_wait_s,
        deflate="{}:{}".format(*deflate),
        device=stats.device,
        precision=stats.precision,
        batch_size=batch,
        batch_probe=stats.batch_probe or None,
        batch_probe_source=stats.batch_probe_source,
        batch_size_final=stats.final_batch,
        drain_s=stats.drain_s,
        phases_s=phases_s,
        streams=stats.streams,
        intra_threads=stats.intra_threads,
        peak_gpu_bytes=stats.peak_gpu_bytes,
        gpu=gpu,
        gpu_timing=stats.gpu_timing,
        gpu_util_pct=gpu["devices"][0]["utilization_mean_pct"] if gpu.get("available") else None,
        transfer_dtypes=stats.transfer_dtypes or None,
        h2d_bytes=stats.h2d_bytes or None,
        d2h_bytes=stats.d2h_bytes or None,
        precision_check=stats.precision_check,
        rows=[rows[0], rows[0] + stats.rows],
        total_rows=source.n_total if source.n_total is not None else stats.rows,
        model_type=cfg.model_type,
        datasets=list(cfg.datasets),
        notes=stats.notes,
    )
