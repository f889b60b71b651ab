"""``chromaflow genie3-merge``: validate ``genie3 --targets-chunk`` parts and write the same outputs as a
single-task run (byte-identical link list)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import cast

import numpy as np

from ..utils.cli_options import add_run_options, resolve_threads
from ..utils.errors import ChromaflowError
from ..utils.metrics import StageMetrics
from ..utils.outputs import atomic_outputs, check_outputs, naming_errors, wants_gzip
from . import links
from .parts import read_meta, read_weights
from .report import add_output_arguments, finish_outputs, output_options

_SAME = ("genes", "regulators", "n_targets_total", "options", "fingerprint", "samples", "prior_check")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): the ``genie3 --targets-chunk`` parts and the outputs."""
    p.add_argument("parts", nargs="+", metavar="PART", help="part files written by genie3 --targets-chunk")
    add_output_arguments(p, "ranked link list (.tsv.gz: gzip; any other name: plain text)")
    add_run_options(p, threads="threads formatting and compressing the link list (0 = all usable CPUs; same bytes)")


def check_parts(paths: list[str]) -> tuple[list[tuple[str, dict]], dict]:
    """The parts in chunk order with their metadata, and the merged metadata, checked from the metadata alone
    (same run, one split, every chunk once, the ranges tiling the targets) before any weights are read."""
    p0, m0 = paths[0], read_meta(paths[0])
    loaded: list[tuple[str, dict]] = []
    for p in paths:
        m = read_meta(p) if loaded else m0
        for k in _SAME:
            if m.get(k) != m0.get(k):
                raise ChromaflowError(f"{p}: {k} differs from {p0} (parts of different runs cannot be merged)")
        if m["chunk"][1] != m0["chunk"][1]:
            raise ChromaflowError(
                f"{p}: chunk {m['chunk'][0]}/{m['chunk'][1]} is from a different split than "
                f"{p0} ({m0['chunk'][0]}/{m0['chunk'][1]})"
            )
        loaded.append((p, m if m is m0 else {k: v for k, v in m.items() if k != "genes"}))  # one gene list kept
    n_chunks = m0["chunk"][1]
    by_chunk: dict[int, tuple] = {}
    for p, m in loaded:
        i = m["chunk"][0]
        if i in by_chunk:
            raise ChromaflowError(f"{p}: chunk {i}/{n_chunks} given twice (also {by_chunk[i][0]})")
        by_chunk[i] = (p, m)
    missing = [i for i in range(1, n_chunks + 1) if i not in by_chunk]
    if missing:
        raise ChromaflowError(f"incomplete: chunk(s) {', '.join(f'{i}/{n_chunks}' for i in missing)} missing")
    pos = 0
    ordered, targets, const = [], [], []
    for i in range(1, n_chunks + 1):
        p, m = by_chunk[i]
        lo, hi = m["target_range"]
        if lo != pos:
            raise ChromaflowError(f"{p}: target range {lo}-{hi} overlaps or leaves a gap (expected start {pos})")
        pos = hi
        ordered.append((p, m))
        targets.extend(m["targets"])
        const.extend(m.get("constant_targets", []))
    if pos != m0["n_targets_total"]:
        raise ChromaflowError(f"incomplete: parts cover {pos} of {m0['n_targets_total']} targets")
    meta = dict(m0, targets=targets, constant_targets=const, chunk=[1, 1], target_range=[0, pos])
    return ordered, meta


def merge_parts(paths: list[str]) -> tuple[np.ndarray, dict, np.ndarray | None]:
    """(W, meta, repeats or None) of the whole run: each part's columns read in turn into one preallocated
    R x T matrix (no list of parts beside their concatenation: one dense copy, not two)."""
    ordered, meta = check_parts(paths)
    R, T = len(meta["regulators"]), len(meta["targets"])
    n_rep = int(meta["options"].get("repeats", 1))
    W = np.empty((R, T), dtype=np.float64)
    repeats = np.empty((n_rep, R, T), dtype=np.float64) if n_rep > 1 else None
    col = 0
    for p, m in ordered:
        Wp, reps = read_weights(p, m, meta["genes"])
        W[:, col : col + Wp.shape[1]] = Wp
        if repeats is not None:
            repeats[:, :, col : col + Wp.shape[1]] = reps
        col += Wp.shape[1]
        del Wp, reps
    return W, meta, repeats


