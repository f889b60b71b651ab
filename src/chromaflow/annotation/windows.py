"""Promoter windows: the genes of an annotation with their strand-aware TSS windows (:class:`GeneWindows`), the window
options of ``gene-accessibility`` and ``motif-prior`` (``--upstream``, ``--downstream``, ``--feature``), their
check (:func:`check_windows`) and the gene counts both commands put in their metrics (:func:`gene_metrics`)."""

from __future__ import annotations

import argparse

import numpy as np

from ..utils.errors import ChromaflowError
from .gff import Gene, check_against_sizes, tss_windows

DEFAULT_UPSTREAM = 1000
DEFAULT_DOWNSTREAM = 200


def add_window_options(p: argparse.ArgumentParser) -> None:
    """Add ``--upstream``, ``--downstream`` (the window around the TSS) and ``--feature`` (a row per gene or per
    transcript) to ``p``."""
    p.add_argument(
        "--upstream",
        type=int,
        default=DEFAULT_UPSTREAM,
        metavar="BP",
        help=f"bp before the TSS (default {DEFAULT_UPSTREAM}, a plant promoter)",
    )
    p.add_argument(
        "--downstream",
        type=int,
        default=DEFAULT_DOWNSTREAM,
        metavar="BP",
        help=f"bp from the TSS on, the TSS included (default {DEFAULT_DOWNSTREAM})",
    )
    p.add_argument(
        "--feature",
        choices=["gene", "mRNA"],
        default="gene",
        help="one row per gene (default) or per transcript (GFF3 mRNA, GTF transcript)",
    )


def check_windows(upstream: int, downstream: int) -> None:
    """The window bounds, or a one-line error naming the option."""
    if upstream < 0:
        raise ChromaflowError(f"--upstream must be >= 0 (got {upstream})")
    if downstream < 1:
        raise ChromaflowError(f"--downstream must be >= 1: the window holds the TSS (got {downstream})")


class GeneWindows:
    """The genes of an annotation with their TSS windows, checked against a sequence source and sorted.

    ``genes`` from :func:`~chromaflow.annotation.gff.read_genes`; ``sizes`` {seqid: length} of the source
    (predictions h5 or bigWig; its order is the table's); ``annotation`` and ``source`` name the files in errors.
    Attributes: ``genes`` (sorted by source order, TSS, id), ``tss``, ``start``, ``end`` (n,) int64 arrays (0-based,
    half-open windows clipped at the record's ends), ``seqids`` (in order)."""

    def __init__(
        self, genes: list[Gene], sizes: dict[str, int], annotation: str, source: str, upstream: int, downstream: int
    ):
        check_windows(upstream, downstream)
        check_against_sizes(genes, sizes, annotation, source)
        order = {s: i for i, s in enumerate(sizes)}
        win = tss_windows(genes, sizes, upstream, downstream)
        idx = sorted(range(len(genes)), key=lambda i: (order[genes[i].seqid], win[i][0], genes[i].gene_id))
        self.genes = [genes[i] for i in idx]
        self.tss = np.array([win[i][0] for i in idx], dtype=np.int64)
        self.start = np.array([win[i][1] for i in idx], dtype=np.int64)
        self.end = np.array([win[i][2] for i in idx], dtype=np.int64)
        self.seqids = list(dict.fromkeys(g.seqid for g in self.genes))

    def by_seqid(self) -> dict[str, np.ndarray]:
        """{seqid: indices of its genes}."""
        out: dict[str, list[int]] = {}
        for i, g in enumerate(self.genes):
            out.setdefault(g.seqid, []).append(i)
        return {k: np.array(v, dtype=np.int64) for k, v in out.items()}


def gene_metrics(counts: dict, gw: GeneWindows) -> dict:
    """The gene counts of a command's metrics (``gene-accessibility`` and ``motif-prior`` alike).

    Parameters
    ----------
    counts : dict
        What :func:`~chromaflow.annotation.gff.read_genes` filled in its ``counts``.
    gw : GeneWindows
        The genes kept, with their windows.

    Returns
    -------
    dict
        ``genes_read``, ``genes_kept``, ``genes_from_spans`` (GTF ids without a gene (transcript) line, tabulated
        from the span of their transcripts), ``genes_not_kept`` ({reason: count}: empty, since a gene that cannot
        be kept stops the run with one line naming it) and ``other_gene_types`` ({GFF3 type: features} of gene-like
        types other than ``gene``, such as ``ncRNA_gene``, which are not read).
    """
    read, kept = counts["genes_read"], len(gw.genes)
    return {
        "genes_read": read,
        "genes_kept": kept,
        "genes_from_spans": counts["genes_from_spans"],
        "genes_not_kept": {} if read == kept else {"unknown": read - kept},
        "other_gene_types": counts["other_gene_types"],
    }
