"""``chromaflow attribute`` and ``discover-motifs`` speed (issue 53, item 6): contribution scores per second of region
sequence, on the CPU and on a CUDA device, and TF-MoDISco's time on a planted set (ours alone: no Predmoter-type
tool explains its predictions; opt-in: ``benchmarks/run --stages interpret --out benchmarks/interpret/results``).

Inputs (seeded, made once in the inputs folder): a random ACGT genome (``interpret_mbp``, 4 records), a BED of
``regions`` random regions of 200 bp (their centres at least half the model input from the record ends), the model
(``make-test-model --preset release-bihybrid --seed 0``: the released models' architecture, seq_len 21384, seeded
random weights: its speed is the released models', its scores mean nothing), and for TF-MoDISco a planted
contributions file (benchmarks/harness/contrib.py: three JASPAR plant motifs carrying contributions, a decoy
without). Cases: attribute on ``cpu`` and ``cuda`` (skipped with the reason where CUDA is not available), its
contenders Integrated Gradients at 32 and 8 steps (``--window 1000``), at 32 steps on a 2,000-bp input
(``--context 2000``: a tenth of the model's input) and ISM (``--window ism_window``: ISM's cost
is 3 x window model passes per strand, so a short window); discover-motifs on the planted file. Each run's metrics
JSON gives the loop's bp/s (per_run); the page extrapolates the seconds per region and the time for 10,000 regions
x 1 kb.

The page: ``benchmarks/interpret/RESULTS.md`` (:func:`published`, from every results file in
``benchmarks/interpret/results/``).
"""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path

from ..harness.core import Case, Contender, NotRunnable, json_files
from ..harness.env import ROOT
from ..harness.stagekit import PY, Ctx, fasta, ours, require_cuda, run_checked, seeded_model, sizes

#: launchers of ../shared/peers/bin this stage needs (none: ours alone)
PEERS: list[str] = []
#: sizes of the full run
FULL = {
    "interpret_devices": {"cpu": 2, "cuda": 200},  # regions attributed per device
    "interpret_mbp": 2.0,
    "interpret_model": "release-bihybrid",
    "interpret_ism_window": 20,
    "interpret_modisco_regions": 2000,
    "interpret_chain": "full",
}
#: sizes of the --quick run (a tiny model: the harness path, not the speed)
QUICK = {
    "interpret_devices": {"cpu": 2, "cuda": 4},
    "interpret_mbp": 0.2,
    "interpret_model": "tiny",
    "interpret_ism_window": 4,
    "interpret_modisco_regions": 150,
    "interpret_chain": None,  # the small chain is tests/benchmarks/test_chain.py's
}
#: the fields of attribute's metrics JSON kept with each run
METRICS = ("bp_per_s", "loop_s", "regions", "window", "batch_size", "precision", "device", "seq_len", "wall_s")
#: discover-motifs' metrics JSON fields kept
DISCOVER_METRICS = ("regions", "width", "seqlets", "patterns", "patterns_matched", "wall_s", "cpu_s")
#: the planted motifs of the TF-MoDISco case (MADS, WRKY, bHLH) and its decoy (ARF)
PLANTED = ["MA0548.3", "MA1085.3", "MA0566.2"]
DECOY = "MA1690.2"
RESULTS_DIR = ROOT / "benchmarks" / "interpret" / "results"
PAGE = ROOT / "benchmarks" / "interpret" / "RESULTS.md"
#: the model input of the release architecture: regions' centres stay this far from the record ends
HALF_INPUT = 21384 // 2


