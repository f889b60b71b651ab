"""genie3-merge at genome scale (issue 30 §2): the streamed --max-links merge gives the head of the full ranking
(ties, self-links, name order), damaged parts are refused, and memory is bounded structurally (tracemalloc), not
by the matrix size. The peak RSS at genome scale (25,000 x 1,700 in 50 parts) is measured by the genie3scale stage's
merge case, ``benchmarks/run --stages genie3scale --cases merge``."""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

from chromaflow.cli import main
from chromaflow.utils.sharding import part_bounds
from chromaflow.genie3 import links
from chromaflow.genie3.cli_merge import merge_top_links
from chromaflow.genie3.parts import write_part
from chromaflow.genie3.report import nonself_values, summary_of_values
from helpers.cli import assert_one_line_error, run_in_process

from helpers.genie3_files import adversarial_weights, base, lexsort_reference


def _write_parts(tmp, W, genes, reg_idx, chunks, tag="p"):
    R, T = W.shape
    paths = []
    for i in range(1, chunks + 1):
        lo, hi = part_bounds(i, chunks, T)
        meta = {
            "genes": genes,
            "regulators": [int(x) for x in reg_idx],
            "targets": list(range(lo, hi)),
            "n_targets_total": T,
            "target_range": [lo, hi],
            "chunk": [i, chunks],
            "options": {"n_trees": 1, "engine": "fast"},
            "fingerprint": "x",
            "samples": 3,
            "constant_targets": [],
        }
        p = tmp / f"{tag}{i}.npz"
        write_part(p, W[:, lo:hi], meta)
        paths.append(str(p))
    return paths


def test_streamed_top_links_equal_a_full_sort_with_ties_and_self_links(tmp_path):
    """merge_top_links (each part's candidates, the running union cut to its k-th largest) returns exactly the
    first ``limit`` pairs of a plain lexsort of the whole matrix by (-value, regulator name, target name), on
    weights full of exact ties, one-ulp neighbours, -0.0 and zeros, with self-links among the largest values,
    shuffled name orders, and limits cutting through ties."""
    rng = np.random.default_rng(30)
    for trial in range(12):
        R, T = int(rng.integers(2, 25)), int(rng.integers(25, 60))
        W = adversarial_weights(rng, R, T)
        names = [f"g{int(rng.integers(0, 10**6))}_{k}" for k in range(T)]
        reg_idx = rng.choice(T, R, replace=False)  # regulators are targets too: self-links exist
        W[np.arange(R), reg_idx] = W.max() + 1.0  # ... and are the largest values (must be skipped)
        tgt_idx = np.arange(T)
        rn, tn = [names[k] for k in reg_idx], names
        chunks = int(rng.integers(1, 6))
        paths = _write_parts(tmp_path, W, names, reg_idx, chunks, tag=f"t{trial}_")
        zero_cut = int(np.count_nonzero(W > 0))  # a limit that ends inside the run of tied zeros
        for limit in (1, 3, 17, max(1, zero_cut - 3), R * T - R, R * T + 5):
            _, rows, cols, vals = merge_top_links(paths, limit)
            want_r, want_c = lexsort_reference(W, rn, tn, reg_idx, tgt_idx, limit)
            assert np.array_equal(rows, want_r) and np.array_equal(cols, want_c), (trial, limit)
            assert np.array_equal(vals, W[want_r, want_c])


