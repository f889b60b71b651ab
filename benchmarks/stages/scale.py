"""The whole pipeline at scale (ours alone, opt-in): multi-gigabase genomes, many assemblies, kill and resume.

The stage's sizes (``FULL`` for people, ``QUICK`` for CI), the peers it needs, its builder (``build(ctx)``:
(warm-up commands, cases)) and its helpers; ``benchmarks/stages/__init__.py`` lists the stages in run order.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..harness.core import Case, Contender
from ..harness.env import module
from ..harness.stagekit import (
    Ctx,
)

#: launchers of ../shared/peers/bin this stage needs
PEERS = []
#: sizes of the full run (keys are the results files' and the docs' names; Ctx.cfg merges every stage's)
FULL = {}
#: sizes of the --quick run
QUICK = {}


#: (name, record bp, records, contigs); the full sizes are issue 30's 400 Mbp and 4 Gbp
SCALE_FULL = {
    # each size's flatness is checked against the one before it; 1.2 Gbp (~40 min here) is the step between the
    # 400 Mbp run (~13 min) and the 4 Gbp one (~2 h), which fits in a session beside other work
    "genomes": [
        ("400Mbp", 34_750_000, 10, 5_000),
        ("1200Mbp", 104_250_000, 10, 15_000),
        ("4Gbp", 347_500_000, 10, 50_000),
    ],
    "shard_rows": 20_000,  # the pipeline's default: 20 PREDICT shards at 400 Mbp, 200 at 4 Gbp
    "resume": "4Gbp",  # killed during PREDICT, resumed, compared with its size_ run
    "many": (100, 20, 200_000, 20),  # assemblies, of which with expression, record bp, contigs
}


SCALE_QUICK = {
    "genomes": [("1Mbp", 86_875, 10, 12), ("10Mbp", 868_750, 10, 125)],
    "shard_rows": 2_000,  # 5 PREDICT shards at 10 Mbp (subsequence length 2000 in -profile test)
    "resume": "10Mbp",
    "many": (10, 2, 50_000, 5),
}


SCALE_CONTIGS = (1_000, 20_000)  # contig lengths, uniform


SCALE_SEED = 30


SCALE_GROUP_MBP = 100  # the pipeline's default --predict_group_mbp (nextflow.config), passed explicitly


def _scale_dir(ctx: Ctx) -> Path:
    d = ctx.work / "scale"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _scale_json(d: Path) -> dict:
    return json.loads((d / "scale.json").read_text())


def _scale_per_run(ctx: Ctx, name: str | None):
    """The measured record of harness.scale (less the digests, kept in the work dir for the resume case)."""

    def per_run(key: str, d: Path) -> dict:
        rec = _scale_json(d)
        digests = rec.pop("digests", {})
        if name:
            (_scale_dir(ctx) / f"digests-{name}.json").write_text(json.dumps(digests, indent=0))
            (_scale_dir(ctx) / f"processes-{name}.json").write_text(json.dumps(rec["processes"]))
        rec.pop("trace_rows", None)
        killed = rec.get("killed_run")
        if killed:
            killed.pop("processes", None)
        rec["outputs_digested"] = len(digests)
        return {"scale": rec}

    return per_run


def _smaller_processes(ctx: Ctx, sd: Path, smaller: str) -> tuple[dict | None, str]:
    """The per-process figures of the ``size_<smaller>`` run a larger genome's flatness is checked against, and where
    they come from: this work dir's run, else the results file's record of the case (its commit and CPU named; per-task
    memory does not depend on the CPU's speed), else None."""
    f = sd / f"processes-{smaller}.json"
    if f.exists():
        return json.loads(f.read_text()), ""
    rec = ctx.earlier.get(f"scale/size_{smaller}") or {}
    runs = [r for r in rec.get("runs", []) if (r.get("scale") or {}).get("processes") and r.get("exit") == 0]
    if not runs or (rec.get("agreement") or {}).get("ok") is not True:
        return None, ""
    commit = ((rec.get("git") or {}).get("commit") or "?")[:7]
    cpu = (rec.get("machine") or {}).get("cpu_model", "?")
    return runs[0]["scale"]["processes"], f" (its record in the results file: {commit}, {cpu})"


def _scale_bounds(rec: dict, disk: bool) -> list[str]:
    from ..harness.scale import check_disk, check_task_memory

    bad = check_task_memory(rec["processes"])
    bad += [f"{f}: pyBigWig cannot open it" for f in rec.get("unreadable_browser_files", [])[:5]]
    if disk:
        shard = rec["processes"].get("PREDICT", {}).get("max_wchar_bytes", 0)
        bad += check_disk(rec["peak_work_bytes"], rec["outputs_bytes"], shard)
    return bad


def _pipeline_contender(key: str, label: str, argv, retries: int) -> Contender:
    """A run of harness.scale (one repeat: each takes minutes to hours)."""
    return Contender(key, label, "ours", argv, repeats=1, retries=retries)


def _size_agree(ctx: Ctx, sd: Path, smaller: str | None):
    """agree() of a size_ case: the bounds, and per-task peak RSS flat against the ``smaller`` genome's run."""
    from ..harness import scale as S

    def agree(dirs: dict) -> dict:
        rec = _scale_json(dirs["pipeline"])
        bad = _scale_bounds(rec, disk=True)
        flat = "no smaller genome measured"
        small, source = _smaller_processes(ctx, sd, smaller) if smaller else (None, "")
        if small is not None:
            bad += S.check_flat(small, rec["processes"])
            flat = f"per-task peak RSS flat vs {smaller}{source}"
        elif smaller:
            flat = f"flatness not checked: size_{smaller} has not run in this work dir nor is in the results file"
        return {
            "ok": not bad,
            "failed_bounds": bad,
            "detail": "; ".join(bad)
            if bad
            else f"bounds hold: per-task peak RSS <= 2 GiB, work/ <= outputs + one shard's temporaries + slack; {flat}",
        }

    return agree


def _size_case(ctx: Ctx, cfg: dict, retries: int, sd: Path, i: int) -> tuple[Case, Path, int]:
    """Case size_<name> of the ``i``-th genome (the whole pipeline on it), its FASTA and its total bp."""
    from ..harness import scale as S
    from ..harness.synth import lengths, single_sheet, write_assembly

    name, rec_bp, records, contigs = cfg["genomes"][i]
    fa = ctx.inputs() / f"scale_{name}_{records}x{rec_bp}_{contigs}ctg_seed{SCALE_SEED}.fa"
    sheet = ctx.inputs() / f"{fa.stem}.samplesheet.csv"
    smaller = cfg["genomes"][i - 1][0] if i else None
    total_bp = sum(n for _, n in lengths(SCALE_SEED, [rec_bp] * records, (contigs, *SCALE_CONTIGS)))

    def prepare():
        if not fa.exists():
            ctx.log(f"  generating {fa.name}")
            write_assembly(fa, SCALE_SEED, [rec_bp] * records, (contigs, *SCALE_CONTIGS))
        single_sheet(sheet, f"scale{name}", fa)
        S.check_free_disk(ctx.work, total_bp, name)

    c = _pipeline_contender(
        "pipeline",
        f"nextflow run main.nf -profile test --predict_from fasta ({name})",
        lambda d, r: [*module("scale"), "run", d, sheet, "--shard-rows", str(cfg["shard_rows"])],
        retries,
    )
    case = Case(
        "scale",
        f"size_{name}",
        {
            "genome": name,
            "records": records,
            "record_bp": rec_bp,
            "contigs": contigs,
            "contig_bp": "%d-%d" % SCALE_CONTIGS,
            "total_bp": total_bp,
            "seed": SCALE_SEED,
            "predict_shard_rows": cfg["shard_rows"],
            "profile": "test",
            "predict_from": "fasta",
            "save_h5": False,
        },
        [c],
        [],
        _size_agree(ctx, sd, smaller),
        per_run=_scale_per_run(ctx, name),
        prepare=prepare,
        note="the whole pipeline; the bounds are checked from the measured numbers",
    )
    return case, fa, total_bp


def _resume_agree(sd: Path, name: str):
    """agree() of the resume case: only unfinished PREDICT shards rerun, outputs equal size_<name>'s."""
    from ..harness import scale as S

    def resume_agree(dirs: dict) -> dict:
        rec = _scale_json(dirs["pipeline"])
        bad, counts = S.check_resume(rec["killed_run"]["trace_rows"], rec["trace_rows"])
        ref = sd / f"digests-{name}.json"
        if ref.exists():
            diff = S.compare_digests(rec["digests"], json.loads(ref.read_text()))
            bad += diff[:5] + ([f"... {len(diff) - 5} more"] if len(diff) > 5 else [])
            same = f"{len(rec['digests'])} published files equal size_{name}'s"
        else:
            bad.append(f"no uninterrupted run to compare with: run the case size_{name} first")
            same = ""
        return {
            "ok": not bad,
            "failed_bounds": bad,
            "shards": counts,
            "detail": "; ".join(bad)
            if bad
            else f"{counts['rerun']} of {counts['shards']} PREDICT shards rerun (the {counts['unfinished_at_kill']} "
            f"unfinished at the kill), {counts['cached']} cached; {same}",
        }

    return resume_agree


def _resume_case(ctx: Ctx, cfg: dict, retries: int, sd: Path, fa: Path, total_bp: int) -> Case:
    """Case resume_<name>: the genome ``cfg['resume']`` (FASTA ``fa``) killed during PREDICT, then resumed."""
    from ..harness import scale as S

    name = cfg["resume"]
    sheet = ctx.inputs() / f"{fa.stem}.samplesheet.csv"
    c = _pipeline_contender(
        "pipeline",
        f"kill -9 during PREDICT, then -resume ({name})",
        lambda d, r: [*module("scale"), "resume", d, sheet, "--shard-rows", str(cfg["shard_rows"])],
        retries,
    )

    def resume_prepare():
        if not fa.exists() or not sheet.exists():
            raise RuntimeError(f"{fa.name}: run the case size_{name} first")
        S.check_free_disk(ctx.work, total_bp, f"resume_{name}")

    return Case(
        "scale",
        f"resume_{name}",
        {
            "genome": name,
            "kill": "SIGKILL to the driver's process group "
            "once the trace lists a finished PREDICT task and another runs",
            "predict_shard_rows": cfg["shard_rows"],
        },
        [c],
        [],
        _resume_agree(sd, name),
        per_run=_scale_per_run(ctx, None),
        prepare=resume_prepare,
        note="killed run + one -resume; only unfinished PREDICT shards may rerun; outputs equal the "
        "uninterrupted run's (md5 of h5 datasets, bigWig/bigBed/BED bytes)",
    )


def _many_agree(n: int, n_expr: int):
    """agree() of the many_ case: every assembly's outputs published, grouped and ungrouped runs equal."""
    from ..harness import scale as S

    def many_agree(dirs: dict) -> dict:
        rec = _scale_json(dirs["pipeline"])
        bad = _scale_bounds(rec, disk=False)
        got = {k.split("/")[0] for k in rec["digests"] if k.endswith("_predictions.h5")}
        if len(got) != n:
            bad.append(f"predictions published for {len(got)} of {n} assemblies")
        nets = {k.split("/")[0] for k in rec["digests"] if "genie3_links" in k}
        if len(nets) != n_expr:
            bad.append(f"networks published for {len(nets)} of {n_expr} assemblies with expression")
        # grouped or not, every published output is the same
        diff = (
            S.compare_digests(
                rec["digests"], _scale_json(dirs["ungrouped"])["digests"], ("the grouped run", "the ungrouped run")
            )
            if "ungrouped" in dirs
            else []
        )
        bad += [f"grouped vs ungrouped: {d}" for d in diff[:5]] + (
            [f"... {len(diff) - 5} more"] if len(diff) > 5 else []
        )
        html = rec.get("report_html_bytes", {})
        return {
            "ok": not bad,
            "failed_bounds": bad,
            "detail": "; ".join(bad)
            if bad
            else f"{n} assemblies, {rec['tasks']} tasks, outputs equal to the ungrouped run's; driver peak RSS "
            f"{rec['driver_peak_rss_bytes'] / 2**20:.0f} "
            f"MiB, {rec['driver_cpu_s_per_task']:.2f} driver CPU s per task; reports "
            + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in sorted(html.items())),
        }

    return many_agree


