"""``chromaflow predict --fasta``: rows cut exactly as fasta2h5 cuts them, predictions identical to fasta2h5 +
predict (and to Predmoter's reference files), sharding across routes, the feed's rows against Helixer's own h5
files, bad FASTA-route input."""

from __future__ import annotations

import gzip
import json
import shutil
import threading
from pathlib import Path

import h5py
import numpy as np
import pytest

from chromaflow.model.checkpoint import write_test_checkpoint
from chromaflow.model.network import ModelConfig
from helpers.cli import run_in_process as run_cli
from helpers.predict_files import assert_same_file

SPECIES = "Species_artificialis_9"


def predmoter(reference_dir: Path, name: str) -> Path:
    return reference_dir / "predmoter" / name


def tiny(tmp_path: Path, model_type: str, cnn_layers: int = 1, seed: int = 0) -> Path:
    cfg = ModelConfig(
        model_type=model_type,
        cnn_layers=cnn_layers,
        filter_size=4,
        kernel_size=9,
        step=2,
        up=2,
        dilation=1,
        lstm_layers=1,
        hidden_size=4,
        bnorm=True,
        dropout=0.0,
        datasets=("atacseq", "moa"),
    )
    path = tmp_path / f"{model_type}_{cnn_layers}.ckpt"
    write_test_checkpoint(path, cfg, seed=seed)
    return path


# --------------------------------------------------------------------------------------------------
# the feed's rows equal Helixer's own h5 files (the reference for cutting and encoding)
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("stem,L", [("iupac_L10", 10), ("multichunk_L1000", 1000), ("exactmultiple_L10_lzf", 10)])
@pytest.mark.parametrize("reader", ["thread", "process"])
def test_fasta_feed_rows_equal_helixer_h5(reference_dir, stem, L, reader):
    from chromaflow.predict.feed import ONEHOT_LUT, BufferPool, FastaFeed

    with h5py.File(reference_dir / "helixer" / f"{stem}.h5") as f:
        X, se, ids = f["data/X"][()], f["data/start_ends"][()], f["data/seqids"][()]
    n = X.shape[0]
    for batch, start, end in ((1, 0, None), (3, 1, n - 1), (64, 0, None)):
        pool = BufferPool(3, batch, L)
        feed = FastaFeed(
            str(reference_dir / "helixer" / f"{stem}.fa"),
            L,
            batch,
            pool,
            row_start=start,
            row_end=end,
            reader=reader,
            block=64,
        )
        rows, ses, sids, firsts = [], [], [], []
        for b in feed.batches(threading.Event()):
            idx = b.codes[: b.n].astype(np.int64) + 256 * b.strand[: b.n, None].astype(np.int64)
            rows.append(ONEHOT_LUT[idx])
            ses.append(b.start_ends)
            sids += b.seqids
            firsts.append(b.row0)
            pool.release(b.slot)
        stop = n if end is None else end
        # float32 one-hot from codes == Helixer's float16 rows converted to float32 (IUPAC 0.33 included)
        assert np.array_equal(np.concatenate(rows), X[start:stop].astype(np.float32)), (batch, start)
        assert np.array_equal(np.concatenate(ses), se[start:stop])
        assert sids == list(ids[start:stop])
        assert firsts == list(range(start, stop, batch))  # batches aligned like the h5 route


