"""Seeded inputs for the add-coverage benchmark: a FASTA of R records x S bp, its genome h5 and a BAM of N reads.

  python benchmarks/coverage/make_inputs.py OUTDIR [--records 5] [--record-bp 10000000] [--reads 1000000]
      [--read-len 100] [--spliced-fraction 0.2] [--intron 1000] [--seed 1]

Writes OUTDIR/genome.fa, OUTDIR/genome.h5 (chromaflow fasta2h5, L = 21384) and OUTDIR/reads.bam (+ .bai):
reads of --read-len aligned bases at uniform positions on both strands, single-end, MAPQ 60; a
--spliced-fraction of them are split in two halves by an --intron bp N (the shape of the peer measurement in
FORMATS.md §7.1: 1 M reads of 100 bp, 20 % with a 1 kb N). The SAM text is made with numpy and turned into a
sorted, indexed BAM by pysam (samtools sort/index), so 1 M reads take seconds.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np


def write_fasta(path: str, records: int, record_bp: int, seed: int) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    lut = np.frombuffer(b"ACGT", dtype=np.uint8)
    sizes = {}
    with open(path, "wb") as fh:
        for i in range(records):
            name = f"chr{i + 1}"
            seq = lut[rng.integers(0, 4, record_bp)].tobytes()
            fh.write(f">{name}\n".encode())
            for j in range(0, record_bp, 100):
                fh.write(seq[j:j + 100] + b"\n")
            sizes[name] = record_bp
    return sizes


def write_bam(path: str, sizes: dict[str, int], n_reads: int, read_len: int, spliced_fraction: float,
              intron: int, seed: int) -> None:
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
            lines.append(f"r{i}\t{16 if rev[i] else 0}\t{names[chrom[i]]}\t{pos[i] + 1}\t60\t"
                         f"{cig_spl if spliced[i] else cig_plain}\t*\t0\t0\t{seq}\t{qual}\n")
            if len(lines) >= 100000:
                fh.writelines(lines)
                lines = []
        fh.writelines(lines)
    pysam.sort("-o", path, "-@", "2", sam)
    pysam.index(path)
    os.remove(sam)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("--records", type=int, default=5)
    ap.add_argument("--record-bp", type=int, default=10_000_000)
    ap.add_argument("--reads", type=int, default=1_000_000)
    ap.add_argument("--read-len", type=int, default=100)
    ap.add_argument("--spliced-fraction", type=float, default=0.2)
    ap.add_argument("--intron", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    os.makedirs(a.outdir, exist_ok=True)
    fa = os.path.join(a.outdir, "genome.fa")
    sizes = write_fasta(fa, a.records, a.record_bp, a.seed)
    subprocess.run([sys.executable, "-m", "chromaflow", "fasta2h5", "--fasta", fa, "--species", "sp",
                    "--out", os.path.join(a.outdir, "genome.h5"), "--force"], check=True)
    write_bam(os.path.join(a.outdir, "reads.bam"), sizes, a.reads, a.read_len, a.spliced_fraction, a.intron, a.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
