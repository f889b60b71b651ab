"""The terminal progress line (progress.Progress): a bar when the amount is known, a count and a rate when it is not
(an unsharded ``predict --fasta`` learns its rows as it reads: it showed nothing before)."""

from __future__ import annotations

import contextlib
import io

from chromaflow.utils.progress import Progress
from helpers.cli import run_in_process as run_cli


def _drawn(total, steps, enabled=True) -> str:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        bar = Progress(total, "work", unit=" rows", enabled=enabled)
        for n in steps:
            bar.update(n)
        bar.close()
    return err.getvalue()


def test_known_total_draws_a_bar_and_unknown_a_count():
    line = _drawn(10, [4, 6]).strip().split("\r")[-1]
    assert line.startswith("work [" + "#" * 30 + "] 100.0% ") and line.endswith(" rows/s"), line
    line = _drawn(None, [1500, 500]).strip().split("\r")[-1]
    assert line.startswith("work 2.0k rows ") and line.endswith(" rows/s") and "%" not in line and "[" not in line
    assert _drawn(None, [5], enabled=False) == "" == _drawn(10, [5], enabled=False)


def test_unsharded_predict_from_fasta_shows_its_count(reference_dir, tmp_path, monkeypatch):
    pm = reference_dir / "predmoter"
    monkeypatch.setenv("CHROMAFLOW_PROGRESS", "1")
    proc = run_cli(
        "predict",
        "--fasta",
        str(pm / "pred_data.fa"),
        "--species",
        "Testus",
        "--model",
        str(pm / "mini_model.ckpt"),
        "--out",
        str(tmp_path / "p.h5"),
        "--batch-size",
        "4",
        "--subsequence-length",
        "2000",
    )
    lines = [x for x in proc.stderr.replace("\r", "\n").splitlines() if x.startswith("predict ")]
    assert lines and lines[-1].rstrip().endswith("subseq/s"), proc.stderr
    import h5py

    with h5py.File(tmp_path / "p.h5") as f:
        rows = f["prediction/predictions"].shape[0]
    # the last line counts every row predicted: "predict <rows> subseq <rate> subseq/s"
    assert lines[-1].split()[1] == (f"{rows:.1f}" if rows < 1000 else f"{rows / 1000:.1f}k"), (rows, lines[-1])
