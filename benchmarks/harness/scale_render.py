"""The generated tables of ``docs/scale.md``: the ``scale`` stage's cases of a results file (harness/scale.py).

Every number comes from a case record; the 4 Gbp line, where that size has not run, is an extrapolation from the
largest size measured and says so.
"""
from __future__ import annotations

MiB = 1 << 20
FULL_BP = 4_000_000_000


def _m(x) -> str:
    return "–" if x is None else f"{x / MiB:,.0f}"


def _s(x) -> str:
    return "–" if x is None else (f"{x:,.0f}" if abs(x) >= 100 else f"{x:.1f}")


def _run(c: dict) -> dict | None:
    runs = [r for r in c.get("runs", []) if r.get("scale")]
    return runs[0] if runs else None


def _verdict(c: dict) -> str:
    ag = c.get("agreement") or {}
    if c.get("skipped"):
        return f"skipped: {c['skipped']}"
    return ("✔ " if ag.get("ok") else "✘ ") + (ag.get("detail") or "")


def _load(r: dict) -> str:
    a, b = (r.get("load_before") or [None])[0], (r.get("load_after") or [None])[0]
    return "–" if a is None else f"{a:.1f}→{b:.1f}"


def case_table(cases: list[dict]) -> list[str]:
    out = ["| case | genome bp | wall s | CPU s (whole tree) | tasks | driver peak RSS MiB | driver CPU s / task | "
           "peak work/ MiB | peak outdir MiB | outputs MiB | load (1 min) | bounds |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cases:
        r = _run(c)
        if not r:
            out.append(f"| {c['case']} | – | – | – | – | – | – | – | – | – | – | {_verdict(c)} |")
            continue
        s = r["scale"]
        bp = c["params"].get("total_bp")
        out.append(f"| {c['case']} | {f'{bp:,}' if bp else '–'} | {_s(r.get('wall_s'))} | {_s(r.get('cpu_s'))} | "
                   f"{s.get('tasks', '–')} | {_m(s.get('driver_peak_rss_bytes'))} | "
                   f"{_s(s.get('driver_cpu_s_per_task'))} | "
                   f"{_m(s.get('peak_work_bytes'))} | {_m(s.get('peak_outdir_bytes'))} | {_m(s.get('outputs_bytes'))} "
                   f"| {_load(r)} | {_verdict(c)} |")
    return out


def process_table(cases: list[dict]) -> list[str]:
    """Per process, per size case: tasks, summed CPU s, the largest task's peak RSS (MiB)."""
    sized = [(c, _run(c)) for c in cases if c["case"].startswith("size_")]
    sized = [(c, r) for c, r in sized if r]
    if not sized:
        return []
    names = sorted({p for _, r in sized for p in r["scale"]["processes"]})
    head = "| process | " + " | ".join(f"{c['params'].get('genome', c['case'])}: tasks / CPU s / peak RSS MiB"
                                      for c, _ in sized) + " |"
    out = [head, "|---|" + "---|" * len(sized)]
    for n in names:
        cells = []
        for _, r in sized:
            p = r["scale"]["processes"].get(n)
            cells.append("–" if not p else f"{p['tasks']} / {_s(p['cpu_s'])} / {_m(p['peak_rss_bytes'])}")
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    return out


def resume_lines(cases: list[dict]) -> list[str]:
    out = []
    for c in cases:
        if not c["case"].startswith("resume_"):
            continue
        r = _run(c)
        ag = c.get("agreement") or {}
        k = ((r or {}).get("scale") or {}).get("killed_run") or {}
        sh = ag.get("shards") or {}
        out.append(f"* `{c['case']}`: driver killed at {_s((k.get('killed') or {}).get('at_s'))} s with "
                   f"{(k.get('killed') or {}).get('finished', '–')} PREDICT shard(s) finished (the driver's trace) and "
                   f"{(k.get('killed') or {}).get('running', '–')} running (work directories); per the traces "
                   f"{sh.get('finished_before_kill', '–')} of {sh.get('shards', '–')} had finished, the resume reran "
                   f"{sh.get('rerun', '–')} and took {sh.get('cached', '–')} from the cache. {_verdict(c)}")
    return out


def extrapolation(cases: list[dict]) -> list[str]:
    """Linear in genome size from the largest size case measured, when the full size has not run."""
    sized = [(c, _run(c)) for c in cases if c["case"].startswith("size_") and _run(c)]
    sized = [(c, r) for c, r in sized if c["params"].get("total_bp")]
    if not sized or any(c["params"]["total_bp"] >= FULL_BP * 0.8 for c, _ in sized):
        return []
    c, r = max(sized, key=lambda x: x[0]["params"]["total_bp"])
    f = FULL_BP / c["params"]["total_bp"]
    s = r["scale"]
    return [f"**Extrapolated, not measured:** 4 Gbp of the same shape, linear in genome size from `{c['case']}` "
            f"(×{f:,.0f}): wall ≈ {r['wall_s'] * f / 3600:,.1f} h and CPU ≈ {r['cpu_s'] * f / 3600:,.1f} CPU h at that "
            f"run's load, peak work/ ≈ {s['peak_work_bytes'] * f / 2**30:,.1f} GiB, outputs ≈ "
            f"{s['outputs_bytes'] * f / 2**30:,.1f} GiB, input FASTA ≈ {FULL_BP * 1.017 / 2**30:,.1f} GiB."]


def render(res: dict, src_name: str) -> str:
    cases = [c for c in res.get("cases", []) if c.get("stage") == "scale"]
    if not cases:
        return ""
    quick = " (**`--quick`**: small sizes, a harness check, not the issue's sizes)" if res.get("quick") else ""
    out = [f"From `benchmarks/results/{src_name}`{quick}, cases of `benchmarks/run --stages scale`.", "",
           *case_table(cases), ""]
    pt = process_table(cases)
    if pt:
        out += ["Per process (the trace: tasks completed, CPU s = realtime × %cpu summed, the largest task's peak "
                "RSS):", "", *pt, ""]
    out += resume_lines(cases)
    ex = [] if res.get("quick") else extrapolation(cases)   # small sizes: start-up dominates, no extrapolation
    if ex:
        out += ["", *ex]
    return "\n".join(out).rstrip() + "\n"


NO_SCALE_RUN = ("No run of the scale stage yet: `benchmarks/run --stages scale --quick` (small sizes) or "
                "`benchmarks/run --stages scale` (400 Mbp, 4 Gbp, 100 assemblies), then `benchmarks/render`.")


def pick(results_dir, quick: bool) -> tuple:
    """(path, results) of the newest full (or ``--quick``) results file with scale cases, or (None, None)."""
    import json

    found = []
    for p in sorted(results_dir.glob("*.json")):
        try:
            d = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if bool(d.get("quick")) == quick and any(c.get("stage") == "scale" for c in d.get("cases", [])):
            found.append((d.get("last_finished") or d.get("last_started") or "", p.name, p, d))
    if not found:
        return None, None
    best = max(found, key=lambda x: x[:2])
    return best[2], best[3]


def published_scale(results_dir) -> str:
    """The full run's scale cases, then the newest ``--quick`` run's (each section says which)."""
    parts = []
    for quick in (False, True):
        path, res = pick(results_dir, quick)
        if res:
            parts.append(render(res, path.name))
    return "\n".join(parts) if parts else NO_SCALE_RUN
