"""The rows of a FASTA's layout (chromaflow.genome.layout.Layout): any slice, the blocks and the fingerprint equal
the whole-genome arrays they replace (seqids repeated per row, start_ends of every record), and a shard's slice
of a 4 Gbp layout costs memory for its own rows only."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from chromaflow.genome.layout import Layout, input_fingerprint, start_ends


def whole(layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    """The arrays as the layout held them before (every row at once)."""
    ids = np.repeat(
        np.array([s.encode() for s, _ in layout.records], dtype="S50"),
        [2 * (-(-n // layout.L)) for _, n in layout.records],
    )
    se = np.concatenate([start_ends(n, layout.L) for _, n in layout.records])
    return ids, se


@pytest.fixture
def layout():
    rng = np.random.default_rng(3)
    L = 100
    lens = [1, 99, 100, 101, 200, 250, 5_000] + rng.integers(1, 2_000, 40).tolist() + [0, 7]  # 0: no rows
    return Layout([(f"r{i}", int(n)) for i, n in enumerate(lens)], L, b"Hs")


def test_any_slice_equals_the_whole_arrays(layout):
    ids, se = whole(layout)
    n = layout.n_rows
    assert len(ids) == n
    rng = np.random.default_rng(4)
    cuts = [(0, None), (0, n), (n - 1, n), (5, 5), (n, n + 10), (0, 1)] + [
        tuple(sorted(rng.integers(0, n + 1, 2).tolist())) for _ in range(200)
    ]
    for a, b in cuts:
        got_ids, got_se = layout.rows(a, b)
        assert np.array_equal(got_ids, ids[a:b]) and np.array_equal(got_se, se[a:b]), (a, b)
        assert got_ids.dtype == np.dtype("S50") and got_se.dtype == np.int64


@pytest.mark.parametrize("block", [1, 7, 1 << 16])
def test_blocks_and_fingerprint_equal_the_whole_arrays(layout, block):
    ids, se = whole(layout)
    blocks = list(layout.row_blocks(block))
    assert np.array_equal(np.concatenate([b[0] for b in blocks]), ids)
    assert np.array_equal(np.concatenate([b[1] for b in blocks]), se)
    assert layout.fingerprint() == input_fingerprint(layout.n_rows, layout.L, ids, se, layout.species)


def test_a_shard_of_a_4gbp_layout_costs_its_own_rows():
    """10 records of 347.5 Mbp and 50,000 contigs at L = 2,000 (4.05 M rows; the whole arrays took 264 MB and the
    fingerprint as much again): a shard's 20,000 rows and the fingerprint stay within a few MB."""
    rng = np.random.default_rng(30)
    recs = [(f"chr{i}", 347_500_000) for i in range(10)] + [
        (f"ctg{i}", int(n)) for i, n in enumerate(rng.integers(1_000, 20_001, 50_000))
    ]
    lay = Layout(recs, 2_000, b"S")
    assert lay.n_rows > 4_000_000
    tracemalloc.start()
    try:
        ids, se = lay.rows(2_000_000, 2_020_000)
        _, peak_rows = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        lay.fingerprint()
        _, peak_fp = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(ids) == 20_000 and len(se) == 20_000
    assert peak_rows < 8 << 20, peak_rows
    assert peak_fp < 32 << 20, peak_fp
