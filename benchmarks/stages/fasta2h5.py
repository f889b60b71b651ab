"""FASTA -> h5: Helixer ``fasta2h5.py`` against ``chromaflow fasta2h5`` (and its deflate variants).

The stage's sizes (``FULL`` for people, ``QUICK`` for CI), the peers it needs, its builder (``build(ctx)``:
(warm-up commands, cases)) and its helpers; ``benchmarks/stages/__init__.py`` lists the stages in run order.
"""

from __future__ import annotations

from pathlib import Path

from ..harness.core import Case, Contender
from ..harness.stagekit import (
    SPECIES,
    Ctx,
    L,
    agree_child,
    fasta,
    ours,
    sizes,
)
from ..harness.tables import (
    NO_RUN,
    _f,
    _machine_line,
    _mark,
    _ratio,
    _spread,
)

#: launchers of ../shared/peers/bin this stage needs
PEERS = ['peer-helixer-fasta2h5']
#: sizes of the full run (keys are the results files' and the docs' names; Ctx.cfg merges every stage's)
FULL = {
    "fasta2h5": [("5x10Mbp", 50_000_000, 5), ("1x50Mbp", 50_000_000, 1), ("10000x5kbp", 50_000_000, 10_000)],
    "fasta2h5_variants": ["onehot:5", "zlib", "libdeflate", "isal"],  # besides the default, on the first case
}
#: sizes of the --quick run
QUICK = {
    "fasta2h5": [("5x200kbp", 1_000_000, 5), ("1x1Mbp", 1_000_000, 1), ("200x5kbp", 1_000_000, 200)],
    "fasta2h5_variants": ["zlib"],
}


def _fasta2h5_warm(ctx: Ctx) -> list:
    """The warm-up commands: each tool once on a small FASTA (made here when absent)."""
    small = fasta(ctx, 200_000, 2, seed=7)
    return [
        [
            ctx.peer("peer-helixer-fasta2h5"),
            "--fasta-path",
            small,
            "--h5-output-path",
            "{d}/w.h5",
            "--species",
            SPECIES,
        ],
        ours("fasta2h5", "--fasta", small, "--species", SPECIES, "--out", "{d}/w.h5"),
    ]


def _helixer(ctx: Ctx, fa: Path) -> Contender:
    """Helixer's fasta2h5.py at its defaults."""
    return Contender(
        "helixer",
        "Helixer fasta2h5.py (default: gzip 4, multiprocess)",
        "peer",
        lambda d, r: [
            ctx.peer("peer-helixer-fasta2h5"),
            "--fasta-path",
            fa,
            "--h5-output-path",
            d / "out.h5",
            "--species",
            SPECIES,
        ],
        outputs=sizes("out.h5"),
    )


def _fasta2h5_ours(fa: Path, variants: list[str]) -> list[Contender]:
    """Our fasta2h5 at its default, then with each ``--deflate`` engine of ``variants``."""
    mine = [
        Contender(
            "chromaflow",
            "chromaflow fasta2h5 (default)",
            "ours",
            lambda d, r: ours("fasta2h5", "--fasta", fa, "--species", SPECIES, "--out", d / "out.h5"),
            outputs=sizes("out.h5"),
        )
    ]
    for v in variants:
        mine.append(
            Contender(
                f"chromaflow --deflate {v}",
                f"chromaflow fasta2h5 --deflate {v}",
                "ours",
                lambda d, r, v=v: ours(
                    "fasta2h5", "--fasta", fa, "--species", SPECIES, "--out", d / "out.h5", "--deflate", v
                ),
                outputs=sizes("out.h5"),
            )
        )
    return mine


def _fasta2h5_agree(mine: list[Contender]):
    """agree(): each of our files' datasets against Helixer's, and its size relative to Helixer's."""

    def agree(dirs: dict) -> dict:
        per = {c.key: agree_child("h5", dirs[c.key] / "out.h5", dirs["helixer"] / "out.h5") for c in mine}
        ok = all(x.get("ok") for x in per.values())
        return {
            "ok": ok,
            "per_contender": per,
            "detail": "; ".join(
                f"{k}: {'same datasets' if v.get('ok') else v.get('detail')}, size "
                f"{v.get('size_ratio', float('nan')):.3f}x"
                for k, v in per.items()
            ),
        }

    return agree


