"""``chromaflow bench``: sweep settings on this machine, outside Nextflow, and print the best per stage.

* fasta2h5: a seeded random genome of ``--genome-mbp`` Mbp, converted with 1..N ``--threads``;
* predict: batch size x reader prefetch (``--num-workers``) on the first ``--predict-rows`` subsequences of that
  genome (a real ``chromaflow predict --shard 1/n`` run), with ``--model`` or a seeded tiny test model;
* GENIE3: a seeded synthetic ``--genie3-genes`` x ``--genie3-samples`` matrix with 1..N ``--threads``.

Every run goes through the real stage CLI with ``--metrics``, in this process (torch is imported once), so the
rows are the same metrics the pipeline collects; ``--out`` writes the benchmark.json format of
``chromaflow benchmark-report`` plus ``best`` and ``bench`` keys. Peak RSS is the process high-water mark
(it only grows across runs in one process). With the tiny test model the prediction rates measure chromaflow's
I/O and a toy network, not Predmoter's: pass ``--model`` for real numbers.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import cast

import numpy as np

from .cli import add_extrapolation_arguments, check_extrapolation_arguments
from .html import render_html
from .tasks import build_report, task_from_metrics
from .units import BP_PER_MBP, NA, fmt_rate
from ..utils.cli_options import resolve_threads
from ..utils.errors import ChromaflowError
from ..utils.outputs import write_json_atomic, write_text_atomic

STAGES = ("fasta2h5", "predict", "genie3")


def _int_list(text: str) -> list[int]:
    try:
        vals = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not vals or any(v < 1 for v in vals):
        raise argparse.ArgumentTypeError(f"expected integers >= 1, got {text!r}")
    return vals


def default_threads() -> list[int]:
    """1, 2, 4, ... up to the usable CPUs, and the usable CPUs themselves."""
    n = resolve_threads(None)
    out, t = [], 1
    while t < n:
        out.append(t)
        t *= 2
    out.append(n)
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's options (argparse): stages, synthetic genome and matrix sizes, model, device, the settings
    swept, the extrapolation and the outputs."""
    p.add_argument(
        "--quick",
        action="store_true",
        help="sub-minute run: 2 Mbp genome, 16 subsequences, 2 predict settings, 60-gene GENIE3",
    )
    p.add_argument("--stages", default=",".join(STAGES), help="comma-separated subset of fasta2h5,predict,genie3")
    p.add_argument("--genome-mbp", type=float, default=None, help="synthetic genome size in Mbp (default 10; quick 2)")
    p.add_argument("--subsequence-length", type=int, default=21384, metavar="L", help="default 21384 (Predmoter)")
    p.add_argument("--seed", type=int, default=42, help="seed of the synthetic genome and matrix")
    p.add_argument("--model", default=None, help="Predmoter checkpoint; default: a seeded tiny test model (toy rates)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument(
        "--predict-rows",
        type=int,
        default=None,
        help="about this many subsequences predicted per setting: shard 1 of ceil(rows / N) (default 64; quick 16)",
    )
    p.add_argument("--batch-sizes", type=_int_list, default=None, help="e.g. 8,32 (default 8,32; quick 4,16)")
    p.add_argument("--num-workers", type=_int_list, default=None, help="reader prefetch depths (default 1,4; quick 2)")
    p.add_argument(
        "--threads",
        type=_int_list,
        default=None,
        help="thread counts for fasta2h5/GENIE3 (default 1,2,4,..,all CPUs; quick 1,all)",
    )
    p.add_argument("--genie3-genes", type=int, default=None, help="default 200; quick 60")
    p.add_argument("--genie3-samples", type=int, default=None, help="default 100; quick 40")
    p.add_argument("--genie3-trees", type=int, default=None, help="default 100; quick 30")
    p.add_argument("--workdir", default=None, help="keep inputs/outputs here (default: a temporary directory)")
    p.add_argument("--out", default=None, help="write the results JSON (benchmark.json format) here")
    p.add_argument("--html", default=None, help="also write the HTML report here")
    add_extrapolation_arguments(p)


