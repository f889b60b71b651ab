"""``chromaflow attribute`` (issue 53, item 1): contribution scores against an independent route.

The independent route: the window cut from the FASTA here, one-hot encoded here (not with chromaflow's table), the
model run directly on the sequence and on its reverse complement (minus strand, output turned back), the target
summed over the region here. ISM's differences are those of the mutants through that route; the recorded targets
are its values; Integrated Gradients' contributions add up to target(sequence) - target(baseline) over the whole
input (completeness); the outputs' one-hot is the FASTA in A, C, G, T order, the bigWig the observed contributions
(mean where windows overlap); a genome h5 gives what its FASTA gives; bad inputs are one line and no output.
"""

from __future__ import annotations

import random
from pathlib import Path

import h5py
import numpy as np
import pyBigWig
import pytest
import torch

from chromaflow.model.checkpoint import build_model, load_checkpoint
from helpers.cli import assert_one_line_error, chromaflow, run_in_process

L = 400  # the tiny model's seq_len = the model input around each region
ONEHOT = {"C": (1, 0, 0, 0), "A": (0, 1, 0, 0), "T": (0, 0, 1, 0), "G": (0, 0, 0, 1)}  # FORMATS.md §1: C, A, T, G
COMP = str.maketrans("ACGT", "TGCA")


def _write_fasta(path: Path, seqs: dict[str, str]) -> None:
    with open(path, "w") as fh:
        for name, s in seqs.items():
            fh.write(f">{name}\n" + "\n".join(s[i : i + 60] for i in range(0, len(s), 60)) + "\n")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("attribute")
    rng = random.Random(5)
    seqs = {
        "c1": "".join(rng.choice("ACGT") for _ in range(900)),
        "c2": "".join(rng.choice("ACGT") for _ in range(500)),
    }
    fasta = d / "g.fa"
    _write_fasta(fasta, seqs)
    model = d / "tiny.ckpt"
    chromaflow("make-test-model", "--out", model, "--seq-len", L, "--seed", 4, check=True)
    # c1: two overlapping windows; c2: a narrowPeak row with a summit, its input padded past the record start
    (d / "r.bed").write_text("c1\t300\t340\tpA\nc1\t330\t360\tpB\nc2\t20\t80\tpC\t0\t.\t2\t-1\t-1\t10\n")
    net = build_model(load_checkpoint(model)).eval()
    return dict(dir=d, seqs=seqs, fasta=fasta, model=model, bed=d / "r.bed", net=net)


def _run(s, out, *extra, check=True):
    return run_in_process(
        "attribute", "--fasta", s["fasta"], "--regions", s["bed"], "--model", s["model"], "--dataset", "atacseq",
        "--device", "cpu", "--threads", 1, "--out", out, *extra, check=check,
    )  # fmt: skip


def _target(s, seq: str, start: int, end: int, centre: int, strand: str = "avg", L: int = L) -> float:
    """The route written here: the input [centre - L/2, +L) of ``seq`` (padding outside), each strand through the
    model, predicted coverage of the first dataset summed over [start, end)."""
    a = centre - L // 2
    x = np.zeros((L, 4), dtype=np.float32)
    for i in range(L):
        if 0 <= a + i < len(seq):
            x[i] = ONEHOT[seq[a + i]]
    rc = x[::-1, ::-1].copy()  # reverse complement: C,A,T,G -> G,T,A,C is the reversed column order
    with torch.no_grad():
        plus = torch.exp(s["net"](torch.from_numpy(x)[None]))[0, :, 0].double().numpy()
        minus = torch.exp(s["net"](torch.from_numpy(rc)[None]))[0, :, 0].double().numpy()[::-1]
    y = {"plus": plus, "minus": minus, "avg": (plus + minus) / 2}[strand]
    lo, hi = max(start, a) - a, min(end, a + L) - a
    return float(y[lo:hi].sum())


@pytest.fixture(scope="module")
def ism_run(setup):
    out = setup["dir"] / "ism.h5"
    _run(setup, out, "--method", "ism", "--window", 24)
    return out


def test_ism_differences_are_the_mutants_through_the_model(setup, ism_run):
    """Hypothetical ISM scores: h[i, b] - h[i, observed] is target(mutant b at i) - target(sequence), each mutant
    computed here; the recorded target is the sequence's."""
    with h5py.File(ism_run) as f:
        hyp, oh = f["hypothetical"][:], f["onehot"][:]
        ws, tgt = f["regions/window_start"][:], f["regions/target"][:]
    regions = [("c1", 300, 340, 320), ("c1", 330, 360, 345), ("c2", 20, 80, 30)]
    rng = np.random.default_rng(0)
    for k, (chrom, start, end, centre) in enumerate(regions):
        seq = setup["seqs"][chrom]
        ref = _target(setup, seq, start, end, centre)
        assert tgt[k] == pytest.approx(ref, rel=1e-5)
        assert ws[k] == centre - 12
        for i in rng.choice(24, size=3, replace=False):
            pos = ws[k] + i
            obs = "ACGT"[int(oh[k, :, i].argmax())]
            assert obs == seq[pos]
            b = "ACGT"[(("ACGT".index(obs)) + 1 + int(rng.integers(3))) % 4]
            mutant = seq[:pos] + b + seq[pos + 1 :]
            want = _target(setup, mutant, start, end, centre) - ref
            got = hyp[k, "ACGT".index(b), i] - hyp[k, "ACGT".index(obs), i]
            assert got == pytest.approx(want, rel=1e-4, abs=1e-4 * abs(ref)), (k, i, b)


