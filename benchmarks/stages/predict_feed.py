"""Prediction feed (opt-in): how fast the host can feed a prediction device, with the model replaced by a no-op
(runs anywhere, no GPU needed). ``benchmarks/run --stages predict_feed``; its page
``benchmarks/predict_feed/RESULTS.md`` is made by ``benchmarks/render``.

For a seeded synthetic genome (8 records, 60-column lines) one case alternates, as fresh processes, the feeds of
:data:`FEEDS`: the FASTA route (``FastaFeed`` -> batches of uint8 base codes in reusable buffers, what is shipped to
a GPU, 1 B/bp; reader thread or child process, plain and gzip FASTA), the h5 route (``H5Feed`` on the fasta2h5 file
of the same genome -> float16 rows or codes, 1 and 2 inflate threads), the CPU one-hot for reference, and the host's
other side: the predict writer turning int8 predictions (a GPU's transfer type) into Predmoter's int64 gzip chunks,
per ``--deflate`` choice. Each measurement is one command, ``python -m benchmarks.stages.predict_feed measure KIND
PATH BATCH EXTRA_JSON``, timed by the harness (the whole process) and timing its own feed loop (imports excluded, a
reader child's start-up included); it prints that as one JSON line, which :func:`feed_of` reads into the run record.

Run record (``benchmarks/results/*.json``, case ``predict_feed/feed_<mbp>Mbp``): each run has the harness's fields
and ``feed``: ``rows``, ``bp`` (FASTA feeds: the genome's bp; h5 feeds and the writer: bp of rows, both strands),
``wall_s`` and ``cpu_self_s``/``cpu_child_s`` (the loop's own clock: this process, its reader child), ``cpu_s``,
``size_of_raw`` (writer: file size / raw int64 size), ``mbp_per_s_wall``, ``mbp_per_cpu_s``, ``cores_per_100mbps``
and ``two_core_capacity_mbps`` (reader in a child: bp / the busier side's CPU-s). The run's ``load_before`` is the
harness's (1-, 5-, 15-minute load). Runs of ``benchmarks/predict_feed/run`` (before this stage) are in
``benchmarks/predict_feed/results.json``, read through :func:`from_legacy`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from ..harness.core import Case, Contender, json_files, summarize
from ..harness.env import ROOT
from ..harness.stagekit import PY, Ctx, L, fasta, ours, run_checked

#: launchers of ../shared/peers/bin this stage needs (none: our feeds alone)
PEERS: list[str] = []
#: sizes of the full run (keys are the results files' and the docs' names; Ctx.cfg merges every stage's)
FULL = {"predict_feed_mbp": 200, "predict_feed_batch": 512, "predict_feed_writer_threads": 2, "predict_feed_seed": 1}
#: sizes of the --quick run
QUICK = {"predict_feed_mbp": 2, "predict_feed_batch": 64, "predict_feed_writer_threads": 2, "predict_feed_seed": 1}

SPECIES = "Synthetica"
RECORDS = 8
STAGE_DIR = ROOT / "benchmarks" / "predict_feed"
PAGE = STAGE_DIR / "RESULTS.md"
#: where this stage's runs are kept: ``benchmarks/run --stages predict_feed --out benchmarks/predict_feed/results``
RESULTS_DIR = STAGE_DIR / "results"
#: the results of benchmarks/predict_feed/run (the script this stage replaced), in its own format
LEGACY = STAGE_DIR / "results.json"
ME = [PY, "-m", "benchmarks.stages.predict_feed"]

#: (contender key, label = the table's row and the old script's case name, kind, input, extra arguments), in the
#: order they alternate; the writer's cases count bp of rows (2 x the genome) and run on the writer threads
FEEDS = (
    ("fasta_thread", "FASTA, reader thread", "fasta", "fasta", {"reader": "thread"}),
    ("fasta_process", "FASTA, reader process", "fasta", "fasta", {"reader": "process"}),
    ("fastagz_thread", "FASTA.gz, reader thread", "fasta", "fasta_gz", {"reader": "thread"}),
    ("fastagz_process", "FASTA.gz, reader process", "fasta", "fasta_gz", {"reader": "process"}),
    ("h5_x_t1", "h5 -> float16 rows, 1 inflate thread", "h5", "h5", {"threads": 1, "mode": "x"}),
    ("h5_x_t2", "h5 -> float16 rows, 2 inflate threads", "h5", "h5", {"threads": 2, "mode": "x"}),
    ("h5_codes_t2", "h5 -> codes, 2 inflate threads", "h5", "h5", {"threads": 2, "mode": "codes"}),
    (
        "fasta_process_onehot",
        "FASTA, reader process + CPU one-hot (float32)",
        "fasta",
        "fasta",
        {"reader": "process", "onehot": True},
    ),
    ("writer_zlib9", "writer, zlib:9 (Predmoter's bytes; CPU default)", "writer", "writer_out", {"deflate": "zlib:9"}),
    ("writer_zlib1", "writer, zlib:1 (CUDA default)", "writer", "writer_out", {"deflate": "zlib:1"}),
    ("writer_isal1", "writer, isal:1", "writer", "writer_out", {"deflate": "isal:1"}),
)
#: contender key -> its FASTA reader (thread, process), None for the other feeds
READER = {k: e.get("reader") for k, _, _, _, e in FEEDS}


# --------------------------------------------------------------------------------------------------
# the builder
# --------------------------------------------------------------------------------------------------
def _inputs(ctx: Ctx, mbp: float, seed: int) -> dict[str, Path]:
    fa = fasta(ctx, int(mbp * 1e6), RECORDS, seed, make=False)
    return {"fasta": fa, "fasta_gz": fa.with_name(f"feed_{fa.name}.gz"), "h5": fa.with_name(f"feed_{fa.stem}.h5")}


def _make_inputs(ctx: Ctx, mbp: float, seed: int) -> None:
    """The seeded FASTA (stagekit), its ``gzip -1`` copy and its fasta2h5 file, each made once in ctx.inputs()."""
    inp = _inputs(ctx, mbp, seed)
    fasta(ctx, int(mbp * 1e6), RECORDS, seed)
    if not inp["fasta_gz"].exists():
        tmp = inp["fasta_gz"].with_name(inp["fasta_gz"].name + ".tmp")
        with open(tmp, "wb") as fh:
            subprocess.run(["gzip", "-1", "-c", str(inp["fasta"])], stdout=fh, check=True)
        tmp.replace(inp["fasta_gz"])
    if not inp["h5"].exists():
        tmp = inp["h5"].with_name(inp["h5"].stem + ".tmp.h5")
        run_checked(ours("fasta2h5", "--fasta", inp["fasta"], "--species", SPECIES, "--out", tmp), "fasta2h5")
        tmp.replace(inp["h5"])


def feed_of(key: str, d: Path) -> dict:
    """Case.per_run: the measurement's own JSON line (stdout) with its rates, as the run's ``feed``."""
    return {"feed": rates(_line(d), READER.get(key) == "process")}


def _line(d: Path) -> dict:
    return json.loads((d / "stdout.txt").read_text().strip().splitlines()[-1])


def rates(raw: dict, two_core: bool) -> dict:
    """The old script's derived figures of one measurement (``raw``: rows, bp, wall_s, cpu_self_s, cpu_child_s)."""
    cpu = raw["cpu_self_s"] + raw["cpu_child_s"]
    return dict(
        raw,
        cpu_s=cpu,
        mbp_per_s_wall=raw["bp"] / raw["wall_s"] / 1e6,
        mbp_per_cpu_s=raw["bp"] / cpu / 1e6,
        cores_per_100mbps=cpu / (raw["bp"] / 1e8),
        # each side on its own core: the busier one (reader child or the batching process) bounds the rate
        two_core_capacity_mbps=raw["bp"] / max(raw["cpu_self_s"], raw["cpu_child_s"]) / 1e6 if two_core else None,
    )