def test_streamed_merge_is_the_single_runs_head(tmp_path):
    """genie3-merge --max-links without summary/plot/weights takes the streamed path and writes the bytes of a
    single run with the same --max-links."""
    common = ["--n-trees", "10", "--max-links", "23"]
    assert main(base(tmp_path, *common, out="single.tsv.gz")) == 0
    parts = []
    for i in (1, 2, 3):
        parts.append(str(tmp_path / f"part{i}.npz"))
        assert main(base(tmp_path, "--n-trees", "10", "--targets-chunk", f"{i}/3", out=f"part{i}.npz")) == 0
    assert (
        main(
            [
                "genie3-merge",
                "--max-links",
                "23",
                "--out",
                str(tmp_path / "merged.tsv.gz"),
                "--metrics",
                str(tmp_path / "m.json"),
                *parts,
            ]
        )
        == 0
    )
    assert (tmp_path / "single.tsv.gz").read_bytes() == (tmp_path / "merged.tsv.gz").read_bytes()
    assert json.loads((tmp_path / "m.json").read_text())["streamed"] is True


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_merge_refuses_a_part_with_a_non_finite_weight(tmp_path, bad):
    """A NaN/inf weight (never written by genie3: a damaged part) is one line naming the part, regulator and
    target, on both merge paths, and no output is left."""
    W = np.arange(24, dtype=np.float64).reshape(3, 8) / 10
    W[2, 5] = bad
    genes = [f"G{k}" for k in range(8)]
    paths = _write_parts(tmp_path, W, genes, [0, 1, 2], 2)
    out = tmp_path / "links.tsv.gz"
    for extra in (["--max-links", "3"], ["--summary", str(tmp_path / "s.json")]):
        r = run_in_process("genie3-merge", "--out", out, *extra, *paths, check=False)
        assert_one_line_error(r, "genie3-merge")
        assert "p2.npz: non-finite weight" in r.stderr and "regulator 'G2', target 'G5'" in r.stderr
        assert not out.exists() and not (tmp_path / "s.json").exists()


def test_streamed_merge_memory_is_bounded_by_a_part_not_the_matrix(tmp_path):
    """tracemalloc peak of the streamed merge (400 regulators x 6,000 targets in 24 parts, --max-links 2,000)
    stays under a quarter of one dense R x T float64 copy; reading all parts into one matrix (merge_parts, the
    summary path) needs at least the whole copy -- the bound can fail."""
    rng = np.random.default_rng(5)
    R, T = 400, 6000
    W = rng.exponential(size=(R, T)) * (rng.random((R, T)) > 0.7)
    genes = [f"G{k}" for k in range(T)]
    paths = _write_parts(tmp_path, W, genes, np.arange(R), 24)
    dense = R * T * 8
    # measured in a fresh interpreter: tracemalloc counts every thread of the process, and a pytest worker may have
    # others allocating meanwhile (one suite run saw 11 MB here against 0.9 MB alone)
    code = (
        "import json, sys, tracemalloc\n"
        "from chromaflow.genie3.cli_merge import merge_parts, merge_top_links\n"
        "paths = sys.argv[1:]\n"
        "tracemalloc.start(); _, rows, cols, vals = merge_top_links(paths, 2000)\n"
        "streamed = tracemalloc.get_traced_memory()[1]; tracemalloc.stop()\n"
        "tracemalloc.start(); merge_parts(paths); full = tracemalloc.get_traced_memory()[1]; tracemalloc.stop()\n"
        "print(json.dumps({'streamed': streamed, 'full': full, 'n': len(rows), 'top': float(vals[0])}))\n"
    )
    p = subprocess.run([sys.executable, "-c", code, *map(str, paths)], capture_output=True, text=True, check=True)
    got = json.loads(p.stdout)
    assert got["n"] == 2000 and got["top"] == max(W[i, j] for i in range(R) for j in range(T) if i != j)
    assert got["full"] >= dense
    assert got["streamed"] < dense / 4, (got["streamed"], dense)


def test_summary_values_in_place_match_a_copy_without_one():
    """The summary's non-self values squeezed into W's own buffer equal W[~self_mask] (same order), the
    quantiles and counts equal the plain formulas, and the whole needs far less than another R x T copy."""
    rng = np.random.default_rng(8)
    R, T = 300, 2000
    W = np.round(rng.random((R, T)), 4) * (rng.random((R, T)) > 0.5)
    reg_idx = rng.choice(T, R, replace=False)
    tgt_idx = np.arange(T)
    want = W[~links.self_mask(reg_idx, tgt_idx)]
    plain = {
        "edges": len(want),
        "edges_nonzero": int(np.count_nonzero(want > 0)),
        "importance_quantiles": {q: float(np.quantile(want, float(q))) for q in ("0.5", "0.9", "0.99")},
    }
    Wc = W.copy()
    tracemalloc.start()
    vals = nonself_values(Wc, reg_idx, tgt_idx, consume=True)
    same = np.array_equal(vals, want)
    doc = summary_of_values(vals)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert same and doc == plain
    assert peak < W.nbytes / 4, (peak, W.nbytes)  # a copy would be W.nbytes; the mask alone W.nbytes / 8
    assert np.array_equal(nonself_values(W, reg_idx, tgt_idx, consume=False), want)  # the copying path
