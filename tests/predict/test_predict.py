"""Predict stage: exactness against Predmoter's reference files, checkpoint key rules, an independent
functional forward pass for seeded checkpoints, make-test-model determinism, sharding + merge."""

from __future__ import annotations

import contextlib
import math
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from chromaflow.model.checkpoint import build_model, load_checkpoint, make_test_state_dict, write_test_checkpoint
from chromaflow.model.network import ModelConfig, PredmoterNet
from helpers.cli import run_in_process as run_cli
from helpers.predict_files import assert_same_file, write_genome_h5
from helpers.predict_helpers import ScaledModel


def predmoter(reference_dir: Path, name: str) -> Path:
    return reference_dir / "predmoter" / name


# --------------------------------------------------------------------------------------------------
# acceptance: Predmoter's reference predictions, exactly
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("stem,batch", [("pred_data_1", "7"), ("pred_data_2", "120")])
def test_reference_predictions_exact(reference_dir, tmp_path, stem, batch):
    model = str(predmoter(reference_dir, "mini_model.ckpt"))
    out = tmp_path / f"{stem}_predictions.h5"
    run_cli(
        "predict",
        "--h5",
        str(predmoter(reference_dir, f"{stem}.h5")),
        "--model",
        model,
        "--out",
        str(out),
        "--batch-size",
        batch,
        "--device",
        "cpu",
        "--metrics",
        str(tmp_path / "m.json"),
    )
    ref = predmoter(reference_dir, f"{stem}_predictions.h5")
    assert_same_file(out, ref)
    with h5py.File(out) as f:
        assert f["prediction/model_name"].fillvalue == model.encode()
        assert f["data/species"].fillvalue == b"Species_artificialis_9"
    import json

    m = json.loads((tmp_path / "m.json").read_text())
    assert m["stage"] == "predict" and m["device"] == "cpu" and m["precision"] == "fp32"
    with h5py.File(predmoter(reference_dir, f"{stem}.h5")) as f:
        X = f["data/X"][()]
    assert m["subsequences"] == X.shape[0]
    assert m["bp"] == int((X.max(axis=2) != 0).sum())
    assert 0.0 <= m["data_wait_fraction"] <= 1.0


def test_near_ties_reproduced(reference_dir, tmp_path):
    """The 10 near-.5 positions come out as Predmoter's integers (in-process, batch 16)."""
    torch.set_num_threads(1)  # OpenMP spin-waiting makes 2 threads slow on a shared machine
    ckpt = load_checkpoint(predmoter(reference_dir, "mini_model.ckpt"))
    model = build_model(ckpt)
    rows = np.loadtxt(predmoter(reference_dir, "extra/pred_data_1_near_ties.tsv"), skiprows=1)
    wanted = sorted({int(r) for r in rows[:, 0]})
    with h5py.File(predmoter(reference_dir, "pred_data_1.h5")) as f:
        X = torch.from_numpy(f["data/X"][wanted].astype(np.float32))
    with torch.inference_mode():
        y = torch.exp(model(X))
    for row, pos, ds, raw, want in rows:
        got = float(y[wanted.index(int(row)), int(pos), int(ds)])
        assert abs(got - raw) < 2e-6
        assert int(torch.round(torch.tensor(got))) == int(want)


# --------------------------------------------------------------------------------------------------
# key naming rules (FORMATS.md §2.7), written independently of the module
# --------------------------------------------------------------------------------------------------
def rule_keys(hp: dict) -> dict:
    n, f, k, up, H, D = (
        hp["cnn_layers"],
        hp["filter_size"],
        hp["kernel_size"],
        hp["up"],
        hp["hidden_size"],
        len(hp["datasets"]),
    )
    keys = {}
    chans = [4] + [f * up**i for i in range(n)]
    idx = 0
    for i in range(n):
        keys[f"down_layer_list.{idx}.weight"] = (chans[i + 1], chans[i], k)
        keys[f"down_layer_list.{idx}.bias"] = (chans[i + 1],)
        idx += 1
        if hp["bnorm"]:
            for leaf in ("weight", "bias", "running_mean", "running_var"):
                keys[f"down_layer_list.{idx}.{leaf}"] = (chans[i + 1],)
            keys[f"down_layer_list.{idx}.num_batches_tracked"] = ()
            idx += 1
    c_last = chans[-1]
    width = {"cnn": c_last, "hybrid": H, "bi-hybrid": 2 * H}[hp["model_type"]]
    if hp["model_type"] != "cnn":
        for m in range(hp["lstm_layers"]):
            j = m * 2 if hp["dropout"] > 0 else m
            inp = c_last if m == 0 else width
            for suf in [""] + (["_reverse"] if hp["model_type"] == "bi-hybrid" else []):
                keys[f"lstm_layer_list.{j}.weight_ih_l0{suf}"] = (4 * H, inp)
                keys[f"lstm_layer_list.{j}.weight_hh_l0{suf}"] = (4 * H, H)
                keys[f"lstm_layer_list.{j}.bias_ih_l0{suf}"] = (4 * H,)
                keys[f"lstm_layer_list.{j}.bias_hh_l0{suf}"] = (4 * H,)
    idx = 0
    inp = width
    for i in range(n, 0, -1):
        outc = chans[i - 1]
        keys[f"up_layer_list.{idx}.weight"] = (inp, outc, k)
        keys[f"up_layer_list.{idx}.bias"] = (outc,)
        idx += 1
        if hp["bnorm"]:
            for leaf in ("weight", "bias", "running_mean", "running_var"):
                keys[f"up_layer_list.{idx}.{leaf}"] = (outc,)
            keys[f"up_layer_list.{idx}.num_batches_tracked"] = ()
            idx += 1
        inp = outc
    keys["out.weight"] = (D, 4)
    keys["out.bias"] = (D,)
    return keys


def hparams(
    model_type="bi-hybrid",
    cnn_layers=1,
    filter_size=8,
    kernel_size=9,
    step=2,
    up=2,
    dilation=1,
    lstm_layers=1,
    hidden_size=8,
    bnorm=True,
    dropout=0.0,
    datasets=("atacseq", "h3k4me3"),
) -> dict:
    return dict(
        model_type=model_type,
        cnn_layers=cnn_layers,
        filter_size=filter_size,
        kernel_size=kernel_size,
        step=step,
        up=up,
        dilation=dilation,
        lstm_layers=lstm_layers,
        hidden_size=hidden_size,
        bnorm=bnorm,
        dropout=dropout,
        learning_rate=0.001,
        seq_len=21384,
        input_size=4,
        output_size=len(datasets),
        datasets=list(datasets),
    )


