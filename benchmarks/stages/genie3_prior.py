"""``genie3 --prior`` on DREAM4 size 100 (ours alone): what the weighted forest costs, and what a prior does to
accuracy with the prior check off and at its default. It replaced ``benchmarks/genie3/run_benchmark.py prior``; its
tables are the two generated blocks of docs/genie3.md (``benchmarks/render``).

* ``cost_net<N>``: ``chromaflow genie3 --threads 1`` on network N without a prior and with a random prior (per
  ordered pair 1 with probability 0.1, 0 with 0.6, NA otherwise: ``python -m benchmarks.harness.tools
  random-prior``) at each alpha, ``--prior-check off``, alternated within each repeat (round); the figure is the
  tree-growing CPU of the command's metrics (``compute_cpu_s``: ``compute_weights`` alone, one thread, all 100
  targets), not the process's. A fifth command runs the default prior check on the same prior (``--prior-check
  auto --n-trees 1``); its figure is the check's seconds in the metrics (``prior_check_s``, wall).
* ``accuracy_net<N>``: AUPR/AUROC (``harness.agree.score``) on network N with a prior made from its gold standard
  (``tools gold-priors``: each pair NA with probability 0.3, else 1 with probability 0.6 for a true edge and 0.05
  for a false one) and with the same values shuffled over the pairs, at each alpha, ``--prior-check off``,
  ``correlation`` and ``auto`` (the CLI's own rule: it runs alpha 0 when the check finds no evidence); the check's
  decision, z and p from the run's summary. One run each: the forests are seeded, the same bytes every time.

* ``real_<set>`` (only where ``CHROMAFLOW_GRN_DATA`` names the folder ``benchmarks/genie3/grn_data.py`` wrote: real
  expression, an independent prior and a gold standard; S. cerevisiae, B. subtilis and the Arabidopsis nitrate
  set): AUPR/AUROC over the set's evaluated pairs (``gold.tsv`` edges among the regulators, or ``meta.json``'s
  ``evaluated_regulators``, x evaluated targets, ``exclude.tsv`` pairs left out) of the run without a prior, the
  prior with each ``--prior-check`` (auto, correlation, prediction, off), and the same prior with its gene ids
  shuffled (targets among the genes, regulators among the regulators; ``default_rng(1)``) with each; each check's
  record from the summary. One run each.

The prior check's own runs (``--cases cost_,accuracy_,real_``) are kept in :data:`CHECK_RESULTS`, which the tables
read before the retired script's file.

The stage's sizes, builder, the converter of the retired script's results file (:func:`from_legacy`) and its render
section (:func:`prior_tables`, :func:`with_prior_tables`).
"""

from __future__ import annotations

import gzip
import json
import os
import statistics
from pathlib import Path

import numpy as np

from ..harness.core import SCHEMA, Case, Contender, json_files
from ..harness.env import ROOT, module
from ..harness.stagekit import Ctx, ours, run_checked, score_links

