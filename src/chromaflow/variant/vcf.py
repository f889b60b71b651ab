"""Variants of ``chromaflow variant-effect`` from a VCF/BCF, read through pysam (htslib).

Each record is split per ALT. SNVs, MNVs, insertions and deletions (REF and ALT plain bases) are scored; symbolic
ALTs (``<DEL>``, ``<*>``), the spanning deletion ``*``, breakends (``]chr:pos]N``), missing ALTs (``.``) and records
with an ``SVTYPE`` INFO field are kept as rows with a ``skipped: ...`` note and counted in the summary.
"""

from __future__ import annotations

import gzip
import os
import re
from dataclasses import dataclass

from ..utils.errors import ChromaflowError

#: bases an allele may hold (IUPAC, any case); anything else in REF/ALT makes the record symbolic or bad
_BASES = re.compile(r"[ACGTNRYSWKMBDHVacgtnryswkmbdhv]+")
#: the UTF-8 byte-order mark a Windows editor writes first
_BOM = b"\xef\xbb\xbf"


@dataclass
class Variant:
    """One ALT allele of a VCF record: its output row ``index``, ``chrom``, 1-based ``pos``, ``id``, ``ref`` and
    ``alt``, and ``skip``, why it is not scored (None: scored)."""

    index: int  # row order in the output (VCF order, ALTs in order)
    chrom: str
    pos: int  # 1-based, as in the VCF
    id: str
    ref: str
    alt: str
    skip: str | None = None  # why it is not scored (None: scored)

    @property
    def start(self) -> int:
        """0-based position of the first REF base."""
        return self.pos - 1

    def name(self) -> str:
        """The variant as text: ``chrom:pos id REF>ALT``."""
        return f"{self.chrom}:{self.pos} {self.id} {self.ref}>{self.alt}"


def _skip_reason(alt: str | None, svtype) -> str | None:
    if alt is None or alt == ".":
        return "skipped: no ALT"
    if alt == "*":
        return "skipped: spanning deletion (*)"
    if alt.startswith("<"):
        return f"skipped: symbolic ALT {alt}"
    if "[" in alt or "]" in alt:
        return "skipped: breakend ALT"
    if svtype is not None:
        return f"skipped: structural variant (SVTYPE={svtype})"
    return None


def read_variants(path: str, region: str | None = None) -> list[Variant]:
    """Every (record, ALT) of ``path`` (optionally only ``region``, which needs a .tbi/.csi index), in file order.

    One-line errors name the file and record: a missing or unreadable file, a missing index for ``--region`` (a
    plain-gzip VCF cannot have one), REF or ALT with characters that are not bases (and not a symbolic form).
    htslib's own stderr lines are kept quiet while the file is read (``pysam.set_verbosity(0)``): a bgzip VCF
    without an index printed ``[E::idx_find_and_load] Could not retrieve index file`` on a successful run."""
    import pysam

    if not os.path.isfile(path):
        raise ChromaflowError(f"{path}: VCF does not exist")
    before = pysam.set_verbosity(0)
    try:
        out: list[Variant] = []
        with _open(path, region) as vf:
            records = _records(vf, path, region)
            try:
                for n, rec in enumerate(records, 1):
                    _split(path, n, rec, out)
            except (OSError, ValueError) as exc:  # htslib parse errors surface here, after the last good record
                last = f" after {out[-1].chrom}:{out[-1].pos}" if out else ""
                raise ChromaflowError(f"{path}: malformed VCF record{last}: {exc}") from None
        return out
    finally:
        pysam.set_verbosity(before)


def _open(path: str, region: str | None):
    """The VCF/BCF opened with pysam. Plain gzip (not bgzip) and a plain VCF starting with a UTF-8 byte-order mark
    are read as a stream from an open file (htslib reads plain gzip in order; pysam's open of it by name seeks,
    which plain gzip cannot); a region query of plain gzip is refused (only bgzip can be indexed)."""
    import pysam

    kind, bom = _kind(path)
    if kind == "gzip" and region is not None:
        raise ChromaflowError(
            f"{path}: gzip, not bgzip: --region needs an index, which only a bgzip VCF can have: recompress with "
            f"bgzip and index it (gzip -dc {path} | bgzip -c > fixed.vcf.gz && tabix -p vcf fixed.vcf.gz)"
        )
    try:
        if kind == "gzip" or bom:
            with open(path, "rb") as fh:
                fh.seek(len(_BOM) if bom else 0)
                return pysam.VariantFile(fh)  # pysam reads a duplicate of the descriptor, from its offset
        return pysam.VariantFile(path)
    except (OSError, ValueError) as exc:
        raise ChromaflowError(f"{path}: cannot read as VCF/BCF: {exc}") from None


def _kind(path: str) -> tuple[str, bool]:
    """(``plain``, ``bgzf`` or ``gzip``, whether a plain file starts with a UTF-8 byte-order mark); a mark inside a
    compressed VCF, which htslib cannot skip, is a one-line error saying how to remove it."""
    from ..genome.faidx import compression

    try:
        kind = compression(path)
        if kind == "plain":
            with open(path, "rb") as fh:
                return kind, fh.read(len(_BOM)) == _BOM
        with gzip.open(path, "rb") as gz:
            head = gz.read(len(_BOM))
    except (OSError, EOFError) as exc:  # unreadable, or a corrupt gzip
        raise ChromaflowError(f"{path}: cannot read as VCF/BCF: {getattr(exc, 'strerror', None) or exc}") from None
    if head == _BOM:
        raise ChromaflowError(
            f"{path}: the compressed text starts with a UTF-8 byte-order mark, which htslib cannot read: "
            f"remove it (gzip -dc {path} | sed '1s/^\\xEF\\xBB\\xBF//' | bgzip -c > fixed.vcf.gz)"
        )
    return kind, False


def _records(vf, path: str, region: str | None):
    """The records of ``vf``: those of ``region`` (through the index), else all of them in file order."""
    if region is None:
        return vf.fetch() if vf.index is not None else iter(vf)
    if vf.index is None:
        raise ChromaflowError(
            f"{path}: --region {region} needs an index (.tbi or .csi: 'tabix -p vcf {path}' or 'bcftools index {path}')"
        )
    try:
        return vf.fetch(region=region)
    except (ValueError, KeyError) as exc:
        raise ChromaflowError(f"{path}: --region {region}: {exc}") from None


def _split(path: str, n: int, rec, out: list[Variant]) -> None:
    ref = rec.ref
    where = f"{path}: record {n} ({rec.chrom}:{rec.pos})"
    if ref is None or not _BASES.fullmatch(ref):
        raise ChromaflowError(f"{where}: REF {ref!r} is not a sequence of bases")
    svtype = rec.info.get("SVTYPE") if "SVTYPE" in rec.header.info else None
    alts = rec.alts or (None,)
    vid = rec.id if rec.id is not None else "."
    for alt in alts:
        reason = _skip_reason(alt, svtype)
        if reason is None and not _BASES.fullmatch(alt or ""):  # reason is None: alt is a str
            raise ChromaflowError(f"{where}: ALT {alt!r} is neither bases nor a symbolic allele")
        if reason is None and (alt or "").upper() == ref.upper():
            reason = "skipped: ALT equals REF"
        out.append(Variant(len(out), rec.chrom, int(rec.pos), vid, ref, alt if alt is not None else ".", reason))
