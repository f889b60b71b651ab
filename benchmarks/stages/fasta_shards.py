"""FASTA shards (opt-in): what one FASTA prediction shard reads, the scan route (layout scan of the whole FASTA, then
a stream from its start up to the shard's last row) against the index route (layout from ``<fasta>.fai``, only the
shard's rows fetched through it), plain and bgzip, the model replaced by a no-op (the feed's batches are consumed
and dropped). ``benchmarks/run --stages fasta_shards``; its table in docs/predict.md ("The FASTA index") is made by
``benchmarks/render`` (:func:`render`).

For a seeded synthetic genome (4 records, 60-column lines, ACGTacgtN) one case per file (plain, bgzip) alternates,
as fresh processes: the plan (``scan_layout`` against ``plan_index``: htslib's faidx build, on a fresh link to the
FASTA so every run builds it, plus the reader's verification pass), then for each shard i of N its scan and its index
route. Each is one command, ``python -m benchmarks.stages.fasta_shards measure WHAT FASTA [I N]``, timed by the
harness (the whole process) and timing its own work (imports excluded; CPU of this process, where htslib's build runs
too); it prints one JSON line with the bytes of the file on disk it read (the metrics' ``fasta_bytes_read``), which
:func:`measured_of` stores as the run's ``measured``. The page cache is warm (the inputs were just made): bytes, not
seconds, are the point.

Run record (``benchmarks/results/*.json``, cases ``fasta_shards/<route>_<mbp>Mbp``, params ``route``, ``file``,
``mbp``, ``records``, ``line_width``, ``subsequence_length``, ``shard_count``): contenders ``plan_scan``,
``plan_index`` and ``s<i>_scan``, ``s<i>_index``; each run's ``measured``: ``wall_s``, ``cpu_s``, ``bytes_on_disk``,
plans ``rows`` (of the layout) and ``index`` (plan_index: 'fai' or 'scan'), shards ``shard`` ('i/N'), ``rows``
([first, end)), ``fed`` (rows the feed gave), ``bytes_read`` and, through the index, ``records_read``. Runs of
``benchmarks/fasta_shards/run`` (before this stage) are in ``benchmarks/fasta_shards/results/``, read through
:func:`from_legacy`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..harness.core import Case, Contender, json_files, summarize
from ..harness.env import ROOT
from ..harness.stagekit import PY, Ctx, L, run_checked
from .predict_feed import stage_cases, when

#: launchers of ../shared/peers/bin this stage needs (none: our reader alone)
PEERS: list[str] = []
#: sizes of the full run (keys are the results files' and the docs' names; Ctx.cfg merges every stage's)
FULL = {"fasta_shards_mbp": 100, "fasta_shards_count": 4}
#: sizes of the --quick run
QUICK = {"fasta_shards_mbp": 2, "fasta_shards_count": 2}

RECORDS, LINE_WIDTH = 4, 60
#: where this stage's runs are kept (``benchmarks/run --stages fasta_shards --out benchmarks/fasta_shards/results``),
#: beside those of benchmarks/fasta_shards/run (the script this stage replaced, in its own format: :func:`from_legacy`)
RESULTS_DIR = ROOT / "benchmarks" / "fasta_shards" / "results"
DOC = ROOT / "docs" / "predict.md"
ME = [PY, "-m", "benchmarks.stages.fasta_shards"]
#: (route, file under the genome's folder)
FILES = (("plain", "g.fa"), ("bgzip", "bgzf/g.fa.gz"))


# --------------------------------------------------------------------------------------------------
# the builder
# --------------------------------------------------------------------------------------------------
def _make_inputs(folder: Path, mbp: int) -> None:
    """The genome, its bgzip copy and the index of each (the index route's shards read it), made once."""
    fa, gz = folder / FILES[0][1], folder / FILES[1][1]
    if not fa.exists():
        folder.mkdir(parents=True, exist_ok=True)
        run_checked([*ME, "genome", fa, mbp], "the fasta_shards genome")
    if not gz.exists():
        gz.parent.mkdir(parents=True, exist_ok=True)
        run_checked([*ME, "bgzip", fa, gz], "bgzip")
    for f in (fa, gz):
        if not Path(f"{f}.fai").exists():
            run_checked([*ME, "index", f], "the FASTA index")


def measured_of(key: str, d: Path) -> dict:
    """Case.per_run: the measurement's own JSON line (stdout)."""
    return {"measured": _line(d)}


def _line(d: Path) -> dict:
    return json.loads((d / "stdout.txt").read_text().strip().splitlines()[-1])


def _agree(n: int):
    """Both routes fed each shard exactly its rows, and the shards cover the layout's rows; with the bytes read."""

    def agree(dirs: dict[str, Path]) -> dict:
        got = {k: _line(d) for k, d in dirs.items()}
        bad = []
        for i in range(1, n + 1):
            s, x = got[f"s{i}_scan"], got[f"s{i}_index"]
            if s["rows"] != x["rows"] or not s["fed"] == x["fed"] == s["rows"][1] - s["rows"][0]:
                bad.append(f"shard {i}/{n}: rows {s['rows']} / {x['rows']}, fed {s['fed']} / {x['fed']}")
        bounds = [got[f"s{i}_scan"]["rows"] for i in range(1, n + 1)]
        if [a for a, _ in bounds[1:]] != [b for _, b in bounds[:-1]] or bounds[-1][1] != got["plan_scan"]["rows"]:
            bad.append(f"the shards {bounds} do not cover the layout's {got['plan_scan']['rows']} rows")
        size = got["plan_scan"]["bytes_on_disk"]
        scan, index = (sum(got[f"s{i}_{w}"]["bytes_read"] for i in range(1, n + 1)) / size for w in ("scan", "index"))
        detail = f"all shards read {scan:.2f}x the file scanning, {index:.2f}x through the index"
        return {"ok": not bad, "detail": "; ".join(bad or ["every shard fed its rows both ways"]) + "; " + detail}

    return agree


def _contenders(fa: Path, n: int) -> list[Contender]:
    def argv(what: str, *shard: int):
        return lambda d, r: [*ME, "measure", what, str(fa), *map(str, shard)]

    out = [
        Contender("plan_scan", "plan: scan_layout", "ours", argv("plan-scan")),
        Contender("plan_index", "plan: plan_index (htslib faidx + verification)", "ours", argv("plan-index")),
    ]
    for i in range(1, n + 1):
        out += [
            Contender(f"s{i}_scan", f"shard {i}/{n}, scan", "ours", argv("shard-scan", i, n)),
            Contender(f"s{i}_index", f"shard {i}/{n}, index", "ours", argv("shard-index", i, n)),
        ]
    return out


def fasta_shards(ctx: Ctx) -> tuple[list, list[Case]]:
    mbp, n = ctx.cfg["fasta_shards_mbp"], ctx.cfg["fasta_shards_count"]
    folder = ctx.inputs() / f"fasta_shards_{mbp}Mbp_seed1"
    cases = []
    for route, name in FILES:
        params = {"route": route, "file": Path(name).name, "mbp": mbp, "records": RECORDS, "line_width": LINE_WIDTH}
        cases.append(
            Case(
                "fasta_shards",
                f"{route}_{mbp}Mbp",
                dict(params, subsequence_length=L, shard_count=n),
                _contenders(folder / name, n),
                [],
                _agree(n),
                per_run=measured_of,
                prepare=lambda: _make_inputs(folder, mbp),
                note="the model replaced by a no-op; warm page cache (the bytes are exact, the seconds indicative)",
            )
        )
    return [], cases


build = fasta_shards


# --------------------------------------------------------------------------------------------------
# the commands: python -m benchmarks.stages.fasta_shards genome|bgzip|index|measure ...
# --------------------------------------------------------------------------------------------------
def genome(path: str, mbp: int) -> None:
    """The seeded genome: ``mbp`` Mbp in 4 records of ACGTacgtN (uniform), 60-column lines."""
    import numpy as np

    rng = np.random.default_rng(1)
    per = mbp * 1_000_000 // RECORDS
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as fh:
        for r in range(RECORDS):
            seq = np.frombuffer(b"ACGTacgtN", dtype=np.uint8)[rng.integers(0, 9, per)].tobytes()
            lines = b"\n".join(seq[i : i + LINE_WIDTH] for i in range(0, per, LINE_WIDTH))
            fh.write(f">chr{r} synthetic\n".encode() + lines + b"\n")
    os.replace(tmp, path)


def _clock() -> tuple[float, float]:
    import resource
    import time

    r = resource.getrusage(resource.RUSAGE_SELF)
    return time.perf_counter(), r.ru_utime + r.ru_stime


def _spent(t0: tuple[float, float]) -> dict:
    t1 = _clock()
    return {"wall_s": t1[0] - t0[0], "cpu_s": t1[1] - t0[1]}


def _consume(feed, pool) -> int:
    import threading

    rows = 0
    for b in feed.batches(threading.Event()):
        rows += b.n
        pool.release(b.slot)
    return rows


def _plan(what: str, fa: str) -> dict:
    from chromaflow.genome import faidx
    from chromaflow.genome.layout import scan_layout

    if what == "plan-scan":
        t0 = _clock()
        rows = scan_layout(fa, L).n_rows
        return {**_spent(t0), "rows": rows}
    link = os.path.join(os.getcwd(), os.path.basename(fa))  # a fresh link: no index beside it, the plan builds one
    os.symlink(os.path.abspath(fa), link)
    t0 = _clock()
    idx, how = faidx.plan_index(link)
    took = _spent(t0)
    if idx is not None:
        idx.close()
    return {**took, "index": how["index"]}


def _shard(what: str, fa: str, i: int, n: int) -> dict:
    from chromaflow.genome import faidx
    from chromaflow.genome.layout import scan_layout
    from chromaflow.predict.feed import BufferPool, FastaFeed, IndexedFastaFeed
    from chromaflow.utils.sharding import part_bounds

    pool = BufferPool(5, 64, L)
    t0 = _clock()
    if what == "shard-scan":
        a, b = part_bounds(i, n, scan_layout(fa, L).n_rows)
        feed = FastaFeed(fa, L, 64, pool, row_start=a, row_end=b, reader="thread")
        fed = _consume(feed, pool)
        out = {**_spent(t0), "bytes_read": os.path.getsize(fa) + feed.streamed}
    else:
        idx = faidx.read_index(fa)
        a, b = part_bounds(i, n, idx.layout(L).n_rows)
        feed = IndexedFastaFeed(idx, L, 64, pool, row_start=a, row_end=b)
        fed = _consume(feed, pool)
        out = {**_spent(t0), "bytes_read": feed.read.disk_bytes, "records_read": len(feed.read.records)}
        idx.close()
    if fed != b - a:
        raise SystemExit(f"{what} {i}/{n}: fed {fed} rows, not the shard's {b - a}")
    return dict(out, shard=f"{i}/{n}", rows=[a, b], fed=fed)


def measure(what: str, fa: str, *shard: str) -> dict:
    """One measurement in this process: a plan (``plan-scan``, ``plan-index``) or shard ``I`` of ``N``
    (``shard-scan``, ``shard-index``)."""
    out = _plan(what, fa) if what.startswith("plan-") else _shard(what, fa, int(shard[0]), int(shard[1]))
    return dict(out, bytes_on_disk=os.path.getsize(fa))


def main(argv: list[str]) -> int:
    cmd, args = (argv[0], argv[1:]) if argv else ("", [])
    if cmd == "measure" and len(args) in (2, 4):
        print(json.dumps(measure(*args)))
    elif cmd == "genome" and len(args) == 2:
        genome(args[0], int(args[1]))
    elif cmd == "bgzip" and len(args) == 2:
        import pysam

        pysam.tabix_compress(args[0], f"{args[1]}.tmp", force=True)
        os.replace(f"{args[1]}.tmp", args[1])
    elif cmd == "index" and len(args) == 1:
        from chromaflow.genome import faidx

        idx, how = faidx.plan_index(args[0])
        if idx is None:
            raise SystemExit(f"{args[0]}: not indexed: {how.get('index_reason')}")
        idx.close()
    else:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    return 0


# --------------------------------------------------------------------------------------------------
# render: the generated table of docs/predict.md ("The FASTA index"), from the newest run
# --------------------------------------------------------------------------------------------------
NO_RUN = (
    "No run yet: `benchmarks/run --stages fasta_shards --out benchmarks/fasta_shards/results --workdir /tmp`, then "
    "`benchmarks/render`."
)
ROUTES = (
    ("plain", "scan", "plain, scan"),
    ("plain", "index", "plain, index"),
    ("bgzip", "scan", "bgzip, scan"),
    ("bgzip", "index", "bgzip, index"),
)


def from_legacy(old: dict) -> dict:
    """A results file of ``benchmarks/fasta_shards/run`` (``{"benchmark": "fasta_shards", "command", "mbp",
    "records", "line_width", "subsequence_length", "shard_count", "started", "machine", "routes": {"plain"|"bgzip":
    {"file", "bytes_on_disk", "load_before", "load_after", "plan_scan": {wall_s, cpu_s}, "plan_index": {wall_s,
    cpu_s, index}, "shards": [{"shard", "rows", "scan": {wall_s, cpu_s, bytes_read}, "index": {wall_s, cpu_s,
    bytes_read, records_read}}]}}}``, every figure measured once, in one process) as a harness results file with
    this stage's two cases: each figure a run of its contender (repeat 0) with that figure as ``measured``
    (``bytes_on_disk`` added), and the route's 1-minute loads (taken before and after all its measurements) as every
    run's one-element ``load_before`` and ``load_after``. What the old record did not have (``fed``; the plans'
    ``rows``) is left out."""
    cases = []
    for route, r in old["routes"].items():
        n = len(r["shards"])
        figures = [("plan_scan", r["plan_scan"]), ("plan_index", r["plan_index"])]
        for i, s in enumerate(r["shards"], start=1):
            figures += [(f"s{i}_{how}", dict(s[how], shard=s["shard"], rows=s["rows"])) for how in ("scan", "index")]
        runs = [
            {
                "contender": key,
                "repeat": 0,
                "exit": 0,
                "load_before": [r["load_before"]],
                "load_after": [r["load_after"]],
                "measured": dict(fig, bytes_on_disk=r["bytes_on_disk"]),
            }
            for key, fig in figures
        ]
        params = {k: old[k] for k in ("mbp", "records", "line_width", "subsequence_length", "shard_count")}
        cases.append(
            {
                "stage": "fasta_shards",
                "case": f"{route}_{old['mbp']}Mbp",
                "params": dict(params, route=route, file=r.get("file")),
                "command": old["command"],
                "started": old["started"],
                "machine": old.get("machine") or {},
                "runs": runs,
                "contenders": {c.key: {"label": c.label, "role": "ours"} for c in _contenders(Path(), n)},
            }
        )
    return {"machine": old.get("machine") or {}, "cases": cases}


def _span(values: list[float], fmt: str) -> str:
    lo, hi = min(values), max(values)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}–{fmt.format(hi)}"