GRID = [
    hparams(mt, n, f, k, s, u, d, nl, h, bn, dr, ds)
    for mt in ("cnn", "hybrid", "bi-hybrid")
    for n, f, k, s, u, d in (
        (1, 8, 9, 2, 2, 1),
        (2, 4, 5, 2, 3, 2),
        (3, 6, 9, 2, 2, 1),
        (2, 4, 4, 2, 2, 2),
        (1, 4, 7, 3, 2, 1),
    )
    for nl, h in ((1, 8), (3, 5))
    for bn in (True, False)
    for dr in (0.0, 0.3)
    for ds in (("atacseq",), ("atacseq", "h3k4me3", "moa"))
]


@pytest.mark.parametrize("chunk", range(4))
def test_key_rules(chunk):
    for hp in GRID[chunk::4]:
        cfg = ModelConfig.from_hparams(hp)
        got = {k: tuple(v.shape) for k, v in PredmoterNet(cfg).state_dict().items()}
        assert got == rule_keys(hp), hp
        assert list(got) == list(rule_keys(hp))  # order: down, lstm, up, out


@pytest.mark.parametrize(
    "hp,count",
    [
        (hparams("bi-hybrid", 3, 64, 9, 2, 2, 1, 2, 128, True, 0.3), 1_534_358),
        (hparams("bi-hybrid", 1, 64, 9, 2, 2, 1, 1, 128, True, 0.0), 210_390),
        (hparams("hybrid", 3, 64, 9, 2, 2, 1, 2, 128, False, 0.0, ("atacseq",)), 924_809),
        (hparams("cnn", 3, 64, 9, 2, 2, 1, 2, 128, False, 0.0, ("atacseq",)), 742_537),
    ],
)
def test_parameter_counts(hp, count):
    model = PredmoterNet(ModelConfig.from_hparams(hp))
    assert sum(p.numel() for p in model.parameters()) == count
    assert (
        sum(
            math.prod(s)
            for k, s in rule_keys(hp).items()
            if not k.endswith(("running_mean", "running_var", "num_batches_tracked"))
        )
        == count
    )


def test_mini_model_keys(reference_dir):
    ckpt = load_checkpoint(predmoter(reference_dir, "mini_model.ckpt"))
    assert {k: tuple(v.shape) for k, v in ckpt.state_dict.items()} == rule_keys(ckpt.config.hparams())
    assert sum(v.numel() for v in ckpt.state_dict.values()) == 6192


# --------------------------------------------------------------------------------------------------
# independent forward pass (torch.nn.functional + a hand-written LSTM), never calling PredmoterNet
# --------------------------------------------------------------------------------------------------
def lstm_by_hand(x: torch.Tensor, w_ih, w_hh, b_ih, b_hh) -> torch.Tensor:
    B, T, _ = x.shape
    H = w_hh.shape[1]
    h = x.new_zeros(B, H)
    c = x.new_zeros(B, H)
    outs = []
    for t in range(T):
        g = x[:, t] @ w_ih.T + b_ih + h @ w_hh.T + b_hh
        i, f, gg, o = g.split(H, dim=1)  # PyTorch gate order: input, forget, cell, output
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(gg)
        h = torch.sigmoid(o) * torch.tanh(c)
        outs.append(h)
    return torch.stack(outs, dim=1)


def reference_forward(sd: dict, hp: dict, x: torch.Tensor) -> torch.Tensor:
    k, s, d, n = hp["kernel_size"], hp["step"], hp["dilation"], hp["cnn_layers"]
    pad = math.ceil((d * (k - 1) + 1 - s) / 2)
    if d % 2 == 0 and k % 2 == 0:
        op = 1 if (s + k) % 2 == 0 else 0
    else:
        op = 0 if (s + k) % 2 == 0 else 1
    tpad = int((d * (k - 1) + op + 1 - s) / 2)
    bn = hp["bnorm"]
    h = x.transpose(1, 2)
    for i in range(n):
        ci = 2 * i if bn else i
        h = F.relu(
            F.conv1d(
                h,
                sd[f"down_layer_list.{ci}.weight"],
                sd[f"down_layer_list.{ci}.bias"],
                stride=s,
                padding=pad,
                dilation=d,
            )
        )
        if bn:
            p = f"down_layer_list.{ci + 1}."
            h = F.batch_norm(
                h,
                sd[p + "running_mean"],
                sd[p + "running_var"],
                sd[p + "weight"],
                sd[p + "bias"],
                training=False,
                eps=1e-5,
            )
    if hp["model_type"] != "cnn":
        h = h.transpose(1, 2)
        for m in range(hp["lstm_layers"]):
            j = 2 * m if hp["dropout"] > 0 else m
            p = f"lstm_layer_list.{j}."
            fwd = lstm_by_hand(
                h, sd[p + "weight_ih_l0"], sd[p + "weight_hh_l0"], sd[p + "bias_ih_l0"], sd[p + "bias_hh_l0"]
            )
            if hp["model_type"] == "bi-hybrid":
                bwd = lstm_by_hand(
                    h.flip(1),
                    sd[p + "weight_ih_l0_reverse"],
                    sd[p + "weight_hh_l0_reverse"],
                    sd[p + "bias_ih_l0_reverse"],
                    sd[p + "bias_hh_l0_reverse"],
                ).flip(1)
                fwd = torch.cat([fwd, bwd], dim=2)
            h = fwd
        h = h.transpose(1, 2)
    for i in range(n):
        ci = 2 * i if bn else i
        h = F.relu(
            F.conv_transpose1d(
                h,
                sd[f"up_layer_list.{ci}.weight"],
                sd[f"up_layer_list.{ci}.bias"],
                stride=s,
                padding=tpad,
                output_padding=op,
                dilation=d,
            )
        )
        if bn:
            p = f"up_layer_list.{ci + 1}."
            h = F.batch_norm(
                h,
                sd[p + "running_mean"],
                sd[p + "running_var"],
                sd[p + "weight"],
                sd[p + "bias"],
                training=False,
                eps=1e-5,
            )
    return F.linear(h.transpose(1, 2), sd["out.weight"], sd["out.bias"])


