"""``chromaflow variant-effect`` speed: variants per second with the full-size model, on the CPU and on a CUDA device
(ours alone: no Predmoter-type tool scores variants; opt-in: ``benchmarks/run --stages variant --out
benchmarks/variant/results``; it replaced ``benchmarks/variant/bench_variant.py``).

Inputs (seeded, made once in the inputs folder): a random ACGT genome (``mbp``, 4 records: ``harness/gen.py
fasta``), a VCF of ``variants`` records at random positions (``python -m benchmarks.harness.tools variants``: 70 %
SNVs, 15 % insertions and 15 % deletions of 1-10 bp, every 20th record with a second ALT; bgzipped, indexed) and
the model (``make-test-model --preset release-bihybrid --seed 0``: the released models' architecture, FORMATS.md
§2.9, seeded random weights, seq_len 21384: every variant is 2 windows x 2 strands = 4 model rows). One case per
device, its contenders the precisions, alternated; each run's metrics JSON gives the loop's variants/s (FASTA
reading and model loading excluded), the batch size and the model rows (``per_run``). The CUDA case is skipped
with the reason where CUDA is not available (``benchmarks/run --stages variant --cases cuda`` on a GPU machine).

The stage's sizes, builder, the converter of the retired script's records (:func:`from_legacy`) and its render
section (:func:`variant_page`: ``benchmarks/variant/RESULTS.md`` from every results file in
``benchmarks/variant/results/``).
"""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

from ..harness.core import SCHEMA, Case, Contender, json_files
from ..harness.env import ROOT, module
from ..harness.gpu import RESULTS as GPU_RESULTS
from ..harness.stagekit import Ctx, fasta, ours, require_cuda, run_checked, seeded_model, sizes

#: launchers of ../shared/peers/bin this stage needs (none: ours alone)
PEERS: list[str] = []
#: sizes of the full run: per device (VCF records, genome Mbp), the precisions (contenders), the model preset
FULL = {
    "variant_devices": {"cpu": (100, 10.0), "cuda": (20_000, 25.0)},
    "variant_precisions": ("fp32", "bf16"),
    "variant_model": "release-bihybrid",
    "variant_seed": 5,
}
#: sizes of the --quick run (a tiny model: the harness path, not the speed)
QUICK = {
    "variant_devices": {"cpu": (3, 0.2), "cuda": (50, 0.5)},
    "variant_precisions": ("fp32", "bf16"),
    "variant_model": "tiny",
    "variant_seed": 5,
}
#: the fields of the command's metrics JSON kept with each run
METRICS = (
    "variants_per_s",
    "loop_s",
    "scored",
    "variants",
    "batch_size",
    "model_rows",
    "threads",
    "precision",
    "device",
    "wall_s",
)
#: where the variant results live (``--out``) and the page made from them
RESULTS_DIR = ROOT / "benchmarks" / "variant" / "results"
PAGE = ROOT / "benchmarks" / "variant" / "RESULTS.md"


def _inputs(ctx: Ctx, variants: int, mbp: float, seed: int, preset: str) -> dict[str, Path]:
    fa = fasta(ctx, int(mbp * 1e6), 4, seed, make=False)
    return {
        "fasta": fa,
        "vcf": ctx.inputs() / f"variants_{variants}_{fa.stem}.vcf.gz",
        "model": ctx.inputs() / f"model_{preset}_seed0.ckpt",
    }


def _prepare(ctx: Ctx, device: str, paths: dict, variants: int, mbp: float, seed: int, preset: str):
    def make() -> None:
        if device == "cuda":
            require_cuda()
        fasta(ctx, int(mbp * 1e6), 4, seed)
        if not paths["vcf"].exists():
            ctx.log(f"  generating {paths['vcf'].name}")
            run_checked([*module("tools"), "variants", paths["vcf"], paths["fasta"], variants, seed], "variants")
        seeded_model(ctx, paths["model"], preset)

    return make


def _metrics(key: str, d: Path) -> dict:
    m = json.loads((d / "metrics.json").read_text())
    return {"metrics": {k: m.get(k) for k in METRICS}}


def _same_rows(dirs: dict[str, Path]) -> dict:
    """Every precision scored the same (variant, ALT) rows (values differ: bf16 is autocast, not exact)."""
    rows = {}
    for key, d in dirs.items():
        with gzip.open(d / "effects.tsv.gz", "rt") as f:
            rows[key] = sum(1 for line in f if line.strip() and not line.startswith(("#", "CHROM\t")))
    ok = len(set(rows.values())) == 1 and min(rows.values()) > 0
    detail = ", ".join(f"{k}: {n:,} rows" for k, n in rows.items())
    return {"ok": ok, "detail": ("same rows in every table: " if ok else "different rows: ") + detail}


