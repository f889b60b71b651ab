"""add-coverage: Helixer's ``add_ngs_coverage.py`` against ``chromaflow add-coverage``.

The stage's sizes (``FULL`` for people, ``QUICK`` for CI), the peers it needs, its builder (``build(ctx)``:
(warm-up commands, cases)) and its helpers; ``benchmarks/stages/__init__.py`` lists the stages in run order.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..harness.core import Case, Contender
from ..harness.stagekit import (
    Ctx,
    agree_child,
    gen,
    ours,
    sizes,
)

#: launchers of ../shared/peers/bin this stage needs
PEERS = ['peer-helixer-add-ngs-coverage']
#: what limits the stage on the CPU (issue 55's profiles), beside its target in the generated tables
LIMIT = (
    "HDF5's shuffle + LZF of the int64 rows (the layout Helixer writes; our encoder, h5py's bytes: ~40 %), then the "
    "BAM (BGZF inflate + the C walk over htslib's records, ~20 %), cutting rows and the start-up "
    "([docs/training.md](../docs/training.md), add-coverage's speed)"
)
#: sizes of the full run (keys are the results files' and the docs' names; Ctx.cfg merges every stage's)
FULL = {
    # add-coverage: (records, bp per record, reads of 100 bp); the first is the shape of FORMATS.md §7.1's peer
    # measurement, the second the same read density on a 5x smaller genome (peak RSS must not grow with the genome)
    "coverage": [(5, 10_000_000, 1_000_000), (5, 2_000_000, 200_000)],
    "coverage_threads": [1, 2],
}
#: sizes of the --quick run
QUICK = {
    "coverage": [(2, 200_000, 20_000)],
    "coverage_threads": [1, 2],
}


COVERAGE_PREFIX = "atacseq"


def _fresh_genome(src: Path):
    """Setup of an add-coverage run: a fresh copy of the genome h5 in the run dir (both tools update it in place;
    the copy is not timed)."""

    def setup(d: Path, r: int) -> None:
        d.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, d / "genome.h5")

    return setup


def _coverage_peer(ctx: Ctx, d: Path, bam: Path) -> Contender:
    """Helixer's add_ngs_coverage.py, one thread (its default is 8), on a fresh copy of the genome h5."""
    return Contender(
        "helixer",
        "Helixer add_ngs_coverage.py --threads 1",
        "peer",
        lambda dd, r: [
            ctx.peer("peer-helixer-add-ngs-coverage"),
            "-s",
            "sp",
            "-d",
            dd / "genome.h5",
            "-b",
            bam,
            "--unstranded",
            "--dataset-prefix",
            COVERAGE_PREFIX,
            "--threads",
            "1",
        ],
        outputs=sizes("genome.h5"),
        setup=_fresh_genome(d / "genome.h5"),
    )


def _coverage_ours(d: Path, bam: Path, threads: int) -> Contender:
    """``chromaflow add-coverage --threads THREADS`` on a fresh copy of the genome h5."""
    return Contender(
        f"chromaflow t{threads}",
        f"chromaflow add-coverage --threads {threads}",
        "ours",
        lambda dd, r: ours(
            "add-coverage",
            "--h5",
            dd / "genome.h5",
            "--prefix",
            COVERAGE_PREFIX,
            "--bam",
            bam,
            "--unstranded",
            "--threads",
            threads,
        ),
        outputs=sizes("genome.h5"),
        setup=_fresh_genome(d / "genome.h5"),
    )


def _coverage_agree(mine: list[Contender]):
    """agree(): each of ours' coverage datasets and h5 layout against Helixer's."""

    def agree(dirs: dict) -> dict:
        per = {
            c.key: agree_child("coverage", dirs[c.key] / "genome.h5", dirs["helixer"] / "genome.h5", COVERAGE_PREFIX)
            for c in mine
        }
        return {
            "ok": all(v.get("ok") for v in per.values()),
            "per_contender": per,
            "detail": "; ".join(f"{k}: {v.get('detail')}" for k, v in per.items()),
        }

    return agree


def _coverage_case(ctx: Ctx, records: int, bp: int, reads: int) -> Case:
    """One genome h5 + BAM size: the peer and ours at each of ``coverage_threads``."""
    d = ctx.inputs() / f"coverage_{records}x{bp}bp_{reads}reads_seed1"
    name = f"{records}x{bp / 1e6:g}Mbp_{reads / 1e3:g}kreads"
    bam = d / "reads.bam"
    peer = _coverage_peer(ctx, d, bam)
    mine = [_coverage_ours(d, bam, t) for t in ctx.cfg["coverage_threads"]]

    def prepare():
        if not d.exists():
            ctx.log(f"  generating {d.name}")
            gen("coverage", d, records, bp, reads, 1)

    return Case(
        "coverage",
        name,
        {
            "records": records,
            "bp_per_record": bp,
            "reads": reads,
            "read_len": 100,
            "spliced_fraction": 0.2,
            "intron": 1000,
            "mode": "--unstranded",
            "prefix": COVERAGE_PREFIX,
            "seed": 1,
        },
        [peer, *mine],
        [(c.key, "helixer") for c in mine],
        _coverage_agree(mine),
        prepare=prepare,
        note="each run on a fresh copy of the genome h5 (not timed), updated in place; outputs "
        "must equal Helixer's (values and h5 layout)",
    )


def _coverage_warm(ctx: Ctx) -> list:
    """The warm-up commands (their small input made here when absent)."""
    wd = ctx.inputs() / "coverage_1x100000bp_2000reads_seed2"
    if not wd.exists():
        gen("coverage", wd, 1, 100_000, 2000, 2)
    # the peer updates in place: a copy first, in the same command (each warm-up command gets a fresh dir)
    return [
        [
            "sh",
            "-c",
            'cp "$1" "$2/w.h5" && exec "$3" -s sp -d "$2/w.h5" -b "$4" --unstranded --dataset-prefix w --threads 1',
            "sh",
            wd / "genome.h5",
            "{d}",
            ctx.peer("peer-helixer-add-ngs-coverage"),
            wd / "reads.bam",
        ],
        ours(
            "add-coverage",
            "--h5",
            wd / "genome.h5",
            "--prefix",
            "w",
            "--bam",
            wd / "reads.bam",
            "--unstranded",
            "--out",
            "{d}/w2.h5",
        ),
    ]


def coverage(ctx: Ctx) -> tuple[list, list[Case]]:
    """Each tool adds --unstranded coverage (prefix atacseq) of the same BAM to its own fresh copy of the same genome
    h5, in place; the peer with --threads 1 (its default is 8), ours with each of ``coverage_threads``."""
    cases = []
    warm = []
    for records, bp, reads in ctx.cfg["coverage"]:
        cases.append(_coverage_case(ctx, records, bp, reads))
        if not warm and not ctx.quick:  # quick runs no warm-up
            warm = _coverage_warm(ctx)
    return warm, cases


build = coverage
