"""Bad input to ``chromaflow predict`` / ``predict-merge``: one clear line, exit != 0, no partial output.

The first group runs ``python -m chromaflow ...`` in subprocesses, all cases at once in one module fixture
(concurrently,
to keep the suite fast), then checks each case as its own test; the second group runs in-process, one test per case.
"""

from __future__ import annotations

import shutil
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from chromaflow.model.checkpoint import make_test_state_dict, write_test_checkpoint
from chromaflow.model.network import ModelConfig
from helpers.cli import assert_one_line_error, chromaflow
from helpers.cli import run_in_process as run_cli

CFG = ModelConfig(
    model_type="bi-hybrid",
    cnn_layers=1,
    filter_size=4,
    kernel_size=9,
    step=2,
    up=2,
    dilation=1,
    lstm_layers=1,
    hidden_size=4,
    bnorm=True,
    dropout=0.0,
    datasets=("atacseq",),
)


class Evil:
    """Pickles to a call of os.system: a safe loader must refuse it."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


def small_genome(path: Path, length: int, rows: int = 2, with_x: bool = True) -> None:
    with h5py.File(path, "w") as f:
        if with_x:
            X = np.zeros((rows, length, 4), dtype=np.float16)
            X[:, :, 1] = 1
            f.create_dataset("data/X", data=X, chunks=(1, length, 4))
        f.create_dataset("data/seqids", data=np.array([b"c"] * rows, dtype="S50"))
        f.create_dataset("data/species", data=np.array([b"sp"] * rows, dtype="S25"))
        f.create_dataset("data/start_ends", data=np.array([[0, length]] * rows, dtype=np.int64))


# --------------------------------------------------------------------------------------------------
# bad input through the real command line (subprocesses)
# --------------------------------------------------------------------------------------------------
def _predict(d: Path, h5, ckpt=None, out=None, *extra) -> list[str]:
    return [
        "predict",
        "--h5",
        str(h5),
        "--model",
        str(ckpt or d / "tiny.ckpt"),
        "--out",
        str(out or d / "out.h5"),
        *extra,
    ]


#: (id, argv from (input folder, Predmoter reference folder), expected fragment of the one-line error)
BAD_INPUTS = [
    ("missing_h5", lambda d, ref: _predict(d, d / "nope.h5"), "does not exist"),
    ("corrupt_h5", lambda d, ref: _predict(d, d / "corrupt.h5"), "not a readable HDF5"),
    ("truncated_h5", lambda d, ref: _predict(d, d / "truncated.h5"), "HDF5"),
    ("damaged_h5", lambda d, ref: _predict(d, d / "damaged.h5", ref / "mini_model.ckpt"), "damaged.h5"),
    ("no_data_X", lambda d, ref: _predict(d, d / "nox.h5"), "data/X is missing"),
    ("L_not_divisible", lambda d, ref: _predict(d, d / "odd.h5"), "not divisible by step**cnn_layers"),
    ("missing_ckpt", lambda d, ref: _predict(d, d / "good.h5", d / "none.ckpt"), "checkpoint does not exist"),
    ("text_ckpt", lambda d, ref: _predict(d, d / "good.h5", d / "text.ckpt"), "not a PyTorch zip checkpoint"),
    ("zip_not_torch", lambda d, ref: _predict(d, d / "good.h5", d / "junk.ckpt"), "cannot read checkpoint"),
    (
        "no_hyper_parameters",
        lambda d, ref: _predict(d, d / "good.h5", d / "nohp.ckpt"),
        "missing top-level key 'hyper_parameters'",
    ),
    (
        "key_mismatch",
        lambda d, ref: _predict(d, d / "good.h5", d / "keys.ckpt"),
        "missing 1 key(s): out.bias; unexpected 1 key(s): extra.weight",
    ),
    ("shape_mismatch", lambda d, ref: _predict(d, d / "good.h5", d / "shape.ckpt"), "out.weight has shape (3, 4)"),
    ("malicious_pickle", lambda d, ref: _predict(d, d / "good.h5", d / "evil.ckpt"), "refused to unpickle"),
    ("existing_output", lambda d, ref: _predict(d, d / "good.h5", None, d / "exists.h5"), "output exists (use --force"),
    ("shard_0_of_3", lambda d, ref: _predict(d, d / "good.h5", None, None, "--shard", "0/3"), "1 <= I <= N"),
    ("shard_4_of_3", lambda d, ref: _predict(d, d / "good.h5", None, None, "--shard", "4/3"), "1 <= I <= N"),
    (
        "deflate_engine",
        lambda d, ref: _predict(d, d / "good.h5", None, None, "--deflate", "onehot"),
        "unknown engine for predictions",
    ),
    (
        "deflate_level",
        lambda d, ref: _predict(d, d / "good.h5", None, None, "--deflate", "zlib:12"),
        "zlib levels are 0..9",
    ),
    (
        "merge_non_shard",
        lambda d, ref: ["predict-merge", "--out", str(d / "out.h5"), str(ref / "pred_data_1_predictions.h5")],
        "not a predict shard file",
    ),
]


@pytest.fixture(scope="module")
def bad_runs(reference_dir, tmp_path_factory) -> tuple[Path, dict[str, tuple[list[str], object]]]:
    """Every bad input made, and every case of BAD_INPUTS run (4 at a time): (folder, {id: (argv, process)})."""
    ref = reference_dir / "predmoter"
    d = tmp_path_factory.mktemp("bad_inputs")
    write_test_checkpoint(d / "tiny.ckpt", CFG, seed=1)
    small_genome(d / "good.h5", 64)
    (d / "corrupt.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(range(256)) * 40)
    data = (ref / "pred_data_1.h5").read_bytes()
    (d / "truncated.h5").write_bytes(data[: len(data) // 2])
    damaged = bytearray(data)
    damaged[60_000:120_000] = b"\x00" * 60_000  # inside the compressed X chunks
    (d / "damaged.h5").write_bytes(bytes(damaged))
    small_genome(d / "nox.h5", 64, with_x=False)
    small_genome(d / "odd.h5", 63)
    (d / "text.ckpt").write_text("not a checkpoint\n")
    torch.save({"state_dict": make_test_state_dict(CFG, 0)}, d / "nohp.ckpt")
    sd = make_test_state_dict(CFG, 0)
    sd.pop("out.bias")
    sd["extra.weight"] = torch.zeros(1)
    torch.save({"state_dict": sd, "hyper_parameters": CFG.hparams()}, d / "keys.ckpt")
    sd = make_test_state_dict(CFG, 0)
    sd["out.weight"] = torch.zeros(3, 4)
    torch.save({"state_dict": sd, "hyper_parameters": CFG.hparams()}, d / "shape.ckpt")
    torch.save({"state_dict": {}, "hyper_parameters": {}, "x": Evil(d / "PWNED")}, d / "evil.ckpt")
    with zipfile.ZipFile(d / "junk.ckpt", "w") as z:
        z.writestr("hello.txt", "zip but not torch")
    (d / "exists.h5").write_bytes(b"keep me")

    # each case its own output: runs into one output at the same time are refused (docs/reliability.md)
    argvs = {
        name: [a.replace("out.h5", f"out{i}.h5") for a in make(d, ref)] for i, (name, make, _) in enumerate(BAD_INPUTS)
    }
    with ThreadPoolExecutor(max_workers=4) as pool:
        procs = dict(zip(argvs, pool.map(lambda argv: chromaflow(*argv, cwd=d, timeout=300), argvs.values())))
    return d, {name: (argvs[name], procs[name]) for name in argvs}


@pytest.mark.parametrize("name,needle", [pytest.param(name, needle, id=name) for name, _, needle in BAD_INPUTS])
def test_bad_inputs_one_line_no_output(bad_runs, name, needle):
    d, runs = bad_runs
    argv, proc = runs[name]
    assert_one_line_error(proc, argv[0], needle)
    out = argv[argv.index("--out") + 1]
    assert out == str(d / "exists.h5") or not Path(out).exists(), out


def test_bad_inputs_leave_nothing_and_run_nothing(bad_runs):
    d, _ = bad_runs
    assert not list(d.glob("out*.h5"))
    assert (d / "exists.h5").read_bytes() == b"keep me"
    assert not (d / "PWNED").exists()
    assert not list(d.glob(".*.part"))


def test_force_overwrites_an_existing_output(bad_runs):
    d, _ = bad_runs
    existing = d / "exists_force.h5"
    existing.write_bytes(b"keep me")
    proc = chromaflow(*_predict(d, d / "good.h5", None, existing, "--force"), cwd=d, timeout=300)
    assert proc.returncode == 0, proc.stderr
    with h5py.File(existing) as f:
        assert f["prediction/predictions"].shape == (2, 64, 1)


# --------------------------------------------------------------------------------------------------
# more bad input, in-process (fast): h5 data/X, checkpoint hyper_parameters, predict-merge shard sets
# --------------------------------------------------------------------------------------------------
def _genome(path: Path, X: np.ndarray) -> Path:
    rows, length = X.shape[0], X.shape[1]
    with h5py.File(path, "w") as f:
        f.create_dataset("data/X", data=X, chunks=(1,) + X.shape[1:])
        f.create_dataset("data/seqids", data=np.array([b"c"] * rows, dtype="S50"))
        f.create_dataset("data/species", data=np.array([b"sp"] * rows, dtype="S25"))
        f.create_dataset("data/start_ends", data=np.array([[0, length]] * rows, dtype=np.int64))
    return path


def _expect(args, needles, out: Path) -> None:
    assert_one_line_error(run_cli(*args, check=False), args[0], *needles)
    assert not out.exists()
    assert not list(out.parent.glob(".*.part")), args


@pytest.fixture(scope="module")
def tiny_ckpt(tmp_path_factory) -> Path:
    ckpt = tmp_path_factory.mktemp("tiny") / "tiny.ckpt"
    write_test_checkpoint(ckpt, CFG, seed=1)
    return ckpt


def _good_x() -> np.ndarray:
    good = np.zeros((3, 64, 4), dtype=np.float16)
    good[:, :, 2] = 1
    return good


def _with(x: np.ndarray, index: tuple, value: float) -> np.ndarray:
    x = x.copy()
    x[index] = value
    return x


def _start_ends_mismatch(path: Path) -> Path:
    _genome(path, _good_x())
    with h5py.File(path, "a") as f:
        del f["data/start_ends"]
        f.create_dataset("data/start_ends", data=np.zeros((2, 2), dtype=np.int64))
    return path


#: (id, genome h5 writer (path -> path), its file name, extra predict options, expected fragments of the error line)
BAD_GENOMES = [
    (
        "int8",
        lambda p: _genome(p, _good_x().astype(np.int8)),
        "int8.h5",
        [],
        ["int8.h5", "data/X has dtype int8", "expected float16"],
    ),
    (
        "float64",
        lambda p: _genome(p, _good_x().astype(np.float64)),
        "f64.h5",
        [],
        ["f64.h5", "data/X has dtype float64"],
    ),
    (
        "2d",
        lambda p: _genome(p, _good_x()[:, :, 0]),
        "2d.h5",
        [],
        ["2d.h5", "data/X has shape (3, 64)", "expected (N, L, 4)"],
    ),
    (
        "5_columns",
        lambda p: _genome(p, np.zeros((3, 64, 5), dtype=np.float16)),
        "5col.h5",
        [],
        ["5col.h5", "data/X has shape (3, 64, 5)"],
    ),
    (
        "nan",
        lambda p: _genome(p, _with(_good_x(), (2, 17, 1), np.nan)),
        "nan.h5",
        [],
        ["nan.h5", "data/X row 2 position 17", "nan"],
    ),
    (
        "inf",
        lambda p: _genome(p, _with(_good_x(), (1, 5, 0), np.inf)),
        "inf.h5",
        [],
        ["inf.h5", "data/X row 1 position 5", "inf"],
    ),
    (
        "L_63",
        lambda p: _genome(p, _good_x()[:, :63]),
        "l63.h5",
        [],
        ["l63.h5", "L=63", "not divisible by step**cnn_layers", "= 2"],
    ),
    (
        "start_ends_mismatch",
        _start_ends_mismatch,
        "mis.h5",
        [],
        ["mis.h5", "data/start_ends (2, 2)", "do not match data/X rows (3)"],
    ),
    # NaN in a later batch: the rows before it were predicted, but nothing is left behind
    (
        "nan_in_a_later_batch",
        lambda p: _genome(p, _with(_good_x(), (2, 17, 1), np.nan)),
        "nan.h5",
        ["--batch-size", "1"],
        ["data/X row 2 position 17"],
    ),
]


@pytest.mark.parametrize("write,name,extra,needles", [pytest.param(*case[1:], id=case[0]) for case in BAD_GENOMES])
def test_bad_genome_h5(tmp_path, tiny_ckpt, write, name, extra, needles):
    h5 = write(tmp_path / name)
    out = tmp_path / "out.h5"
    _expect(["predict", "--h5", str(h5), "--model", str(tiny_ckpt), "--out", str(out), *extra], needles, out)


#: checkpoint hyper_parameters with a wrong type or value: (id, change (None: key removed), fragments)
BAD_HYPER_PARAMETERS = [
    ("cnn_layers_as_str", {"cnn_layers": "1"}, ["hyper_parameters['cnn_layers'] is '1' (str)", "an integer"]),
    ("filter_size_float", {"filter_size": 4.5}, ["hyper_parameters['filter_size'] is 4.5 (float)"]),
    ("hidden_size_bool", {"hidden_size": True}, ["hyper_parameters['hidden_size'] is True (bool)"]),
    ("bnorm_as_str", {"bnorm": "False"}, ["hyper_parameters['bnorm'] is 'False' (str)", "True or False"]),
    ("datasets_str", {"datasets": "atacseq"}, ["hyper_parameters['datasets'] is 'atacseq'", "list of track names"]),
    ("dropout_nan", {"dropout": float("nan")}, ["hyper_parameters['dropout'] is nan", "finite number"]),
    ("dropout_1.5", {"dropout": 1.5}, ["dropout must be in [0, 1), got 1.5"]),
    ("negative_filter", {"filter_size": -4}, ["filter_size must be >= 1, got -4"]),
    ("zero_kernel", {"kernel_size": 0}, ["kernel_size must be >= 1, got 0"]),
    ("unknown_model_type", {"model_type": "transformer"}, ["unknown model_type 'transformer'"]),
    ("model_type_int", {"model_type": 3}, ["hyper_parameters['model_type'] is 3 (int)"]),
    ("output_size", {"output_size": 2}, ["output_size 2 != number of datasets 1"]),
    ("input_size", {"input_size": 5}, ["input_size 5 is not 4"]),
    ("missing_key", {"step": None}, ["hyper_parameters lack step"]),
]


@pytest.fixture(scope="module")
def good_h5(tmp_path_factory) -> Path:
    return _genome(tmp_path_factory.mktemp("good") / "good.h5", _good_x())


@pytest.mark.parametrize("change,needles", [pytest.param(*case[1:], id=case[0]) for case in BAD_HYPER_PARAMETERS])
def test_bad_hyper_parameters(tmp_path, good_h5, request, change, needles):
    hp = CFG.hparams()
    hp.update(change)
    if change.get("step", 0) is None:
        del hp["step"]
    path = tmp_path / f"hp_{request.node.callspec.id}.ckpt"
    torch.save({"state_dict": make_test_state_dict(CFG, 0), "hyper_parameters": hp}, path)
    out = tmp_path / "out.h5"
    _expect(["predict", "--h5", str(good_h5), "--model", str(path), "--out", str(out)], [path.name] + needles, out)


def test_state_dict_shapes_that_do_not_match_valid_hyper_parameters(tmp_path, good_h5):
    big = CFG.hparams()
    big["filter_size"] = 8
    torch.save({"state_dict": make_test_state_dict(CFG, 0), "hyper_parameters": big}, tmp_path / "shapes.ckpt")
    out = tmp_path / "out.h5"
    _expect(
        ["predict", "--h5", str(good_h5), "--model", str(tmp_path / "shapes.ckpt"), "--out", str(out)],
        ["shapes.ckpt", "state_dict down_layer_list.0.weight has shape (4, 4, 9), expected (8, 4, 9)"],
        out,
    )


@pytest.fixture(scope="module")
def shards(reference_dir, tmp_path_factory) -> dict:
    """Shards of Predmoter's reference genomes, {(stem, i, n): path}, plus a shard of another model and one that
    claims rows 7-16 (shard 2/2 of 16 rows is 8-16: it overlaps shard 1, 0-8)."""
    ref = reference_dir / "predmoter"
    d = tmp_path_factory.mktemp("shards")
    s = {}
    for stem, i, n in (
        ("pred_data_1", 1, 2),
        ("pred_data_1", 2, 2),
        ("pred_data_2", 2, 2),
        ("pred_data_1", 2, 3),
        ("pred_data_1", 3, 3),
    ):
        p = d / f"{stem}_{i}of{n}.h5"
        run_cli(
            "predict",
            "--h5",
            str(ref / f"{stem}.h5"),
            "--model",
            str(ref / "mini_model.ckpt"),
            "--out",
            str(p),
            "--shard",
            f"{i}/{n}",
        )
        s[(stem, i, n)] = str(p)
    s["other_model"] = str(d / "other_model_shard.h5")
    shutil.copy(s[("pred_data_1", 2, 2)], s["other_model"])
    with h5py.File(s["other_model"], "a") as f:
        f.attrs["chromaflow_model_sha256"] = "f" * 64
    s["overlap"] = str(d / "overlap.h5")
    shutil.copy(s[("pred_data_1", 2, 2)], s["overlap"])
    with h5py.File(s["overlap"], "a") as f:
        f.attrs["chromaflow_row_start"] = 7
    # a consistent overlap (rows 7-15 in 8 rows' attributes) is caught by the gap/overlap rule
    s["consistent_overlap"] = str(d / "consistent_overlap.h5")
    shutil.copy(s["overlap"], s["consistent_overlap"])
    with h5py.File(s["consistent_overlap"], "a") as f:
        f.attrs["chromaflow_row_end"] = 15
    s["predictions"] = str(ref / "pred_data_1_predictions.h5")
    return s


#: predict-merge of a bad shard set: (id, shard keys, expected fragments)
BAD_MERGES = [
    (
        "another_assembly",
        [("pred_data_1", 1, 2), ("pred_data_2", 2, 2)],
        ["pred_data_2_2of2.h5", "shard of a different input"],
    ),
    (
        "other_shard_count",
        [("pred_data_1", 1, 2), ("pred_data_1", 2, 3)],
        ["pred_data_1_2of3.h5", "shard of 3 / 16 rows", "is of 2 / 16"],
    ),
    ("missing_shard", [("pred_data_1", 2, 3), ("pred_data_1", 3, 3)], ["incomplete shard set", "1/3 missing"]),
    ("overlap", [("pred_data_1", 1, 2), "overlap"], ["overlap.h5", "holds 8 rows, attributes say 7-16"]),
    ("other_model", [("pred_data_1", 1, 2), "other_model"], ["other_model_shard.h5", "different model"]),
    ("not_a_shard", ["predictions"], ["pred_data_1_predictions.h5", "not a predict shard file"]),
    (
        "consistent_overlap",
        [("pred_data_1", 1, 2), "consistent_overlap"],
        ["consistent_overlap.h5", "starts at row 7, expected 8", "gap or overlap"],
    ),
]


@pytest.mark.parametrize("keys,needles", [pytest.param(*case[1:], id=case[0]) for case in BAD_MERGES])
def test_bad_merge_inputs(tmp_path, shards, keys, needles):
    merged = tmp_path / "merged.h5"
    _expect(["predict-merge", "--out", str(merged), *(shards[k] for k in keys)], needles, merged)