SEEDED = [
    dict(model_type="cnn", cnn_layers=1, bnorm=True, dropout=0.0, lstm_layers=1, datasets=("atacseq",)),
    dict(model_type="cnn", cnn_layers=3, bnorm=False, dropout=0.0, lstm_layers=1, datasets=("a", "b", "c")),
    dict(model_type="hybrid", cnn_layers=2, bnorm=True, dropout=0.3, lstm_layers=2, datasets=("atacseq", "h3k4me3")),
    dict(model_type="hybrid", cnn_layers=1, bnorm=False, dropout=0.0, lstm_layers=1, datasets=("atacseq",)),
    dict(
        model_type="bi-hybrid",
        cnn_layers=3,
        bnorm=False,
        dropout=0.5,
        lstm_layers=2,
        datasets=("atacseq", "h3k4me3", "moa"),
    ),
    dict(model_type="bi-hybrid", cnn_layers=1, bnorm=True, dropout=0.0, lstm_layers=2, datasets=("atacseq",)),
    dict(
        model_type="bi-hybrid",
        cnn_layers=2,
        bnorm=True,
        dropout=0.2,
        lstm_layers=1,
        datasets=("atacseq", "h3k4me3"),
        kernel_size=4,
        dilation=2,
    ),
]


@pytest.mark.parametrize("idx", range(len(SEEDED)))
def test_seeded_checkpoint_matches_functional_forward(tmp_path, idx):
    opts = dict(SEEDED[idx])
    hp = hparams(filter_size=4, hidden_size=6, **opts)
    cfg = ModelConfig.from_hparams(hp)
    ckpt_path = tmp_path / "m.ckpt"
    write_test_checkpoint(ckpt_path, cfg, seed=idx)
    length = 48
    X = write_genome_h5(tmp_path / "g.h5", 5, length, seed=idx)
    out = tmp_path / "p.h5"
    run_cli(
        "predict", "--h5", str(tmp_path / "g.h5"), "--model", str(ckpt_path), "--out", str(out), "--batch-size", "2"
    )

    sd = torch.load(ckpt_path, weights_only=True)["state_dict"]
    x = torch.from_numpy(X.astype(np.float32))
    raw = reference_forward(sd, hp, x)
    with torch.inference_mode():
        mine = load_and_forward(ckpt_path, x)
    assert torch.allclose(mine, raw, atol=1e-5, rtol=1e-5)
    y = torch.exp(raw).numpy()
    want = np.round(y).astype(np.int64)
    pad = X.max(axis=2) == 0
    want[pad] = -1
    with h5py.File(out) as f:
        got = f["prediction/predictions"][()]
        assert got.shape == (5, length, len(opts["datasets"]))
        assert [d.decode() for d in f["prediction/datasets"][()]] == list(opts["datasets"])
    near_tie = np.abs(y - np.floor(y) - 0.5) < 1e-4
    assert np.array_equal(got[~near_tie | pad[..., None]], want[~near_tie | pad[..., None]])
    assert (got[pad] == -1).all() and (got[~pad] >= 0).all()


def load_and_forward(path: Path, x: torch.Tensor) -> torch.Tensor:
    return build_model(load_checkpoint(path))(x)


def test_make_test_model_deterministic(tmp_path):
    a, b, c = tmp_path / "a.ckpt", tmp_path / "b.ckpt", tmp_path / "c.ckpt"
    run_cli(
        "make-test-model",
        "--out",
        str(a),
        "--seed",
        "3",
        "--model-type",
        "hybrid",
        "--cnn-layers",
        "2",
        "--dropout",
        "0.3",
        "--lstm-layers",
        "2",
        "--datasets",
        "atacseq",
    )
    cfg = ModelConfig.from_hparams(hparams("hybrid", 2, 8, 9, 2, 2, 1, 2, 8, True, 0.3, ("atacseq",)))
    write_test_checkpoint(b, cfg, seed=3)
    write_test_checkpoint(c, cfg, seed=4)
    la, lb, lc = (torch.load(p, weights_only=True) for p in (a, b, c))
    assert set(la) >= {
        "epoch",
        "global_step",
        "pytorch-lightning_version",
        "state_dict",
        "hparams_name",
        "hyper_parameters",
    }
    assert len(la["hyper_parameters"]) == 16 and la["hparams_name"] == "kwargs"
    assert la["hyper_parameters"] == lb["hyper_parameters"]
    assert list(la["state_dict"]) == list(rule_keys(la["hyper_parameters"]))
    assert all(torch.equal(la["state_dict"][k], lb["state_dict"][k]) for k in la["state_dict"])
    assert not all(torch.equal(la["state_dict"][k], lc["state_dict"][k]) for k in la["state_dict"])
    sd = make_test_state_dict(cfg, 3)
    assert (sd["down_layer_list.1.running_var"] > 0).all()


# --------------------------------------------------------------------------------------------------
# sharding + merge
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("row_block", [None, 3], ids=["rows-at-once", "rows-in-blocks-of-3"])
def test_shards_merge_equal_unsharded(reference_dir, tmp_path, monkeypatch, row_block):
    """Blocks of 3 rows (genome.h5rows.ROW_BLOCK: seqids/start_ends are read and written a block at a time, bounding
    HDF5's per-chunk records) give the same files: blocks across shard boundaries and a partial last block."""
    if row_block:
        from chromaflow.genome import h5rows

        monkeypatch.setattr(h5rows, "ROW_BLOCK", row_block)
    model = str(predmoter(reference_dir, "mini_model.ckpt"))
    h5 = str(predmoter(reference_dir, "pred_data_1.h5"))
    shards = []
    for i in (3, 1, 2):
        p = tmp_path / f"s{i}.h5"
        run_cli("predict", "--h5", h5, "--model", model, "--out", str(p), "--shard", f"{i}/3", "--batch-size", "4")
        shards.append(p)
    with h5py.File(shards[1]) as f:  # shard 1 of 3 over 16 rows: rows 0-5
        assert (int(f.attrs["chromaflow_row_start"]), int(f.attrs["chromaflow_row_end"])) == (0, 5)
        assert f["prediction/predictions"].shape[0] == 5
    merged = tmp_path / "merged.h5"
    # the merge holds one shard file open at a time (each open file keeps HDF5 caches: 61 shards at once took
    # ~400 MB in the 1.2 Gbp scale run)
    opened, most = set(), [0]
    init, close = h5py.File.__init__, h5py.File.close

    def counting_init(self, name, *a, **k):
        init(self, name, *a, **k)
        if Path(str(name)) in shards:
            opened.add(id(self))
            most[0] = max(most[0], len(opened))

    def counting_close(self):
        opened.discard(id(self))
        close(self)

    with monkeypatch.context() as m:
        m.setattr(h5py.File, "__init__", counting_init)
        m.setattr(h5py.File, "close", counting_close)
        run_cli("predict-merge", "--out", str(merged), *map(str, shards), "--metrics", str(tmp_path / "mm.json"))
    assert most[0] == 1 and not opened
    ref = predmoter(reference_dir, "pred_data_1_predictions.h5")
    assert_same_file(merged, ref)
    # and the bytes of our unsharded run: the merge writes in its order (what the container test compares)
    whole = tmp_path / "whole.h5"
    run_cli("predict", "--h5", h5, "--model", model, "--out", str(whole), "--batch-size", "4")
    assert merged.read_bytes() == whole.read_bytes()
    with h5py.File(merged) as f:
        assert f["prediction/model_name"].fillvalue == model.encode()
        assert dict(f.attrs) == {}

    # incomplete / duplicated / mixed sets are refused, nothing written
    bad = tmp_path / "bad.h5"
    for args in ([shards[0], shards[1]], [shards[0], shards[1], shards[1]]):
        proc = run_cli("predict-merge", "--out", str(bad), *map(str, args), check=False)
        assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert not bad.exists()
    other = tmp_path / "o2.h5"  # shard 2 claiming another input
    shutil.copy(shards[2], other)
    with h5py.File(other, "a") as f:
        f.attrs["chromaflow_input_fingerprint"] = "0" * 64
    proc = run_cli("predict-merge", "--out", str(bad), str(shards[1]), str(other), str(shards[0]), check=False)
    assert proc.returncode != 0 and "different input" in proc.stderr
    assert not bad.exists()


