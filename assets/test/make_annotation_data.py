#!/usr/bin/env python3
"""Regenerates the test profile's annotation and motif files for asmA.fa (seeded; the committed files are its output).

asmA.gff3        the 20 genes of genie3/expression.tsv (TF1..TF5, G1..G15) on chr1 and chr2, both strands, each
                 gene with an mRNA and an exon; two genes touch a record end (clipped windows); not sorted
motifs.jaspar    three made-up 8-10 bp count matrices (JASPAR format, ids CF0001.1..CF0003.1, not real motifs)
tf2motif.tsv     TF1 -> CF0001.1, TF2 -> CF0002.1 and CF0003.1, TF3 -> CF0003.1; TF4 and TF5 have no motif (NA)
Run:  python assets/test/make_annotation_data.py   (from the repository root)
"""

import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZES = {"chr1": 23456, "chr2": 9000}


def main() -> None:
    rng = random.Random(20261127)
    names = [f"TF{i}" for i in range(1, 6)] + [f"G{i}" for i in range(1, 16)]
    lines = []
    for k, name in enumerate(names):
        seqid = "chr1" if k % 3 else "chr2"
        length = rng.randint(300, 900)
        strand = "+" if rng.random() < 0.5 else "-"
        if name == "TF1":
            start, strand = 101, "-"  # - strand gene at the start of chr2: its upstream window is clipped
        elif name == "G15":
            start, strand = SIZES[seqid] - length - 49, "+"  # + strand gene near the end of chr1
        else:
            start = rng.randint(1, SIZES[seqid] - length)
        end = start + length - 1
        lines.append(
            [
                f"{seqid}\tchromaflow\tgene\t{start}\t{end}\t.\t{strand}\t.\tID={name};Name={name}",
                f"{seqid}\tchromaflow\tmRNA\t{start}\t{end}\t.\t{strand}\t.\tID={name}.1;Parent={name}",
                f"{seqid}\tchromaflow\texon\t{start}\t{end}\t.\t{strand}\t.\tID={name}.1.e1;Parent={name}.1",
            ]
        )
    rng.shuffle(lines)
    (HERE / "asmA.gff3").write_text("##gff-version 3\n" + "".join(x + "\n" for block in lines for x in block))
    out = []
    for i, length in enumerate((8, 9, 10), 1):
        cols = []
        for _ in range(length):
            best = rng.randrange(4)
            cols.append([rng.randint(30, 40) if b == best else rng.randint(0, 4) for b in range(4)])
        out.append(f">CF000{i}.1 TESTMOTIF{i}")
        for b, base in enumerate("ACGT"):
            out.append(f"{base} [ " + " ".join(f"{c[b]:3d}" for c in cols) + " ]")
    (HERE / "motifs.jaspar").write_text("\n".join(out) + "\n")
    (HERE / "tf2motif.tsv").write_text(
        "regulator\tmotif\nTF1\tCF0001.1\nTF2\tCF0002.1\nTF2\tCF0003.1\nTF3\tCF0003.1\nTF4\t\nTF5\tNA\n"
    )


if __name__ == "__main__":
    main()
