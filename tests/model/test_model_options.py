"""The model runtime options, declared once (chromaflow.model.options): every command that runs a model has the same
--device (default auto) and one --precision vocabulary; train stores Lightning's name for it and still takes those.
The same checks for a core's options given from Python (check_device, check_precision, check_batch_size)."""

from __future__ import annotations

import pytest

from chromaflow.cli import _build_parser


def _parse(command: str, *argv: str):
    required = {
        "predict": ["--h5", "g.h5", "--model", "m.ckpt", "--out", "p.h5"],
        "variant-effect": ["--vcf", "v.vcf", "--fasta", "g.fa", "--model", "m.ckpt", "--out", "e.tsv"],
        "train": ["--input-dir", "d", "--out", "o"],
        "evaluate": ["--model", "m.ckpt", "--h5", "g.h5", "--out", "e.tsv"],
    }[command]
    return _build_parser(command).parse_args([command, *required, *argv])


@pytest.mark.parametrize("command", ["predict", "variant-effect", "train", "evaluate"])
def test_one_device_default(command):
    assert _parse(command).device == "auto"
    assert _parse(command, "--device", "cpu").device == "cpu"


@pytest.mark.parametrize("command", ["predict", "variant-effect"])
def test_inference_precision_vocabulary(command):
    assert _parse(command).precision == "fp32"
    assert _parse(command, "--precision", "bf16").precision == "bf16"
    with pytest.raises(SystemExit):
        _parse(command, "--precision", "bf16-mixed")


@pytest.mark.parametrize(
    "given, stored",
    [("fp32", "32"), ("bf16", "bf16-mixed"), ("fp16", "16-mixed"), ("32", "32"), ("bf16-mixed", "bf16-mixed")],
)
def test_train_takes_both_vocabularies(given, stored):
    assert _parse("train", "--precision", given).precision == stored
    assert _parse("train").precision == "32"


def test_train_refuses_another_precision(capsys):
    with pytest.raises(SystemExit):
        _parse("train", "--precision", "fp64")
    assert "invalid choice: 'fp64'" in capsys.readouterr().err


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_checks_from_python_accept_what_the_command_line_accepts(training):
    """The checks a core's options make from Python (chromaflow.model.options.check_*) take what argparse takes and
    store it as argparse does (train: Lightning's name)."""
    from chromaflow.model.options import DEVICES, LIGHTNING_PRECISION, check_batch_size, check_device, check_precision

    for device in DEVICES:
        check_device(device)
    for given in ("fp32", "bf16", "fp16"):
        assert check_precision(given, training=training) == (LIGHTNING_PRECISION[given] if training else given)
    for size in ("auto", 1, 4096):
        check_batch_size(size)


@pytest.mark.parametrize(
    "call,line",
    [
        (("device", "gpu"), "--device 'gpu': expected one of auto, cpu, cuda"),
        (("precision", "bf16-mixed"), "--precision 'bf16-mixed': expected one of fp32, bf16, fp16"),
        (("training precision", "fp64"), "--precision 'fp64': expected one of fp32, bf16, fp16"),
        (("batch size", 0), "--batch-size: expected an integer >= 1 or 'auto', got 0"),
        (("batch size", True), "--batch-size: expected an integer >= 1 or 'auto', got True"),
        (("batch size", "8"), "--batch-size: expected an integer >= 1 or 'auto', got '8'"),
    ],
)
def test_checks_from_python_refuse_with_one_line(call, line):
    from chromaflow.utils.errors import ChromaflowError
    from chromaflow.model.options import check_batch_size, check_device, check_precision

    check = {
        "device": check_device,
        "precision": check_precision,
        "training precision": lambda v: check_precision(v, training=True),
        "batch size": check_batch_size,
    }[call[0]]
    with pytest.raises(ChromaflowError) as exc:
        check(call[1])
    assert str(exc.value) == line