#: launchers of ../shared/peers/bin this stage needs (none: ours alone)
PEERS: list[str] = []
#: sizes of the full run (keys are the results files' and the docs' names; Ctx.cfg merges every stage's)
FULL = {
    "g3prior_networks": [1, 2, 3, 4, 5],
    "g3prior_trees": 1000,
    "g3prior_alphas": [0.25, 0.5, 1.0],
    "g3prior_accuracy_net": 1,
    "g3prior_accuracy_alphas": [0, 0.05, 0.1, 0.25, 0.5, 1],
    "g3prior_seed": 0,  # the accuracy runs' forest seed
    "g3prior_threads": 2,  # the accuracy runs' threads (the same bytes for any)
    "g3prior_real_trees": 500,  # the real sets' trees (two cores: minutes a run)
    "g3prior_null_priors": 100,  # relabellings of each real set's prior (real_<set>_null)
    "g3prior_real_alpha": 0.5,
}
#: sizes of the --quick run
QUICK = {
    "g3prior_networks": [1],
    "g3prior_trees": 20,
    "g3prior_alphas": [0.5],
    "g3prior_accuracy_net": 1,
    "g3prior_accuracy_alphas": [0, 0.5],
    "g3prior_seed": 0,
    "g3prior_threads": 2,
    "g3prior_real_trees": 20,
    "g3prior_null_priors": 5,
    "g3prior_real_alpha": 0.5,
}
DREAM4 = ROOT.parent / "shared" / "reference" / "dream4"
PRIORS = ("informative", "shuffled")
#: the retired script's results file (read through :func:`from_legacy` until a run of this stage replaces it)
LEGACY = ROOT / "benchmarks" / "genie3" / "prior_results.json"
#: this stage's own results (``benchmarks/run --stages genie3_prior``: cost_, accuracy_ and real_ cases), kept
#: here until a full run in benchmarks/results holds them (a file there holding this stage alone would pass for the
#: newest full run of every other stage's page)
CHECK_RESULTS = ROOT / "benchmarks" / "genie3" / "prior_check_results.json"
DOC = ROOT / "docs" / "genie3.md"
#: the generated blocks of docs/genie3.md: one per table, replaced between its markers
BLOCKS = ("prior-cost", "prior-accuracy", "prior-real")
#: the real sets (folders of CHROMAFLOW_GRN_DATA, written by benchmarks/genie3/grn_data.py)
REAL_SETS = ("yeast", "bsubtilis", "arabidopsis")
#: the --prior-check modes the accuracy and real cases compare (auto: the default, the relabelling test)
MODES = ("auto", "correlation", "prediction", "off")
#: the real cases' runs: (prior, --prior-check); (None, None) is the run without a prior
REAL_RUNS = (
    (None, None),
    *((p, m) for p in ("informative", "shuffled") for m in MODES),
)


def _files(net: int) -> tuple[Path, Path]:
    return (
        DREAM4 / f"insilico_size100_{net}_multifactorial.tsv",
        DREAM4 / f"DREAM4_GoldStandard_InSilico_Size100_multifactorial_{net}.tsv",
    )


def _genie3(expr: Path, d: Path, trees: int, threads: int, *extra) -> list[str]:
    return ours(
        "genie3",
        *("--expression", expr, "--layout", "samples-x-genes", "--n-trees", trees, "--threads", threads),
        *extra,
        *("--out", d / "links.tsv.gz", "--metrics", d / "metrics.json"),
    )


def _cost_metrics(key: str, d: Path) -> dict:
    m = json.loads((d / "metrics.json").read_text())
    return {k: m.get(k) for k in ("compute_cpu_s", "prior_check_s", "prior_check")}


def _cost_case(ctx: Ctx, net: int) -> Case:
    cfg = ctx.cfg
    expr, _ = _files(net)
    prior = ctx.inputs() / f"prior_random_net{net}.tsv"
    trees = cfg["g3prior_trees"]

    def c(key: str, label: str, *extra, n: int = trees) -> Contender:
        return Contender(key, label, "ours", lambda d, r: _genie3(expr, d, n, 1, "--seed", r + 1, *extra))

    cons = [c("no prior", f"chromaflow genie3 --n-trees {trees} --threads 1")]
    for a in cfg["g3prior_alphas"]:
        opts = ("--prior", prior, "--prior-alpha", a, "--prior-check", "off")
        cons.append(c(f"alpha {a:g}", f"… --prior random --prior-alpha {a:g} --prior-check off", *opts))
    check = ("--prior", prior, "--prior-alpha", 0.5, "--prior-check", "auto")
    cons.append(c("prior check", "… --prior random --prior-check auto --n-trees 1 (the check's seconds)", *check, n=1))

    def make() -> None:
        if not prior.exists():
            run_checked([*module("tools"), "random-prior", prior, expr, net], "random prior")

    return Case(
        "genie3_prior",
        f"cost_net{net}",
        {"network": net, "trees": trees, "threads": 1, "alphas": cfg["g3prior_alphas"]},
        cons,
        [],
        per_run=_cost_metrics,
        skip=None if expr.exists() else f"reference folder missing: {expr}",
        prepare=make,
        note="figure: tree-growing CPU s of the metrics (compute_cpu_s), one thread; conditions alternate per round",
    )


