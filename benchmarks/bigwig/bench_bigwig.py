#!/usr/bin/env python
"""A/B benchmark of ``chromaflow bigwig`` against Predmoter's converter (``peer-predmoter-convert``), side by side.

For each case (format × strand × window) the two commands run alternately (ours, peer, ours, peer, ...) on the
same predictions file, ``--repeat`` times each. Every run is a child process; its wall time, CPU time (user +
sys, from ``wait4``) and peak RSS are recorded, with the load average before and after. After each pair the
outputs are compared: bigWig per-base values (pyBigWig) and bedGraph text must be identical, except ±1 at
exact smoothing ties (S/w = k + ½, computed from the predictions), which are counted and reported.

The predictions file is a path, or generated (seeded) with ``synth_predictions.py`` when ``--mbp`` is given.
Results: JSON (``--json``) and a Markdown table on stdout (``--markdown`` also writes it to a file); medians
with min–max spread and the ratio of medians. Stage-local tool for A/B decisions; the published cross-stage
numbers come from ``benchmarks/run``.

    python benchmarks/bigwig/bench_bigwig.py --mbp 200 --mode realistic --repeat 3 --json out.json
    python benchmarks/bigwig/bench_bigwig.py --predictions P.h5 --cases bw:avg bg:avg:150 --repeat 2
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PEER = ROOT.parent / "shared" / "peers" / "bin" / "peer-predmoter-convert"
sys.path.insert(0, str(ROOT / "src"))  # chromaflow.bigwig.ties: the smoothing ties and the tie rule
sys.path.insert(0, str(ROOT / "benchmarks"))  # harness.timer: the benchmarks' process timer
from chromaflow.report.machine import machine_info  # noqa: E402 - the machine record
from harness.timer import measure  # noqa: E402

DEFAULT_CASES = ["bw:avg", "bg:avg", "bw:+", "bg:-", "bw:avg:150", "bg:avg:150"]


def run_child(cmd: list[str], cwd: Path) -> dict:
    """Run one command; wall, CPU (user + sys of that process and its children) and peak RSS (the one timer)."""
    r = measure(cmd, cwd=cwd, check=True)
    return {
        "wall_s": r["wall_s"],
        "cpu_s": r["cpu_s"],
        "user_s": r["user_s"],
        "sys_s": r["sys_s"],
        "peak_rss_mb": r["peak_rss_bytes"] / 2**20,
        "load_before": r["load_before"],
        "load_after": r["load_after"],
    }


def parse_case(text: str) -> tuple[str, str, int | None]:
    parts = text.split(":")
    fmt, strand = parts[0], parts[1]
    return fmt, strand, (int(parts[2]) if len(parts) > 2 and parts[2] else None)


def commands(pred: Path, out: Path, fmt: str, strand: str, ws: int | None, threads: int | None):
    ours = [
        sys.executable,
        "-m",
        "chromaflow",
        "bigwig",
        "--predictions",
        str(pred),
        "--outdir",
        str(out),
        "--basename",
        "b",
        "--format",
        fmt,
        "--strand",
        strand,
        "--no-browser-files",
        "--force",
    ]
    peer = [str(PEER), "-i", str(pred), "-o", str(out), "--basename", "b", "-of", fmt]
    if strand != "avg":
        peer += ["--strand", strand]
    if ws:
        ours += ["--window-size", str(ws)]
        peer += ["--window-size", str(ws)]
    if threads:
        ours += ["--threads", str(threads)]
    return ours, peer


def ties(pred: Path, dataset: int, w: int, strand: str) -> dict[str, np.ndarray]:
    from chromaflow.bigwig.ties import smoothing_ties

    return {c: np.array(sorted(v), dtype=np.int64) for c, v in smoothing_ties(pred, dataset, w, strand).items()}


def compare(ours: Path, peer: Path, tie_pos: dict[str, np.ndarray] | None) -> dict:
    """Identical per-base values (bigWig) or text (bedGraph); differences only at ties when smoothing."""
    if ours.name.endswith(".bw"):
        import pyBigWig

        a, b = pyBigWig.open(str(ours)), pyBigWig.open(str(peer))
        try:
            if a.chroms() != b.chroms():
                return {"identical": False, "why": "chromosomes differ"}
            diffs = 0
            at_ties = 0
            for c, size in a.chroms().items():
                va = a.values(c, 0, size, numpy=True)
                vb = b.values(c, 0, size, numpy=True)
                d = np.flatnonzero(va != vb)
                diffs += len(d)
                if len(d):
                    allowed = tie_pos.get(c, np.empty(0, np.int64)) if tie_pos else np.empty(0, np.int64)
                    ok = np.isin(d, allowed) & (np.abs(va[d] - vb[d]) == 1)
                    if not ok.all():
                        return {"identical": False, "why": f"{c}:{int(d[~ok][0])} differs outside the ties"}
                    at_ties += len(d)
            return {"identical": diffs == 0, "tie_differences": at_ties, "ok": True}
        finally:
            a.close()
            b.close()
    with gzip.open(ours, "rb") as fa, gzip.open(peer, "rb") as fb:
        ta = fa.read()
        tb = fb.read().replace(b"\n\n", b"\n")  # the reference's blank lines (empty-block defect)
    if ta == tb:
        return {"identical": True, "tie_differences": 0, "ok": True}
    if tie_pos is None:
        return {"identical": False, "why": "bedGraph text differs"}
    from chromaflow.bigwig.ties import bg_intervals, compare_with_ties

    try:
        named = compare_with_ties(
            bg_intervals(ta.decode()), bg_intervals(tb.decode()), {c: set(v.tolist()) for c, v in tie_pos.items()}
        )
    except AssertionError as exc:
        return {"identical": False, "why": str(exc)[:300]}
    return {"identical": False, "tie_differences": len(named), "ok": True}


def summarise(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--predictions", type=Path, help="an existing predictions h5")
    src.add_argument("--mbp", type=float, help="generate this many Mbp with synth_predictions.py")
    ap.add_argument("--mode", choices=["realistic", "worst"], default="realistic")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--cases",
        nargs="+",
        default=DEFAULT_CASES,
        metavar="FMT:STRAND[:WS]",
        help=f"cases (default: {' '.join(DEFAULT_CASES)})",
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="--threads for ours (default: all CPUs)")
    ap.add_argument("--no-peer", action="store_true", help="ours only")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    ap.add_argument("--workdir", type=Path, default=None, help="scratch directory (default: a temp dir)")
    args = ap.parse_args(argv)
    if not args.no_peer and not PEER.exists():
        ap.error(f"{PEER} not found (or use --no-peer)")
    tmp = Path(tempfile.mkdtemp(prefix="cf_bigwig_ab_", dir=args.workdir))
    try:
        if args.predictions:
            pred = args.predictions.resolve()
            gen = None
        else:
            pred = tmp / "predictions.h5"
            t0 = time.perf_counter()
            out = subprocess.run(
                [
                    sys.executable,
                    str(HERE / "synth_predictions.py"),
                    "--mbp",
                    str(args.mbp),
                    "--mode",
                    args.mode,
                    "--seed",
                    str(args.seed),
                    "--out",
                    str(pred),
                ],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            gen = json.loads(out)
            gen["seconds"] = time.perf_counter() - t0
        record = {
            "machine": machine_info(),
            "predictions": str(pred),
            "generated": gen,
            "repeat": args.repeat,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "cases": [],
        }
        for case in args.cases:
            fmt, strand, ws = parse_case(case)
            runs = {"ours": [], "peer": []}
            checks = []
            tie_cache: dict = {}
            for rep in range(args.repeat):
                dirs = {}
                for who in ["ours"] if args.no_peer else ["ours", "peer"]:
                    d = tmp / f"{who}"
                    shutil.rmtree(d, ignore_errors=True)
                    d.mkdir()
                    ours_cmd, peer_cmd = commands(pred, d, fmt, strand, ws, args.threads)
                    runs[who].append(run_child(ours_cmd if who == "ours" else peer_cmd, tmp))
                    dirs[who] = d
                    print(
                        f"{case} {who} #{rep + 1}: wall {runs[who][-1]['wall_s']:.2f} s, cpu "
                        f"{runs[who][-1]['cpu_s']:.2f} s, load {runs[who][-1]['load_before']:.1f}",
                        file=sys.stderr,
                        flush=True,
                    )
                if not args.no_peer:
                    for i, p in enumerate(sorted(dirs["ours"].glob("b_*"))):
                        ds_names = gen["datasets"] if gen else None
                        ds_index = ds_names.index(p.name.split("_")[1]) if ds_names else i
                        if ws and (p.name, ws) not in tie_cache:
                            tie_cache[(p.name, ws)] = ties(pred, ds_index, ws, strand)
                        res = compare(p, dirs["peer"] / p.name, tie_cache.get((p.name, ws)) if ws else None)
                        res["file"] = p.name
                        checks.append(res)
                        if not res.get("ok"):
                            raise SystemExit(f"outputs differ: {res}")
            sizes = {who: sum(p.stat().st_size for p in (tmp / who).glob("b_*")) for who in runs if runs[who]}
            row = {
                "case": case,
                "format": fmt,
                "strand": strand,
                "window": ws,
                "output_bytes": sizes,
                "ours": {k: summarise([r[k] for r in runs["ours"]]) for k in ("wall_s", "cpu_s", "peak_rss_mb")},
                "runs": runs,
                "checks": checks,
            }
            if not args.no_peer:
                row["peer"] = {k: summarise([r[k] for r in runs["peer"]]) for k in ("wall_s", "cpu_s", "peak_rss_mb")}
                row["ratio_wall"] = row["peer"]["wall_s"]["median"] / row["ours"]["wall_s"]["median"]
                row["ratio_cpu"] = row["peer"]["cpu_s"]["median"] / row["ours"]["cpu_s"]["median"]
            record["cases"].append(row)
        record["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        md = markdown(record)
        print(md)
        if args.json:
            args.json.write_text(json.dumps(record, indent=1) + "\n")
        if args.markdown:
            args.markdown.write_text(md)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def markdown(rec: dict) -> str:
    m = rec["machine"]
    gen = rec.get("generated")
    what = (
        (
            f"{gen['bp'] / 1e6:.0f} Mbp {gen['mode']} synthetic predictions (seed {gen['seed']}, "
            f"{len(gen['datasets'])} datasets)"
        )
        if gen
        else rec["predictions"]
    )
    loads = [
        r[k]
        for c in rec["cases"]
        for who in ("ours", "peer")
        for r in c["runs"].get(who, [])
        for k in ("load_before", "load_after")
    ]
    lines = [
        f"{what}; {m['cpu_model']}, {m['logical_cpus']} cores, host {m['host']}; load average "
        f"{min(loads):.1f}–{max(loads):.1f}; "
        f"{rec['repeat']} alternating run(s) per side; {rec['started']} – {rec['finished']}.",
        "",
        "| case | ours wall s | peer wall s | ratio (wall) | ours CPU s | peer CPU s | ratio (CPU) | ours / peer peak "
        "RSS MB | ours / peer output MB | outputs |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def f(s):
        return f"{s['median']:.2f} ({s['min']:.2f}–{s['max']:.2f})"

    for c in rec["cases"]:
        peer = c.get("peer")
        ties_n = max((x.get("tie_differences", 0) for x in c["checks"]), default=0)
        same = (
            "identical"
            if all(x.get("identical") for x in c["checks"])
            else f"identical except {ties_n} tie position(s)"
        )
        if not c["checks"]:
            same = "not compared"
        lines.append(
            f"| {c['case']} | {f(c['ours']['wall_s'])} | {f(peer['wall_s']) if peer else '–'} | "
            f"{c.get('ratio_wall', 0):.1f}× | {f(c['ours']['cpu_s'])} | {f(peer['cpu_s']) if peer else '–'} | "
            f"{c.get('ratio_cpu', 0):.1f}× | {c['ours']['peak_rss_mb']['median']:.0f} / "
            f"{peer['peak_rss_mb']['median'] if peer else 0:.0f} | "
            f"{c['output_bytes'].get('ours', 0) / 1e6:.1f} / {c['output_bytes'].get('peer', 0) / 1e6:.1f} | {same} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
