"""``chromaflow predict-merge``: join ``predict --shard i/n`` outputs into one predictions h5.

The shards must be complete (indices 1..n each once), contiguous and non-overlapping, and come from the
same input (fingerprint of N, L, seqids, start_ends, species) and the same model (checkpoint SHA-256 and
model_name). They are ordered by their recorded shard index, not by argument order. Compressed prediction
chunks are copied as they are (no recompression); the result equals an unsharded run and has no root attrs.

``--view`` writes no copy of the predictions: a small h5 whose ``data/seqids``, ``data/start_ends`` and
``prediction/predictions`` are HDF5 virtual datasets over the shards (``data/species``, ``prediction/model_name`` and
``prediction/datasets`` as in the merge), so any h5py reader sees the merged file's values while the shards hold the
only copy. The shards are named by their paths relative to the view's folder: keep them beside it (a pipeline stages
the view and its shards into one task folder). Readers that find a shard missing get HDF5's fill value (-1), so
chromaflow's own reader (:class:`chromaflow.bigwig.h5input.ChunkReader`) checks every source first.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from ..utils.cli_options import add_run_options
from ..utils.errors import ChromaflowError, OutputExistsError
from ..utils.inputs import open_h5_input
from ..utils.metrics import StageMetrics
from ..utils.outputs import atomic_output, check_outputs


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): the shard files, the output and ``--view``."""
    p.add_argument("--out", required=True, help="merged predictions h5")
    p.add_argument("shards", nargs="+", metavar="SHARD", help="shard files written by predict --shard i/n")
    p.add_argument(
        "--view",
        action="store_true",
        help="write a virtual h5 over the shards (no copy of the predictions; the shards must stay at the "
        "same paths relative to it) instead of the merged file",
    )
    add_run_options(p, metrics=True, force=True)


@dataclass(frozen=True, eq=False)
class _Shard:
    """What the merge needs of one shard file's attributes, read once; the file is reopened for its rows and then
    for its chunks (one shard open at a time, no row of the genome held: at 4 Gbp and L = 2,000 the rows'
    seqids and start_ends alone take 320 MB)."""

    path: str
    index: int
    count: int
    total: int
    row_start: int
    row_end: int
    key: tuple  # what must equal across the shards (_shard_key)
    length: int
    datasets: list
    species0: bytes
    model_name: str


def _read_shard(path: str) -> _Shard:
    """The shard's attributes and layout, checked; the file is closed again (a merge of many shards holds one open
    at a time: each open file keeps HDF5 caches, ~7 MB a shard at 1.2 Gbp)."""
    from .h5io import SHARD_ATTRS

    fh = open_h5_input(path, "shard file")
    try:
        missing = [a for a in SHARD_ATTRS if a not in fh.attrs]
        if missing:
            raise ChromaflowError(f"{path}: not a predict shard file (root attribute {missing[0]} missing)")
        for name in (
            "prediction/predictions",
            "prediction/model_name",
            "prediction/datasets",
            "data/seqids",
            "data/start_ends",
            "data/species",
        ):
            if name not in fh:
                raise ChromaflowError(f"{path}: dataset {name} missing")
        a = fh.attrs
        pred = fh["prediction/predictions"]
        shard = _Shard(
            path=path,
            index=int(a["chromaflow_shard_index"]),
            count=int(a["chromaflow_shard_count"]),
            total=int(a["chromaflow_total_rows"]),
            row_start=int(a["chromaflow_row_start"]),
            row_end=int(a["chromaflow_row_end"]),
            key=_shard_key(fh),
            length=int(pred.shape[1]),
            datasets=[x.decode() for x in fh["prediction/datasets"][()]],
            species0=bytes(fh["data/species"].fillvalue),
            model_name=bytes(fh["prediction/model_name"].fillvalue).decode("utf-8", "replace"),
        )
        for name in ("prediction/predictions", "data/seqids", "data/start_ends"):
            if fh[name].shape[0] != shard.row_end - shard.row_start:
                raise ChromaflowError(
                    f"{path}: {name} holds {fh[name].shape[0]} rows, attributes say {shard.row_start}-{shard.row_end}"
                )
        return shard
    finally:
        fh.close()


