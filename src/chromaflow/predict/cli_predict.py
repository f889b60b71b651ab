"""``chromaflow predict``: Predmoter-compatible predictions h5 from a genome h5 (Helixer layout) or straight
from a FASTA (cut exactly as ``fasta2h5`` cuts it, no h5 written), and a checkpoint.

``--group TSV`` predicts several whole assemblies one after the other in one process, each into its own predictions h5
and metrics JSON, the same bytes as one ``predict`` per assembly: a prediction task pays torch's import, the model load
and (on CUDA) the device start once instead of once per assembly (the pipeline's ``--predict_group_mbp``, for many
small assemblies).

The command parses its options into :class:`~chromaflow.predict.core.PredictOptions` and calls the core,
:func:`chromaflow.predict.core.run`."""

from __future__ import annotations

import argparse

from ..utils.cli_options import add_run_options, options_from
from ..genome.encoding import DEFAULT_L
from ..model.options import add_inference_options
from .core import INDEX_MODES, READERS, PredictOptions
from .core import run as predict


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): input (genome h5, FASTA or ``--group``), species, subsequence length,
    output, shard, inference settings, reader and deflate engine."""
    _add_input_options(p)
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
    _add_engine_options(p)
    _add_read_write_options(p)
    add_run_options(p, metrics=True, force=True)


def _add_input_options(p: argparse.ArgumentParser) -> None:
    """The input: ``--h5``, ``--fasta`` or ``--group`` (one of them), and a FASTA's ``--species`` and
    ``--subsequence-length``."""
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


def _add_engine_options(p: argparse.ArgumentParser) -> None:
    """The prediction loop's settings: ``--precision-check-rows``, ``--num-workers`` (prefetch) and ``--streams``."""
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


def _add_read_write_options(p: argparse.ArgumentParser) -> None:
    """How the input is read (``--reader``, ``--index``) and the predictions compressed (``--deflate``)."""
    p.add_argument(
        "--reader",
        choices=READERS,
        default="auto",
        help="--fasta: parse the FASTA in a thread or in a child process (own core); "
        "auto = process on CUDA, thread on CPU",
    )
    p.add_argument(
        "--index",
        choices=INDEX_MODES,
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


def run(args: argparse.Namespace) -> int:
    """Run the command: predict the input (or every assembly of ``--group``) with the checkpoint into a predictions
    h5 (:func:`chromaflow.predict.core.run`); returns the exit status."""
    return predict(options_from(args, PredictOptions))