def _scorer(gold: Path):
    def per_run(key: str, d: Path) -> dict:
        s = score_links(d / "links.tsv.gz", gold)
        out = {"auroc": s.get("auroc"), "aupr": s.get("aupr")}
        summary = d / "summary.json"
        if summary.exists() and json.loads(summary.read_text()).get("prior_check"):
            out["prior_check"] = json.loads(summary.read_text())["prior_check"]
        return out

    return per_run


def _accuracy_case(ctx: Ctx, net: int) -> Case:
    cfg = ctx.cfg
    expr, gold = _files(net)
    pdir = ctx.inputs() / f"prior_gold_net{net}"
    trees, seed, threads = cfg["g3prior_trees"], cfg["g3prior_seed"], cfg["g3prior_threads"]

    def c(key: str, label: str, *extra) -> Contender:
        def argv(d: Path, r: int) -> list[str]:
            return _genie3(expr, d, trees, threads, "--seed", seed, "--summary", d / "summary.json", *extra)

        return Contender(key, f"chromaflow genie3 --n-trees {trees} {label}", "ours", argv, repeats=1)

    cons = [c("no prior", "(no prior)")]
    for name in PRIORS:
        for a in [a for a in cfg["g3prior_accuracy_alphas"] if a]:
            for mode in ("off", "correlation", "auto"):
                opts = ("--prior", pdir / f"{name}.tsv", "--prior-alpha", a, "--prior-check", mode)
                label = f"--prior {name} --prior-alpha {a:g} --prior-check {mode}"
                cons.append(c(f"{name} alpha {a:g} check {mode}", label, *opts))

    def make() -> None:
        if not (pdir / "shuffled.tsv").exists():
            run_checked([*module("tools"), "gold-priors", pdir, gold, net], "gold priors")

    return Case(
        "genie3_prior",
        f"accuracy_net{net}",
        {"network": net, "trees": trees, "seed": seed, "alphas": cfg["g3prior_accuracy_alphas"], "priors": PRIORS},
        cons,
        [],
        per_run=_scorer(gold),
        skip=None if expr.exists() else f"reference folder missing: {expr}",
        prepare=make,
        note="one run each (seeded forests); alpha 0 is the run without --prior",
    )


def real_data() -> Path | None:
    """The real sets' folder (``CHROMAFLOW_GRN_DATA``), or None where it is not set."""
    v = os.environ.get("CHROMAFLOW_GRN_DATA")
    return Path(v) if v else None


def shuffle_prior(src: Path, out: Path, seed: int = 1) -> None:
    """``src`` (a targets x regulators matrix) with its gene ids shuffled: the target names permuted among the
    rows, the regulator names among the columns (``numpy.random.default_rng(seed)``); values kept in place."""
    lines = src.read_text().splitlines()
    head, rows = lines[0].split("\t"), [ln.split("\t") for ln in lines[1:]]
    rng = np.random.default_rng(seed)
    regs = [head[0], *(head[1:][i] for i in rng.permutation(len(head) - 1))]
    names = [rows[i][0] for i in rng.permutation(len(rows))]
    out.write_text("\t".join(regs) + "\n" + "".join("\t".join([n, *r[1:]]) + "\n" for n, r in zip(names, rows)))


