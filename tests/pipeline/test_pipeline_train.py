"""The pipeline's train mode (``--mode train``) on its embedded test data, run once per module by real Nextflow.

``nextflow run main.nf -profile test --mode train`` reads assets/train_test/sheet.csv (2 training and 1 validation
assembly; BAM replicates, a bigWig, shifted ATAC reads), runs FASTA2H5 → ADD_COVERAGE → TRAIN → EVALUATE →
(--train_predict) PREDICT → BIGWIG of the val assembly with the new model → BENCHMARK → MULTIQC, and must give what
the same commands give when run directly, a checkpoint our safe loader
reads, and an evaluation equal to the training run's own validation of the best epoch. The run's TRAIN task is
stopped by a SIGTERM once it has saved an epoch and retried (fixture ``train_run``): the outputs the tests read are
those of a preempted and continued training.
"""

from __future__ import annotations

import functools
import csv
import json
import math
import re
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest

from helpers.pipeline_utils import ROOT, read_trace, run_nextflow, validate_sheets
from helpers.cli import chromaflow

pytestmark = pytest.mark.pipeline

TRAIN_DIR = ROOT / "assets" / "train_test"
DATASETS = ("atacseq", "h3k4me3")


cli = functools.partial(chromaflow, check=True, timeout=None)


def read_tsv(path: Path) -> list[dict]:
    with open(path) as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


#: epochs of the module's train-mode run: a SIGTERM after the first saved one leaves the others to continue
TRAIN_EPOCHS = 5


