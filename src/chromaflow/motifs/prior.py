"""The core of ``chromaflow motif-prior`` (its command: cli.py): a (TF, target) prior for GENIE3 from motif hits in
promoter windows.

Every gene's TSS window (as ``gene-accessibility`` makes it) is scanned on both strands (:mod:`.scan`, MOODS,
p < 1e-4 against the assembly's base composition). For each regulator (the TFs of ``--tf-motifs`` and of
``--regulators``) and each other gene:

* no accessibility: prior = 1 if a motif of the TF hits the target's window, 0 if the TF has motifs and none
  hits, NA (read as 0.5) if the TF has no motif (with ``--tf-families``: 0 if it has a family that no learned
  motif matches, NA if it has none);
* ``--predictions``: each hit counts with weight a in [0, 1], the predicted accessibility at the hit: the
  fraction of the genes whose promoter window has a lower mean coverage (dataset ``--dataset``, strand average)
  than the bases of the hit; prior = 1 - prod(1 - a) over the TF's hits in the window (one hit: a; hits in closed
  chromatin, a ~ 0, add almost nothing);
* ``--accessibility genes.tsv``: the same with a = percentile_<dataset> / 100 of the target's window for every hit.

Outputs: the long table ``regulator target prior hits accessibility`` (``accessibility``: the mean weight of the
hits, NA without hits or without accessibility), sorted by regulator then target; ``--matrix``: targets x
regulators. ``.gz`` names are gzip-compressed (no time stamp: the same bytes on every run). See docs/networks.md.
"""

from __future__ import annotations

import io
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..annotation.windows import DEFAULT_DOWNSTREAM, DEFAULT_UPSTREAM, GeneWindows, check_windows, gene_metrics
from ..annotation.gff import check_against_sizes, read_genes
from ..utils.errors import ChromaflowError
from ..utils.metrics import StageMetrics
from ..utils.outputs import atomic_outputs, check_outputs, write_table_text
from ..utils.progress import Progress
from .motifs import load_motifs, read_matched_families, read_tf_families, read_tf_motifs
from .scan import DEFAULT_P, Scanner, background, base_counts


def _fasta_sizes_and_background(path: str):
    from ..genome.fasta import FastaReader

    sizes: dict[str, int] = {}
    counts = np.zeros(4, dtype=np.int64)
    for piece in FastaReader(path).pieces():
        sizes[piece.seqid] = sizes.get(piece.seqid, 0) + len(piece.seq)
        counts += base_counts(bytes(piece.seq))
    if not sizes:
        raise ChromaflowError(f"{path}: no FASTA records")
    return sizes, counts


def _choose_dataset(datasets: list[str], wanted: str | None, source: str) -> str:
    if wanted:
        if wanted not in datasets:
            raise ChromaflowError(f"--dataset {wanted}: not in {source} (available: {' '.join(datasets)})")
        return wanted
    return "atacseq" if "atacseq" in datasets else datasets[0]


def _read_accessibility(path: str, gw: GeneWindows, wanted: str | None) -> tuple[str, np.ndarray]:
    """(dataset, a per gene of ``gw``) from a gene-accessibility table: percentile_<ds> / 100."""
    try:
        lines = Path(path).read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ChromaflowError(
            f"{path}: cannot read accessibility table ({getattr(exc, 'strerror', None) or exc})"
        ) from None
    if not lines:
        raise ChromaflowError(f"{path}: accessibility table is empty")
    head = lines[0].split("\t")
    datasets = [h[len("percentile_") :] for h in head if h.startswith("percentile_") and not h.endswith("_same_strand")]
    if "gene_id" not in head or not datasets:
        raise ChromaflowError(f"{path} line 1: not a gene-accessibility table (needs gene_id and percentile_<dataset>)")
    ds = _choose_dataset(datasets, wanted, path)
    gi, pi = head.index("gene_id"), head.index(f"percentile_{ds}")
    value: dict[str, float] = {}
    for n, line in enumerate(lines[1:], 2):
        cols = line.split("\t")
        if len(cols) != len(head):
            raise ChromaflowError(f"{path} line {n}: {len(cols)} columns, the header has {len(head)}")
        try:
            v = float(cols[pi])
        except ValueError:
            raise ChromaflowError(f"{path} line {n}: percentile_{ds} {cols[pi]!r} is not a number") from None
        if not 0 <= v <= 100:
            raise ChromaflowError(f"{path} line {n}: percentile_{ds} {v} is outside 0..100")
        value[cols[gi]] = v / 100.0
    missing = [g.gene_id for g in gw.genes if g.gene_id not in value]
    if missing:
        raise ChromaflowError(
            f"{path}: no row for gene {missing[0]!r} of the annotation ({len(missing)} missing; "
            "make the table from the same annotation and --feature)"
        )
    return ds, np.array([value[g.gene_id] for g in gw.genes])


