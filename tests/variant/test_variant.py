"""``chromaflow variant-effect``: alt windows against bcftools consensus, scores recomputed independently, strands
and coordinates near record ends, and a hand-built motif model whose effects are known exactly.

The independent route: each variant alone is applied to the FASTA by ``bcftools consensus`` (htslib's, through
pysam), the windows are cut from the consensus record in its own coordinates, one-hot encoded here (not with
chromaflow's table), predicted directly by the model on each strand (the minus strand as the reverse complement),
and the scores recomputed from those tracks with the formulas of docs/variants.md written in genome coordinates.
"""

from __future__ import annotations

import gzip
import math
import random
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pysam
import pysam.bcftools
import pytest
import torch

from chromaflow.model.checkpoint import build_model, load_checkpoint, write_test_checkpoint
from chromaflow.model.network import ModelConfig
from helpers.cli import chromaflow, run_in_process

L = 400  # the tiny model's seq_len = the window length
FLANK = 50
ONEHOT = {"C": (1, 0, 0, 0), "A": (0, 1, 0, 0), "T": (0, 0, 1, 0), "G": (0, 0, 0, 1)}  # FORMATS.md §1: C, A, T, G
COMP = str.maketrans("ACGT", "TGCA")
STRANDS = ("avg", "plus", "minus")
METRICS = ("ref_mean", "alt_mean", "delta_mean", "log2fc", "max_abs_delta", "max_abs_delta_offset")

# (CHROM, POS, REF length, ALT or "+<inserted>" after the REF's first base); chosen near record ends on purpose
CASES = [
    ("c1", 3, 1, "SNV"),  # window padded before the record start, flank clipped
    ("c1", 480, 2, "MNV"),
    ("c1", 600, 1, "+GTTAC"),  # insertion
    ("c1", 993, 6, "DEL"),  # deletion whose right flank is clipped at the record end
    ("c2", 1, 2, "DEL2"),  # deletion at the very first base
    ("c2", 700, 1, "SNV"),  # the last base of the record
    ("c2", 350, 1, "MULTI"),  # multi-allelic, split per ALT
    ("c2", 360, 4, "+A"),  # REF 4 bp -> 5 bp (complex, non-normalised)
]


def _write_fasta(path: Path, seqs: dict[str, str]) -> None:
    with open(path, "w") as fh:
        for name, s in seqs.items():
            fh.write(f">{name} description\n")
            fh.write("\n".join(s[i : i + 70] for i in range(0, len(s), 70)) + "\n")


def _write_vcf(path: Path, records: list[tuple], contigs: dict[str, int]) -> Path:
    text = "##fileformat=VCFv4.2\n" + "".join(f"##contig=<ID={c},length={n}>\n" for c, n in contigs.items())
    text += '##INFO=<ID=SVTYPE,Number=1,Type=String,Description="sv">\n'
    text += "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
    for c, pos, vid, ref, alt, *info in records:
        text += f"{c}\t{pos}\t{vid}\t{ref}\t{alt}\t.\t.\t{info[0] if info else '.'}\n"
    plain = path.with_suffix("")
    plain.write_text(text)
    pysam.tabix_compress(str(plain), str(path), force=True)
    pysam.tabix_index(str(path), preset="vcf", force=True)
    return path


