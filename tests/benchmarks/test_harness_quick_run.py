"""A real ``benchmarks/run --quick`` against the real peers (so the harness cannot rot), its kept inputs, and the
planted network of the network stage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers.environment import unavailable
from benchmarks.harness import core
from helpers.bench_inputs import SUITE_STAGES, _inputs_key, keep_suite_inputs, suite_inputs
from benchmarks import stages as S

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
PEERS = (ROOT / ".." / "shared" / "peers").resolve()


def _peers_or_skip() -> None:
    why = None
    if not (PEERS / "bin").is_dir():
        why = f"peers kit {PEERS} is absent"
    else:
        p = subprocess.run([str(PEERS / "bin" / "peer-helixer-fasta2h5"), "--help"], capture_output=True, text=True)
        if p.returncode != 0:
            why = "peers are not set up here (run ../shared/peers/setup-peers): " + (p.stderr.strip() or "?")[-200:]
    if why:
        unavailable(why, waiver="CHROMAFLOW_REQUIRE_REFERENCE")


def test_suite_inputs_are_kept_only_when_whole_and_keyed_by_the_code(tmp_path):
    used, ready = suite_inputs(tmp_path)
    assert used.name.endswith(".partial") and used.parent == tmp_path and not ready.exists()
    used.mkdir()
    (tmp_path / "0123456789abcdef").mkdir()  # an older set
    (tmp_path / "0123456789abcdef.999999999.partial").mkdir()  # a run that stopped half-way
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / f"0123456789abcdef.{live.pid}.partial").mkdir()  # another suite's run, still going
        keep_suite_inputs(used, ready)
    finally:
        live.kill()
        live.wait()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([ready.name, f"0123456789abcdef.{live.pid}.partial"])
    assert suite_inputs(tmp_path) == (ready, ready)  # the next run reads it
    # any change to the code that makes the inputs gives another key
    code = tmp_path / "code"
    code.mkdir()
    (code / "gen.py").write_text("SEED = 1\n")
    key = _inputs_key(tmp_path, [code / "gen.py"])
    assert _inputs_key(tmp_path, [code / "gen.py"]) == key
    (code / "gen.py").write_text("SEED = 2\n")
    assert _inputs_key(tmp_path, [code / "gen.py"]) != key


@pytest.mark.reference
def test_quick_run_against_the_real_peers(tmp_path, reference_dir):
    _peers_or_skip()
    out = tmp_path / "results"
    inputs, ready = suite_inputs(
        Path(os.environ.get("CHROMAFLOW_CACHE", Path.home() / ".cache" / "chromaflow")) / "test-bench-inputs"
    )
    p = subprocess.run(
        [
            str(BENCH / "run"),
            "--peers",
            str(PEERS),
            "--quick",
            "--stages",
            ",".join(SUITE_STAGES),
            "--out",
            str(out),
            "--workdir",
            str(tmp_path / "work"),
            "--inputs",
            str(inputs),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=3600,
    )
    assert p.returncode == 0, p.stderr[-4000:]
    keep_suite_inputs(inputs, ready)
    files = sorted(out.glob("*-quick.json"))
    assert len(files) == 1
    res = json.loads(files[0].read_text())
    assert res["schema"] == core.SCHEMA and res["quick"] is True and res["repeats"] == 1
    m = res["machine"]
    assert m["cpu_model"] and m["logical_cpus"] >= 1 and m["memory_bytes"] > 0 and isinstance(m["cpu_flags"], list)
    stages = {c["stage"] for c in res["cases"]}
    assert stages == set(SUITE_STAGES)
    ran = [c for c in res["cases"] if not c.get("skipped")]
    for c in res["cases"]:
        assert c["machine"]["cpu_model"] == m["cpu_model"]
        if c.get("skipped"):
            assert c["skipped"].strip()
    for c in ran:
        for r in c["runs"]:
            assert r["exit"] == 0, (c["id"], r)
            assert r["wall_s"] > 0 and r["cpu_s"] > 0 and r["peak_tree_rss_bytes"] > 10 * 2**20
            assert len(r["load_before"]) == 3 and len(r["load_after"]) == 3
        for k, con in c["contenders"].items():  # the network stage: one run per planted network (seed)
            assert con["wall_s"]["n"] == (len(S.sizes(True)["network_seeds"]) if c["stage"] == "network" else 1), (
                c["id"],
                k,
            )
        for rt in c["ratios"]:
            assert rt["wall"]["of_medians"] > 0 and rt["cpu"]["of_medians"] > 0
    # the outputs agree: fasta2h5 datasets, predict fp32, bigwig intervals, peaks with MACS3's
    checked = [c for c in ran if c["stage"] in ("fasta2h5", "predict", "bigwig", "peaks")]
    assert {c["stage"] for c in checked} == {"fasta2h5", "predict", "bigwig", "peaks"}
    for c in checked:
        assert c["agreement"]["ok"] is True, (c["id"], c["agreement"])
    pred = next(c for c in checked if c["stage"] == "predict")
    assert pred["agreement"]["bf16"]["values"] > 0
    f2h = [c for c in checked if c["stage"] == "fasta2h5"]
    for c in f2h:
        assert c["agreement"]["per_contender"]["chromaflow"]["size_ratio"] <= S.stage("fasta2h5").EQUAL_SIZE
        assert abs(c["agreement"]["per_contender"]["chromaflow --deflate zlib"]["size_ratio"] - 1) < 0.01
    g3 = [r for c in ran if c["stage"] == "genie3" for r in c["runs"]]
    assert {r["contender"] for r in g3} == {
        "chromaflow",
        "chromaflow tree-normalised",
        "arboreto genie3",
        "reference GENIE3",
        "arboreto grnboost2",
    }
    assert all(0.5 < r["auroc"] <= 1 and 0 < r["aupr"] <= 1 for r in g3)
    md = files[0].with_suffix(".md").read_text()
    _check_network(next(c for c in ran if c["stage"] == "network"), md)
    assert "## Ratios" in md
    sc = next(c for c in ran if c["id"] == "scaling/genie3_20genes")  # the peer beside us on the smallest size
    assert [r["peer"] for r in sc["ratios"]] == ["arboreto genie3"]
    assert "20 genes: **" in md
    for c in f2h:  # the headline row of every FASTA case: the default against Helixer, with its size
        assert f"| fasta2h5 | {c['case']} | chromaflow fasta2h5 (default) | Helixer" in md
    for c in res["cases"]:
        assert f"### {c['case']}" in md
    assert (out / (files[0].stem + "-scaling.png")).stat().st_size > 1000


def _check_network(c: dict, md: str) -> None:
    """The planted-network case of a quick run: every contender scored on every seed, the informative prior
    helps, the shuffled one does not help like it, the prior alone beats chance, and the table shows it all."""
    seeds = S.sizes(True)["network_seeds"]
    keys = {
        "genie3",
        "alpha 0.25",
        "alpha 0.5",
        "alpha 1",
        "accessibility alpha 0.5",
        "shuffled alpha 0.5",
        "shuffled alpha 0.5 check off",
        "prior alone",
        "accessibility prior alone",
    }
    assert set(c["contenders"]) == keys
    for r in c["runs"]:
        assert 0 < r["aupr"] <= 1 and 0 < r["auroc"] <= 1, r
        assert all(0 <= r[f"p_at_{x}pct"] <= 1 for x in ("0.1", "0.5", "1")), r
    for k in keys:
        assert sorted(r["network_seed"] for r in c["runs"] if r["contender"] == k) == seeds, k
    med = {k: np.median([r["aupr"] for r in c["runs"] if r["contender"] == k]) for k in keys}
    v = S.stage("network").network_verdicts(c)
    assert v["gain"] is True and v["alpha 0.5"]["better"] == len(seeds)  # the planted prior is informative
    assert med["shuffled alpha 0.5 check off"] < med["alpha 0.5"] - 0.05  # a shuffled prior carries no signal
    # the prior check keeps the informative prior and turns the shuffled one off (then: plain GENIE3's AUPR)
    runs = {(r["contender"], r["network_seed"]): r for r in c["runs"]}
    assert all(runs["alpha 0.5", sd]["prior_check"] == "kept" for sd in seeds)
    for sd in seeds:
        if runs["shuffled alpha 0.5", sd]["prior_check"] == "off":
            assert runs["shuffled alpha 0.5", sd]["aupr"] == runs["genie3", sd]["aupr"]
    assert isinstance(v["shuffled_ok"], bool)
    g, t = S.sizes(True)["network_size"][:2]
    chance = np.mean(c["params"]["edges_per_seed"]) / (t * (g - 1))  # AUPR of a random ranking: the edge density
    assert med["prior alone"] > 1.5 * chance and med["accessibility prior alone"] > 1.5 * chance
    assert [x["ours"] for x in c["ratios"]] == ["alpha 0.5", "accessibility alpha 0.5"]  # the timing rows
    assert f"## Planted network: {c['case']}" in md and "* informative prior (α 0.5 vs GENIE3)" in md
    for con in c["contenders"].values():
        assert f"| {con['label']} | " in md


def test_planted_network_is_seeded_and_its_motifs_are_found(tmp_path):
    """harness.planted make: same seed, same bytes; the real motif-prior finds every planted true edge's motif
    in the target's promoter; precision at k counts ties at the cut at their mean."""
    from benchmarks.harness import planted

    for d in ("a", "b"):
        planted.make(str(tmp_path / d), "3", "12", "3", "6")
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == [
        "atac.bw",
        "expression.tsv",
        "genes.gff3",
        "genome.fa",
        "gold.tsv",
        "motifs.jaspar",
        "regulators.txt",
        "tf_motifs.tsv",
        "truth.json",
    ]
    for n in names:
        assert (tmp_path / "a" / n).read_bytes() == (tmp_path / "b" / n).read_bytes(), n
    a = tmp_path / "a"
    X = np.loadtxt(a / "expression.tsv", skiprows=1)
    assert X.shape == (6, 12) and np.all(np.isfinite(X)) and np.all(X.std(axis=0) > 0)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "chromaflow",
            "motif-prior",
            "--fasta",
            a / "genome.fa",
            "--annotation",
            a / "genes.gff3",
            "--motifs",
            a / "motifs.jaspar",
            "--tf-motifs",
            a / "tf_motifs.tsv",
            "--out",
            tmp_path / "prior.tsv",
        ],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    rows = [x.split("\t") for x in (tmp_path / "prior.tsv").read_text().splitlines()[1:]]
    prior = {(r[0], r[1]): float(r[2]) for r in rows}
    gold = [x.split("\t") for x in (a / "gold.tsv").read_text().splitlines()]
    true = [(r, t) for r, t, v in gold if v == "1"]
    assert true and all(prior[e] == 1 for e in true)
    truth = json.loads((a / "truth.json").read_text())
    assert truth["planted"]["true"] == len(true) and truth["simulator"].startswith("grnlab ")
    y = np.array([1, 0, 1, 0, 0], dtype=float)
    s = np.array([0.9, 0.5, 0.5, 0.5, 0.1])
    assert planted.precision_at(y, s, 1) == 1.0
    assert planted.precision_at(y, s, 2) == pytest.approx((1 + 1 / 3) / 2)