def test_h5_feed_codes_and_direct_reads_equal_h5py(reference_dir):
    """The h5 feed's parallel raw-chunk inflate (and its codes) give exactly h5py's rows."""
    from chromaflow.predict.feed import ONEHOT_LUT, H5Feed, x_to_codes

    for path in (
        predmoter(reference_dir, "pred_data_1.h5"),
        reference_dir / "helixer" / "iupac_L10.h5",
        reference_dir / "helixer" / "exactmultiple_L10_lzf.h5",
    ):
        with h5py.File(path) as f:
            X = f["data/X"]
            want = X[()]
            for mode in ("x", "codes"):
                feed = H5Feed(X, str(path), 5, row_start=1, row_end=X.shape[0], threads=2, mode=mode)
                got = []
                for b in feed.batches(threading.Event()):
                    got.append(ONEHOT_LUT[b.codes.astype(np.int64)] if b.codes is not None else b.x.astype(np.float32))
                    if mode == "codes":
                        assert b.codes is not None  # Helixer's rows are all standard patterns
                feed.close()
                assert np.array_equal(np.concatenate(got), want[1:].astype(np.float32)), (path, mode)
            assert feed.direct == ("lzf" not in path.name)
    odd = np.zeros((1, 4, 4), dtype=np.float16)
    odd[0, 0] = [0.2, 0.3, 0.5, 0.0]  # not a fasta2h5 pattern: no codes, the float rows are used
    assert x_to_codes(odd) is None


# --------------------------------------------------------------------------------------------------
# predictions: FASTA route == fasta2h5 + predict, for every model type, at L = 21384 and 42768
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("L", [21384, 42768])
def test_fasta_route_equals_h5_route_and_reference(reference_dir, tmp_path, L):
    fa = predmoter(reference_dir, "pred_data.fa")
    h5 = tmp_path / "g.h5"
    run_cli("fasta2h5", "--fasta", fa, "--species", SPECIES, "--out", h5, "--subsequence-length", L)
    models = [str(predmoter(reference_dir, "mini_model.ckpt"))]
    models += [str(tiny(tmp_path, t, n)) for t, n in (("cnn", 3), ("hybrid", 2), ("bi-hybrid", 3))]
    ref = predmoter(reference_dir, "pred_data_1_predictions.h5" if L == 21384 else "pred_data_2_predictions.h5")
    for model in models:
        a, b = tmp_path / "h5route.h5", tmp_path / "faroute.h5"
        run_cli("predict", "--h5", h5, "--model", model, "--out", a, "--force", "--batch-size", "3")
        run_cli(
            "predict",
            "--fasta",
            fa,
            "--species",
            SPECIES,
            "--subsequence-length",
            L,
            "--model",
            model,
            "--out",
            b,
            "--force",
            "--batch-size",
            "3",
            "--metrics",
            tmp_path / "m.json",
        )
        assert_same_file(b, a, skip_model_name=False)  # layout, fill values, every value
        m = json.loads((tmp_path / "m.json").read_text())
        assert m["input"] == "fasta" and m["records"] == 2 and m["subsequence_length"] == L
        assert m["subsequences"] == (16 if L == 21384 else 10) and m["bp"] == 2 * 153963
        if model == models[0]:  # mini_model: also Predmoter's own predictions of its own h5
            assert_same_file(b, ref)


def test_fasta_route_gzip_process_reader_and_shards(reference_dir, tmp_path):
    """gzip input, the child-process reader, and shards that mix the FASTA and h5 routes merge to Predmoter's file."""
    fa_gz = tmp_path / "pred_data.fa.gz"
    fa_gz.write_bytes(gzip.compress(predmoter(reference_dir, "pred_data.fa").read_bytes()))
    model = str(predmoter(reference_dir, "mini_model.ckpt"))
    shards = []
    for i in (1, 2, 3):
        p = tmp_path / f"s{i}.h5"
        if i == 2:
            run_cli(
                "predict",
                "--h5",
                predmoter(reference_dir, "pred_data_1.h5"),
                "--model",
                model,
                "--out",
                p,
                "--shard",
                "2/3",
            )
        else:
            run_cli(
                "predict",
                "--fasta",
                fa_gz,
                "--species",
                SPECIES,
                "--model",
                model,
                "--out",
                p,
                "--shard",
                f"{i}/3",
                "--reader",
                "process",
                "--batch-size",
                "2",
            )
        shards.append(p)
    with h5py.File(shards[0]) as f, h5py.File(shards[1]) as g:
        assert f.attrs["chromaflow_input_fingerprint"] == g.attrs["chromaflow_input_fingerprint"]
        assert (int(f.attrs["chromaflow_row_start"]), int(f.attrs["chromaflow_row_end"])) == (0, 5)
    merged = tmp_path / "merged.h5"
    run_cli("predict-merge", "--out", merged, *shards)
    assert_same_file(merged, predmoter(reference_dir, "pred_data_1_predictions.h5"))