def _alts(seq: str, p: int, r: int, kind: str) -> list[str]:
    """ALT alleles for a case (never equal to REF)."""
    ref = seq[p : p + r].upper()
    other = lambda b: "ACGT"[("ACGT".index(b) + 1) % 4]  # noqa: E731
    if kind == "SNV":
        return [other(ref)]
    if kind == "MNV":
        return ["".join(other(b) for b in ref)]
    if kind == "MULTI":
        return [other(ref), other(other(ref))]
    if kind == "DEL":
        return [ref[0]]
    if kind == "DEL2":
        return [ref[1]]
    return [ref + kind[1:]] if r == 1 else [ref + kind[1:]]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("variant")
    rng = random.Random(7)
    seqs = {
        "c1": "".join(rng.choice("ACGT") for _ in range(1000)),
        "c2": "".join(rng.choice("ACGT") for _ in range(700)),
    }
    seqs["c1"] = seqs["c1"][:200] + seqs["c1"][200:260].lower() + seqs["c1"][260:]  # soft-masked bases
    fasta = d / "g.fa"
    _write_fasta(fasta, seqs)
    model = d / "tiny.ckpt"
    chromaflow("make-test-model", "--out", model, "--seq-len", L, "--seed", 3, check=True)
    records, singles = [], []
    for i, (c, pos, r, kind) in enumerate(CASES):
        ref = seqs[c][pos - 1 : pos - 1 + r].upper()
        alts = _alts(seqs[c], pos - 1, r, kind)
        records.append((c, pos, f"v{i}", ref, ",".join(alts)))
        singles += [(c, pos, f"v{i}", ref, a) for a in alts]
    records.sort(key=lambda t: (t[0], t[1]))
    singles.sort(key=lambda t: (t[0], t[1]))
    vcf = _write_vcf(d / "v.vcf.gz", records, {c: len(s) for c, s in seqs.items()})
    out = d / "effects.tsv.gz"
    run_in_process(
        "variant-effect",
        "--vcf",
        vcf,
        "--fasta",
        fasta,
        "--model",
        model,
        "--out",
        out,
        "--flank",
        FLANK,
        "--device",
        "cpu",
        "--threads",
        1,
        "--tracks",
        3,
        "--tracks-dir",
        d / "tracks",
        "--metrics",
        d / "m.json",
    )
    net = build_model(load_checkpoint(model))
    return dict(
        dir=d,
        seqs=seqs,
        fasta=fasta,
        model=model,
        vcf=vcf,
        out=out,
        rows=_read(out),
        singles=singles,
        net=net,
        datasets=("atacseq", "h3k4me3"),
    )


