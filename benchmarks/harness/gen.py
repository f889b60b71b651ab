"""Seeded benchmark inputs, each written by its own process (``python -m benchmarks.harness.gen KIND ...``) so the
harness stays small. Every generator is deterministic: same arguments, same bytes.

    fasta OUT TOTAL_BP RECORDS SEED          random ACGT, 60-column lines (chromaflow.report.sweep.write_random_fasta)
    expression OUT GENES SAMPLES SEED GOLD   synthetic genes x samples TSV (DREAM4-like layout: samples x genes)
                                             and its true regulator -> target edges (GOLD, DREAM4 gold format)
    coverage OUTDIR RECORDS RECORD_BP READS SEED
                                             genome.fa, genome.h5 (chromaflow fasta2h5) and reads.bam (+ .bai):
                                             the add-coverage stage's inputs
    training OUTDIR TRAIN_FILES RECORD_BP SEED
                                             train/*.h5 and val/val_0.h5 with atacseq and h3k4me3 coverage made from
                                             seeded reads by chromaflow add-coverage: the train stage's inputs
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np


def fasta(out: str, total_bp: str, records: str, seed: str) -> None:
    from chromaflow.report.sweep import write_random_fasta

    tmp = Path(out + ".tmp")
    write_random_fasta(tmp, int(total_bp), int(seed), records=int(records))
    tmp.replace(out)


def expression(out: str, genes: str, samples: str, seed: str, gold: str) -> None:
    """Samples x genes TSV with a header of gene names (the DREAM4 layout every tool here reads), where each
    non-regulator gene is a noisy function of two regulators (the first 10 % of genes). GOLD lists every ordered
    pair (regulator, target) with 1 for a true edge, as DREAM4's gold standards do."""
    G, S = int(genes), int(samples)
    rng = np.random.default_rng(int(seed))
    n_reg = max(2, G // 10)
    R = rng.uniform(0, 1, size=(n_reg, S))
    parents = np.stack([rng.choice(n_reg, 2, replace=False) for _ in range(G)])
    X = 0.6 * R[parents[:, 0]] + 0.4 * R[parents[:, 1]] ** 2 + rng.normal(0, 0.05, (G, S))
    X[:n_reg] = R
    names = [f"G{i + 1}" for i in range(G)]
    tmp = Path(out + ".tmp")
    with open(tmp, "w") as f:
        f.write("\t".join(f'"{n}"' for n in names) + "\n")
        for s in range(S):
            f.write("\t".join(f"{v:.6f}" for v in X[:, s]) + "\n")
    tmp.replace(out)
    edges = {(int(p), g) for g in range(n_reg, G) for p in parents[g]}
    tmp = Path(gold + ".tmp")
    with open(tmp, "w") as f:
        for a in range(G):
            for b in range(G):
                if a != b:
                    f.write(f"{names[a]}\t{names[b]}\t{1 if (a, b) in edges else 0}\n")
    tmp.replace(gold)


def write_fasta(path: str, records: int, record_bp: int, seed: int) -> dict[str, int]:
    """Random ACGT records chr1..chrR of record_bp each, 100-column lines; returns {name: size}."""
    rng = np.random.default_rng(seed)
    lut = np.frombuffer(b"ACGT", dtype=np.uint8)
    sizes = {}
    with open(path, "wb") as fh:
        for i in range(records):
            name = f"chr{i + 1}"
            seq = lut[rng.integers(0, 4, record_bp)].tobytes()
            fh.write(f">{name}\n".encode())
            for j in range(0, record_bp, 100):
                fh.write(seq[j : j + 100] + b"\n")
            sizes[name] = record_bp
    return sizes


def write_bam(
    path: str, sizes: dict[str, int], n_reads: int, read_len: int, spliced_fraction: float, intron: int, seed: int
) -> None:
    """n_reads single-end reads of read_len aligned bases at uniform positions on both strands, MAPQ 60; a
    spliced_fraction of them split in two halves by an intron-bp N (the shape of the peer measurement in
    FORMATS.md §7.1: 100 bp, 20 % with a 1 kb N). SAM text from numpy, sorted and indexed by pysam (samtools)."""
    import pysam

    rng = np.random.default_rng(seed + 1)
    names = list(sizes)
    chrom = rng.integers(0, len(names), n_reads)
    spliced = rng.random(n_reads) < spliced_fraction
    span = np.where(spliced, read_len + intron, read_len)
    lens = np.array([sizes[n] for n in names])[chrom]
    pos = (rng.random(n_reads) * (lens - span)).astype(np.int64)
    rev = rng.random(n_reads) < 0.5
    h1 = read_len // 2
    cig_plain = f"{read_len}M"
    cig_spl = f"{h1}M{intron}N{read_len - h1}M"
    seq = "A" * read_len
    qual = "I" * read_len
    sam = path + ".sam"
    with open(sam, "w") as fh:
        fh.write("@HD\tVN:1.6\tSO:unsorted\n")
        for n in names:
            fh.write(f"@SQ\tSN:{n}\tLN:{sizes[n]}\n")
        lines = []
        for i in range(n_reads):
            lines.append(
                f"r{i}\t{16 if rev[i] else 0}\t{names[chrom[i]]}\t{pos[i] + 1}\t60\t"
                f"{cig_spl if spliced[i] else cig_plain}\t*\t0\t0\t{seq}\t{qual}\n"
            )
            if len(lines) >= 100000:
                fh.writelines(lines)
                lines = []
        fh.writelines(lines)
    pysam.sort("-o", path, "-@", "2", sam)
    pysam.index(path)
    os.remove(sam)


def _chromaflow(*args) -> None:
    subprocess.run(
        [sys.executable, "-m", "chromaflow", *map(str, args)], check=True, env=dict(os.environ, CHROMAFLOW_PROGRESS="0")
    )


def coverage(outdir: str, records: str, record_bp: str, reads: str, seed: str) -> None:
    """The add-coverage inputs: R records x S bp, their genome h5 and N reads of 100 bp (20 % with a 1 kb N).
    Written into OUTDIR.tmp and renamed, so a cut-short run leaves no half-made folder."""
    out, tmp = Path(outdir), Path(outdir + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    sizes = write_fasta(str(tmp / "genome.fa"), int(records), int(record_bp), int(seed))
    _chromaflow("fasta2h5", "--fasta", tmp / "genome.fa", "--species", "sp", "--out", tmp / "genome.h5")
    write_bam(str(tmp / "reads.bam"), sizes, int(reads), 100, 0.2, 1000, int(seed))
    tmp.replace(out)


def training(outdir: str, train_files: str, record_bp: str, seed: str) -> None:
    """Training data made the real way, from reads: per training file a random 1-record FASTA of RECORD_BP,
    chromaflow fasta2h5, a BAM per dataset and chromaflow add-coverage (atacseq --unstranded --shift from
    RECORD_BP/8 unspliced reads; h3k4me3 --unstranded from RECORD_BP/25 reads, 20 % with a 500-bp N); one
    validation file of half the size. Written into OUTDIR.tmp and renamed."""
    out, tmp = Path(outdir), Path(outdir + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for sub in ("train", "val", "src"):
        (tmp / sub).mkdir(parents=True)
    bp, s0 = int(record_bp), int(seed)
    jobs = [("train", f"train_{i}", bp, s0 + i) for i in range(int(train_files))]
    jobs.append(("val", "val_0", bp // 2 - (bp // 2) % 2, s0 + 100))
    for split, name, n, s in jobs:
        fa = tmp / "src" / f"{name}.fa"
        sizes = write_fasta(str(fa), 1, n, s)
        h5 = tmp / split / f"{name}.h5"
        _chromaflow("fasta2h5", "--fasta", fa, "--species", "sp", "--out", h5)
        for k, (prefix, reads, extra) in enumerate((("atacseq", n // 8, ["--shift"]), ("h3k4me3", n // 25, []))):
            bam = tmp / "src" / f"{name}_{prefix}.bam"
            write_bam(str(bam), sizes, reads, 100, 0.0 if prefix == "atacseq" else 0.2, 500, s * 10 + k)
            _chromaflow("add-coverage", "--h5", h5, "--prefix", prefix, "--bam", bam, "--unstranded", *extra)
    shutil.rmtree(tmp / "src")
    tmp.replace(out)


if __name__ == "__main__":
    {"fasta": fasta, "expression": expression, "coverage": coverage, "training": training}[sys.argv[1]](*sys.argv[2:])
