"""``chromaflow train`` / ``evaluate``: Predmoter parity (test mode, loss curve, checkpoints), exact resume, DDP on
CPU (gloo), data modes and filters, fine-tuning, bad input.

Small seeded files come from :mod:`trainfactory` (L = 1000, tiny models) so each training run takes seconds; the
comparisons with Predmoter run the real tool from ``../shared/peers`` side by side.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from helpers.environment import REFERENCE, unavailable
from helpers.trainfactory import TINY, make_file, make_input_dir
from helpers.cli import assert_one_line_error, chromaflow, run_in_process

PEER = REFERENCE.parent / "peers" / "bin" / "peer-predmoter"
MINI = REFERENCE / "predmoter" / "mini_model.ckpt"


_cli = functools.partial(chromaflow, timeout=None)


def _ok(res):
    assert res.returncode == 0, res.stderr[-3000:]
    return res


def _sd(path):
    return torch.load(path, map_location="cpu", weights_only=False)


@contextlib.contextmanager
def _environment_restored():
    """This process's environment as it was: Lightning's import (PYTORCH_NVML_BASED_CUDA_CHECK,
    TORCHINDUCTOR_CACHE_DIR) and ``seed_everything`` (PL_GLOBAL_SEED) change it when a test trains in process, and
    the session's fork server serves only the environment it started with (helpers/cli.py): a changed one starts a
    second server, which imports torch and Lightning again (about 10 CPU-s). A command run as a pipeline task gets
    none of these variables either."""
    before = dict(os.environ)
    try:
        yield
    finally:
        if dict(os.environ) != before:
            os.environ.clear()
            os.environ.update(before)


@pytest.fixture(autouse=True)
def _keep_environment():
    with _environment_restored():
        yield


@pytest.fixture(scope="module")
def peer():
    if not PEER.exists():
        unavailable(f"{PEER} is absent (the peers kit beside the checkout)")
    return str(PEER)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("train_in")
    make_input_dir(d)
    return d


def _tsv(path):
    lines = Path(path).read_text().splitlines()
    cols = lines[0].split()
    return {ln.split()[0]: dict(zip(cols[1:], map(float, ln.split()[1:]))) for ln in lines[1:]}


# --------------------------------------------------------------------------------------------------
# evaluate = Predmoter's test mode
# --------------------------------------------------------------------------------------------------
@pytest.mark.reference
def test_evaluate_equals_predmoter_test_mode(peer, reference_dir, tmp_path):
    """mini_model.ckpt on train_data_4.h5 and val_data_1.h5: every column equals a live ``Predmoter -m test`` run to
    1e-5 relative (Predmoter's own batch-size noise is ~4e-6 on the smallest value)."""
    tdir = tmp_path / "in" / "test"
    tdir.mkdir(parents=True)
    files = [reference_dir / "predmoter" / f for f in ("train_data_4.h5", "val_data_1.h5")]
    for f in files:
        (tdir / f.name).symlink_to(f)
    (tmp_path / "peer").mkdir()
    res = subprocess.run(
        [
            peer,
            "-m",
            "test",
            "-i",
            str(tmp_path / "in"),
            "-o",
            str(tmp_path / "peer"),
            "-b",
            "10",
            "--model",
            str(MINI),
            "--device",
            "cpu",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    theirs = _tsv(tmp_path / "peer" / "test_metrics.log")
    _ok(
        _cli("evaluate", "--model", MINI, "--h5", *files, "--out", tmp_path / "ours.tsv", "--plots", tmp_path / "plots")
    )
    ours = _tsv(tmp_path / "ours.tsv")
    header = (tmp_path / "ours.tsv").read_text().splitlines()[0].split("\t")
    assert header == (tmp_path / "peer" / "test_metrics.log").read_text().splitlines()[0].split()
    assert set(ours) == set(theirs) == {"train_data_4", "val_data_1"}
    for f in theirs:
        for col, v in theirs[f].items():
            assert math.isclose(ours[f][col], v, rel_tol=1e-5), (f, col, ours[f][col], v)
    pngs = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert pngs == [f"{s}_{d}.png" for s in ("train_data_4", "val_data_1") for d in ("atacseq", "h3k4me3")]
    assert all((tmp_path / "plots" / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


def _independent_test_mode(model_path, h5):
    """FORMATS.md §7.2-7.3 written with NaN masks in float64 numpy (not chromaflow's code)."""
    from chromaflow.model.checkpoint import build_model, load_checkpoint

    ck = load_checkpoint(model_path)
    model = build_model(ck)
    with h5py.File(h5, "r") as f:
        X = f["data/X"][()].astype(np.float32)
        keep = X[:, :, 0].max(axis=1) != 0.25
        ys = [np.around(f[f"evaluation/{d}_coverage"][()].mean(axis=2), 2).astype(np.float32) for d in ck.datasets]
    X = X[keep]
    Y = np.stack([y[keep] for y in ys], -1).astype(np.float64)
    with torch.no_grad():
        P = np.concatenate([model(torch.from_numpy(X[i : i + 4])).numpy() for i in range(0, len(X), 4)]).astype(
            np.float64
        )
    pad = X.max(axis=2) == 0
    P[pad], Y[pad] = np.nan, np.nan
    loss = np.nanmean(np.exp(P) - Y * P, axis=1)  # (B, D)
    e = np.exp(P)
    dx, dy = e - np.nanmean(e, 1, keepdims=True), Y - np.nanmean(Y, 1, keepdims=True)
    r = np.nansum(dx * dy, 1) / (np.sqrt(np.nansum(dx**2, 1)) * np.sqrt(np.nansum(dy**2, 1)) + 1e-8)
    out = {"total_avg_val_loss": loss.mean(), "total_avg_val_accuracy": r.mean()}
    for j, d in enumerate(ck.datasets):
        out[f"{d}_avg_val_loss"], out[f"{d}_avg_val_accuracy"] = loss[:, j].mean(), r[:, j].mean()
    return out


@pytest.mark.reference
def test_evaluate_equals_independent_computation(reference_dir, tmp_path):
    files = [reference_dir / "predmoter" / f for f in ("train_data_4.h5", "val_data_1.h5")]
    _ok(_cli("evaluate", "--model", MINI, "--h5", *files, "--out", tmp_path / "m.tsv", "--batch-size", "3"))
    ours = _tsv(tmp_path / "m.tsv")
    for f in files:
        ref = _independent_test_mode(MINI, f)
        for col, v in ref.items():
            assert math.isclose(ours[f.name.split(".")[0]][col], v, rel_tol=1e-5), (f.name, col)


def test_evaluate_starts_without_lightning(reference_dir, tmp_path):
    """Evaluation reads the training files through :mod:`chromaflow.train.data`, not the DataModule: a child that
    runs ``chromaflow evaluate`` has not imported Lightning at the end (importing it costs ~3.5 CPU-s per task)."""
    code = (
        "import sys; from chromaflow.cli import main; rc = main(sys.argv[1:]); "
        "print('imported lightning:', 'lightning' in sys.modules); sys.exit(rc)"
    )
    p = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "evaluate",
            "--model",
            str(MINI),
            "--h5",
            str(reference_dir / "predmoter" / "val_data_1.h5"),
            "--out",
            str(tmp_path / "m.tsv"),
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ, CHROMAFLOW_PROGRESS="0"),
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip().splitlines()[-1] == "imported lightning: False"
    assert (tmp_path / "m.tsv").is_file()


# --------------------------------------------------------------------------------------------------
# checkpoints: real Predmoter loads ours; same loss curve as Predmoter's trainer
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "full"
    # a DataLoader worker: Lightning builds a resumed run's first iterator early, and workers prefetch from it
    _ok(
        _cli(
            "train",
            "--input-dir",
            data,
            "--out",
            out,
            *TINY,
            "--epochs",
            "3",
            "--seed",
            "3",
            "--batch-size",
            "4",
            "--num-workers",
            "1",
            "--metrics",
            out.parent / "full.json",
        )
    )
    return out


def test_checkpoint_layout_and_safe_loader(trained):
    from chromaflow.model.checkpoint import load_checkpoint
    from chromaflow.model.hparams import HPARAM_KEYS
    from chromaflow.model.network import expected_state_shapes

    assert sorted(p.name for p in trained.iterdir()) == ["best.ckpt", "last.ckpt", "metrics.tsv"]
    for name in ("best.ckpt", "last.ckpt"):
        ck = load_checkpoint(trained / name)  # weights_only=True with the numpy allow-list
        raw = _sd(trained / name)
        assert list(raw["hyper_parameters"]) == list(HPARAM_KEYS)
        assert list(raw["state_dict"]) == list(expected_state_shapes(ck.config))
        assert ck.config.seq_len == 1000 and ck.datasets == ("atacseq", "h3k4me3")
    assert _sd(trained / "last.ckpt")["epoch"] == 2
    m = json.loads((trained.parent / "full.json").read_text())
    assert m["stage"] == "train" and m["epochs_run"] == 3 and len(m["epochs"]) == 3
    for e in m["epochs"]:
        assert e["samples_per_s"] > 0 and 0 <= e["data_wait_fraction"] < 1 and math.isfinite(e["avg_val_loss"])
    rows = (trained / "metrics.tsv").read_text().splitlines()
    assert len(rows) == 4 and rows[0].startswith("epoch\tavg_train_loss")
    losses = [float(r.split("\t")[1]) for r in rows[1:]]
    assert losses[-1] < losses[0]  # it learns the sequence-dependent signal


@pytest.mark.reference
def test_predmoter_predicts_with_our_checkpoint(peer, trained, data, tmp_path):
    """Real Predmoter -m predict with our last.ckpt gives exactly chromaflow predict's predictions."""
    h5 = data / "val" / "v0.h5"
    (tmp_path / "pm").mkdir()
    res = subprocess.run(
        [
            peer,
            "-m",
            "predict",
            "-f",
            str(h5),
            "-o",
            str(tmp_path / "pm"),
            "--model",
            str(trained / "last.ckpt"),
            "--device",
            "cpu",
            "-b",
            "10",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    _ok(_cli("predict", "--h5", h5, "--model", trained / "last.ckpt", "--out", tmp_path / "ours.h5", "--device", "cpu"))
    with h5py.File(tmp_path / "pm" / "v0_predictions.h5", "r") as a, h5py.File(tmp_path / "ours.h5", "r") as b:
        pa, pb = a["prediction/predictions"][()], b["prediction/predictions"][()]
        assert pa.shape == pb.shape == (10, 1000, 2)
        np.testing.assert_array_equal(pa, pb)
        assert len(np.unique(pa[pa >= 0])) > 1


@pytest.mark.reference
def test_same_loss_curve_as_predmoter(peer, reference_dir, tmp_path):
    """Same files, seed, architecture and batch size (one batch per epoch): Predmoter's -m train and ours report the
    same avg_train/val loss and accuracy per epoch (same initial weights from the same seed, same loss and data)."""
    for sub, f in (("train", "train_data_4.h5"), ("val", "val_data_1.h5")):
        (tmp_path / "in" / sub).mkdir(parents=True)
        (tmp_path / "in" / sub / f).symlink_to(reference_dir / "predmoter" / f)
    arch = ["--model-type", "bi-hybrid", "--cnn-layers", "1", "--filter-size", "8", "--hidden-size", "8"]
    (tmp_path / "peer").mkdir()
    res = subprocess.run(
        [
            peer,
            "-m",
            "train",
            "-i",
            str(tmp_path / "in"),
            "-o",
            str(tmp_path / "peer"),
            "--seed",
            "7",
            "--device",
            "cpu",
            "-e",
            "2",
            "-b",
            "120",
            *arch,
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    lines = (tmp_path / "peer" / "metrics.log").read_text().split()
    cols, vals = lines[:5], lines[5:]
    theirs = [dict(zip(cols, map(float, vals[i : i + 5]))) for i in range(0, len(vals), 5)]
    _ok(
        _cli(
            "train",
            "--input-dir",
            tmp_path / "in",
            "--out",
            tmp_path / "ours",
            *arch,
            "--seed",
            "7",
            "--epochs",
            "2",
            "--batch-size",
            "120",
        )
    )
    ours = _tsv_rows(tmp_path / "ours" / "metrics.tsv")
    assert len(theirs) == len(ours) == 2
    for t, o in zip(theirs, ours):
        for k in ("avg_train_loss", "avg_val_loss", "avg_train_accuracy", "avg_val_accuracy"):
            assert math.isclose(o[k], t[k], rel_tol=1e-3, abs_tol=1e-5), (k, o[k], t[k])


def _tsv_rows(path):
    lines = Path(path).read_text().splitlines()
    cols = lines[0].split("\t")
    return [dict(zip(cols, map(float, ln.split("\t")))) for ln in lines[1:]]


# --------------------------------------------------------------------------------------------------
# resume, DDP, data modes, precision
# --------------------------------------------------------------------------------------------------
def test_resume_is_exact(trained, data, tmp_path):
    """1 epoch, then --resume to 3: the same weights, optimizer state and per-epoch losses as the 3-epoch run."""
    part = tmp_path / "part"
    _ok(
        _cli(
            "train",
            "--input-dir",
            data,
            "--out",
            part,
            *TINY,
            "--epochs",
            "1",
            "--seed",
            "3",
            "--batch-size",
            "4",
            "--num-workers",
            "1",
        )
    )
    _ok(
        _cli(
            "train",
            "--input-dir",
            data,
            "--out",
            part,
            "--resume",
            part / "last.ckpt",
            "--epochs",
            "3",
            "--seed",
            "3",
            "--batch-size",
            "4",
            "--num-workers",
            "1",
        )
    )
    a, b = _sd(trained / "last.ckpt"), _sd(part / "last.ckpt")
    assert a["epoch"] == b["epoch"] == 2 and a["global_step"] == b["global_step"]
    for k in a["state_dict"]:
        assert torch.equal(a["state_dict"][k], b["state_dict"][k]), k
    sa, sb = a["optimizer_states"][0]["state"], b["optimizer_states"][0]["state"]
    for i in sa:
        assert torch.equal(sa[i]["exp_avg"], sb[i]["exp_avg"]) and torch.equal(sa[i]["exp_avg_sq"], sb[i]["exp_avg_sq"])
    ra, rb = _tsv_rows(trained / "metrics.tsv"), _tsv_rows(part / "metrics.tsv")
    assert [r["avg_train_loss"] for r in ra] == [r["avg_train_loss"] for r in rb]
    assert [r["avg_val_accuracy"] for r in ra] == [r["avg_val_accuracy"] for r in rb]


def test_ddp_two_cpu_processes_equal_one_process(data, tmp_path):
    """--devices 2 (DDP, gloo, 2 processes x batch 3) equals 1 process x batch 6: each global batch holds the same
    chunks, DDP averages the gradients and BatchNorm statistics are synchronised over the processes."""
    arch = ["--model-type", "bi-hybrid", "--cnn-layers", "2", "--filter-size", "4", "--hidden-size", "4"]
    _ok(
        _cli(
            "train",
            "--input-dir",
            data,
            "--out",
            tmp_path / "ddp",
            *arch,
            "--epochs",
            "2",
            "--seed",
            "5",
            "--batch-size",
            "3",
            "--devices",
            "2",
            "--num-workers",
            "0",
            "--metrics",
            tmp_path / "ddp.json",
        )
    )
    _ok(
        _cli(
            "train",
            "--input-dir",
            data,
            "--out",
            tmp_path / "one",
            *arch,
            "--epochs",
            "2",
            "--seed",
            "5",
            "--batch-size",
            "6",
            "--num-workers",
            "0",
        )
    )
    a, b = _sd(tmp_path / "ddp" / "last.ckpt")["state_dict"], _sd(tmp_path / "one" / "last.ckpt")["state_dict"]
    assert max((a[k] - b[k]).abs().max().item() for k in a) < 1e-6
    m = json.loads((tmp_path / "ddp.json").read_text())
    assert m["devices"] == 2 and m["subsequences"] == 2 * 24  # 24 training chunks, 2 epochs, over both ranks
    ra, rb = _tsv_rows(tmp_path / "ddp" / "metrics.tsv"), _tsv_rows(tmp_path / "one" / "metrics.tsv")
    for x, y in zip(ra, rb):
        assert math.isclose(x["avg_train_loss"], y["avg_train_loss"], rel_tol=1e-6)
        assert math.isclose(x["avg_val_loss"], y["avg_val_loss"], rel_tol=1e-6)


def test_ram_mode_equals_stream_mode(data, tmp_path):
    for mode in ("stream", "ram"):
        _ok(
            _cli(
                "train",
                "--input-dir",
                data,
                "--out",
                tmp_path / mode,
                *TINY,
                "--epochs",
                "1",
                "--seed",
                "2",
                "--batch-size",
                "5",
                "--data-mode",
                mode,
            )
        )
    a, b = _sd(tmp_path / "stream" / "last.ckpt")["state_dict"], _sd(tmp_path / "ram" / "last.ckpt")["state_dict"]
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_bf16_mixed_opt_in(data, tmp_path):
    from chromaflow.train.core import cpu_has_native_bf16

    res = _ok(
        _cli(
            "train",
            "--input-dir",
            data,
            "--out",
            tmp_path / "bf",
            *TINY,
            "--epochs",
            "1",
            "--precision",
            "bf16-mixed",
            "--batch-size",
            "6",
        )
    )
    # on a CPU without native bf16 the user is told it is slow (benchmarks/train: 5x slower than 32 there)
    assert ("bf16-mixed on a CPU without native bf16" in res.stderr) == (cpu_has_native_bf16() is False)
    sd = _sd(tmp_path / "bf" / "last.ckpt")["state_dict"]
    assert all(v.dtype in (torch.float32, torch.int64) for v in sd.values())
    assert math.isfinite(_tsv_rows(tmp_path / "bf" / "metrics.tsv")[0]["avg_train_loss"])


def test_native_bf16_from_cpu_flags(tmp_path):
    from chromaflow.train.core import cpu_has_native_bf16

    f = tmp_path / "cpuinfo"
    f.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512bw\n")
    assert cpu_has_native_bf16(str(f)) is False
    f.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16\n")
    assert cpu_has_native_bf16(str(f)) is True
    f.write_text("flags\t\t: sse2 amx_bf16 amx_tile\n")
    assert cpu_has_native_bf16(str(f)) is True
    assert cpu_has_native_bf16(str(tmp_path / "none")) is None


def test_datasets_filters_and_modes(tmp_path):
    """Chunk filter (an all-N record), blacklist, a dataset a file lacks (-3 filler), identical items in both modes."""
    from chromaflow.train.data import InMemoryDataset, StreamingDataset, scan_file

    n = make_file(
        str(tmp_path / "a.h5"),
        records={"c1": 2500, "gap": 1500, "c2": 800},
        length=1000,
        datasets={"atacseq": 3},
        seed=1,
        n_chunk_record="gap",
        blacklist=[1] * 6 + [1] * 4 + [0, 0],
    )
    assert n == 12
    info = scan_file(str(tmp_path / "a.h5"), ("atacseq", "h3k4me3"), blacklist=False)
    assert info.keep.tolist() == [0, 1, 2, 3, 4, 5, 10, 11] and info.dropped_n == 4
    assert info.datasets == ("atacseq",)
    info_bl = scan_file(str(tmp_path / "a.h5"), ("atacseq", "h3k4me3"), blacklist=True)
    assert info_bl.keep.tolist() == [0, 1, 2, 3, 4, 5] and info_bl.dropped_blacklist == 2
    s = StreamingDataset([info], ("atacseq", "h3k4me3"))
    r = InMemoryDataset([info], ("atacseq", "h3k4me3"))
    with h5py.File(tmp_path / "a.h5", "r") as f:
        cov = f["evaluation/atacseq_coverage"][()]
        X = f["data/X"][()]
    fractional = False
    for i, row in enumerate(info.keep.tolist()):
        xs, ys = s[i]
        xr, yr = r[i]
        np.testing.assert_array_equal(xs.view(np.uint16), X[row].view(np.uint16))
        np.testing.assert_array_equal(xr.view(np.uint16), xs.view(np.uint16))
        np.testing.assert_array_equal(yr, ys)
        np.testing.assert_array_equal(ys[:, 0], np.around(cov[row].mean(axis=1), 2).astype(np.float32))
        assert (ys[:, 1] == -3).all()
        fractional |= bool(np.any(ys[:, 0] != np.round(ys[:, 0])))
    assert fractional  # means of 3 replicates, rounded to 2 decimals, are exercised


def test_loss_rows_match_nan_definition():
    """row_stats (masks) equals Predmoter's NaN-masked definition; filler rows are unused only when D > 1."""
    from chromaflow.train.losses import row_stats

    g = torch.Generator().manual_seed(0)
    x = torch.nn.functional.one_hot(torch.randint(0, 4, (5, 300), generator=g), 4).float()
    x[1, 250:] = 0
    x[3, 10:] = 0
    p = torch.randn(5, 300, 2, generator=g) * 0.3
    y = torch.poisson(torch.full((5, 300, 2), 2.0), generator=g)
    y[2, :, 1] = -3
    loss, r, used = row_stats(p, y, x)
    pn, yn = p.double().numpy().copy(), y.double().numpy().copy()
    pad = (x == 0).all(dim=2).numpy()
    pn[pad], yn[pad] = np.nan, np.nan
    ref = np.nanmean(np.exp(pn) - yn * pn, axis=1)
    np.testing.assert_allclose(loss.double().numpy(), ref, rtol=1e-5)
    e = np.exp(pn)
    dx, dy = e - np.nanmean(e, 1, keepdims=True), yn - np.nanmean(yn, 1, keepdims=True)
    rr = np.nansum(dx * dy, 1) / (np.sqrt(np.nansum(dx**2, 1)) * np.sqrt(np.nansum(dy**2, 1)) + 1e-8)
    np.testing.assert_allclose(r.double().numpy()[used.numpy()], rr[used.numpy()], rtol=1e-4, atol=1e-6)
    assert used.tolist() == [[True, True], [True, True], [True, False], [True, True], [True, True]]
    _, _, used1 = row_stats(p[:, :, 1:], y[:, :, 1:], x)
    assert used1.all()


# --------------------------------------------------------------------------------------------------
# fine-tuning
# --------------------------------------------------------------------------------------------------
@pytest.mark.reference
def test_finetune_head_and_freeze(data, tmp_path):
    """--init mini_model.ckpt --datasets h3k4me3 newmark: the h3k4me3 output row starts from the checkpoint's, the new
    one is fresh; with --freeze-encoder the down path and LSTM (and their BatchNorm statistics) stay bitwise equal
    while the up path and head train."""
    # Lightning imported and seeded in this process: the environment is put back before the train command below,
    # so that it is forked from the running fork server (_environment_restored)
    with _environment_restored():
        import lightning as L

        from chromaflow.model.checkpoint import load_checkpoint
        from chromaflow.train.finetune import init_from
        from chromaflow.train.module import PredmoterModule

        base = load_checkpoint(MINI)
        hp = base.config.hparams()
        hp.update(datasets=["h3k4me3", "newmark"], output_size=2, seq_len=1000)
        L.seed_everything(0, verbose=False)
        m = PredmoterModule(**hp)
        fresh = m.state_dict()["out.weight"][1].clone()
        init_from(m, base, head="keep")
        sd = m.state_dict()
        assert torch.equal(sd["out.weight"][0], base.state_dict["out.weight"][1])  # h3k4me3 was row 1 of mini
        assert torch.equal(sd["out.weight"][1], fresh)
        assert torch.equal(sd["lstm_layer_list.0.weight_hh_l0"], base.state_dict["lstm_layer_list.0.weight_hh_l0"])
        L.seed_everything(0, verbose=False)
        m2 = PredmoterModule(**hp)
        init_from(m2, base, head="reset")
        assert torch.equal(m2.state_dict()["out.weight"][1], fresh)
        assert not torch.equal(m2.state_dict()["out.weight"][0], base.state_dict["out.weight"][1])
        assert torch.equal(m2.state_dict()["up_layer_list.0.weight"], base.state_dict["up_layer_list.0.weight"])

    d2 = tmp_path / "in"
    make_input_dir(d2, datasets={"h3k4me3": 1, "newmark": 2})
    _ok(
        _cli(
            "train",
            "--input-dir",
            d2,
            "--out",
            tmp_path / "ft",
            "--init",
            MINI,
            "--datasets",
            "h3k4me3",
            "newmark",
            "--freeze-encoder",
            "--epochs",
            "2",
            "--batch-size",
            "6",
        )
    )
    out = _sd(tmp_path / "ft" / "last.ckpt")
    assert out["hyper_parameters"]["datasets"] == ["h3k4me3", "newmark"]
    for k, v in base.state_dict.items():
        if k.startswith(("down_layer_list", "lstm_layer_list")) and not k.endswith("num_batches_tracked"):
            assert torch.equal(out["state_dict"][k], v), k
        if k.startswith("up_layer_list") and k.endswith("weight"):
            assert not torch.equal(out["state_dict"][k], v), k


# --------------------------------------------------------------------------------------------------
# bad input: one line, non-zero, nothing trained
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bad(data, tmp_path_factory):
    """Input folders, each wrong in one way."""
    d = tmp_path_factory.mktemp("train_bad")
    (d / "noval" / "train").mkdir(parents=True)
    os.symlink(data / "train" / "t0.h5", d / "noval" / "train" / "t0.h5")
    (d / "emptytrain" / "train").mkdir(parents=True)
    (d / "emptytrain" / "val").mkdir()
    make_input_dir(d / "mixed")
    make_file(str(d / "mixed" / "val" / "v1.h5"), records={"c": 1200}, length=600, datasets={"atacseq": 1}, seed=9)
    make_input_dir(d / "other", datasets={"dnase": 1})
    (d / "corrupt" / "train").mkdir(parents=True)
    (d / "corrupt" / "val").mkdir()
    (d / "corrupt" / "train" / "x.h5").write_bytes(b"not hdf5")
    os.symlink(data / "val" / "v0.h5", d / "corrupt" / "val" / "v0.h5")
    (d / "existing").mkdir()
    (d / "existing" / "last.ckpt").write_bytes(b"")
    return d


# case -> (arguments: "{data}" is the good input folder, "{bad}" the folder of bad ones; the error's words)
BAD_TRAIN = {
    "no val folder": (["--input-dir", "{bad}/noval"], "val folder does not exist"),
    "no train files": (["--input-dir", "{bad}/emptytrain"], "no *.h5 files"),
    "mixed chunk lengths": (["--input-dir", "{bad}/mixed"], "different chunk lengths"),
    "other datasets": (["--input-dir", "{bad}/other"], "none of the model's datasets"),
    "corrupt h5": (["--input-dir", "{bad}/corrupt"], "x.h5: not a readable HDF5 file"),
    "previous run in --out": (["--input-dir", "{data}", "--out", "{bad}/existing"], "holds a previous run"),
    "architecture with --resume": (
        ["--input-dir", "{data}", "--resume", str(MINI), "--model-type", "cnn"],
        "architecture comes from",
    ),
    "16-mixed on CPU": (["--input-dir", "{data}", "--precision", "16-mixed"], "needs a CUDA device"),
    "missing --init": (["--input-dir", "{data}", "--init", "{bad}/nope.ckpt"], "checkpoint does not exist"),
    "cuda without one": (["--input-dir", "{data}", "--device", "cuda"], "no CUDA device"),
}


@pytest.mark.parametrize("case", sorted(BAD_TRAIN))
def test_bad_inputs(case, data, bad, tmp_path):
    """One line, non-zero, nothing trained. In this process (run_in_process): a child per case would import torch
    and Lightning again each time (about 5 s)."""
    args, needle = BAD_TRAIN[case]
    args = [a.format(data=data, bad=bad) for a in args]
    if "--out" not in args:
        args += ["--out", str(tmp_path / "o")]
    res = run_in_process("train", *args, "--epochs", "1", check=False)
    assert_one_line_error(res, "train", needle)
    assert not (tmp_path / "o" / "last.ckpt").exists()


def test_evaluate_corrupt_h5(bad, tmp_path):
    res = run_in_process(
        "evaluate",
        "--model",
        MINI,
        "--h5",
        bad / "corrupt" / "train" / "x.h5",
        "--out",
        tmp_path / "e.tsv",
        check=False,
    )
    assert_one_line_error(res, "evaluate", "x.h5")
    assert not (tmp_path / "e.tsv").exists()


def test_architecture_options_with_resume_must_agree_with_the_checkpoint():
    """A pipeline retry passes the run's options again with --resume: options equal to the checkpoint's
    architecture are accepted, another value is refused naming both."""
    import argparse

    from chromaflow.utils.errors import ChromaflowError
    from chromaflow.model.checkpoint import load_checkpoint
    from chromaflow.model.hparams import ARCHITECTURE as ARCH_OPTIONS
    from chromaflow.train.core import _check_architecture

    cfg = load_checkpoint(MINI).config
    same = argparse.Namespace(init=None, resume=str(MINI), **{k: None for k in ARCH_OPTIONS})
    same.cnn_layers, same.model_type, same.bnorm = cfg.cnn_layers, cfg.model_type, cfg.bnorm
    _check_architecture(same, cfg)
    other = argparse.Namespace(**{**vars(same), "hidden_size": cfg.hidden_size + 1})
    with pytest.raises(
        ChromaflowError,
        match=rf"--hidden-size {cfg.hidden_size + 1}: .*--resume checkpoint, which "
        rf"has {cfg.hidden_size}",
    ):
        _check_architecture(other, cfg)
