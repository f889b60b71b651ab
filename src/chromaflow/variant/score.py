"""The core of ``chromaflow variant-effect`` (its command: cli.py): predicted chromatin effects of the variants of a
VCF/BCF, one row per (variant, ALT).

The checkpoint is loaded, and the device, precision and batch size chosen, exactly as ``predict`` does; windows are
built from the FASTA read by the genome core's reader and scored by :mod:`chromaflow.variant.effects`
(docs/variants.md). Input is checked in full (VCF, CHROM and REF against the FASTA, the model's input length)
before the model runs; the outputs are written atomically, only when everything succeeded.
"""

from __future__ import annotations

import gc
import heapq
import os
import time
import zipfile
from collections import defaultdict
from dataclasses import dataclass

from ..utils.cli_options import resolve_threads
from ..utils.errors import ChromaflowError
from ..utils.metrics import StageMetrics
from ..native.memory import tune_malloc
from ..utils.outputs import atomic_output, check_outputs, emit_json, safe_name, write_table_text
from ..utils.progress import Progress
from ..utils.sharding import parse_part, part_bounds
from ..model.options import DEVICES, PRECISIONS

#: default flank F (bp each side of the variant) of the mean: ±250 bp is about one accessible region (ATAC-seq
#: regions are typically a few hundred bp wide), so the mean follows the region the variant sits in rather than
#: single positions (max |Δ| reports those); docs/variants.md
DEFAULT_FLANK = 250

#: the first line of a shard's table (``--shard``): which rows of the whole VCF it holds and the --tracks it ran
#: with; ``variant-merge`` checks the parts against it and drops it (cli_merge.py)
SHARD_LINE = "#chromaflow variant-effect shard {i}/{n}: rows {lo}-{hi} of {total}, tracks {tracks}"


def candidates_name(i: int, n: int) -> str:
    """The shard's list of track candidates in --tracks-dir (read by ``variant-merge --candidates``)."""
    return f"shard{i}of{n}.candidates.json"


@dataclass
class VariantEffectOptions:
    """What ``variant-effect`` scores and where its outputs go: the command's options, one field each (``None``
    where an option is not given). :meth:`validate` checks them once (one line naming the option); :func:`run`
    calls it, so a library caller gets the same checks as the command line."""

    vcf: str
    fasta: str
    model: str
    out: str
    flank: int = DEFAULT_FLANK
    region: str | None = None
    batch_size: int | str = "auto"
    device: str = "auto"
    precision: str = "fp32"
    tracks: int = 0
    tracks_dir: str | None = None
    shard: str | None = None
    threads: int | None = None
    metrics: str | None = None
    force: bool = False

    def validate(self) -> tuple[int, int] | None:
        """The options' own rules and the inputs' existence; returns the parsed --shard (i, n) or None."""
        if self.flank < 0:
            raise ChromaflowError(f"--flank must be >= 0, got {self.flank}")
        if self.tracks < 0:
            raise ChromaflowError(f"--tracks must be >= 0, got {self.tracks}")
        if self.tracks and not self.tracks_dir:
            raise ChromaflowError("--tracks needs --tracks-dir (where the bigWigs go)")
        if self.threads is not None and self.threads < 1:
            raise ChromaflowError(f"--threads must be >= 1, got {self.threads}")
        if self.device not in DEVICES:
            raise ChromaflowError(f"--device {self.device!r}: expected one of {', '.join(DEVICES)}")
        if self.precision not in PRECISIONS:
            raise ChromaflowError(f"--precision {self.precision!r}: expected one of {', '.join(PRECISIONS)}")
        shard = parse_part(self.shard, "--shard")
        for opt, path in (("--fasta", self.fasta), ("--model", self.model)):
            if not os.path.isfile(path):
                raise ChromaflowError(f"{path}: {opt} does not exist or is not a file")
        if not zipfile.is_zipfile(self.model):
            raise ChromaflowError(f"{self.model}: not a PyTorch zip checkpoint (no zip archive)")
        return shard


