"""``chromaflow gene-accessibility``: predicted coverage of each gene's promoter (a strand-aware TSS window).

One row per gene (or transcript): ``gene_id seqid strand tss window_start window_end`` (0-based, half-open, after
clipping at the record's ends), then per dataset ``mean_<ds> max_<ds> percentile_<ds>`` over the strand-averaged
track, and from a predictions h5 also ``mean_<ds>_same_strand max_<ds>_same_strand percentile_<ds>_same_strand``
over the gene's own strand. ``percentile``: 100 x the fraction of the other genes whose mean is strictly lower
(ties share the lower value; 0 = the lowest, 100 = the highest). Rows are sorted by the sequences' order in the
predictions (or the first bigWig), then TSS, then id, so the table does not depend on the annotation's order.
See docs/networks.md.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from ..cli_options import add_run_options
from ..errors import ChromaflowError
from ..metrics import StageMetrics
from ..outputs import atomic_outputs, check_outputs, naming_errors
from .gff import Gene, check_against_sizes, read_genes, tss_windows

DEFAULT_UPSTREAM = 1000
DEFAULT_DOWNSTREAM = 200


def add_window_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--upstream", type=int, default=DEFAULT_UPSTREAM, metavar="BP",
                   help=f"bp before the TSS (default {DEFAULT_UPSTREAM}, a plant promoter)")
    p.add_argument("--downstream", type=int, default=DEFAULT_DOWNSTREAM, metavar="BP",
                   help=f"bp from the TSS on, the TSS included (default {DEFAULT_DOWNSTREAM})")
    p.add_argument("--feature", choices=["gene", "mRNA"], default="gene",
                   help="one row per gene (default) or per transcript (GFF3 mRNA, GTF transcript)")


def check_window_options(args: argparse.Namespace) -> None:
    if args.upstream < 0:
        raise ChromaflowError(f"--upstream must be >= 0 (got {args.upstream})")
    if args.downstream < 1:
        raise ChromaflowError(f"--downstream must be >= 1: the window holds the TSS (got {args.downstream})")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--annotation", required=True, metavar="GFF",
                   help="GFF3 or GTF (plain or gzip, any order; the format from the name: .gff3/.gff or .gtf)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--predictions", metavar="P.h5", help="predictions h5 (chromaflow predict / Predmoter)")
    src.add_argument("--bigwig", nargs="+", metavar="T.bw",
                     help="bigWig tracks; each is a dataset named by its file name without .bw")
    p.add_argument("--out", required=True, metavar="TSV", help="the per-gene table")
    p.add_argument("--bed", default=None, metavar="BED",
                   help="also the promoter windows as BED6 (name = gene id, score = 10 x the first dataset's "
                        "percentile, 0-1000), sorted like the table, for a genome browser")
    p.add_argument("--bigbed", default=None, metavar="BB",
                   help="also the same windows as a bigBed 6 (the UCSC track hub's format; chromosome sizes from "
                        "the predictions or the first bigWig)")
    add_window_options(p)
    add_run_options(p, force=True, metrics=True)


def percentile(values: np.ndarray) -> np.ndarray:
    """100 x (number of other values strictly lower) / (n - 1); 100 for a single value."""
    n = len(values)
    if n == 1:
        return np.array([100.0])
    lower = np.searchsorted(np.sort(values, kind="stable"), values, side="left")
    return 100.0 * lower / (n - 1)


def _fmt_num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.4f}"


class GeneWindows:
    """The genes of an annotation with their TSS windows, checked against a sequence source and sorted."""

    def __init__(self, genes: list[Gene], sizes: dict[str, int], annotation: str, source: str,
                 upstream: int, downstream: int):
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


def predictions_columns(gw: GeneWindows, path: str, extra: dict[str, tuple[np.ndarray, np.ndarray]] | None = None):
    """{column: values} of every dataset (avg and same strand) from a predictions h5; with ``extra``
    ({seqid: (starts, ends)} of more windows, e.g. motif hits), also their avg-strand means per dataset."""
    from .accessibility import predictions_window_stats

    groups = gw.by_seqid()
    windows = {}
    for seqid, idx in groups.items():
        s, e = gw.start[idx], gw.end[idx]
        if extra and seqid in extra:
            s, e = np.concatenate([s, extra[seqid][0]]), np.concatenate([e, extra[seqid][1]])
        windows[seqid] = (s, e)
    datasets, stats = predictions_window_stats(path, windows)
    n = len(gw.genes)
    plus = np.array([g.strand == "+" for g in gw.genes])
    cols: dict[str, np.ndarray] = {}
    extra_means: dict[str, dict[str, np.ndarray]] = {d: {} for d in datasets}
    for d in datasets:
        mean = {s: np.zeros(n) for s in ("avg", "+", "-")}
        mx = {s: np.zeros(n) for s in ("avg", "+", "-")}
        for seqid, idx in groups.items():
            st = stats[seqid]
            k = len(idx)
            for s in ("avg", "+", "-"):
                mean[s][idx] = st.sums[(d, s)][:k] / st.n[:k]
                mx[s][idx] = st.maxs[(d, s)][:k]
            if extra and seqid in extra:
                extra_means[d][seqid] = st.sums[(d, "avg")][k:] / st.n[k:]
        same_mean = np.where(plus, mean["+"], mean["-"])
        same_max = np.where(plus, mx["+"], mx["-"])
        cols[f"mean_{d}"], cols[f"max_{d}"], cols[f"percentile_{d}"] = mean["avg"], mx["avg"], percentile(mean["avg"])
        cols[f"mean_{d}_same_strand"], cols[f"max_{d}_same_strand"] = same_mean, same_max
        cols[f"percentile_{d}_same_strand"] = percentile(same_mean)
    return datasets, cols, extra_means


def bigwig_columns(gw: GeneWindows, paths: list[str]):
    from .accessibility import bigwig_window_stats

    groups = gw.by_seqid()
    windows = {seqid: (gw.start[idx], gw.end[idx]) for seqid, idx in groups.items()}
    n = len(gw.genes)
    datasets, cols = [], {}
    for path in paths:
        d = bigwig_dataset_name(path)
        if d in datasets:
            raise ChromaflowError(f"--bigwig: two files give the dataset name {d!r}")
        datasets.append(d)
        stats = bigwig_window_stats(path, windows)
        mean, mx = np.zeros(n), np.zeros(n)
        for seqid, idx in groups.items():
            sums, maxs = stats[seqid]
            mean[idx] = sums / (gw.end[idx] - gw.start[idx])
            mx[idx] = maxs
        cols[f"mean_{d}"], cols[f"max_{d}"], cols[f"percentile_{d}"] = mean, mx, percentile(mean)
    return datasets, cols


def bigwig_dataset_name(path: str) -> str:
    name = Path(path).name
    for ext in (".bw", ".bigwig", ".bigWig"):
        if name.endswith(ext):
            return name[: -len(ext)]
    return name


def table_text(gw: GeneWindows, cols: dict[str, np.ndarray]) -> str:
    head = ["gene_id", "seqid", "strand", "tss", "window_start", "window_end", *cols]
    lines = ["\t".join(head)]
    values = [[(f"{x:.2f}" if k.startswith("percentile_") else _fmt_num(x)) for x in v.tolist()]
              for k, v in cols.items()]
    for i, g in enumerate(gw.genes):
        lines.append("\t".join([g.gene_id, g.seqid, g.strand, str(gw.tss[i]), str(gw.start[i]), str(gw.end[i]),
                                *(v[i] for v in values)]))
    return "\n".join(lines) + "\n"


def bed_text(gw: GeneWindows, pct: np.ndarray) -> str:
    """BED6 of the windows: score = round(10 x percentile) (BED scores are integers 0-1000)."""
    score = np.rint(10 * pct).astype(int).tolist()
    return "".join(f"{g.seqid}\t{gw.start[i]}\t{gw.end[i]}\t{g.gene_id}\t{score[i]}\t{g.strand}\n"
                   for i, g in enumerate(gw.genes))


#: UCSC's autoSql of BED6 (a hub's "type bigBed 6" expects it)
BED6_AUTOSQL = """table bed6
"Browser extensible data: the promoter windows of chromaflow gene-accessibility"
    (
    string chrom;      "Reference sequence chromosome or scaffold"
    uint   chromStart; "Start position in chromosome"
    uint   chromEnd;   "End position in chromosome"
    string name;       "Gene id"
    uint   score;      "10 x the promoter accessibility percentile of the first dataset (0-1000)"
    char[1] strand;    "+ or -"
    )
