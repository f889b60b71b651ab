"""The one-row-chunked datasets (data/seqids, data/start_ends, data/species) are read and written ROW_BLOCK rows
per HDF5 call by every stage (chromaflow.genome.h5rows).

A whole-dataset call makes HDF5 build a record per chunk (one per row) that glibc keeps afterwards: the scale
benchmark's 1.2 Gbp run measured bigwig at 4.9 GB and peaks at 5.2 GB of peak memory, growing with the genome,
from one ``seqids[()]`` each. These tests set ROW_BLOCK to 3, record the rows of every HDF5 read and write of those
datasets while each stage's reader runs, and check that no call touched more than 3 rows and the values are the
file's (partial last blocks included).
"""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from chromaflow.genome import h5rows
from helpers.cli import run_in_process

ONE_ROW = ("/data/seqids", "/data/start_ends", "/data/species")


@pytest.fixture
def calls(monkeypatch):
    """ROW_BLOCK = 3; the returned list gets (dataset name, rows) for each read or write of a one-row dataset."""
    monkeypatch.setattr(h5rows, "ROW_BLOCK", 3)
    seen: list[tuple[str, int]] = []
    get, put = h5py.Dataset.__getitem__, h5py.Dataset.__setitem__

    def getitem(self, args, *rest):
        out = get(self, args, *rest)
        if self.name in ONE_ROW:
            seen.append((self.name, len(out) if np.ndim(out) else 1))
        return out

    def setitem(self, args, val):
        if self.name in ONE_ROW:
            seen.append((self.name, len(val) if np.ndim(val) else 1))
        return put(self, args, val)

    monkeypatch.setattr(h5py.Dataset, "__getitem__", getitem)
    monkeypatch.setattr(h5py.Dataset, "__setitem__", setitem)
    return seen


def _file(path, n: int) -> None:
    with h5py.File(path, "w") as f:
        f.create_dataset("data/seqids", data=np.array([f"c{i // 4}" for i in range(n)], dtype="S50"), chunks=(1,))
        f.create_dataset("data/start_ends", data=np.arange(2 * n, dtype=np.int64).reshape(n, 2), chunks=(1, 2))


@pytest.mark.parametrize("start,stop", [(0, None), (0, 7), (2, 9), (5, 5), (9, 100)])
def test_read_rows_in_blocks(tmp_path, calls, start, stop):
    _file(tmp_path / "g.h5", 10)
    with h5py.File(tmp_path / "g.h5") as f:
        want = f["data/start_ends"][start:stop]
        calls.clear()
        got = h5rows.read_rows(f["data/start_ends"], start, stop)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert calls and max(n for _, n in calls) <= 3 or len(want) == 0


@pytest.mark.parametrize("n,blocks", [(12, [3, 3, 3, 3]), (10, [3, 3, 3, 1]), (0, [])])
def test_write_rows_in_blocks(tmp_path, calls, n, blocks):
    """The first n rows written (fewer than the dataset holds too), the rest untouched."""
    values = np.arange(2 * n, dtype=np.int64).reshape(n, 2)
    with h5py.File(tmp_path / "w.h5", "w") as f:
        ds = f.create_dataset("data/start_ends", shape=(12, 2), dtype=np.int64, chunks=(1, 2), fillvalue=-1)
        h5rows.write_rows(ds, values)
        assert [k for _, k in calls] == blocks
        want = np.full((12, 2), -1, dtype=np.int64)
        want[:n] = values
        np.testing.assert_array_equal(ds[...], want)


def test_bigwig_and_peaks_input_read_in_blocks(reference_dir, calls):
    """bigwig, peaks and gene-accessibility open predictions through bigwig.h5input.PredictionsInput."""
    from chromaflow.bigwig.h5input import PredictionsInput

    path = reference_dir / "predmoter" / "pred_data_1_predictions.h5"
    inp = PredictionsInput(str(path))
    try:
        rows = {c.name: (list(c.plus), list(c.minus)) for c in inp.chroms}
    finally:
        inp.close()
    assert calls and max(n for _, n in calls) <= 3, calls
    with h5py.File(path) as f:  # the chromosome map is the file's (read whole, outside the recorder's limit)
        seqids = f["data/seqids"][...]
    assert sum(len(p) + len(m) for p, m in rows.values()) == len(seqids)
    for name, (p, m) in rows.items():
        assert {s.decode() for s in seqids[p + m]} == {name}


def test_coverage_layout_reads_in_blocks(reference_dir, calls):
    from chromaflow.coverage.layout import read_layout

    path = reference_dir / "predmoter" / "pred_data_1.h5"
    with h5py.File(path) as f:
        lay = read_layout(f, str(path))
        assert max(n for _, n in calls) <= 3, calls
        want = f["data/start_ends"][...], f["data/species"][...]
    np.testing.assert_array_equal(lay.start_ends, want[0])
    assert list(lay.species) == [s.decode() for s in want[1]]


def test_predict_h5_source_reads_in_blocks(reference_dir, calls):
    from chromaflow.predict.sources import H5Source

    path = reference_dir / "predmoter" / "pred_data_1.h5"
    src = H5Source(str(path))
    try:
        calls.clear()
        seqids, se = src.rows(2, 13)
    finally:
        src.close()
    assert max(n for _, n in calls) <= 3, calls
    with h5py.File(path) as f:
        np.testing.assert_array_equal(seqids, f["data/seqids"][2:13])
        np.testing.assert_array_equal(se, f["data/start_ends"][2:13])


def test_fasta2h5_lzf_writes_in_blocks(reference_dir, tmp_path, calls):
    """The lzf route writes data/species, seqids and start_ends itself (the gzip route writes raw chunks)."""
    fa = reference_dir / "helixer" / "exactmultiple_L10_lzf.fa"
    out = tmp_path / "g.h5"
    run_in_process(
        "fasta2h5",
        "--fasta",
        str(fa),
        "--out",
        str(out),
        "--species",
        "sp",
        "--subsequence-length",
        "10",
        "--compression",
        "lzf",
    )
    writes = {name: [n for nm, n in calls if nm == name] for name in ONE_ROW}
    with h5py.File(out) as f:
        n = f["data/seqids"].shape[0]
    assert n > 3 and all(sum(w) == n and max(w) <= 3 for w in writes.values()), (n, writes)