def run(args: VariantEffectOptions) -> int:
    """Score the variants of ``args.vcf`` (or a --shard's share) and write the table, tracks and candidates."""
    from .vcf import read_variants

    shard = args.validate()
    cands = os.path.join(args.tracks_dir, candidates_name(*shard)) if shard and args.tracks_dir else None
    check_outputs(
        [("--out", args.out), ("--metrics", args.metrics), ("--tracks-dir", cands)],
        [("--vcf", args.vcf), ("--fasta", args.fasta), ("--model", args.model)],
        outdirs=[("--tracks-dir", args.tracks_dir)] if args.tracks or cands else [],
    )
    if os.path.exists(args.out) and not args.force:
        raise ChromaflowError(f"{args.out}: output exists (use --force to overwrite)")
    variants = read_variants(args.vcf, args.region)
    # a shard: every shard reads the same record stream and keeps its contiguous share of the rows (the split of
    # predict --shard, sharding.part_bounds); the others are only parsed, never checked against the FASTA or scored
    lo, hi = part_bounds(*shard, len(variants)) if shard else (0, len(variants))
    return _run(args, variants, variants[lo:hi], shard, (lo, hi), cands)


def _validate(args, variants, by_chrom) -> dict[str, int]:
    """First pass over the FASTA: every CHROM present, every REF inside its record and equal to it (case ignored).
    Returns record lengths."""
    import numpy as np

    from ..genome.fasta import FastaReader

    lengths: dict[str, int] = {}
    for rec in FastaReader(args.fasta):
        lengths[rec.seqid] = len(rec.seq)
        for v in by_chrom.get(rec.seqid, ()):
            if v.pos < 1:
                raise ChromaflowError(f"{args.vcf}: {v.name()}: POS must be >= 1")
            end = v.start + len(v.ref)
            if end > len(rec.seq):
                raise ChromaflowError(
                    f"{args.vcf}: {v.name()}: REF ends at {end}, past the end of FASTA record "
                    f"{rec.seqid} ({len(rec.seq)} bp)"
                )
            got = bytes(np.frombuffer(rec.seq, np.uint8, count=len(v.ref), offset=v.start)).decode()
            if got.upper() != v.ref.upper():
                raise ChromaflowError(
                    f"{args.vcf}: {v.name()}: REF {v.ref} does not match the FASTA "
                    f"({args.fasta} {rec.seqid}:{v.pos} is {got})"
                )
    missing = [c for c in by_chrom if c not in lengths]
    if missing:
        v = by_chrom[missing[0]][0]
        raise ChromaflowError(
            f"{args.vcf}: {v.name()}: CHROM {v.chrom} is not a record of {args.fasta}"
            + (f" ({len(missing)} such CHROMs)" if len(missing) > 1 else "")
        )
    return lengths


def _run(args, all_variants, variants, shard, bounds, cands) -> int:
    """Score ``variants`` (all of ``all_variants``, or a shard's share ``bounds`` of them)."""
    import torch

    from ..predict.executors import EngineStats, resolve_device

    scored = [v for v in variants if v.skip is None]
    by_chrom: dict[str, list] = defaultdict(list)
    for v in scored:
        by_chrom[v.chrom].append(v)
    threads = resolve_threads(args.threads)
    torch.set_num_threads(threads)
    device = resolve_device(args.device)
    stats = EngineStats()
    with StageMetrics(
        "variant-effect", args.metrics, threads=threads, precision=args.precision, device=str(device), flank=args.flank
    ) as metrics:
        ckpt, lengths = _load_and_check(args, variants, by_chrom)
        cfg = ckpt.config
        L = cfg.seq_len
        precision, batch, predictor = _predictor(args, ckpt, device, len(scored), threads, stats)
        rows: dict[int, dict] = {}
        top: list = []
        loop_s = _score_all(args, by_chrom, L, batch, predictor, rows, top, len(scored))
        text = _table(variants, rows, cfg.datasets)
        if shard:
            text = _shard_line(shard, bounds, len(all_variants), args.tracks) + text
        write_table(args.out, text, args.force)
        track_files = _write_tracks(args, top, cfg.datasets, lengths, all_variants, shard) if args.tracks else []
        if cands:
            _write_candidates(cands, shard, args.tracks, top, track_files, cfg.datasets, all_variants)
        metrics.set(
            **_skip_counts(variants, rows),
            model_rows=predictor.rows,
            seq_len=L,
            batch_size=batch,
            loop_s=loop_s,
            variants_per_s=(len(rows) / loop_s) if loop_s > 0 else None,
            datasets=list(cfg.datasets),
            precision=precision,
            model_type=cfg.model_type,
            tracks=track_files,
            notes=stats.notes,
            **({"shard": f"{shard[0]}/{shard[1]}", "rows": [bounds[0], bounds[1]]} if shard else {}),
        )
    return 0