def run(args: argparse.Namespace) -> int:
    """Run the command: check the shards and join them into one predictions h5 (or, with ``--view``, a virtual h5
    over them); returns the exit status."""
    check_outputs([("--out", args.out), ("--metrics", args.metrics)], [("SHARD", s) for s in args.shards])
    if os.path.exists(args.out) and not args.force:
        raise OutputExistsError(f"{args.out}: output exists (use --force to overwrite)")
    with StageMetrics("predict-view" if args.view else "predict-merge", args.metrics, threads=1) as metrics:
        shards = [_read_shard(path) for path in args.shards]
        ref = shards[0]
        by_index = _index_shards(shards)
        _check_coverage(by_index, ref.count, ref.total)
        ordered = [by_index[i] for i in range(1, ref.count + 1)]
        (_write_view if args.view else _write_merged)(args.out, args.force, ordered)
        metrics.set(shards=ref.count, subsequences=ref.total, bp_rows=ref.total * ref.length)
    return 0


def _shard_key(fh) -> tuple:
    """What must be equal across the shards: input fingerprint, model (checkpoint SHA-256, model_name),
    datasets, chunk length and channels, species."""
    a = fh.attrs
    return (
        a["chromaflow_input_fingerprint"],
        a["chromaflow_model_sha256"],
        fh["prediction/model_name"].fillvalue,
        tuple(fh["prediction/datasets"][()]),
        fh["prediction/predictions"].shape[1:],
        fh["data/species"].fillvalue,
    )


def _index_shards(shards: list[_Shard]) -> dict[int, _Shard]:
    """{shard index: shard}, each shard checked against the first one."""
    ref = shards[0]
    by_index: dict[int, _Shard] = {}
    for sh in shards:
        if sh.key[0] != ref.key[0]:
            raise ChromaflowError(f"{sh.path}: shard of a different input than {ref.path}")
        if sh.count != ref.count or sh.total != ref.total:
            raise ChromaflowError(
                f"{sh.path}: shard of {sh.count} / {sh.total} rows, but {ref.path} is of {ref.count} / {ref.total}"
            )
        if sh.key[1:3] != ref.key[1:3]:
            raise ChromaflowError(f"{sh.path}: shard of a different model than {ref.path}")
        if sh.key[3:] != ref.key[3:]:
            raise ChromaflowError(f"{sh.path}: datasets/chunk length/species differ from {ref.path}")
        if sh.index in by_index:
            raise ChromaflowError(
                f"{sh.path}: shard {sh.index}/{sh.count} given twice (also {by_index[sh.index].path})"
            )
        by_index[sh.index] = sh
    return by_index


def _check_coverage(by_index: dict[int, _Shard], count: int, total: int) -> None:
    """Shards 1..count all present, each starting where the one before ended, together rows 0..total."""
    absent = [i for i in range(1, count + 1) if i not in by_index]
    if absent:
        raise ChromaflowError(f"incomplete shard set: shard(s) {', '.join(f'{i}/{count}' for i in absent)} missing")
    expect = 0
    for i in range(1, count + 1):
        sh = by_index[i]
        if sh.row_start != expect:
            raise ChromaflowError(
                f"{sh.path}: shard {i}/{count} starts at row {sh.row_start}, expected {expect} (gap or overlap)"
            )
        expect = sh.row_end
    if expect != total:
        raise ChromaflowError(f"shards cover rows 0-{expect}, input has {total}")


def _shard_rows(ordered: list[_Shard]):
    """(seqids, start_ends) of every row, shard after shard (one open at a time), ROW_BLOCK rows a block and the
    rest last: the blocks an unsharded ``predict`` writes (:func:`chromaflow.genome.h5rows.write_rows`)."""
    import numpy as np

    from ..genome import h5rows

    block = h5rows.ROW_BLOCK
    ids: list = []
    ses: list = []
    held = 0
    for sh in ordered:
        with open_h5_input(sh.path, "shard file") as fh:
            n = sh.row_end - sh.row_start
            for a in range(0, n, block):
                b = min(a + block, n)
                ids.append(h5rows.read_rows(fh["data/seqids"], a, b))
                ses.append(h5rows.read_rows(fh["data/start_ends"], a, b))
                held += b - a
                if held >= block:
                    i, s = np.concatenate(ids), np.concatenate(ses)
                    yield i[:block], s[:block]
                    ids, ses, held = [i[block:]], [s[block:]], held - block
    if held:
        yield np.concatenate(ids), np.concatenate(ses)