def merge_top_links(paths: list[str], limit: int) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray]:
    """The first ``limit`` links of the merged run, streamed: each part is read, its candidates (its values >= its
    own (limit + self-links)-th largest, :func:`links.entries_at_or_above_kth`) kept, and the part dropped, so
    memory is one part plus the candidates, never R x T. The union of the parts' candidates holds every global one
    (a part's k-th largest is <= the whole matrix's), so ranking the union (:func:`links.ranked_entries`) gives
    the head of the full list exactly. Returns (meta, rows, cols, values) with rows/cols indices into the
    regulators/targets of meta."""
    ordered, meta = check_parts(paths)
    genes = meta["genes"]
    reg_idx = np.asarray(meta["regulators"], dtype=np.int64)
    tgt_idx = np.asarray(meta["targets"], dtype=np.int64)
    n_self = int(np.isin(reg_idx, tgt_idx).sum())
    k = limit + n_self
    rows = cols = np.empty(0, dtype=np.int64)
    vals = np.empty(0, dtype=np.float64)
    col = 0
    for p, m in ordered:
        Wp, _ = read_weights(p, m, genes)
        Tp = Wp.shape[1]
        flat = Wp.ravel()
        cand = links.entries_at_or_above_kth(flat, k) if k < flat.size else np.arange(flat.size)
        r, c = np.divmod(cand, Tp)
        rows, cols = np.concatenate([rows, r]), np.concatenate([cols, c + col])
        vals = np.concatenate([vals, flat[cand]])
        if len(vals) > k:  # the running union cut to its own k-th largest: about k entries, not chunks x k
            keep = links.entries_at_or_above_kth(vals, k)
            rows, cols, vals = rows[keep], cols[keep], vals[keep]
        col += Tp
        del Wp, flat, cand
    order = links.ranked_entries(
        vals, rows, cols, [genes[i] for i in reg_idx], [genes[i] for i in tgt_idx], reg_idx, tgt_idx, limit
    )
    return meta, rows[order], cols[order], vals[order]


def run(args: argparse.Namespace) -> int:
    """Run the command: check the parts and write the outputs of a single-task run from them; returns the exit
    status."""
    check_outputs(output_options(args), [("PART", p) for p in args.parts])
    threads = resolve_threads(args.threads)
    with StageMetrics("genie3-merge", args.metrics, threads=threads) as m:
        # --max-links alone (no weight matrix, summary, plot or repeats): streamed, never R x T in memory
        if args.max_links and not (args.weights or args.summary or args.plot):
            meta = read_meta(args.parts[0])
            stream = int(meta.get("options", {}).get("repeats", 1)) == 1
        else:
            stream = False
        if stream:
            meta, rows, cols, vals = merge_top_links(args.parts, args.max_links)
            genes = meta["genes"]
            # t_out: the temporary of args.out (given), never None
            with atomic_outputs([args.out]) as (t_out,), naming_errors(cast(Path, t_out)):
                n_links = links.write_links(
                    cast(Path, t_out),
                    None,
                    [genes[i] for i in meta["regulators"]],
                    [genes[i] for i in meta["targets"]],
                    rows,
                    cols,
                    threads=threads,
                    values=vals,
                    gz=wants_gzip(args.out),
                )
        else:
            W, meta, repeats = merge_parts(args.parts)
            n_links = finish_outputs(
                W,
                meta,
                args.out,
                weights=args.weights,
                summary=args.summary,
                plot=args.plot,
                top=args.top,
                max_links=args.max_links,
                threads=threads,
                repeats=repeats,
                consume=True,
            )
            del W, repeats
        o = meta["options"]
        m.set(
            genes=len(meta["genes"]),
            samples=meta["samples"],
            regulators=len(meta["regulators"]),
            targets=len(meta["targets"]),
            trees=o["n_trees"],
            engine=o["engine"],
            parts=len(args.parts),
            links=n_links,
            streamed=stream,
        )
    return 0
