"""The formatting every benchmark table shares: numbers, spreads, ratios, agreement marks, and the machine each
case ran on (``benchmarks/render`` and each stage's own tables)."""

from __future__ import annotations

import math
import statistics

from .core import machine_brief


def _f(x, nd=2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.{nd}f}"


def _spread(s: dict | None, nd=2) -> str:
    if not s:
        return "–"
    if s["n"] == 1:
        return _f(s["median"], nd)
    return f"{_f(s['median'], nd)} ({_f(s['min'], nd)}–{_f(s['max'], nd)})"


def _ratio(r: dict | None) -> str:
    if not r:
        return "–"
    lo, hi = r["low"], r["high"]
    if abs(hi - lo) < 1e-9:
        return f"**{r['of_medians']:.1f}×**"
    return f"**{r['of_medians']:.1f}×** ({lo:.1f}–{hi:.1f})"


def _mib(s: dict | None) -> str:
    return "–" if not s else f"{s['median'] / 2**20:,.0f}"


def _ok(ag: dict | None) -> str:
    if not ag:
        return "–"
    return {True: "✔ ", False: "✘ ", None: ""}[ag.get("ok")] + ag.get("detail", "")


def _machine_line(m: dict) -> str:
    mem = f"{m['memory_bytes'] / 2**30:.0f} GiB" if m.get("memory_bytes") else "? GiB"
    return (
        f"{m.get('cpu_model')} ({', '.join(m.get('cpu_flags') or []) or 'no SIMD flags listed'}), "
        f"{m.get('logical_cpus')} logical CPUs ({m.get('usable_cpus')} usable), {mem}"
        + (f", {m['os']}, Python {m['python']}" if m.get("os") else "")
    )


MARKS = "†‡§¶"


def machine_marks(res: dict) -> dict[tuple, tuple[str, dict]]:
    """machine_brief -> (mark, machine) of each machine other than the file's own that a case ran on, marked in
    order of first use (†, ‡, §, ¶, ††, …)."""
    own, out = machine_brief(res["machine"]), {}
    for c in res.get("cases", []):
        m = c.get("machine")
        if m and not c.get("skipped") and machine_brief(m) not in out and machine_brief(m) != own:
            i = len(out)
            out[machine_brief(m)] = (MARKS[i % len(MARKS)] * (1 + i // len(MARKS)), m)
    return out


def other_machines(res: dict) -> list[dict]:
    """The machines (case records' ``machine``) other than the file's own, in order of first use."""
    return [m for _, m in machine_marks(res).values()]


def _mark(res: dict, c: dict) -> str:
    """' †' etc. when case c ran on another machine than the file's, else ''."""
    m = c.get("machine")
    hit = machine_marks(res).get(machine_brief(m)) if m and not c.get("skipped") else None
    return " " + hit[0] if hit else ""


def machines_text(res: dict) -> str:
    """The file's machine, and each other machine some cases ran on with the mark those cases carry."""
    txt = _machine_line(res["machine"])
    for mark, o in machine_marks(res).values():
        ids = [c["case"] for c in res["cases"] if _mark(res, c).strip() == mark]
        txt += (
            f"; cases marked {mark} ({', '.join(ids)}) ran on another machine of this kind: {_machine_line(o)} — "
            "their peer ran beside them there, so their ratios stand, but compare their times only with each other"
        )
    return txt


def _loads(runs: list[dict]) -> str:
    v = [r["load_before"][0] for r in runs if r.get("load_before")] + [
        r["load_after"][0] for r in runs if r.get("load_after")
    ]
    return f"{min(v):.1f}–{max(v):.1f}" if v else "–"


def _sd(xs: list[float]) -> str:
    """'sd 0.0012 ' of per-seed means (empty for one seed)."""
    return f"sd {statistics.stdev(xs):.4f} " if len(xs) > 1 else ""


def _seeds(seeds: list) -> str:
    """1–10 for a contiguous run of seeds, else the list."""
    s = sorted(seeds)
    return f"{s[0]}–{s[-1]}" if len(s) > 2 and s == list(range(s[0], s[-1] + 1)) else ", ".join(map(str, s))


NO_RUN = (
    "No published run yet. The numbers here are generated from a full run of the harness on a quiet machine: "
    "`benchmarks/run --peers ../shared/peers` (2–3 hours; `--stages` runs a part, `--resume` continues), "
    "then `benchmarks/render`. `benchmarks/run --quick` (a few minutes) checks the harness itself; its "
    "results are not published."
)
