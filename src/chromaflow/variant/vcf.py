"""Variants of ``chromaflow variant-effect`` from a VCF/BCF, read through pysam (htslib).

Each record is split per ALT. SNVs, MNVs, insertions and deletions (REF and ALT plain bases) are scored; symbolic
ALTs (``<DEL>``, ``<*>``), the spanning deletion ``*``, breakends (``]chr:pos]N``), missing ALTs (``.``) and records
with an ``SVTYPE`` INFO field are kept as rows with a ``skipped: ...`` note and counted in the summary.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ..errors import ChromaflowError

#: bases an allele may hold (IUPAC, any case); anything else in REF/ALT makes the record symbolic or bad
_BASES = re.compile(r"[ACGTNRYSWKMBDHVacgtnryswkmbdhv]+")


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

    One-line errors name the file and record: a missing or unreadable file, a missing index for ``--region``,
    REF or ALT with characters that are not bases (and not a symbolic form)."""
    import pysam

    if not os.path.isfile(path):
        raise ChromaflowError(f"{path}: VCF does not exist")
    try:
        vf = pysam.VariantFile(path)
    except (OSError, ValueError) as exc:
        raise ChromaflowError(f"{path}: cannot read as VCF/BCF: {exc}") from None
    out: list[Variant] = []
    with vf:
        if region is not None:
            if vf.index is None:
                raise ChromaflowError(
                    f"{path}: --region {region} needs an index (.tbi or .csi: "
                    f"'tabix -p vcf {path}' or 'bcftools index {path}')"
                )
            try:
                records = vf.fetch(region=region)
            except (ValueError, KeyError) as exc:
                raise ChromaflowError(f"{path}: --region {region}: {exc}") from None
        else:
            records = vf.fetch() if vf.index is not None else iter(vf)
        try:
            for n, rec in enumerate(records, 1):
                _split(path, n, rec, out)
        except (OSError, ValueError) as exc:  # htslib parse errors surface here, after the last good record
            last = f" after {out[-1].chrom}:{out[-1].pos}" if out else ""
            raise ChromaflowError(f"{path}: malformed VCF record{last}: {exc}") from None
    return out


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
