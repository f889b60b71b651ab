#!/usr/bin/env python3
"""Regenerates the pipeline's embedded test assemblies (seeded; the committed files are its output).

asmA.fa     3 records: 23,456 bp with lowercase (soft-masked) stretches and an N run, 9,000 bp,
            and a 700-bp contig shorter than one test chunk; LF line endings, 60 columns.
asmB.fa.gz  2 records with CRLF line endings and a few IUPAC ambiguity codes, gzip-compressed.
Run:  python assets/test/make_test_data.py   (from the repository root)
"""

import gzip
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent


def seq(rng: random.Random, n: int, alphabet: str = "ACGT") -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def fasta(records, width: int, eol: str) -> str:
    out = []
    for name, desc, s in records:
        out.append(f">{name} {desc}".rstrip() + eol)
        out.extend(s[i : i + width] + eol for i in range(0, len(s), width))
    return "".join(out)


def main() -> None:
    rng = random.Random(20261122)
    a1 = seq(rng, 23456)
    a1 = a1[:3000] + a1[3000:5000].lower() + "N" * 400 + a1[5400:]
    records_a = [
        ("chr1", "test chromosome 1", a1),
        ("chr2", "test chromosome 2", seq(rng, 9000)),
        ("ctg3", "", seq(rng, 700)),
    ]
    (HERE / "asmA.fa").write_text(fasta(records_a, 60, "\n"))
    b1 = seq(rng, 15000)
    b1 = b1[:100] + "RYKMSWBDHVN" + b1[111:]
    records_b = [("scaffold_1", "assembly B", b1), ("scaffold_2", "assembly B", seq(rng, 4321))]
    data = fasta(records_b, 70, "\r\n").encode()
    with open(HERE / "asmB.fa.gz", "wb") as fh:
        # mtime=0 keeps the committed bytes reproducible
        with gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as gz:
            gz.write(data)


if __name__ == "__main__":
    main()