def _read(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as fh:
        lines = fh.read().splitlines()
    head = lines[0].split("\t")
    return [dict(zip(head, ln.split("\t"))) for ln in lines[1:]]


def _encode(window: str) -> np.ndarray:
    return np.array(
        [ONEHOT.get(b, (0, 0, 0, 0)) if b != "N" else (0.25, 0.25, 0.25, 0.25) for b in window], dtype=np.float32
    )


def _predict(net, window: str) -> dict[str, np.ndarray]:
    """window ('-' = padding) -> avg/plus/minus (L, D) tracks, the minus strand as the reverse complement."""
    rc = window[::-1].translate(COMP)
    with torch.no_grad():
        plus = torch.exp(net(torch.from_numpy(_encode(window))[None]))[0].numpy()
        minus = torch.exp(net(torch.from_numpy(_encode(rc))[None]))[0].numpy()[::-1]
    return {"plus": plus, "minus": minus, "avg": (plus + minus) / 2}


def _window(seq: str, start: int) -> str:
    return "".join(seq[i].upper() if 0 <= i < len(seq) else "-" for i in range(start, start + L))


def _consensus(setup, single: tuple) -> str:
    """The variant applied to its record by bcftools consensus."""
    c = single[0]
    vcf = _write_vcf(
        setup["dir"] / f"one_{single[2]}_{single[4]}.vcf.gz", [single], {k: len(s) for k, s in setup["seqs"].items()}
    )
    text = pysam.bcftools.consensus("-f", str(setup["fasta"]), str(vcf))
    records = {
        block.split("\n", 1)[0].split()[0]: block.split("\n", 1)[1].replace("\n", "") for block in text.split(">")[1:]
    }
    return records[c]


def _expected(setup, single: tuple) -> dict[str, dict[str, np.ndarray]]:
    c, pos, _vid, ref, alt = single
    seq, cons = setup["seqs"][c], _consensus(setup, single)
    p, r, a, n = pos - 1, len(ref), len(alt), len(seq)
    dshift = a - r
    assert len(cons) == n + dshift
    s = p - L // 2
    tr_ref, tr_alt = _predict(setup["net"], _window(seq, s)), _predict(setup["net"], _window(cons, s))
    out = {}
    for st in STRANDS:
        R, A = tr_ref[st], tr_alt[st]  # window index i = genome coordinate s + i (of each allele's own record)
        ref_pos = [q for q in range(p - FLANK, p + r + FLANK) if 0 <= q < n]
        alt_pos = [q for q in range(p - FLANK, p + a + FLANK) if 0 <= q < n + dshift]
        ref_mean = R[[q - s for q in ref_pos]].astype(np.float64).mean(0)
        alt_mean = A[[q - s for q in alt_pos]].astype(np.float64).mean(0)
        # aligned pairs in reference coordinates: q < p + min(r, a) same coordinate; q >= p + r -> q + dshift
        pairs = [(q, q) for q in ref_pos if q < p + min(r, a)] + [(q, q + dshift) for q in ref_pos if q >= p + r]
        delta = np.array([A[qa - s] - R[q - s] for q, qa in pairs], dtype=np.float64)
        k = np.abs(delta).argmax(0)
        out[st] = {
            "ref_mean": ref_mean,
            "alt_mean": alt_mean,
            "delta_mean": alt_mean - ref_mean,
            "log2fc": np.log2((alt_mean + 1) / (ref_mean + 1)),
            "max_abs_delta": np.abs(delta[k, range(delta.shape[1])]),
            "max_abs_delta_offset": np.array([pairs[j][0] - p for j in k]),
        }
    return out


def _single_ids(setup):
    return [f"{s[0]}:{s[1]}:{s[3]}>{s[4]}" for s in setup]


@pytest.mark.parametrize("case", range(len(CASES) + 1), ids=lambda i: f"alt{i}")
def test_scores_match_bcftools_consensus(setup, case):
    """Every scored (variant, ALT): the table's values equal those recomputed from direct predictions of the
    reference and of the bcftools-consensus sequence (1e-4 relative: the table has 6 significant digits)."""
    single = setup["singles"][case]
    row = next(r for r in setup["rows"] if (r["CHROM"], int(r["POS"]), r["ALT"]) == (single[0], single[1], single[4]))
    exp = _expected(setup, single)
    for j, d in enumerate(setup["datasets"]):
        for st in STRANDS:
            for m in METRICS:
                got = float(row[f"{m}_{d}_{st}"])
                want = float(exp[st][m][j])
                if m == "max_abs_delta_offset":
                    assert got == want, (m, d, st)
                else:
                    assert got == pytest.approx(want, rel=1e-4, abs=1e-6), (m, d, st)


def test_rows_columns_and_notes(setup):
    rows = setup["rows"]
    assert len(rows) == len(setup["singles"])
    assert [(r["CHROM"], int(r["POS"])) for r in rows] == sorted((r["CHROM"], int(r["POS"])) for r in rows)
    first = rows[0]
    assert list(first)[:5] == ["CHROM", "POS", "ID", "REF", "ALT"] and list(first)[-1] == "note"
    assert len(first) == 5 + 2 * 3 * 6 + 1
    by = {(r["CHROM"], int(r["POS"])): r for r in rows}
    assert "window padded 198 bp before record start" in by[("c1", 3)]["note"]
    assert "flank clipped at record start" in by[("c1", 3)]["note"]
    assert "flank clipped at record end" in by[("c2", 700)]["note"]
    assert by[("c1", 480)]["note"] == "."


def test_tracks_are_the_windows(setup):
    """--tracks: the strongest variant's ref/alt bigWigs hold the strand average of the direct predictions, the alt
    one in reference coordinates."""
    import pyBigWig

    rows = setup["rows"]
    best = max(rows, key=lambda r: max(abs(float(r[f"delta_mean_{d}_avg"])) for d in setup["datasets"]))
    files = sorted((setup["dir"] / "tracks").glob("001_*"))
    assert len(files) == 4 and f"_{best['CHROM']}_{best['POS']}_" in files[0].name
    single = next(s for s in setup["singles"] if (s[0], s[1], s[4]) == (best["CHROM"], int(best["POS"]), best["ALT"]))
    c, pos, _v, ref, alt = single
    seq = setup["seqs"][c]
    s = pos - 1 - L // 2
    want_ref = _predict(setup["net"], _window(seq, s))["avg"]
    bw = pyBigWig.open(str(setup["dir"] / "tracks" / files[0].name.replace(".alt.", ".ref.")))
    lo, hi = max(0, s), min(len(seq), s + L)
    got = np.array(bw.values(c, lo, hi), dtype=np.float32)
    np.testing.assert_allclose(got, want_ref[lo - s : hi - s, 0], rtol=1e-6)


def test_deterministic_and_batch_independent(setup, tmp_path):
    """Another batch size and two CPU streams (the module run: auto batch, one thread) give the same bytes; and without
    --tracks (the module run has 3) only the scored slice of each window leaves the model (effects.scored_span)."""
    out = tmp_path / "e.tsv.gz"
    run_in_process(
        "variant-effect",
        "--vcf",
        setup["vcf"],
        "--fasta",
        setup["fasta"],
        "--model",
        setup["model"],
        "--out",
        out,
        "--flank",
        FLANK,
        "--device",
        "cpu",
        "--threads",
        2,
        "--batch-size",
        10,
    )
    assert out.read_bytes() == setup["out"].read_bytes()


def test_skipped_alleles_are_rows_with_a_reason(setup, tmp_path):
    seq = setup["seqs"]["c1"]
    vcf = _write_vcf(
        tmp_path / "sv.vcf.gz",
        [
            ("c1", 100, "sym", seq[99].upper(), "<DEL>"),
            ("c1", 110, "star", seq[109].upper(), f"*,{'A' if seq[109].upper() != 'A' else 'C'}"),
            ("c1", 120, "bnd", seq[119].upper(), f"{seq[119].upper()}]c2:5]"),
            ("c1", 130, "sv", seq[129].upper(), "A" if seq[129].upper() != "A" else "C", "SVTYPE=INS"),
            ("c1", 140, "long", seq[139].upper(), seq[139].upper() + "A" * (L - L // 2 - FLANK)),
        ],
        {k: len(s) for k, s in setup["seqs"].items()},
    )
    out = tmp_path / "e.tsv.gz"
    run_in_process(
        "variant-effect",
        "--vcf",
        vcf,
        "--fasta",
        setup["fasta"],
        "--model",
        setup["model"],
        "--out",
        out,
        "--flank",
        FLANK,
        "--device",
        "cpu",
        "--threads",
        1,
        "--metrics",
        tmp_path / "m.json",
    )
    notes = [(r["ID"], r["ALT"][:3], r["note"], r["delta_mean_atacseq_avg"]) for r in _read(out)]
    assert [n[0] for n in notes] == ["sym", "star", "star", "bnd", "sv", "long"]
    assert notes[0][2] == "skipped: symbolic ALT <DEL>" and notes[0][3] == "NA"
    assert notes[1][2] == "skipped: spanning deletion (*)"
    assert not notes[2][2].startswith("skipped") and notes[2][3] != "NA"  # the other ALT of the record is scored
    assert notes[3][2] == "skipped: breakend ALT"
    assert notes[4][2] == "skipped: structural variant (SVTYPE=INS)"
    assert notes[5][2].startswith("skipped: allele longer than the window allows")
    import json

    m = json.loads((tmp_path / "m.json").read_text())
    assert m["variants"] == 6 and m["scored"] == 1 and m["skipped"] == 5


# --------------------------------------------------------------------------------------------------
# a hand-built model: output rises over a planted motif (forward strand only)
# --------------------------------------------------------------------------------------------------
MOTIF = "GATTACA"
LIFT = 2.0  # log-rate over the motif: coverage e^2 there, 1 elsewhere


@pytest.fixture(scope="module")
def motif_model(tmp_path_factory):
    """cnn, one layer, step 1, kernel 7: the convolution scores 7 where the 7 bases match MOTIF (bias -6, ReLU: 1
    at the motif's centre only); the transposed convolution spreads that 1 over the motif's 7 positions of
    channel 0; the head maps it to log-rate LIFT. The reverse complement TGTAATC does not fire."""
    cfg = ModelConfig(
        model_type="cnn",
        cnn_layers=1,
        filter_size=1,
        kernel_size=7,
        step=1,
        up=1,
        dilation=1,
        lstm_layers=0,
        hidden_size=1,
        bnorm=False,
        dropout=0.0,
        datasets=("atacseq",),
        seq_len=300,
    )
    conv_w = torch.zeros(1, 4, 7)
    for j, b in enumerate(MOTIF):
        conv_w[0, "CATG".index(b), j] = 1.0
    up_w = torch.zeros(1, 4, 7)
    up_w[0, 0, :] = 1.0
    sd = OrderedDict(
        [
            ("down_layer_list.0.weight", conv_w),
            ("down_layer_list.0.bias", torch.tensor([-6.0])),
            ("up_layer_list.0.weight", up_w),
            ("up_layer_list.0.bias", torch.zeros(4)),
            ("out.weight", torch.tensor([[LIFT, 0.0, 0.0, 0.0]])),
            ("out.bias", torch.zeros(1)),
        ]
    )
    path = tmp_path_factory.mktemp("motif") / "motif.ckpt"
    write_test_checkpoint(path, cfg, 0, state_dict=sd)
    return path


@pytest.mark.parametrize("k", [0, 3, 6])
@pytest.mark.parametrize("kind", ["destroy", "create"])
def test_motif_model(motif_model, tmp_path, kind, k):
    """A SNV at motif base k: destroying the motif scores negative, creating it positive, on the plus strand (and
    the average) only, with max |Δ| = e^LIFT - 1 at offset -k (the motif's first base, relative to POS)."""
    rng = random.Random(11)
    bg = "".join(rng.choice("CT") for _ in range(600))  # no G or A: the motif cannot occur by chance
    planted = MOTIF if kind == "destroy" else MOTIF[:k] + ("C" if MOTIF[k] != "C" else "T") + MOTIF[k + 1 :]
    m0 = 250
    seq = bg[:m0] + planted + bg[m0 + 7 :]
    _write_fasta(tmp_path / "m.fa", {"chr": seq})
    ref, alt = planted[k], ("C" if MOTIF[k] != "C" else "T") if kind == "destroy" else MOTIF[k]
    vcf = _write_vcf(tmp_path / "m.vcf.gz", [("chr", m0 + k + 1, "snv", ref, alt)], {"chr": 600})
    out = tmp_path / "m.tsv.gz"
    flank = 40
    run_in_process(
        "variant-effect",
        "--vcf",
        vcf,
        "--fasta",
        tmp_path / "m.fa",
        "--model",
        motif_model,
        "--out",
        out,
        "--flank",
        flank,
        "--device",
        "cpu",
        "--threads",
        1,
    )
    row = _read(out)[0]
    sign = -1 if kind == "destroy" else 1
    lift = math.exp(LIFT) - 1
    assert float(row["delta_mean_atacseq_plus"]) == pytest.approx(sign * lift * 7 / (2 * flank + 1), rel=1e-5)
    assert float(row["delta_mean_atacseq_avg"]) == pytest.approx(sign * lift * 7 / (2 * flank + 1) / 2, rel=1e-5)
    assert float(row["delta_mean_atacseq_minus"]) == 0.0
    assert float(row["max_abs_delta_atacseq_plus"]) == pytest.approx(lift, rel=1e-5)
    assert int(row["max_abs_delta_offset_atacseq_plus"]) == -k
    assert (float(row["log2fc_atacseq_plus"]) > 0) == (kind == "create")


@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA device here (torch.cuda.is_available() is False): the GPU path is tested where one exists",
)
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_cuda_matches_cpu(setup, tmp_path, precision):
    """--device cuda (batch size probed) gives the CPU's table: fp32 within 1e-4 relative (TF32 is off, as in
    predict), bf16 within 5e-2 relative on the means (autocast)."""
    out = tmp_path / "gpu.tsv.gz"
    run_in_process(
        "variant-effect",
        "--vcf",
        setup["vcf"],
        "--fasta",
        setup["fasta"],
        "--model",
        setup["model"],
        "--out",
        out,
        "--flank",
        FLANK,
        "--device",
        "cuda",
        "--precision",
        precision,
    )
    tol = 1e-4 if precision == "fp32" else 5e-2
    for got, want in zip(_read(out), setup["rows"]):
        for d in setup["datasets"]:
            for st in STRANDS:
                for m in ("ref_mean", "alt_mean"):
                    assert float(got[f"{m}_{d}_{st}"]) == pytest.approx(float(want[f"{m}_{d}_{st}"]), rel=tol)
                if precision == "fp32":
                    assert float(got[f"delta_mean_{d}_{st}"]) == pytest.approx(
                        float(want[f"delta_mean_{d}_{st}"]), rel=1e-3, abs=1e-5
                    )


def test_cpu_streams_start_after_one_call_in_the_calling_thread():
    """As predict's CPU executor: the first model call of a process is made in the calling thread before the streams'
    (torch sets exp up on its first call; two streams making it at once could get different routines)."""
    import threading

    from chromaflow.variant.effects import WindowPredictor
    from helpers.predict_helpers import ThreadRecorder

    windows = np.random.default_rng(0).integers(1, 5, size=(3, 12), dtype=np.uint8)
    got = {}
    for streams in (1, 2):
        model = ThreadRecorder()
        pred = WindowPredictor(model, torch.device("cpu"), "fp32", micro=2, streams=streams)
        got[streams] = pred(windows)
        pred(windows)
        pred.close()
        me = threading.current_thread().name
        if streams == 1:
            assert set(model.threads) == {me}
        else:  # one call here, then 2 x (6 rows / 2) in the streams
            assert model.threads[0] == me and len(model.threads) == 7
            assert all(t.startswith("variant-stream") for t in model.threads[1:])
    assert np.array_equal(got[1], got[2])
