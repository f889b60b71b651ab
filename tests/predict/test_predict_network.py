"""The network and its checkpoints: Predmoter's state_dict key rules (FORMATS.md §2.7) and parameter counts, an
independent functional forward pass for seeded checkpoints predicted through the CLI, make-test-model determinism
and byte-reproducible test checkpoints."""

from __future__ import annotations

import math
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from chromaflow.model.checkpoint import build_model, load_checkpoint, make_test_state_dict, write_test_checkpoint
from chromaflow.model.network import ModelConfig, PredmoterNet
from helpers.cli import run_in_process as run_cli
from helpers.predict_files import write_genome_h5
from predict_shared import predmoter


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
# test checkpoints: the same bytes for the same options
# --------------------------------------------------------------------------------------------------
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
