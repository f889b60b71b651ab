"""Seeded synthetic assemblies for the ``scale`` stage (issue 30 §2), streamed to disk in numpy blocks.

    python -m benchmarks.harness.synth assembly OUT.fa SEED --records N:BP [--contigs N:MIN:MAX] [--width 60|80]
                                      [--bgzip]
    python -m benchmarks.harness.synth sheet OUTDIR N SEED --record-bp BP --contigs N:MIN:MAX --expression K

An assembly is ``records`` chromosomes of a given length (``chr1`` ...) followed by ``contigs`` contigs whose
lengths are drawn uniformly from [MIN, MAX] (``ctg1`` ...): the shape of a real draft assembly (a few huge
records, a long tail of small ones). Bases are uniform ACGT. Every byte is a function of the arguments: the
lengths come from one generator, the bases of record i from a generator of its own (``SeedSequence(seed).spawn``)
drawn in fixed 4 Mbp blocks, so the output does not depend on the machine or on how the file is read later.
Memory is one block (a 4 Gbp assembly is written with ~30 MiB). ``--bgzip`` compresses with pysam's BGZF writer
(blocked gzip, what samtools faidx and the pipeline's FASTA reader accept).

A sheet is N small assemblies and the pipeline's samplesheet CSV (id,fasta,species,expression,regulators,
expression_layout, absolute paths); the first K rows get an expression matrix (samples x genes, the
assets/test/genie3 layout: a quoted header of gene names) and a regulator list, made from a random network.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

import numpy as np

BLOCK = 4 << 20  # bases drawn per numpy call; lines continue across blocks (_lines)
ACGT = np.frombuffer(b"ACGT", dtype=np.uint8)


def lengths(seed: int, records: list[int], contigs: tuple[int, int, int] | None) -> list[tuple[str, int]]:
    """(name, length) of every record of the assembly, in file order."""
    out = [(f"chr{i + 1}", int(n)) for i, n in enumerate(records)]
    if contigs and contigs[0] > 0:
        n, lo, hi = contigs
        rng = np.random.default_rng([seed, 1])
        out += [(f"ctg{i + 1}", int(v)) for i, v in enumerate(rng.integers(lo, hi + 1, n))]
    return out


def _lines(seq: np.ndarray, width: int, col: int) -> tuple[bytes, int]:
    """``seq`` as FASTA lines that continue a line already ``col`` bases long; (bytes, new column)."""
    parts = []
    if col:
        head = seq[: width - col]
        parts.append(head.tobytes())
        col += len(head)
        seq = seq[len(head) :]
        if col == width:
            parts.append(b"\n")
            col = 0
        if not len(seq):
            return b"".join(parts), col
    full = len(seq) // width
    if full:
        body = np.empty((full, width + 1), dtype=np.uint8)
        body[:, :width] = seq[: full * width].reshape(full, width)
        body[:, width] = 10
        parts.append(body.tobytes())
    rest = seq[full * width :]
    if len(rest):
        parts.append(rest.tobytes())
    return b"".join(parts), len(rest)


def write_assembly(
    path: Path,
    seed: int,
    records: list[int],
    contigs: tuple[int, int, int] | None = None,
    width: int = 60,
    bgzip: bool = False,
) -> list[tuple[str, int]]:
    """Write the assembly to ``path`` (a temporary name, then renamed); returns its (name, length) list."""
    if width < 1:
        raise ValueError("line width must be >= 1")
    recs = lengths(seed, records, contigs)
    streams = np.random.SeedSequence(seed).spawn(len(recs))
    tmp = path.with_name(f".{path.name}.tmp")
    if bgzip:
        import pysam

        fh = pysam.BGZFile(str(tmp), "wb")
    else:
        fh = open(tmp, "wb", buffering=1 << 22)
    try:
        for (name, n), ss in zip(recs, streams):
            rng = np.random.default_rng(ss)
            fh.write(f">{name} synthetic seed={seed}\n".encode())
            col = 0
            for s in range(0, n, BLOCK):
                seq = ACGT[rng.integers(0, 4, min(BLOCK, n - s), dtype=np.uint8)]
                text, col = _lines(seq, width, col)
                fh.write(text)
            if col:
                fh.write(b"\n")
    finally:
        fh.close()
    os.replace(tmp, path)
    return recs


def write_expression(
    path: Path, regulators_path: Path, seed: int, genes: int = 20, tfs: int = 5, samples: int = 30
) -> None:
    """Samples x genes TSV (quoted gene names as header, the test fixture's layout) of a random network: each
    target a noisy mix of two TFs; and the TF list."""
    rng = np.random.default_rng([seed, 2])
    R = rng.uniform(0, 1, (tfs, samples))
    names = [f"TF{i + 1}" for i in range(tfs)] + [f"G{i + 1}" for i in range(genes - tfs)]
    parents = np.stack([rng.choice(tfs, 2, replace=False) for _ in range(genes - tfs)])
    T = 0.6 * R[parents[:, 0]] + 0.4 * R[parents[:, 1]] ** 2 + rng.normal(0, 0.05, (genes - tfs, samples))
    X = np.vstack([R, T])
    with open(path, "w") as f:
        f.write("\t".join(f'"{n}"' for n in names) + "\n")
        for s in range(samples):
            f.write("\t".join(f"{v:.6f}" for v in X[:, s]) + "\n")
    regulators_path.write_text("".join(n + "\n" for n in names[:tfs]))


SHEET_COLUMNS = ["id", "fasta", "species", "expression", "regulators", "expression_layout"]


def write_sheet(
    outdir: Path,
    n: int,
    seed: int,
    record_bp: list[int],
    contigs: tuple[int, int, int] | None,
    expression: int,
    width: int = 60,
) -> Path:
    """N assemblies asm001..asmN (seed + i each) in ``outdir`` and ``outdir/samplesheet.csv``; the first
    ``expression`` of them with an expression matrix and regulators."""
    outdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        aid = f"asm{i + 1:03d}"
        fa = outdir / f"{aid}.fa"
        write_assembly(fa, seed + i, record_bp, contigs, width)
        row = {
            "id": aid,
            "fasta": str(fa.resolve()),
            "species": f"Synthetica_{aid}",
            "expression": "",
            "regulators": "",
            "expression_layout": "",
        }
        if i < expression:
            expr, regs = outdir / f"{aid}.expression.tsv", outdir / f"{aid}.regulators.txt"
            write_expression(expr, regs, seed + i)
            row.update(
                expression=str(expr.resolve()), regulators=str(regs.resolve()), expression_layout="samples-x-genes"
            )
        rows.append(row)
    sheet = outdir / "samplesheet.csv"
    tmp = outdir / ".samplesheet.csv.tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=SHEET_COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, sheet)
    return sheet


def single_sheet(sheet: Path, aid: str, fasta: Path) -> Path:
    """The samplesheet of one assembly (no expression); species Synthetica_<aid> (at most 25 bytes: Helixer's
    layout)."""
    sheet.write_text(",".join(SHEET_COLUMNS) + "\n" + f"{aid},{fasta.resolve()},Synthetica_{aid},,,\n")
    return sheet


def _counts(text: str, what: str) -> list[int]:
    try:
        return [int(float(x)) for x in text.split(":")]
    except ValueError:
        raise SystemExit(f"harness.synth: error: {what} {text!r}: expected numbers separated by ':'") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.harness.synth", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="kind", required=True)
    a1 = sub.add_parser("assembly")
    a1.add_argument("out", type=Path)
    a1.add_argument("seed", type=int)
    a1.add_argument("--records", default="", help="N:BP (N records of BP bases)")
    a1.add_argument("--contigs", default=None, help="N:MIN:MAX (N contigs of MIN..MAX bases)")
    a1.add_argument("--width", type=int, default=60)
    a1.add_argument("--bgzip", action="store_true")
    a2 = sub.add_parser("sheet")
    a2.add_argument("outdir", type=Path)
    a2.add_argument("n", type=int)
    a2.add_argument("seed", type=int)
    a2.add_argument("--records", default="1:100000")
    a2.add_argument("--contigs", default=None)
    a2.add_argument("--expression", type=int, default=0)
    a = ap.parse_args(argv)
    rn = _counts(a.records, "--records") if a.records else [0, 0]
    records = [rn[1]] * rn[0]
    contigs = tuple(_counts(a.contigs, "--contigs")) if a.contigs else None
    if a.kind == "assembly":
        recs = write_assembly(a.out, a.seed, records, contigs, a.width, a.bgzip)
        print(f"{a.out}: {len(recs)} records, {sum(n for _, n in recs)} bp", file=sys.stderr)
    else:
        print(write_sheet(a.outdir, a.n, a.seed, records, contigs, a.expression))
    return 0


if __name__ == "__main__":
    sys.exit(main())