def _resolve(args: argparse.Namespace) -> dict:
    q = args.quick
    ncpu = resolve_threads(None)
    cfg = {
        "genome_mbp": args.genome_mbp if args.genome_mbp is not None else (2.0 if q else 10.0),
        "L": args.subsequence_length,
        "predict_rows": args.predict_rows or (16 if q else 64),
        "batch_sizes": args.batch_sizes or ([4, 16] if q else [8, 32]),
        "num_workers": args.num_workers or ([2] if q else [1, 4]),
        "threads": args.threads or (sorted({1, ncpu}) if q else default_threads()),
        "genie3_genes": args.genie3_genes or (60 if q else 200),
        "genie3_samples": args.genie3_samples or (40 if q else 100),
        "genie3_trees": args.genie3_trees or (30 if q else 100),
        "predict_threads": ncpu,
        "device": args.device,
        "model": args.model,
        "seed": args.seed,
        "quick": bool(q),
    }
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    bad = [s for s in stages if s not in STAGES]
    if bad or not stages:
        raise ChromaflowError(f"--stages: unknown stage(s) {' '.join(bad) or '(none)'}; choose from {','.join(STAGES)}")
    cfg["stages"] = stages
    if not (cfg["genome_mbp"] > 0 and math.isfinite(cfg["genome_mbp"])):
        raise ChromaflowError(f"--genome-mbp must be > 0, got {cfg['genome_mbp']}")
    if cfg["L"] < 1 or cfg["predict_rows"] < 1:
        raise ChromaflowError("--subsequence-length and --predict-rows must be >= 1")
    if min(cfg["genie3_genes"], cfg["genie3_samples"], cfg["genie3_trees"]) < 2:
        raise ChromaflowError("--genie3-genes/--genie3-samples/--genie3-trees must be >= 2")
    if args.model and not os.path.isfile(args.model):
        raise ChromaflowError(f"{args.model}: checkpoint does not exist")
    return cfg


