"""The ``chromaflow`` command line: one subcommand per pipeline stage.

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and ``run(args) -> int``.
Only the chosen subcommand's module is imported, so ``chromaflow fasta2h5`` never pays for torch.
Errors a user can fix (:class:`~chromaflow.utils.errors.ChromaflowError`, and OS errors such as a full
disk) print one line ``chromaflow <command>: error: <message>`` and exit non-zero.
"""

from __future__ import annotations

import argparse
import errno
import gc
import importlib
import os
import re
import signal
import sys
from typing import cast

from . import __version__
from .utils.errors import ChromaflowError
from .utils.outputs import (
    CREATED_OUTPUTS,
    TEMP_MIDDLE,
    release_output_locks,
    remove_created_outputs,
    remove_live_temporaries,
)
from .utils.signals import handle_stop_signals, raise_if_stopped

#: subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "fasta2h5": ("chromaflow.fasta2h5.cli", "FASTA -> Helixer-layout HDF5 (one-hot, chunked, both strands)"),
    "predict": ("chromaflow.predict.cli_predict", "Predmoter-compatible coverage prediction from a genome h5"),
    "predict-plan": (
        "chromaflow.predict.cli_plan",
        "count an assembly's rows (FASTA or genome h5) and plan its prediction shards",
    ),
    "predict-merge": ("chromaflow.predict.cli_merge", "join --shard outputs into one predictions h5"),
    "attribute": (
        "chromaflow.interpret.cli_attribute",
        "per-base contribution scores of a model for regions (Integrated Gradients or in-silico mutagenesis)",
    ),
    "discover-motifs": (
        "chromaflow.interpret.cli_discover",
        "motifs a model learned: TF-MoDISco on attribute's contributions, matched to JASPAR by TOMTOM",
    ),
    "make-test-model": (
        "chromaflow.model.cli_testmodel",
        "write a tiny seeded Predmoter-layout checkpoint (meaningless weights, for tests)",
    ),
    "bigwig": ("chromaflow.bigwig.cli", "predictions h5 -> bigWig/bedGraph tracks, chrom.sizes, IGV session, UCSC hub"),
    "gene-accessibility": (
        "chromaflow.annotation.cli_accessibility",
        "per-gene promoter (TSS window) mean, max and percentile of predicted coverage",
    ),
    "motif-prior": (
        "chromaflow.motifs.cli",
        "motif scan of promoter windows -> (TF, target) prior for GENIE3, optionally weighted by predicted "
        "accessibility",
    ),
    "peaks": (
        "chromaflow.peaks.cli",
        "narrowPeak calls on a predicted track (predictions h5 or bigWig), equal to MACS3 bdgpeakcall; --cutoff auto "
        "= F1-best",
    ),
    "genie3": ("chromaflow.genie3.cli", "GENIE3 gene-regulatory-network inference from an expression matrix"),
    "genie3-merge": ("chromaflow.genie3.cli_merge", "merge GENIE3 target-chunk results into one ranked link list"),
    "genie3-plan": (
        "chromaflow.genie3.cli_plan",
        "count the genes of an expression matrix and plan GENIE3 target chunks",
    ),
    "bench": (
        "chromaflow.report.sweep",
        "sweep settings on this machine (batch size, workers, threads) and print the best",
    ),
    "benchmark-report": ("chromaflow.report.cli", "collect metrics JSONs + Nextflow trace into the benchmark report"),
    "fasta-layout": (
        "chromaflow.genome.cli_layout",
        "rows (subsequences) a FASTA gives at chunk length L, without writing anything",
    ),
    "add-coverage": (
        "chromaflow.coverage.cli",
        "BAM/bigWig read coverage -> evaluation/<prefix>_coverage in a genome h5 (Helixer-compatible, atomic)",
    ),
    "train": (
        "chromaflow.train.cli_train",
        "train, resume or fine-tune a Predmoter-compatible model (Lightning; CPU, GPU, DDP)",
    ),
    "variant-effect": (
        "chromaflow.variant.cli",
        "score the variants of a VCF with a model: ref vs alt predicted coverage per dataset and strand",
    ),
    "variant-plan": ("chromaflow.variant.cli_plan", "count a VCF's (variant, ALT) rows and plan variant-effect shards"),
    "variant-browser": (
        "chromaflow.variant.cli_browser",
        "add variant-effect --tracks bigWigs to bigwig's IGV session and UCSC hub",
    ),
    "variant-merge": (
        "chromaflow.variant.cli_merge",
        "join variant-effect --shard tables into the unsharded table; overall top --tracks",
    ),
    "review-page": (
        "chromaflow.review.cli",
        "a self-contained HTML review page (igv-reports): top variant effects, strongest peaks, extreme promoters",
    ),
    "evaluate": (
        "chromaflow.train.cli_evaluate",
        "Predmoter test mode: per-file loss and Pearson per dataset, plus plots",
    ),
    "versions": (
        "chromaflow.utils.versions",
        "a task's versions.yml (nf-core layout) from installed metadata, without importing torch",
    ),
}