def _fig(case: dict, key: str) -> dict:
    """The median of each figure of contender ``key`` over its runs."""
    runs = [r["measured"] for r in case["runs"] if r["contender"] == key and r.get("measured")]
    nums = [k for k, v in runs[0].items() if isinstance(v, (int, float))] if runs else []
    return {k: summarize([r[k] for r in runs])["median"] for k in nums}


def _route_row(label: str, case: dict, how: str) -> str:
    n = case["params"]["shard_count"]
    plan = _fig(case, f"plan_{how}")
    sh = [_fig(case, f"s{i}_{how}") for i in range(1, n + 1)]
    size, total = plan["bytes_on_disk"], sum(s["bytes_read"] for s in sh)
    return (
        f"| {label} | {plan['wall_s']:.2f} s, {plan['cpu_s']:.2f} CPU-s | "
        f"{_span([s['bytes_read'] / 1e6 for s in sh], '{:,.0f}')} MB of {size / 1e6:,.1f} MB on disk | "
        f"{total / 1e6:,.0f} MB ({total / size:.2f}× the file) | "
        f"{_span([s['wall_s'] for s in sh], '{:.2f}')} s / {_span([s['cpu_s'] for s in sh], '{:.2f}')} |"
    )


def table(res: dict, cases: list[dict], source: str) -> list[str]:
    """The table of one run: ``cases`` (its plain and bgzip case records, of the results file ``res`` at
    ``source``)."""
    by = {c["params"]["route"]: c for c in cases}
    first = cases[0]
    p, m = first["params"], {**(res.get("machine") or {}), **(first.get("machine") or {})}
    loads = [x for c in cases for r in c["runs"] for k in ("load_before", "load_after") for x in (r.get(k) or [])[:1]]
    out = [
        f"From `{source}` (`{first.get('command')}`, {first.get('started')}): "
        f"{p['mbp']} Mbp synthetic in {p['records']} records, {p['line_width']}-column lines, L = "
        f"{p['subsequence_length']}, {p['shard_count']} shards, the model replaced by a no-op; "
        f"{m.get('cpu_model', '?')}, {m.get('logical_cpus', '?')} CPUs, load average "
        f"{_span(loads, '{:.1f}') if loads else '?'}; warm page cache (the bytes are exact, the seconds indicative).",
        "",
        "| | plan | each shard: bytes of the file read | all shards together | shard wall / CPU-s |",
        "|---|---|---|---|---|",
    ]
    out += [_route_row(label, by[route], how) for route, how, label in ROUTES if route in by]
    if "plain" in by:
        scan, index = _fig(by["plain"], "plan_scan")["cpu_s"], _fig(by["plain"], "plan_index")["cpu_s"]
        if scan:
            out += [
                "",
                f"The indexed plan (htslib's pass plus the verification) costs {index / scan:.1f}× the scan's CPU on "
                "the plain FASTA; every shard then reads only its share.",
            ]
    return out


