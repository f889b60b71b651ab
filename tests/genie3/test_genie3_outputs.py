"""chromaflow genie3 outputs: the link list's format and ranking, the summary, plot and metrics, --max-links, the
merge's refusals, and the same bytes under other numeric kernels."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import numpy as np
import pytest

from chromaflow.cli import main
from genie3_cli_helpers import read_links, run_cli
from helpers.genie3_files import FIX, base


def test_links_format_ranked_and_recovers_fixture_network(tmp_path):
    assert main(base(tmp_path, "--n-trees", "300", "--weights", str(tmp_path / "w.tsv.gz"))) == 0
    rows = read_links(tmp_path / "links.tsv.gz")
    assert rows[0] == ["regulator", "target", "importance"]
    body = rows[1:]
    assert len(body) == 5 * 20 - 5  # 5 regulators x 20 targets minus 5 self-links
    assert all(a != b for a, b, _ in body)
    vals = [float(v) for _, _, v in body]
    assert vals == sorted(vals, reverse=True)
    gold = {tuple(line.split("\t")[:2]) for line in (FIX / "gold.tsv").read_text().splitlines()}
    top = {(a, b) for a, b, _ in body[: len(gold)]}
    assert len(top & gold) >= 0.6 * len(gold)  # the simulated edges dominate the top of the list
    w = read_links(tmp_path / "w.tsv.gz")
    assert w[0][0] == "regulator" and len(w) == 6 and len(w[0]) == 21


def test_merge_rejects_bad_part_sets(tmp_path, capsys):
    for i in (1, 2):
        assert main(base(tmp_path, "--n-trees", "5", "--targets-chunk", f"{i}/2", out=f"p{i}.npz")) == 0
    assert main(base(tmp_path, "--n-trees", "5", "--seed", "3", "--targets-chunk", "2/2", out="q2.npz")) == 0
    out = str(tmp_path / "m.tsv.gz")
    rc, err = run_cli(["genie3-merge", "--out", out, str(tmp_path / "p1.npz")], capsys)
    assert rc == 1 and "chunk(s) 2/2 missing" in err
    rc, err = run_cli(["genie3-merge", "--out", out, str(tmp_path / "p1.npz"), str(tmp_path / "p1.npz")], capsys)
    assert rc == 1 and "given twice" in err
    rc, err = run_cli(["genie3-merge", "--out", out, str(tmp_path / "p1.npz"), str(tmp_path / "q2.npz")], capsys)
    assert rc == 1 and "options differs" in err
    junk = tmp_path / "junk.npz"
    junk.write_text("not a part")
    rc, err = run_cli(["genie3-merge", "--out", out, str(junk)], capsys)
    assert rc == 1 and "not a chromaflow genie3 part file" in err


def test_summary_plot_metrics(tmp_path):
    w = tmp_path / "w.tsv.gz"
    assert (
        main(
            base(
                tmp_path,
                "--summary",
                str(tmp_path / "s.json"),
                "--plot",
                str(tmp_path / "p.png"),
                "--top",
                "10",
                "--metrics",
                str(tmp_path / "m.json"),
                "--weights",
                str(w),
                "--threads",
                "2",
            )
        )
        == 0
    )
    listed = read_links(tmp_path / "links.tsv.gz")[1:]
    with gzip.open(w, "rt") as fh:
        table = [line.rstrip("\n").split("\t") for line in fh]
    targets = table[0][1:]
    W = np.array([row[1:] for row in table[1:]], dtype=float)
    regs = [row[0] for row in table[1:]]
    off = np.array([[r != t for t in targets] for r in regs])
    # the summary's numbers, recomputed from the link list and the weight matrix it was made from
    s = json.loads((tmp_path / "s.json").read_text())
    assert (s["edges"], s["edges_written"], s["top_n"]) == (95, 95, 10)
    assert s["edges_nonzero"] == int(np.count_nonzero(W[off]))
    deg: dict[str, int] = {}
    for a, _, _ in listed[:10]:
        deg[a] = deg.get(a, 0) + 1
    assert [(d["regulator"], d["out_degree"]) for d in s["top_regulators_by_out_degree_in_top_n"]] == sorted(
        deg.items(), key=lambda kv: (-kv[1], kv[0])
    )
    assert s["top_n_min_importance"] == pytest.approx(float(listed[9][2]), rel=1e-8)
    tot = {r: W[i][off[i]].sum() for i, r in enumerate(regs)}
    assert [d["regulator"] for d in s["top_regulators_by_total_weight"]] == sorted(tot, key=lambda r: (-tot[r], r))
    for d in s["top_regulators_by_total_weight"]:
        assert d["total_weight"] == pytest.approx(tot[d["regulator"]], rel=1e-7)
    for q, v in s["importance_quantiles"].items():
        assert v == pytest.approx(np.quantile(W[off], float(q)), rel=1e-7)
    assert s["options"] == {
        "tree_method": "RF",
        "max_features": "sqrt",
        "n_trees": 50,
        "seed": 0,
        "engine": "fast",
        "importance": "unnormalised",
    }
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    m = json.loads((tmp_path / "m.json").read_text())
    assert (m["stage"], m["genes"], m["samples"], m["regulators"], m["targets"]) == ("genie3", 20, 30, 5, 20)
    assert (m["trees"], m["engine"], m["engine_requested"], m["tree_method"], m["threads"]) == (
        50,
        "fast",
        "fast",
        "RF",
        2,
    )
    assert (m["max_features"], m["seed"], m["chunk"], m["constant_targets"]) == ("sqrt", 0, None, 0)
    assert m["importance"] == "unnormalised"
    assert 0 < m["compute_s"] <= m["wall_s"] and m["cpu_s"] > 0
    assert 0 < m["compute_cpu_s"] <= m["cpu_s"]  # tree growing's CPU (the scale stage's cost model)
    assert m["targets_per_s"] == pytest.approx(20 / m["compute_s"], rel=1e-3)
    assert 10e6 < m["peak_rss_bytes"] < 4e9


def test_max_links_is_the_head_of_the_full_list(tmp_path):
    assert main(base(tmp_path, out="all.tsv.gz")) == 0
    assert (
        main(
            base(tmp_path, "--max-links", "17", "--summary", str(tmp_path / "s.json"), "--top", "30", out="head.tsv.gz")
        )
        == 0
    )
    full, head = read_links(tmp_path / "all.tsv.gz"), read_links(tmp_path / "head.tsv.gz")
    assert head == full[:18]
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["edges"] == 95 and s["edges_written"] == 17 and s["top_n"] == 30


def test_same_bytes_under_other_numeric_kernels(tmp_path):
    """Issue 14 §1: the links (default engine, both importance modes) are byte-identical when numpy/OpenBLAS run
    the kernels of other machines (OpenBLAS core types, numpy's SIMD dispatch off): the expression scaling and
    the ranking are done in numpy before and after the C kernel."""
    import platform

    from helpers import kernel_variants

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the kernel variants are x86-64 ones")
    ref: dict[str, bytes] = {}
    for name, extra in kernel_variants.applied():
        for imp in ("unnormalised", "tree-normalised"):
            out = tmp_path / f"{name}-{imp}.tsv.gz"
            argv = base(tmp_path, "--importance", imp, "--threads", "2")
            argv[argv.index("--out") + 1] = str(out)
            r = subprocess.run(
                [sys.executable, "-m", "chromaflow", *argv],
                env=kernel_variants.env(extra),
                capture_output=True,
                text=True,
            )
            assert r.returncode == 0, r.stderr
            got = out.read_bytes()
            assert ref.setdefault(imp, got) == got, f"{imp} links differ under {name} ({extra})"
    assert ref["unnormalised"] != ref["tree-normalised"]
