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
        "merge non-shard": (["predict-merge", "--out", str(tmp_path / "out.h5"), str(ref / "pred_data_1_predictions.h5")],
                            "not a predict shard file"),
    }

    def go(argv):
        return subprocess.run([sys.executable, "-m", "chromaflow", *argv], capture_output=True, text=True,
                              cwd=tmp_path, timeout=300)

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(cases, pool.map(go, [argv for argv, _ in cases.values()])))
    for name, (argv, needle) in cases.items():
        proc = results[name]
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode != 0, (name, proc.stderr)
        assert len(lines) == 1, (name, proc.stderr)
        assert lines[0].startswith(f"chromaflow {argv[0]}: error: "), (name, lines[0])
        assert needle in lines[0], (name, lines[0])
    assert not (tmp_path / "out.h5").exists()
    assert existing.read_bytes() == b"keep me"
    assert not marker.exists()
    assert not list(tmp_path.glob(".*.part"))

    # --force overwrites
    proc = go(predict(good_h5, good_ckpt, existing, "--force"))
    assert proc.returncode == 0, proc.stderr
    with h5py.File(existing) as f:
        assert f["prediction/predictions"].shape == (2, 64, 1)
