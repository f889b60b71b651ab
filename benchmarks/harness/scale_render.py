"""The generated tables of ``docs/scale.md``: the ``scale`` stage's cases of a results file (harness/scale.py).

Every number comes from a case record; the 4 Gbp line, where that size has not run, is an extrapolation from the
largest size measured and says so.
"""

from __future__ import annotations

import re

MiB = 1 << 20
FULL_BP = 4_000_000_000


def _m(x) -> str:
    return "–" if x is None else f"{x / MiB:,.0f}"


def _s(x) -> str:
    return "–" if x is None else (f"{x:,.0f}" if abs(x) >= 100 else f"{x:.1f}")


def _run(c: dict, contender: str = "pipeline") -> dict | None:
    runs = [r for r in c.get("runs", []) if r.get("scale") and r.get("contender", contender) == contender]
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
    out = [
        "| case | genome bp | wall s | CPU s (whole tree) | tasks | driver peak RSS MiB | driver CPU s / task | "
        "peak work/ MiB | peak outdir MiB | outputs MiB | load (1 min) | bounds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        r = _run(c)
        if not r:
            out.append(f"| {c['case']} | – | – | – | – | – | – | – | – | – | – | {_verdict(c)} |")
            continue
        s = r["scale"]
        bp = c["params"].get("total_bp")
        out.append(
            f"| {c['case']} | {f'{bp:,}' if bp else '–'} | {_s(r.get('wall_s'))} | {_s(r.get('cpu_s'))} | "
            f"{s.get('tasks', '–')} | {_m(s.get('driver_peak_rss_bytes'))} | "
            f"{_s(s.get('driver_cpu_s_per_task'))} | "
            f"{_m(s.get('peak_work_bytes'))} | {_m(s.get('peak_outdir_bytes'))} | {_m(s.get('outputs_bytes'))} "
            f"| {_load(r)} | {_verdict(c)} |"
        )
    return out


def _sized(cases: list[dict], with_bp: bool = False) -> list[tuple[dict, dict]]:
    """(case, run) of the size cases that ran (with ``with_bp``: those whose genome size is recorded)."""
    return [
        (c, r)
        for c in cases
        if c["case"].startswith("size_")
        for r in [_run(c)]
        if r and (not with_bp or c["params"].get("total_bp"))
    ]


def process_table(cases: list[dict]) -> list[str]:
    """Per process, per size case: tasks, summed CPU s, the largest task's peak RSS (MiB)."""
    sized = _sized(cases)
    if not sized:
        return []
    names = sorted({p for _, r in sized for p in r["scale"]["processes"]})
    head = (
        "| process | "
        + " | ".join(f"{c['params'].get('genome', c['case'])}: tasks / CPU s / peak RSS MiB" for c, _ in sized)
        + " |"
    )
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
        out.append(
            f"* `{c['case']}`: driver killed at {_s((k.get('killed') or {}).get('at_s'))} s with "
            f"{(k.get('killed') or {}).get('finished', '–')} PREDICT shard(s) finished (the driver's trace) and "
            f"{(k.get('killed') or {}).get('running', '–')} running (work directories); per the traces "
            f"{sh.get('finished_before_kill', '–')} of {sh.get('shards', '–')} had finished, the resume reran "
            f"{sh.get('rerun', '–')} and took {sh.get('cached', '–')} from the cache. {_verdict(c)}"
        )
    return out


def grouping_lines(cases: list[dict]) -> list[str]:
    """The many-assemblies case run twice: PREDICT_GROUP on (the default --predict_group_mbp) and off."""
    out = []
    for c in cases:
        a, b = _run(c), _run(c, "ungrouped")
        if not c["case"].startswith("many_") or not a or not b:
            continue
        pa, pb = (r["scale"].get("processes") or {} for r in (a, b))
        tasks = lambda p: sum((p.get(n) or {}).get("tasks", 0) for n in ("PREDICT", "PREDICT_GROUP"))  # noqa: E731
        cpu = lambda p: sum((p.get(n) or {}).get("cpu_s", 0) for n in ("PREDICT", "PREDICT_GROUP"))  # noqa: E731
        out.append(
            f"* `{c['case']}`, prediction grouped (`--predict_group_mbp` "
            f"{c['params'].get('predict_group_mbp', '–')}) and not (`0`): {tasks(pa)} vs {tasks(pb)} prediction "
            f"tasks, {_s(cpu(pa))} vs {_s(cpu(pb))} CPU s in them; the whole run {_s(a.get('wall_s'))} vs "
            f"{_s(b.get('wall_s'))} s wall, {_s(a.get('cpu_s'))} vs {_s(b.get('cpu_s'))} CPU s, "
            f"{a['scale'].get('tasks', '–')} vs {b['scale'].get('tasks', '–')} tasks (one run each)."
        )
    return out


def extrapolation(cases: list[dict]) -> list[str]:
    """Linear in genome size from the largest size case measured, when the full size has not run."""
    sized = _sized(cases, with_bp=True)
    if not sized or any(c["params"]["total_bp"] >= FULL_BP * 0.8 for c, _ in sized):
        return []
    c, r = max(sized, key=lambda x: x[0]["params"]["total_bp"])
    f = FULL_BP / c["params"]["total_bp"]
    s = r["scale"]
    return [
        f"**Extrapolated, not measured:** 4 Gbp of the same shape, linear in genome size from `{c['case']}` "
        f"(×{f:,.0f}): wall ≈ {r['wall_s'] * f / 3600:,.1f} h and CPU ≈ {r['cpu_s'] * f / 3600:,.1f} CPU h at that "
        f"run's load, peak work/ ≈ {s['peak_work_bytes'] * f / 2**30:,.1f} GiB, outputs ≈ "
        f"{s['outputs_bytes'] * f / 2**30:,.1f} GiB, input FASTA ≈ {FULL_BP * 1.017 / 2**30:,.1f} GiB."
    ]


def render(res: dict, src_name: str, gpu: list[dict] | None = None) -> str:
    # the size cases by genome size (a case re-run later is recorded after the others), then the rest in order
    cases = sorted(
        (c for c in res.get("cases", []) if c.get("stage") == "scale"),
        key=lambda c: (not c["case"].startswith("size_"), (c.get("params") or {}).get("total_bp") or 0),
    )
    if not cases:
        return ""
    quick = " (**`--quick`**: small sizes, a harness check, not the issue's sizes)" if res.get("quick") else ""
    out = [
        f"From `benchmarks/results/{src_name}`{quick}, cases of `benchmarks/run --stages scale`.",
        "",
        *case_table(cases),
        "",
    ]
    pt = process_table(cases)
    if pt:
        out += [
            "Per process (the trace: tasks completed, CPU s = realtime × %cpu summed, the largest task's peak RSS):",
            "",
            *pt,
            "",
        ]
    out += resume_lines(cases)
    grouped = grouping_lines(cases)
    if grouped:
        out += ["", *grouped]
    ex = [] if res.get("quick") else extrapolation(cases)  # small sizes: start-up dominates, no extrapolation
    if ex:
        out += ["", *ex]
    plan = [] if res.get("quick") else plan_lines(cases, gpu or [])
    if plan:
        out += ["", *plan]
    return "\n".join(out).rstrip() + "\n"


NO_SCALE_RUN = (
    "No run of the scale stage yet: `benchmarks/run --stages scale --quick` (small sizes) or "
    "`benchmarks/run --stages scale` (400 Mbp, 4 Gbp, 100 assemblies), then `benchmarks/render`."
)


def pick(results_dir, quick: bool) -> tuple:
    """(path, results) of the newest full (or ``--quick``) results file with scale cases, or (None, None)."""
    from .core import json_files

    found = [
        (d.get("last_finished") or d.get("last_started") or "", p.name, p, d)
        for p, d in json_files(results_dir)
        if bool(d.get("quick")) == quick and any(c.get("stage") == "scale" for c in d.get("cases", []))
    ]
    if not found:
        return None, None
    best = max(found, key=lambda x: x[:2])
    return best[2], best[3]


def published_scale(results_dir) -> str:
    """The full run's scale cases, then the newest ``--quick`` run's (each section says which)."""
    parts = []
    gpu = gpu_rates(results_dir.parent / "gpu" / "results")
    for quick in (False, True):
        path, res = pick(results_dir, quick)
        if res:
            parts.append(render(res, path.name, gpu))
    return "\n".join(parts) if parts else NO_SCALE_RUN


# --------------------------------------------------------------------------------------------------
# Planning a large run on paper (issue 30 §4): 100 genomes of 4 Gbp, from the measured rates
# --------------------------------------------------------------------------------------------------
PLAN_GENOMES = 100
#: the release model's subsequence length and the pipeline's default rows per PREDICT shard (--predict_shard_rows)
PLAN_L = 21_384
PLAN_SHARD_ROWS = 20_000
PLAN_GPUS = (1, 4, 16, 64)
PLAN_CORES = (64, 256, 1024)
PLAN_WALLTIMES_H = (1, 4, 24)
#: stages that run on CPU nodes after prediction (their CPU seconds per bp from the measured run)
PLAN_CPU_STAGES = ("PREDICT_PLAN", "PREDICT_MERGE", "PREDICT_VIEW", "BIGWIG", "PEAKS")


def gpu_rates(gpu_dir) -> list[dict]:
    """Per precision, from the newest GPU results file (the ``gpu`` stage's, ``benchmarks/gpu/run``; not a
    ``--quick`` one) with an end-to-end run: the loop's bp/s and the fixed cost of one PREDICT task (its wall minus
    its loop: start-up, model load, batch probe, drain)."""
    from ..stages.gpu import gpu_results, predict_rows

    files = []
    for p, res in gpu_results(gpu_dir):
        params, rows = predict_rows(res)
        runs = [r for r in rows if r.get("bp_per_s_loop") and r.get("wall_s") and r.get("loop_s")]
        if runs and not res.get("quick"):
            files.append((res.get("first_started", ""), p.name, params, runs))
    if not files:
        return []
    started, name, params, runs = max(files, key=lambda x: x[:2])
    return [
        {
            "precision": r["precision"],
            "run": r.get("run") or "",
            "loop_bp_s": r["bp_per_s_loop"],
            "task_fixed_s": r["wall_s"] - r["loop_s"],
            "gpu": (params.get("device") or {}).get("gpu", "GPU"),
            "file": name,
            "model": params.get("model_preset"),
            "mbp": params.get("mbp"),
        }
        for r in runs
    ]


def _flatness(case: dict) -> str:
    """What the size case says of per-task memory against the size before it: the processes its flatness bound
    failed for (its agreement's failed bounds, as check_flat words them), or that none did."""
    bad = sorted(
        {
            m.group(1)
            for b in (case.get("agreement") or {}).get("failed_bounds") or []
            if (m := re.match(r"(\w+): peak RSS .*: not flat\)", b))
        }
    )
    if bad:
        return f"not flat in `{case['case']}` for {', '.join(bad)}: see its bounds above"
    return f"no process failed the flatness bound in `{case['case']}`"


def plan_lines(cases: list[dict], gpu: list[dict], genome_bp: int = FULL_BP, genomes: int = PLAN_GENOMES) -> list[str]:
    """What ``genomes`` assemblies of ``genome_bp`` take: GPU time of PREDICT from the GPU figures, CPU time of the
    other per-genome stages, disk and memory from the largest measured size case. Every line says it is arithmetic
    on measured rates, not a measurement."""
    import math

    sized = _sized(cases, with_bp=True)
    if not sized or not gpu:
        return []
    c, r = max(sized, key=lambda x: x[0]["params"]["total_bp"])
    f = genome_bp / c["params"]["total_bp"]
    procs = r["scale"]["processes"]
    rows_bp = 2 * genome_bp  # both strands are predicted: bp of rows
    shards = math.ceil(rows_bp / PLAN_L / PLAN_SHARD_ROWS)
    cpu_s = sum(procs[p]["cpu_s"] for p in PLAN_CPU_STAGES if p in procs) * f
    out = [
        f"**Planned on paper, not measured** ({genomes} assemblies × {genome_bp / 1e9:g} Gbp; arithmetic on "
        f"measured rates): PREDICT from `benchmarks/gpu/results/{gpu[0]['file']}` ({gpu[0]['gpu']}, model preset "
        f"`{gpu[0]['model']}`, a {gpu[0]['mbp']:g} Mbp run: the loop's bp/s and each task's fixed cost, its wall "
        f"minus its loop); the other per-genome stages ({', '.join(PLAN_CPU_STAGES)}) from `{c['case']}`'s CPU "
        f"seconds scaled ×{f:,.0f} (the tiny test model's tracks: a real model's may hold more runs). Shards at "
        f"the default {PLAN_SHARD_ROWS:,} rows of {PLAN_L:,} bp: {shards} per assembly ({rows_bp / 1e9:g} Gbp of "
        "rows, both strands).",
        "",
        "| precision (batch size) | PREDICT per assembly (GPU h) | "
        + " | ".join(f"{n} GPU{'s' if n > 1 else ''}: all {genomes} (h)" for n in PLAN_GPUS)
        + " |",
        "|---|---|" + "---|" * len(PLAN_GPUS),
    ]
    for g in gpu:
        per = (shards * g["task_fixed_s"] + rows_bp / g["loop_bp_s"]) / 3600
        # shards are independent tasks: N GPUs take ceil(shards_total / N) rounds of one shard's time at most
        shard_h = (g["task_fixed_s"] + PLAN_SHARD_ROWS * PLAN_L / g["loop_bp_s"]) / 3600
        cells = [f"{max(per * genomes / n, shard_h):,.2f}" for n in PLAN_GPUS]
        run = {"first": "probed on each task", "cached": "probed once, cached"}.get(g["run"], g["run"])
        out.append(f"| {g['precision']} ({run}) | {per:,.3f} | " + " | ".join(cells) + " |")
    out += [
        "",
        f"CPU stages after prediction: {cpu_s / 3600:,.2f} CPU h per assembly, {cpu_s * genomes / 3600:,.0f} "
        f"CPU h for {genomes} ("
        + ", ".join(f"{cpu_s * genomes / 3600 / k:,.1f} h on {k} cores" for k in PLAN_CORES)
        + "; one task per assembly and stage, "
        "so at most " + f"{genomes} tasks of a stage run at once). Disk per assembly: outputs ≈ "
        f"{r['scale']['outputs_bytes'] * f / 2**30:,.1f} GiB, `work/` peak ≈ "
        f"{r['scale']['peak_work_bytes'] * f / 2**30:,.1f} GiB (every shard's part stays until the run ends); "
        f"for {genomes} at once ≈ {r['scale']['peak_work_bytes'] * f * genomes / 2**40:,.1f} TiB of `work/`. "
        f"Memory per task: the per-process table above ({_flatness(c)}).",
        "",
    ]
    g = gpu[0]
    whole_min = (g["task_fixed_s"] + rows_bp / g["loop_bp_s"]) / 60
    shard_min = (g["task_fixed_s"] + PLAN_SHARD_ROWS * PLAN_L / g["loop_bp_s"]) / 60
    out.append(
        f"Walltime limits ({g['precision']}, {g['gpu']}): a PREDICT task of R rows takes its fixed "
        f"{g['task_fixed_s']:,.0f} s + R × {PLAN_L:,} bp / {g['loop_bp_s']:,.3g} bp/s: a default shard "
        f"({PLAN_SHARD_ROWS:,} rows) ≈ {shard_min:,.1f} min, a whole {genome_bp / 1e9:g} Gbp assembly in one "
        f"task ≈ {whole_min:,.1f} min, so any walltime limit of an hour or more holds a PREDICT task on "
        "such a GPU; shards spread an assembly over GPUs (each shard pays the fixed start-up once). On CPU "
        "nodes PREDICT runs at the rates of docs/predict.md; BIGWIG and PEAKS are one task per assembly "
        f"(≈ {(procs.get('BIGWIG', {}).get('cpu_s', 0) + procs.get('PEAKS', {}).get('cpu_s', 0)) * f / 60:,.0f} "
        f"CPU min together per {genome_bp / 1e9:g} Gbp here): a limit below that needs more time, not more "
        "shards."
    )
    return out