def real_scores(links: Path, d: Path) -> dict:
    """AUPR and AUROC of a link list over a real set's evaluated pairs: the regulators (``meta.json``'s
    ``evaluated_regulators`` where it names them: the TFs the gold standard assayed) x its evaluated targets (no
    self-pairs, ``exclude.tsv``'s pairs left out), positives ``gold.tsv``'s edges; pairs the list lacks score 0."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    meta = json.loads((d / "meta.json").read_text())
    regs = meta.get("evaluated_regulators") or [ln for ln in (d / "regulators.txt").read_text().splitlines() if ln]
    targets = meta["evaluated_targets"]
    pairs = lambda f: {tuple(ln.split("\t")[:2]) for ln in (d / f).read_text().splitlines() if ln}  # noqa: E731
    gold, excl = pairs("gold.tsv"), pairs("exclude.tsv")
    score: dict[tuple[str, str], float] = {}
    with gzip.open(links, "rt") as fh:
        next(fh)
        for ln in fh:
            r, t, v = ln.rstrip("\n").split("\t")[:3]
            score[(r, t)] = float(v)
    keys = [(r, t) for r in regs for t in targets if r != t and (r, t) not in excl]
    y = np.array([k in gold for k in keys])
    s = np.array([score.get(k, 0.0) for k in keys])
    return {"aupr": float(average_precision_score(y, s)), "auroc": float(roc_auc_score(y, s)), "pairs": len(keys)}


def _real_case(ctx: Ctx, name: str, root: Path) -> Case:
    cfg = ctx.cfg
    d = root / name
    trees, a, threads = cfg["g3prior_real_trees"], cfg["g3prior_real_alpha"], cfg["g3prior_threads"]
    shuffled = ctx.inputs() / f"prior_{name}_shuffled.tsv"
    priors = {"informative": d / "prior.tsv", "shuffled": shuffled}

    def c(prior: str | None, mode: str | None) -> Contender:
        extra = () if prior is None else ("--prior", priors[prior], "--prior-alpha", a, "--prior-check", mode)
        key = "no prior" if prior is None else f"{prior} check {mode}"

        def argv(dd: Path, r: int) -> list[str]:
            return ours(
                "genie3",
                *("--expression", d / "expression.tsv", "--layout", "genes-x-samples"),
                *("--regulators", d / "regulators.txt", "--n-trees", trees, "--threads", threads, "--seed", 0),
                *extra,
                *("--out", dd / "links.tsv.gz", "--summary", dd / "summary.json", "--metrics", dd / "metrics.json"),
            )

        label = "(no prior)" if prior is None else f"--prior {prior} --prior-alpha {a:g} --prior-check {mode}"
        return Contender(key, f"chromaflow genie3 --n-trees {trees} {label}", "ours", argv, repeats=1)

    def per_run(key: str, dd: Path) -> dict:
        out = real_scores(dd / "links.tsv.gz", d)
        m = json.loads((dd / "metrics.json").read_text())
        out.update({k: m.get(k) for k in ("compute_cpu_s", "prior_check_s", "prior_check_trees", "wall_s")})
        summary = json.loads((dd / "summary.json").read_text())
        if summary.get("prior_check"):
            out["prior_check"] = summary["prior_check"]
        return out

    def make() -> None:
        if not shuffled.exists():
            shuffle_prior(d / "prior.tsv", shuffled)

    return Case(
        "genie3_prior",
        f"real_{name}",
        {"set": name, "trees": trees, "alpha": a, "seed": 0, "threads": threads, "source": _source(d)},
        [c(p, m) for p, m in REAL_RUNS],
        [],
        per_run=per_run,
        skip=None if (d / "expression.tsv").exists() else f"real set missing: {d} (benchmarks/genie3/grn_data.py)",
        prepare=make,
        note="one run each (seeded forests); AUPR over the set's evaluated pairs",
    )


def _null_case(ctx: Ctx, name: str, root: Path) -> Case:
    """``real_<set>_null``: how often each check keeps the set's prior with its ids swapped (``tools prior-null``)."""
    d, n = root / name, ctx.cfg["g3prior_null_priors"]

    def argv(dd: Path, r: int) -> list[str]:
        return [*module("tools"), "prior-null", str(dd / "null.json"), str(d), str(n), "2"]

    def per_run(key: str, dd: Path) -> dict:
        doc = json.loads((dd / "null.json").read_text())
        return {k: v for k, v in doc.items() if not k.endswith("_z")} | {
            "z": {k: doc[k] for k in doc if k.endswith("_z")}
        }

    con = Contender("swapped ids", f"python -m benchmarks.harness.tools prior-null ... {n} 2", "ours", argv, repeats=1)
    return Case(
        "genie3_prior",
        f"real_{name}_null",
        {"set": name, "null": True, "priors": n, "seed": 2, "source": _source(d)},
        [con],
        [],
        per_run=per_run,
        skip=None if (d / "expression.tsv").exists() else f"real set missing: {d} (benchmarks/genie3/grn_data.py)",
        note=f"{n} relabellings of the set's prior, each checked by the relabelling and the correlation test",
    )