#: commands whose numpy does no linear algebra: their OpenBLAS runs one thread. Its worker threads spin for ~0.1 s
#: after numpy's import (0.1 CPU-s a process: 0.24 against 0.12 s user to import numpy on 2 cores), on the cores
#: the command's own threads need. Set (by :func:`main`) before numpy is first imported, which the command's module
#: does; an OPENBLAS_NUM_THREADS the user set is kept. Not genie3: its prior check correlates genes (a matrix
#: product that wants every core at 25,000 genes).
BLAS_FREE = frozenset(
    (
        "fasta2h5", "fasta-layout", "bigwig", "peaks", "add-coverage", "predict-plan", "predict-merge",
        "genie3-plan", "genie3-merge", "variant-plan", "variant-merge", "variant-browser", "gene-accessibility",
        "versions",
    )
)  # fmt: skip


def _build_parser(chosen: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chromaflow",
        description="chromaflow stages. Run 'chromaflow <command> --help' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"chromaflow {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    sub.required = True
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            importlib.import_module(module).add_arguments(p)
    return parser


_PART = re.compile(r"(?P<dir>[^\s'\"]*/)?\.(?P<name>[^/\s'\"]+?)\." + TEMP_MIDDLE + r"(?:\.[A-Za-z0-9]+)?\.part")


#: how HDF5 reports a failed system call inside its message (h5py raises OSError or, from a close, RuntimeError)
_HDF5_ERRNO = re.compile(r"errno = (\d+)")
_HDF5_FILE = re.compile(r"filename = '([^']+)'")


def _os_error_line(exc: Exception) -> str:
    """One line for an OS-level failure, naming the final output (not its temporary ``.part`` name); HDF5's
    multi-line messages are cut down to the system error and the file they name."""
    text = " ".join(str(exc).split())
    filename = getattr(exc, "filename", None)
    hdf5 = _HDF5_ERRNO.search(text)
    if hdf5:
        m = _HDF5_FILE.search(text)
        filename = filename or (m.group(1) if m else None)
        text = os.strerror(int(hdf5.group(1)))
    elif getattr(exc, "errno", None) == errno.ENOSPC or "No space left on device" in text:
        text = "No space left on device"
    elif getattr(exc, "strerror", None):
        text = cast(str, getattr(exc, "strerror"))  # an OSError's (or a RuntimeError carrying one)
    line = f"{filename}: {text}" if filename else text
    return _PART.sub(lambda m: (m.group("dir") or "") + m.group("name"), line)


def main(argv: list[str] | None = None) -> int:
    """Run the ``chromaflow`` command named in ``argv`` (default: the process's arguments) and return its exit
    status. A failed run removes the outputs it created; temporaries and output locks are released either way."""
    program = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    if chosen not in COMMANDS:
        chosen = None
    if chosen in BLAS_FREE and "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    parser = _build_parser(chosen)
    args = parser.parse_args(argv)
    module = importlib.import_module(COMMANDS[args.command][0])
    prefix = f"chromaflow {args.command}: error:"
    handle_stop_signals()
    CREATED_OUTPUTS.clear()
    rc = None  # stays None when an unexpected exception (a bug) ends the command
    try:
        rc = _run(module, args, prefix)
    finally:
        if rc != 0 and not getattr(module, "KEEP_PARTIAL_OUTPUTS", False):
            remove_created_outputs()  # a failed run leaves none of its outputs (its --metrics failed, say)
        remove_live_temporaries()  # what an interruption left between creating a temporary and guarding it
        release_output_locks()
        CREATED_OUTPUTS.clear()
    if program and _FAILURES:  # end here: Python's clean-up would free them (see _FAILURES)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    if program:
        # The process ends next. Python's finalisation collects garbage while it clears the modules, and each pass
        # walks every object the imports made (~180,000 after torch): ~0.3-0.5 CPU-s of a torch command's exit, ~1.4
        # with lightning (train). Frozen objects are skipped; exit handlers (atexit, HDF5's own) still run.
        gc.freeze()
    return rc


#: the OS errors a command failed with, kept alive until the process ends: freeing the HDF5 objects their
#: tracebacks hold (a file whose write failed on a full disk) crashes h5py 3.16 / HDF5 2.0 with a segmentation
#: fault after the error line. As the program (not called in-process), the CLI then ends without that clean-up.
_FAILURES: list[Exception] = []


def _run(module, args, prefix: str) -> int:
    """The command, with every way it can stop turned into one line on stderr and the exit status."""
    try:
        rc = module.run(args)
        raise_if_stopped()  # a stop signal whose exception Python swallowed (in a __del__ or weakref callback)
    except ChromaflowError as exc:
        print(f"{prefix} {exc}", file=sys.stderr)
        return exc.exit_code
    except (OSError, RuntimeError) as exc:  # disk full, permission denied, ...: one line naming the file
        if isinstance(exc, RuntimeError) and not _HDF5_ERRNO.search(str(exc)):
            raise  # a bug, not the system: keep its traceback
        print(f"{prefix} {_os_error_line(exc)}", file=sys.stderr)
        _FAILURES.append(exc)
        return 1
    except KeyboardInterrupt as exc:  # Interrupted (SIGTERM, SIGINT, SIGHUP) or Python's own Ctrl-C
        signum, note = getattr(exc, "signum", signal.SIGINT), getattr(exc, "note", "")
        print(f"{prefix} interrupted by {signal.Signals(signum).name}{'; ' + note if note else ''}", file=sys.stderr)
        return 128 + signum
    return int(rc or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
