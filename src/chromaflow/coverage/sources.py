"""Coverage sources: coordinate-sorted, indexed BAM files (pysam) and bigWig files (pyBigWig).

BAM counting follows Helixer's ``add_ngs_coverage.py`` (FORMATS.md §7.1), written from that description:

* skipped: unmapped (0x4), secondary (0x100), QC-fail (0x200); counted by default: duplicates (0x400),
  supplementary (0x800), MAPQ 0, and each mate of a pair separately. ``--min-mapq`` and
  ``--skip-duplicates`` are extras that default to Helixer's behaviour;
* a base is counted in ``_coverage`` when an M, = or X block of the read covers it; each N or D base adds 1 to
  ``_spliced_coverage`` instead; I, S, H, P add nothing;
* strand: ``unstranded`` = the strand the read aligned to; ``second`` (dUTP) flips single-end reads and first
  mates; ``first`` flips second mates only. A paired read (0x1) marked neither first nor second mate is an
  error in the stranded modes;
* ``--shift`` (unstranded only): the read's whole aligned span (N/D included, clips excluded) trimmed at the
  5' end, ``[start+4, end)`` for + reads and ``[start, end-5)`` for - reads, clamped to the record, counted in
  ``_coverage`` only. Unlike Helixer, a read shorter than the shift simply counts nothing.

Where the C kernel builds (``_native.py``, ``_bam.c``: htslib from pysam's wheel), a window is counted there: the
same reads (the index's query, as pysam's ``fetch``), the CIGAR walked once per read, difference arrays summed into
coverage. Otherwise through pysam: aligned blocks come from ``AlignedSegment.get_blocks()`` (M/=/X runs, in C);
the reference gaps between them, and before the first / after the last block, are exactly the N and D runs (the
only other reference-consuming operations), so no CIGAR is walked in Python; per-window counts are summed with
``np.bincount`` of interval starts and ends (a difference array), then ``cumsum``. Tests check both ways give the
same arrays and errors.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

import numpy as np

from ..utils.errors import ChromaflowError

SKIP_FLAGS = 0x4 | 0x100 | 0x200
STRAND_MODES = ("unstranded", "first", "second")
SHIFT_PLUS, SHIFT_MINUS = 4, 5


@dataclass(frozen=True)
class CountOptions:
    """How coverage is counted: the BAM strand mode ('unstranded', 'first', 'second'), ``shift`` (--shift), the
    minimum mapping quality, whether duplicates are skipped, and how a bigWig's value is split over the strands
    ('half' or 'both')."""

    strand_mode: str = "unstranded"
    shift: bool = False
    min_mapq: int = 0
    skip_duplicates: bool = False
    bigwig_split: str = "half"


# --------------------------------------------------------------------------------------------------
# validation (before anything is written)
# --------------------------------------------------------------------------------------------------
def check_bam(path: str, needed: dict[str, int], index: str | None = None) -> None:
    """Raise a one-line error unless ``path`` is a coordinate-sorted, indexed BAM holding every needed seqid
    with the genome's length and at least one mapped read on them."""
    import pysam

    if not os.path.exists(path):
        raise ChromaflowError(f"{path}: BAM file does not exist")
    if not os.path.isfile(path):
        raise ChromaflowError(f"{path}: BAM path is not a regular file")
    if os.path.getsize(path) == 0:
        raise ChromaflowError(f"{path}: BAM file is empty (0 bytes)")
    if index is not None and not os.path.isfile(index):
        raise ChromaflowError(f"{index}: BAM index does not exist")
    try:
        bam = pysam.AlignmentFile(path, "rb", index_filename=index)
    except (ValueError, OSError) as exc:
        where = f"{path} (index {index})" if index else path
        raise ChromaflowError(f"{where}: not a readable BAM file or index ({_first_line(exc)})") from None
    with bam:
        if not bam.is_bam:
            raise ChromaflowError(f"{path}: not a BAM file (SAM/CRAM are not supported; convert with samtools view -b)")
        so = bam.header.to_dict().get("HD", {}).get("SO")
        if so is not None and so != "coordinate":
            raise ChromaflowError(
                f"{path}: BAM is not coordinate-sorted (header SO:{so}); run samtools sort and samtools index"
            )
        if not bam.has_index():
            raise ChromaflowError(f"{path}: BAM has no index (.bai/.csi); run samtools index {path}")
        header_len = dict(zip(bam.references, bam.lengths))
        missing = [s for s in needed if s not in header_len]
        if missing:
            more = f" (+{len(missing) - 3} more)" if len(missing) > 3 else ""
            raise ChromaflowError(
                f"{path}: BAM header has no @SQ for seqid {', '.join(missing[:3])}{more} of the "
                f"genome h5 (a BAM aligned to another assembly?)"
            )
        for s, ln in needed.items():
            if header_len[s] != ln:
                raise ChromaflowError(
                    f"{path}: @SQ SN:{s} has LN:{header_len[s]}, but the genome h5 record {s} is "
                    f"{ln} bp (a BAM aligned to another assembly?)"
                )
        try:
            stats = {s.contig: s.mapped for s in bam.get_index_statistics()}
        except (ValueError, OSError) as exc:
            raise ChromaflowError(f"{path}: cannot read the BAM index ({_first_line(exc)})") from None
        if sum(stats.get(s, 0) for s in needed) == 0:
            raise ChromaflowError(
                f"{path}: BAM has no mapped reads on the genome's {len(needed)} sequence(s) (empty BAM?)"
            )


