"""Inputs of the browser-file tests: the committed test assembly (assets/test/asmA.fa) and a predictions h5 of two
datasets over its sequences, made in a second with the peaks tests' generator (no model, no prediction run)."""

from __future__ import annotations

import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
from helpers.cli import chromaflow
from helpers.environment import ROOT
from helpers.peaks_files import strands, write_h5

from chromaflow.annotation.accessibility import write_bigbed
from chromaflow.genome.fasta import FastaReader

ASM_FASTA = ROOT / "assets" / "test" / "asmA.fa"
#: where the browser tests look: the first 20 kb of chr1 (the session's and hub's default position)
LOCUS = "chr1:1-20000"
#: promoter windows (BED6) on chr1's first 20 kb
PROMOTERS = "chr1\t1000\t2000\tg1\t500\t+\nchr1\t8000\t9000\tg2\t900\t-\nchr2\t100\t1100\tg3\t100\t+"
#: chunk length of the made predictions (short: the test assembly is 33 kbp)
CHUNK = 2000


def fasta_sizes(fasta: Path) -> dict[str, int]:
    """Sequence name -> length of ``fasta``, in file order."""
    return {rec.seqid: len(rec.seq) for rec in FastaReader(fasta)}


def write_predictions(path: Path, sizes: dict[str, int], datasets: tuple[str, ...] = ("atacseq", "h3k4me3")) -> Path:
    """A Predmoter-layout predictions h5 over ``sizes`` with one channel per dataset (peaky coverage, each dataset
    its own seed), written with :func:`helpers.peaks_files.write_h5` per dataset and stacked."""
    parts = [write_h5(path.with_suffix(f".{i}.h5"), strands(i + 1, sizes), CHUNK, ds) for i, ds in enumerate(datasets)]
    with h5py.File(parts[0]) as first:
        seqids, se = first["data/seqids"][()], first["data/start_ends"][()]
    values = []
    for p in parts:
        with h5py.File(p) as h5:
            values.append(h5["prediction/predictions"][()])
        p.unlink()
    with h5py.File(path, "w") as h5:
        h5.create_dataset("data/seqids", data=seqids)
        h5.create_dataset("data/start_ends", data=se)
        h5.create_dataset(
            "prediction/predictions", data=np.concatenate(values, axis=2), chunks=(1, CHUNK, 1), compression="gzip"
        )
        h5.create_dataset("prediction/datasets", data=np.array([d.encode() for d in datasets], dtype="S25"))
    return path


@pytest.fixture(scope="session")
def asm_predictions(tmp_path_factory) -> Path:
    """Predictions h5 of asmA (chr1, chr2, ctg3; datasets atacseq and h3k4me3)."""
    return write_predictions(tmp_path_factory.mktemp("pred") / "asmA_predictions.h5", fasta_sizes(ASM_FASTA))


def bigwig_with_genome(predictions: Path, outdir: Path, *extra) -> Path:
    """``chromaflow bigwig --strand all --fasta asmA.fa`` into ``outdir`` (basename asmA); returns ``outdir``."""
    chromaflow(
        "bigwig",
        "--predictions",
        predictions,
        "--outdir",
        outdir,
        "--basename",
        "asmA",
        "--strand",
        "all",
        "--fasta",
        ASM_FASTA,
        *extra,
        check=True,
    )
    return outdir


def make_browser_files(root: Path, predictions: Path) -> Path:
    """``root``/asmA/{tracks,genes,variants} as the pipeline publishes them; returns the tracks folder."""
    tracks, genes, variants = root / "asmA" / "tracks", root / "asmA" / "genes", root / "asmA" / "variants"
    genes.mkdir(parents=True)
    (genes / "asmA.promoters.bed").write_text(PROMOTERS + "\n")
    sizes = {rec.seqid: len(rec.seq) for rec in FastaReader(ASM_FASTA)}
    write_bigbed(genes / "asmA.promoters.bb", sizes, PROMOTERS)
    bigwig_with_genome(
        predictions,
        tracks,
        "--feature-track",
        "../genes/asmA.promoters.bed",
        "--hub-track",
        "../genes/asmA.promoters.bb",
    )
    peaks = ["--out", tracks / "asmA_atacseq.narrowPeak", "--name", "asmA_atacseq", "--cutoff", "20"]
    chromaflow(
        "peaks", "--predictions", predictions, "--dataset", "atacseq", *peaks, "--browser-dir", tracks, check=True
    )
    vt = variants / "variant_tracks"
    vt.mkdir(parents=True)
    for allele, strand in (("ref", "avg"), ("alt", "+")):  # stand-ins for variant-effect --tracks' bigWigs
        shutil.copy(tracks / f"asmA_h3k4me3_{strand}_strand.bw", vt / f"001_chr1_12000_3.h3k4me3.{allele}.bw")
    chromaflow("variant-browser", "--browser-dir", tracks, "--name", "asmA", *sorted(vt.iterdir()), check=True)
    return tracks


@pytest.fixture(scope="session")
def asm_browser_files(asm_predictions, tmp_path_factory) -> Path:
    """The tracks folder of :func:`make_browser_files` (read only: shared by the session's tests)."""
    return make_browser_files(tmp_path_factory.mktemp("browser"), asm_predictions)