def _runs(folders: tuple[Path | None, ...]) -> list[tuple[dict, list[dict], Path]]:
    """Every run of this stage in the ``folders``: (results, its cases of one run, file), the harness's (the cases of
    one file and size) and the old script's alike."""
    groups: dict[tuple, tuple[dict, list[dict]]] = {}
    for path, res, c in stage_cases("fasta_shards", folders):
        groups.setdefault((path, c["params"]["mbp"], c["params"]["shard_count"]), (res, []))[1].append(c)
    found = [(res, cases, key[0]) for key, (res, cases) in groups.items()]
    legacy = {p.resolve(): (p, old) for folder in folders if folder for p, old in json_files(folder)}
    for path, old in legacy.values():
        if old.get("benchmark") == "fasta_shards":
            conv = from_legacy(old)
            found.append((conv, conv["cases"], path))
    return found


def render(results_dir: Path | None = None, own: Path = RESULTS_DIR) -> str:
    """The table of the newest run (:func:`table`) in this stage's own folder (``own``) or ``results_dir`` (the
    harness's results folder), or :data:`NO_RUN`."""
    found = _runs((own, results_dir))
    if not found:
        return NO_RUN
    res, cases, path = max(found, key=lambda x: max(when(c.get("started")) for c in x[1]))
    return "\n".join(table(res, cases, str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