def _scan(fasta: str, gw: GeneWindows, scanner: Scanner, prog: Progress) -> list[list[np.ndarray]]:
    """hits[gene][motif]: sorted genome start coordinates of the motif's hits in the gene's window."""
    from ..genome.fasta import FastaReader

    groups = gw.by_seqid()
    hits: list[list[np.ndarray]] = [[] for _ in gw.genes]
    for rec in FastaReader(fasta):
        idx = groups.get(rec.seqid)
        if idx is None:
            continue
        seq = bytes(rec.seq)
        for i in idx.tolist():
            s, e = int(gw.start[i]), int(gw.end[i])
            hits[i] = [h + s for h in scanner.scan(seq[s:e])]
            prog.update(1)
    return hits


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.6f}"


def _write(path: str, tmp: Path, text: str) -> None:
    """``text`` into ``tmp``, the temporary of ``path``: gzip (level 6) when ``path`` ends in ``.gz``, else plain
    (:func:`chromaflow.utils.outputs.write_table_text`)."""
    write_table_text(tmp, path, text, level=6)


@dataclass
class MotifPriorOptions:
    """The inputs, outputs and settings of ``motif-prior``: the command's options, one field each (``None`` where an
    option is not given). :meth:`validate` checks them once (one line naming the option); :func:`run` calls it."""

    fasta: str
    annotation: str
    motifs: str
    out: str
    tf_motifs: str | None = None
    tf_families: str | None = None
    matches: str | None = None
    max_qvalue: float = 0.05
    regulators: str | None = None
    predictions: str | None = None
    accessibility: str | None = None
    dataset: str | None = None
    p_value: float = DEFAULT_P
    matrix: str | None = None
    upstream: int = DEFAULT_UPSTREAM
    downstream: int = DEFAULT_DOWNSTREAM
    feature: str = "gene"
    metrics: str | None = None
    force: bool = False

    def validate(self) -> None:
        """The options' own rules: window bounds, one accessibility source at most, the feature type (the p-value
        is checked by :func:`run` after the outputs, in the command's order)."""
        check_windows(self.upstream, self.downstream)
        if (self.tf_motifs is None) == (self.tf_families is None):
            raise ChromaflowError(
                "give one of --tf-motifs (TF -> motif) and --tf-families (TF -> family, with --matches)"
            )
        if (self.tf_families is None) != (self.matches is None):
            raise ChromaflowError("--tf-families and --matches (discover-motifs' matches.tsv) go together")
        if not 0 < self.max_qvalue <= 1:
            raise ChromaflowError(f"--max-qvalue must be in (0, 1], got {self.max_qvalue}")
        if self.predictions and self.accessibility:
            raise ChromaflowError("--predictions and --accessibility: give one of them, not both")
        if self.feature not in ("gene", "mRNA"):
            raise ChromaflowError(f"--feature {self.feature!r}: expected gene or mRNA")