# --------------------------------------------------------------------------------------------------
# engine: OOM halving and bf16 fallback (simulated; no GPU here)
# --------------------------------------------------------------------------------------------------
def _engine_run(tmp_path, model, X, **kw):
    from chromaflow.predict import engine, h5io

    g = tmp_path / "g.h5"
    with h5py.File(g, "r") as f, h5py.File(tmp_path / "o.h5", "w") as out:
        dset = h5io.create_predictions(
            out,
            n_rows=X.shape[0],
            length=X.shape[1],
            datasets=["a"],
            species0=b"s",
            model_name="m",
            seqids=f["data/seqids"][()],
            start_ends=f["data/start_ends"][()],
        )
        kw.setdefault("streams", 1)
        stats = engine.run_prediction(
            model,
            f["data/X"],
            dset,
            row_start=0,
            row_end=X.shape[0],
            device=torch.device("cpu"),
            threads=1,
            num_workers=1,
            **kw,
        )
    with h5py.File(tmp_path / "o.h5") as out:
        return stats, out["prediction/predictions"][()]


class _Const(torch.nn.Module):
    """log-rate = 3 * first one-hot column (so exp → 1 or 20); raises CUDA OOM above ``limit`` rows."""

    def __init__(self, limit):
        super().__init__()
        self.limit = limit

    def forward(self, x):
        if x.shape[0] > self.limit:
            raise torch.cuda.OutOfMemoryError("simulated")
        return 3 * x[:, :, :1]


def test_oom_halves_batch_and_retries(tmp_path):
    X = write_genome_h5(tmp_path / "g.h5", 7, 16)
    stats, got = _engine_run(tmp_path, _Const(limit=2), X, batch_size=7, precision="fp32", streams=1)
    assert stats.final_batch == 1 or stats.final_batch == 2
    assert any("OOM" in n for n in stats.notes)
    want = np.round(np.exp(3 * X[:, :, :1].astype(np.float32))).astype(np.int64)
    want[X.max(axis=2) == 0] = -1
    assert np.array_equal(got, want)


def test_bf16_fallback_message(tmp_path, monkeypatch, capsys):
    from chromaflow.predict import engine

    monkeypatch.setattr(engine, "bf16_supported", lambda device: False)
    X = write_genome_h5(tmp_path / "g.h5", 3, 16)
    stats, got = _engine_run(tmp_path, _Const(limit=100), X, batch_size=2, precision="bf16", streams=2)
    assert stats.precision == "fp32"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bf16 not supported" in err[0]


# --------------------------------------------------------------------------------------------------
# exact except at documented near-ties (float64 forward pass), and the comparison can fail
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("stem", ["pred_data_1", "pred_data_2"])
def test_reference_predictions_tie_rule(reference_dir, tmp_path, stem):
    from chromaflow.predict.compare import compare_arrays, compare_files, near_ties

    model = predmoter(reference_dir, "mini_model.ckpt")
    ours = tmp_path / "ours.h5"
    run_cli("predict", "--h5", predmoter(reference_dir, f"{stem}.h5"), "--model", model, "--out", ours)
    ref = predmoter(reference_dir, f"{stem}_predictions.h5")
    with h5py.File(predmoter(reference_dir, f"{stem}.h5")) as f:
        X = f["data/X"][()]
    torch.set_num_threads(1)
    ties = near_ties(build_model(load_checkpoint(model)), X)
    cmp = compare_files(str(ours), str(ref), ties)
    assert cmp.ok, cmp.summary()
    assert 5 <= len(ties) <= 40  # 15 each for these files at TIE_EPS = 1e-5
    if stem == "pred_data_1":  # the shared list of near-.5 positions (float32, within 1e-5) is covered
        listed = np.loadtxt(predmoter(reference_dir, "extra/pred_data_1_near_ties.tsv"), skiprows=1)
        assert {(int(r), int(p), int(d)) for r, p, d, _, _ in listed} <= ties

    with h5py.File(ours) as f:
        got = f["prediction/predictions"][()]
    with h5py.File(ref) as f:
        want = f["prediction/predictions"][()]
    # corrupt one value in a copy, at a position that is no tie: named, and the comparison fails
    r, p, d = 3, 1000, 1
    assert (r, p, d) not in ties and got[r, p, d] >= 0
    bad = got.copy()
    bad[r, p, d] += 1
    c = compare_arrays(bad, want, ties)
    assert not c.ok and c.unexpected == [(r, p, d, int(got[r, p, d]) + 1, int(want[r, p, d]))]
    assert f"row {r} pos {p} dataset {d}" in c.summary()
    # ±1 at a near-tie is allowed and named; ±2 is not; padding must match exactly
    tr, tp, td = sorted(ties)[0]
    flip = got.copy()
    flip[tr, tp, td] += 1
    c = compare_arrays(flip, want, ties)
    assert c.ok and c.allowed == [(tr, tp, td, int(got[tr, tp, td]) + 1, int(want[tr, tp, td]))]
    flip[tr, tp, td] += 1
    assert not compare_arrays(flip, want, ties).ok
    pad = np.argwhere(want == -1)[0]
    padded = got.copy()
    padded[tuple(pad)] = 0
    assert not compare_arrays(padded, want, ties | {tuple(int(v) for v in pad)}).ok


