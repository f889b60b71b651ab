"""``predict --fasta --shard`` through the FASTA's index (``<fasta>.fai``, ``.gzi`` for bgzip, made by
``predict-plan``):
each shard reads only its own rows, and the shards give the same predictions as today's scan route and the h5 route
(plain and bgzip FASTA, 1, 2 and 3 shards, shard boundaries inside records); a stale index is one line."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import h5py
import pysam
import pytest

from chromaflow.model.checkpoint import write_test_checkpoint
from chromaflow.model.network import ModelConfig
from helpers.cli import assert_one_line_error, run_in_process as run_cli
from helpers.environment import REFERENCE
from helpers.predict_files import assert_same_file

L = 1000  # multichunk_L1000.fa: records of 7777, 4000 and 999 bp -> 8 + 4 + 1 rows a strand, 26 rows
ROWS = 26
SPECIES = "Species_artificialis_9"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """The tiny model, the FASTA plain and bgzipped (each in a folder of its own), and the h5 route's prediction."""
    base = tmp_path_factory.mktemp("faindex")
    cfg = ModelConfig(
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
        datasets=("atacseq", "moa"),
    )
    model = base / "tiny.ckpt"
    write_test_checkpoint(model, cfg, seed=3)
    fastas = {}
    for kind in ("plain", "bgzf"):
        (base / kind).mkdir()
        fa = base / kind / "g.fa"
        shutil.copy(REFERENCE / "helixer" / "multichunk_L1000.fa", fa)
        if kind == "bgzf":
            pysam.tabix_compress(str(fa), str(fa) + ".gz")
            fa.unlink()
            fa = Path(str(fa) + ".gz")
        res = run_cli(
            "predict-plan",
            "--fasta",
            fa,
            "--subsequence-length",
            L,
            "--shards",
            "3",
            "--out",
            base / kind / "plan.json",
        )
        assert res.returncode == 0
        plan = json.loads((base / kind / "plan.json").read_text())
        assert plan["index"] == "fai" and plan["subsequences"] == ROWS, plan
        fastas[kind] = fa
    h5 = base / "g.h5"
    run_cli("fasta2h5", "--fasta", fastas["plain"], "--species", SPECIES, "--subsequence-length", L, "--out", h5)
    ref = base / "h5route.h5"
    run_cli("predict", "--h5", h5, "--model", model, "--out", ref, "--batch-size", "3", "--device", "cpu")
    return base, model, fastas, ref


def shard(setup, kind: str, i: int, n: int, tag: str, *extra) -> tuple[Path, dict]:
    base, model, fastas, _ = setup
    out = base / f"{kind}.{tag}.{i}of{n}.h5"
    metrics = base / f"{kind}.{tag}.{i}of{n}.json"
    run_cli(
        "predict",
        "--fasta",
        fastas[kind],
        "--species",
        SPECIES,
        "--subsequence-length",
        L,
        "--model",
        model,
        "--out",
        out,
        "--metrics",
        metrics,
        "--shard",
        f"{i}/{n}",
        "--batch-size",
        "2",
        "--device",
        "cpu",
        "--force",
        *extra,
    )
    return out, json.loads(metrics.read_text())


@pytest.mark.parametrize("kind", ["plain", "bgzf"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_index_shards_merge_to_the_h5_routes_predictions(setup, kind, n):
    base, _, _, ref = setup
    parts = []
    for i in range(1, n + 1):
        out, m = shard(setup, kind, i, n, "fai")
        assert m["index"] == "fai" and m["reader"] == "index", m
        assert m["index_files"] == (["g.fa.gz.fai", "g.fa.gz.gzi"] if kind == "bgzf" else ["g.fa.fai"])
        parts.append(out)
    merged = base / f"{kind}.merged{n}.h5"
    run_cli("predict-merge", "--out", merged, *parts, "--force")
    assert_same_file(merged, ref)


def test_index_shards_are_the_scan_routes_bytes(setup):
    """Shard i of 3 through the index is byte for byte the file of the scan route (--index none); a shard's
    boundaries fall inside records (rows 8 and 17 of 26)."""
    for i in (1, 2, 3):
        a, ma = shard(setup, "plain", i, 3, "fai")
        b, mb = shard(setup, "plain", i, 3, "scan", "--index", "none")
        assert ma["index"] == "fai" and mb["index"] == "scan"
        assert_same_file(a, b, skip_model_name=False)
        with h5py.File(a) as f, h5py.File(b) as g:
            assert dict(f.attrs) == dict(g.attrs)
        assert hashlib.sha256(a.read_bytes()).digest() == hashlib.sha256(b.read_bytes()).digest()


@pytest.mark.parametrize("kind", ["plain", "bgzf"])
def test_a_shard_reads_only_its_own_part(setup, kind):
    """The metrics say how much of the file each shard read: through the index, less than the file and about its
    share; the scan route reads the whole file for the layout and streams it again up to its rows."""
    size = setup[2][kind].stat().st_size
    got = [shard(setup, kind, i, 3, "fai")[1] for i in (1, 2, 3)]
    for m in got:  # (the bgzip file is one BGZF block of 64 KiB: tests/genome/test_faidx.py measures more blocks)
        assert m["fasta_bytes"] == size and 0 < m["fasta_bytes_read"] < size or kind == "bgzf", m
    # shard 1 of 3: rows 0-7, the plus strand of the first record only
    assert got[0]["records_touched"] == 1 and got[0]["bases_fetched"] == 7777 and got[0]["records"] == 3
    if kind == "plain":  # its bases and line breaks (60 bases a line), nothing else
        assert got[0]["fasta_bytes_read"] == 7777 + 7777 // 60
    scan = shard(setup, kind, 1, 3, "scan", "--index", "none", "--reader", "thread")[1]
    assert scan["index"] == "scan" and scan["fasta_bytes_read"] > size


def test_stale_index_is_one_line_and_writes_nothing(setup, tmp_path):
    _, model, fastas, _ = setup
    fa = tmp_path / "g.fa"
    fa.write_bytes(fastas["plain"].read_bytes())
    shutil.copy(str(fastas["plain"]) + ".fai", str(fa) + ".fai")
    fa.write_bytes(fa.read_bytes()[:-2000])  # the FASTA changed after it was indexed
    out = tmp_path / "p.h5"
    proc = run_cli(
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
        out,
        "--shard",
        "1/2",
        check=False,
    )
    assert_one_line_error(proc, "predict", f"{fa}.fai", "ends past the end of", "delete it")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.fa", "g.fa.fai"]