def _regions_bed(path: Path, fa: Path, n: int, seed: int) -> None:
    """``n`` regions of 200 bp at seeded random centres of ``fa``'s records, away from the ends (the record lengths as
    attribute reads them: chromaflow.interpret.genome.Genome)."""
    from chromaflow.interpret.genome import Genome

    lengths = Genome(str(fa), None).lengths
    rng = random.Random(seed)
    recs = [r for r, n_bp in lengths.items() if n_bp > 2 * HALF_INPUT + 400]
    if not recs:
        raise NotRunnable(f"{fa.name}: no record longer than {2 * HALF_INPUT + 400} bp for the regions")
    rows = []
    for i in range(n):
        r = rng.choice(recs)
        c = rng.randrange(HALF_INPUT + 200, lengths[r] - HALF_INPUT - 200)
        rows.append(f"{r}\t{c - 100}\t{c + 100}\tr{i}\t0\t.\t{n - i}\t-1\t-1\t100\n")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(rows))
    tmp.replace(path)


def _inputs(ctx: Ctx, n: int, mbp: float, preset: str) -> dict[str, Path]:
    fa = fasta(ctx, int(mbp * 1e6), 4, 21, make=False)
    return {
        "fasta": fa,
        "bed": ctx.inputs() / f"interpret_{n}regions_{fa.stem}.narrowPeak",
        "model": ctx.inputs() / f"model_{preset}_seed0.ckpt",
    }


def _prepare(ctx: Ctx, device: str, paths: dict, n: int, mbp: float, preset: str):
    def make() -> None:
        if device == "cuda":
            require_cuda()
        fasta(ctx, int(mbp * 1e6), 4, 21)
        if not paths["bed"].exists():
            _regions_bed(paths["bed"], paths["fasta"], n, 7)
        seeded_model(ctx, paths["model"], preset)

    return make


def _metrics(fields: tuple[str, ...]):
    def per_run(key: str, d: Path) -> dict:
        m = json.loads((d / "metrics.json").read_text())
        return {"metrics": {k: m.get(k) for k in fields}}

    return per_run


def attribute_case(ctx: Ctx, device: str, n: int) -> Case:
    """attribute on ``device`` for ``n`` regions: IG at 32 and 8 steps (window 1000) and ISM (``interpret_ism_window``
    on the first region only: its cost per base is what the page extrapolates)."""
    cfg = ctx.cfg
    preset, mbp, ism_w = cfg["interpret_model"], cfg["interpret_mbp"], cfg["interpret_ism_window"]
    paths = _inputs(ctx, n, mbp, preset)

    def contender(key: str, method_args: list, top: int) -> Contender:
        def argv(d: Path, r: int) -> list[str]:
            return ours(
                "attribute",
                *("--fasta", paths["fasta"], "--regions", paths["bed"], "--model", paths["model"]),
                *("--dataset", "atacseq", "--top", top, *method_args),
                *("--out", d / "contributions.h5", "--metrics", d / "metrics.json", "--device", device),
            )

        label = f"chromaflow attribute --device {device} " + " ".join(map(str, method_args)) + f" --top {top}"
        return Contender(key, label, "ours", argv, outputs=sizes("contributions.h5"))

    return Case(
        "interpret",
        f"attribute_{device}_{n}regions_{preset}",
        {"device": device, "regions": n, "mbp": mbp, "model": preset, "ism_window": ism_w},
        [
            contender("ig32", ["--method", "ig", "--steps", 32, "--window", 1000], n),
            contender("ig8", ["--method", "ig", "--steps", 8, "--window", 1000], n),
            contender("ig32_context2000", ["--method", "ig", "--steps", 32, "--window", 1000, "--context", 2000], n),
            contender("ism", ["--method", "ism", "--window", ism_w], 1),
        ],
        [],
        None,
        per_run=_metrics(METRICS),
        prepare=_prepare(ctx, device, paths, n, mbp, preset),
        note="no peer; bp/s of the loop (FASTA read and model load excluded) from the command's metrics",
    )