# --------------------------------------------------------------------------------------------------
# --batch-size auto (fake OOM on CPU), transfer dtypes, precision deviation, NVML without a GPU
# --------------------------------------------------------------------------------------------------
def test_find_batch_size_power_then_bisect():
    from chromaflow.errors import ChromaflowError
    from chromaflow.predict.probe import find_batch_size

    for limit in (1, 2, 5, 16, 37, 100, 1000, 3000):
        size, trials = find_batch_size(lambda b: b <= limit, start=16, limit=4096)
        assert size <= limit and limit - size <= max(1, size // 32), (limit, size)
        assert all(ok == (b <= limit) for b, ok in trials)
        assert len(trials) <= 20
    assert find_batch_size(lambda b: True, start=16, limit=4096)[0] == 4096
    with pytest.raises(ChromaflowError, match="batch of 1"):
        find_batch_size(lambda b: False)


def test_batch_size_cache_reuses_a_probe_and_keys_on_what_changes_it(tmp_path):
    """--batch-size auto keeps a probed size per model architecture, device, precision, L, D and limit; a second
    resolve of the same key probes nothing, another key probes, a damaged cache file is only a cache miss."""
    from chromaflow.predict.executors import EngineStats
    from chromaflow.predict.probe import batch_cache_key, resolve_batch_size

    cache = str(tmp_path / "c" / "batch-sizes.json")
    kw = dict(device=torch.device("cpu"), L=16, D=1, rows=80, probe_cpu=True, cache=cache)
    first, again, other = EngineStats(), EngineStats(), EngineStats()
    assert resolve_batch_size("auto", model=_Const(limit=37), precision="fp32", stats=first, **kw) == 37
    assert first.batch_probe_source == "probe" and len(first.batch_probe) == 8
    assert resolve_batch_size("auto", model=_Const(limit=37), precision="fp32", stats=again, **kw) == 37
    assert again.batch_probe_source == "cache" and again.batch_probe == [] and "probed earlier" in again.notes[0]
    assert resolve_batch_size("auto", model=_Const(limit=21), precision="bf16", stats=other, **kw) == 21
    assert other.batch_probe_source == "probe"  # another precision is another key
    key = batch_cache_key(_Const(limit=37), torch.device("cpu"), L=16, D=1, precision="fp32", limit=80)
    assert key != batch_cache_key(_Const(limit=37), torch.device("cpu"), L=32, D=1, precision="fp32", limit=80)
    assert key != batch_cache_key(torch.nn.Linear(2, 3), torch.device("cpu"), L=16, D=1, precision="fp32", limit=80)
    with open(cache, "w") as fh:
        fh.write("{not json")
    damaged = EngineStats()
    assert resolve_batch_size("auto", model=_Const(limit=37), precision="fp32", stats=damaged, **kw) == 37
    assert damaged.batch_probe_source == "probe" and not list((tmp_path / "c").glob("*.part"))


def test_predict_metrics_give_the_phases_of_the_process(tmp_path, reference_dir):
    """phases_s: where a process's seconds go (start-up before the stage, imports, model load, batch size,
    set-up, loop and drain, finish), each >= 0 and together no more than the process lived."""
    import json
    import time

    ref = reference_dir / "predmoter"
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "chromaflow",
            "predict",
            "--h5",
            ref / "pred_data_1.h5",
            "--model",
            ref / "mini_model.ckpt",
            "--out",
            tmp_path / "p.h5",
            "--metrics",
            tmp_path / "m.json",
        ],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr
    m = json.loads((tmp_path / "m.json").read_text())
    ph = m["phases_s"]
    assert set(ph) == {"before_run", "checks_imports", "model_load", "batch_size", "setup", "loop_and_drain", "finish"}
    assert all(v >= 0 for v in ph.values()) and sum(ph.values()) <= wall
    assert ph["loop_and_drain"] >= m["loop_s"] and m["drain_s"] >= 0 and ph["before_run"] > 0


def test_batch_size_auto_with_fake_oom_on_cpu(tmp_path):
    from chromaflow.predict.executors import EngineStats
    from chromaflow.predict.probe import resolve_batch_size

    X = write_genome_h5(tmp_path / "g.h5", 80, 16)
    stats = EngineStats()
    size = resolve_batch_size(
        "auto",
        model=_Const(limit=37),
        device=torch.device("cpu"),
        L=16,
        D=1,
        precision="fp32",
        rows=80,
        stats=stats,
        probe_cpu=True,
    )
    assert size == 37
    assert stats.batch_probe == [
        [16, True],
        [32, True],
        [64, False],
        [48, False],
        [40, False],
        [36, True],
        [38, False],
        [37, True],
    ]
    run_stats, got = _engine_run(
        tmp_path, _Const(limit=37), X, batch_size=size, precision="fp32", streams=1, micro=size
    )
    assert run_stats.final_batch == 37 and run_stats.batch_size == 37 and not run_stats.notes
    want = np.round(np.exp(3 * X[:, :, :1].astype(np.float32))).astype(np.int64)
    want[X.max(axis=2) == 0] = -1
    assert np.array_equal(got, want)
    # on CPU without probing: 120, capped at the rows to predict, and said so in the metrics
    out = tmp_path / "p.h5"
    ckpt = tmp_path / "t.ckpt"
    run_cli("make-test-model", "--out", ckpt)
    run_cli("predict", "--h5", tmp_path / "g.h5", "--model", ckpt, "--out", out, "--metrics", tmp_path / "m.json")
    import json

    m = json.loads((tmp_path / "m.json").read_text())
    assert m["batch_size_requested"] == "auto" and m["batch_size"] == 80
    assert any("batch size auto on CPU" in n for n in m["notes"])
    assert m["gpu"] == {"available": False, "reason": "no CUDA device used (CPU run)"}


def test_smallest_transfer_dtype():
    from chromaflow.predict.executors import smallest_int_dtype

    assert smallest_int_dtype(-1, 5) == torch.int8
    assert smallest_int_dtype(-1, 127) == torch.int8
    assert smallest_int_dtype(-1, 128) == torch.int16
    assert smallest_int_dtype(-129, 0) == torch.int16
    assert smallest_int_dtype(-1, 40000) == torch.int32
    assert smallest_int_dtype(-1, 2**40) == torch.int64


