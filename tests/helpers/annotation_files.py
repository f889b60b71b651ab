"""Factories of annotation inputs (GFF3 / GTF) for the annotation and motifs tests."""

from __future__ import annotations

import gzip
import random
from pathlib import Path


def random_genes(seed: int, sizes: dict[str, int], n: int, min_len: int = 100, max_len: int = 2500):
    """n genes (id, seqid, start 1-based, end inclusive, strand) placed at random inside ``sizes``; a few touch the
    record ends, so windows get clipped."""
    rng = random.Random(seed)
    names = list(sizes)
    genes = []
    for i in range(n):
        seqid = names[i % len(names)]
        length = rng.randint(min_len, max_len)
        if i == 0:
            start = 1  # at the very start: a - strand window past the start is clipped... and + upstream too
        elif i == 1:
            start = sizes[seqid] - length + 1  # ends at the record's end
        else:
            start = rng.randint(1, sizes[seqid] - length)
        genes.append((f"gene{i:03d}", seqid, start, start + length - 1, rng.choice("+-")))
    return genes


def gff3_text(genes, *, shuffle_seed: int | None = None, with_children: bool = True) -> str:
    lines = []
    for gid, seqid, s, e, st in genes:
        block = [f"{seqid}\ttest\tgene\t{s}\t{e}\t.\t{st}\t.\tID={gid};Name={gid.upper()}"]
        if with_children:
            block.append(f"{seqid}\ttest\tmRNA\t{s}\t{e}\t.\t{st}\t.\tID={gid}.t1;Parent={gid}")
            block.append(f"{seqid}\ttest\texon\t{s}\t{min(e, s + 50)}\t.\t{st}\t.\tID={gid}.t1.e1;Parent={gid}.t1")
        lines.append(block)
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(lines)
    return "##gff-version 3\n" + "".join(line + "\n" for block in lines for line in block)


def gtf_text(genes, *, gene_lines: bool = True) -> str:
    out = []
    for gid, seqid, s, e, st in genes:
        attrs = f'gene_id "{gid}"; transcript_id "{gid}.t1";'
        if gene_lines:
            out.append(f'{seqid}\ttest\tgene\t{s}\t{e}\t.\t{st}\t.\tgene_id "{gid}";')
        out.append(f"{seqid}\ttest\ttranscript\t{s}\t{e}\t.\t{st}\t.\t{attrs}")
        out.append(f"{seqid}\ttest\texon\t{s}\t{e}\t.\t{st}\t.\t{attrs} exon_number \"1\";")
    return "".join(line + "\n" for line in out)


def write(path: Path, text: str, gz: bool = False) -> Path:
    if gz:
        with open(path, "wb") as fh, gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as z:
            z.write(text.encode())
    else:
        path.write_text(text)
    return path