@pytest.mark.parametrize(
    "deflate,engine,level",
    [("auto", "zlib", 9), ("zlib:1", "zlib", 1), ("isal", "isal", 1), ("libdeflate", "libdeflate", 6)],
)
def test_deflate_engines_same_values(reference_dir, tmp_path, deflate, engine, level):
    """Every --deflate choice writes Predmoter's values and declares the level it used; auto on CPU (zlib 9) writes
    Predmoter's own chunk bytes."""
    out = tmp_path / "p.h5"
    run_cli(
        "predict",
        "--fasta",
        predmoter(reference_dir, "pred_data.fa"),
        "--species",
        SPECIES,
        "--model",
        predmoter(reference_dir, "mini_model.ckpt"),
        "--out",
        out,
        "--deflate",
        deflate,
        "--metrics",
        tmp_path / "m.json",
    )
    assert json.loads((tmp_path / "m.json").read_text())["deflate"] == f"{engine}:{level}"
    with h5py.File(out) as f, h5py.File(predmoter(reference_dir, "pred_data_1_predictions.h5")) as g:
        a, b = f["prediction/predictions"], g["prediction/predictions"]
        assert a.compression == "gzip" and a.compression_opts == level
        assert np.array_equal(a[()], b[()])
        same = [
            a.id.read_direct_chunk((r, 0, j))[1] == b.id.read_direct_chunk((r, 0, j))[1]
            for r in range(a.shape[0])
            for j in range(a.shape[2])
        ]
        assert all(same) if deflate == "auto" else not any(same)


def test_fasta_layout_command(reference_dir, tmp_path):
    out = tmp_path / "layout.json"
    run_cli("fasta-layout", "--fasta", predmoter(reference_dir, "pred_data.fa"), "--out", out)
    lay = json.loads(out.read_text())
    with h5py.File(predmoter(reference_dir, "pred_data_1.h5")) as f:
        assert lay["subsequences"] == f["data/X"].shape[0] == 16
    assert lay["records"] == 2 and lay["bp"] == 51321 + 102642
    # the one subsequence-length rule (genome.encoding.check_length), as fasta2h5 and predict apply it
    proc = run_cli(
        "fasta-layout",
        "--fasta",
        predmoter(reference_dir, "pred_data.fa"),
        "--subsequence-length",
        str((1 << 20) + 1),
        check=False,
    )
    assert proc.returncode != 0 and proc.stderr.strip() == (
        "chromaflow fasta-layout: error: --subsequence-length 1048577: must be between 1 and 1,048,576 "
        "(Predmoter's is 21384)"
    )


