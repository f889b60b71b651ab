"""The core of ``chromaflow predict`` (its command: cli_predict.py): a Predmoter-compatible predictions h5 from a
genome h5 (Helixer layout) or straight from a FASTA, and a checkpoint.

:class:`PredictOptions` holds the command's options and checks them once (:meth:`PredictOptions.validate`, one line
naming the option); :func:`run` validates them, checks the inputs and outputs and predicts, so a caller from Python
gets the same checks and the same bytes as the command line. ``group`` predicts several whole assemblies one after
the other in one process (:func:`read_group`), each into its own predictions h5 and metrics JSON.

Light imports only at the top: bad input fails before torch is imported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
from dataclasses import dataclass
from typing import cast

from ..utils.cli_options import resolve_threads
from ..utils.errors import ChromaflowError, OutputExistsError
from ..genome.encoding import DEFAULT_L
from ..utils.metrics import Phases, StageMetrics, process_age_s
from ..model.options import check_batch_size, check_device, check_precision
from ..utils.outputs import atomic_output, check_outputs
from ..utils.sharding import parse_part

#: levels used when --deflate names an engine without one (predictions: zlib 9 = Predmoter's bytes)
DEFLATE_DEFAULT_LEVEL = {"zlib": 9, "libdeflate": 6, "isal": 1}
#: ``--reader``: how a FASTA is parsed (auto = process on CUDA, thread on CPU)
READERS = ("auto", "thread", "process")
#: ``--index``: whether a FASTA shard reads its rows through the FASTA's index
INDEX_MODES = ("auto", "none")
#: the columns of a ``--group`` table, in order
GROUP_COLUMNS = ("input", "kind", "species", "out", "metrics")


def parse_deflate(text: str, device_type: str | None = None) -> tuple[str, int] | None:
    """``--deflate`` -> (engine, level); ``auto`` gives None until ``device_type`` is known (zlib 9 on CPU, zlib 1
    on CUDA). One-line errors for an unknown engine or level (:func:`chromaflow.fasta2h5.deflate.parse_engine`)."""
    from ..fasta2h5.deflate import parse_engine

    if str(text).strip().lower() == "auto":
        return None if device_type is None else ("zlib", 1) if device_type == "cuda" else ("zlib", 9)
    return parse_engine(text, DEFLATE_DEFAULT_LEVEL, " for predictions")


@dataclass
class PredictOptions:
    """What ``predict`` reads and writes and how it runs: the command's options, one field each (``None`` where an
    option is not given). Exactly one of ``h5``, ``fasta`` and ``group`` names the input. :meth:`validate` checks
    them once (one line naming the option); :func:`run` calls it, so a library caller gets the same checks as the
    command line."""

    model: str
    h5: str | None = None
    fasta: str | None = None
    group: str | None = None
    species: str | None = None
    subsequence_length: int | None = None
    batch_size: int | str = "auto"
    device: str = "auto"
    precision: str = "fp32"
    out: str | None = None
    shard: str | None = None
    threads: int | None = None
    precision_check_rows: int = 64
    num_workers: int = 2
    streams: int | None = None
    reader: str = "auto"
    index: str = "auto"
    deflate: str = "auto"
    metrics: str | None = None
    force: bool = False

    def validate(self) -> tuple[int, int] | None:
        """Check the options' own rules, in the command's order, and for ``fasta`` the FASTA's existence.

        ``subsequence_length`` of a FASTA is filled in (default :data:`~chromaflow.genome.encoding.DEFAULT_L`). With
        ``group`` only what a group forbids is checked here; :func:`run` checks its rows, each as the options of a
        one-assembly run.

        Returns
        -------
        tuple of (int, int) or None
            The parsed ``shard`` (i, n), 1-based; None for the whole input (and for a group).

        Raises
        ------
        ChromaflowError
            One line naming the option at fault.
        """
        self._check_values()
        if self.group is not None:
            for opt in ("out", "metrics", "species", "shard"):
                if getattr(self, opt) is not None:
                    raise ChromaflowError(f"--{opt} is not given with --group (each row of {self.group} names its own)")
            return None
        parse_deflate(self.deflate)
        if self.out is None:
            raise ChromaflowError("--out is required (the predictions h5 to write)")
        for name in ("num_workers", "streams", "threads"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ChromaflowError(f"--{name.replace('_', '-')} must be >= 1, got {v}")
        if self.precision_check_rows < 0:
            raise ChromaflowError(f"--precision-check-rows must be >= 0, got {self.precision_check_rows}")
        if self.h5 is not None:
            if self.species is not None or self.subsequence_length is not None:
                raise ChromaflowError("--species and --subsequence-length belong to --fasta (an h5 already has them)")
        else:
            self._check_fasta()
        return parse_part(self.shard, "--shard")

    def _check_values(self) -> None:
        """What argparse checks on the command line (one input, the choices, the batch size), for callers from
        Python."""
        given = [f"--{opt}" for opt in ("h5", "fasta", "group") if getattr(self, opt) is not None]
        if len(given) != 1:
            raise ChromaflowError(f"give exactly one of --h5, --fasta and --group (got {' '.join(given) or 'none'})")
        check_batch_size(self.batch_size)
        check_device(self.device)
        check_precision(self.precision)
        for opt, value, choices in (("--reader", self.reader, READERS), ("--index", self.index, INDEX_MODES)):
            if value not in choices:
                raise ChromaflowError(f"{opt} {value!r}: expected one of {', '.join(choices)}")

    def _check_fasta(self) -> None:
        """``fasta``: a species (checked), a subsequence length (checked, default filled in), a regular file."""
        from ..genome.encoding import check_length, check_species

        if self.species is None:
            raise ChromaflowError("--fasta needs --species (the name fasta2h5 would store)")
        check_species(self.species)
        self.subsequence_length = check_length(
            self.subsequence_length if self.subsequence_length is not None else DEFAULT_L
        )
        assert self.fasta is not None  # one input (_check_values), not h5
        if not os.path.exists(self.fasta):
            raise ChromaflowError(f"{self.fasta}: FASTA does not exist")
        if not os.path.isfile(self.fasta):
            raise ChromaflowError(f"{self.fasta}: FASTA is not a regular file")


def _check_model(path: str) -> None:
    """Cheap checks first, so bad input fails fast without importing torch."""
    import zipfile

    if not os.path.isfile(path):
        raise ChromaflowError(f"{path}: checkpoint does not exist")
    if not zipfile.is_zipfile(path):
        raise ChromaflowError(f"{path}: not a PyTorch zip checkpoint (no zip archive)")


def run(options: PredictOptions) -> int:
    """Predict the input (or every assembly of ``options.group``) with the checkpoint into a predictions h5.

    Parameters
    ----------
    options : PredictOptions
        The run's options; validated here (:meth:`PredictOptions.validate`).

    Returns
    -------
    int
        The exit status (0); a bad option, input or output raises a one-line
        :class:`~chromaflow.utils.errors.ChromaflowError` before anything is written.
    """
    from .sources import open_source

    phases, before_run = Phases(), process_age_s()  # start-up profile (metrics "phases_s")
    shard = options.validate()
    if options.group is not None:
        return _run_group(options, phases, before_run)
    out = options.out
    assert out is not None  # validate
    check_outputs(
        [("--out", out), ("--metrics", options.metrics)],
        [("--h5", options.h5), ("--fasta", options.fasta), ("--model", options.model)],
    )
    if os.path.exists(out) and not options.force:
        raise OutputExistsError(f"{out}: output exists (use --force to overwrite)")
    _check_model(options.model)
    with open_source(options) as source:
        return _predict(options, shard, source, phases, before_run)


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


def _member_options(options: PredictOptions, row: dict) -> PredictOptions:
    """The options of one ``--group`` row, validated: those of a one-assembly ``predict`` with the row's input and
    outputs (an error names the row's line)."""
    fasta = row["kind"] == "fasta"
    member = dataclasses.replace(
        options,
        group=None,
        shard=None,
        h5=None if fasta else row["input"],
        fasta=row["input"] if fasta else None,
        species=(row["species"] or None) if fasta else None,
        out=row["out"],
        metrics=row["metrics"] or None,
    )
    try:
        member.validate()
    except ChromaflowError as e:
        raise ChromaflowError(f"{options.group} line {row['line']}: {e}") from None
    return member


def _run_group(options: PredictOptions, phases: Phases, before_run: float | None) -> int:
    """``group``: every row checked first (options, inputs, outputs: nothing is written when one is wrong), then
    predicted in row order, each output written atomically as by a one-assembly run."""
    from .sources import open_source

    group = options.group
    assert group is not None  # run() calls this for a group only
    rows = read_group(group)
    members = [_member_options(options, row) for row in rows]
    outputs = [
        (f"{group} line {r['line']} {k}", getattr(m, k)) for r, m in zip(rows, members) for k in ("out", "metrics")
    ]
    inputs = [(f"{group} line {r['line']} input", r["input"]) for r in rows] + [("--model", options.model)]
    check_outputs(outputs, inputs)
    for r, m in zip(rows, members):
        if os.path.exists(cast(str, m.out)) and not options.force:  # a row's out is never empty (read_group)
            raise OutputExistsError(f"{m.out}: output exists (use --force to overwrite; {group} line {r['line']})")
    _check_model(options.model)
    for i, m in enumerate(members):
        if i:  # the start-up profile of the process belongs to its first member
            phases, before_run = Phases(), 0.0
        with open_source(m) as source:
            _predict(m, None, source, phases, before_run)
    return 0


def _predict(options: PredictOptions, shard, source, phases: Phases, before_run: float | None) -> int:
    """Predict the rows of ``shard`` (None: all) of the opened ``source`` into ``options.out``, writing the metrics;
    ``phases`` (and ``before_run``, the process's seconds before the stage) profile the process."""
    import torch  # heavy: only now

    from ..model.checkpoint import build_model, load_checkpoint
    from ..native.memory import tune_malloc
    from . import engine, gpumetrics, probe  # noqa: F401 - the helpers' modules: imported in the "checks_imports" phase
    from .executors import EngineStats, resolve_device

    phases.mark("checks_imports")
    tune_malloc()  # model activations and read blocks reuse heap memory instead of page-faulting fresh mmaps
    threads = resolve_threads(options.threads)
    torch.set_num_threads(threads)
    device = resolve_device(options.device)
    stats = EngineStats()
    with _stage_metrics(options, threads, device, source) as metrics:
        ckpt = load_checkpoint(options.model)
        source.prepare(ckpt.config, sharded=shard is not None)
        model = build_model(ckpt)
        phases.mark("model_load")
        # torch and the model are long-lived: keep the cyclic GC from traversing them during the run and again
        # at interpreter exit (measured: ~0.5 CPU-s per process at exit)
        gc.freeze()
        rows = source.shard_range(shard)
        batch = _batch_size(options, model, device, source, ckpt, rows, stats)
        phases.mark("batch_size")
        deflate = parse_deflate(options.deflate, device.type)
        nvml = _predict_rows(
            options,
            source,
            ckpt,
            model,
            stats,
            phases,
            shard=shard,
            rows=rows,
            batch=batch,
            device=device,
            deflate=deflate,
            threads=threads,
        )
        phases.mark("finish")
        fields = _metrics_fields(
            stats,
            source,
            batch=batch,
            rows=rows,
            deflate=deflate,
            gpu=nvml.result(),
            cfg=ckpt.config,
            phases_s=dict(before_run=before_run, **phases.as_dict()),
        )
        metrics.set(**fields, **source.metrics())
    return 0


def _stage_metrics(options: PredictOptions, threads: int, device, source) -> StageMetrics:
    """The run's metrics JSON (``options.metrics``; none without), opened with the settings of the run."""
    return StageMetrics(
        "predict",
        options.metrics,
        threads=threads,
        batch_size_requested=options.batch_size,
        num_workers=options.num_workers,
        precision=options.precision,
        shard=options.shard,
        device=str(device),
        input=source.kind,
    )


def _batch_size(options: PredictOptions, model, device, source, ckpt, rows, stats) -> int:
    """The batch size of the run: ``options.batch_size``, or for ``auto`` the probed (CUDA, cached) or default one
    (:func:`chromaflow.predict.probe.resolve_batch_size`)."""
    from .probe import batch_cache_path, resolve_batch_size

    return resolve_batch_size(
        options.batch_size,
        model=model,
        device=device,
        L=source.L,
        D=len(ckpt.config.datasets),
        precision=options.precision,
        rows=None if rows[1] is None else rows[1] - rows[0],
        stats=stats,
        cache=batch_cache_path() if device.type == "cuda" else None,
    )


def _predict_rows(options, source, ckpt, model, stats, phases, *, shard, rows, batch, device, deflate, threads):
    """The prediction loop: rows [start, end) of ``source`` through ``model`` into the predictions file, with the
    GPU sampled on CUDA; returns the finished sampler (:class:`~chromaflow.predict.gpumetrics.NvmlSampler`)."""
    from .engine import predict_feed
    from .gpumetrics import NvmlSampler

    n_out = None if rows[1] is None else rows[1] - rows[0]
    with _predictions_file(
        options, source, ckpt, shard=shard, rows=rows, batch=batch, device=device, deflate=deflate, threads=threads
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
                precision=options.precision,
                threads=threads,
                streams=options.streams or threads,
                num_workers=options.num_workers,
                check_rows=options.precision_check_rows,
                on_batch=source.on_batch,
                release=source.release,
                stats=stats,
            )
            phases.mark("loop_and_drain")
    return nvml


@contextlib.contextmanager
def _predictions_file(options, source, ckpt, *, shard, rows, batch, device, deflate, threads):
    """``options.out``, written atomically: the predictions layout for rows [start, end) of ``source`` and the shard
    attributes; yields (feed, writer) for the loop that fills it, then lets the source complete or check the rows."""
    import h5py

    from ..fasta2h5.deflate import byte_compressor
    from . import h5io
    from .writer import PredictionWriter

    (start, end), (engine, level) = rows, deflate
    n_out = None if end is None else end - start
    with atomic_output(options.out, force=options.force) as tmp:
        with h5py.File(tmp, "w") as out:
            seqids, start_ends = source.rows(start, end)
            dset = h5io.create_predictions(
                out,
                n_rows=n_out or 0,
                length=source.L,
                datasets=list(ckpt.config.datasets),
                species0=source.species0,
                model_name=options.model,
                seqids=seqids,
                start_ends=start_ends,
                level=level,
            )
            if shard is not None:
                out.attrs.update(_shard_attributes(source, ckpt, shard, start, end))
            feed = source.feed(batch, start, end, threads=threads, device=device, num_workers=options.num_workers)
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


def _shard_attributes(source, ckpt, shard: tuple[int, int], start: int, end: int) -> dict:
    """The file attributes of shard (i, n): its rows [start, end) of the input's total, the input and the model
    (``predict-merge`` checks them)."""
    return {
        "chromaflow_shard_index": shard[0],
        "chromaflow_shard_count": shard[1],
        "chromaflow_row_start": start,
        "chromaflow_row_end": end,
        "chromaflow_total_rows": source.n_total,
        "chromaflow_input_fingerprint": source.fingerprint(),
        "chromaflow_input_path": source.path,
        "chromaflow_model_sha256": ckpt.sha256,
    }


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
