"""``train``'s and ``evaluate``'s cores from Python, without the command line:
:class:`chromaflow.train.core.TrainOptions` and :class:`chromaflow.train.evaluate.EvaluateOptions` check their options
once, each rule one line naming the option (the messages the commands print), and their defaults are the
commands'."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from chromaflow.utils.cli_options import options_from
from chromaflow.utils.errors import ChromaflowError
from chromaflow.train import cli_evaluate, cli_train
from chromaflow.train.core import TrainOptions, run
from chromaflow.train.evaluate import EvaluateOptions

# case -> (fields changed from a valid run, the whole error line)
BAD_TRAIN_OPTIONS = {
    "epochs 0": (dict(epochs=0), "--epochs must be >= 1, got 0"),
    "batch_size 0": (dict(batch_size=0), "--batch-size must be >= 1, got 0"),
    "devices 0": (dict(devices=0), "--devices must be >= 1, got 0"),
    "patience 0": (dict(patience=0), "--patience must be >= 1, got 0"),
    "dropout 1": (dict(dropout=1.0), "--dropout must be in [0, 1), got 1.0"),
    "learning_rate 0": (dict(learning_rate=0.0), "--learning-rate must be > 0, got 0.0"),
    "num_workers -1": (dict(num_workers=-1), "--num-workers must be >= 0, got -1"),
    "datasets with resume": (
        dict(resume="r.ckpt", datasets=["a"]),
        "--datasets: a resumed run keeps the checkpoint's datasets",
    ),
    "head without init": (dict(head="reset"), "--head/--freeze-encoder apply to fine-tuning (--init CKPT)"),
    "freeze without init": (dict(freeze_encoder=True), "--head/--freeze-encoder apply to fine-tuning (--init CKPT)"),
    "dataset twice": (dict(datasets=["a", "b", "a"]), "--datasets lists a name twice: a b a"),
    "init and resume": (dict(init="i.ckpt", resume="r.ckpt"), "--init and --resume: give one of them, not both"),
    "device": (dict(device="gpu"), "--device 'gpu': expected one of auto, cpu, cuda"),
    "precision": (dict(precision="fp64"), "--precision 'fp64': expected one of fp32, bf16, fp16"),
    "data_mode": (dict(data_mode="disk"), "--data-mode 'disk': expected one of stream, ram"),
    "ckpt_quantity": (
        dict(ckpt_quantity="loss"),
        "--ckpt-quantity 'loss': expected one of avg_train_loss, avg_train_accuracy, avg_val_loss, avg_val_accuracy",
    ),
    "model_type": (dict(model_type="rnn"), "--model-type 'rnn': expected one of cnn, hybrid, bi-hybrid"),
}


@pytest.mark.parametrize("case", sorted(BAD_TRAIN_OPTIONS))
def test_train_options_validate_with_one_line_naming_the_option(case):
    changes, line = BAD_TRAIN_OPTIONS[case]
    with pytest.raises(ChromaflowError) as exc:
        TrainOptions(input_dir="in", out="out", **changes).validate()
    assert str(exc.value) == line


@pytest.mark.parametrize("given,stored", [("fp32", "32"), ("bf16", "bf16-mixed"), ("16-mixed", "16-mixed")])
def test_train_options_store_lightnings_precision(given, stored):
    options = TrainOptions(input_dir="in", out="out", precision=given)
    options.validate()
    assert options.precision == stored


def test_train_run_validates_before_anything_is_written(tmp_path):
    with pytest.raises(ChromaflowError, match=r"^--epochs must be >= 1, got 0$"):
        run(TrainOptions(input_dir=str(tmp_path / "in"), out=str(tmp_path / "out"), epochs=0))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "changes,line",
    [
        (dict(batch_size=0), "--batch-size must be >= 1, got 0"),
        (
            dict(h5=["a.h5", "b/a.x.h5"]),
            "b/a.x.h5: same file label 'a' as a.h5 (labels are names cut at the first '.')",
        ),
        (dict(h5="a.h5"), "--h5: expected a list of one or more genome h5 files, got 'a.h5'"),
        (dict(device="tpu"), "--device 'tpu': expected one of auto, cpu, cuda"),
    ],
)
def test_evaluate_options_validate_with_one_line_naming_the_option(changes, line):
    options = dataclasses.replace(EvaluateOptions(model="m.ckpt", h5=["a.h5"], out="e.tsv"), **changes)
    with pytest.raises(ChromaflowError) as exc:
        options.validate()
    assert str(exc.value) == line


def test_evaluate_options_give_the_file_labels_once():
    assert EvaluateOptions(model="m", h5=["x/a.h5", "b.v1.h5", "x/a.h5"], out="e.tsv").validate() == ["a", "b"]


@pytest.mark.parametrize(
    "module,cls,argv,expected",
    [
        (cli_train, TrainOptions, ["--input-dir", "in", "--out", "o"], TrainOptions(input_dir="in", out="o")),
        (
            cli_evaluate,
            EvaluateOptions,
            ["--model", "m", "--h5", "a.h5", "--out", "e.tsv"],
            EvaluateOptions(model="m", h5=["a.h5"], out="e.tsv"),
        ),
    ],
    ids=["train", "evaluate"],
)
def test_options_defaults_are_the_commands(module, cls, argv, expected):
    """Every option of the command is a field of the options, with the command's default."""
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    args = parser.parse_args(argv)
    assert set(vars(args)) == {f.name for f in dataclasses.fields(cls)}
    assert options_from(args, cls) == expected
