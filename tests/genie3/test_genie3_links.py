"""Ranking and writing the link list (chromaflow.genie3.links): ties by names, the C radix sort and its numpy
fallback against a plain lexsort, the --max-links candidates, and the C formatter's bytes for any thread count."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from chromaflow.genie3 import links
from helpers.genie3_files import adversarial_weights, lexsort_reference


def test_ranked_links_ties_by_names():
    W = np.array([[0.0, 0.5, 0.5], [0.5, 0.0, 0.2]])
    rows, cols = links.ranked_links(W, ["B", "A"], ["B", "A", "C"], np.array([0, 1]), np.array([0, 1, 2]))
    pairs = [(["B", "A"][r], ["B", "A", "C"][c]) for r, c in zip(rows, cols)]
    assert pairs == [("A", "B"), ("B", "A"), ("B", "C"), ("A", "C")]
    rows2, cols2 = links.ranked_links(W, ["B", "A"], ["B", "A", "C"], np.array([0, 1]), np.array([0, 1, 2]), limit=2)
    assert list(zip(rows2, cols2)) == list(zip(rows, cols))[:2]


@pytest.mark.parametrize("block", [1 << 22, 5], ids=["one-block", "blocks-of-5"])
@pytest.mark.parametrize("native", [True, False], ids=["C", "numpy"])
def test_ranked_links_match_a_lexsort_of_the_specification(native, block, monkeypatch):
    """ranked_links (C radix sort of the values in name order, or its np.lexsort fallback) gives exactly the
    order of a plain lexsort over (-value, regulator name, target name), with and without self-links and a
    limit, on weights full of ties and near-ties; with a limit its candidates are found block by block (blocks
    of 5 values: many merges, ties across block edges)."""
    monkeypatch.setattr(links, "LIMIT_BLOCK", block)
    if not native:
        monkeypatch.setitem(links.LINKS_KERNEL, "lib", None)
    elif links.links_kernel() is None:
        pytest.skip("no C compiler")
    rng = np.random.default_rng(7)
    for trial in range(40):
        R, T = int(rng.integers(1, 40)), int(rng.integers(1, 60))
        W = adversarial_weights(rng, R, T)
        G = max(R, T) + int(rng.integers(0, 4))
        names = [f"g{int(rng.integers(0, 10**6))}_{k}" for k in range(G)]
        reg_idx = rng.choice(G, R, replace=False)  # unsorted: name order differs from index order
        tgt_idx = rng.choice(G, T, replace=False) if trial % 4 else np.sort(rng.choice(G, T, replace=False))
        rn, tn = [names[k] for k in reg_idx], [names[k] for k in tgt_idx]
        for limit in (0, 1, 7, int(rng.integers(1, R * T + 2))):
            got = links.ranked_links(W, rn, tn, reg_idx, tgt_idx, limit)
            want = lexsort_reference(W, rn, tn, reg_idx, tgt_idx, limit)
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), (trial, limit)


def test_max_links_candidates_need_no_copy_of_the_matrix(monkeypatch):
    """The --max-links candidates: the same positions as a partition of the whole matrix (NaN, ties, the largest
    values at either end, blocks of 1,000), and ranked_links with a limit allocates far less than the matrix (the
    earlier np.partition copied all of W, and the cut an R x T mask)."""
    import tracemalloc

    rng = np.random.default_rng(11)
    monkeypatch.setattr(links, "LIMIT_BLOCK", 1000)
    for case in range(3):
        flat = np.round(rng.random(20_000), 3)  # many ties
        if case == 2:
            flat[rng.integers(0, flat.size, 50)] = np.nan
        flat[[0, -1][case % 2]] = 2.0 + case
        for k in (1, 2, 17, 1000, 1001, 19_999, 20_000):
            want = np.flatnonzero(flat >= np.partition(flat, flat.size - k)[flat.size - k])
            assert np.array_equal(links.entries_at_or_above_kth(flat, k), want), (case, k)
    W = rng.random((2000, 2000))
    names = [f"g{i}" for i in range(2000)]
    monkeypatch.setattr(links, "LIMIT_BLOCK", 1 << 16)
    tracemalloc.start()
    rows, cols = links.ranked_links(W, names, names, np.arange(2000), np.arange(2000), limit=100)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(rows) == 100 and W[rows[0], cols[0]] == max(W[i, j] for i in range(2000) for j in range(2000) if i != j)
    assert peak < W.nbytes // 8


def test_link_writer_bytes_match_python_formatting(tmp_path, monkeypatch):
    """The C formatter ('%.9g' of the C library) writes the same bytes as Python's f"{x:.9g}" on edge cases
    (exponent switch points, subnormals, exact rounding ties at 9 digits, -0.0, non-ASCII names), and the file
    does not depend on the number of threads; the text is checked against Python's formatting line by line."""
    if links.links_kernel() is None:
        pytest.skip("no C compiler")
    rng = np.random.default_rng(3)
    edge = [
        0.0,
        -0.0,
        1e-4,
        9.99999999e-5,
        0.0001,
        123456789.0,
        1234567890.0,
        999999999.5,
        1234567885.0,
        1234567895.0,
        0.5,
        2.5e-7,
        5e-324,
        2.2250738585072014e-308,
        1.7976931348623157e308,
        1 / 3,
        2 / 3,
        0.1,
        1e16,
        1e-5,
        12345678.85,
        0.00012345678950000001,
        -7.25,
    ]
    vals = np.concatenate(
        [edge, rng.random(3000) * 10.0 ** rng.integers(-12, 12, 3000), np.nextafter(np.round(rng.random(500), 9), 2.0)]
    )
    R = 40
    T = -(-len(vals) // R)
    W = np.zeros(R * T)
    W[: len(vals)] = vals
    W = W.reshape(R, T)
    reg = [f"TF{k}_α" for k in range(R)]
    tgt = [f"gene{k}-β" for k in range(T)]
    rows, cols = np.divmod(np.arange(R * T), T)
    links.write_links(tmp_path / "c1.tsv.gz", W, reg, tgt, rows, cols, threads=1)
    links.write_links(tmp_path / "c3.tsv.gz", W, reg, tgt, rows, cols, threads=3)
    monkeypatch.setitem(links.LINKS_KERNEL, "lib", None)
    links.write_links(tmp_path / "py.tsv.gz", W, reg, tgt, rows, cols, threads=1)
    c1 = (tmp_path / "c1.tsv.gz").read_bytes()
    assert c1 == (tmp_path / "py.tsv.gz").read_bytes() == (tmp_path / "c3.tsv.gz").read_bytes()
    lines = gzip.decompress(c1).decode().splitlines()
    assert lines[0] == "regulator\ttarget\timportance"
    assert lines[1:] == [f"{reg[r]}\t{tgt[c]}\t{W[r, c]:.9g}" for r, c in zip(rows, cols)]


def test_link_list_members_do_not_depend_on_threads(tmp_path, monkeypatch):
    """A link list of several gzip members (MEMBER made small: one per formatted block) is byte-identical for 1, 2
    and 5 threads."""
    monkeypatch.setattr(links.GzipMembers, "MEMBER", 1 << 12)
    rng = np.random.default_rng(5)
    W = rng.random((60, 5000))
    names = [f"g{k}" for k in range(5000)]
    rows, cols = links.ranked_links(W, names[:60], names, np.arange(60), np.arange(5000))
    blobs = []
    for t in (1, 2, 5):
        links.write_links(tmp_path / f"{t}.tsv.gz", W, names[:60], names, rows, cols, threads=t)
        blobs.append((tmp_path / f"{t}.tsv.gz").read_bytes())
    assert blobs[0] == blobs[1] == blobs[2]
    assert blobs[0].count(b"\x1f\x8b\x08\x00\x00\x00\x00\x00") >= 5  # header + one member per 65,536 lines
    assert len(gzip.decompress(blobs[0]).splitlines()) == 60 * 5000 - 60 + 1