def test_paired_difference_resamples_targets_in_both_lists_alike(tmp_path):
    """planted.paired_difference: AUPR(A) - AUPR(B) as scikit-learn has them; a list against itself differs by 0
    in every resample (the pairing); seeded, so the same files give the same SE; a list that ranks every true edge
    first beats a reversed one by a positive difference with a positive SE."""
    from sklearn.metrics import average_precision_score

    from benchmarks.harness import planted

    rng = np.random.default_rng(1)
    pairs = [(f"TF{i}", f"G{j}") for i in range(3) for j in range(20)]
    y = (rng.random(len(pairs)) < 0.3).astype(int)
    y[0] = 1
    (tmp_path / "gold.tsv").write_text("".join(f"{r}\t{t}\t{v}\n" for (r, t), v in zip(pairs, y)))
    noisy = y + rng.random(len(pairs))
    for name, w in (("good", noisy), ("bad", -noisy)):
        (tmp_path / f"{name}.tsv").write_text("".join(f"{r}\t{t}\t{x:.6f}\n" for (r, t), x in zip(pairs, w)))
    gold, good, bad = (str(tmp_path / f"{n}.tsv") for n in ("gold", "good", "bad"))
    same = planted.paired_difference(good, good, gold, n_boot=50)
    assert same["aupr_diff"] == 0 and same["se"] == 0 and same["targets"] == 20
    d = planted.paired_difference(good, bad, gold, n_boot=200)
    want = average_precision_score(y, noisy) - average_precision_score(y, -noisy)
    assert d["aupr_diff"] == pytest.approx(want) and d["aupr_diff"] > 0.5 and d["se"] > 0
    assert planted.paired_difference(good, bad, gold, n_boot=200) == d
    assert planted.paired_difference(good, bad, gold, n_boot=200, seed=1)["se"] != d["se"]