def test_bf16_deviation_in_metrics_matches_independent_count(reference_dir, tmp_path):
    """The metrics' deviation figures are exactly what running the sampled rows both ways gives."""
    import json

    from chromaflow.predict.executors import bf16_supported

    if not bf16_supported(torch.device("cpu")):
        pytest.skip("this CPU has no bf16 support in oneDNN (the engine would fall back to fp32)")
    model_path = predmoter(reference_dir, "mini_model.ckpt")
    run_cli(
        "predict",
        "--h5",
        predmoter(reference_dir, "pred_data_1.h5"),
        "--model",
        model_path,
        "--out",
        tmp_path / "b.h5",
        "--precision",
        "bf16",
        "--batch-size",
        "2",
        "--precision-check-rows",
        "8",
        "--metrics",
        tmp_path / "m.json",
    )
    got = json.loads((tmp_path / "m.json").read_text())["precision_check"]
    rows = [0, 1, 2, 3, 4, 5, 8, 9]  # rows 0-1 of batches 0, 1, 2, 4 (batch size 2)
    torch.set_num_threads(1)
    model = build_model(load_checkpoint(model_path))
    with h5py.File(predmoter(reference_dir, "pred_data_1.h5")) as f:
        X = torch.from_numpy(f["data/X"][rows].astype(np.float32))
    values = differ = max_abs = 0
    with torch.inference_mode():
        for i in range(len(rows)):  # one row per model call, as the two streams run them
            x = X[i : i + 1]
            a = torch.exp(model(x))
            with torch.autocast("cpu", dtype=torch.bfloat16):
                b = torch.exp(model(x).float())
            keep = (x.amax(2) != 0)[0]
            d = (torch.round(a) - torch.round(b)).abs()[0][keep]
            values += d.numel()
            differ += int((d != 0).sum())
            max_abs = max(max_abs, int(d.max()))
    assert got["rows_sampled"] == 8 and got["values"] == values
    assert got["differ"] == differ and got["max_abs"] == max_abs
    assert got["fraction"] == pytest.approx(differ / values)
    assert 0 < differ < values  # bf16 is not exact on this model (0.2 % of values, FORMATS §3 ties and more)


def test_nvml_metrics_degrade_without_gpu():
    from chromaflow.predict.gpumetrics import NvmlSampler

    with NvmlSampler(None) as s:
        pass
    assert s.result() == {"available": False, "reason": "no CUDA device used (CPU run)"}
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: tests/predict/test_predict_cuda.py checks real NVML samples")
    with NvmlSampler([0]) as s:
        pass
    res = s.result()
    assert res["available"] is False and res["reason"].startswith("NVML unavailable")


def test_test_checkpoint_is_byte_reproducible(tmp_path):
    """Same options and seed -> the same bytes, whatever the output name (issue 13); records named archive/."""
    import zipfile

    a, b, c = tmp_path / "a.ckpt", tmp_path / "other_name.ckpt", tmp_path / "c.ckpt"
    run_cli("make-test-model", "--out", a, "--preset", "release-bihybrid", "--seed", "5")
    run_cli("make-test-model", "--out", b, "--preset", "release-bihybrid", "--seed", "5")
    run_cli("make-test-model", "--out", c, "--preset", "release-bihybrid", "--seed", "6")
    assert a.read_bytes() == b.read_bytes() and a.read_bytes() != c.read_bytes()
    assert all(n.startswith("archive/") for n in zipfile.ZipFile(a).namelist())
    ck = load_checkpoint(a)
    assert (
        sum(
            v.numel()
            for k, v in ck.state_dict.items()
            if not k.endswith(("running_mean", "running_var", "num_batches_tracked"))
        )
        == 1_534_358
    )
    assert ck.config.hparams()["dropout"] == 0.3 and ck.config.lstm_layers == 2 and ck.config.cnn_layers == 3


# --------------------------------------------------------------------------------------------------
# the CUDA executor's logic on the CPU: a stand-in for the CUDA runtime (streams and events as no-ops / clocks,
# pinned memory as plain memory). On a GPU, tests/predict/test_predict_cuda.py runs the real thing.
# --------------------------------------------------------------------------------------------------
class _FakeEvent:
    def __init__(self, enable_timing=False):
        self.t = None

    def record(self, stream=None):
        import time

        self.t = time.perf_counter()

    def synchronize(self):
        assert self.t is not None

    def elapsed_time(self, other):
        return (other.t - self.t) * 1000.0


class _FakeStream:
    def wait_stream(self, other):
        pass


@pytest.fixture
def fake_cuda(monkeypatch):
    from chromaflow.predict import executors

    rt = executors.cuda
    monkeypatch.setattr(rt, "Stream", lambda device=None: _FakeStream())
    monkeypatch.setattr(rt, "Event", lambda enable_timing=False: _FakeEvent(enable_timing))
    monkeypatch.setattr(rt, "stream", lambda s: contextlib.nullcontext())
    for name in ("synchronize", "reset_peak_memory_stats"):
        monkeypatch.setattr(rt, name, lambda device=None: None)
    monkeypatch.setattr(rt, "empty_cache", lambda: None)
    monkeypatch.setattr(rt, "max_memory_allocated", lambda device=None: 0)
    monkeypatch.setattr(rt, "pinned_empty", lambda shape, dtype: torch.empty(shape, dtype=dtype))
    monkeypatch.setattr(rt, "pin", lambda t: t)
    monkeypatch.setattr(rt, "record_stream", lambda t, s: None)
    return rt


def test_cuda_runtime_calls_reach_torch_cuda(monkeypatch):
    """Each of the runtime's plain calls forwards to torch.cuda's function of the same name (a GPU run once
    found reset_peak_memory_stats calling itself; the executor tests above replace these calls)."""
    from chromaflow.predict.executors import CudaRuntime

    rt = CudaRuntime()
    for name in (
        "synchronize",
        "reset_peak_memory_stats",
        "max_memory_allocated",
        "empty_cache",
        "Stream",
        "Event",
        "stream",
    ):
        seen = []
        monkeypatch.setattr(torch.cuda, name, lambda *a, _n=name, **k: seen.append((_n, a, k)) or 7)
        args = {"Event": (), "empty_cache": (), "stream": ("s",)}.get(name, ("cuda:0",))
        assert getattr(rt, name)(*args) == 7, name
        assert seen and seen[0][0] == name, name


