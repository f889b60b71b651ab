"""The genome reference beside the tracks (``chromaflow bigwig --fasta``): ``<basename>.fa`` + ``.fa.fai`` for the IGV
session (IGV desktop and igv.js both open a FASTA with its index from a session) and ``<basename>.2bit`` for the UCSC
hub's ``twoBitPath`` (UCSC and igv.js read assembly hubs from a .2bit).

The assembly's FASTA (plain, gzip or BGZF) is read once with the strict streaming reader (genome/fasta.py); its
records must be the predictions' sequences with the same lengths, blacklisted seqids left out. The plain FASTA is
rewritten (60 bases a line, the bases as in the input, case kept) rather than bgzipped: both browsers read a plain
FASTA + .fai from a session, and its bytes do not depend on a compressor.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import BinaryIO

from ..utils.errors import ChromaflowError
from ..genome.fasta import FastaReader
from ..utils.outputs import atomic_output
from .twobit import TwoBitWriter

#: bases per line of the written FASTA (samtools faidx's and UCSC's usual width)
LINE_BASES = 60


def genome_file_names(basename: str) -> list[str]:
    """The genome files of ``--fasta``: ``<basename>.fa``, ``<basename>.fa.fai`` and ``<basename>.2bit``."""
    return [f"{basename}.fa", f"{basename}.fa.fai", f"{basename}.2bit"]


def _write_fasta_record(fa: BinaryIO, name: str, seq: bytes | bytearray) -> tuple[int, int]:
    """Write one record as FASTA text, :data:`LINE_BASES` bases a line, 65,536 lines at a time.

    Parameters
    ----------
    fa : binary file
    name : str
    seq : bytes, shape (n,)
        The bases, one byte each.

    Returns
    -------
    tuple of (int, int)
        The bytes of the header line and of the whole record.
    """
    head = b">" + name.encode() + b"\n"
    fa.write(head)
    size = len(head)
    view = memoryview(seq)
    step = LINE_BASES << 16
    for i in range(0, len(seq), step):
        part = view[i : i + step]
        text = b"\n".join(part[j : j + LINE_BASES] for j in range(0, len(part), LINE_BASES)) + b"\n"
        fa.write(text)
        size += len(text)
    return len(head), size


def write_genome_files(
    stack: contextlib.ExitStack,
    fasta: str,
    chroms: list[tuple[str, int]],
    blacklist: set[str],
    outdir: Path,
    basename: str,
    source: str,
) -> list[Path]:
    """Write the genome files of ``fasta`` into ``outdir`` under temporary names that ``stack`` renames into place
    with the tracks (a failure leaves none).

    Parameters
    ----------
    stack : contextlib.ExitStack
        The call's output stack: the files are renamed into place when it closes without error.
    fasta : str
        The assembly's FASTA (plain or gzip).
    chroms : list of (str, int), shape (chromosomes,)
        The predictions' sequences and sizes (chrom.sizes), blacklisted ones left out.
    blacklist : set of str
        Seqids left out of the tracks: their FASTA records are left out too.
    outdir, basename : Path, str
        Where the files go and their name (:func:`genome_file_names`).
    source : str
        The predictions file, named in the errors.

    Returns
    -------
    list of Path
        The .fa, .fa.fai and .2bit paths.

    Raises
    ------
    ChromaflowError
        One line naming ``fasta`` and the record: a record that is not a sequence of the predictions, one of
        another length, a sequence of the predictions with no record (and the reader's own errors).
    """
    paths = [outdir / n for n in genome_file_names(basename)]
    tmps = [stack.enter_context(atomic_output(p, force=True)) for p in paths]
    sizes = dict(chroms)
    seen: set[str] = set()
    fai = []
    with open(tmps[0], "wb") as fa, open(tmps[2], "wb") as tb:
        twobit = TwoBitWriter(tb)
        offset = 0
        for rec in FastaReader(fasta):
            if rec.seqid in blacklist:
                continue
            _check_record(fasta, rec.seqid, rec.line, len(rec.seq), sizes, source)
            seen.add(rec.seqid)
            head, size = _write_fasta_record(fa, rec.seqid, rec.seq)
            fai.append(f"{rec.seqid}\t{len(rec.seq)}\t{offset + head}\t{LINE_BASES}\t{LINE_BASES + 1}\n")
            offset += size
            twobit.add(rec.seqid, rec.seq)
        missing = [c for c, _ in chroms if c not in seen]
        if missing:
            raise ChromaflowError(f"{fasta}: no record {missing[0]!r} (a sequence of {source})")
        twobit.close()
    tmps[1].write_text("".join(fai))
    return paths


def _check_record(fasta: str, seqid: str, line: int, n: int, sizes: dict[str, int], source: str) -> None:
    """ChromaflowError (one line naming ``fasta`` and the record) unless ``seqid`` is a sequence of the predictions
    with ``n`` bp."""
    if seqid not in sizes:
        raise ChromaflowError(
            f"{fasta}: record {seqid!r} (line {line}) is not a sequence of {source} (give the assembly's FASTA)"
        )
    if sizes[seqid] != n:
        raise ChromaflowError(f"{fasta}: record {seqid!r} (line {line}) has {n} bp but {source} has {sizes[seqid]} bp")
