"""``chromaflow genie3-merge``: validate ``genie3 --targets-chunk`` parts and write the same outputs as a
single-task run (byte-identical link list)."""
from __future__ import annotations

import argparse

import numpy as np

from ..common import ChromaflowError, StageMetrics, add_run_options, check_outputs, resolve_threads
from .parts import read_part
from .report import add_output_arguments, finish_outputs, output_options

_SAME = ("genes", "regulators", "n_targets_total", "options", "fingerprint", "samples", "prior_check")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("parts", nargs="+", metavar="PART", help="part files written by genie3 --targets-chunk")
    add_output_arguments(p, "ranked link list (.tsv.gz)")
    add_run_options(p, threads="threads formatting and compressing the link list (0 = all usable CPUs; same bytes)")


def merge_parts(paths: list[str]) -> tuple[np.ndarray, dict]:
    loaded = [(p, *read_part(p, with_repeats=True)) for p in paths]
    p0, _, m0, _ = loaded[0]
    for p, W, m, _ in loaded:
        for k in _SAME:
            if m.get(k) != m0.get(k):
                raise ChromaflowError(f"{p}: {k} differs from {p0} (parts of different runs cannot be merged)")
        if m["chunk"][1] != m0["chunk"][1]:
            raise ChromaflowError(f"{p}: chunk {m['chunk'][0]}/{m['chunk'][1]} is from a different split than "
                                  f"{p0} ({m0['chunk'][0]}/{m0['chunk'][1]})")
        if W.shape != (len(m["regulators"]), len(m["targets"])):
            raise ChromaflowError(f"{p}: weight array shape {W.shape} does not match its metadata")
    n_chunks = m0["chunk"][1]
    by_chunk: dict[int, tuple] = {}
    for p, W, m, reps in loaded:
        i = m["chunk"][0]
        if i in by_chunk:
            raise ChromaflowError(f"{p}: chunk {i}/{n_chunks} given twice (also {by_chunk[i][0]})")
        by_chunk[i] = (p, W, m, reps)
    missing = [i for i in range(1, n_chunks + 1) if i not in by_chunk]
    if missing:
        raise ChromaflowError(f"incomplete: chunk(s) {', '.join(f'{i}/{n_chunks}' for i in missing)} missing")
    pos = 0
    Ws, Rs, targets, const = [], [], [], []
    for i in range(1, n_chunks + 1):
        p, W, m, reps = by_chunk[i]
        lo, hi = m["target_range"]
        if lo != pos:
            raise ChromaflowError(f"{p}: target range {lo}-{hi} overlaps or leaves a gap (expected start {pos})")
        pos = hi
        Ws.append(W)
        Rs.append(reps)
        targets.extend(m["targets"])
        const.extend(m.get("constant_targets", []))
    if pos != m0["n_targets_total"]:
        raise ChromaflowError(f"incomplete: parts cover {pos} of {m0['n_targets_total']} targets")
    meta = dict(m0, targets=targets, constant_targets=const, chunk=[1, 1], target_range=[0, pos])
    repeats = np.concatenate(Rs, axis=2) if Rs[0] is not None else None
    return np.concatenate(Ws, axis=1), meta, repeats


def run(args: argparse.Namespace) -> int:
    check_outputs(output_options(args), [("PART", p) for p in args.parts])
    threads = resolve_threads(args.threads)
    with StageMetrics("genie3-merge", args.metrics, threads=threads) as m:
        W, meta, repeats = merge_parts(args.parts)
        n_links = finish_outputs(W, meta, args.out, weights=args.weights, summary=args.summary, plot=args.plot,
                                 top=args.top, max_links=args.max_links, threads=threads, repeats=repeats)
        o = meta["options"]
        m.set(genes=len(meta["genes"]), samples=meta["samples"], regulators=len(meta["regulators"]),
              targets=len(meta["targets"]), trees=o["n_trees"], engine=o["engine"], parts=len(args.parts),
              links=n_links)
    return 0
