"""Reliability sweep across stages (docs/reliability.md): corrupt or foreign inputs, full disks, hostile
checkpoints and determinism, each through the real CLI. Every error must be exactly one line on stderr naming
the file and the problem, a non-zero exit code, and no output (nor temporary file) left behind."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import h5py
import numpy as np
import pytest

from helpers.cli import assert_nothing_left, assert_one_line_error, ok
from helpers.cli import chromaflow as run

ROOT = Path(__file__).resolve().parents[2]
TEST = ROOT / "assets" / "test"


def _half(src: Path, dst: Path) -> Path:
    data = src.read_bytes()
    dst.write_bytes(data[: len(data) // 2])
    return dst


# --------------------------------------------------------------------------------------------------
# truncated / foreign h5 files
# --------------------------------------------------------------------------------------------------
def test_truncated_genome_h5_to_predict(small, tmp_path):
    bad = _half(small / "g.h5", tmp_path / "cut.h5")
    res = run("predict", "--h5", str(bad), "--model", str(small / "m.ckpt"), "--out", str(tmp_path / "o.h5"))
    assert_one_line_error(res, "predict", str(bad))
    assert_nothing_left(tmp_path, {"cut.h5"})


def test_truncated_predictions_h5_to_bigwig(small, tmp_path):
    bad = _half(small / "p.h5", tmp_path / "cut.h5")
    out = tmp_path / "tracks"
    out.mkdir()
    res = run("bigwig", "--predictions", str(bad), "--outdir", str(out), "--basename", "x")
    assert_one_line_error(res, "bigwig", str(bad))
    assert_nothing_left(out, set())


def test_h5_from_another_tool(tmp_path, small):
    foreign = tmp_path / "foreign.h5"
    with h5py.File(foreign, "w") as f:
        f.create_dataset("matrix", data=np.arange(10))
    res = run("predict", "--h5", str(foreign), "--model", str(small / "m.ckpt"), "--out", str(tmp_path / "o.h5"))
    assert_one_line_error(res, "predict", str(foreign), "data/X")
    out = tmp_path / "tracks"
    out.mkdir()
    res = run("bigwig", "--predictions", str(foreign), "--outdir", str(out), "--basename", "x")
    assert_one_line_error(res, "bigwig", str(foreign))
    assert_nothing_left(out, set())
    # a genome h5 is not a predictions file either
    res = run("bigwig", "--predictions", str(small / "g.h5"), "--outdir", str(out), "--basename", "x")
    assert_one_line_error(res, "bigwig", "g.h5")


def test_not_hdf5_at_all(tmp_path, small):
    txt = tmp_path / "notes.h5"
    txt.write_text("hello\n")
    res = run("predict", "--h5", str(txt), "--model", str(small / "m.ckpt"), "--out", str(tmp_path / "o.h5"))
    assert_one_line_error(res, "predict", str(txt))


# --------------------------------------------------------------------------------------------------
# checkpoints
# --------------------------------------------------------------------------------------------------
def test_checkpoint_wrong_file(small, tmp_path):
    res = run("predict", "--h5", str(small / "g.h5"), "--model", str(TEST / "asmA.fa"), "--out", str(tmp_path / "o.h5"))
    assert_one_line_error(res, "predict", "asmA.fa")
    assert_nothing_left(tmp_path, set())


def test_checkpoint_truncated_zip(small, tmp_path):
    bad = _half(small / "m.ckpt", tmp_path / "cut.ckpt")
    res = run("predict", "--h5", str(small / "g.h5"), "--model", str(bad), "--out", str(tmp_path / "o.h5"))
    assert_one_line_error(res, "predict", "cut.ckpt")
    assert_nothing_left(tmp_path, {"cut.ckpt"})


def test_checkpoint_wrong_architecture_keys(small, tmp_path):
    import torch

    ckpt = torch.load(small / "m.ckpt", weights_only=True)
    sd = ckpt["state_dict"]
    first = next(iter(sd))
    sd[first.replace("down_layer_list", "encoder")] = sd.pop(first)
    bad = tmp_path / "renamed.ckpt"
    torch.save(ckpt, bad)
    res = run("predict", "--h5", str(small / "g.h5"), "--model", str(bad), "--out", str(tmp_path / "o.h5"))
    line = assert_one_line_error(res, "predict", "renamed.ckpt")
    assert first in line or "encoder" in line
    assert_nothing_left(tmp_path, {"renamed.ckpt"})


class _Boom:
    """Unpickling this object would create the file named in ``target``."""

    def __init__(self, target: str):
        self.target = target

    def __reduce__(self):
        return (open, (self.target, "w"))


def test_malicious_pickle_is_refused_and_runs_nothing(small, tmp_path):
    import torch

    marker = tmp_path / "PWNED"
    ckpt = torch.load(small / "m.ckpt", weights_only=True)
    ckpt["callbacks"] = {"evil": _Boom(str(marker))}
    evil = tmp_path / "evil.ckpt"
    torch.save(ckpt, evil)
    # sanity: plain unsafe unpickling really would run the payload
    probe = tmp_path / "probe"
    pickle.loads(pickle.dumps(_Boom(str(probe))))
    assert probe.exists()
    probe.unlink()
    res = run("predict", "--h5", str(small / "g.h5"), "--model", str(evil), "--out", str(tmp_path / "o.h5"))
    assert_one_line_error(res, "predict", "evil.ckpt")
    assert not marker.exists(), "code from the checkpoint was executed"
    assert_nothing_left(tmp_path, {"evil.ckpt"})


def test_chunk_length_the_model_cannot_take(tmp_path):
    ok(
        "fasta2h5",
        "--fasta",
        str(TEST / "asmA.fa"),
        "--species",
        "Sp",
        "--out",
        str(tmp_path / "odd.h5"),
        "--subsequence-length",
        "2001",
    )
    ok("make-test-model", "--out", str(tmp_path / "m.ckpt"), "--seed", "1")
    res = run(
        "predict",
        "--h5",
        str(tmp_path / "odd.h5"),
        "--model",
        str(tmp_path / "m.ckpt"),
        "--out",
        str(tmp_path / "o.h5"),
    )
    assert_one_line_error(res, "predict", "2001")
    assert_nothing_left(tmp_path, {"odd.h5", "m.ckpt"})


# --------------------------------------------------------------------------------------------------
# expression matrices
# --------------------------------------------------------------------------------------------------
MATRIX_OK = "gene\ts1\ts2\ts3\ts4\nA\t1\t2\t3\t4\nB\t2\t1\t4\t3\nC\t0.5\t0.7\t0.1\t0.9\n"


@pytest.mark.parametrize(
    "case,text,needle",
    [
        ("nan", MATRIX_OK.replace("\t0.7\t", "\tNaN\t"), "NaN"),
        ("non_numeric", MATRIX_OK.replace("\t0.7\t", "\tabc\t"), "abc"),
        ("duplicate_gene", MATRIX_OK + "A\t1\t1\t2\t2\n", "A"),
    ],
)
def test_bad_expression_matrix(tmp_path, case, text, needle):
    m = tmp_path / f"{case}.tsv"
    m.write_text(text)
    res = run(
        "genie3",
        "--expression",
        str(m),
        "--layout",
        "genes-x-samples",
        "--n-trees",
        "10",
        "--out",
        str(tmp_path / "links.tsv.gz"),
    )
    assert_one_line_error(res, "genie3", m.name, needle)
    assert_nothing_left(tmp_path, {m.name})


def test_constant_gene_is_handled_not_crashed(tmp_path):
    """The documented handling (docs/genie3.md): a constant gene is a warning, not an error; as a target all its
    incoming importances are 0, and as a regulator it is never split on (all its outgoing importances are 0)."""
    m = tmp_path / "const.tsv"
    m.write_text(MATRIX_OK + "K\t5\t5\t5\t5\n")
    res = run(
        "genie3",
        "--expression",
        str(m),
        "--layout",
        "genes-x-samples",
        "--n-trees",
        "10",
        "--out",
        str(tmp_path / "links.tsv.gz"),
    )
    assert res.returncode == 0, res.stderr
    assert (
        "chromaflow genie3: warning: regulator 'K' is constant over the samples: it cannot be chosen by any split; "
        "its links are 0" in res.stderr.splitlines()
    )
    rows = [
        ln.split("\t") for ln in gzip.decompress((tmp_path / "links.tsv.gz").read_bytes()).decode().splitlines()[1:]
    ]
    assert len(rows) == 4 * 3  # 4 genes, every pair but self-links
    k_rows = [r for r in rows if "K" in (r[0], r[1])]
    assert sorted((r[0], r[1]) for r in k_rows) == sorted([("K", g) for g in "ABC"] + [(g, "K") for g in "ABC"])
    assert all(float(r[2]) == 0.0 for r in k_rows)
    assert all(float(r[2]) > 0.0 for r in rows if "K" not in (r[0], r[1]))


# --------------------------------------------------------------------------------------------------
# disk full: a 256 KiB tmpfs as output directory
# --------------------------------------------------------------------------------------------------
def test_disk_full_fasta2h5(full_disk, tmp_path):
    big = tmp_path / "big.fa"
    rng = np.random.default_rng(0)
    seq = np.frombuffer(b"ACGT", dtype=np.uint8)[rng.integers(0, 4, 600_000)].tobytes().decode()
    big.write_text(">big\n" + "\n".join(seq[i : i + 80] for i in range(0, len(seq), 80)) + "\n")
    out = full_disk / "big.h5"
    res = run(
        "fasta2h5",
        "--fasta",
        str(big),
        "--species",
        "Sp",
        "--out",
        str(out),
        "--subsequence-length",
        "2000",
        "--compression",
        "lzf",
    )
    assert_one_line_error(res, "fasta2h5", f"{out}: No space left on device")
    assert res.returncode == 1, "a crash after the error line (h5py 3.16 freeing a failed file: exit -11)"
    assert_nothing_left(full_disk, set())


@pytest.mark.parametrize("full_disk", ["16k"], indirect=True)
def test_disk_full_predict(full_disk, small):
    out = full_disk / "p.h5"
    res = run(
        "predict",
        "--h5",
        str(small / "g.h5"),
        "--model",
        str(small / "m.ckpt"),
        "--out",
        str(out),
        "--device",
        "cpu",
        "--batch-size",
        "4",
    )
    assert_one_line_error(res, "predict", f"{out}: No space left on device")
    assert res.returncode == 1, "a crash after the error line"
    assert_nothing_left(full_disk, set())


@pytest.mark.parametrize("full_disk", ["16k"], indirect=True)
def test_disk_full_bigwig(full_disk, small):
    res = run(
        "bigwig",
        "--predictions",
        str(small / "p.h5"),
        "--outdir",
        str(full_disk),
        "--basename",
        "x",
        "--strand",
        "all",
        "--format",
        "bedgraph",
    )
    line = assert_one_line_error(res, "bigwig", "No space left on device")
    assert f"{full_disk}/x_" in line, "the line names the track being written"
    assert res.returncode == 1
    assert not [p for p in full_disk.iterdir() if p.name.endswith(".part") or p.name.startswith(".")]


# --------------------------------------------------------------------------------------------------
# determinism (the other stages' checks are where that stage is tested: fasta2h5 threads in
# tests/fasta2h5/test_fasta2h5.py::test_threads_give_identical_chunk_bytes, predict shards and batch sizes in
# tests/predict/test_predict.py::test_shards_merge_equal_unsharded and ::test_reference_predictions_exact, GENIE3
# threads and target chunks in tests/genie3/test_genie3.py::test_deterministic_and_thread_independent and
# ::test_chunked_merge_is_byte_identical)
# --------------------------------------------------------------------------------------------------
def test_bigwig_byte_identical_across_runs(small, tmp_path):
    for run_dir in ("r1", "r2"):
        (tmp_path / run_dir).mkdir()
        ok(
            "bigwig",
            "--predictions",
            str(small / "p.h5"),
            "--outdir",
            str(tmp_path / run_dir),
            "--basename",
            "x",
            "--strand",
            "all",
            "--threads",
            "1" if run_dir == "r1" else "2",
        )
    names = sorted(p.name for p in (tmp_path / "r1").glob("*.bw"))
    assert len(names) == 6
    for n in names:
        assert (tmp_path / "r1" / n).read_bytes() == (tmp_path / "r2" / n).read_bytes(), n