def check_bigwig(path: str, needed: dict[str, int]) -> None:
    """Raise ChromaflowError unless ``path`` is a readable bigWig holding every chromosome of ``needed`` ({seqid:
    length}) with that length."""
    import pyBigWig

    if not os.path.isfile(path):
        raise ChromaflowError(f"{path}: bigWig file does not exist")
    try:
        bw = pyBigWig.open(path)
    except (RuntimeError, OSError) as exc:
        raise ChromaflowError(f"{path}: not a readable bigWig file ({_first_line(exc)})") from None
    if bw is None or not bw.isBigWig():
        raise ChromaflowError(f"{path}: not a bigWig file")
    try:
        chroms = bw.chroms()
        missing = [s for s in needed if s not in chroms]
        if missing:
            raise ChromaflowError(f"{path}: bigWig has no chromosome {', '.join(missing[:3])} of the genome h5")
        for s, ln in needed.items():
            if chroms[s] != ln:
                raise ChromaflowError(
                    f"{path}: bigWig chromosome {s} is {chroms[s]} bp, but the genome h5 record is {ln} bp"
                )
    finally:
        bw.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# --------------------------------------------------------------------------------------------------
# opening a BAM for counting
# --------------------------------------------------------------------------------------------------
class HtsBam:
    """A BAM opened by the C counting kernel (``_bam.c``) with its index (``index``, else the .bai/.csi beside it);
    :meth:`close` frees it. Counted by :func:`count_bam_window` like a ``pysam.AlignmentFile``."""

    def __init__(self, lib, path: str, index: str | None = None):
        self._lib = lib
        self._h = lib.cf_bam_open(os.fsencode(path), os.fsencode(index) if index else None)
        if not self._h:
            raise ChromaflowError(f"{path}: not a readable BAM file or index")

    def close(self) -> None:
        """Free the reader (idempotent)."""
        if self._h:
            self._lib.cf_bam_close(self._h)
            self._h = None


def open_bam(path: str, index: str | None = None):
    """``path`` opened for :func:`count_bam_window`: an :class:`HtsBam` where the C kernel is built, else a
    ``pysam.AlignmentFile``."""
    from . import _native

    lib = _native.load()
    if lib is not None:
        return HtsBam(lib, path, index)
    import pysam

    return pysam.AlignmentFile(path, "rb", index_filename=index)


