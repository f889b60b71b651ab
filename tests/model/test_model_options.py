"""The model runtime options, declared once (chromaflow.model.options): every command that runs a model has the same
--device (default auto) and one --precision vocabulary; train stores Lightning's name for it and still takes those."""

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