def fasta2h5(ctx: Ctx) -> tuple[list, list[Case]]:
    """Helixer against our default and --deflate variants (all of ``fasta2h5_variants`` on the first case)."""
    cfg = ctx.cfg
    warm = _fasta2h5_warm(ctx)
    cases = []
    for i, (name, total, records) in enumerate(cfg["fasta2h5"]):
        fa = fasta(ctx, total, records, make=False)
        mine = _fasta2h5_ours(fa, cfg["fasta2h5_variants"] if i == 0 else ["zlib"])
        cases.append(
            Case(
                "fasta2h5",
                name,
                {"bp": total, "records": records, "seed": 42, "L": L},
                [_helixer(ctx, fa), *mine],
                [(c.key, "helixer") for c in mine],
                _fasta2h5_agree(mine),
                note="headline: the default, whose file must be no larger than Helixer's (+5 %)",
                prepare=lambda t=total, r=records: fasta(ctx, t, r),
            )
        )
    return warm, cases


build = fasta2h5


# --------------------------------------------------------------------------------------------------
# the stage's tables and plots (benchmarks/render)
# --------------------------------------------------------------------------------------------------
EQUAL_SIZE = 1.05  # "at equal file size": ours no larger than the peer's + 5 %


def fasta2h5_headline(case: dict) -> dict | None:
    """Default vs Helixer (the 'equal size' ratio, if the size condition holds) and our fastest mode."""
    ag = case.get("agreement") or {}
    per = ag.get("per_contender") or {}
    cons = case.get("contenders") or {}
    ratios = {r["ours"]: r for r in case.get("ratios", [])}
    if "chromaflow" not in ratios:
        return None
    size = (per.get("chromaflow") or {}).get("size_ratio")
    ours = [k for k, v in cons.items() if v["role"] == "ours" and v.get("wall_s")]
    fastest = min(ours, key=lambda k: cons[k]["wall_s"]["median"]) if ours else None
    return {
        "default": ratios["chromaflow"],
        "default_size_ratio": size,
        "equal_size": size is not None and size <= EQUAL_SIZE,
        "fastest": fastest,
        "fastest_ratio": ratios.get(fastest),
        "fastest_size_ratio": (per.get(fastest) or {}).get("size_ratio"),
    }


def deflate_table(res: dict, src: Path) -> str:
    """docs/fasta2h5.md: what each --deflate engine costs and gives, from the fasta2h5 case with the most
    variants (5 x 10 Mbp in the full run)."""
    cs = [c for c in res["cases"] if c["stage"] == "fasta2h5" and not c.get("skipped")]
    if not cs:
        return NO_RUN
    c = max(cs, key=lambda x: len(x.get("contenders", {})))
    per = (c.get("agreement") or {}).get("per_contender") or {}
    cons = c["contenders"]
    hel = cons.get("helixer") or {}
    rows = [
        f"From `benchmarks/results/{src.name}` (`{c.get('command', res['command'])}`), case `{c['case']}` "
        f"({c['params'].get('bp', 0) / 1e6:g} Mbp of seeded random sequence in {c['params'].get('records')} "
        f"records), machine: {_machine_line(c['machine'] if _mark(res, c) else res['machine'])}; medians of "
        f"{c.get('repeats', res.get('repeats'))} "
        "alternating runs (min–max).",
        "",
        "| command | wall s | CPU s | file ÷ Helixer's | Helixer ÷ this, wall | Helixer ÷ this, CPU | datasets equal "
        "Helixer's |",
        "|---|---|---|---|---|---|---|",
        f"| {hel.get('label', 'Helixer')} | {_spread(hel.get('wall_s'))} | {_spread(hel.get('cpu_s'))} | 1 | | | |",
    ]
    ratios = {r["ours"]: r for r in c.get("ratios", [])}
    for k, con in cons.items():
        if con["role"] != "ours":
            continue
        a = per.get(k) or {}
        r = ratios.get(k) or {}
        rows.append(
            f"| {con['label']} | {_spread(con.get('wall_s'))} | {_spread(con.get('cpu_s'))} | "
            f"{_f(a.get('size_ratio'), 3)} | {_ratio(r.get('wall'))} | {_ratio(r.get('cpu'))} | "
            f"{'✔' if a.get('ok') else '✘'} |"
        )
    return "\n".join(rows)
