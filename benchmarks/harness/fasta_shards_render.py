"""The generated table of docs/predict.md ("The FASTA index"): what one FASTA prediction shard reads on the scan route
and through the index, from the newest ``benchmarks/fasta_shards/results/*.json`` (``benchmarks/fasta_shards/run``)."""

from __future__ import annotations

from pathlib import Path

from .core import json_files

RESULTS = Path(__file__).resolve().parents[1] / "fasta_shards" / "results"
NO_RUN = "No run yet: `benchmarks/fasta_shards/run --mbp 100 --shards 4 --workdir /tmp`, then `benchmarks/render`."

ROUTES = (
    ("plain", "scan", "plain, scan"),
    ("plain", "index", "plain, index"),
    ("bgzip", "scan", "bgzip, scan"),
    ("bgzip", "index", "bgzip, index"),
)


def latest(results_dir: Path = RESULTS) -> tuple[Path | None, dict | None]:
    runs = [(p, d) for p, d in json_files(results_dir) if d.get("benchmark") == "fasta_shards"]
    return runs[-1] if runs else (None, None)


def _span(values: list[float], fmt: str) -> str:
    lo, hi = min(values), max(values)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}–{fmt.format(hi)}"


def table(res: dict, name: str) -> list[str]:
    m = res.get("machine") or {}
    plain = res["routes"]["plain"]
    loads = [r.get(k) for r in res["routes"].values() for k in ("load_before", "load_after") if r.get(k) is not None]
    out = [
        f"From `benchmarks/fasta_shards/results/{name}` (`{res['command']}`, {res['started']}): "
        f"{res['mbp']} Mbp synthetic in {res['records']} records, {res['line_width']}-column lines, L = "
        f"{res['subsequence_length']}, {res['shard_count']} shards, the model replaced by a no-op; "
        f"{m.get('cpu_model', '?')}, {m.get('logical_cpus', '?')} CPUs, load average "
        f"{_span(loads, '{:.1f}') if loads else '?'}; warm page cache (the bytes are exact, the seconds indicative).",
        "",
        "| | plan | each shard: bytes of the file read | all shards together | shard wall / CPU-s |",
        "|---|---|---|---|---|",
    ]
    for route, how, label in ROUTES:
        r = res["routes"][route]
        size = r["bytes_on_disk"]
        plan = r["plan_scan"] if how == "scan" else r["plan_index"]
        sh = [s[how] for s in r["shards"]]
        total = sum(s["bytes_read"] for s in sh)
        out.append(
            f"| {label} | {plan['wall_s']:.2f} s, {plan['cpu_s']:.2f} CPU-s | "
            f"{_span([s['bytes_read'] / 1e6 for s in sh], '{:,.0f}')} MB of {size / 1e6:,.1f} MB on disk | "
            f"{total / 1e6:,.0f} MB ({total / size:.2f}× the file) | "
            f"{_span([s['wall_s'] for s in sh], '{:.2f}')} s / {_span([s['cpu_s'] for s in sh], '{:.2f}')} |"
        )
    ratio = plain["plan_index"]["cpu_s"] / plain["plan_scan"]["cpu_s"] if plain["plan_scan"]["cpu_s"] else None
    if ratio:
        out += [
            "",
            f"The indexed plan (htslib's pass plus the verification) costs {ratio:.1f}× the scan's CPU on the "
            "plain FASTA; every shard then reads only its share.",
        ]
    return out


def render(results_dir: Path = RESULTS) -> str:
    path, res = latest(results_dir)
    return "\n".join(table(res, path.name)) if res else NO_RUN