def _load_and_check(args, variants, by_chrom):
    """The checkpoint, after the checks that need it (its window length, the flank fitting it) and the FASTA pass
    (:func:`_validate`); returns (checkpoint, FASTA record lengths)."""
    from ..model.checkpoint import load_checkpoint

    ckpt = load_checkpoint(args.model)
    L = ckpt.config.seq_len
    ckpt.config.check_length(L, f"{args.model} (seq_len, the window length)")
    if 2 * args.flank + 1 > L:
        raise ChromaflowError(
            f"--flank {args.flank}: flank + variant + flank does not fit the model's input "
            f"length {L} ({args.model} seq_len)"
        )
    return ckpt, _validate(args, variants, by_chrom)


def _predictor(args, ckpt, device, n_scored: int, threads: int, stats):
    """The model on ``device`` set up as predict sets it up, and the batch size (``--batch-size``, or probed):
    returns (precision used, model rows per batch, :class:`~chromaflow.variant.effects.WindowPredictor`)."""
    from ..model.checkpoint import build_model
    from ..predict.executors import CPU_MICRO, bf16_supported, configure_cuda_exact
    from ..predict.probe import resolve_batch_size
    from . import effects

    precision = args.precision
    if precision == "bf16" and not bf16_supported(device):
        precision = "fp32"
        stats.notes.append("bf16 unsupported: fell back to fp32")
    model = build_model(ckpt)
    if device.type == "cuda":
        configure_cuda_exact()  # fp32 without TF32, as predict
    tune_malloc()  # as predict: activations reuse heap memory instead of page-faulting fresh mmaps
    gc.freeze()  # torch and the model are long-lived: keep the cyclic GC off them
    batch = resolve_batch_size(
        args.batch_size,
        model=model,
        device=device,
        L=ckpt.config.seq_len,
        D=len(ckpt.config.datasets),
        precision=precision,
        rows=max(1, 4 * n_scored),
        stats=stats,
    )
    micro = CPU_MICRO if device.type == "cpu" else batch
    # CPU: one stream per thread, each micro-batch of CPU_MICRO rows in its own stream (predict's CPU layout)
    return precision, batch, effects.WindowPredictor(model, device, precision, micro, streams=threads)