@pytest.mark.parametrize(
    "scale,limit,dtypes,d2h",
    [(12.0, 100, {"int64": 2, "int32": 1}, 2 * 96 * 1 + 2 * 96 * 8 + 96 * 4), (3.0, 2, {"int8": 3}, 3 * 96 * 1)],
)
def test_cuda_executor_logic_on_cpu(tmp_path, fake_cuda, scale, limit, dtypes, d2h):
    """Transfer types widen without loss (int8 first; exp(12) needs int32: the two batches already in flight in
    int8 are copied again as int64, the next one comes back as int32), an OOM halves the batch, CUDA-event
    timings are gathered, results are exact."""
    X = write_genome_h5(tmp_path / "g.h5", 9, 32)
    stats, got = _engine_run(tmp_path, ScaledModel(scale, limit), X, batch_size=3, precision="fp32", executor="cuda")
    want = np.round(np.exp(scale * X[:, :, :1].astype(np.float32))).astype(np.int64)
    want[X.max(axis=2) == 0] = -1
    assert np.array_equal(got, want)
    assert stats.transfer_dtypes == dtypes
    assert stats.final_batch == (1 if limit == 2 else 3)  # 3 rows did not fit: 3 // 2 = 1 row per call
    assert (limit == 2) == any("CUDA OOM" in n for n in stats.notes)
    t = stats.gpu_timing
    assert t["micro_batches"] == (9 if limit == 2 else 3) and 0.0 <= t["data_wait_fraction"] <= 1.0
    # float16 rows of the h5 route (3 batches of 3 x 32 x 4 x 2 bytes); the batch that ran out of memory twice
    assert stats.h2d_bytes == 768 * (4 if limit == 2 else 3)
    assert stats.d2h_bytes == d2h


def test_cuda_batch_probe_logic_on_cpu(fake_cuda):
    from chromaflow.predict.probe import probe_batch_size

    size, trials = probe_batch_size(
        ScaledModel(1.0, limit=37), torch.device("cpu"), L=16, D=1, precision="fp32", limit=4096, executor="cuda"
    )
    assert size == 37 and trials[-1] == (37, True)


def test_cuda_executor_fasta_route_logic_on_cpu(reference_dir, tmp_path, fake_cuda):
    """The FASTA route through the CUDA executor (codes + strand flags, one-hot by table, grown output) gives
    Predmoter's predictions."""
    from chromaflow.predict import engine, h5io
    from chromaflow.predict.executors import pinned_pool
    from chromaflow.predict.feed import FastaFeed
    from chromaflow.predict.writer import PredictionWriter

    torch.set_num_threads(1)  # the model runs in this thread here (on a GPU it would not load the CPU)
    model = build_model(load_checkpoint(predmoter(reference_dir, "mini_model.ckpt")))
    pool = pinned_pool(5, 5, 21384, pin=True)
    feed = FastaFeed(str(predmoter(reference_dir, "pred_data.fa")), 21384, 5, pool, reader="process")
    got_meta = []
    with h5py.File(tmp_path / "o.h5", "w") as out:
        dset = h5io.create_predictions(
            out,
            n_rows=0,
            length=21384,
            datasets=["atacseq", "h3k4me3"],
            species0=b"Species_artificialis_9",
            model_name="m",
            seqids=np.zeros(0, "S50"),
            start_ends=np.zeros((0, 2), np.int64),
        )
        writer = PredictionWriter(dset, 0, pool_threads=2, depth=2, grow=True)
        stats = engine.predict_feed(
            model,
            feed,
            writer,
            n_rows=None,
            batch_size=5,
            device=torch.device("cpu"),
            precision="fp32",
            threads=1,
            on_batch=lambda b: got_meta.append(b),
            release=lambda b: pool.release(b.slot),
            executor="cuda",
        )
        h5io.finalize_rows(
            out,
            seqids=np.array([s for b in got_meta for s in b.seqids], dtype="S50"),
            start_ends=np.concatenate([b.start_ends for b in got_meta]),
        )
    assert stats.rows == 16 and stats.transfer_dtypes == {"int8": 4}
    with h5py.File(tmp_path / "o.h5") as f, h5py.File(predmoter(reference_dir, "pred_data_1_predictions.h5")) as g:
        for name in ("data/seqids", "data/start_ends", "prediction/predictions"):
            assert np.array_equal(f[name][()], g[name][()]), name