def test_targets_of_each_strand_are_the_model_run_here(setup):
    for strand in ("plus", "minus"):
        out = setup["dir"] / f"ig_{strand}.h5"
        _run(setup, out, "--strand", strand, "--window", 10, "--steps", 4)
        with h5py.File(out) as f:
            assert f.attrs["strand"] == strand
            got = f["regions/target"][:]
        want = [_target(setup, setup["seqs"][c], a, b, m, strand) for c, a, b, m in
                (("c1", 300, 340, 320), ("c1", 330, 360, 345), ("c2", 20, 80, 30))]  # fmt: skip
        assert got == pytest.approx(want, rel=1e-5)


def test_context_is_a_shorter_input_around_the_centre(setup, tmp_path):
    """--context 200: the target is the model's on the 200-bp input around the centre (the route here), and IG is
    complete over those 200 bases. The region reaches the ends of the short input, where the model's output differs
    from the middle of the long one (the tiny model's output settles away from an input's ends)."""
    bed = tmp_path / "edge.bed"
    bed.write_text("c1\t221\t419\tedge\n")
    out = tmp_path / "ig_context.h5"
    run_in_process(
        "attribute", "--fasta", setup["fasta"], "--regions", bed, "--model", setup["model"], "--dataset", "atacseq",
        "--device", "cpu", "--threads", 1, "--out", out, "--window", 200, "--steps", 64, "--context", 200,
    )  # fmt: skip
    with h5py.File(out) as f:
        got = float(f["regions/target"][0])
        total = float(f["observed"][0].sum(dtype=np.float64))
        diff = got - float(f["regions/baseline_target"][0])
    seq = setup["seqs"]["c1"]
    assert got == pytest.approx(_target(setup, seq, 221, 419, 320, "avg", 200), rel=1e-5)
    assert got != pytest.approx(_target(setup, seq, 221, 419, 320, "avg", L), rel=1e-4)  # the region tells them apart
    assert total == pytest.approx(diff, rel=0.01)


def test_integrated_gradients_are_complete_over_the_whole_input(setup):
    """Window = the whole input: the observed contributions sum to target - target(baseline N) (the path integral
    with 64 steps: within 1 % of that difference)."""
    out = setup["dir"] / "ig_full.h5"
    _run(setup, out, "--window", L, "--steps", 64)
    with h5py.File(out) as f:
        total = f["observed"][:].sum(axis=1).astype(np.float64)
        diff = f["regions/target"][:] - f["regions/baseline_target"][:]
        hyp, oh = f["hypothetical"][:], f["onehot"][:]
    assert np.all(np.abs(diff) > 0)
    assert total == pytest.approx(diff, rel=0.01)
    assert np.allclose(hyp.sum(axis=1), 0, atol=1e-5)  # hypothetical scores are centred over the four bases
    # c2's input starts 170 bp before the record: padding (no base, no score), then one base per position
    assert np.all(oh[2, :, :170].sum(axis=0) == 0) and np.all(hyp[2, :, :170] == 0)
    assert np.all(oh[2, :, 170:].sum(axis=0) == 1)


def test_outputs_follow_the_fasta_and_the_bigwig_is_the_observed_contribution(setup):
    out, bw = setup["dir"] / "ig.h5", setup["dir"] / "ig"
    _run(setup, out, "--window", 40, "--steps", 8, "--bigwig", bw, "--ism-regions", 1)
    with h5py.File(out) as f:
        oh, obs, hyp = f["onehot"][:], f["observed"][:], f["hypothetical"][:]
        ws = f["regions/window_start"][:]
        chrom = [c.decode() for c in f["regions/chrom"][:]]
        agree = f["regions/ism_pearson"][:]
        assert f.attrs["columns"] == "A,C,G,T" and f.attrs["method"] == "ig"
    for k in range(3):
        seq = setup["seqs"][chrom[k]]
        got = "".join("ACGT"[int(oh[k, :, i].argmax())] if oh[k, :, i].any() else "-" for i in range(40))
        assert got == "".join(seq[p] if 0 <= p < len(seq) else "-" for p in range(ws[k], ws[k] + 40))
    assert np.allclose(obs, (oh * hyp).sum(axis=1), atol=1e-6)
    # the same run again: the same bytes (no time stamps in either file)
    _run(setup, setup["dir"] / "again.h5", "--window", 40, "--steps", 8, "--bigwig", setup["dir"] / "again.bw",
         "--ism-regions", 1)  # fmt: skip
    assert (setup["dir"] / "again.h5").read_bytes() == out.read_bytes()
    assert (setup["dir"] / "again.bw").read_bytes() == Path(str(bw) + ".bw").read_bytes()
    with pyBigWig.open(str(bw) + ".bw") as b:
        assert b.chroms() == {"c1": 900, "c2": 500}
        both = np.full(900, np.nan)
        acc = np.zeros(900)
        n = np.zeros(900)
        for k in (0, 1):
            acc[ws[k] : ws[k] + 40] += obs[k]
            n[ws[k] : ws[k] + 40] += 1
        both[n > 0] = acc[n > 0] / n[n > 0]
        vals = np.array(b.values("c1", 0, 900))
        assert np.allclose(vals[n > 0], both[n > 0], atol=1e-6) and np.all(np.isnan(vals[n == 0]))
    # the ISM agreement of region 1: the Pearson r of its observed contributions with an ISM run's
    _run(setup, setup["dir"] / "ism40.h5", "--method", "ism", "--window", 40)
    with h5py.File(setup["dir"] / "ism40.h5") as f:
        ref = f["observed"][0]
    assert agree[0] == pytest.approx(np.corrcoef(obs[0], ref)[0, 1], abs=1e-4)
    assert np.isnan(agree[1:]).all()