# --------------------------------------------------------------------------------------------------
# bad FASTA-route input: one line naming the file, non-zero exit, nothing left behind
# --------------------------------------------------------------------------------------------------
def test_fasta_route_bad_input(reference_dir, tmp_path):
    model = str(predmoter(reference_dir, "mini_model.ckpt"))
    bad_char = tmp_path / "bad.fa"
    bad_char.write_bytes(b">r1\nACGT\nACUG\n")
    dup = tmp_path / "dup.fa"
    dup.write_bytes(b">a\nACGT\n>a\nAC\n")
    ok = tmp_path / "ok.fa"
    ok.write_bytes(b">a\n" + b"ACGT" * 30 + b"\n")
    out = tmp_path / "out" / "p.h5"
    out.parent.mkdir()
    cases = [
        (["--fasta", bad_char, "--species", "s"], [str(bad_char), "line 3", "column 3", "'U'"]),
        (["--fasta", bad_char, "--species", "s", "--reader", "process"], [str(bad_char), "line 3", "'U'"]),
        (["--fasta", dup, "--species", "s"], [str(dup), "duplicate record id 'a'"]),
        (["--fasta", dup, "--species", "s", "--shard", "1/2"], [str(dup), "duplicate record id 'a'"]),
        (["--fasta", ok, "--species", "s" * 26], ["--species", "26 bytes"]),
        (["--fasta", ok, "--species", "esp\u00e8ce"], ["--species", "ASCII"]),
        (["--fasta", ok], ["--fasta needs --species"]),
        (["--fasta", ok, "--species", "s", "--subsequence-length", "0"], ["--subsequence-length 0: must be between 1"]),
        (["--fasta", ok, "--species", "s", "--subsequence-length", "-5"], ["--subsequence-length -5: must be between"]),
        # the same cap as fasta2h5 (genome.encoding.check_length): 2^20 + 1 is refused before any work
        (
            ["--fasta", ok, "--species", "s", "--subsequence-length", str((1 << 20) + 1)],
            ["--subsequence-length 1048577: must be between 1 and 1,048,576"],
        ),
        (["--fasta", ok, "--species", "s", "--subsequence-length", "21"], [str(ok), "L=21", "not divisible"]),
        (["--fasta", tmp_path / "none.fa", "--species", "s"], ["none.fa", "does not exist"]),
        (["--fasta", tmp_path, "--species", "s"], [str(tmp_path), "not a regular file"]),
        (["--h5", predmoter(reference_dir, "pred_data_1.h5"), "--species", "s"], ["belong to --fasta"]),
    ]
    for args, needles in cases:
        proc = run_cli("predict", *args, "--model", model, "--out", out, check=False)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode != 0 and len(lines) == 1, (args, proc.stderr)
        assert lines[0].startswith("chromaflow predict: error: "), lines[0]
        for needle in needles:
            assert needle in lines[0], (needle, lines[0])
        assert list(out.parent.iterdir()) == [], args  # nothing written, no .part file
    # --h5 and --fasta exclude each other (argparse usage error)
    with pytest.raises(SystemExit) as exc:
        run_cli("predict", "--h5", "x.h5", "--fasta", ok, "--species", "s", "--model", model, "--out", out, check=False)
    assert exc.value.code == 2


def test_fasta_route_empty_shard_and_more_shards_than_rows(reference_dir, tmp_path):
    fa = tmp_path / "short.fa"
    fa.write_bytes(b">only\nACGTACGTAC\n")  # 10 bp -> 2 rows at L = 21384
    model = str(predmoter(reference_dir, "mini_model.ckpt"))
    outs = []
    for i in (1, 2, 3):
        p = tmp_path / f"e{i}.h5"
        run_cli("predict", "--fasta", fa, "--species", "s", "--model", model, "--out", p, "--shard", f"{i}/3")
        outs.append(p)
    with h5py.File(outs[0]) as f:
        assert f["prediction/predictions"].shape[0] == 0  # shard 1 of 3 over 2 rows: rows 0-0
    merged = tmp_path / "m.h5"
    run_cli("predict-merge", "--out", merged, *outs)
    whole = tmp_path / "w.h5"
    run_cli("predict", "--fasta", fa, "--species", "s", "--model", model, "--out", whole)
    assert_same_file(merged, whole, skip_model_name=False)
    with h5py.File(whole) as f:
        p = f["prediction/predictions"][()]
        assert p.shape == (2, 21384, 2) and (p[:, 10:] == -1).all() and (p[:, :10] >= 0).all()
        assert f["data/start_ends"][()].tolist() == [[0, 10], [10, 0]]
    shutil.rmtree(tmp_path / "none", ignore_errors=True)