@pytest.fixture(scope="module")
def train_run(tmp_path_factory, nextflow_bin):
    """One train-mode run for the module: ``--train_predict``, TRAIN_EPOCHS epochs, and a scheduler's SIGTERM sent to
    the TRAIN task once it has saved an epoch (as a time limit or preemption would). Nextflow retries the task and
    attempt 2 continues from the stopped one's checkpoint; every other test reads the run's outputs, as the user
    of a preempted run gets them (one run instead of two). Returns (launch dir, outdir, CompletedProcess, the stopped
    TRAIN task's folder or
    None when no SIGTERM could be sent)."""
    import os
    import signal
    import time

    from helpers.pipeline_utils import check_nextflow, nextflow_cmd, nextflow_env

    work = tmp_path_factory.mktemp("train_mode")
    outdir = work / "results"
    args = [
        "-profile",
        "test",
        "--mode",
        "train",
        "--train_predict",
        "--train_epochs",
        str(TRAIN_EPOCHS),
        "--outdir",
        str(outdir),
    ]
    proc = subprocess.Popen(
        nextflow_cmd(args),
        cwd=work,
        env=nextflow_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        # SIGTERM follows the first saved epoch within ~0.3 s; the epochs after it (0.5-1.3 s each here) leave time
        deadline, pid, task = time.time() + 600, None, None
        while time.time() < deadline and proc.poll() is None and pid is None:
            ckpts = list((work / "work").glob("*/*/model/last.ckpt"))
            if ckpts:
                task = ckpts[0].parent.parent
                pid = _train_pid(task)
            time.sleep(0.1)
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
        else:
            task = None
        out, err = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    res = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    check_nextflow(res, work)
    return work, outdir, res, task


def test_train_mode_runs_every_stage_once(train_run):
    _, outdir, res, _ = train_run
    assert "(--mode train): training 'model' on 3 assemblies" in res.stdout
    assert "chromaflow: done" in res.stdout
    done = [r["process"].split(":")[-1] for r in read_trace(outdir) if r["status"] == "COMPLETED"]
    assert sorted(done) == sorted(
        ["FASTA2H5"] * 3
        + ["ADD_COVERAGE"] * 3
        + ["TRAIN", "EVALUATE", "PREDICT", "BIGWIG", "PEAKS", "BENCHMARK", "MULTIQC"]
    )
    versions = (outdir / "pipeline_info" / "software_versions.yml").read_text()
    assert sorted(re.findall(r'^"TRAIN_MODEL:([\w:]+)":$', versions, re.M)) == sorted(
        [
            "FASTA2H5",
            "ADD_COVERAGE",
            "TRAIN",
            "EVALUATE",
            "PREDICT",
            "TRACKS:BIGWIG",
            "TRACKS:PEAKS",
            "REPORTING:BENCHMARK",
            "REPORTING:MULTIQC",
        ]
    )
    assert re.search(r"^    lightning: \d", versions, re.M) and re.search(r"^    pysam: \d", versions, re.M)


def test_train_task_is_given_the_sheets_datasets(train_run):
    """TRAIN trains on the train sheet's datasets, in the order they first appear (chromaflow train's own default,
    Predmoter's atacseq h3k4me3, stopped a sheet of ATAC-seq alone with 'no training file holds dataset h3k4me3');
    the retried attempt resumes without them (a resumed run keeps the checkpoint's)."""
    work = train_run[0]
    scripts = [p.read_text() for p in (work / "work").glob("*/*/.command.sh") if "chromaflow train" in p.read_text()]
    assert scripts, "no TRAIN task script"
    # every attempt's script: a fresh start passes them, a continued attempt replaces $start with --resume
    assert all('start="--force  --datasets atacseq h3k4me3"' in s for s in scripts), scripts[0]
    assert all('start="--resume model/last.ckpt"' in s for s in scripts), scripts[0]


def test_coverage_in_pipeline_equals_direct_cli(train_run, tmp_path):
    """Staging (numbered folders, explicit BAM indexes) and the per-dataset grouping of the sheet change nothing:
    each assembly's coverage equals add-coverage run directly on the sheet's files."""
    _, outdir, _, _ = train_run
    rows = read_tsv_csv(TRAIN_DIR / "sheet.csv")
    for asm in ("trainA", "trainB", "valA"):
        h5 = tmp_path / f"{asm}.h5"
        cli(
            "fasta2h5",
            "--fasta",
            str(TRAIN_DIR / f"{asm}.fa"),
            "--species",
            "Testus_trainus",
            "--subsequence-length",
            "2000",
            "--out",
            str(h5),
        )
        for ds in DATASETS:
            mine = [r for r in rows if r["id"] == asm and r["dataset"] == ds]
            files = [str(TRAIN_DIR / r["file"]) for r in mine]
            src = ["--bigwig", *files] if files[0].endswith(".bw") else ["--bam", *files]
            cli(
                "add-coverage",
                "--h5",
                str(h5),
                "--prefix",
                ds,
                *src,
                "--unstranded",
                *(["--shift"] if mine[0]["shift"] == "true" else []),
            )
        got = outdir / asm / "h5" / f"{asm}.coverage.h5"
        with h5py.File(got) as a, h5py.File(h5) as b:
            for ds in DATASETS:
                for name in (f"{ds}_coverage", f"{ds}_spliced_coverage"):
                    x, y = a["evaluation"][name][:], b["evaluation"][name][:]
                    assert x.shape == y.shape and x.shape[2] == sum(
                        1 for r in rows if r["id"] == asm and r["dataset"] == ds
                    ), (asm, name)
                    np.testing.assert_array_equal(x, y, err_msg=f"{asm} {name}")
                # one column per replicate, in sheet order
                names = [Path(p.decode()).name for p in a["evaluation"][f"{ds}_meta"]["bam_files"][:]]
                assert names == [r["file"] for r in rows if r["id"] == asm and r["dataset"] == ds]
            assert a["evaluation"]["atacseq_coverage"][:].sum() > 0 and a["evaluation"]["h3k4me3_coverage"][:].sum() > 0
            np.testing.assert_array_equal(a["data"]["X"][:], b["data"]["X"][:])


def read_tsv_csv(path: Path) -> list[dict]:
    with open(path) as fh:
        return list(csv.DictReader(fh))


def test_checkpoints_load_with_the_safe_loader_and_have_the_requested_architecture(train_run):
    from chromaflow.model.checkpoint import build_model, load_checkpoint

    _, outdir, _, _ = train_run
    model_dir = outdir / "model" / "model"
    for name in ("best.ckpt", "last.ckpt"):
        ck = load_checkpoint(model_dir / name)
        assert ck.datasets == DATASETS
        # conf/test.config: --cnn-layers 1 --filter-size 4 --hidden-size 4 on 2000-bp chunks (--subsequence_length)
        assert (
            ck.config.model_type,
            ck.config.cnn_layers,
            ck.config.filter_size,
            ck.config.hidden_size,
            ck.config.seq_len,
        ) == ("bi-hybrid", 1, 4, 4, 2000)
        build_model(ck)
        assert all(np.isfinite(t.float().numpy()).all() for t in ck.state_dict.values())
    epochs = read_tsv(model_dir / "metrics.tsv")
    assert [int(r["epoch"]) for r in epochs] == list(range(TRAIN_EPOCHS))  # the run's --train_epochs
    for r in epochs:
        for k in ("avg_train_loss", "avg_val_loss", "avg_val_accuracy", "epoch_s", "samples_per_s"):
            assert math.isfinite(float(r[k])), (k, r[k])
    # the two epochs trained: the weights of the last epoch differ from a fresh model's
    assert float(epochs[1]["avg_train_loss"]) != float(epochs[0]["avg_train_loss"])


def test_evaluation_equals_the_training_runs_validation_of_the_best_epoch(train_run):
    """EVALUATE on the val assembly with best.ckpt is Predmoter's test mode; TRAIN validated the same file with the
    same weights in the epoch that became best (monitored: avg_val_accuracy, max, as in Predmoter)."""
    _, outdir, _, _ = train_run
    model_dir = outdir / "model" / "model"
    rows = read_tsv(model_dir / "evaluation" / "model.evaluation.tsv")
    assert list(rows[0]) == [
        "file",
        "total_avg_val_loss",
        "total_avg_val_accuracy",
        "atacseq_avg_val_loss",
        "atacseq_avg_val_accuracy",
        "h3k4me3_avg_val_loss",
        "h3k4me3_avg_val_accuracy",
    ]
    assert [r["file"] for r in rows] == ["valA"]
    got = {k: float(v) for k, v in rows[0].items() if k != "file"}
    assert all(math.isfinite(v) for v in got.values()), got
    assert all(-1 <= v <= 1 for k, v in got.items() if k.endswith("accuracy")), got
    epochs = read_tsv(model_dir / "metrics.tsv")
    best = max(epochs, key=lambda r: float(r["avg_val_accuracy"]))
    for k, v in got.items():
        want = float(best[k.replace("total_", "")])
        assert v == pytest.approx(want, rel=1e-5, abs=1e-7), (k, v, want)
    for ds in DATASETS:
        png = model_dir / "evaluation" / "plots" / f"valA_{ds}.png"
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, png


def test_benchmark_report_has_the_train_mode_stages(train_run):
    _, outdir, _, _ = train_run
    rows = read_tsv(outdir / "benchmark" / "benchmark.tsv")
    stages = sorted({r["stage"] for r in rows})
    assert {"fasta2h5", "add_coverage", "train", "evaluate", "predict", "bigwig"} <= set(stages), stages
    train = [r for r in rows if r["stage"] == "train"]
    assert len(train) == 1 and float(train[0]["wall_s"]) > 0
    # every task is matched with its trace row (process + tag); add_coverage has one row per dataset
    assert sorted((r["stage"], r["assembly"]) for r in rows if r["stage"] != "fasta2h5") == sorted(
        [("add_coverage", a) for a in ("trainA", "trainB", "valA") for _ in DATASETS]
        + [("train", "model"), ("evaluate", "model"), ("predict", "valA"), ("bigwig", "valA")]
        + [("peaks", "valA")] * len(DATASETS)
    )
    for r in rows:
        assert r["trace_realtime_s"] and float(r["trace_realtime_s"]) >= 0, r
    assert (outdir / "multiqc" / "multiqc_report.html").stat().st_size > 0


def test_train_predict_uses_the_new_model_on_the_val_assembly(train_run, tmp_path):
    """--train_predict: the val assembly's predictions equal chromaflow predict with the published best.ckpt."""
    _, outdir, _, _ = train_run
    got = outdir / "valA" / "predictions" / "valA_predictions.h5"
    want = tmp_path / "want.h5"
    cli(
        "predict",
        "--h5",
        str(outdir / "valA" / "h5" / "valA.coverage.h5"),
        "--model",
        str(outdir / "model" / "model" / "best.ckpt"),
        "--out",
        str(want),
        "--device",
        "cpu",
    )
    with h5py.File(got) as a, h5py.File(want) as b:
        x, y = a["prediction/predictions"][:], b["prediction/predictions"][:]
        assert x.shape == y.shape and x.shape[-1] == len(DATASETS)
        np.testing.assert_array_equal(x, y)
    assert not (outdir / "trainA" / "predictions").exists()  # training assemblies are not predicted
    tracks = sorted(p.name for p in (outdir / "valA" / "tracks").iterdir())
    assert any(n.endswith(".bw") and "atacseq" in n for n in tracks) and any("h3k4me3" in n for n in tracks), tracks


#: bad train sheet rows (line 3, after the embedded sheet's first row) -> the one-line error naming the line
BAD_TRAIN_ROWS = {
    "split": (
        "valA,validation,valA.fa,Testus_trainus,atacseq,valA_atacseq_1.bam,unstranded,true",
        "line 3: column 'split': 'validation' must be train, val or test",
    ),
    "sam": (
        "valA,val,valA.fa,Testus_trainus,atacseq,valA_atacseq_1.sam,unstranded,true",
        "line 3: column 'file': 'valA_atacseq_1.sam' is neither a .bam nor a .bw/.bigwig file",
    ),
    "bigwig_library": (
        "trainB,train,trainB.fa,Testus_trainus,h3k4me3,trainB_h3k4me3.bw,first,false",
        "line 3: a bigWig needs library unstranded and shift false",
    ),
}


def _bad_train_sheet(folder: Path, line: str) -> Path:
    head = (TRAIN_DIR / "sheet.csv").read_text().splitlines()[:2]
    sheet = folder / "sheet.csv"
    text = "\n".join([*head, line]) + "\n"
    # the sheet's relative paths resolve against its folder: point them at the embedded files
    for f in TRAIN_DIR.iterdir():
        text = text.replace(f",{f.name},", f",{f},")
    folder.mkdir(parents=True, exist_ok=True)
    sheet.write_text(text)
    return sheet


@pytest.fixture(scope="module")
def bad_train_results(tmp_path_factory, nextflow_bin):
    """{case: (sheet, (OK|ERROR, message))}: every bad sheet through the pipeline's own train sheet reader, in one
    JVM (tests/pipeline/nextflow/validate_sheets.nf); one real pipeline launch below shows the run stopping on it."""
    d = tmp_path_factory.mktemp("bad_train")
    sheets = {case: _bad_train_sheet(d / case, line) for case, (line, _) in BAD_TRAIN_ROWS.items()}
    results = validate_sheets(d, [], sheets.values())
    return {case: (sheet, results.get(str(sheet))) for case, sheet in sheets.items()}


@pytest.mark.parametrize("case", sorted(BAD_TRAIN_ROWS))
def test_bad_train_sheet_gives_one_line_naming_it(bad_train_results, case):
    sheet, got = bad_train_results[case]
    assert got is not None, f"no result for {case}"
    kind, message = got
    assert kind == "ERROR" and message == f"train sheet {sheet} {BAD_TRAIN_ROWS[case][1]}", message


def test_bad_train_sheet_stops_the_real_pipeline_before_any_task(tmp_path, nextflow_bin):
    line, message = BAD_TRAIN_ROWS["split"]
    sheet = _bad_train_sheet(tmp_path, line)
    res = run_nextflow(
        ["-profile", "test", "--mode", "train", "--train_sheet", str(sheet), "--outdir", str(tmp_path / "out")],
        cwd=tmp_path,
        check=False,
        timeout=300,
    )
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert f"train sheet {sheet} {message}" in out, out[-3000:]
    assert "Traceback" not in out
    assert not (tmp_path / "work").exists() or not any((tmp_path / "work").iterdir())


def _train_pid(task_dir: Path) -> int | None:
    """The `chromaflow train` process whose working directory is ``task_dir``."""
    import os

    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"train" in cmd and b"--input-dir" in cmd and Path(os.readlink(f"/proc/{pid}/cwd")) == task_dir:
                return int(pid)
        except OSError:
            continue
    return None


def test_train_task_stopped_by_sigterm_is_retried_and_continues(train_run):
    """A scheduler's SIGTERM (time limit, preemption) stops the TRAIN task with exit 143 after an epoch was saved;
    Nextflow's retry (130-145) runs attempt 2, which copies the stopped attempt's checkpoints and continues with
    --resume instead of starting afresh: every epoch appears once in metrics.tsv and the run completes."""
    work, outdir, res, task = train_run
    assert task is not None, f"TRAIN never saved an epoch while running: {res.stdout[-3000:]}"
    train = [r for r in read_trace(outdir) if r["process"].endswith(":TRAIN")]
    assert [(r["attempt"], r["status"], r["exit"]) for r in train] == [("1", "FAILED", "143"), ("2", "COMPLETED", "0")]
    assert "interrupted by SIGTERM; continue with --resume" in (task / ".command.err").read_text()
    second = next(p for p in (work / "work").glob("*/*") if p != task and (p / "model" / "last.ckpt").exists())
    assert f"attempt 2 continues from {task}/model/last.ckpt" in (second / ".command.err").read_text()
    rows = read_tsv(second / "model" / "metrics.tsv")
    assert [int(r["epoch"]) for r in rows] == list(range(TRAIN_EPOCHS))


@pytest.mark.parametrize("dataset", DATASETS)
def test_train_predict_peaks_choose_their_cutoff_against_measured_coverage(train_run, tmp_path, dataset):
    """--train_predict: PEAKS on the val assembly's predicted tracks runs --cutoff auto against its measured coverage
    (ADD_COVERAGE's h5), although the test profile's --peaks_cutoff is 2: the peaks and the chosen cutoff are those
    of the same command run directly, recorded in the summary; the published IGV session lists them."""
    _, outdir, _, _ = train_run
    tracks = outdir / "valA" / "tracks"
    summary = json.loads((tracks / f"valA_{dataset}.peaks.json").read_text())
    assert summary["cutoff_method"] == "auto: F1-best against measured peaks"
    assert summary["observed"] == "valA.coverage.h5" and summary["observed_dataset"] == dataset
    want = tmp_path / "want.narrowPeak"
    cli(
        "peaks",
        "--predictions",
        outdir / "valA" / "predictions" / "valA_predictions.h5",
        "--dataset",
        dataset,
        "--cutoff",
        "auto",
        "--observed",
        outdir / "valA" / "h5" / "valA.coverage.h5",
        "--min-length",
        50,
        "--name",
        f"valA_{dataset}",
        "--out",
        want,
        "--summary",
        tmp_path / "want.json",
    )
    direct = json.loads((tmp_path / "want.json").read_text())
    assert (summary["cutoff"], summary["f1"], summary["peaks"]) == (direct["cutoff"], direct["f1"], direct["peaks"])
    assert (tracks / f"valA_{dataset}.narrowPeak").read_bytes() == want.read_bytes()
    assert f'path="valA_{dataset}.narrowPeak"' in (tracks / "igv_session.xml").read_text()