"""


def write_bigbed(path: Path, sizes: dict[str, int], bed: str) -> None:
    """The BED6 text as a bigBed 6 (bigwig/bigbedfile.py; rows sorted by chromosome name bytes then start, as
    bigBed wants them: the same sort its chromosome list has)."""
    from ..bigwig.bigbedfile import write_bigbed as write

    rows = [ln.split("\t", 3) for ln in bed.splitlines()]
    rows.sort(key=lambda r: (r[0].encode(), int(r[1]), int(r[2]), r[3]))
    write(path, list(sizes.items()), lambda: ((r[0], int(r[1]), int(r[2]), r[3]) for r in rows), BED6_AUTOSQL, 6, 6)


def run(args: argparse.Namespace) -> int:
    check_window_options(args)
    inputs = [("--annotation", args.annotation), ("--predictions", args.predictions)]
    inputs += [("--bigwig", b) for b in (args.bigwig or [])]
    check_outputs([("--out", args.out), ("--bed", args.bed), ("--bigbed", args.bigbed), ("--metrics", args.metrics)],
                  inputs)
    for out in (args.out, args.bed, args.bigbed):
        if out and not args.force and Path(out).exists():
            raise ChromaflowError(f"{out}: output exists (use --force to overwrite)")
    with StageMetrics("gene-accessibility", args.metrics) as metrics:
        genes = read_genes(args.annotation, args.feature)
        if args.predictions:
            from .accessibility import predictions_sizes

            sizes, source = predictions_sizes(args.predictions), args.predictions
        else:
            from .accessibility import bigwig_sizes

            sizes, source = bigwig_sizes(args.bigwig[0]), args.bigwig[0]
        gw = GeneWindows(genes, sizes, args.annotation, source, args.upstream, args.downstream)
        if args.predictions:
            datasets, cols, _ = predictions_columns(gw, args.predictions)
        else:
            datasets, cols = bigwig_columns(gw, args.bigwig)
        bed = bed_text(gw, cols[f"percentile_{datasets[0]}"]) if (args.bed or args.bigbed) else None
        # all outputs or none: each goes to a temporary, renamed together at the end
        with atomic_outputs([args.out, args.bed, args.bigbed]) as (t_out, t_bed, t_bb):
            with naming_errors(args.out):
                t_out.write_text(table_text(gw, cols))
            if t_bed:
                with naming_errors(args.bed):
                    t_bed.write_text(bed)
            if t_bb:
                with naming_errors(args.bigbed):
                    write_bigbed(t_bb, sizes, bed)
        metrics.set(genes=len(gw.genes), datasets=datasets, feature=args.feature, upstream=args.upstream,
                    downstream=args.downstream, source="predictions" if args.predictions else "bigwig")
    return 0