def device_case(
    ctx: Ctx, device: str, variants: int, mbp: float, precisions: list[str] | None = None, preset: str | None = None
) -> Case:
    """The variant case on ``device`` (``cpu``/``cuda``): ``variants`` VCF records on an ``mbp`` genome, one contender
    per precision (default: the sizes' ``variant_precisions``), the model ``preset`` (default ``variant_model``).
    The one way to measure variant-effect speed: this stage's builder calls it, and so may a stage that runs it on
    a GPU machine (its records stay ``variant`` ones, which :func:`variant_page` shows)."""
    cfg = ctx.cfg
    seed, preset = cfg["variant_seed"], preset or cfg["variant_model"]
    paths = _inputs(ctx, variants, mbp, seed, preset)

    def contender(prec: str) -> Contender:
        def argv(d: Path, r: int) -> list[str]:
            return ours(
                "variant-effect",
                *("--vcf", paths["vcf"], "--fasta", paths["fasta"], "--model", paths["model"]),
                *("--out", d / "effects.tsv.gz", "--metrics", d / "metrics.json"),
                *("--device", device, "--precision", prec),
            )

        label = f"chromaflow variant-effect --device {device} --precision {prec}"
        return Contender(prec, label, "ours", argv, outputs=sizes("effects.tsv.gz"))

    return Case(
        "variant",
        f"{device}_{variants}v_{mbp:g}Mbp",
        {"device": device, "variants": variants, "mbp": mbp, "model": preset, "seed": seed},
        [contender(p) for p in precisions or cfg["variant_precisions"]],
        [],
        _same_rows,
        per_run=_metrics,
        prepare=_prepare(ctx, device, paths, variants, mbp, seed, preset),
        note="no peer; the precisions alternate; variants/s of the loop from the command's metrics",
    )


def variant(ctx: Ctx) -> tuple[list, list[Case]]:
    cases = [device_case(ctx, dev, n, mbp) for dev, (n, mbp) in ctx.cfg["variant_devices"].items()]
    warm = [ours("make-test-model", "--out", "{d}/m.ckpt", "--preset", "tiny", "--seed", "0")]
    return warm, cases


build = variant


# --------------------------------------------------------------------------------------------------
# the results of the retired script, and the page (benchmarks/render)
# --------------------------------------------------------------------------------------------------
BRIEF = ("host", "cpu_model", "cpu_flags", "logical_cpus", "usable_cpus", "memory_bytes")


def from_legacy(doc: dict) -> dict:
    """The converter of the retired ``benchmarks/variant/bench_variant.py``'s records: one of its JSON files
    (``command``, ``machine`` with ``torch``, ``device``, ``mbp``, ``variants``, ``repeats``, ``started`` as
    "YYYY-MM-DD HH:MM" UTC, ``runs``: {precision: [{wall_s, cpu_s, peak_rss_bytes, load_before, load_after,
    metrics}]}) as a results file of ``benchmarks/run`` holding one ``variant`` case: the precisions become its
    contenders, every run keeps its figures and metrics, the 1-minute loads become the harness's load lists
    ([1-minute]), ``started`` becomes ISO 8601 at its minute. Nothing is recomputed."""
    m = doc["machine"]
    runs = []
    for prec, rs in doc["runs"].items():
        for i, r in enumerate(rs):
            rec = {k: r[k] for k in ("wall_s", "cpu_s", "peak_rss_bytes")}
            for k in ("load_before", "load_after"):
                rec[k] = [r[k]] if r.get(k) is not None else []
            runs.append({"contender": prec, "repeat": i, "exit": 0, **rec, "metrics": r["metrics"]})
    name = f"{doc['device']}_{doc['variants']}v_{doc['mbp']:g}Mbp"
    case = {
        "stage": "variant",
        "case": name,
        "id": f"variant/{name}",
        "params": {
            "device": doc["device"],
            "variants": doc["variants"],
            "mbp": doc["mbp"],
            "model": "release-bihybrid",
        },
        "command": doc["command"],
        "started": doc["started"].replace(" ", "T") + "Z",
        "repeats": doc["repeats"],
        "machine": {k: m.get(k) for k in BRIEF},
        "runs": runs,
        "contenders": {
            p: {"label": f"bench_variant.py --device {doc['device']} --precision {p}", "role": "ours"}
            for p in doc["runs"]
        },
    }
    return {
        "schema": SCHEMA,
        "legacy": "bench_variant.py",
        "machine": m,
        "software": {"torch": m.get("torch")},
        "cases": [case],
    }


