"""Bad input to ``chromaflow predict`` / ``predict-merge``: one clear line, exit != 0, no partial output.

Every case runs ``python -m chromaflow ...`` in a subprocess; they run concurrently to keep the suite fast.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import h5py
import numpy as np
import torch

from chromaflow.predict.checkpoint import make_test_state_dict, write_test_checkpoint
from chromaflow.predict.model import ModelConfig


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


def test_bad_inputs_one_line_no_output(reference_dir, tmp_path):
    ref = reference_dir / "predmoter"
    cfg = ModelConfig(model_type="bi-hybrid", cnn_layers=1, filter_size=4, kernel_size=9, step=2, up=2, dilation=1,
                      lstm_layers=1, hidden_size=4, bnorm=True, dropout=0.0, datasets=("atacseq",))
    good_ckpt = tmp_path / "tiny.ckpt"
    write_test_checkpoint(good_ckpt, cfg, seed=1)
    good_h5 = tmp_path / "good.h5"
    small_genome(good_h5, 64)

    (tmp_path / "corrupt.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(range(256)) * 40)
    data = (ref / "pred_data_1.h5").read_bytes()
    (tmp_path / "truncated.h5").write_bytes(data[: len(data) // 2])
    damaged = bytearray(data)
    damaged[60_000:120_000] = b"\x00" * 60_000  # inside the compressed X chunks
    (tmp_path / "damaged.h5").write_bytes(bytes(damaged))
    small_genome(tmp_path / "nox.h5", 64, with_x=False)
    small_genome(tmp_path / "odd.h5", 63)
    (tmp_path / "text.ckpt").write_text("not a checkpoint\n")
    torch.save({"state_dict": make_test_state_dict(cfg, 0)}, tmp_path / "nohp.ckpt")
    sd = make_test_state_dict(cfg, 0)
    sd.pop("out.bias")
    sd["extra.weight"] = torch.zeros(1)
    torch.save({"state_dict": sd, "hyper_parameters": cfg.hparams()}, tmp_path / "keys.ckpt")
    sd = make_test_state_dict(cfg, 0)
    sd["out.weight"] = torch.zeros(3, 4)
    torch.save({"state_dict": sd, "hyper_parameters": cfg.hparams()}, tmp_path / "shape.ckpt")
    marker = tmp_path / "PWNED"
    torch.save({"state_dict": {}, "hyper_parameters": {}, "x": Evil(marker)}, tmp_path / "evil.ckpt")
    with zipfile.ZipFile(tmp_path / "junk.ckpt", "w") as z:
        z.writestr("hello.txt", "zip but not torch")
    existing = tmp_path / "exists.h5"
    existing.write_bytes(b"keep me")

    def predict(h5, ckpt=good_ckpt, out=None, *extra):
        return ["predict", "--h5", str(h5), "--model", str(ckpt), "--out", str(out or tmp_path / "out.h5"), *extra]

    cases = {
        "missing h5": (predict(tmp_path / "nope.h5"), "does not exist"),
        "corrupt h5": (predict(tmp_path / "corrupt.h5"), "not a readable HDF5"),
        "truncated h5": (predict(tmp_path / "truncated.h5"), "HDF5"),
        "damaged h5": (predict(tmp_path / "damaged.h5", ref / "mini_model.ckpt"), "damaged.h5"),
        "no data/X": (predict(tmp_path / "nox.h5"), "data/X is missing"),
        "L not divisible": (predict(tmp_path / "odd.h5"), "not divisible by step**cnn_layers"),
        "missing ckpt": (predict(good_h5, tmp_path / "none.ckpt"), "checkpoint does not exist"),
        "text ckpt": (predict(good_h5, tmp_path / "text.ckpt"), "not a PyTorch zip checkpoint"),
        "zip not torch": (predict(good_h5, tmp_path / "junk.ckpt"), "cannot read checkpoint"),
        "no hyper_parameters": (predict(good_h5, tmp_path / "nohp.ckpt"), "missing top-level key 'hyper_parameters'"),
        "key mismatch": (predict(good_h5, tmp_path / "keys.ckpt"), "missing 1 key(s): out.bias; unexpected 1 key(s): extra.weight"),
        "shape mismatch": (predict(good_h5, tmp_path / "shape.ckpt"), "out.weight has shape (3, 4)"),
        "malicious pickle": (predict(good_h5, tmp_path / "evil.ckpt"), "refused to unpickle"),
        "existing output": (predict(good_h5, good_ckpt, existing), "output exists (use --force"),
        "shard 0/3": (predict(good_h5, good_ckpt, None, "--shard", "0/3"), "1 <= I <= N"),
        "shard 4/3": (predict(good_h5, good_ckpt, None, "--shard", "4/3"), "1 <= I <= N"),
        "deflate engine": (predict(good_h5, good_ckpt, None, "--deflate", "onehot"), "unknown engine for predictions"),
        "deflate level": (predict(good_h5, good_ckpt, None, "--deflate", "zlib:12"), "zlib levels are 0..9"),
        "merge non-shard": (["predict-merge", "--out", str(tmp_path / "out.h5"), str(ref / "pred_data_1_predictions.h5")],
                            "not a predict shard file"),
    }

    def go(argv):
        return subprocess.run([sys.executable, "-m", "chromaflow", *argv], capture_output=True, text=True,
                              cwd=tmp_path, timeout=300)

    # each case its own output: runs into one output at the same time are refused (docs/reliability.md)
    argvs = [[a.replace("out.h5", f"out{i}.h5") for a in argv] for i, (argv, _) in enumerate(cases.values())]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(cases, pool.map(go, argvs)))
    for name, (argv, needle) in cases.items():
        proc = results[name]
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode != 0, (name, proc.stderr)
        assert len(lines) == 1, (name, proc.stderr)
        assert lines[0].startswith(f"chromaflow {argv[0]}: error: "), (name, lines[0])
        assert needle in lines[0], (name, lines[0])
    assert not list(tmp_path.glob("out*.h5"))
    assert existing.read_bytes() == b"keep me"
    assert not marker.exists()
    assert not list(tmp_path.glob(".*.part"))

    # --force overwrites
    proc = go(predict(good_h5, good_ckpt, existing, "--force"))
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
    from helpers.cli import run_in_process as run_cli

    proc = run_cli(*args, check=False)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, (args, proc.stderr)
    assert lines[0].startswith(f"chromaflow {args[0]}: error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert not out.exists()
    assert not list(out.parent.glob(".*.part")), args


def test_bad_h5_checkpoint_and_merge_inputs(reference_dir, tmp_path):
    from helpers.cli import run_in_process as run_cli

    cfg = ModelConfig(model_type="bi-hybrid", cnn_layers=1, filter_size=4, kernel_size=9, step=2, up=2, dilation=1,
                      lstm_layers=1, hidden_size=4, bnorm=True, dropout=0.0, datasets=("atacseq",))
    ckpt = tmp_path / "tiny.ckpt"
    write_test_checkpoint(ckpt, cfg, seed=1)
    out = tmp_path / "out.h5"
    good = np.zeros((3, 64, 4), dtype=np.float16)
    good[:, :, 2] = 1
    nan = good.copy()
    nan[2, 17, 1] = np.nan
    inf = good.copy()
    inf[1, 5, 0] = np.inf
    h5s = {
        "int8": _genome(tmp_path / "int8.h5", good.astype(np.int8)),
        "float64": _genome(tmp_path / "f64.h5", good.astype(np.float64)),
        "2d": _genome(tmp_path / "2d.h5", good[:, :, 0]),
        "5 columns": _genome(tmp_path / "5col.h5", np.zeros((3, 64, 5), dtype=np.float16)),
        "nan": _genome(tmp_path / "nan.h5", nan),
        "inf": _genome(tmp_path / "inf.h5", inf),
        "L 63": _genome(tmp_path / "l63.h5", good[:, :63]),
    }
    mismatch = _genome(tmp_path / "mis.h5", good)
    with h5py.File(mismatch, "a") as f:
        del f["data/start_ends"]
        f.create_dataset("data/start_ends", data=np.zeros((2, 2), dtype=np.int64))
    cases = [
        ("int8", ["int8.h5", "data/X has dtype int8", "expected float16"]),
        ("float64", ["f64.h5", "data/X has dtype float64"]),
        ("2d", ["2d.h5", "data/X has shape (3, 64)", "expected (N, L, 4)"]),
        ("5 columns", ["5col.h5", "data/X has shape (3, 64, 5)"]),
        ("nan", ["nan.h5", "data/X row 2 position 17", "nan"]),
        ("inf", ["inf.h5", "data/X row 1 position 5", "inf"]),
        ("L 63", ["l63.h5", "L=63", "not divisible by step**cnn_layers", "= 2"]),
    ]
    for name, needles in cases:
        _expect(["predict", "--h5", str(h5s[name]), "--model", str(ckpt), "--out", str(out)], needles, out)
    _expect(["predict", "--h5", str(mismatch), "--model", str(ckpt), "--out", str(out)],
            ["mis.h5", "data/start_ends (2, 2)", "do not match data/X rows (3)"], out)
    # NaN in a later batch: the rows before it were predicted, but nothing is left behind
    _expect(["predict", "--h5", str(h5s["nan"]), "--model", str(ckpt), "--out", str(out), "--batch-size", "1"],
            ["data/X row 2 position 17"], out)

    # checkpoint hyper_parameters: wrong types and values, each named
    good_h5 = _genome(tmp_path / "good.h5", good)
    sd = make_test_state_dict(cfg, 0)
    bad_hp = {
        "cnn_layers as str": ({"cnn_layers": "1"}, ["hyper_parameters['cnn_layers'] is '1' (str)", "an integer"]),
        "filter_size float": ({"filter_size": 4.5}, ["hyper_parameters['filter_size'] is 4.5 (float)"]),
        "hidden_size bool": ({"hidden_size": True}, ["hyper_parameters['hidden_size'] is True (bool)"]),
        "bnorm as str": ({"bnorm": "False"}, ["hyper_parameters['bnorm'] is 'False' (str)", "True or False"]),
        "datasets str": ({"datasets": "atacseq"}, ["hyper_parameters['datasets'] is 'atacseq'", "list of track names"]),
        "dropout nan": ({"dropout": float("nan")}, ["hyper_parameters['dropout'] is nan", "finite number"]),
        "dropout 1.5": ({"dropout": 1.5}, ["dropout must be in [0, 1), got 1.5"]),
        "negative filter": ({"filter_size": -4}, ["filter_size must be >= 1, got -4"]),
        "zero kernel": ({"kernel_size": 0}, ["kernel_size must be >= 1, got 0"]),
        "unknown model_type": ({"model_type": "transformer"}, ["unknown model_type 'transformer'"]),
        "model_type int": ({"model_type": 3}, ["hyper_parameters['model_type'] is 3 (int)"]),
        "output_size": ({"output_size": 2}, ["output_size 2 != number of datasets 1"]),
        "input_size": ({"input_size": 5}, ["input_size 5 is not 4"]),
        "missing key": ({"step": None}, ["hyper_parameters lack step"]),
    }
    for name, (change, needles) in bad_hp.items():
        hp = cfg.hparams()
        hp.update(change)
        if change.get("step", 0) is None:
            del hp["step"]
        path = tmp_path / f"hp_{name.replace(' ', '_')}.ckpt"
        torch.save({"state_dict": sd, "hyper_parameters": hp}, path)
        _expect(["predict", "--h5", str(good_h5), "--model", str(path), "--out", str(out)], [path.name] + needles, out)
    # state dict shapes that do not match otherwise valid hyper_parameters
    big = cfg.hparams()
    big["filter_size"] = 8
    torch.save({"state_dict": sd, "hyper_parameters": big}, tmp_path / "shapes.ckpt")
    _expect(["predict", "--h5", str(good_h5), "--model", str(tmp_path / "shapes.ckpt"), "--out", str(out)],
            ["shapes.ckpt", "state_dict down_layer_list.0.weight has shape (4, 4, 9), expected (8, 4, 9)"], out)

    # predict-merge: shards of another assembly, overlapping shards, missing shards, a shard of another model
    ref = reference_dir / "predmoter"
    model = str(ref / "mini_model.ckpt")
    s = {}
    for stem, i, n in (("pred_data_1", 1, 2), ("pred_data_1", 2, 2), ("pred_data_2", 2, 2), ("pred_data_1", 2, 3),
                       ("pred_data_1", 3, 3)):
        p = tmp_path / f"{stem}_{i}of{n}.h5"
        run_cli("predict", "--h5", str(ref / f"{stem}.h5"), "--model", model, "--out", str(p), "--shard", f"{i}/{n}")
        s[(stem, i, n)] = str(p)
    other_model = tmp_path / "other_model_shard.h5"
    shutil.copy(s[("pred_data_1", 2, 2)], other_model)
    with h5py.File(other_model, "a") as f:
        f.attrs["chromaflow_model_sha256"] = "f" * 64
    overlap = tmp_path / "overlap.h5"  # claims rows 7-16 (shard 2/2 of 16 rows is 8-16): overlaps shard 1 (0-8)
    shutil.copy(s[("pred_data_1", 2, 2)], overlap)
    with h5py.File(overlap, "a") as f:
        f.attrs["chromaflow_row_start"] = 7
    merged = tmp_path / "merged.h5"
    merge_cases = [
        ([s[("pred_data_1", 1, 2)], s[("pred_data_2", 2, 2)]], ["pred_data_2_2of2.h5", "shard of a different input"]),
        ([s[("pred_data_1", 1, 2)], s[("pred_data_1", 2, 3)]], ["pred_data_1_2of3.h5", "shard of 3 / 16 rows",
                                                               "is of 2 / 16"]),
        ([s[("pred_data_1", 2, 3)], s[("pred_data_1", 3, 3)]], ["incomplete shard set", "1/3 missing"]),
        ([s[("pred_data_1", 1, 2)], str(overlap)], ["overlap.h5", "holds 8 rows, attributes say 7-16"]),
        ([s[("pred_data_1", 1, 2)], str(other_model)], ["other_model_shard.h5", "different model"]),
        ([str(ref / "pred_data_1_predictions.h5")], ["pred_data_1_predictions.h5", "not a predict shard file"]),
    ]
    for shards, needles in merge_cases:
        _expect(["predict-merge", "--out", str(merged), *shards], needles, merged)
    # a consistent overlap (rows 7-15 in 8 rows' attributes) is caught by the gap/overlap rule
    with h5py.File(overlap, "a") as f:
        f.attrs["chromaflow_row_end"] = 15
    _expect(["predict-merge", "--out", str(merged), s[("pred_data_1", 1, 2)], str(overlap)],
            ["overlap.h5", "starts at row 7, expected 8", "gap or overlap"], merged)