def discover_case(ctx: Ctx, n: int) -> Case:
    """discover-motifs on ``n`` planted regions of 200 bp (benchmarks/harness/contrib.py), JASPAR CORE plants."""
    path = ctx.inputs() / f"planted_contributions_{n}x200_seed3.h5"

    def prepare() -> None:
        from ..harness.contrib import planted

        if not path.exists():
            tmp = path.with_name(path.name + ".tmp.h5")
            planted(tmp, PLANTED, DECOY, n=n, width=200, seed=3)
            tmp.replace(path)
        # untimed: numba compiles TF-MoDISco's and TOMTOM's kernels into its cache on a small planted set first, so
        # the timed runs measure the work, not the first compile (~1 CPU-min, once per machine)
        warm = ctx.inputs() / "planted_contributions_warmup.h5"
        if not warm.exists():
            planted(warm, PLANTED[:1], DECOY, n=60, width=100, seed=1)
        out = ctx.inputs() / "discover_warmup"
        run_checked(ours("discover-motifs", "--contributions", warm, "--outdir", out, "--force"), "discover warm-up")

    con = Contender(
        "discover",
        "chromaflow discover-motifs (TF-MoDISco-lite, TOMTOM against JASPAR CORE plants)",
        "ours",
        lambda d, r: ours(
            "discover-motifs", "--contributions", path, "--outdir", d / "motifs", "--metrics", d / "metrics.json"
        ),  # fmt: skip
        outputs=sizes("motifs/motifs.meme"),
    )
    return Case(
        "interpret",
        f"discover_{n}x200_planted",
        {"regions": n, "width": 200, "planted": ",".join(PLANTED), "decoy": DECOY},
        [con],
        [],
        None,
        per_run=_metrics(DISCOVER_METRICS),
        prepare=prepare,
        note="no peer; numba's kernels compiled before the timed runs (the warm-up)",
    )


def chain_case(size: str) -> Case:
    """The planted chain (benchmarks/harness/chain_run.py: planted genome -> model trained from scratch -> ... ->
    GENIE3 with the learned-motif prior) at ``size``, timed whole; its results (chain.json) kept with each run."""

    def per_run(key: str, d: Path) -> dict:
        f = d / "chain" / "chain.json"
        return {"chain": json.loads(f.read_text())} if f.exists() else {}

    con = Contender(
        "chain",
        f"python -m benchmarks.harness.chain_run DIR {size} 0 --pipeline (chromaflow's commands, then the pipeline)",
        "ours",
        lambda d, r: [PY, "-m", "benchmarks.harness.chain_run", str(d / "chain"), size, "0", "--pipeline"],
        outputs=sizes("chain/chain.json"),
    )
    return Case(
        "interpret",
        f"chain_{size}",
        {"size": size, "seed": 0},
        [con],
        [],
        None,
        per_run=per_run,
        note="no peer: no other tool goes from reads to a model's learned motifs to a network prior",
    )


def interpret(ctx: Ctx) -> tuple[list, list[Case]]:
    cases = [attribute_case(ctx, dev, n) for dev, n in ctx.cfg["interpret_devices"].items()]
    cases.append(discover_case(ctx, ctx.cfg["interpret_modisco_regions"]))
    if ctx.cfg.get("interpret_chain"):
        cases.append(chain_case(ctx.cfg["interpret_chain"]))
    return [], cases


build = interpret


# --------------------------------------------------------------------------------------------------
# the page (benchmarks/render)
# --------------------------------------------------------------------------------------------------


def _attribute_rows(c: dict) -> list[str]:
    rows = []
    for key, con in c["contenders"].items():
        rs = [r for r in c["runs"] if r["contender"] == key and r.get("exit") == 0 and r.get("metrics")]
        if not rs:
            rows.append(f"| {con['label']} | 0 | failed | – | – | – | – |")
            continue
        m0 = rs[0]["metrics"]
        bps = [x["metrics"]["bp_per_s"] for x in rs if x["metrics"].get("bp_per_s")]
        per_region = [x["metrics"]["loop_s"] / x["metrics"]["regions"] for x in rs]
        s_region = statistics.median(per_region)
        if key == "ism":  # ISM's cost grows with the window: per region of 1 kb, 1000 / window of it
            s_region = s_region * 1000 / m0["window"]
        hours = s_region * 10_000 / 3600
        rows.append(
            f"| {con['label']} | {len(rs)} | {statistics.median(bps):.3g} ({min(bps):.3g}–{max(bps):.3g}) | "
            f"{m0['window']} | {m0['seq_len']} | {s_region:,.1f} | {hours:,.1f} |"
        )
    return rows


