"""Small BAMs with coverage known by construction, for the add-coverage tests.

A read is ``Read(name, seqid, pos, cigar, reverse, kind, flags, mapq)`` with ``kind`` in se / r1 / r2 and a CIGAR
as [(op, n), ...]. :func:`expected` computes the coverage of a list of reads *base by base from the CIGAR*
(independently of chromaflow's block/difference-array implementation) with the rules of FORMATS.md §7.1.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

OPS = {"M": 0, "I": 1, "D": 2, "N": 3, "S": 4, "H": 5, "P": 6, "=": 7, "X": 8}
QUERY = set("MIS=X")
KIND_FLAGS = {"se": 0, "r1": 0x1 | 0x2 | 0x40, "r2": 0x1 | 0x2 | 0x80, "bad": 0x1}


@dataclass
class Read:
    name: str
    seqid: str
    pos: int  # 0-based leftmost reference position
    cigar: list
    reverse: bool = False
    kind: str = "se"
    flags: int = 0  # extra flags (0x100, 0x200, 0x400, 0x800, 0x4 ...)
    mapq: int = 60

    @property
    def flag(self) -> int:
        return (0x10 if self.reverse else 0) | KIND_FLAGS[self.kind] | self.flags


def write_fasta(path: str, sizes: dict[str, int], seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    with open(path, "w") as fh:
        for name, n in sizes.items():
            fh.write(f">{name}\n" + "".join(rng.choice(list("ACGT"), n)) + "\n")


def write_bam(
    path: str,
    sizes: dict[str, int],
    reads: list[Read],
    *,
    sort: bool = True,
    index: bool = True,
    so: str = "coordinate",
    header_sizes: dict[str, int] | None = None,
) -> None:
    """Write ``reads`` as a BAM (sorted + indexed by default) with @SQ lines from ``header_sizes or sizes``."""
    import pysam

    hs = header_sizes or sizes
    hdr = {"HD": {"VN": "1.6", "SO": so}, "SQ": [{"SN": n, "LN": ln} for n, ln in hs.items()]}
    tmp = path + ".unsorted.bam" if sort else path
    with pysam.AlignmentFile(tmp, "wb", header=hdr) as out:
        for r in reads:
            a = pysam.AlignedSegment(out.header)
            ql = sum(n for o, n in r.cigar if o in QUERY)
            a.query_name = r.name
            a.query_sequence = "A" * ql
            a.query_qualities = pysam.qualitystring_to_array("I" * ql)
            a.flag = r.flag
            a.reference_name = r.seqid
            a.reference_start = r.pos
            a.mapping_quality = r.mapq
            a.cigartuples = [(OPS[o], n) for o, n in r.cigar]
            out.write(a)
    if sort:
        pysam.sort("-o", path, tmp)
        os.remove(tmp)
    if index:
        pysam.index(path)


def random_reads(rng, n: int, sizes: dict[str, int], prefix: str) -> list[Read]:
    """Random reads: every CIGAR operation, both strands, all mate kinds, the flags Helixer skips or counts."""
    reads = []
    for i in range(n):
        seqid = rng.choice(list(sizes))
        cig = []
        if rng.random() < 0.3:
            cig.append((("S", "H")[rng.integers(2)], int(rng.integers(1, 6))))
        cig.append(("M", int(rng.integers(6, 30))))
        for _ in range(int(rng.integers(0, 4))):
            op = rng.choice(["I", "D", "N", "=", "X", "M", "P"])
            cig.append((str(op), int(rng.integers(1, 25))))
            cig.append((("M", "=", "X")[rng.integers(3)], int(rng.integers(6, 20))))
        if rng.random() < 0.3:
            cig.append(("S", int(rng.integers(1, 6))))
        span = sum(n for o, n in cig if o in "M=XDN")
        if span >= sizes[seqid]:
            continue
        pos = int(rng.integers(0, sizes[seqid] - span + 1))
        flags = int(rng.choice([0, 0, 0, 0, 0x400, 0x800, 0x100, 0x200, 0x4]))
        reads.append(
            Read(
                f"{prefix}{i}",
                str(seqid),
                pos,
                cig,
                bool(rng.random() < 0.5),
                str(rng.choice(["se", "r1", "r2"])),
                flags,
                int(rng.choice([0, 3, 60])),
            )
        )
    return reads


def _strand(r: Read, mode: str) -> str:
    minus = r.reverse
    if mode == "second":
        minus ^= r.kind in ("se", "r1")
    elif mode == "first":
        minus ^= r.kind == "r2"
    return "-" if minus else "+"


def expected(
    reads: list[Read],
    sizes: dict[str, int],
    mode: str = "unstranded",
    shift: bool = False,
    min_mapq: int = 0,
    skip_duplicates: bool = False,
):
    """{(seqid, strand): counts} for ``_coverage`` and ``_spliced_coverage``, walked base by base."""
    cov = {(c, s): np.zeros(n, np.int64) for c, n in sizes.items() for s in "+-"}
    spl = {k: v.copy() for k, v in cov.items()}
    for r in reads:
        if r.flags & (0x4 | 0x100 | 0x200):
            continue
        if skip_duplicates and r.flags & 0x400:
            continue
        if r.mapq < min_mapq:
            continue
        strand = _strand(r, mode)
        ref = r.pos
        covered, gapped = [], []
        for op, n in r.cigar:
            for _ in range(n):
                if op in "M=X":
                    covered.append(ref)
                    ref += 1
                elif op in "DN":
                    gapped.append(ref)
                    ref += 1
        if shift:
            a, b = r.pos, ref
            if r.reverse:
                b -= 5
            else:
                a += 4
            for p in range(max(a, 0), min(b, sizes[r.seqid])):
                cov[r.seqid, strand][p] += 1
            continue
        for p in covered:
            cov[r.seqid, strand][p] += 1
        for p in gapped:
            spl[r.seqid, strand][p] += 1
    return cov, spl


def to_rows(arrs, seqids, start_ends, length: int) -> np.ndarray:
    """Genome-coordinate per-strand arrays -> (N, L) rows in the genome h5 layout, -1 at padding."""
    out = np.full((len(seqids), length), -1, np.int64)
    for i, (c, (a, b)) in enumerate(zip(seqids, start_ends)):
        v = arrs[c, "+"][a:b] if a < b else arrs[c, "-"][b:a][::-1]
        out[i, : len(v)] = v
    return out
