"""The benchmark harness (``benchmarks/run``): its measurements, its output comparisons, its tables, and a real
``--quick`` run against the real peers (so the harness cannot rot)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from helpers.cli import run_in_process
from helpers.environment import unavailable

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
PEERS = (ROOT / ".." / "shared" / "peers").resolve()
sys.path.insert(0, str(BENCH))

from harness import agree, core, render  # noqa: E402
from harness.slurm_cluster import pid_alive  # noqa: E402
from harness import cases as C  # noqa: E402


# --------------------------------------------------------------------------------------------------
# measuring one run
# --------------------------------------------------------------------------------------------------
def test_cpu_of_descendants_is_counted(tmp_path):
    """A command whose CPU is burnt by a grandchild: wait4 of the runner includes it."""
    burn = "import time; t = time.process_time(); x = 0\nwhile time.process_time() - t < 0.6: x += 1"
    cmd = [sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', {burn!r}])"]
    m = core.timed_run(cmd, tmp_path / "r")
    assert m["exit"] == 0
    assert m["cpu_s"] >= 0.55, m
    assert m["wall_s"] >= m["cpu_s"] * 0.5


def test_cpu_of_descendants_nobody_waits_for_is_counted(tmp_path):
    """A command that starts a CPU-burning child and exits without waiting for it (as DDP ranks are left): wait4
    cannot count the child, the sampled process tree does."""
    done = tmp_path / "done"
    burn = (
        f"import time; t = time.process_time(); x = 0\nwhile time.process_time() - t < 0.6: x += 1\n"
        f"open({str(done)!r}, 'w').close()"
    )
    cmd = [
        sys.executable,
        "-c",
        f"import os, subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {burn!r}])"
        f"\nwhile not os.path.exists({str(done)!r}): time.sleep(0.01)",
    ]
    m = core.timed_run(cmd, tmp_path / "r")
    assert m["exit"] == 0 and m["tree_cpu_s"] >= 0.5 and m["cpu_s"] >= m["tree_cpu_s"], m


def test_peak_rss_is_the_commands_not_the_parents(tmp_path):
    """The harness process may be big; the command's peak RSS must not inherit it (ru_maxrss survives fork+exec)."""
    ballast = np.ones(400 * 2**20 // 8)  # 400 MiB resident in this (parent) process
    small = core.timed_run([sys.executable, "-S", "-c", "pass"], tmp_path / "s")
    big = core.timed_run(
        [sys.executable, "-c", "import numpy as np; a = np.ones(300 * 2**20 // 8); a.sum()"], tmp_path / "b"
    )
    assert ballast.sum() > 0
    assert small["peak_rss_bytes"] < 100 * 2**20, small
    assert 300 * 2**20 <= big["peak_rss_bytes"] < 600 * 2**20, big
    assert big["peak_tree_rss_bytes"] >= big["peak_rss_bytes"]


def test_timer_of_the_scripts_drains_pipes_samples_the_tree_and_checks(tmp_path):
    """harness.timer.measure, the process timer of the per-stage scripts: both pipes drained while the child runs
    (a child writing more than a pipe holds must not block), the sampled tree counted, a failure named with its
    stderr."""
    from harness import timer

    chatty = "import sys; sys.stdout.write('o' * 300000); sys.stderr.write('e' * 300000)"
    r = timer.measure([sys.executable, "-c", chatty], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert r["exit"] == 0 and r["stdout"] == b"o" * 300000 and r["stderr"] == b"e" * 300000
    assert r["load_before"] is not None and r["load_after"] is not None
    sleeper = [
        sys.executable,
        "-c",
        "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import time; time.sleep(0.5)'])",
    ]
    assert timer.measure(sleeper, sample_tree=True)["processes"] >= 2
    with pytest.raises(SystemExit, match=r"failed \(exit 3\): .*\nboom"):
        timer.measure([sys.executable, "-c", "import sys; sys.stderr.write('boom'); sys.exit(3)"], check=True)


def test_failed_command_and_summary(tmp_path):
    m = core.timed_run(
        [sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"], tmp_path / "f"
    )
    assert m["exit"] == 3 and (tmp_path / "f" / "stderr.txt").read_text().strip() == "boom"
    s = core.summarize([3.0, 1.0, 2.0, 10.0])
    assert (s["n"], s["median"], s["min"], s["max"]) == (4, 2.5, 1.0, 10.0)
    r = core.ratio(core.summarize([10.0, 12.0, 11.0]), core.summarize([1.0, 2.0, 1.5]))
    assert r["of_medians"] == pytest.approx(11 / 1.5) and r["low"] == pytest.approx(5) and r["high"] == 12


def test_alternation_and_failure_recording(tmp_path):
    order = tmp_path / "order.txt"

    def writer(tag):
        return lambda d, r: [sys.executable, "-c", f"open({str(order)!r}, 'a').write('{tag}{r} ')"]

    flaky = tmp_path / "flaky"  # fails the first time only: retried once, the failed attempt recorded
    once = tmp_path / "once"  # the same, but a contender without retries: its failure stands
    case = core.Case(
        "t",
        "alt",
        {},
        [
            core.Contender("a", "A", "ours", writer("a")),
            core.Contender("b", "B", "peer", writer("b")),
            core.Contender("c", "C", "peer", lambda d, r: [sys.executable, "-c", "1/0"]),
            core.Contender(
                "f",
                "F",
                "peer",
                lambda d, r: [
                    sys.executable,
                    "-c",
                    f"import os, sys; p = {str(flaky)!r}\nif not os.path.exists(p): open(p, 'w'); sys.exit(7)",
                ],
            ),
            core.Contender(
                "g",
                "G",
                "peer",
                lambda d, r: [
                    sys.executable,
                    "-c",
                    f"import os, sys; p = {str(once)!r}\nif not os.path.exists(p): open(p, 'w'); sys.exit(7)",
                ],
                retries=0,
            ),
        ],
        [("a", "b"), ("a", "c")],
        agree=lambda dirs: {"ok": True, "detail": "x"},
    )
    rec = core.run_case(case, tmp_path / "w", 3, log=lambda m: None)
    assert order.read_text().split() == ["a0", "b0", "a1", "b1", "a2", "b2"]  # A B A B A B; c stopped after failing
    f_runs = [r for r in rec["runs"] if r["contender"] == "f"]
    assert [r["exit"] for r in f_runs] == [0, 0, 0] and f_runs[0]["failed_attempts"][0]["exit"] == 7
    assert "failed_attempts" not in f_runs[1]
    assert rec["contenders"]["c"]["failed"].startswith("exit 1")
    assert len([r for r in rec["runs"] if r["contender"] == "c"]) == 1  # retried once, then given up
    g_runs = [r for r in rec["runs"] if r["contender"] == "g"]
    assert [r["exit"] for r in g_runs] == [7] and "failed_attempts" not in g_runs[0]
    assert rec["agreement"]["ok"] is False and "not compared" in rec["agreement"]["detail"]
    assert rec["contenders"]["a"]["wall_s"]["n"] == 3 and rec["ratios"][0]["wall"] is not None


# --------------------------------------------------------------------------------------------------
# the output comparisons fail on a wrong output
# --------------------------------------------------------------------------------------------------
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
def _ctx(tmp_path, quick: bool) -> C.Ctx:
    return C.Ctx(peers=PEERS, work=tmp_path / "w", quick=quick, repeats=1 if quick else 3, log=lambda m: None)


@pytest.mark.parametrize("quick", [True, False])
def test_coverage_and_train_cases(tmp_path, monkeypatch, quick):
    """Both stages are harness stages with their peers; building their cases makes no input (that is each case's
    prepare); every contender gets the same inputs and settings, Helixer and ours a fresh copy of the genome each
    run, and every variant of ours is compared with the peer."""
    made = []
    monkeypatch.setattr(C, "_gen", lambda *a: made.append(a))  # the full run's warm-up inputs: recorded, not made
    assert {"coverage", "train"} <= set(C.STAGES) and C.STAGES[-1] == "scaling"
    assert C.PEERS_NEEDED["coverage"] == ["peer-helixer-add-ngs-coverage"] and C.PEERS_NEEDED["train"] == [
        "peer-predmoter"
    ]
    ctx = _ctx(tmp_path, quick)
    cfg = C.QUICK if quick else C.FULL
    warm, cases = C.BUILDERS["coverage"](ctx)
    assert [a[0] for a in made] == ([] if quick else ["coverage"]) and bool(warm) != quick
    assert len(cases) == len(cfg["coverage"])
    for case, (records, bp, reads) in zip(cases, cfg["coverage"]):
        assert case.stage == "coverage" and (
            case.params["records"],
            case.params["bp_per_record"],
            case.params["reads"],
        ) == (records, bp, reads)
        keys = [c.key for c in case.contenders]
        assert keys == ["helixer"] + [f"chromaflow t{t}" for t in cfg["coverage_threads"]]
        assert case.pairs == [(k, "helixer") for k in keys[1:]] and case.agree and case.prepare
        src = ctx.inputs() / f"coverage_{records}x{bp}bp_{reads}reads_seed1"
        src.mkdir(parents=True, exist_ok=True)
        (src / "genome.h5").write_bytes(b"genome")
        for c in case.contenders:
            d = tmp_path / "runs" / c.key.replace(" ", "_")
            argv = [str(a) for a in c.argv(d, 0)]
            assert argv.count(str(d / "genome.h5")) == 1 and str(src / "reads.bam") in argv and "--unstranded" in argv
            assert "atacseq" in argv and argv[argv.index("--threads") + 1] == ("1" if c.role == "peer" else c.key[-1])
            c.setup(d, 0)
            assert (d / "genome.h5").read_bytes() == b"genome"  # a fresh copy, made before (not in) the timed run
    warm, (case,) = C.BUILDERS["train"](ctx)
    assert warm == [] and case.stage == "train" and case.per_run and case.prepare
    keys = [c.key for c in case.contenders]
    assert keys == ["predmoter", *cfg["train_variants"]] and case.pairs == [(k, "predmoter") for k in keys[1:]]
    from harness.training import ARCH as arch

    p = C._usable_cpus()
    for c in case.contenders:
        d = tmp_path / "t" / c.key
        argv = [str(a) for a in c.argv(d, 0)]
        data = str(ctx.inputs() / f"training_{cfg['train_files']}x{cfg['train_record_bp']}bp_seed1")
        assert data in argv and argv[argv.index("--seed") + 1] == "1"
        epochs = argv[argv.index("-e" if c.role == "peer" else "--epochs") + 1]
        assert epochs == str(cfg["train_epochs"])
        assert " ".join(arch[cfg["train_model"]]) in " ".join(argv)
        batch = argv[len(argv) - 1 - argv[::-1].index("-b" if c.role == "peer" else "--batch-size") + 1]
        devices = int(argv[argv.index("--devices") + 1]) if "--devices" in argv else 1
        assert int(batch) * devices == 120, (c.key, argv)  # the same global batch
        assert argv[argv.index("--device") + 1] == "cpu"
        if c.key == "ours_procs":
            assert devices == p and argv[argv.index("--threads") + 1] == "1"


def _coverage_h5(tmp_path) -> Path:
    """A genome h5 with real add-coverage output (a seeded genome and BAM from the stage's own generator)."""
    from chromaflow.fasta2h5.convert import convert
    from harness import gen

    sizes = gen.write_fasta(str(tmp_path / "g.fa"), 2, 3000, 1)
    convert(str(tmp_path / "g.fa"), tmp_path / "g.h5", "sp", 1000)
    gen.write_bam(str(tmp_path / "r.bam"), sizes, 300, 100, 0.2, 200, 1)
    run_in_process(
        "add-coverage",
        "--h5",
        tmp_path / "g.h5",
        "--prefix",
        "atacseq",
        "--bam",
        tmp_path / "r.bam",
        "--unstranded",
        "--out",
        tmp_path / "a.h5",
    )
    return tmp_path / "a.h5"


def test_coverage_comparison_catches_a_changed_value_and_layout(tmp_path):
    """agree.coverage: identical outputs agree; one changed count, another chunk layout, or no coverage at all
    do not."""
    import shutil

    a = _coverage_h5(tmp_path)
    b = tmp_path / "b.h5"
    shutil.copyfile(a, b)
    res = agree.coverage(str(a), str(b), "atacseq")
    assert res["ok"] is True and res["covered_values"] > 1000, res
    with h5py.File(b, "r+") as f:
        x = f["evaluation/atacseq_spliced_coverage"][3]
        x[17, 0] += 1
        f["evaluation/atacseq_spliced_coverage"][3] = x
    res = agree.coverage(str(a), str(b), "atacseq")
    assert res["ok"] is False and "atacseq_spliced_coverage: values differ (first row 3" in res["detail"], res
    shutil.copyfile(a, b)
    with h5py.File(b, "r+") as f:
        v = f["evaluation/atacseq_coverage"][()]
        del f["evaluation/atacseq_coverage"]
        f.create_dataset(
            "evaluation/atacseq_coverage",
            data=v,
            chunks=(1, v.shape[1], 1),
            maxshape=(None, None, None),
            compression="lzf",
            shuffle=True,
            fillvalue=-1,
        )
    res = agree.coverage(str(a), str(b), "atacseq")
    assert res["ok"] is False and "maxshape" in res["detail"], res
    for path in (a, b):
        with h5py.File(path, "r+") as f:
            f["evaluation/atacseq_coverage"][...] = 0
    assert "no covered base" in agree.coverage(str(a), str(a), "atacseq")["detail"]


def test_coverage_inputs_are_seeded(tmp_path):
    """The stage's generator: same arguments, same FASTA and the same reads."""
    import pysam

    from harness import gen

    for k in ("a", "b"):
        sizes = gen.write_fasta(str(tmp_path / f"{k}.fa"), 2, 5000, 3)
        gen.write_bam(str(tmp_path / f"{k}.bam"), sizes, 500, 100, 0.2, 1000, 3)
    assert (tmp_path / "a.fa").read_bytes() == (tmp_path / "b.fa").read_bytes()

    def reads(p):
        with pysam.AlignmentFile(str(p)) as f:
            return [(r.reference_name, r.reference_start, r.cigarstring, r.is_reverse) for r in f]

    ra = reads(tmp_path / "a.bam")
    assert ra == reads(tmp_path / "b.bam") and len(ra) == 500
    assert sum("N" in c for _, _, c, _ in ra) in range(60, 140) and all(
        s + 100 <= 5000 for _, s, c, _ in ra if "N" not in c
    )


def _curve_files(tmp_path, ours_rows, peer_rows):
    keys = ("avg_train_loss", "avg_train_accuracy", "avg_val_loss", "avg_val_accuracy")
    o, p = tmp_path / "metrics.tsv", tmp_path / "metrics.log"
    o.write_text(
        "\t".join(("epoch",) + keys)
        + "\n"
        + "".join("\t".join([str(i)] + [repr(r[k]) for k in keys]) + "\n" for i, r in enumerate(ours_rows))
    )
    p.write_text(" ".join(keys) + "\n" + "".join(" ".join(f"{r[k]:.8f}" for k in keys) + "\n" for r in peer_rows))
    return str(o), str(p)


def test_loss_curve_comparison_is_the_fidelity_tests_rule(tmp_path):
    """agree.losscurve: Predmoter's metrics.log and our metrics.tsv agree within rel 1e-3 (or abs 1e-5) per epoch and
    metric; a loss 0.2 % off, a missing epoch or a missing column does not."""
    rows = [
        {"avg_train_loss": 2.5087, "avg_train_accuracy": 0.00047, "avg_val_loss": 2.4754, "avg_val_accuracy": 0.0004},
        {"avg_train_loss": 2.01, "avg_train_accuracy": 0.051, "avg_val_loss": 1.98, "avg_val_accuracy": 0.06},
    ]
    near = [dict(r, avg_val_loss=r["avg_val_loss"] * (1 + 4e-4)) for r in rows]
    res = agree.losscurve(*_curve_files(tmp_path, near, rows))
    assert res["ok"] is True and res["epochs"] == 2 and 3e-4 < res["max_rel_diff"] < 5e-4, res
    far = [rows[0], dict(rows[1], avg_train_loss=2.01 * 1.002)]
    res = agree.losscurve(*_curve_files(tmp_path, far, rows))
    assert res["ok"] is False and res["detail"].startswith("epoch 1 avg_train_loss"), res
    res = agree.losscurve(*_curve_files(tmp_path, rows[:1], rows))
    assert res["ok"] is False and "1 epochs vs Predmoter's 2" in res["detail"]
    o, p = _curve_files(tmp_path, rows, rows)
    Path(p).write_text(Path(p).read_text().replace("avg_val_accuracy", "val_acc"))
    assert "avg_val_accuracy: missing in peer" in agree.losscurve(o, p)["detail"]


def test_training_runs_are_read_back(tmp_path):
    """Seconds per epoch and the curve from Predmoter's log (start/end stamps over the epochs) and our metrics JSON."""
    from harness import training

    (tmp_path / "predmoter.log").write_text(
        "01.02.2026 10:00:05, INFO: Training started.\nstuff\n01.02.2026 10:01:45, INFO: Training ended.\n"
    )
    _curve_files(
        tmp_path, [], [{"avg_train_loss": 1, "avg_train_accuracy": 0, "avg_val_loss": 1, "avg_val_accuracy": 0}] * 2
    )
    r = training.predmoter_run(tmp_path)
    assert r["epochs"] == 2 and r["epoch_s"] == 50.0 and r["curve"][1]["avg_val_loss"] == 1
    ep = [
        {
            "epoch": i,
            "epoch_s": s,
            "avg_train_loss": 1.0,
            "avg_val_loss": 2.0,
            "avg_train_accuracy": 0.1,
            "avg_val_accuracy": 0.2,
        }
        for i, s in enumerate((3.0, 5.0))
    ]
    (tmp_path / "m.json").write_text(
        json.dumps({"epochs": ep, "train_samples_per_s": 9.0, "train_bp_per_s": 9e5, "data_wait_fraction": 0.01})
    )
    r = training.ours_run(tmp_path / "m.json")
    assert r["epoch_s"] == 4.0 and r["epochs"] == 2 and r["curve"][0]["avg_val_accuracy"] == 0.2


def test_scores_and_exponent():
    assert render.fit_exponent([1, 10, 100], [3, 300, 30000]) == pytest.approx(2.0)
    assert render.fit_exponent([1, 2, 4], [5, 5, 5]) == pytest.approx(0.0)


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


#: the stages of the suite's quick run: coverage and train (each about a minute with --quick, Predmoter's start-up
#: being most of train's) are left out to keep the suite's cost; their case building and comparisons are tested
#: cheaply below, and `benchmarks/run --quick --stages coverage,train` runs them for real
SUITE_STAGES = ("fasta2h5", "predict", "bigwig", "peaks", "genie3", "network", "scaling")


def suite_inputs(cache: Path) -> tuple[Path, Path]:
    """Where the suite's quick run reads its generated inputs (FASTA, predictions, expression matrices; ~25 CPU-s to
    make, 23 MB): (folder to pass as --inputs, folder it becomes once the run passed). A finished set is kept under
    ``cache`` for later suite runs, keyed by every file of the code that makes or reads them (the harness, the
    generators, the package) and the stages: any change to those makes a fresh set. A run that stops half-way leaves
    only its ``.partial`` folder, never a set a later run would read; older sets are removed when a new one is kept."""
    code = [
        *BENCH.rglob("*.py"),
        *(ROOT / "src" / "chromaflow").rglob("*.py"),
        *(ROOT / "src" / "chromaflow").rglob("*.c"),
    ]
    ready = cache / _inputs_key(ROOT, [f for f in code if "__pycache__" not in f.parts])
    return (ready if ready.is_dir() else cache / f"{ready.name}.{os.getpid()}.partial"), ready


def _inputs_key(root: Path, files: list[Path]) -> str:
    import hashlib

    h = hashlib.sha256(",".join(SUITE_STAGES).encode())
    for f in sorted(files):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def keep_suite_inputs(used: Path, ready: Path) -> None:
    """After a passing run: its fresh inputs become the kept set, the only one (see :func:`suite_inputs`)."""
    if used != ready:
        used.rename(ready)
        for other in ready.parent.iterdir():
            pid = other.name.split(".")[1] if other.name.endswith(".partial") else None
            if other != ready and (pid is None or not pid_alive(int(pid))):  # not another live run's
                shutil.rmtree(other, ignore_errors=True)


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
            assert con["wall_s"]["n"] == (len(C.QUICK["network_seeds"]) if c["stage"] == "network" else 1), (c["id"], k)
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
        assert c["agreement"]["per_contender"]["chromaflow"]["size_ratio"] <= render.EQUAL_SIZE
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
    seeds = C.QUICK["network_seeds"]
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
    v = render.network_verdicts(c)
    assert v["gain"] is True and v["alpha 0.5"]["better"] == len(seeds)  # the planted prior is informative
    assert med["shuffled alpha 0.5 check off"] < med["alpha 0.5"] - 0.05  # a shuffled prior carries no signal
    # the prior check keeps the informative prior and turns the shuffled one off (then: plain GENIE3's AUPR)
    runs = {(r["contender"], r["network_seed"]): r for r in c["runs"]}
    assert all(runs["alpha 0.5", sd]["prior_check"] == "kept" for sd in seeds)
    for sd in seeds:
        if runs["shuffled alpha 0.5", sd]["prior_check"] == "off":
            assert runs["shuffled alpha 0.5", sd]["aupr"] == runs["genie3", sd]["aupr"]
    assert isinstance(v["shuffled_ok"], bool)
    g, t = C.QUICK["network_size"][:2]
    chance = np.mean(c["params"]["edges_per_seed"]) / (t * (g - 1))  # AUPR of a random ranking: the edge density
    assert med["prior alone"] > 1.5 * chance and med["accessibility prior alone"] > 1.5 * chance
    assert [x["ours"] for x in c["ratios"]] == ["alpha 0.5", "accessibility alpha 0.5"]  # the timing rows
    assert f"## Planted network: {c['case']}" in md and "* informative prior (α 0.5 vs GENIE3)" in md
    for con in c["contenders"].values():
        assert f"| {con['label']} | " in md


def test_planted_network_is_seeded_and_its_motifs_are_found(tmp_path):
    """harness.planted make: same seed, same bytes; the real motif-prior finds every planted true edge's motif
    in the target's promoter; precision at k counts ties at the cut at their mean."""
    from harness import planted

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


def _two_case_stage(tmp_path, monkeypatch):
    """A fake 'scaling' stage of two cases ('one', 'two') whose commands append their name to calls.txt; returns
    (harness.main, the calls file, benchmarks/run arguments for a quick run of it)."""
    from harness import cases as C
    from harness import main as M

    calls = tmp_path / "calls.txt"

    def stage(ctx):
        def case(name):
            c = core.Contender(
                "chromaflow",
                "x",
                "ours",
                lambda d, r, name=name: [sys.executable, "-c", f"open({str(calls)!r}, 'a').write('{name} ')"],
            )
            return core.Case("scaling", name, {"series": "t", "size": 1 if name == "one" else 2, "unit": "u"}, [c], [])

        return [], [case("one"), case("two")]

    monkeypatch.setitem(C.BUILDERS, "scaling", stage)
    monkeypatch.setitem(C.PEERS_NEEDED, "scaling", [])
    return (
        M,
        calls,
        ["--quick", "--stages", "scaling", "--out", str(tmp_path / "out"), "--workdir", str(tmp_path / "w")],
    )


def test_resume_skips_finished_cases_and_keeps_them(tmp_path, monkeypatch):
    """A run cut short keeps its finished cases; --resume runs only what is missing."""
    M, calls, args = _two_case_stage(tmp_path, monkeypatch)
    assert M.main(args + ["--cases", "one"]) == 0
    assert calls.read_text().split() == ["one"]
    res_file = next((tmp_path / "out").glob("*-quick.json"))
    first = json.loads(res_file.read_text())
    assert [c["id"] for c in first["cases"]] == ["scaling/one"]
    assert M.main(args + ["--resume"]) == 0
    assert calls.read_text().split() == ["one", "two"]  # 'one' was not run again
    res = json.loads(res_file.read_text())
    assert [c["id"] for c in res["cases"]] == ["scaling/one", "scaling/two"]
    assert res["cases"][0]["started"] == first["cases"][0]["started"]
    assert len(res["commands"]) == 2
    assert M.main(args) == 0  # without --resume: every selected case again, still one record each
    assert calls.read_text().split() == ["one", "two", "one", "two"]
    assert [c["id"] for c in json.loads(res_file.read_text())["cases"]] == ["scaling/one", "scaling/two"]


def test_results_file_of_an_earlier_day_is_continued(tmp_path, monkeypatch):
    """--results FILE adds the missing cases to a named (earlier) results file and keeps the ones there; each new
    case records the commit it ran at; a missing file or a quick/full mismatch is one clear error."""
    M, calls, args = _two_case_stage(tmp_path, monkeypatch)
    assert M.main(args + ["--cases", "one"]) == 0
    earlier = tmp_path / "2020-01-01-host-quick.json"
    next((tmp_path / "out").glob("*-quick.json")).rename(earlier)
    first = json.loads(earlier.read_text())
    real_info = core.machine_info
    monkeypatch.setattr(core, "MACHINE_BRIEF", dict(core.MACHINE_BRIEF))  # main() updates it: keep it per test
    monkeypatch.setattr(core, "machine_info", lambda: {**real_info(), "cpu_model": "Other CPU", "cpu_flags": ["avx2"]})
    assert M.main(args + ["--resume", "--results", str(earlier)]) == 0
    assert calls.read_text().split() == ["one", "two"]
    res = json.loads(earlier.read_text())
    assert [c["id"] for c in res["cases"]] == ["scaling/one", "scaling/two"]
    assert res["cases"][0]["started"] == first["cases"][0]["started"]
    assert res["first_started"] == first["first_started"]
    # the file keeps its machine; the second one is listed and its case is marked in the report
    assert res["machine"] == first["machine"] and res["git"] == first["git"]
    assert [o["machine"]["cpu_model"] for o in res["other_machines"]] == ["Other CPU"]
    assert res["cases"][1]["machine"]["cpu_model"] == "Other CPU"
    assert render.other_machines(res)[0]["cpu_model"] == "Other CPU"
    assert render._mark(res, res["cases"][0]) == "" and render._mark(res, res["cases"][1]) == " †"
    assert "cases marked † (two) ran on another machine" in render.machines_text(res)
    assert "### two †" in earlier.with_suffix(".md").read_text()
    assert len(res["cases"][1]["git"]["commit"] or "") in (0, 40)
    assert not list((tmp_path / "out").glob("*.json"))  # nothing went to today's file
    with pytest.raises(SystemExit, match="no such results file"):
        M.main(args + ["--results", str(tmp_path / "nope.json")])
    with pytest.raises(SystemExit, match="quick results file cannot take full cases"):
        M.main([a for a in args if a != "--quick"] + ["--repeats", "3", "--results", str(earlier)])


def test_published_tables_are_generated():
    """README/docs tables and every RESULTS.md are exactly what benchmarks/render makes from benchmarks/results/."""
    stale = [str(p.relative_to(ROOT)) for p, text in render.published().items() if p.read_text() != text]
    assert not stale, f"edited by hand or not regenerated (run benchmarks/render): {stale}"


def test_genie3_prior_tables_are_generated():
    """docs/genie3.md's two prior tables (cost, DREAM4 accuracy with and without the prior check) are exactly what
    ``benchmarks/genie3/run_benchmark.py prior-render`` makes from benchmarks/genie3/prior_results.json."""
    sys.path.insert(0, str(BENCH / "genie3"))
    import run_benchmark as rb

    text = (ROOT / "docs" / "genie3.md").read_text()
    doc = json.loads(rb.PRIOR_RESULTS.read_text())
    assert rb.with_prior_tables(text, doc) == text, "edited by hand or not regenerated (run_benchmark.py prior-render)"
    assert text.count("<!-- BEGIN GENERATED prior-") == 2
    acc = doc["accuracy"]["priors"]
    assert acc["informative"]["check"]["decision"] == "kept" and acc["shuffled"]["check"]["decision"] == "off"


def test_targets_follow_the_measured_ratios():
    """Each target's verdict is computed from the run: a bigWig variant below 10x, or outputs that disagree,
    turns it to a cross; GENIE3's DREAM4 target needs both the speed and the AUPR."""

    def bw(name, r, ok=True):
        return {
            "stage": "bigwig",
            "case": name,
            "ratios": [{"ours": "chromaflow", "peer": "predmoter", "wall": {"of_medians": r}}],
            "agreement": {"ok": ok},
        }

    def d4(net, r, aupr_ours, aupr_peer, aupr_tn=None):
        tools = [("chromaflow", aupr_ours), ("arboreto genie3", aupr_peer)]
        tools += [("chromaflow tree-normalised", aupr_tn)] if aupr_tn is not None else []
        runs = [{"contender": t, "exit": 0, "seed": 1, "auroc": 0.7, "aupr": a, "wall_s": 1.0} for t, a in tools]
        return {
            "stage": "genie3",
            "case": f"dream4_net{net}",
            "runs": runs,
            "contenders": {t: {"label": t} for t, _ in tools},
            "ratios": [
                {"ours": o, "peer": "arboreto genie3", "wall": {"of_medians": r}}
                for o, _ in tools
                if o != "arboreto genie3"
            ],
        }

    def verdicts(cases):
        return [row.rsplit("|", 2)[1].strip() for row in render.targets_rows({"cases": cases})[2:]]

    assert verdicts([bw("realistic_a", 10.1), bw("realistic_b", 57.0)]) == ["✔"]
    assert verdicts([bw("realistic_a", 9.9), bw("realistic_b", 57.0)]) == ["✘"]
    assert verdicts([bw("realistic_a", 12.0, ok=False)]) == ["✘"]
    assert verdicts([bw("worst_50Mbp", 2.0), bw("realistic_a", 12.0)]) == ["✔"]  # the worst case has no target
    assert verdicts([d4(1, 52.0, 0.20, 0.19), d4(2, 50.0, 0.20, 0.19)]) == ["✔"]
    assert verdicts([d4(1, 52.0, 0.18, 0.19), d4(2, 50.0, 0.18, 0.19)]) == ["✘"]
    assert verdicts([d4(1, 49.0, 0.20, 0.19), d4(2, 50.0, 0.20, 0.19)]) == ["✘"]
    # the default importance and arboreto's (tree-normalised) are judged each on its own AUPR
    assert verdicts([d4(1, 52.0, 0.18, 0.19, 0.20), d4(2, 50.0, 0.18, 0.19, 0.20)]) == ["✘", "✔"]
    assert verdicts([d4(1, 52.0, 0.20, 0.19, 0.18), d4(2, 50.0, 0.20, 0.19, 0.18)]) == ["✔", "✘"]


def test_render_of_a_full_run(tmp_path):
    """A (tiny, fake) full run renders into the README row, the fasta2h5 engine table and RESULTS.md."""

    def cmd(seconds):
        return lambda d, r: [
            sys.executable,
            "-c",
            f"import time; t=time.process_time()\nwhile time.process_time()-t<{seconds}: pass",
        ]

    case = core.Case(
        "fasta2h5",
        "5x10Mbp",
        {"bp": 50_000_000, "records": 5},
        [
            core.Contender("helixer", "Helixer fasta2h5.py", "peer", cmd(0.4)),
            core.Contender("chromaflow", "chromaflow fasta2h5 (default)", "ours", cmd(0.02)),
        ],
        [("chromaflow", "helixer")],
        agree=lambda dirs: {
            "ok": True,
            "detail": "same",
            "per_contender": {"chromaflow": {"ok": True, "size_ratio": 0.83}},
        },
    )
    rec = core.run_case(case, tmp_path / "w", 3, log=lambda m: None)
    rec.update(repeats=3, command="benchmarks/run --stages fasta2h5")
    res = {
        "schema": core.SCHEMA,
        "command": "benchmarks/run --stages fasta2h5",
        "commands": ["benchmarks/run"],
        "quick": False,
        "repeats": 3,
        "machine": core.machine_info(),
        "cases": [rec],
        "first_started": "t0",
        "last_started": "t1",
        "last_finished": "t2",
    }
    rdir = tmp_path / "results"
    rdir.mkdir()
    (rdir / "2099-01-01-test.json").write_text(json.dumps(res))
    out = render.published(rdir)
    readme = out[ROOT / "benchmarks" / "README.md"]
    row = next(line for line in readme.splitlines() if line.startswith("| fasta2h5 | 5x10Mbp |"))
    r = rec["ratios"][0]["cpu"]["of_medians"]
    assert 5 < r and f"**{r:.1f}×**" in row and "equal size ✔" in row and "0.830× Helixer's" in row
    assert "2099-01-01-test.json" in readme
    w = rec["ratios"][0]["wall"]["of_medians"]
    target = next(line for line in readme.splitlines() if line.startswith("| FASTA→h5 ≥ 15× Helixer"))
    assert f"{w:.1f}–{w:.1f}× (lowest: 5x10Mbp)" in target and target.endswith("✔ |" if w >= 15 else "✘ |")
    f2h = out[ROOT / "docs" / "fasta2h5.md"]
    assert "| chromaflow fasta2h5 (default) |" in f2h and "| 0.830 |" in f2h
    assert "### 5x10Mbp" in out[ROOT / "benchmarks" / "fasta2h5" / "RESULTS.md"]
    assert (
        "No published run yet" in out[ROOT / "benchmarks" / "genie3" / "RESULTS.md"]
        or "no case of this stage" in out[ROOT / "benchmarks" / "genie3" / "RESULTS.md"]
    )


def test_render_of_a_train_case():
    """A train case renders seconds per epoch (each tool's own record) beside the process times, the per-epoch ratio
    in its ratio row and the last epoch's losses; the coverage and train stages get their RESULTS.md."""

    def run(key, wall, epoch_s):
        return {
            "contender": key,
            "exit": 0,
            "wall_s": wall,
            "cpu_s": wall,
            "peak_tree_rss_bytes": 2**30,
            "load_before": [1.0],
            "load_after": [1.0],
            "epoch_s": epoch_s,
            "curve": [{"avg_train_loss": 2.5087, "avg_val_loss": 2.4754, "avg_val_accuracy": 0.00047}],
        }

    runs = [
        run("predmoter", 60.0, 50.0),
        run("ours", 50.0, 40.0),
        run("predmoter", 62.0, 52.0),
        run("ours", 52.0, 38.0),
    ]
    cons = {
        k: {
            "label": f"{k} label",
            "role": "peer" if k == "predmoter" else "ours",
            "wall_s": core.summarize([r["wall_s"] for r in runs if r["contender"] == k]),
            "cpu_s": core.summarize([r["cpu_s"] for r in runs if r["contender"] == k]),
            "peak_rss_bytes": core.summarize([2**30]),
        }
        for k in ("predmoter", "ours")
    }
    c = {
        "stage": "train",
        "case": "1x641.52kbp_default_1epoch",
        "params": {"epochs": 1},
        "runs": runs,
        "contenders": cons,
        "ratios": [
            {
                "ours": "ours",
                "peer": "predmoter",
                "wall": core.ratio(cons["predmoter"]["wall_s"], cons["ours"]["wall_s"]),
                "cpu": core.ratio(cons["predmoter"]["cpu_s"], cons["ours"]["cpu_s"]),
            }
        ],
        "agreement": {"ok": True, "detail": "equal", "per_contender": {"ours": {"ok": True}}},
    }
    (row,) = render.headline_rows({"machine": {}, "cases": [c]})
    assert "per epoch 51.0 ÷ 39.0 s = **1.31×**; ✔ loss curve equal" in row
    sec = "\n".join(render.case_section(c))
    assert "| s / epoch median (min–max) |" in sec and "| 39.0 (38.0–40.0) | 2.50870 / 2.47540 / 0.00047 |" in sec
    assert {"coverage", "train"} <= set(render.STAGE_DIRS)


def test_fasta_shards_table_is_rendered_from_the_newest_results(tmp_path):
    """docs/predict.md's FASTA-index table comes from benchmarks/fasta_shards/run's results, not typed by hand: the
    newest file's figures (bytes read per shard and in all, the index's share of the file) end up in the table."""
    from harness import fasta_shards_render as fsr

    def route(size, scan, index):
        return {
            "bytes_on_disk": size,
            "load_before": 1.0,
            "load_after": 2.0,
            "plan_scan": {"wall_s": 0.2, "cpu_s": 0.2},
            "plan_index": {"wall_s": 0.8, "cpu_s": 0.8, "index": "fai"},
            "shards": [
                {
                    "shard": f"{i}/2",
                    "rows": [0, 1],
                    "scan": {"wall_s": 0.3, "cpu_s": 0.3, "bytes_read": s},
                    "index": {"wall_s": 0.1, "cpu_s": 0.1, "bytes_read": x, "records_read": 1},
                }
                for i, (s, x) in enumerate(zip(scan, index), start=1)
            ],
        }

    res = {
        "benchmark": "fasta_shards",
        "command": "benchmarks/fasta_shards/run --mbp 10 --shards 2",
        "mbp": 10,
        "records": 4,
        "line_width": 60,
        "subsequence_length": 21384,
        "shard_count": 2,
        "started": "2099-01-02",
        "machine": {"cpu_model": "Test CPU", "logical_cpus": 2},
        "routes": {
            "plain": route(10_000_000, [12e6, 15e6], [5e6, 5e6]),
            "bgzip": route(5_000_000, [8e6, 9e6], [2.5e6, 2.5e6]),
        },
    }
    old = dict(res, started="2099-01-01", routes={k: route(1, [1, 1], [1, 1]) for k in ("plain", "bgzip")})
    (tmp_path / "2099-01-01-10Mbp.json").write_text(json.dumps(old))
    (tmp_path / "2099-01-02-10Mbp.json").write_text(json.dumps(res))
    text = fsr.render(tmp_path)
    assert "2099-01-02-10Mbp.json" in text and "Test CPU" in text and "load average 1.0–2.0" in text
    rows = {r.split("|")[1].strip(): r for r in text.splitlines() if r.startswith("| plain") or r.startswith("| bgzip")}
    assert "| 12–15 MB of 10.0 MB on disk | 27 MB (2.70× the file) |" in rows["plain, scan"]
    assert "| 5 MB of 10.0 MB on disk | 10 MB (1.00× the file) |" in rows["plain, index"]
    assert "| 2 MB of 5.0 MB on disk | 5 MB (1.00× the file) |" in rows["bgzip, index"]
    assert "costs 4.0× the scan's CPU" in text
    assert fsr.render(tmp_path / "none") == fsr.NO_RUN


def test_each_peer_launcher_is_probed_once_per_run(tmp_path):
    """Stages sharing a peer (predict and train: Predmoter; genie3 and scaling: arboreto) probe its launcher once;
    a missing or failing launcher is one line naming it."""
    from harness import main as M

    M._probe.cache_clear()
    log = tmp_path / "calls"
    (tmp_path / "bin").mkdir()
    for name, code in (("peer-ok", 0), ("peer-bad", 3)):
        exe = tmp_path / "bin" / name
        exe.write_text(f"#!/bin/sh\necho {name} >> '{log}'\necho 'no module named x' >&2\nexit {code}\n")
        exe.chmod(0o755)
    try:
        assert M._peers_ready(tmp_path, ["peer-ok"]) is None
        assert M._peers_ready(tmp_path, ["peer-ok"]) is None
        assert M._peers_ready(tmp_path, ["peer-ok", "peer-bad"]) == "peer-bad does not run: no module named x"
        assert M._peers_ready(tmp_path, ["peer-missing"]).startswith("peer-missing does not run: ")
        assert log.read_text().split() == ["peer-ok", "peer-bad"]
    finally:
        M._probe.cache_clear()