def run(args: MotifPriorOptions) -> int:
    """Scan the promoter windows, weight the hits, and write the prior table (and matrix).

    Parameters
    ----------
    args : MotifPriorOptions
        The command's options; checked first (:meth:`MotifPriorOptions.validate`), then the inputs and outputs
        (the output rule: none may be an input, an existing one only with ``force``) and the p-value.

    Returns
    -------
    int
        The exit status, 0 (errors a user can fix raise :class:`~chromaflow.utils.errors.ChromaflowError`).
    """
    args.validate()
    _check_files(args)
    if not 0 < args.p_value < 1:
        raise ChromaflowError(f"--p-value must be in (0, 1) (got {args.p_value})")
    with StageMetrics("motif-prior", args.metrics) as metrics:
        gene_counts: dict = {}
        genes = read_genes(args.annotation, args.feature, gene_counts)
        # learned motifs (--tf-families): a model may have learned none (discover-motifs writes an empty MEME file);
        # then every TF with a family gets 0, said once
        motifs = load_motifs(args.motifs, allow_empty=args.tf_families is not None)
        if not motifs:
            print(f"chromaflow motif-prior: {args.motifs} holds no motif (none learned): every TF's prior is 0 "
                  "(NA without a family)", file=sys.stderr)  # fmt: skip
        tf_motifs, unmatched = _tf_motifs(args, motifs)
        regulators = _regulators(tf_motifs, args.regulators)
        sizes, counts = _fasta_sizes_and_background(args.fasta)
        gw = GeneWindows(genes, sizes, args.annotation, args.fasta, args.upstream, args.downstream)
        if args.predictions:
            _check_predictions(args, genes, gw, sizes)
        used = sorted({i for lst in tf_motifs.values() for i in lst})
        scanner = Scanner([motifs[i] for i in used], background(counts), args.p_value)
        with Progress(len(gw.genes), "motif-prior", "genes") as prog:
            hits_local = _scan(args.fasta, gw, scanner, prog)
        col = {m: k for k, m in enumerate(used)}  # motif index -> scanner column
        weights, dataset = _weights(args, gw, hits_local, scanner)
        table, matrix, n_hit_pairs = _tables(
            gw, regulators, tf_motifs, col, hits_local, weights, want_matrix=bool(args.matrix), zero=unmatched
        )
        _write_outputs(args, table, matrix)
        metrics.set(
            genes=len(gw.genes),
            **gene_metrics(gene_counts, gw),
            regulators=len(regulators),
            motifs=len(used),
            regulators_with_motifs=sum(1 for r in regulators if tf_motifs.get(r)),
            pairs=table.count("\n") - 1,
            pairs_with_hits=n_hit_pairs,
            hits=int(sum(len(h) for hs in hits_local for h in hs)),
            p_value=args.p_value,
            weighting="predictions" if args.predictions else "table" if args.accessibility else None,
            dataset=dataset,
            background=background(counts),
        )
    return 0


def _check_files(args: MotifPriorOptions) -> None:
    """The output rule for --out, --matrix and --metrics against the inputs (a ``jaspar:`` --motifs is no file); an
    existing --out or --matrix only with --force."""
    inputs = [
        ("--fasta", args.fasta),
        ("--annotation", args.annotation),
        ("--tf-motifs", args.tf_motifs),
        ("--tf-families", args.tf_families),
        ("--matches", args.matches),
        ("--regulators", args.regulators),
        ("--predictions", args.predictions),
        ("--accessibility", args.accessibility),
    ]
    if not args.motifs.startswith("jaspar:"):
        inputs.append(("--motifs", args.motifs))
    outs = [("--out", args.out), ("--matrix", args.matrix), ("--metrics", args.metrics)]
    check_outputs(outs, inputs)
    if not args.force:
        for opt, p in outs[:2]:
            if p and Path(p).exists():
                raise ChromaflowError(f"{p}: output exists (use --force to overwrite)")


def _tf_motifs(args: MotifPriorOptions, motifs: list) -> tuple[dict[str, list[int]], set[str]]:
    """{TF: motif indices} and the TFs whose prior is 0 without a motif: from --tf-motifs (none such), or (learned
    motifs) from --tf-families through --matches: a TF gets every discovered motif with a match of its family below
    --max-qvalue; a TF with a family none matches gets 0 (:func:`~chromaflow.motifs.motifs.read_tf_families`)."""
    if args.tf_motifs is not None:
        return read_tf_motifs(args.tf_motifs, motifs), set()
    assert args.tf_families is not None and args.matches is not None  # validate()
    return read_tf_families(args.tf_families, read_matched_families(args.matches, motifs, args.max_qvalue))


def _regulators(tf_motifs: dict, regulators_file: str | None) -> list[str]:
    """The regulators, sorted: the TFs of --tf-motifs and those listed in --regulators."""
    named = dict.fromkeys(tf_motifs)
    if regulators_file:
        named.update(dict.fromkeys(_read_list(regulators_file)))
    return sorted(named)


def _check_predictions(args: MotifPriorOptions, genes, gw: GeneWindows, sizes: dict[str, int]) -> None:
    """The --predictions h5 is of the --fasta assembly: every gene on one of its sequences, each window's sequence
    as long as in the FASTA."""
    from ..annotation.accessibility import predictions_sizes

    assert args.predictions is not None  # called with --predictions only
    psizes = predictions_sizes(args.predictions)
    check_against_sizes(genes, psizes, args.annotation, args.predictions)
    for seqid in gw.seqids:
        if psizes[seqid] != sizes[seqid]:
            raise ChromaflowError(
                f"{args.predictions}: seqid {seqid!r} is {psizes[seqid]} bp, but "
                f"{sizes[seqid]} bp in {args.fasta}: predictions of another assembly"
            )


