"""The output rule (docs/reliability.md, "The output rule"), through the real CLI of every command: an output that
is an input (also through a link, also with --force) or another output, or whose folder is missing, is refused
with one line naming the option and the path, a non-zero exit, the inputs unchanged and nothing written."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from helpers.cli import chromaflow as run
from helpers.cli import ok

ROOT = Path(__file__).resolve().parents[2]
TEST = ROOT / "assets" / "test"


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """Every kind of input, made with the real stages."""
    d = tmp_path_factory.mktemp("inputs")
    shutil.copy(TEST / "asmA.fa", d / "a.fa")
    shutil.copy(TEST / "genie3" / "expression.tsv", d / "e.tsv")
    ok("fasta2h5", "--fasta", d / "a.fa", "--species", "Sp", "--out", d / "g.h5", "--subsequence-length", "2000")
    ok("make-test-model", "--out", d / "m.ckpt", "--seed", "3")
    ok("predict", "--h5", d / "g.h5", "--model", d / "m.ckpt", "--out", d / "p.h5", "--device", "cpu")
    ok("predict", "--h5", d / "g.h5", "--model", d / "m.ckpt", "--out", d / "s.h5", "--device", "cpu", "--shard", "1/1")
    ok(
        "bigwig",
        "--predictions",
        d / "p.h5",
        "--outdir",
        d,
        "--basename",
        "t",
        "--datasets",
        "atacseq",
        "--no-browser-files",
    )
    os.rename(d / "t_atacseq_avg_strand.bw", d / "t.bw")
    ok(
        "add-coverage",
        "--h5",
        d / "g.h5",
        "--prefix",
        "atacseq",
        "--bigwig",
        d / "t.bw",
        "--unstranded",
        "--out",
        d / "cov.h5",
    )
    ok(
        "genie3",
        "--expression",
        d / "e.tsv",
        "--layout",
        "samples-x-genes",
        "--n-trees",
        "5",
        "--targets-chunk",
        "1/1",
        "--out",
        d / "part.npz",
    )
    for sub in ("train", "val"):
        (d / "data" / sub).mkdir(parents=True)
        shutil.copy(d / "cov.h5", d / "data" / sub / "cov.h5")
    # contributions in attribute's format with a planted motif (attribute itself is tested in tests/interpret/)
    from benchmarks.harness.contrib import planted

    planted(d / "c.h5", ["MA0548.3"], "MA1690.2", n=60, width=100, seed=2)
    return d


def _sha(d: Path) -> dict[str, str]:
    return {
        str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(d.rglob("*"))
    }


#: (case id, argv with {d} for the input folder, words the one error line must hold)
CASES = [
    (
        "fasta2h5-metrics-is-fasta",
        "fasta2h5 --fasta {d}/a.fa --species Sp --out {d}/o.h5 --metrics {d}/a.fa",
        ["--metrics {d}/a.fa", "--fasta {d}/a.fa"],
    ),
    (
        "fasta2h5-out-is-fasta-force",
        "fasta2h5 --fasta {d}/a.fa --species Sp --out {d}/a.fa --force",
        ["--out {d}/a.fa", "--fasta"],
    ),
    (
        "fasta2h5-metrics-folder-missing",
        "fasta2h5 --fasta {d}/a.fa --species Sp --out {d}/o.h5 --metrics {d}/nonexist/m.json",
        ["{d}/nonexist: output directory does not exist", "--metrics"],
    ),
    (
        "predict-metrics-is-h5",
        "predict --h5 {d}/g.h5 --model {d}/m.ckpt --out {d}/o.h5 --metrics {d}/g.h5 --device cpu",
        ["--metrics {d}/g.h5", "--h5 {d}/g.h5"],
    ),
    (
        "predict-metrics-is-model",
        "predict --h5 {d}/g.h5 --model {d}/m.ckpt --out {d}/o.h5 --metrics {d}/m.ckpt --device cpu",
        ["--metrics {d}/m.ckpt", "--model"],
    ),
    (
        "predict-out-is-h5-force",
        "predict --h5 {d}/g.h5 --model {d}/m.ckpt --out {d}/./g.h5 --force --device cpu",
        ["--out {d}/./g.h5", "--h5 {d}/g.h5", "--force"],
    ),
    (
        "predict-metrics-is-out",
        "predict --h5 {d}/g.h5 --model {d}/m.ckpt --out {d}/o.h5 --metrics {d}/o.h5 --device cpu",
        ["--metrics {d}/o.h5", "--out {d}/o.h5"],
    ),
    (
        "predict-metrics-folder-missing",
        "predict --fasta {d}/a.fa --species Sp --subsequence-length 2000 "
        "--model {d}/m.ckpt --out {d}/o.h5 --metrics {d}/nonexist/m.json --device cpu",
        ["{d}/nonexist: output directory does not exist"],
    ),
    (
        "predict-merge-metrics-is-shard",
        "predict-merge --out {d}/o.h5 --metrics {d}/s.h5 {d}/s.h5",
        ["--metrics {d}/s.h5", "SHARD {d}/s.h5"],
    ),
    (
        "bigwig-metrics-is-predictions",
        "bigwig --predictions {d}/p.h5 --outdir {d} --basename b --metrics {d}/p.h5",
        ["--metrics {d}/p.h5", "--predictions {d}/p.h5"],
    ),
    (
        "genie3-out-is-expression",
        "genie3 --expression {d}/e.tsv --layout genes-x-samples --out {d}/e.tsv",
        ["--out {d}/e.tsv", "--expression {d}/e.tsv"],
    ),
    (
        "genie3-weights-is-out",
        "genie3 --expression {d}/e.tsv --layout samples-x-genes --n-trees 5 --out {d}/l.tsv.gz --weights {d}/l.tsv.gz",
        ["--weights {d}/l.tsv.gz", "--out {d}/l.tsv.gz"],
    ),
    (
        "genie3-summary-links-to-expression",
        "genie3 --expression {d}/e.tsv --layout samples-x-genes --n-trees 5 --out {d}/l.tsv.gz --summary {d}/link.json",
        ["--summary {d}/link.json", "--expression {d}/e.tsv"],
    ),
    ("genie3-merge-out-is-part", "genie3-merge {d}/part.npz --out {d}/part.npz", ["--out {d}/part.npz", "PART"]),
    (
        "genie3-merge-metrics-is-plot",
        "genie3-merge {d}/part.npz --out {d}/l.tsv.gz --plot {d}/x.png --metrics {d}/x.png",
        ["--metrics {d}/x.png", "--plot {d}/x.png"],
    ),
    (
        "genie3-plan-out-is-expression",
        "genie3-plan --expression {d}/e.tsv --layout samples-x-genes --out {d}/e.tsv",
        ["--out {d}/e.tsv", "--expression"],
    ),
    (
        "add-coverage-metrics-is-h5",
        "add-coverage --h5 {d}/g.h5 --prefix x --bigwig {d}/t.bw --unstranded --out {d}/o.h5 --metrics {d}/g.h5",
        ["--metrics {d}/g.h5", "--h5 {d}/g.h5"],
    ),
    (
        "add-coverage-out-is-bigwig-force",
        "add-coverage --h5 {d}/g.h5 --prefix x --bigwig {d}/t.bw --unstranded --out {d}/t.bw --force",
        ["--out {d}/t.bw", "--bigwig {d}/t.bw"],
    ),
    (
        "evaluate-metrics-is-h5",
        "evaluate --model {d}/m.ckpt --h5 {d}/cov.h5 --out {d}/r.tsv --metrics {d}/cov.h5",
        ["--metrics {d}/cov.h5", "--h5 {d}/cov.h5"],
    ),
    (
        "evaluate-out-is-model",
        "evaluate --model {d}/m.ckpt --h5 {d}/cov.h5 --out {d}/m.ckpt",
        ["--out {d}/m.ckpt", "--model {d}/m.ckpt"],
    ),
    (
        "train-metrics-is-training-h5",
        "train --input-dir {d}/data --out {d}/run --metrics {d}/data/train/cov.h5 "
        "--epochs 1 --batch-size 4 --cnn-layers 1 --filter-size 4 --hidden-size 4",
        ["--metrics {d}/data/train/cov.h5", "--input-dir {d}/data/train/cov.h5"],
    ),
    (
        "make-test-model-folder-missing",
        "make-test-model --out {d}/nonexist/m.ckpt",
        ["{d}/nonexist: output directory does not exist", "--out"],
    ),
]


@pytest.mark.parametrize("argv,needles", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_output_rule(made, tmp_path, argv, needles):
    d = tmp_path / "w"
    shutil.copytree(made, d)
    (d / "link.json").symlink_to(d / "e.tsv")
    before = _sha(d)
    res = run(*argv.format(d=d).split())
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1 and len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert lines[0].startswith(f"chromaflow {argv.split()[0]}: error: ")
    for n in needles:
        assert n.format(d=d) in lines[0], lines[0]
    assert _sha(d) == before  # the inputs unchanged, nothing written (no output, no temporary, no folder)


#: every command with an --outdir: its argv writing into {out} ({d}: the made inputs, {m}: a metrics.jsonl) and a
#: file it writes there. One rule for all (docs/reliability.md): the folder is created when absent, refused when it
#: is a file, and its files are outputs like any other (never an input).
OUTDIR_COMMANDS = {
    "bigwig": (
        "bigwig --predictions {d}/p.h5 --outdir {out} --basename b --datasets atacseq",
        "b_atacseq_avg_strand.bw",
    ),
    "benchmark-report": ("benchmark-report --metrics {m} --outdir {out}", "benchmark.json"),
    "discover-motifs": ("discover-motifs --contributions {d}/c.h5 --outdir {out} --threads 1", "matches.tsv"),
}

#: one task's metrics, the input of benchmark-report
METRICS_LINE = '{"stage": "predict", "assembly": "x", "bp": 1000, "subsequences": 1, "wall_s": 2.0, "cpu_s": 1.0}\n'


def _outdir_argv(command: str, made: Path, tmp_path: Path, out: Path) -> list[str]:
    m = tmp_path / "m.jsonl"
    m.write_text(METRICS_LINE)
    return OUTDIR_COMMANDS[command][0].format(d=made, m=m, out=out).split()


def test_every_outdir_command_is_listed(capsys):
    """A command that gains an --outdir joins OUTDIR_COMMANDS, so the tests below hold for it too."""
    from chromaflow.cli import COMMANDS, main

    have = set()
    for name in COMMANDS:
        with pytest.raises(SystemExit):
            main([name, "--help"])
        if "--outdir" in capsys.readouterr().out:
            have.add(name)
    assert have == set(OUTDIR_COMMANDS)


@pytest.mark.parametrize("command", OUTDIR_COMMANDS)
def test_a_missing_outdir_is_created(made, tmp_path, command):
    out = tmp_path / "new" / "sub"
    ok(*_outdir_argv(command, made, tmp_path, out))
    assert (out / OUTDIR_COMMANDS[command][1]).is_file()


@pytest.mark.parametrize("command", OUTDIR_COMMANDS)
def test_outdir_that_is_a_file_is_refused(made, tmp_path, command):
    (tmp_path / "f").write_text("x")
    res = run(*_outdir_argv(command, made, tmp_path, tmp_path / "f"))
    assert res.returncode == 1 and res.stderr.strip() == (
        f"chromaflow {command}: error: --outdir {tmp_path / 'f'}: exists and is not a folder"
    ), res.stderr
    assert (tmp_path / "f").read_text() == "x"


def test_benchmark_report_never_writes_over_its_input(tmp_path):
    """benchmark-report's files in --outdir are outputs under the rule: a --trace that is one of them is refused
    (it was overwritten with the report's table, exit 0)."""
    m = tmp_path / "m.jsonl"
    m.write_text(METRICS_LINE)
    trace = tmp_path / "benchmark.tsv"
    trace.write_text("task_id\tname\n")
    res = run("benchmark-report", "--metrics", m, "--trace", trace, "--outdir", tmp_path)
    assert res.returncode == 1 and res.stderr.strip() == (
        f"chromaflow benchmark-report: error: --outdir {trace}: is the input --trace {trace}; an output never "
        "overwrites an input (not even with --force)"
    ), res.stderr
    assert trace.read_text() == "task_id\tname\n" and not (tmp_path / "benchmark.json").exists()