def _source(d: Path) -> dict:
    meta = d / "meta.json"
    if not meta.exists():
        return {}
    m = json.loads(meta.read_text())
    return {k: m.get(k) for k in ("expression", "gold_standard", "prior", "note")}


def genie3_prior(ctx: Ctx) -> tuple[list, list[Case]]:
    cfg = ctx.cfg
    cases = [_cost_case(ctx, n) for n in cfg["g3prior_networks"]]
    cases.append(_accuracy_case(ctx, cfg["g3prior_accuracy_net"]))
    root = real_data()
    if root is not None:
        cases += [_real_case(ctx, name, root) for name in REAL_SETS]
        cases += [_null_case(ctx, name, root) for name in REAL_SETS]
    expr, _ = _files(1)
    warm = [_genie3(expr, Path("{d}"), 5, 1)] if expr.exists() else []
    return warm, cases


build = genie3_prior


# --------------------------------------------------------------------------------------------------
# the retired script's results, and the tables of docs/genie3.md (benchmarks/render)
# --------------------------------------------------------------------------------------------------
def _study(doc: dict, case: dict, runs: list[dict]) -> dict:
    """A case record carrying the study-wide fields of the retired script's file: its command, commit, start and
    end, machine; its loads (before the study, after it) on the case's first and last run."""
    if runs:
        runs[0]["load_before"], runs[-1]["load_after"] = doc["load_before"], doc["load_after"]
    m = doc["machine"]
    return {
        "stage": "genie3_prior",
        "id": f"genie3_prior/{case['case']}",
        **case,
        "command": doc["command"],
        "git": {"commit": doc["commit"]},
        "started": doc["started"],
        "finished": doc["finished"],
        "machine": {k: m.get(k) for k in ("host", "cpu_model", "cpu_flags", "logical_cpus", "usable_cpus")},
        "runs": runs,
        "contenders": {k: {"label": k, "role": "ours"} for k in dict.fromkeys(r["contender"] for r in runs)},
    }


def _legacy_cost(doc: dict, row: dict) -> dict:
    runs = []
    for i in range(doc["rounds"]):  # each round: the check, then the conditions (the script's order)
        runs.append({"contender": "prior check", "repeat": i, "exit": 0, "check_cpu_s": row["check_cpu_s"][i]})
        runs += [{"contender": k, "repeat": i, "exit": 0, "compute_cpu_s": v[i]} for k, v in row["cpu_s"].items()]
    alphas = [float(k.split()[1]) for k in row["cpu_s"] if k != "no prior"]
    params = {"network": row["net"], "trees": doc["n_trees"], "threads": 1, "alphas": alphas}
    return _study(doc, {"case": f"cost_net{row['net']}", "params": params, "repeats": doc["rounds"]}, runs)


def _legacy_accuracy(doc: dict) -> dict:
    acc = doc["accuracy"]
    priors = acc["priors"]
    plain = priors[next(iter(priors))]["prior_check_off"][0]
    zeros = [r[f"prior_check_{m}"][0] for r in priors.values() for m in ("off", "auto")]
    if acc["alphas"][0] != 0 or any(z != plain for z in zeros):
        raise ValueError(f"{LEGACY.name}: alpha 0 (the run without a prior) must come first, one run for every prior")
    runs = [{"contender": "no prior", "repeat": 0, "exit": 0, **plain}]
    for name, r in priors.items():
        for k, a in enumerate(acc["alphas"][1:], 1):
            for mode in ("off", "auto"):  # the retired script's auto was the correlation test
                run = {
                    "contender": f"{name} alpha {a:g} check {mode}",
                    "repeat": 0,
                    "exit": 0,
                    **r[f"prior_check_{mode}"][k],
                }
                runs.append({**run, "prior_check": r["check"]} if mode == "auto" else run)
    params = {"network": acc["net"], "trees": acc["n_trees"], "seed": acc["seed"], "alphas": acc["alphas"]}
    params["priors"] = list(priors)
    return _study(doc, {"case": f"accuracy_net{acc['net']}", "params": params, "repeats": 1}, runs)