def _write_outputs(args: MotifPriorOptions, table: str, matrix: str | None) -> None:
    """The table (and --matrix), all or none: each to a temporary, renamed together."""
    with atomic_outputs([args.out, args.matrix]) as (tmp_out, tmp_matrix):
        assert tmp_out is not None  # --out is required
        _write(args.out, tmp_out, table)
        if args.matrix and tmp_matrix is not None:
            assert matrix is not None  # made when --matrix is given
            _write(args.matrix, tmp_matrix, matrix)


def _read_list(path: str) -> list[str]:
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ChromaflowError(f"{path}: cannot read regulators ({getattr(exc, 'strerror', None) or exc})") from None
    names = [ln.strip().strip('"') for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    if not names:
        raise ChromaflowError(f"{path}: no regulators listed")
    return names


def _weights(args, gw: GeneWindows, hits, scanner: Scanner):
    """Per gene and motif column: the weights a of its hits (None without accessibility input), and the dataset."""
    if args.accessibility:
        ds, a = _read_accessibility(args.accessibility, gw, args.dataset)
        return [[np.full(len(h), a[i]) for h in hs] for i, hs in enumerate(hits)], ds
    if not args.predictions:
        return None, None
    from ..annotation.accessibility import predictions_columns

    groups = gw.by_seqid()
    extra = {}
    for seqid, idx in groups.items():
        st, en = [], []
        for i in idx.tolist():
            for j, h in enumerate(hits[i]):
                st.append(h)
                en.append(h + scanner.lengths[j])
        empty = np.zeros(0, dtype=np.int64)
        extra[seqid] = (np.concatenate([empty, *st]).astype(np.int64), np.concatenate([empty, *en]).astype(np.int64))
    datasets, cols, extra_means = predictions_columns(gw, args.predictions, extra)
    ds = _choose_dataset(datasets, args.dataset, args.predictions)
    ranked = np.sort(cols[f"mean_{ds}"])
    denom = max(1, len(ranked) - 1)
    out = []
    pos = {seqid: 0 for seqid in groups}
    for i, g in enumerate(gw.genes):
        row = []
        means = extra_means[ds][g.seqid]
        for h in hits[i]:
            k = pos[g.seqid]
            m = means[k : k + len(h)]
            pos[g.seqid] = k + len(h)
            row.append(np.minimum(1.0, np.searchsorted(ranked, m, side="left") / denom))
        out.append(row)
    return out, ds


def _tables(gw: GeneWindows, regulators: list[str], tf_motifs, col, hits, weights, want_matrix: bool, zero=frozenset()):
    """The long table (and the matrix): per (regulator, target) the prior, hits and mean accessibility; NA for a TF
    without motif, 0 for one in ``zero`` (a family no learned motif matches)."""
    targets = sorted(range(len(gw.genes)), key=lambda i: gw.genes[i].gene_id)
    buf = io.StringIO()
    buf.write("regulator\ttarget\tprior\thits\taccessibility\n")
    prior = np.full((len(regulators), len(gw.genes)), np.nan)
    n_hit_pairs = 0
    for r, reg in enumerate(regulators):
        cols = [col[m] for m in tf_motifs.get(reg, [])]
        for i in targets:
            tgt = gw.genes[i].gene_id
            if tgt == reg:
                continue
            if not cols and reg not in zero:
                buf.write(f"{reg}\t{tgt}\tNA\t0\tNA\n")
                continue
            n = int(sum(len(hits[i][c]) for c in cols))
            n_hit_pairs += n > 0
            if weights is None:
                p, acc = (1.0 if n else 0.0), "NA"
            elif n:
                a = np.concatenate([weights[i][c] for c in cols])
                p = float(1.0 - np.prod(1.0 - a))
                acc = f"{float(a.mean()):.6f}"
            else:
                p, acc = 0.0, "NA"
            prior[r, i] = p
            buf.write(f"{reg}\t{tgt}\t{_fmt(p)}\t{n}\t{acc}\n")
    matrix = None
    if want_matrix:
        m = io.StringIO()
        m.write("target\t" + "\t".join(regulators) + "\n")
        for i in targets:
            tgt = gw.genes[i].gene_id
            vals = [
                "NA" if (np.isnan(prior[r, i]) or reg == tgt) else _fmt(prior[r, i]) for r, reg in enumerate(regulators)
            ]
            m.write(tgt + "\t" + "\t".join(vals) + "\n")
        matrix = m.getvalue()
    return buf.getvalue(), matrix, n_hit_pairs