def _row(c: dict, key: str) -> str:
    rs = [r for r in c["runs"] if r["contender"] == key and r.get("exit") == 0 and r.get("metrics")]
    if not rs:
        return f"| {c['params']['device']} | {key} | – | 0 | failed | – | – | – | – | – | – | – |"
    vps = [x["metrics"]["variants_per_s"] for x in rs]
    wall = statistics.median([x["wall_s"] for x in rs])
    loads = [x["load_before"][0] for x in rs if x.get("load_before")]
    m0 = rs[0]["metrics"]
    return (
        f"| {c['params']['device']} | {key} | {m0['threads']} | {len(rs)} | {statistics.median(vps):.3g} "
        f"({min(vps):.3g}–{max(vps):.3g}) | {wall:.1f} | {m0['scored'] / wall:.3g} | "
        f"{statistics.median([x['cpu_s'] for x in rs]):.1f} | "
        f"{max(x['peak_rss_bytes'] for x in rs) / 2**20:,.0f} | {m0['batch_size']} | {m0['model_rows']} | "
        f"{min(loads) if loads else '?'}–{max(loads) if loads else '?'} |"
    )


def variant_section(c: dict, res: dict) -> list[str]:
    """One case's section of benchmarks/variant/RESULTS.md (the retired script's layout, figure for figure)."""
    m, p = c["machine"], c["params"]
    gpu = ", ".join(g.get("name", "?") for g in (res.get("machine") or {}).get("gpus") or []) or "none"
    rows = [r for r in c["runs"] if r.get("exit") == 0 and r.get("metrics")]
    alleles = rows[0]["metrics"]["variants"] if rows else "?"
    # the runs made, not the harness's default repeats (the gpu stage sets its contenders' repeats itself)
    per = max((sum(r["contender"] == k for r in c["runs"]) for k in c["contenders"]), default=0)
    return [
        f"## {c['started'][:16].replace('T', ' ')} UTC — {p['device']}, host {m['host']}",
        "",
        f"Command: `{c['command']}`. {p['variants']} VCF records ({alleles} (variant, ALT) rows) on a "
        f"{p['mbp']:g} Mbp random genome; CPU {m['cpu_model']} ({m['usable_cpus']} usable), GPU {gpu}, "
        f"torch {(res.get('software') or {}).get('torch')}. {per} runs per precision.",
        "",
        "| device | precision | threads | runs | variants/s loop, median (min–max) | end to end s, median | "
        "variants/s end to end | CPU s median | peak RSS MiB | batch | model rows | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        *[_row(c, key) for key in c["contenders"]],
        "",
    ]


INTRO = (
    "Generated by `benchmarks/render` from `benchmarks/variant/results/*.json` (do not edit by hand), which "
    "`benchmarks/run --stages variant --out benchmarks/variant/results` writes (the files of 2026-11-27 were written "
    "by the retired `bench_variant.py`; `benchmarks/stages/variant.py` reads them). Full-size model (`make-test-model "
    "--preset release-bihybrid`, random weights, seq_len 21384): each variant is 4 model rows of 21384 bp (reference "
    "and alternative window, both strands). *loop*: the scoring loop alone (FASTA read and checks, model load and "
    "batch size excluded), from the command's metrics; *end to end*: the whole process. No peer exists to run beside "
    "it."
)


def variant_page(folders: tuple[Path, ...] = (RESULTS_DIR,)) -> str:
    """benchmarks/variant/RESULTS.md: a section per ``variant`` case of every full results file in ``folders``
    (the retired script's files through :func:`from_legacy`), oldest first."""
    sections = []
    for folder in dict.fromkeys(folders):
        for _, doc in json_files(folder):
            res = doc if doc.get("schema") else from_legacy(doc) if "device" in doc and "runs" in doc else {}
            if res.get("quick"):
                continue
            for c in res.get("cases", []):
                if c.get("stage") == "variant" and not c.get("skipped") and c.get("runs"):
                    sections.append((c["started"], variant_section(c, res)))
    lines = ["# chromaflow variant-effect: variants per second", "", INTRO, ""]
    for _, sec in sorted(sections, key=lambda s: s[0]):
        lines += sec
    return "\n".join(lines)


def published(results_dir: Path | None = None) -> dict[Path, str]:
    """The page this stage publishes (``benchmarks/render``): benchmarks/variant/RESULTS.md, from
    benchmarks/variant/results/, the GPU runs' benchmarks/gpu/results/ (the gpu stage runs the CUDA case) and the
    variant cases of the full results files in ``results_dir``."""
    return {PAGE: variant_page((RESULTS_DIR, GPU_RESULTS, *([results_dir] if results_dir else [])))}