def _section(c: dict, res: dict) -> list[str]:
    m, p = c["machine"], c["params"]
    head = f"## {c['started'][:16].replace('T', ' ')} UTC — {c['case']}, host {m['host']}"
    gpu = ", ".join(g.get("name", "?") for g in (res.get("machine") or {}).get("gpus") or []) or "none"
    intro = (
        f"Command: `{c['command']}`. CPU {m['cpu_model']} ({m['usable_cpus']} usable), GPU {gpu}, torch "
        f"{(res.get('software') or {}).get('torch')}. {c.get('repeats', '?')} runs per contender."
    )
    if c["case"].startswith("chain"):
        return [head, "", intro, "", *chain_rows(c)]
    if c["case"].startswith("discover"):
        rs = [r for r in c["runs"] if r.get("exit") == 0 and r.get("metrics")]
        walls = [r["wall_s"] for r in rs]
        m0 = rs[0]["metrics"] if rs else {}
        return [
            head,
            "",
            intro,
            "",
            "| regions × bp | runs | wall s median (min–max) | CPU s median | seqlets | patterns | "
            "with a match q < 0.05 |",
            "|---|---|---|---|---|---|---|",
            f"| {p['regions']} × {p['width']} | {len(rs)} | "
            + (f"{statistics.median(walls):.1f} ({min(walls):.1f}–{max(walls):.1f})" if walls else "failed")
            + f" | {statistics.median([r['cpu_s'] for r in rs]):.1f} | {m0.get('seqlets')} | {m0.get('patterns')} | "
            f"{m0.get('patterns_matched')} |"
            if rs
            else "| – | 0 | failed | – | – | – | – |",
            "",
        ]
    return [
        head,
        "",
        intro + f" {p['regions']} regions on a {p['mbp']:g} Mbp random genome, model {p['model']}.",
        "",
        "| contender | runs | bp/s of the loop, median (min–max) | window | model input bp | s per region of 1 kb | "
        "hours for 10,000 regions × 1 kb |",
        "|---|---|---|---|---|---|---|",
        *_attribute_rows(c),
        "",
    ]