# --------------------------------------------------------------------------------------------------
# synthetic inputs
# --------------------------------------------------------------------------------------------------
def write_random_fasta(path: Path, total_bp: int, seed: int, records: int = 4, width: int = 60) -> int:
    """Seeded random ACGT genome of ``total_bp`` bp in ``records`` records, 60-column lines; returns bp written."""
    rng = np.random.default_rng(seed)
    alphabet = np.frombuffer(b"ACGT", dtype=np.uint8)
    records = max(1, min(records, total_bp))
    sizes = [total_bp // records + (1 if i < total_bp % records else 0) for i in range(records)]
    with open(path, "wb") as f:
        for i, n in enumerate(sizes):
            f.write(f">chr{i + 1} synthetic seed={seed}\n".encode())
            seq = alphabet[rng.integers(0, 4, n)]
            for s in range(0, n, 1 << 20):  # write in 1 Mbp pieces: bounded memory
                piece = seq[s : s + (1 << 20)]
                full = len(piece) // width
                body = np.empty((full, width + 1), dtype=np.uint8)
                body[:, :width] = piece[: full * width].reshape(full, width)
                body[:, width] = 10
                f.write(body.tobytes())
                if len(piece) % width:
                    f.write(piece[full * width :].tobytes() + b"\n")
    return sum(sizes)


def write_expression(path: Path, genes: int, samples: int, seed: int) -> None:
    """Seeded genes x samples matrix (TSV, header of sample names, first column gene names) with some structure:
    every 5th gene is a noisy function of a 'regulator' among the first 10% of genes."""
    rng = np.random.default_rng(seed)
    X = rng.random((genes, samples)).astype(np.float32)
    n_reg = max(1, genes // 10)
    for g in range(n_reg, genes, 5):
        X[g] = 0.7 * X[g % n_reg] + 0.3 * X[g]
    with open(path, "w") as f:
        f.write("\t".join(["gene"] + [f"S{j + 1}" for j in range(samples)]) + "\n")
        for g in range(genes):
            f.write("\t".join([f"G{g + 1}"] + [f"{v:.6f}" for v in X[g]]) + "\n")


# --------------------------------------------------------------------------------------------------
# the sweep
# --------------------------------------------------------------------------------------------------
def _stage(argv: list) -> dict:
    """Run one stage through the real CLI in this process; return its metrics JSON."""
    from ..cli import main as cli_main

    metrics = None
    for i, a in enumerate(argv):
        if a == "--metrics":
            metrics = Path(argv[i + 1])
    rc = cli_main([str(a) for a in argv])
    if rc != 0:
        raise ChromaflowError(f"bench: `chromaflow {' '.join(str(a) for a in argv[:1])}` failed (exit {rc})")
    return json.loads(cast(Path, metrics).read_text())  # every stage's argv names --metrics


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def sweep(cfg: dict, work: Path) -> list[dict]:
    """Run the sweeps of ``cfg``'s stages in ``work`` (fasta2h5 always: it makes the genome h5 the prediction sweep
    reads; predict and GENIE3 where selected); the metrics of every run, in order."""
    rows: list[dict] = []
    h5 = work / "genome.h5"
    rows += _sweep_fasta2h5(cfg, work, h5)
    if "predict" in cfg["stages"]:
        rows += _sweep_predict(cfg, work, h5)
    if "genie3" in cfg["stages"]:
        rows += _sweep_genie3(cfg, work)
    return rows


def _sweep_fasta2h5(cfg: dict, work: Path, h5: Path) -> list[dict]:
    """The random genome, and fasta2h5 per --threads (timed) or, for predict alone, once (untimed) into ``h5``."""
    rows: list[dict] = []
    total_bp = int(round(cfg["genome_mbp"] * BP_PER_MBP))
    fasta = work / "genome.fa"
    need_h5 = "predict" in cfg["stages"]
    if "fasta2h5" in cfg["stages"] or need_h5:
        _say(f"bench: writing a seeded random {cfg['genome_mbp']:g} Mbp genome")
        write_random_fasta(fasta, total_bp, cfg["seed"])
    if "fasta2h5" in cfg["stages"]:
        for t in cfg["threads"]:
            _say(f"bench: fasta2h5 --threads {t}")
            m = _stage(
                [
                    "fasta2h5",
                    "--fasta",
                    fasta,
                    "--species",
                    "Bench_species",
                    "--out",
                    h5,
                    "--force",
                    "--subsequence-length",
                    cfg["L"],
                    "--threads",
                    t,
                    "--metrics",
                    work / "m.json",
                ]
            )
            m.update(setting=f"threads={t}", assembly="synthetic")
            rows.append(m)
    elif need_h5:
        from ..fasta2h5.convert import convert

        convert(str(fasta), h5, "Bench_species", cfg["L"], threads=resolve_threads(None))
    return rows


def _sweep_predict(cfg: dict, work: Path, h5: Path) -> list[dict]:
    """predict per batch size x --num-workers on the first shard of ``h5``, after an untimed warm-up."""
    import h5py

    rows: list[dict] = []
    with h5py.File(h5, "r") as f:
        n_rows = int(f["data/X"].shape[0])
    model = cfg["model"]
    if not model:
        model = work / "tiny.ckpt"
        _stage_plain(["make-test-model", "--out", model, "--seed", "0", "--force"])
    n_shards = max(1, math.ceil(n_rows / cfg["predict_rows"]))
    # untimed warm-up (first torch use, model load paths) so the first setting is not penalised
    warm_up = _predict_argv(cfg, h5, model, work / "warm.h5", "1")
    _stage_plain([*warm_up, *(["--shard", f"1/{n_rows}"] if n_rows > 1 else [])])
    for bs in cfg["batch_sizes"]:
        for nw in cfg["num_workers"]:
            _say(f"bench: predict --batch-size {bs} --num-workers {nw}")
            argv = _predict_argv(cfg, h5, model, work / "pred.h5", bs, "--num-workers", nw)
            argv += ["--metrics", work / "m.json"]
            if n_shards > 1:
                argv += ["--shard", f"1/{n_shards}"]
            rows.append(_predict_setting(cfg, argv, bs, nw))
    return rows


def _predict_argv(cfg: dict, h5: Path, model, out: Path, batch_size, *settings) -> list:
    """The command line of one predict run of the sweep: ``h5`` with ``model`` into ``out`` (overwritten), at
    ``batch_size`` with the further ``settings``, on the sweep's device and threads."""
    return [
        "predict",
        "--h5",
        h5,
        "--model",
        model,
        "--out",
        out,
        "--force",
        "--batch-size",
        batch_size,
        *settings,
        "--device",
        cfg["device"],
        "--threads",
        cfg["predict_threads"],
    ]


def _predict_setting(cfg: dict, argv: list, bs: int, nw: int) -> dict:
    """Run one setting (batch size ``bs``, ``nw`` reader workers) of the predict sweep; its metrics (on CUDA the
    stage's own NVML utilisation of the device it used, ``gpu_util_pct``: chromaflow.predict.gpumetrics, the one GPU
    sampler) and the setting named."""
    m = _stage(argv)
    m.update(setting=f"batch={bs} workers={nw}", assembly="synthetic", num_workers=nw, test_model=not cfg["model"])
    m.pop("shard", None)
    return m


def _sweep_genie3(cfg: dict, work: Path) -> list[dict]:
    """genie3 per --threads on a seeded synthetic expression matrix."""
    rows: list[dict] = []
    expr = work / "expression.tsv"
    write_expression(expr, cfg["genie3_genes"], cfg["genie3_samples"], cfg["seed"])
    for t in cfg["threads"]:
        _say(f"bench: genie3 --threads {t}")
        m = _stage(
            [
                "genie3",
                "--expression",
                expr,
                "--layout",
                "genes-x-samples",
                "--n-trees",
                cfg["genie3_trees"],
                "--threads",
                t,
                "--targets-chunk",
                "1/1",
                "--out",
                work / "part.npz",
                "--metrics",
                work / "m.json",
            ]
        )
        m.update(setting=f"threads={t}", assembly="synthetic")
        m.pop("chunk", None)
        rows.append(m)
    return rows


def _stage_plain(argv: list) -> None:
    from ..cli import main as cli_main

    rc = cli_main([str(a) for a in argv])
    if rc != 0:
        raise ChromaflowError(f"bench: `chromaflow {argv[0]}` failed (exit {rc})")


def best_settings(tasks: list[dict]) -> dict:
    """Fastest setting per stage: bp/s for fasta2h5/predict, targets/s for GENIE3."""
    best: dict[str, dict] = {}
    for t in tasks:
        key = "targets_per_s" if t["stage"] == "genie3" else "bp_per_s"
        v = t.get(key)
        if v is None:
            continue
        if t["stage"] not in best or v > best[t["stage"]]["value"]:
            best[t["stage"]] = {
                "setting": t.get("setting"),
                "metric": key,
                "value": v,
                "wall_s": t.get("wall_s"),
                "data_wait_pct": t.get("data_wait_pct"),
            }
    return best


def format_table(tasks: list[dict], best: dict) -> str:
    """The sweep as text: one line per task (stage, setting, device, wall and CPU seconds, rate, data-wait; ``*``
    marks a stage's best setting), then the best setting of each stage."""
    head = f"{'stage':<9} {'setting':<20} {'device':<7} {'wall s':>8} {'CPU s':>8} {'rate':>16} {'data-wait':>9}"
    lines = [head, "-" * len(head)]
    for t in tasks:
        if t["stage"] == "genie3":
            rate = f"{t['targets_per_s']:.4g} targets/s" if t.get("targets_per_s") else NA
        else:
            rate = fmt_rate(t.get("bp_per_s"))
        dw = "" if t.get("data_wait_pct") is None else f"{t['data_wait_pct']:.1f} %"
        mark = " *" if best.get(t["stage"], {}).get("setting") == t.get("setting") else ""
        lines.append(
            f"{t['stage']:<9} {str(t.get('setting')):<20} {str(t.get('device') or ''):<7} "
            f"{t['wall_s'] or 0:>8.3f} {t['cpu_s'] or 0:>8.3f} {rate:>16} {dw:>9}{mark}"
        )
    lines.append("")
    for stage, b in best.items():
        unit = "targets/s" if b["metric"] == "targets_per_s" else "bp/s"
        val = f"{b['value']:.4g} {unit}" if unit != "bp/s" else fmt_rate(b["value"])
        lines.append(f"best {stage}: {b['setting']} ({val})")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run the command: sweep the settings, print the table, warnings and notes, and write the report JSON
    (``--out``) and HTML (``--html``) where asked; returns the exit status."""
    check_extrapolation_arguments(args)
    cfg = _resolve(args)
    os.environ.setdefault("CHROMAFLOW_PROGRESS", "0")
    t0 = time.perf_counter()
    if args.workdir:
        work = Path(args.workdir)
        work.mkdir(parents=True, exist_ok=True)
        metrics = sweep(cfg, work)
    else:
        with tempfile.TemporaryDirectory(prefix="chromaflow-bench-") as tmp:
            metrics = sweep(cfg, Path(tmp))
    tasks = [task_from_metrics(m) for m in metrics]
    notes = ["peak RSS is this process's high-water mark across all runs (one process)"]
    if "predict" in cfg["stages"] and not cfg["model"]:
        notes.append(
            "prediction used a tiny seeded test model (make-test-model): its rates measure chromaflow's "
            "I/O and a toy network, not Predmoter; pass --model for real rates"
        )
    rep = build_report(
        tasks,
        genome_gbp=args.extrapolate_genome_gbp,
        genomes=args.extrapolate_genomes,
        workers=args.extrapolate_workers,
        notes=notes,
        source="chromaflow bench",
    )
    rep["best"] = best_settings(rep["tasks"])
    rep["bench"] = dict(
        cfg, model=str(cfg["model"]) if cfg["model"] else None, elapsed_s=round(time.perf_counter() - t0, 3)
    )
    print(format_table(rep["tasks"], rep["best"]))
    for w in rep["warnings"]:
        print(f"warning: {w['message']}; try: {w['fix']}")
    for n in notes[1:]:
        print(f"note: {n}")
    if args.out:
        write_json_atomic(args.out, rep)
    if args.html:
        write_text_atomic(args.html, render_html(rep))
    return 0