def _many_case(ctx: Ctx, cfg: dict, retries: int) -> Case:
    """Case many_<n>: one sheet of many small assemblies, grouped per PREDICT task and one task each."""
    from ..harness.synth import write_sheet

    n, n_expr, rec_bp, contigs = cfg["many"]
    md = ctx.inputs() / f"scale_many_{n}x{rec_bp}_{contigs}ctg_{n_expr}expr_seed{SCALE_SEED}"

    def many_prepare():
        if not (md / "samplesheet.csv").exists():
            ctx.log(f"  generating {md.name}")
            write_sheet(md, n, SCALE_SEED, [rec_bp], (contigs, *SCALE_CONTIGS), n_expr)

    def many_argv(group_mbp):
        return lambda d, r: [
            *module("scale"),
            "run",
            d,
            md / "samplesheet.csv",
            "--shard-rows",
            str(cfg["shard_rows"]),
            "--extra=--predict_group_mbp",
            f"--extra={group_mbp}",
        ]

    # the same sheet with small assemblies predicted several to a task (PREDICT_GROUP, the pipeline's default size)
    # and one task each: what grouping saves in start-ups
    c = _pipeline_contender(
        "pipeline",
        f"nextflow run main.nf -profile test, {n} assemblies in one sheet, --predict_group_mbp {SCALE_GROUP_MBP:g}",
        many_argv(SCALE_GROUP_MBP),
        retries,
    )
    c_one = _pipeline_contender(
        "ungrouped",
        "the same with --predict_group_mbp 0 (one PREDICT task per assembly)",
        many_argv(0),
        retries,
    )
    return Case(
        "scale",
        f"many_{n}",
        {
            "assemblies": n,
            "with_expression": n_expr,
            "record_bp": rec_bp,
            "contigs": contigs,
            "seed": SCALE_SEED,
            "predict_group_mbp": SCALE_GROUP_MBP,
        },
        [c, c_one],
        [("pipeline", "ungrouped")],
        _many_agree(n, n_expr),
        per_run=_scale_per_run(ctx, None),
        prepare=many_prepare,
        note="one sheet of many small assemblies: the driver's memory and overhead per task, the reports' size",
    )


def scale(ctx: Ctx) -> tuple[list, list[Case]]:
    """The pipeline at scale, measured from outside (harness/scale.py): per-process wall, CPU, peak RSS and task
    counts from the trace, the driver's RSS and CPU and the disk of work/ and the outdir sampled every second. The
    bounds are checked from the measured numbers; a failed bound fails the case (``agreement.ok`` False)."""
    cfg = SCALE_QUICK if ctx.quick else SCALE_FULL
    # a full run takes up to hours: not run again after a failure (that would double the time and remove the failed
    # attempt's logs); the quick ones keep the harness's one retry
    retries = 1 if ctx.quick else 0
    sd = _scale_dir(ctx)
    cases = []
    fastas: dict[str, Path] = {}
    totals: dict[str, int] = {}
    for i, (name, *_) in enumerate(cfg["genomes"]):
        case, fastas[name], totals[name] = _size_case(ctx, cfg, retries, sd, i)
        cases.append(case)
    name = cfg["resume"]
    cases.append(_resume_case(ctx, cfg, retries, sd, fastas[name], totals[name]))
    cases.append(_many_case(ctx, cfg, retries))
    return [], cases


build = scale
