"""The harness's output comparisons (``benchmarks.harness.agree``): h5, tracks with ties, the DREAM4 scorer."""

from __future__ import annotations

import gzip
from pathlib import Path

import h5py
import numpy as np
import pytest

from benchmarks.harness import agree
from benchmarks import stages as S

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
PEERS = (ROOT / ".." / "shared" / "peers").resolve()


def test_h5_comparison_catches_one_changed_value(tmp_path):
    from chromaflow.fasta2h5.convert import convert

    fa = tmp_path / "g.fa"
    fa.write_text(">a\n" + "ACGTN" * 300 + "\n>b\nGATTACA\n")
    a, b = tmp_path / "a.h5", tmp_path / "b.h5"
    convert(str(fa), a, "sp", 100)
    convert(str(fa), b, "sp", 100, deflate="zlib")
    assert agree.h5(str(a), str(b))["ok"] is True
    with h5py.File(b, "r+") as f:
        x = f["data/X"][7]
        x[5, 0] = 0.5
        f["data/X"][7] = x
    res = agree.h5(str(a), str(b))
    assert res["ok"] is False and "data/X" in res["detail"] and "row 7" in res["detail"]


def _predictions_h5(path: Path, plus: np.ndarray, minus: np.ndarray, L: int = 21384) -> None:
    """A one-chromosome, one-dataset predictions h5 in Predmoter's layout (FORMATS.md §4)."""
    n = plus.size
    k = -(-n // L)
    rows, se = [], []
    for i in range(k):
        r = np.full(L, -1, np.int64)
        r[: min(L, n - i * L)] = plus[i * L : (i + 1) * L]
        rows.append(r)
        se.append([i * L, min((i + 1) * L, n)])
    for i in reversed(range(k)):
        seg = minus[i * L : (i + 1) * L][::-1]
        r = np.full(L, -1, np.int64)
        r[: seg.size] = seg
        rows.append(r)
        se.append([min((i + 1) * L, n), i * L])
    with h5py.File(path, "w") as f:
        f["data/seqids"] = np.array([b"chr1"] * len(rows), dtype="S50")
        f["data/start_ends"] = np.array(se, dtype=np.int64)
        f["prediction/datasets"] = np.array([b"atacseq"], dtype="S25")
        f["prediction/predictions"] = np.stack(rows)[:, :, None]


def _bedgraph(path: Path, values: np.ndarray) -> None:
    change = np.flatnonzero(np.diff(values)) + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [values.size]])
    with gzip.open(path, "wt") as f:
        f.write("\n".join(f"chr1\t{s}\t{e}\t{float(values[s])}" for s, e in zip(starts, ends)))


def test_track_comparison_allows_exact_ties_only(tmp_path):
    """ws=4: a difference of 1 where the window sum is 2 mod 4 (mean k.5) is a tie; anywhere else it is not."""
    rng = np.random.default_rng(0)
    n = 3000
    plus = rng.integers(0, 4, n)
    pred = tmp_path / "p.h5"
    _predictions_h5(pred, plus, plus)
    w = 4
    cs = np.concatenate([[0], np.cumsum(plus)])
    i = np.arange(n)
    S = cs[np.clip(i + 2, 0, n)] - cs[np.clip(i - 2, 0, n)]  # window [i-2, i+1] for w = 4
    smooth = np.floor(S / w + 0.5).astype(np.int64)  # ties rounded up: differs from half-to-even at some ties
    exact = np.round(S / w).astype(np.int64)  # half to even
    ours, peer = tmp_path / "ours", tmp_path / "peer"
    ours.mkdir()
    peer.mkdir()
    name = "bench_atacseq_+_strand_ws=4.bg.gz"
    _bedgraph(ours / name, exact)
    _bedgraph(peer / name, exact)
    assert agree.tracks(str(ours), str(peer), str(pred), "4")["ok"] is True
    _bedgraph(peer / name, smooth)
    ties = int(((2 * S) % (2 * w) == w).sum())
    differ = int((smooth != exact).sum())
    assert 0 < differ <= ties
    res = agree.tracks(str(ours), str(peer), str(pred), "4")
    assert res["ok"] is True and res["tie_bp"] == differ, res
    bad = exact.copy()
    j = int(np.flatnonzero((2 * S) % (2 * w) != w)[10])
    bad[j] += 1
    _bedgraph(peer / name, bad)
    res = agree.tracks(str(ours), str(peer), str(pred), "4")
    assert res["ok"] is False and "not exact .5 ties" in res["detail"], res
    res = agree.tracks(str(ours), str(peer), str(pred), "0")  # without smoothing nothing is a tie
    assert res["ok"] is False


# --------------------------------------------------------------------------------------------------
# the coverage and train stages: their cases and comparisons (the real runs: benchmarks/run --stages coverage,train)
# --------------------------------------------------------------------------------------------------


def test_scores_and_exponent():
    assert S.stage("scaling").fit_exponent([1, 10, 100], [3, 300, 30000]) == pytest.approx(2.0)
    assert S.stage("scaling").fit_exponent([1, 2, 4], [5, 5, 5]) == pytest.approx(0.0)


@pytest.mark.reference
def test_score_matches_dream4_gold_orientation(reference_dir, tmp_path):
    """A link list equal to the gold standard scores AUROC = AUPR = 1; reversed edges score far lower."""
    gold = reference_dir / "dream4" / "DREAM4_GoldStandard_InSilico_Size100_multifactorial_1.tsv"
    rows = [line.split() for line in gold.read_text().splitlines()]
    good, rev = tmp_path / "good.tsv", tmp_path / "rev.tsv"
    good.write_text("TF\ttarget\timportance\n" + "".join(f"{a}\t{b}\t{v}\n" for a, b, v in rows))
    rev.write_text("".join(f"{b}\t{a}\t{v}\n" for a, b, v in rows))
    g = agree.score(str(good), str(gold))
    assert g["auroc"] == 1.0 and g["aupr"] == 1.0 and g["scored_links"] == 9900
    assert agree.score(str(rev), str(gold))["aupr"] < 0.5


# --------------------------------------------------------------------------------------------------
# the real thing: benchmarks/run --quick against the real peers
# --------------------------------------------------------------------------------------------------