def test_a_genome_h5_gives_what_its_fasta_gives(setup, ism_run):
    h5 = setup["dir"] / "g.h5"
    chromaflow("fasta2h5", "--fasta", setup["fasta"], "--out", h5, "--species", "x",
               "--subsequence-length", 128, check=True)  # fmt: skip
    out = setup["dir"] / "ism_h5.h5"
    run_in_process(
        "attribute", "--h5", h5, "--regions", setup["bed"], "--model", setup["model"], "--dataset", "atacseq",
        "--device", "cpu", "--threads", 1, "--out", out, "--method", "ism", "--window", 24,
    )  # fmt: skip
    with h5py.File(out) as a, h5py.File(ism_run) as b:
        for key in ("onehot", "hypothetical", "observed", "regions/target"):
            assert np.array_equal(a[key][:], b[key][:]), key


def test_top_keeps_the_highest_scores_in_file_order(setup, tmp_path):
    # narrowPeak signalValue (column 7) and BED score (column 5) rank; a region without a score goes last
    bed = tmp_path / "r.bed"
    bed.write_text(
        "c1\t300\t340\tlow\t1\nc1\t330\t360\tnone\nc2\t20\t80\tpeak\t0\t.\t7.5\t-1\t-1\t10\nc1\t500\t560\thigh\t6\n"
    )
    out = tmp_path / "o.h5"
    run_in_process(
        "attribute", "--fasta", setup["fasta"], "--regions", bed, "--model", setup["model"], "--dataset", "atacseq",
        "--device", "cpu", "--threads", 1, "--out", out, "--window", 8, "--steps", 2, "--top", 2,
    )  # fmt: skip
    with h5py.File(out) as f:
        assert [x.decode() for x in f["regions/name"][:]] == ["peak", "high"]
        assert f["onehot"].shape == (2, 4, 8)


@pytest.mark.parametrize(
    "bed,extra,needles",
    [
        ("c1\t850\t901\n", (), ("r.bed: line 1: region c1:850-901 ends past the end of c1 (900 bp)",)),
        ("c9\t1\t5\n", (), ("line 1: c9 is not a record of",)),
        ("c1\t5\t5\n", (), ("line 1: region c1:5-5 is empty or negative",)),
        ("c1\tx\t5\n", (), ("line 1: start 'x' is not an integer",)),
        ("# nothing\n", (), ("no regions",)),
        ("c1\t1\t5\n", ("--dataset", "dnase"), ("the model has no dataset 'dnase' (it predicts atacseq, h3k4me3)",)),
        ("c1\t1\t5\n", ("--window", L + 1), (f"--window {L + 1}: longer than the model's input length {L}",)),
        ("c1\t1\t5\n", ("--steps", 1), ("--steps must be >= 2",)),
        ("c1\t1\t5\n", ("--top", -1), ("--top must be >= 0",)),
        ("c1\t1\t5\n", ("--context", L + 2, "--window", 8), (f"--context {L + 2}: longer than the model's input",)),
        ("c1\t1\t5\n", ("--context", 5, "--window", 8), ("--context 5: shorter than --window 8",)),
        ("c1\t1\t5\n", ("--context", 201, "--window", 8), ("--context 201: the model's layers do not give back",)),
    ],
)
def test_bad_inputs_are_one_line_and_leave_nothing(setup, tmp_path, bed, extra, needles):
    (tmp_path / "r.bed").write_text(bed)
    p = run_in_process(
        "attribute", "--fasta", setup["fasta"], "--regions", tmp_path / "r.bed", "--model", setup["model"],
        "--dataset", "atacseq", "--device", "cpu", "--out", tmp_path / "o.h5", "--bigwig", tmp_path / "o", *extra,
        check=False,
    )  # fmt: skip
    assert_one_line_error(p, "attribute", *needles)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["r.bed"]