def _agree(mbp: float):
    """Every reader feed delivered the same rows; FASTA feeds the genome's bp, h5 feeds twice that (both strands)."""

    def agree(dirs: dict[str, Path]) -> dict:
        got = {k: _line(d) for k, d in dirs.items()}
        kinds = {k: kind for k, _, kind, _, _ in FEEDS}
        feeds = {k: g for k, g in got.items() if kinds.get(k) in ("fasta", "h5")}
        bp = round(mbp * 1e6)
        bad = [k for k, g in feeds.items() if g["bp"] != (bp if kinds[k] == "fasta" else 2 * bp)]
        rows = {g["rows"] for g in feeds.values()}
        ok = len(rows) <= 1 and not bad
        detail = f"every feed delivered {rows.pop() if len(rows) == 1 else sorted(rows)} rows" + (
            f"; bp not the genome's: {', '.join(bad)}" if bad else f", the genome's {bp:,} bp (h5: both strands)"
        )
        return {"ok": ok, "detail": detail}

    return agree


def predict_feed(ctx: Ctx) -> tuple[list, list[Case]]:
    cfg = ctx.cfg
    mbp, batch, seed = cfg["predict_feed_mbp"], cfg["predict_feed_batch"], cfg["predict_feed_seed"]
    threads = cfg["predict_feed_writer_threads"]
    inp = _inputs(ctx, mbp, seed)
    writer_rows = -(-int(2 * mbp * 1e6) // L)  # both strands of the genome, as prediction rows

    def contender(key: str, label: str, kind: str, src: str, extra: dict) -> Contender:
        if kind == "writer":
            extra = dict(extra, rows=writer_rows, seed=seed, threads=threads)

        def argv(d: Path, r: int) -> list[str]:
            path = d / "writer_out.h5" if src == "writer_out" else inp[src]
            return [*ME, "measure", kind, str(path), str(batch), json.dumps(extra)]

        return Contender(key, label, "ours", argv)

    case = Case(
        "predict_feed",
        f"feed_{mbp:g}Mbp",
        {
            "mbp": mbp,
            "records": RECORDS,
            "line_width": 60,
            "seed": seed,
            "subsequence_length": L,
            "batch": batch,
            "writer_threads": threads,
            "writer_rows": writer_rows,
        },
        [contender(*f) for f in FEEDS],
        [],
        _agree(mbp),
        per_run=feed_of,
        prepare=lambda: _make_inputs(ctx, mbp, seed),
        note="the model replaced by a no-op: each feed's own loop timed in a fresh process (start-up not counted, a "
        "reader child's is)",
    )
    return [], [case]


build = predict_feed


# --------------------------------------------------------------------------------------------------
# one measurement, in its own process: python -m benchmarks.stages.predict_feed measure KIND PATH BATCH EXTRA_JSON
# --------------------------------------------------------------------------------------------------
def _clock() -> tuple[float, float, float]:
    """(wall, CPU-s of this process, CPU-s of its waited-for children) now: the feed loop's own clock."""
    import resource
    import time

    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter(), s.ru_utime + s.ru_stime, c.ru_utime + c.ru_stime


def _spent(t0: tuple[float, float, float]) -> dict:
    t1 = _clock()
    return {"wall_s": t1[0] - t0[0], "cpu_self_s": t1[1] - t0[1], "cpu_child_s": t1[2] - t0[2]}


def _fasta(path: str, batch: int, extra: dict) -> dict:
    from chromaflow.predict.feed import BufferPool, FastaFeed, Prefetcher

    enc = None
    if extra.get("onehot"):
        import torch

        from chromaflow.predict.executors import Encoder

        torch.set_num_threads(1)
        enc = Encoder(torch.device("cpu"))
    t0, rows = _clock(), 0
    pool = BufferPool(6, batch, L)
    feed = FastaFeed(path, L, batch, pool, reader=extra["reader"])
    pf = Prefetcher(feed, 2)
    pf.start()
    while (b := pf.get()) is not None:
        if enc is not None:
            enc.codes(torch.from_numpy(b.codes[: b.n]), torch.from_numpy(b.strand[: b.n]))
        rows += b.n
        pool.release(b.slot)
    return {"rows": rows, "bp": feed.bp, **_spent(t0), "size_of_raw": None}


def _h5(path: str, batch: int, extra: dict) -> dict:
    import h5py
    import numpy

    from chromaflow.predict.feed import H5Feed, Prefetcher

    t0, rows, bp = _clock(), 0, 0
    with h5py.File(path) as f:
        X = f["data/X"]
        feed = H5Feed(X, path, batch, row_start=0, row_end=X.shape[0], threads=extra["threads"], mode=extra["mode"])
        pf = Prefetcher(feed, 2)
        pf.start()
        while (b := pf.get()) is not None:
            rows += b.n
            bp += int(numpy.count_nonzero(b.codes[: b.n])) if b.codes is not None else b.bp
        feed.close()
    return {"rows": rows, "bp": bp, **_spent(t0), "size_of_raw": None}


def _writer(path: str, batch: int, extra: dict) -> dict:
    """The predict writer (its pool of ``threads``) writing one batch of model-like int8 rows again and again: runs of
    1-60 bp (mean 10), values a bounded random walk 0..60 (seeded), as int64 zlib chunks of Predmoter's layout."""
    import os

    import h5py
    import numpy

    from chromaflow.fasta2h5.deflate import byte_compressor
    from chromaflow.predict import h5io
    from chromaflow.predict.core import parse_deflate
    from chromaflow.predict.writer import PredictionWriter

    rng = numpy.random.default_rng(extra["seed"])
    n_rows, D = int(extra["rows"]), 2
    runs = numpy.minimum(rng.geometric(0.1, size=batch * L * D // 4), 60)
    vals = numpy.clip(numpy.cumsum(rng.integers(-3, 4, size=runs.size)), 0, 60) % 61
    one = numpy.repeat(vals, runs)[: batch * L * D].astype(numpy.int8).reshape(batch, D, L).transpose(0, 2, 1).copy()
    engine, level = parse_deflate(extra["deflate"])
    out = h5py.File(path, "w")
    seqids, se = numpy.zeros(n_rows, "S50"), numpy.zeros((n_rows, 2), numpy.int64)
    dset = h5io.create_predictions(
        out, n_rows=n_rows, length=L, datasets=["a", "b"], species0=b"s", model_name="m", seqids=seqids,
        start_ends=se, level=level,
    )  # fmt: skip
    w = PredictionWriter(dset, 0, pool_threads=extra["threads"], depth=2, compress=byte_compressor(engine, level))
    t0 = _clock()
    w.start()
    for a in range(0, n_rows, batch):
        w.put((a, one[: min(batch, n_rows - a)]))
    w.finish()
    if w.error is not None:
        raise w.error
    out.close()
    took = _spent(t0)
    size = os.path.getsize(path) / (n_rows * L * D * 8)
    os.remove(path)
    return {"rows": n_rows, "bp": n_rows * L, **took, "size_of_raw": size}


def measure(kind: str, path: str, batch: int, extra: dict) -> dict:
    """One feed measurement in this process (malloc tuned as predict tunes it): rows, bp, its own clock."""
    from chromaflow.native.memory import tune_malloc

    tune_malloc()
    return {"fasta": _fasta, "h5": _h5, "writer": _writer}[kind](path, batch, extra)


# --------------------------------------------------------------------------------------------------
# render: benchmarks/predict_feed/RESULTS.md from the newest run (benchmarks/render)
# --------------------------------------------------------------------------------------------------
def when(started: str | None) -> str:
    """A start time as a sortable 'YYYY-MM-DDTHH:MM:SS' (the harness's '…Z', the old scripts' '… HH:MM' and
    '…+00:00' alike: all UTC)."""
    s = (started or "").replace(" ", "T")
    return (s + ":00" if len(s) == 16 else s)[:19]


def stage_cases(stage: str, folders: Iterable[Path | None]) -> list[tuple[Path, dict, dict]]:
    """(results file, its contents, case record) of every case of ``stage`` that ran in a full (not --quick) results
    file of the ``folders`` (None: left out; a file seen twice counts once), oldest first: what an opt-in stage's
    page picks its runs from (this stage's, and predict_routes' and fasta_shards')."""
    files = {p.resolve(): (p, res) for folder in folders if folder for p, res in json_files(folder)}
    found = [
        (p, res, c)
        for p, res in files.values()
        if not res.get("quick")
        for c in res.get("cases", [])
        if c.get("stage") == stage and not c.get("skipped") and c.get("runs")
    ]
    return sorted(found, key=lambda x: when(x[2].get("started")))


def from_legacy(old: dict) -> dict:
    """A results file of ``benchmarks/predict_feed/run`` (``{"command", "machine": {host, cpu, cores, avx512,
    python, platform}, "started": "YYYY-MM-DD HH:MM", "mbp", "seed", "batch", "repeats", "writer_threads", "cases":
    {label: [measurement, ...]}}``, one measurement per repeat with the feed's own figures and a 1-minute
    ``load_before``/``load_after``) as a harness results file with one case of this stage: each measurement a run of
    the contender of that label (:data:`FEEDS`; an unknown label is its own key) with its figures as ``feed`` and
    its loads as one-element lists. The machine keeps what the old record had: ``cpu_flags`` lists ``avx512f``
    when it said AVX-512, nothing else; ``logical_cpus`` and ``usable_cpus`` are its ``cores``."""
    m = old["machine"]
    machine = {
        "host": m["host"],
        "cpu_model": m["cpu"],
        "cpu_flags": ["avx512f"] if m.get("avx512") else [],
        "logical_cpus": m["cores"],
        "usable_cpus": m["cores"],
        "python": m["python"],
        "platform": m.get("platform"),
    }
    key = {label: k for k, label, *_ in FEEDS}
    feed_keys = ("rows", "bp", "wall_s", "size_of_raw", "cpu_self_s", "cpu_child_s", "cpu_s", "mbp_per_s_wall")
    feed_keys += ("mbp_per_cpu_s", "cores_per_100mbps", "two_core_capacity_mbps")
    runs = [
        {
            "contender": key.get(label, label),
            "repeat": i,
            "exit": 0,
            "load_before": [r["load_before"]],
            "load_after": [r["load_after"]],
            "feed": {k: r.get(k) for k in feed_keys},
        }
        for label, rs in old["cases"].items()
        for i, r in enumerate(rs)
    ]
    params = {k: old[k] for k in ("mbp", "seed", "batch", "writer_threads") if k in old}
    case = {
        "stage": "predict_feed",
        "case": f"feed_{old['mbp']:g}Mbp",
        "params": dict(params, records=RECORDS, line_width=60, subsequence_length=L),
        "command": old["command"],
        "started": old["started"],
        "machine": machine,
        "runs": runs,
        "contenders": {key.get(label, label): {"label": label, "role": "ours"} for label in old["cases"]},
    }
    return {"machine": machine, "cases": [case]}


def _median(xs: list[float]) -> float:
    return summarize(xs)["median"]


def _row(label: str, runs: list[dict]) -> str:
    fs = [r["feed"] for r in runs]
    w, c = [f["mbp_per_s_wall"] for f in fs], [f["cpu_s"] for f in fs]
    e, k = [f["mbp_per_cpu_s"] for f in fs], [f["cores_per_100mbps"] for f in fs]
    cap = [f["two_core_capacity_mbps"] for f in fs if f.get("two_core_capacity_mbps")]
    ld = [r["load_before"][0] for r in runs if r.get("load_before")]
    return (
        f"| {label} | {_median(w):.0f} [{min(w):.0f}–{max(w):.0f}] | {_median(c):.2f} | "
        f"{_median(e):.0f} | {_median(k):.3f} | {f'{_median(cap):.0f}' if cap else '–'} | "
        + (f"{min(ld):.1f}–{max(ld):.1f} |" if ld else "– |")
    )


def page(res: dict, case: dict, source: str) -> str:
    """The Markdown of one run of this stage (``case``, a record of the results file ``res``, found at ``source``)."""
    m = {**(res.get("machine") or {}), **(case.get("machine") or {})}
    p = case["params"]
    ok = {k: [r for r in case["runs"] if r["contender"] == k and r.get("feed")] for k in case["contenders"]}
    repeats = max((len(v) for v in ok.values()), default=0)
    lines = [
        "# Prediction feed: bp/s the host delivers with the model replaced by a no-op",
        "",
        f"Generated by `benchmarks/render` from `{source}` (do not edit by hand). Command: `{case.get('command')}`",
        "",
        f"Machine: {m.get('cpu_model')} ({m.get('usable_cpus')} cores, AVX-512: "
        f"{'avx512f' in (m.get('cpu_flags') or [])}), host {m.get('host')}, Python {m.get('python')}; "
        f"{when(case.get('started'))[:16].replace('T', ' ')} UTC. Genome: {p['mbp']:g} Mbp synthetic, "
        f"{p.get('records', RECORDS)} records, 60-column lines, seed {p['seed']}; L = {L}, batch {p['batch']} rows. "
        f"Each case is a fresh process (start-up included); {repeats} repeats, medians, [min–max]. Load average "
        "(1 min) is shown: this machine is shared, wall times are only meaningful at low load, CPU seconds are.",
        "",
        "| case | Mbp/s (wall) | CPU-s | Mbp per CPU-s | cores per 100 Mbp/s | 2-core capacity (Mbp/s) | load |",
        "|---|---|---|---|---|---|---|",
    ]
    for k, con in case["contenders"].items():
        lines.append(_row(con["label"], ok[k]) if ok[k] else f"| {con['label']} | **failed** | | | | | |")
    return "\n".join(lines + _notes(case, ok)) + "\n"


def _notes(case: dict, ok: dict[str, list[dict]]) -> list[str]:
    out = [
        "",
        "* **Mbp per CPU-s** is the rate one fully used core gives; **cores per 100 Mbp/s** = CPU-s per 100 Mbp.",
        "* **2-core capacity**: with the reader in a child process, reading and batching run on two cores at once; "
        "the busier of the two (CPU-s of the child vs the batching process, start-up included) bounds the rate.",
        "* The FASTA route ships 1 byte per base (uint8 codes); the h5 route ships float16 rows (8 bytes per base) "
        "or codes after a host-side conversion.",
        "* Mbp counted: the FASTA cases count the genome's bases (rows of both strands are fed, one strand's bases "
        "counted), the h5 cases the bases of their rows (both strands, 2 x the genome).",
    ]
    sizes = {
        case["contenders"][k]["label"]: runs[0]["feed"]["size_of_raw"]
        for k, runs in ok.items()
        if runs and runs[0]["feed"].get("size_of_raw")
    }
    if sizes:
        out.append(
            f"* **writer** cases: the predict writer ({case['params'].get('writer_threads', 2)} pool threads) turning "
            "int8 predictions (what a GPU sends back) into Predmoter's int64 gzip chunks; Mbp are bp of rows (both "
            "strands, 2 x the genome). Synthetic model-like rows (runs of 1-60 bp, values 0..60). File size as % of "
            "the raw int64: "
            + ", ".join(f"{n.split(',')[1].split('(')[0].strip()} {v:.2%}" for n, v in sizes.items())
            + "."
        )
    return out


def newest(folders: Iterable[Path | None], legacy: Path = LEGACY) -> tuple[dict, dict, str] | None:
    """(results, case, where it is) of the newest run of this stage: the harness's results files in ``folders`` and
    the old script's file (:func:`from_legacy`) alike."""
    found = [(res, c, p) for p, res, c in stage_cases("predict_feed", folders)]
    if legacy.is_file():
        old = from_legacy(json.loads(legacy.read_text()))
        found.append((old, old["cases"][0], legacy))
    if not found:
        return None
    res, case, path = max(found, key=lambda x: when(x[1].get("started")))
    return res, case, str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


NO_RUN = (
    "# Prediction feed: bp/s the host delivers with the model replaced by a no-op\n\nNo run yet: "
    "`benchmarks/run --stages predict_feed --out benchmarks/predict_feed/results`, then `benchmarks/render`.\n"
)


def published(results_dir: Path | None = None, own: Path = RESULTS_DIR, legacy: Path = LEGACY) -> dict[Path, str]:
    """This stage's page for ``benchmarks/render``: the newest run in its own folder (``own``), in ``results_dir``
    (the harness's results folder) or the old script's file."""
    got = newest((own, results_dir), legacy)
    return {PAGE: page(*got) if got else NO_RUN}


def main(argv: list[str]) -> int:
    if len(argv) != 5 or argv[0] != "measure":
        print("usage: python -m benchmarks.stages.predict_feed measure KIND PATH BATCH EXTRA_JSON", file=sys.stderr)
        return 2
    print(json.dumps(measure(argv[1], argv[2], int(argv[3]), json.loads(argv[4]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