def from_legacy(doc: dict) -> dict:
    """The converter of the retired ``run_benchmark.py prior``'s results file (``benchmarks/genie3/prior_results.json``:
    ``cost`` per network {net, cpu_s: {"no prior" | "alpha A": [CPU s per round]}, check_cpu_s: [per round]},
    ``accuracy`` {net, n_trees, seed, alphas (0 first), priors: {name: {check, prior_check_off, prior_check_auto:
    [{auroc, aupr} per alpha]}}}, plus command, commit, started, finished, machine, loads before and after) as a
    results file of ``benchmarks/run`` holding this stage's cases: per round and condition one run with its
    ``compute_cpu_s`` (the prior check's: ``check_cpu_s``, CPU s, where this stage records the check's wall
    seconds), per (prior, alpha, check mode) one accuracy run with its AUROC/AUPR, the check's record on the
    ``auto`` runs, alpha 0 as the run without a prior. Nothing is recomputed."""
    cases = [_legacy_cost(doc, row) for row in doc["cost"]] + [_legacy_accuracy(doc)]
    return {"schema": SCHEMA, "legacy": "run_benchmark.py prior", "machine": doc["machine"], "cases": cases}


def _where(cases: list[dict]) -> str:
    runs = [r for c in cases for r in c["runs"]]
    lb = next(r["load_before"] for r in runs if r.get("load_before"))
    la = next(r["load_after"] for r in reversed(runs) if r.get("load_after"))
    m = cases[0]["machine"]
    return (
        f"`{cases[0]['command']}` at commit {((cases[0].get('git') or {}).get('commit') or '?')[:7]}, "
        f"{min(c['started'] for c in cases)} – {max(c['finished'] for c in cases)}, on "
        f"{m.get('cpu_model')} ({m.get('usable_cpus')} usable CPUs), load average {lb[0]:.1f} before, {la[0]:.1f} after"
    )


def _values(c: dict, key: str, field: str) -> list[float]:
    return [r[field] for r in c["runs"] if r["contender"] == key and r.get("exit") == 0 and r.get(field) is not None]


def cost_table(cases: list[dict], source: str) -> str:
    """docs/genie3.md's prior-cost block: per network the CPU s without a prior, each alpha's ratio to it, the check."""
    cases = sorted(cases, key=lambda c: c["params"]["network"])
    names = [k for k in cases[0]["contenders"] if k.startswith("alpha ")]
    wall = not _values(cases[0], "prior check", "check_cpu_s")  # this stage records the check's wall seconds
    lines = [
        f"Generated from `{source}` ({_where(cases)}); {cases[0]['params']['trees']} trees, medians "
        f"of {cases[0]['repeats']} alternated rounds.",
        "",
        "| net | no prior (CPU s) | "
        + " | ".join(n.replace("alpha", "α =") for n in names)
        + f" | prior check ({'s' if wall else 'CPU s'}) |",
        "|---|---|" + "---|" * (len(names) + 1),
    ]
    ratios = []
    for c in cases:
        base = statistics.median(_values(c, "no prior", "compute_cpu_s"))
        row = [statistics.median(_values(c, n, "compute_cpu_s")) / base for n in names]
        ratios += row
        check = statistics.median(_values(c, "prior check", "prior_check_s" if wall else "check_cpu_s"))
        lines.append(
            f"| {c['params']['network']} | {base:.2f} | " + " | ".join(f"{x:.2f}×" for x in row) + f" | {check:.4f} |"
        )
    lines += ["", f"Weighted / unweighted: {min(ratios):.2f}–{max(ratios):.2f}× (limit 1.2×)."]
    return "\n".join(lines)