def chain_rows(c: dict) -> list[str]:
    """The planted chain's table: per run, what was recovered and what it cost (chain.json)."""
    rows = [
        "| run | planted families found (q < 0.05) | decoy found | Pearson, held-out | peaks with a site | "
        "GENIE3 AUPR: none / JASPAR planted / learned | wall s | CPU s | train s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(x for x in c["runs"] if x.get("exit") == 0 and x.get("chain")):
        ch = r["chain"]
        found = ", ".join(f"{f} {'yes' if ok else 'no'}" for f, ok in ch["families_found"].items())
        g = ch["genie3"]
        pk = ch["peaks"]
        lj = ch.get("learned_vs_jaspar")  # chain.json files before 2026-12-02 have no paired difference
        diff = f" (learned − JASPAR {lj['aupr_diff']:+.3f} ± {lj['se']:.3f} SE)" if lj else ""
        rows.append(
            f"| {i + 1} | {found} | {'yes' if ch['decoy_found'] else 'no'} | "
            + ", ".join(f"{v:.3f}" for v in ch["pearson"].values())
            + f" | {pk['with_site']}/{pk['peaks']} | {g['none']['aupr']:.3f} / {g['jaspar']['aupr']:.3f} / "
            f"{g['learned']['aupr']:.3f}{diff} | {ch['total']['wall_s']:.0f} | {ch['total']['cpu_s']:.0f} | "
            f"{ch['steps']['train']['wall_s']:.0f} |"
        )
    if len(rows) == 2:
        rows.append("| – | failed | – | – | – | – | – | – | – |")
    piped = [x["chain"]["pipeline"] for x in c["runs"] if x.get("exit") == 0 and x.get("chain", {}).get("pipeline")]
    if piped:
        rows += [
            "",
            "The same chain through the pipeline (`--mode train --train_predict`, then a predict-mode run with "
            "`--interpret`, the sheet's `tf_families` and `--genie3_prior_alpha 0.5`):",
            "",
            "| run | planted families found | decoy found | peaks cutoff (train mode's F1-best) | GENIE3 AUPR, learned "
            "prior | train run s | predict run s |",
            "|---|---|---|---|---|---|---|",
        ]
        for i, p in enumerate(piped):
            found = ", ".join(f"{f} {'yes' if ok else 'no'}" for f, ok in p["families_found"].items())
            rows.append(
                f"| {i + 1} | {found} | {'yes' if p['decoy_found'] else 'no'} | {p['peaks_cutoff']:g} | "
                f"{p['genie3_learned']['aupr']:.3f} | {p['train_s']:.0f} | {p['predict_s']:.0f} |"
            )
    return [*rows, ""]


INTRO = (
    "Generated by `benchmarks/render` from `benchmarks/interpret/results/*.json` (do not edit by hand), which "
    "`benchmarks/run --stages interpret --out benchmarks/interpret/results` writes (`benchmarks/stages/interpret.py`). "
    "attribute: the released models' architecture (`make-test-model --preset release-bihybrid`, seeded random weights, "
    "seq_len 21384): Integrated Gradients costs `--steps` forward + backward passes of the whole 21,384-bp input per "
    "region and strand whatever the window; ISM costs 3 × window forward passes per strand (every output of a BiLSTM "
    "depends on the whole input, so no mutant's pass can be shortened to its neighbourhood), so its time per region "
    "of 1 kb is extrapolated from a short window. *s per region of 1 kb* and *hours for 10,000 regions × 1 kb* are "
    "from the loop's time (FASTA read and model load excluded). No peer explains a Predmoter-type model. "
    "*chain_*: the planted genome of `benchmarks/harness/chain.py` (JASPAR MADS, WRKY and bHLH sites that open "
    "chromatin, an ARF decoy that does not, a network acting through the sites) run through chromaflow's commands "
    "(`benchmarks/harness/chain_run.py`): a model trained from scratch, its Pearson on the held-out assembly "
    "(`chromaflow evaluate`), peaks, contribution scores, TF-MoDISco motifs matched to JASPAR, and GENIE3 with no "
    "prior, the prior from the planted JASPAR matrices (decoy included) and the prior from the learned motifs."
)


def interpret_page(folders: tuple[Path, ...] = (RESULTS_DIR,)) -> str:
    """benchmarks/interpret/RESULTS.md: a section per interpret case of every full results file in ``folders``."""
    sections = []
    for folder in dict.fromkeys(folders):
        for _, res in json_files(folder):
            if not res.get("schema") or res.get("quick"):
                continue
            for c in res.get("cases", []):
                if c.get("stage") == "interpret" and not c.get("skipped") and c.get("runs"):
                    sections.append((c["started"], _section(c, res)))
    lines = ["# chromaflow attribute and discover-motifs: speed", "", INTRO, ""]
    for _, sec in sorted(sections, key=lambda s: s[0]):
        lines += sec
    if not sections:
        lines += ["No run yet.", ""]
    return "\n".join(lines)


def published(results_dir: Path | None = None) -> dict[Path, str]:
    """The page this stage publishes (``benchmarks/render``): benchmarks/interpret/RESULTS.md."""
    return {PAGE: interpret_page((RESULTS_DIR, *([results_dir] if results_dir else [])))}
