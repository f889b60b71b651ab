"""The coverage and train stages: their cases, inputs and comparisons (the suite's quick run leaves them out)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import h5py
import pytest

from helpers.cli import run_in_process
from benchmarks.harness import agree
from benchmarks import stages as S
from benchmarks.harness.stagekit import Ctx

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
PEERS = (ROOT / ".." / "shared" / "peers").resolve()


def _ctx(tmp_path, quick: bool) -> Ctx:
    return Ctx(peers=PEERS, work=tmp_path / "w", quick=quick, repeats=1 if quick else 3, log=lambda m: None)


@pytest.mark.parametrize("quick", [True, False])
def test_coverage_and_train_cases(tmp_path, monkeypatch, quick):
    """Both stages are harness stages with their peers; building their cases makes no input (that is each case's
    prepare); every contender gets the same inputs and settings, Helixer and ours a fresh copy of the genome each
    run, and every variant of ours is compared with the peer."""
    made = []
    for name in ("coverage", "train"):  # the full run's warm-up inputs: recorded, not made
        monkeypatch.setattr(S.stage(name), "gen", lambda *a: made.append(a))
    assert {"coverage", "train"} <= set(S.STAGES) and S.STAGES[-1] == "scaling"
    assert S.stage("coverage").PEERS == ["peer-helixer-add-ngs-coverage"] and S.stage("train").PEERS == [
        "peer-predmoter"
    ]
    ctx = _ctx(tmp_path, quick)
    cfg = S.sizes(quick)
    warm, cases = S.stage("coverage").build(ctx)
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
    warm, (case,) = S.stage("train").build(ctx)
    assert warm == [] and case.stage == "train" and case.per_run and case.prepare
    keys = [c.key for c in case.contenders]
    assert keys == ["predmoter", *cfg["train_variants"]] and case.pairs == [(k, "predmoter") for k in keys[1:]]
    from benchmarks.harness.training import ARCH as arch

    p = S.stage("train")._usable_cpus()
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
    from benchmarks.harness import gen

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

    from benchmarks.harness import gen

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
    from benchmarks.harness import training

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
