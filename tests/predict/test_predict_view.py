"""``predict-merge --view``: a predictions h5 of virtual datasets over the shards (issue 30: the pipeline's tasks
read the shards through it, so work/ holds the predictions once). Compared with Predmoter's reference predictions
of the same input: values, and the tracks `chromaflow bigwig` makes of them (through the fast reader and h5py's)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from helpers.cli import run_in_process as run_cli

#: compared with Predmoter's file (prediction/model_name is the checkpoint path as typed: checked on its own)
DATASETS = ("data/seqids", "data/start_ends", "data/species", "prediction/datasets", "prediction/predictions")


@pytest.fixture(scope="module")
def shards(reference_dir, tmp_path_factory) -> list[Path]:
    """pred_data_1 (16 rows) predicted in three shards, in the folder ``shards``."""
    d = tmp_path_factory.mktemp("view") / "shards"
    d.mkdir()
    pm = reference_dir / "predmoter"
    out = []
    for i in (1, 2, 3):
        p = d / f"pd1.shard{i}of3_predictions.h5"
        run_cli(
            "predict",
            "--h5",
            str(pm / "pred_data_1.h5"),
            "--model",
            str(pm / "mini_model.ckpt"),
            "--out",
            str(p),
            "--shard",
            f"{i}/3",
            "--batch-size",
            "4",
        )
        out.append(p)
    return out


def _view(shards: list[Path], out: Path) -> Path:
    # shards given out of order: the view orders them by their recorded index, as the merge does
    run_cli(
        "predict-merge",
        "--view",
        "--out",
        str(out),
        *map(str, (shards[2], shards[0], shards[1])),
        "--metrics",
        str(out.with_suffix(".json")),
        "--force",
    )
    return out


def test_view_reads_as_predmoters_predictions_without_a_copy(shards, reference_dir):
    view = _view(shards, shards[0].parent / "pd1_predictions.h5")
    ref = reference_dir / "predmoter" / "pred_data_1_predictions.h5"
    with h5py.File(view) as v, h5py.File(ref) as r:
        for name in DATASETS:
            a, b = v[name], r[name]
            assert (a.shape, a.dtype) == (b.shape, b.dtype), name
            assert np.array_equal(a[()], b[()]), name
        for name in ("data/species", "prediction/predictions"):
            assert v[name].fillvalue == r[name].fillvalue, name
        assert all(v[n].is_virtual for n in ("data/seqids", "data/start_ends", "prediction/predictions"))
        assert [m.file_name for m in v["prediction/predictions"].virtual_sources()] == [s.name for s in shards]
        assert dict(v.attrs) == {}
        assert v["prediction/model_name"][0] == str(reference_dir / "predmoter" / "mini_model.ckpt").encode()
    # the view holds no prediction: a few KiB, the shards hold them
    assert view.stat().st_size < 64 << 10 < sum(s.stat().st_size for s in shards)
    # the same bytes when made again a second later: HDF5 records no creation time (its default for a virtual
    # dataset, which h5py's VirtualLayout keeps, does)
    time.sleep(1.1)
    assert _view(shards, shards[0].parent / "again.h5").read_bytes() == view.read_bytes()


def _tracks(pred: Path, out: Path, reader: str | None = None) -> dict[str, bytes]:
    env = {"CHROMAFLOW_BIGWIG_READER": reader} if reader else {}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        run_cli(
            "bigwig",
            "--predictions",
            str(pred),
            "--outdir",
            str(out),
            "--basename",
            "pd1",
            "--strand",
            "all",
            "--no-browser-files",
            "--force",
        )
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.bw"))}


def test_bigwig_of_a_view_equals_that_of_predmoters_file(shards, reference_dir, tmp_path, monkeypatch):
    from chromaflow.bigwig.h5input import ChunkReader, PredictionsInput

    view = _view(shards, shards[0].parent / "pd1_predictions.h5")
    ref = _tracks(reference_dir / "predmoter" / "pred_data_1_predictions.h5", tmp_path / "ref")
    assert len(ref) == 6  # two datasets x (avg, +, -)
    assert _tracks(view, tmp_path / "fast") == ref
    assert _tracks(view, tmp_path / "h5py", reader="h5py") == ref
    # the fast reader indexes each shard's chunks and reads them from the shard files; neither it nor the chromosome
    # map leaves a shard open in HDF5 (reading through the view keeps every shard it touches open with its caches:
    # 1.2 Gbp in 61 shards, BIGWIG and PEAKS 1.4 GiB instead of 378 MiB)
    # (HDF5's own opens of a view's sources are not counted in h5py's open objects: what is read through the view
    # is recorded instead)
    through_view = []
    getitem = h5py.Dataset.__getitem__

    def recording(self, *a, **k):
        if self.is_virtual:
            through_view.append(self.name)
        return getitem(self, *a, **k)

    monkeypatch.setattr(h5py.Dataset, "__getitem__", recording)
    inp = PredictionsInput(str(view))
    try:
        reader = ChunkReader(inp, None)
        assert reader.fast and len(reader._fds) == 3
        assert set(reader._source_of.tolist()) == {0, 1, 2}
        reader.close()
    finally:
        inp.close()
    assert through_view == []
    # h5py's path (values beyond the fast path's, --experimental, or forced) reads the predictions a shard at a time
    assert _tracks(view, tmp_path / "h5py-again", reader="h5py") == ref
    assert through_view == []


def test_source_rows_read_as_the_view(shards):
    """SourceRows (a view's rows read from its shards, one file open at a time) returns what HDF5 reads through the
    view: slices, scattered ascending rows across shards, the other axes' keys, none."""
    from chromaflow.bigwig.h5input import PredictionsInput, SourceRows

    view = _view(shards, shards[0].parent / "pd1_predictions.h5")
    inp = PredictionsInput(str(view))
    try:
        pred = inp.h5["prediction/predictions"]
        rows = SourceRows(pred, inp.sources["prediction/predictions"])
        N = pred.shape[0]
        keys = [
            slice(0, N),
            slice(3, 11),
            [0, 2, 5, 6, 7, 13, N - 1],
            [4],
            [],
            (slice(2, 14), slice(None), 1),
            ([1, 5, 9, 15], slice(10, 20), 0),
        ]
        for key in keys:
            want = pred[
                key
                if isinstance(key, tuple)
                else (key,)
                if not isinstance(key, list)
                else (np.asarray(key, dtype=np.int64),)
            ]
            got = rows[key if isinstance(key, (tuple, slice)) else np.asarray(key, dtype=np.int64)]
            assert got.shape == want.shape and np.array_equal(got, want), key
        rows.close()
    finally:
        inp.close()


def test_a_view_moves_with_its_shards_and_refuses_to_read_without_them(shards, tmp_path):
    view = _view(shards, shards[0].parent / "pd1_predictions.h5")
    # staged elsewhere with its shards (a pipeline task's folder: symlinks): reads the same
    staged = tmp_path / "task"
    staged.mkdir()
    for f in (view, *shards):
        (staged / f.name).symlink_to(f)
    with h5py.File(view) as a, h5py.File(staged / view.name) as b:
        assert np.array_equal(a["prediction/predictions"][()], b["prediction/predictions"][()])
    # alone: HDF5 would read the fill value (-1) for every row; chromaflow's reader says which shard is missing
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(view, alone / view.name)
    proc = run_cli(
        "bigwig",
        "--predictions",
        str(alone / view.name),
        "--outdir",
        str(tmp_path / "bw"),
        "--basename",
        "x",
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert (
        len(lines) == 1 and str(alone / view.name) in lines[0] and shards[0].name in lines[0] and "missing" in lines[0]
    ), proc.stderr
    assert not (tmp_path / "bw").exists() or not list((tmp_path / "bw").iterdir())
    # one shard missing of three: named too
    part = tmp_path / "part"
    part.mkdir()
    shutil.copy(view, part / view.name)
    for f in (shards[0], shards[2]):
        (part / f.name).symlink_to(f)
    proc = run_cli(
        "bigwig",
        "--predictions",
        str(part / view.name),
        "--outdir",
        str(tmp_path / "bw2"),
        "--basename",
        "x",
        check=False,
    )
    assert proc.returncode == 1 and shards[1].name in proc.stderr and shards[0].name not in proc.stderr, proc.stderr


def test_view_refuses_what_the_merge_refuses(shards, tmp_path):
    out = tmp_path / "v.h5"
    proc = run_cli("predict-merge", "--view", "--out", str(out), str(shards[0]), str(shards[2]), check=False)
    assert proc.returncode != 0 and "incomplete shard set" in proc.stderr and not out.exists(), proc.stderr