def _write_merged(out_path: str, force: bool, ordered: list[_Shard]) -> None:
    """The merged predictions h5 (atomically): the shards' seqids and start_ends, then their compressed chunks
    copied as they are, one shard file open at a time. The writes are those of an unsharded ``predict --h5`` (rows
    in the same blocks, then chunks), so the merge has its bytes."""
    import h5py

    from .h5io import create_predictions

    ref = ordered[0]
    with atomic_output(out_path, force=force) as tmp:
        with h5py.File(tmp, "w") as out:
            dset = create_predictions(
                out,
                n_rows=ref.total,
                length=ref.length,
                datasets=ref.datasets,
                species0=ref.species0,
                model_name=ref.model_name,
                row_blocks=_shard_rows(ordered),
            )
            d = len(ref.datasets)
            for sh in ordered:
                with open_h5_input(sh.path, "shard file") as fh:
                    src = fh["prediction/predictions"]
                    for r in range(src.shape[0]):
                        for j in range(d):
                            try:
                                mask, data = src.id.read_direct_chunk((r, 0, j))
                            except (KeyError, OSError, RuntimeError):
                                continue  # chunk never written: fill value (-1), same in the output
                            dset.id.write_direct_chunk((sh.row_start + r, 0, j), data, mask)


#: the datasets of a view that are virtual (one source per shard); the others are written as the merge writes them
VIRTUAL = ("data/seqids", "data/start_ends", "prediction/predictions")


def _write_view(out_path: str, force: bool, ordered: list[_Shard]) -> None:
    """A predictions h5 whose row datasets are virtual, mapped shard after shard (atomically). Each source is the
    shard's path relative to the view's folder (a symlink is not resolved: a staged shard is named where it is
    staged). Types, shapes, max shapes and fill values are those of :func:`create_predictions`."""
    import h5py
    import numpy as np

    from .h5io import create_model_fields, create_species

    ref = ordered[0]
    folder = os.path.dirname(os.path.abspath(out_path))
    with atomic_output(out_path, force=force) as tmp:
        with h5py.File(tmp, "w") as out:
            d = len(ref.datasets)
            shapes = {
                "data/seqids": ((), "S50", None),
                "data/start_ends": ((2,), "int64", None),
                "prediction/predictions": ((ref.length, d), "int64", -1),
            }
            for name in VIRTUAL:
                tail, dtype, fill = shapes[name]
                # HDF5's low-level calls, not h5py's VirtualLayout: its property list keeps HDF5's default of
                # recording the dataset's creation time in the file (two runs would differ in those bytes);
                # h5py's create_dataset turns that off, as here
                dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
                dcpl.set_obj_track_times(False)
                if fill is not None:
                    dcpl.set_fill_value(np.array([fill], dtype=dtype))
                space = h5py.h5s.create_simple((ref.total, *tail))
                for sh in ordered:
                    rows = sh.row_end - sh.row_start
                    sel = space.copy()
                    sel.select_hyperslab((sh.row_start, *(0 for _ in tail)), (rows, *tail))
                    dcpl.set_virtual(
                        sel,
                        os.path.relpath(os.path.abspath(sh.path), folder).encode(),
                        f"/{name}".encode(),
                        h5py.h5s.create_simple((rows, *tail)),
                    )
                group, leaf = name.split("/")
                h5py.h5d.create(
                    out.require_group(group).id,
                    leaf.encode(),
                    h5py.h5t.py_create(np.dtype(dtype), logical=1),
                    space,
                    dcpl=dcpl,
                ).close()
            create_species(out["data"], ref.total, ref.species0)
            create_model_fields(out["prediction"], ref.model_name, ref.datasets)