# --------------------------------------------------------------------------------------------------
# counting one window
# --------------------------------------------------------------------------------------------------
def _pile(starts: list[int], ends: list[int], lo: int, n: int) -> np.ndarray:
    """Coverage over [lo, lo+n) of half-open intervals [starts[i], ends[i]) (clipped to the window)."""
    if not starts:
        return np.zeros(n, dtype=np.int64)
    s = np.clip(np.asarray(starts, dtype=np.int64) - lo, 0, n)
    e = np.clip(np.asarray(ends, dtype=np.int64) - lo, 0, n)
    diff = np.bincount(s, minlength=n + 1)
    diff -= np.bincount(e, minlength=n + 1)  # in place: each window-sized temporary is fresh pages to zero
    return np.cumsum(diff[:n], out=diff[:n])


def _flip_table(mode: str) -> tuple[bool | None, ...]:
    """Whether a read's strand is flipped in the stranded ``mode`` ('first' or 'second'), indexed by its
    ``flag & 0xC1`` (paired 0x1, first mate 0x40, second mate 0x80): single-end reads flip in ``second`` (dUTP),
    first mates in ``second``, second mates in ``first``; None for a paired read marked neither mate (its strand
    cannot be interpreted)."""
    table: list[bool | None] = []
    for bits in range(0xC1 + 1):
        if not bits & 0x1:
            table.append(mode == "second")
        elif bits & (0x40 | 0x80):
            first = bool(bits & 0x40)
            table.append(first if mode == "second" else not first)
        else:
            table.append(None)
    return tuple(table)


def _unsorted_error(path: str, name: str, seqid: str, start: int, prev_start: int) -> ChromaflowError:
    return ChromaflowError(
        f"{path}: BAM is not coordinate-sorted (read {name} at {seqid}:{start + 1} "
        f"after {prev_start + 1}); run samtools sort and samtools index"
    )


def _mate_error(path: str, name: str, seqid: str, start: int, flag: int) -> ChromaflowError:
    return ChromaflowError(
        f"{path}: read {name} at {seqid}:{start + 1} is paired (flag {flag}) but marked neither "
        f"first (0x40) nor second (0x80) mate, so its strand cannot be interpreted"
    )


# One loop on purpose (issue 28): it runs once per read, and moving the strand rule, the --shift trimming and the
# block walk into helpers (one call each per read) made it 3 % (unstranded), 15 % (stranded) and 31 % (--shift)
# slower on 300,000 reads (best of 5, pysam fetch included). The strand rule is a table built once per window
# (:func:`_flip_table`), looked up per read; only the error paths call helpers.
def count_bam_window(bam, path: str, seqid: str, lo: int, hi: int, record_len: int, opt: CountOptions):
    """Per-strand coverage over [lo, hi) of ``seqid``: (cov+, cov-, spliced+, spliced-) int64 arrays, and the
    number of counted reads that start in the window. ``bam``: an :class:`HtsBam` (counted in C) or a
    ``pysam.AlignmentFile``."""
    if isinstance(bam, HtsBam):
        return _count_in_c(bam, path, seqid, lo, hi, record_len, opt)
    import pysam

    # lists: 0 = cov+, 1 = cov-, 2 = spliced+, 3 = spliced- ; starts and ends separately
    S: tuple[list[int], ...] = ([], [], [], [])
    E: tuple[list[int], ...] = ([], [], [], [])
    stranded = opt.strand_mode != "unstranded"
    flips = _flip_table(opt.strand_mode) if stranded else ()
    min_mapq, skip = opt.min_mapq, SKIP_FLAGS | (0x400 if opt.skip_duplicates else 0)
    shift = opt.shift
    n_counted = 0
    prev_start = -1
    quiet = pysam.set_verbosity(0)  # a corrupt block is reported once, below, naming the file
    try:
        for r in bam.fetch(seqid, lo, hi):
            start = r.reference_start
            if start < prev_start:
                raise _unsorted_error(path, r.query_name, seqid, start, prev_start)
            prev_start = start
            f = r.flag
            if f & skip or (min_mapq and r.mapping_quality < min_mapq):
                continue
            minus = bool(f & 0x10)
            if stranded:
                flip = flips[f & 0xC1]
                if flip is None:
                    raise _mate_error(path, r.query_name, seqid, start, f)
                minus ^= flip
            if start >= lo:
                n_counted += 1
            k = 1 if minus else 0
            if shift:
                end = r.reference_end
                if end is None:  # no CIGAR: nothing aligned (as without --shift)
                    continue
                if minus:
                    end -= SHIFT_MINUS
                else:
                    start += SHIFT_PLUS
                if start < 0:
                    start = 0
                if end > record_len:
                    end = record_len
                if end > start:
                    S[k].append(start)
                    E[k].append(end)
                continue
            s_list, e_list, gs, ge = S[k], E[k], S[k + 2], E[k + 2]
            prev = start
            for a, b in r.get_blocks():
                if a > prev:
                    gs.append(prev)
                    ge.append(a)
                s_list.append(a)
                e_list.append(b)
                prev = b
            end = r.reference_end
            if end is not None and end > prev:
                gs.append(prev)
                ge.append(end)
    except OSError as exc:
        raise ChromaflowError(
            f"{path}: cannot read the BAM's records in {seqid}:{lo + 1}-{hi} (truncated or corrupt: {_first_line(exc)})"
        ) from None
    finally:
        pysam.set_verbosity(quiet)
    n = hi - lo
    return tuple(_pile(S[i], E[i], lo, n) for i in range(4)), n_counted