def _score_all(args, by_chrom, L: int, batch: int, predictor, rows: dict, top: list, n_scored: int) -> float:
    """Score the variants of ``by_chrom`` record by record of the FASTA into ``rows`` (and the strongest into
    ``top``), then close the predictor; returns the seconds the loop took."""
    import numpy as np

    from ..genome.fasta import FastaReader
    from . import effects

    bar = Progress(n_scored, "variant-effect", unit=" var")
    t0 = time.perf_counter()
    for rec in FastaReader(args.fasta):
        vs = by_chrom.get(rec.seqid)
        if not vs:
            continue
        seq = np.frombuffer(rec.seq, dtype=np.uint8)
        _score_record(args, seq, vs, L, max(1, batch // 2), predictor, effects, rows, top, bar)
    loop_s = time.perf_counter() - t0
    predictor.close()
    bar.close()
    return loop_s


def _shard_line(shard: tuple[int, int], bounds: tuple[int, int], total: int, tracks: int) -> str:
    """A shard table's first line (:data:`SHARD_LINE`), newline included."""
    return SHARD_LINE.format(i=shard[0], n=shard[1], lo=bounds[0] + 1, hi=bounds[1], total=total, tracks=tracks) + "\n"


def _skip_counts(variants, rows: dict) -> dict:
    """The metrics' counts: variants, scored, skipped and skipped by reason (sorted)."""
    skipped: dict[str, int] = defaultdict(int)
    for v in variants:
        if v.skip is not None:
            skipped[v.skip] += 1
    return {
        "variants": len(variants),
        "scored": len(rows),
        "skipped": sum(skipped.values()),
        "skipped_by_reason": dict(sorted(skipped.items())),
    }


def _score_record(args, seq, vs, L, per_call, predictor, effects, rows, top, bar) -> None:
    """Score the variants ``vs`` of one record (sequence ``seq``) ``per_call`` windows per model call; a reference
    window shared by several ALTs (or variants at one position) is predicted once."""
    import numpy as np

    n = len(seq)
    todo = []
    for v in vs:
        g = effects.geometry(v.start, len(v.ref), len(v.alt), n, L)
        if not effects.fits(g, args.flank):
            v.skip = f"skipped: allele longer than the window allows ({L} bp, flank {args.flank})"
            continue
        todo.append((v, g))
    i = 0
    while i < len(todo):
        chunk: list = []
        windows: list = []
        ref_slot: dict[int, int] = {}
        while i < len(todo) and len(windows) + 2 <= max(2, per_call):
            v, g = todo[i]
            if g.s not in ref_slot:
                ref_slot[g.s] = len(windows)
                windows.append(effects.ref_window(seq, g))
            chunk.append((v, g, ref_slot[g.s], len(windows)))
            windows.append(effects.alt_window(seq, g, v.alt.encode("ascii")))
            i += 1
        # the scores read only the flanks: the rest of each window stays on the model's device (--tracks keeps
        # whole windows: the strongest variants' bigWigs show them)
        span = None if args.tracks else effects.scored_span([g for _v, g, _r, _a in chunk], args.flank)
        pred = predictor(np.stack(windows), span)
        base = span[0] if span else 0
        for v, g, ri, ai in chunk:
            ref_t, alt_t = effects.strand_tracks(pred[ri]), effects.strand_tracks(pred[ai])
            per = {s: effects.scores(ref_t[s], alt_t[s], g, args.flank, base) for s in effects.STRANDS}
            rows[v.index] = {"scores": per, "note": effects.note(g, args.flank)}
            if args.tracks:
                key = float(np.max(np.abs(per["avg"]["delta_mean"])))
                item = (key, -v.index, v.index, g, ref_t["avg"].copy(), alt_t["avg"].copy())
                if len(top) < args.tracks:
                    heapq.heappush(top, item)
                elif item[:2] > top[0][:2]:
                    heapq.heapreplace(top, item)
            bar.update(1)


def _fmt(x) -> str:
    return f"{float(x):.6g}"


def _table(variants, rows, datasets) -> str:
    from .effects import METRICS, STRANDS

    cols = ["CHROM", "POS", "ID", "REF", "ALT"]
    cols += [f"{m}_{d}_{s}" for d in datasets for s in STRANDS for m in METRICS]
    cols.append("note")
    lines = ["\t".join(cols)]
    n_val = len(cols) - 6
    for v in variants:
        head = [v.chrom, str(v.pos), v.id, v.ref, v.alt]
        row = rows.get(v.index)
        if row is None:
            lines.append("\t".join(head + ["NA"] * n_val + [v.skip or "."]))
            continue
        vals = []
        for j, _d in enumerate(datasets):
            for s in STRANDS:
                sc = row["scores"][s]
                for m in METRICS:
                    vals.append(str(int(sc[m][j])) if m == "max_abs_delta_offset" else _fmt(sc[m][j]))
        lines.append("\t".join(head + vals + [row["note"] or "."]))
    return "\n".join(lines) + "\n"


def write_table(path: str, text: str, force: bool) -> None:
    """Write ``text`` to ``path`` atomically (``force``: overwrite); gzip'ed when ``path`` ends in ``.gz``
    (:func:`~chromaflow.utils.outputs.wants_gzip`), with no file name or time stamp, so the same table gives the same
    bytes."""
    with atomic_output(path, force=force) as tmp:
        write_table_text(tmp, path, text)


#: the most bytes of a CHROM and of a dataset name in a track's file name (:func:`track_name`): with the rank,
#: POS, row and allele the name stays within :data:`chromaflow.utils.outputs.NAME_MAX_BYTES`
TRACK_PART_BYTES = 80


def track_name(args: VariantEffectOptions, v, index: int, dataset: str, allele: str) -> str:
    """A track's file name without its rank (a shard's candidate; the ranked name is ``<rank:03d>_`` + this):
    ``<CHROM>_<POS>_<row>.<dataset>.<allele>.bw``, CHROM and dataset made safe
    (:func:`~chromaflow.utils.outputs.safe_name`: a ``/`` in a seqid never leaves --tracks-dir)."""
    chrom = safe_name(v.chrom, f"{args.fasta}: FASTA record {v.chrom!r}", TRACK_PART_BYTES)
    ds = safe_name(dataset, f"{args.model}: dataset {dataset!r}", TRACK_PART_BYTES)
    return f"{chrom}_{v.pos}_{index + 1}.{ds}.{allele}.bw"


def _write_candidates(path, shard, n_tracks, top, track_files, datasets, variants) -> None:
    """A shard's track candidates (its ``--tracks`` strongest, ranked as :func:`_write_tracks` ranks them, with the
    ranking key), for ``variant-merge``, which ranks the candidates of all shards and keeps the overall strongest."""
    ranked = sorted(top, key=lambda t: (-t[0], t[2]))
    per = 2 * len(datasets)
    emit_json(
        {
            "shard": f"{shard[0]}/{shard[1]}",
            "tracks": n_tracks,
            "datasets": list(datasets),
            "candidates": [
                {
                    "index": index,
                    "chrom": variants[index].chrom,
                    "pos": variants[index].pos,
                    "key": key,
                    "files": [os.path.basename(f) for f in track_files[r * per : (r + 1) * per]],
                }
                for r, (key, _neg, index, *_rest) in enumerate(ranked)
            ],
        },
        path,
    )


def _write_tracks(args, top, datasets, lengths, variants, shard=None) -> list[str]:
    """ref and alt bigWigs (strand average) of the strongest variants: ``<rank>_<CHROM>_<POS>_<n>.<dataset>.ref.bw``
    (:func:`track_name`) over the reference window, ``...alt.bw`` in reference coordinates (the alt allele's aligned
    bases: left flank, the shared first min(r, a) bases, right flank; an insertion's extra bases are left out, a
    deletion's deleted bases have no value); padding positions are left out. Ranked by the largest |delta_mean|
    (strand average) over the datasets, ties in VCF order."""
    import numpy as np
    import pyBigWig

    files = []
    ranked = sorted(top, key=lambda t: (-t[0], t[2]))
    for rank, (_key, _neg, index, g, ref_t, alt_t) in enumerate(ranked, 1):
        v = variants[index]
        gpos = np.arange(g.s, g.s + g.L)
        keep_ref = (gpos >= 0) & (gpos < g.n)
        # alt positions -> reference coordinates
        m = min(g.r, g.a)
        left = np.arange(max(0, -g.s), g.off + m)
        right = np.arange(g.off + g.a, g.L)
        right = right[(g.s + right - g.d) < g.n]
        alt_idx = np.concatenate([left, right])
        alt_pos = np.concatenate([g.s + left, g.s + right - g.d])
        for j, d in enumerate(datasets):
            for allele, pos, vals in (("ref", gpos[keep_ref], ref_t[keep_ref, j]), ("alt", alt_pos, alt_t[alt_idx, j])):
                base = track_name(args, v, index, d, allele)
                # a shard's candidates carry no rank: variant-merge gives the overall one
                name = os.path.join(args.tracks_dir, base if shard else f"{rank:03d}_{base}")
                with atomic_output(name, force=True, suffix=".bw") as tmp:
                    bw = pyBigWig.open(str(tmp), "w")
                    bw.addHeader([(v.chrom, lengths[v.chrom])], maxZooms=0)
                    bw.addEntries(
                        [v.chrom] * len(pos),
                        [int(x) for x in pos],
                        ends=[int(x) + 1 for x in pos],
                        values=[float(x) for x in vals],
                    )
                    bw.close()
                files.append(name)
    return files
