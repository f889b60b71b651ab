"""``chromaflow predict-merge``: join ``predict --shard i/n`` outputs into one predictions h5.

The shards must be complete (indices 1..n each once), contiguous and non-overlapping, and come from the
same input (fingerprint of N, L, seqids, start_ends, species) and the same model (checkpoint SHA-256 and
model_name). They are ordered by their recorded shard index, not by argument order. Compressed prediction
chunks are copied as they are (no recompression); the result equals an unsharded run and has no root attrs.
"""
from __future__ import annotations

import argparse
import os

from ..common import (ChromaflowError, OutputExistsError, StageMetrics, add_run_options, atomic_output,
                      check_outputs, open_h5_input)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="merged predictions h5")
    p.add_argument("shards", nargs="+", metavar="SHARD", help="shard files written by predict --shard i/n")
    add_run_options(p, metrics=True, force=True)


def _read_shard(path: str):
    from .h5io import SHARD_ATTRS

    fh = open_h5_input(path, "shard file")
    missing = [a for a in SHARD_ATTRS if a not in fh.attrs]
    if missing:
        fh.close()
        raise ChromaflowError(f"{path}: not a predict shard file (root attribute {missing[0]} missing)")
    for name in ("prediction/predictions", "prediction/model_name", "prediction/datasets", "data/seqids",
                 "data/start_ends", "data/species"):
        if name not in fh:
            fh.close()
            raise ChromaflowError(f"{path}: dataset {name} missing")
    return fh


def run(args: argparse.Namespace) -> int:
    check_outputs([("--out", args.out), ("--metrics", args.metrics)], [("SHARD", s) for s in args.shards])
    if os.path.exists(args.out) and not args.force:
        raise OutputExistsError(f"{args.out}: output exists (use --force to overwrite)")
    with StageMetrics("predict-merge", args.metrics, threads=1) as metrics:
        files = []
        try:
            for path in args.shards:
                files.append((path, _read_shard(path)))
            ref = files[0][1]
            count = int(ref.attrs["chromaflow_shard_count"])
            total = int(ref.attrs["chromaflow_total_rows"])
            by_index = _index_shards(files, count, total)
            _check_coverage(by_index, count, total)
            ordered = [by_index[i][1] for i in range(1, count + 1)]
            length = ref["prediction/predictions"].shape[1]
            _write_merged(args.out, args.force, ordered, ref, total)
            metrics.set(shards=count, subsequences=total, bp_rows=total * length)
        finally:
            for _, fh in files:
                fh.close()
    return 0


def _shard_key(fh) -> tuple:
    """What must be equal across the shards: input fingerprint, model (checkpoint SHA-256, model_name),
    datasets, chunk length and channels, species."""
    a = fh.attrs
    return (a["chromaflow_input_fingerprint"], a["chromaflow_model_sha256"], fh["prediction/model_name"].fillvalue,
            tuple(fh["prediction/datasets"][()]), fh["prediction/predictions"].shape[1:], fh["data/species"].fillvalue)


def _index_shards(files: list, count: int, total: int) -> dict:
    """{shard index: (path, file)}, each shard checked against the first one and against its own rows."""
    ref_path, ref = files[0]
    key0 = _shard_key(ref)
    by_index: dict = {}
    for path, fh in files:
        a = fh.attrs
        key = _shard_key(fh)
        if key[0] != key0[0]:
            raise ChromaflowError(f"{path}: shard of a different input than {ref_path}")
        if int(a["chromaflow_shard_count"]) != count or int(a["chromaflow_total_rows"]) != total:
            raise ChromaflowError(f"{path}: shard of {int(a['chromaflow_shard_count'])} / "
                                  f"{int(a['chromaflow_total_rows'])} rows, but {ref_path} is of {count} / {total}")
        if key[1:3] != key0[1:3]:
            raise ChromaflowError(f"{path}: shard of a different model than {ref_path}")
        if key[3:] != key0[3:]:
            raise ChromaflowError(f"{path}: datasets/chunk length/species differ from {ref_path}")
        idx = int(a["chromaflow_shard_index"])
        if idx in by_index:
            raise ChromaflowError(f"{path}: shard {idx}/{count} given twice (also {by_index[idx][0]})")
        rows = (int(a["chromaflow_row_start"]), int(a["chromaflow_row_end"]))
        if fh["prediction/predictions"].shape[0] != rows[1] - rows[0]:
            raise ChromaflowError(f"{path}: holds {fh['prediction/predictions'].shape[0]} rows, "
                                  f"attributes say {rows[0]}-{rows[1]}")
        by_index[idx] = (path, fh)
    return by_index


def _check_coverage(by_index: dict, count: int, total: int) -> None:
    """Shards 1..count all present, each starting where the one before ended, together rows 0..total."""
    absent = [i for i in range(1, count + 1) if i not in by_index]
    if absent:
        raise ChromaflowError(f"incomplete shard set: shard(s) {', '.join(f'{i}/{count}' for i in absent)} missing")
    expect = 0
    for i in range(1, count + 1):
        path, fh = by_index[i]
        start, end = int(fh.attrs["chromaflow_row_start"]), int(fh.attrs["chromaflow_row_end"])
        if start != expect:
            raise ChromaflowError(f"{path}: shard {i}/{count} starts at row {start}, expected {expect} "
                                  "(gap or overlap)")
        expect = end
    if expect != total:
        raise ChromaflowError(f"shards cover rows 0-{expect}, input has {total}")


def _write_merged(out_path: str, force: bool, ordered: list, ref, total: int) -> None:
    """The merged predictions h5 (atomically): rows of the shards in order, compressed chunks copied as they are."""
    import h5py
    import numpy as np

    from ..genome.h5rows import read_rows
    from .h5io import create_predictions

    p0 = ref["prediction/predictions"]
    length, d = p0.shape[1], p0.shape[2]
    with atomic_output(out_path, force=force) as tmp:
        with h5py.File(tmp, "w") as out:
            seqids = np.concatenate([read_rows(fh["data/seqids"]) for fh in ordered])
            start_ends = np.concatenate([read_rows(fh["data/start_ends"]) for fh in ordered])
            dset = create_predictions(
                out, n_rows=total, length=length,
                datasets=[x.decode() for x in ref["prediction/datasets"][()]],
                species0=bytes(ref["data/species"].fillvalue),
                model_name=bytes(ref["prediction/model_name"].fillvalue).decode("utf-8", "replace"),
                seqids=seqids, start_ends=start_ends)
            for fh in ordered:
                src = fh["prediction/predictions"]
                off = int(fh.attrs["chromaflow_row_start"])
                for r in range(src.shape[0]):
                    for j in range(d):
                        try:
                            mask, data = src.id.read_direct_chunk((r, 0, j))
                        except (KeyError, OSError, RuntimeError):
                            continue  # chunk never written: fill value (-1), same in the output
                        dset.id.write_direct_chunk((off + r, 0, j), data, mask)