_C_UNSORTED, _C_MATE, _C_READ = 1, 2, 3


def _count_in_c(bam: HtsBam, path: str, seqid: str, lo: int, hi: int, record_len: int, opt: CountOptions):
    """:func:`count_bam_window` through the C kernel: the same arrays, counts and one-line errors."""
    n = hi - lo
    out = np.zeros((4, n), dtype=np.int64)
    flips = None
    if opt.strand_mode != "unstranded":
        flips = np.array([-1 if f is None else int(f) for f in _flip_table(opt.strand_mode)], dtype=np.int8)
    skip = SKIP_FLAGS | (0x400 if opt.skip_duplicates else 0)
    counted, info, name = ctypes.c_int64(0), (ctypes.c_int64 * 3)(), ctypes.create_string_buffer(256)
    rc = bam._lib.cf_bam_count(
        bam._h,
        seqid.encode(),
        lo,
        hi,
        record_len,
        None if flips is None else flips.ctypes.data,
        int(opt.shift),
        opt.min_mapq,
        skip,
        out.ctypes.data,
        ctypes.byref(counted),
        name,
        info,
    )
    read = name.value.decode(errors="replace")
    if rc == _C_UNSORTED:
        raise _unsorted_error(path, read, seqid, info[0], info[1])
    if rc == _C_MATE:
        raise _mate_error(path, read, seqid, info[0], int(info[2]))
    if rc == _C_READ:
        raise ChromaflowError(f"{path}: cannot read the BAM's records in {seqid}:{lo + 1}-{hi} (truncated or corrupt)")
    if rc:
        raise ChromaflowError(f"{path}: cannot query {seqid}:{lo + 1}-{hi} in the BAM's index")
    return (out[0], out[1], out[2], out[3]), int(counted.value)


def bigwig_window(bw, path: str, seqid: str, lo: int, hi: int, opt: CountOptions):
    """(cov+, cov-, zeros, zeros) float32 from a bigWig over [lo, hi): missing data = 0; with the default
    ``half`` split each strand gets half the value (an unstranded track's expected per-strand coverage, the scale
    of ``--unstranded`` BAM counts), with ``both`` each strand gets the full value."""
    try:
        v = np.asarray(bw.values(seqid, lo, hi, numpy=True), dtype=np.float32)
    except RuntimeError as exc:
        raise ChromaflowError(f"{path}: cannot read {seqid}:{lo + 1}-{hi} ({_first_line(exc)})") from None
    v = np.nan_to_num(v, nan=0.0)
    if opt.bigwig_split == "half":
        v = v * np.float32(0.5)
    z = np.zeros(hi - lo, dtype=np.float32)
    return (v, v, z, z), 0