# --------------------------------------------------------------------------------------------------
# benchmarks/gpu/run: refuses without CUDA; its CPU-side checks and report run here
# --------------------------------------------------------------------------------------------------
def _gpu_bench_module(repo_root):
    import importlib.machinery
    import importlib.util

    path = repo_root / "benchmarks" / "gpu" / "run"
    loader = importlib.machinery.SourceFileLoader("gpu_bench_run", str(path))
    spec = importlib.util.spec_from_loader("gpu_bench_run", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def test_gpu_benchmark_refuses_without_cuda_and_its_checks_work(repo_root, reference_dir, tmp_path):
    import json
    import sys

    if not torch.cuda.is_available():
        proc = subprocess.run(
            [sys.executable, str(repo_root / "benchmarks" / "gpu" / "run"), "--workdir", str(tmp_path / "w")],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "no CUDA device" in proc.stderr and not (tmp_path / "w").exists()
    mod = _gpu_bench_module(repo_root)
    fa = reference_dir / "predmoter" / "pred_data.fa"
    ckpt = reference_dir / "predmoter" / "mini_model.ckpt"
    outs = {}
    for prec in ("fp32", "bf16"):
        out = tmp_path / f"{prec}.h5"
        run_cli(
            "predict",
            "--fasta",
            fa,
            "--species",
            "S",
            "--model",
            ckpt,
            "--out",
            out,
            "--precision",
            prec,
            "--metrics",
            tmp_path / f"{prec}.json",
        )
        outs[prec] = out
    chk = mod.check_rows_on_cpu(fa, ckpt, outs["fp32"], [0, 5, 15], threads=1)
    assert chk["ok"] and chk["values"] == 3 * 21384 * 2 and chk["rows"] == [0, 5, 15]
    bad = tmp_path / "bad.h5"  # the check can fail: one value changed in row 5
    shutil.copy(outs["fp32"], bad)
    with h5py.File(bad, "a") as f:
        f["prediction/predictions"][5, 100, 0] += 1
    chk = mod.check_rows_on_cpu(fa, ckpt, bad, [0, 5, 15], threads=1)
    assert not chk["ok"] and chk["unexpected"][0][:3] == [5, 100, 0]
    dev = mod.deviation(outs["bf16"], outs["fp32"])
    from chromaflow.predict.executors import bf16_supported

    if bf16_supported(torch.device("cpu")):
        assert dev["values"] == 16 * 21384 * 2 and 0 < dev["differ"] < dev["values"] // 50
    else:  # a CPU without bf16 in oneDNN: the engine falls back to fp32, so the deviation is none
        assert dev["values"] == 16 * 21384 * 2 and dev["differ"] == 0
    result = {
        "command": "benchmarks/gpu/run (CPU stand-in)",
        "started": "2000-01-01 00:00",
        "mbp": 0.154,
        "records": 2,
        "machine": {
            "gpu": "none (test)",
            "host": "test",
            "torch": torch.__version__,
            "cuda": None,
            "cudnn": None,
            "cpu": "test",
            "cores": 2,
        },
        "precisions": [
            mod.record({"wall_s": 1.0, "cpu_s": 1.0}, json.loads((tmp_path / f"{p}.json").read_text()))
            for p in ("fp32", "bf16")
        ],
        "fp32_vs_cpu": chk,
        "bf16_vs_fp32": dev,
    }
    res_dir = tmp_path / "gpu" / "results"
    res_dir.mkdir(parents=True)
    (res_dir / "x.json").write_text(json.dumps(result))
    md = mod.regenerate_md(res_dir).read_text()
    assert "| fp32 | 1.0 |" in md and "**FAILED**" in md and f"{dev['differ']} of {dev['values']} differ" in md
    # the committed GPU results page is what the script generates from the committed JSON files
    committed = tmp_path / "committed" / "results"
    shutil.copytree(repo_root / "benchmarks" / "gpu" / "results", committed)
    assert mod.regenerate_md(committed).read_text() == (repo_root / "benchmarks" / "gpu" / "RESULTS.md").read_text()


def test_gpu_results_page_judges_targets_from_the_measured_numbers(repo_root, tmp_path):
    """The generated GPU page: end-to-end targets per run with the largest parts of the wall, the Predmoter
    ratios, and the training targets (ratio, loss-curve difference, data wait, utilisation) each judged on its
    own numbers (a renderer that mixed up runs or thresholds fails one of these)."""
    import json

    mod = _gpu_bench_module(repo_root)
    phases = {
        "before_run": 0.5,
        "checks_imports": 4.0,
        "model_load": 0.1,
        "batch_size": 0.2,
        "setup": 0.2,
        "loop_and_drain": 3.0,
        "finish": 0.5,
    }

    def pred(prec, run, wall, loop_s, util):
        return {
            "precision": prec,
            "run": run,
            "wall_s": wall,
            "cpu_s": 1.0,
            "bp_per_s_end_to_end": 4e8 / wall,
            "bp_per_s_loop": 4e8 / loop_s,
            "loop_s": loop_s,
            "batch_size": 64,
            "phases_s": phases,
            "gpu_devices": [{"utilization_mean_pct": util}],
        }

    def ours(epoch_s, loss, wait, util):
        return {
            "epoch_s": epoch_s,
            "wall_s": 30.0,
            "data_wait_fraction": wait,
            "curve": [{"avg_train_loss": loss, "data_wait_fraction": wait, "gpu_util_train_pct": util}],
        }

    result = {
        "command": "x",
        "started": "2000-01-01 00:00",
        "mbp": 200,
        "records": 8,
        "deflate": "auto",
        "machine": {"gpu": "G", "host": "h", "torch": "t", "cuda": "c", "cudnn": 1, "cpu": "c", "cores": 16},
        "precisions": [pred("fp32", "cached", 9.0, 2.5, 95.0), pred("bf16", "cached", 2.0, 1.0, 89.0)],
        "peer_predict": {
            "mbp": 25,
            "batch_size": 64,
            "reps": 1,
            "fasta2h5_wall_s": 1.0,
            "checks": {},
            "rows": [
                {"tool": "predmoter", "precision": "fp32", "wall_s": 40.0},
                {"tool": "chromaflow", "precision": "fp32", "wall_s": 10.0},
            ],
        },
        "train": {
            "chunks": {"train": 10, "val": 2},
            "length": 21384,
            "model": "default",
            "arch_args": [],
            "batch_size": 120,
            "epochs": 1,
            "runs": {
                "predmoter": {"epoch_s": 10.0, "wall_s": 20.0, "curve": [{"avg_train_loss": 1.0}]},
                "ours": ours(4.0, 1.01, 0.04, 90.0),
                "ours_ram": ours(6.0, 1.0, 0.06, 80.0),
            },
        },
    }
    res = tmp_path / "results"
    res.mkdir()
    (res / "r.json").write_text(json.dumps(result))
    md = mod.regenerate_md(res).read_text()
    assert (
        "| fp32 ≥ 40 Mbp/s of rows end to end | cached | 44.4 Mbp/s | ✔ | checks + torch import 4.0 s, loop 2.5 s" in md
    )
    assert "| bf16 ≥ 180 Mbp/s of rows end to end | cached | 200.0 Mbp/s | ✔ |" in md
    assert "| fp32: mean GPU utilisation ≥ 90 % over the prediction | cached | 95 % | ✔ |" in md
    assert "| bf16: mean GPU utilisation ≥ 90 % over the prediction | cached | 89 % | ✘ |" in md
    assert "| chromaflow | fp32 | 10.0 |" in md and "| 4.00× |" in md
    assert "| ≥ 2× Predmoter per epoch | 2.50× ✔ | 1.67× ✘ |" in md
    assert "| loss curve vs Predmoter: largest relative difference of avg_train_loss | 1.00% | 0.00% |" in md
    assert "| data wait < 5% (last epoch) | 4.0% ✔ | 6.0% ✘ |" in md
    assert "| GPU utilisation ≥ 90 % while training (last epoch) | 90 % ✔ | 80 % ✘ |" in md


def test_purelib_wheel_retags_pure_wheels_and_refuses_compiled_ones(repo_root, tmp_path):
    import importlib.util
    import zipfile

    spec = importlib.util.spec_from_file_location(
        "purelib_wheel", repo_root / "benchmarks" / "gpu" / "purelib_wheel.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    src = tmp_path / "pkg-1.0-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(src, "w") as z:
        z.writestr("pkg/__init__.py", "X = 1\n")
        z.writestr(
            "pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n"
        )
        z.writestr("pkg-1.0.dist-info/RECORD", "pkg/__init__.py,sha256=bad,1\n")
    (tmp_path / "out").mkdir()
    out = mod.retag(src, tmp_path / "out")
    assert out.name == "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(out) as z:
        wheel = z.read("pkg-1.0.dist-info/WHEEL").decode()
        record = z.read("pkg-1.0.dist-info/RECORD").decode()
    assert "Tag: py3-none-any" in wheel and "Root-Is-Purelib: true" in wheel and "cp311" not in wheel
    assert "pkg/__init__.py,sha256=Crrh4K5yghbuRJk8Wjp1X4scOH2Uf8TE9yyrDkqEIUs,6" in record  # sha256 of "X = 1\n"
    compiled = tmp_path / "c-1.0-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(compiled, "w") as z:
        z.writestr("c/_x.so", b"\x7fELF")
        z.writestr("c-1.0.dist-info/WHEEL", "Tag: cp311-cp311-linux_x86_64\n")
    with pytest.raises(SystemExit, match="compiled code"):
        mod.retag(compiled, tmp_path / "out")
