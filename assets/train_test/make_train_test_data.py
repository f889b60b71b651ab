#!/usr/bin/env python3
"""Regenerates the embedded test data of the pipeline's train mode (seeded; the committed files are its output).

Three small assemblies with reads whose density follows a GC signal (so a model has something to learn):

  trainA.fa  2 records (24,000 + 10,000 bp): atacseq reads in 2 BAM replicates, h3k4me3 reads in 1 BAM
  trainB.fa  1 record  (16,000 bp):          atacseq reads in 1 BAM, h3k4me3 as a bigWig (coverage of reads)
  valA.fa    1 record  (12,000 bp):          atacseq and h3k4me3 in 1 BAM each

BAMs are coordinate-sorted and indexed (.bai), single-end 50-bp reads on both strands, a few spliced (N) and
duplicate-flagged reads. sheet.csv lists them in the train-mode sheet format (docs/usage.md, docs/training.md).
Run:  python assets/train_test/make_train_test_data.py   (from the repository root; needs pysam, pyBigWig, numpy)
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
READ = 50
ASSEMBLIES = {  # id: (split, {record: length}, seed)
    "trainA": ("train", {"chrA1": 24000, "chrA2": 10000}, 11),
    "trainB": ("train", {"chrB1": 16000}, 12),
    "valA": ("val", {"chrV1": 12000}, 13),
}


def genome(sizes: dict[str, int], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.integers(0, 4, n) for name, n in sizes.items()}


def density(bases: np.ndarray, strength: float) -> np.ndarray:
    gc = ((bases == 1) | (bases == 2)).astype(float)  # 0=A 1=C 2=G 3=T
    smooth = np.convolve(gc, np.ones(101) / 101, mode="same")
    w = np.exp(strength * (smooth - smooth.mean()) * 10)
    return w / w.sum()


def reads_for(g: dict[str, np.ndarray], n_per_kb: float, strength: float, seed: int):
    rng = np.random.default_rng(seed)
    out = []
    for name, bases in g.items():
        n = int(len(bases) / 1000 * n_per_kb)
        p = density(bases[: len(bases) - READ - 200], strength)
        starts = np.sort(rng.choice(len(p), size=n, p=p))
        for i, s in enumerate(starts.tolist()):
            rev = bool(rng.random() < 0.5)
            if rng.random() < 0.05:
                cigar = [(0, READ // 2), (3, 150), (0, READ - READ // 2)]  # spliced
            else:
                cigar = [(0, READ)]
            flag = (16 if rev else 0) | (0x400 if rng.random() < 0.03 else 0)
            out.append((name, s, cigar, flag, f"{name}_{seed}_{i}"))
    return out


def write_bam(path: Path, sizes: dict[str, int], reads) -> None:
    import pysam

    hdr = {"HD": {"VN": "1.6", "SO": "coordinate"}, "SQ": [{"SN": n, "LN": ln} for n, ln in sizes.items()]}
    tmp = str(path) + ".unsorted"
    with pysam.AlignmentFile(tmp, "wb", header=hdr) as bam:
        for name, start, cigar, flag, qname in reads:
            a = pysam.AlignedSegment(bam.header)
            a.query_name = qname
            a.query_sequence = "A" * READ
            a.query_qualities = pysam.qualitystring_to_array("I" * READ)
            a.flag = flag
            a.reference_name = name
            a.reference_start = start
            a.mapping_quality = 60
            a.cigartuples = cigar
            bam.write(a)
    pysam.sort("-o", str(path), tmp)
    os.remove(tmp)
    pysam.index(str(path))


def write_bigwig(path: Path, sizes: dict[str, int], reads) -> None:
    import pyBigWig

    cov = {n: np.zeros(ln, dtype=np.float64) for n, ln in sizes.items()}
    for name, start, cigar, flag, _ in reads:
        pos = start
        for op, n in cigar:
            if op == 0:
                cov[name][pos : pos + n] += 1
            pos += n
    bw = pyBigWig.open(str(path), "w")
    bw.addHeader(list(sizes.items()))
    for name, c in cov.items():
        bw.addEntries(name, 0, values=c.tolist(), span=1, step=1)
    bw.close()


def main() -> None:
    rows = ["id,split,fasta,species,dataset,file,library,shift"]
    for k, (aid, (split, sizes, seed)) in enumerate(ASSEMBLIES.items()):
        g = genome(sizes, seed)
        with open(HERE / f"{aid}.fa", "w") as fh:
            for name, bases in g.items():
                s = "".join("ACGT"[b] for b in bases)
                fh.write(f">{name}\n" + "".join(s[i : i + 60] + "\n" for i in range(0, len(s), 60)))
        reps = 2 if aid == "trainA" else 1
        for r in range(reps):
            f = f"{aid}_atacseq_{r + 1}.bam"
            write_bam(HERE / f, sizes, reads_for(g, 60, 1.0, seed * 100 + r))
            rows.append(f"{aid},{split},{aid}.fa,Testus_trainus,atacseq,{f},unstranded,true")
        h3 = reads_for(g, 30, -0.7, seed * 100 + 50)
        if aid == "trainB":
            f = f"{aid}_h3k4me3.bw"
            write_bigwig(HERE / f, sizes, h3)
            rows.append(f"{aid},{split},{aid}.fa,Testus_trainus,h3k4me3,{f},unstranded,false")
        else:
            f = f"{aid}_h3k4me3.bam"
            write_bam(HERE / f, sizes, h3)
            rows.append(f"{aid},{split},{aid}.fa,Testus_trainus,h3k4me3,{f},unstranded,false")
    (HERE / "sheet.csv").write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
