"""``predict``'s core from Python, without the command line: :class:`chromaflow.predict.core.PredictOptions` checks
its options once, each rule one line naming the option (the messages the command prints), its defaults are the
command's, and :func:`chromaflow.predict.core.run` writes the bytes the command writes."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from chromaflow.utils.cli_options import options_from
from chromaflow.utils.errors import ChromaflowError
from chromaflow.predict import cli_predict
from chromaflow.predict.core import PredictOptions, run
from helpers.cli import run_in_process as run_cli
from helpers.predict_files import write_genome_h5

# case -> (fields changed from a valid h5 run, the whole error line)
BAD_OPTIONS = {
    "no out": (dict(out=None), "--out is required (the predictions h5 to write)"),
    "num_workers 0": (dict(num_workers=0), "--num-workers must be >= 1, got 0"),
    "streams 0": (dict(streams=0), "--streams must be >= 1, got 0"),
    "threads 0": (dict(threads=0), "--threads must be >= 1, got 0"),
    "precision_check_rows -1": (dict(precision_check_rows=-1), "--precision-check-rows must be >= 0, got -1"),
    "species with h5": (
        dict(species="S"),
        "--species and --subsequence-length belong to --fasta (an h5 already has them)",
    ),
    "deflate level": (dict(deflate="zlib:99"), "--deflate 'zlib:99': zlib levels are 0..9"),
    "shard 0/2": (dict(shard="0/2"), "--shard '0/2': expected I/N with 1 <= I <= N (parts are numbered from 1)"),
    "two inputs": (dict(fasta="g.fa"), "give exactly one of --h5, --fasta and --group (got --h5 --fasta)"),
    "no input": (dict(h5=None), "give exactly one of --h5, --fasta and --group (got none)"),
    "device": (dict(device="gpu"), "--device 'gpu': expected one of auto, cpu, cuda"),
    "precision": (dict(precision="16-mixed"), "--precision '16-mixed': expected one of fp32, bf16, fp16"),
    "batch_size 0": (dict(batch_size=0), "--batch-size: expected an integer >= 1 or 'auto', got 0"),
    "reader": (dict(reader="fork"), "--reader 'fork': expected one of auto, thread, process"),
    "group with out": (
        dict(h5=None, group="g.tsv"),
        "--out is not given with --group (each row of g.tsv names its own)",
    ),
    "fasta without species": (dict(h5=None, fasta="g.fa"), "--fasta needs --species (the name fasta2h5 would store)"),
    "missing fasta": (dict(h5=None, fasta="nope.fa", species="S"), "nope.fa: FASTA does not exist"),
}


def _valid(**changes) -> PredictOptions:
    return dataclasses.replace(PredictOptions(model="m.ckpt", h5="g.h5", out="p.h5"), **changes)


@pytest.mark.parametrize("case", sorted(BAD_OPTIONS))
def test_options_validate_with_one_line_naming_the_option(case):
    changes, line = BAD_OPTIONS[case]
    with pytest.raises(ChromaflowError) as exc:
        _valid(**changes).validate()
    assert str(exc.value) == line


def test_options_validate_returns_the_shard_and_fills_in_the_fasta_length(tmp_path):
    assert _valid().validate() is None
    assert _valid(shard="2/3").validate() == (2, 3)
    fasta = tmp_path / "g.fa"
    fasta.write_text(">a\nACGT\n")
    options = _valid(h5=None, fasta=str(fasta), species="S")
    options.validate()
    assert options.subsequence_length == 21384


def test_run_validates_before_anything_is_written(tmp_path):
    out = tmp_path / "p.h5"
    with pytest.raises(ChromaflowError, match=r"^--num-workers must be >= 1, got 0$"):
        run(_valid(out=str(out), num_workers=0))
    assert not out.exists()


def test_options_defaults_are_the_commands():
    """Every option of the command is a field of the options, with the command's default."""
    parser = argparse.ArgumentParser()
    cli_predict.add_arguments(parser)
    args = parser.parse_args(["--h5", "g.h5", "--model", "m.ckpt"])
    assert set(vars(args)) == {f.name for f in dataclasses.fields(PredictOptions)}
    assert options_from(args, PredictOptions) == PredictOptions(model="m.ckpt", h5="g.h5")


def test_run_from_python_writes_the_commands_bytes(tmp_path):
    write_genome_h5(tmp_path / "g.h5", 5, 48)
    ckpt = tmp_path / "t.ckpt"
    run_cli("make-test-model", "--out", ckpt)
    run_cli("predict", "--h5", tmp_path / "g.h5", "--model", ckpt, "--out", tmp_path / "cli.h5", "--batch-size", "2")
    options = PredictOptions(model=str(ckpt), h5=str(tmp_path / "g.h5"), out=str(tmp_path / "py.h5"), batch_size=2)
    assert run(options) == 0
    assert (tmp_path / "py.h5").read_bytes() == (tmp_path / "cli.h5").read_bytes()
