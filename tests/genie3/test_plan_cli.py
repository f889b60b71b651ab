"""``chromaflow genie3-plan``: the gene count and chunk plan the pipeline fans GENIE3 out from (GENIE3_PLAN).

The count comes from the GENIE3 reader itself, so the plan's target ranges must be exactly the ranges the GENIE3
tasks compute (checked against real ``chromaflow genie3 --targets-chunk i/n`` part files), for plain, gzipped and
CSV matrices in both layouts; bad input is the reader's one-line error with no plan written.
"""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from helpers.cli import chromaflow

ROOT = Path(__file__).resolve().parents[2]
G3 = ROOT / "assets" / "test" / "genie3"


run = functools.partial(chromaflow, timeout=300)


@pytest.fixture(scope="module")
def matrices(tmp_path_factory) -> dict[str, tuple[Path, str]]:
    d = tmp_path_factory.mktemp("matrices")
    tsv = G3 / "expression.tsv"
    (d / "expr.tsv.gz").write_bytes(gzip.compress(tsv.read_bytes()))
    rows = [ln.split("\t") for ln in tsv.read_text().splitlines()]
    genes = [g.strip('"') for g in rows[0]]
    lines = [",".join(["gene"] + [f"s{i}" for i in range(1, len(rows))])]
    lines += [",".join([g] + [r[j] for r in rows[1:]]) for j, g in enumerate(genes)]
    (d / "expr.csv").write_text("\n".join(lines) + "\n")
    return {
        "tsv": (tsv, "samples-x-genes"),
        "tsv.gz": (d / "expr.tsv.gz", "samples-x-genes"),
        "csv": (d / "expr.csv", "genes-x-samples"),
    }


@pytest.mark.parametrize("kind", ["tsv", "tsv.gz", "csv"])
def test_plan_counts_genes_like_the_genie3_reader(matrices, kind, tmp_path):
    path, layout = matrices[kind]
    out = tmp_path / "plan.json"
    res = run(
        "genie3-plan",
        "--expression",
        path,
        "--layout",
        layout,
        "--regulators",
        G3 / "regulators.txt",
        "--chunk-size",
        "8",
        "--out",
        out,
    )
    assert res.returncode == 0, res.stderr
    plan = json.loads(out.read_text())
    assert (plan["genes"], plan["samples"], plan["regulators"], plan["chunks"]) == (20, 30, 5, 3)
    assert plan["ranges"] == [[0, 6], [6, 13], [13, 20]]


def test_plan_ranges_are_the_ranges_genie3_computes(tmp_path):
    res = run("genie3-plan", "--expression", G3 / "expression.tsv", "--layout", "samples-x-genes", "--chunk-size", "6")
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    assert plan["chunks"] == 4
    for i, want in enumerate(plan["ranges"], 1):
        part = tmp_path / f"p{i}.npz"
        r = run(
            "genie3",
            "--expression",
            G3 / "expression.tsv",
            "--layout",
            "samples-x-genes",
            "--n-trees",
            "2",
            "--targets-chunk",
            f"{i}/{plan['chunks']}",
            "--out",
            part,
        )
        assert r.returncode == 0, r.stderr
        with np.load(part) as z:
            assert json.loads(str(z["meta"]))["target_range"] == want


@pytest.mark.parametrize("genes,size,chunks", [(1, 500, 1), (20, 20, 1), (20, 19, 2), (20, 1, 20), (501, 500, 2)])
def test_chunk_count(genes, size, chunks):
    from chromaflow.genie3.cli_plan import plan

    p = plan(genes, size)
    assert p["chunks"] == chunks
    assert p["ranges"][0][0] == 0 and p["ranges"][-1][1] == genes
    assert all(a[1] == b[0] for a, b in zip(p["ranges"], p["ranges"][1:]))
    assert max(e - s for s, e in p["ranges"]) <= size


@pytest.mark.parametrize("case", ["chunk_size_zero", "non_numeric", "unknown_regulator", "not_gzip"])
def test_bad_input_is_one_line_and_no_plan(tmp_path, case):
    m = tmp_path / "m.tsv"
    m.write_text(
        "gene\ts1\ts2\ts3\nA\t1\t2\t3\nB\t2\t1\tx\n"
        if case == "non_numeric"
        else "gene\ts1\ts2\ts3\nA\t1\t2\t3\nB\t2\t1\t4\n"
    )
    args = ["--expression", m, "--layout", "genes-x-samples", "--out", tmp_path / "plan.json"]
    needle = {
        "chunk_size_zero": "--chunk-size must be >= 1 (got 0)",
        "non_numeric": "line 3 (gene 'B'), column 4 (sample 's3'): non-numeric value 'x'",
        "unknown_regulator": "Z",
        "not_gzip": "not a readable text table",
    }[case]
    if case == "chunk_size_zero":
        args += ["--chunk-size", "0"]
    if case == "unknown_regulator":
        (tmp_path / "regs.txt").write_text("A\nZ\n")
        args += ["--regulators", tmp_path / "regs.txt"]
    if case == "not_gzip":
        # a truncated gzip stream (the reader recognises gzip by its magic bytes, not by the name)
        (tmp_path / "m.tsv.gz").write_bytes(gzip.compress(b"gene\ts1\ts2\n" + b"A\t1\t2\n" * 400)[:40])
        args[1] = tmp_path / "m.tsv.gz"
    res = run("genie3-plan", *args)
    assert res.returncode == 1
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("chromaflow genie3-plan: error:") and needle in lines[0], res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "plan.json").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]