def _check_text(ck: dict | None) -> str:
    """A check's decision with its z and p (p two-sided for the relabelling test, one-sided for the others)."""
    if not ck:
        return "–"
    return ck["decision"] + (f" (z {ck['z']:.2f}, p {ck['p']:.2g})" if ck.get("z") is not None else "")


def accuracy_table(c: dict, source: str) -> str:
    """docs/genie3.md's prior-accuracy block: AUPR per prior, check mode and alpha, with the check's decision."""
    p = c["params"]
    al = p["alphas"]
    modes = [
        m for m in ("off", "correlation", "auto") if f"{p['priors'][0]} alpha {al[-1]:g} check {m}" in c["contenders"]
    ]
    lines = [
        f"Generated from `{source}` ({_where([c])}). DREAM4 size-100 network "
        f"{p['network']}, {p['trees']} trees, RF, seed {p['seed']}; AUPR (AUROC in the JSON).",
        "",
        "| prior | `--prior-check` | check: decision (z, p) | "
        + " | ".join(f"α {a:g}" + (" (= no prior)" if a == 0 else "") for a in al)
        + " |",
        "|---|---|---|" + "---|" * len(al),
    ]
    for name in p["priors"]:
        key = {m: [f"{name} alpha {a:g} check {m}" if a else "no prior" for a in al] for m in modes}
        aupr = {m: [_values(c, k, "aupr")[0] for k in key[m]] for m in key}
        for m in modes:
            ck = next((r["prior_check"] for r in c["runs"] if r["contender"] in key[m] and r.get("prior_check")), None)
            label = {"auto": "auto (default)", "correlation": "correlation" if "correlation" in modes else m}.get(m, m)
            if m == "auto" and "correlation" not in modes:
                label = "auto (then the correlation test)"  # the legacy file: auto was the correlation test
            lines.append(f"| {name} | {label} | {_check_text(ck)} | " + " | ".join(f"{x:.3f}" for x in aupr[m]) + " |")
    return "\n".join(lines)


def real_table(cases: list[dict], source: str) -> str:
    """docs/genie3.md's prior-real block: per real set the AUPR of each prior and check, its gain over no prior, the
    check's decision and statistic, and the run's process CPU over the run without a prior's."""
    p = cases[0]["params"]
    lines = [
        f"Generated from `{source}` ({_where(cases)}); {p['trees']} trees, RF, α {p['alpha']:g}, seed {p['seed']}, "
        f"{p['threads']} threads, one run each; AUPR over each set's evaluated pairs (AUROC in the JSON).",
        "",
        "| set | prior | `--prior-check` | decision (z, p) | AUPR | gain over no prior | CPU ÷ no prior |",
        "|---|---|---|---|---|---|---|",
    ]
    nulls = {c["params"]["set"]: c for c in cases if c["params"].get("null")}
    for c in sorted(
        [c for c in cases if not c["params"].get("null")], key=lambda c: REAL_SETS.index(c["params"]["set"])
    ):
        runs = {r["contender"]: r for r in c["runs"] if r.get("exit") == 0 and r.get("aupr") is not None}
        base = runs["no prior"]["aupr"]
        lines.append(f"| {c['params']['set']} | none | – | – | {base:.4f} | – | 1.00× |")
        for prior, mode in REAL_RUNS[1:]:
            r = runs.get(f"{prior} check {mode}")
            if r is None:
                continue
            cpu = r["cpu_s"] / runs["no prior"]["cpu_s"]
            gain = r["aupr"] - base
            cells = [c["params"]["set"], prior, mode, _check_text(r.get("prior_check")), f"{r['aupr']:.4f}",
                     f"{gain:+.4f}", f"{cpu:.2f}×"]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
        lines += _null_rows(nulls.get(c["params"]["set"]))
    return "\n".join(lines)


def _null_rows(c: dict | None) -> list[str]:
    """A real set's rows of its ``_null`` case: of N priors with swapped ids, how many each check kept."""
    r = next((r for r in (c or {}).get("runs", []) if r.get("exit") == 0 and "relabel_kept" in r), None)
    if r is None:
        return []
    st, n = c["params"]["set"], r["n"]
    return [
        f"| {st} | {n} × swapped ids | auto | kept {r['relabel_kept']} of {n} (p < 0.05: {r['relabel_p_below_0.05']}) "
        "| – | – | – |",
        f"| {st} | {n} × swapped ids | correlation | kept {r['correlation_kept']} of {n} | – | – | – |",
    ]


def _newest(results_dir: Path, prefix: str) -> tuple[str, list[dict]] | None:
    """(its path in words, its cases) of the newest full results file with this stage's ``prefix`` cases."""
    best = None
    for path, res in json_files(results_dir):
        cs = [c for c in res.get("cases", []) if c.get("stage") == "genie3_prior" and not c.get("skipped")]
        cs = [c for c in cs if c["case"].startswith(prefix) and c.get("runs")]
        when = res.get("last_finished") or res.get("last_started") or ""
        if cs and not res.get("quick") and (best is None or when > best[0]):
            best = (when, f"benchmarks/results/{path.name}", cs)
    return best[1:] if best else None


def _check_file(path: Path, prefix: str) -> tuple[str, list[dict]] | None:
    """The ``prefix`` cases of ``path`` (:data:`CHECK_RESULTS`: this stage's own run, kept beside the legacy file),
    or None."""
    if not path.exists():
        return None
    cs = [c for c in json.loads(path.read_text())["cases"] if c["case"].startswith(prefix) and c.get("runs")]
    return (f"benchmarks/genie3/{path.name}", cs) if cs else None


def prior_tables(results_dir: Path | None = None, check_results: Path = CHECK_RESULTS) -> dict[str, str]:
    """The three blocks of docs/genie3.md: each from the newest full results file in ``results_dir`` (default
    benchmarks/results) with its cases, else from ``check_results``, else from the retired script's file
    (:func:`from_legacy`; the real sets have none)."""
    legacy = ("benchmarks/genie3/prior_results.json", from_legacy(json.loads(LEGACY.read_text()))["cases"])
    folder = results_dir or ROOT / "benchmarks" / "results"

    def pick(prefix: str):
        old = [c for c in legacy[1] if c["case"].startswith(prefix)]
        return _newest(folder, prefix) or _check_file(check_results, prefix) or ((legacy[0], old) if old else None)

    cost, acc, real = pick("cost_"), pick("acc"), pick("real_")
    return {
        "prior-cost": cost_table(cost[1], cost[0]),
        "prior-accuracy": accuracy_table(acc[1][0], acc[0]),
        "prior-real": real_table(real[1], real[0]) if real else "Not run yet (`CHROMAFLOW_GRN_DATA` unset).",
    }


def _markers(name: str) -> tuple[str, str]:
    return (
        f"<!-- BEGIN GENERATED {name} by benchmarks/render: do not edit by hand -->",
        f"<!-- END GENERATED {name} -->",
    )


def with_prior_tables(text: str, tables: dict[str, str]) -> str:
    """``text`` (docs/genie3.md) with its generated blocks replaced by ``tables`` (:func:`prior_tables`)."""
    for name, body in tables.items():
        begin, end = _markers(name)
        if begin not in text or end not in text:
            raise SystemExit(f"{DOC}: no {name} block (markers {begin!r} ... {end!r})")
        a, b = text.index(begin), text.index(end) + len(end)
        text = text[:a] + f"{begin}\n{body}\n{end}" + text[b:]
    return text


def published(results_dir: Path | None = None) -> dict[Path, str]:
    """The page this stage publishes (``benchmarks/render``): docs/genie3.md with its three prior tables."""
    return {DOC: with_prior_tables(DOC.read_text(), prior_tables(results_dir))} if DOC.exists() else {}
