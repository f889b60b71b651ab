#!/usr/bin/env python3
"""chromaflow predict vs real Predmoter, side by side, end to end (process start-up included), CPU: both input
routes of chromaflow (h5, FASTA) and fasta2h5 + predict.

The published predict-vs-Predmoter figures come from ``benchmarks/run --stages predict`` (the harness, rendered into
``RESULTS.md``); this script adds the FASTA route and ``fasta2h5`` + ``predict`` to the comparison (issue 17: on
CPU the FASTA route must be at least as fast end to end as fasta2h5 + predict) and writes ``ROUTES.md``.

Input: a seeded synthetic genome of ``--rows`` subsequences of 21384 bp (default 120 = 2.57 Mbp: one record of
rows/2 chunks, both strands), as FASTA and as its ``chromaflow fasta2h5`` h5. Model: ``make-test-model --preset
release-bihybrid`` (the released models' architecture, FORMATS.md §2.9, 1,534,358 parameters, seeded random
weights), which real Predmoter loads.

Cases, alternated (one of each per round, ``--repeats`` rounds):

* ``predmoter``: ``../shared/peers/bin/peer-predmoter -m predict -f genome.h5 --model M --device cpu -b 120``;
* ``h5``: ``chromaflow predict --h5 genome.h5 --model M`` (fp32, defaults);
* ``fasta2h5+h5``: ``chromaflow fasta2h5`` then ``chromaflow predict --h5`` (two processes, summed);
* ``fasta``: ``chromaflow predict --fasta genome.fa --species S --model M`` (no h5 written);
* ``bf16`` (first round only): ``--precision bf16``, for its deviation from fp32.

Per run: wall, CPU seconds (user + sys, of that process and its children, from wait4) and peak RSS. Every fp32
output is compared with Predmoter's: identical except ±1 at documented near-ties (float64 forward pass, computed
only if anything differs). Writes ``results/<date>-<host>.json`` and regenerates ``ROUTES.md`` from all JSON
files in ``results/`` (never edited by hand).

usage: python benchmarks/predict/bench_predict.py [--rows 120] [--repeats 3] [--peers ../shared/peers] [--workdir DIR]
       python benchmarks/predict/bench_predict.py --regenerate      (only rebuild ROUTES.md)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))  # harness.timer: the benchmarks' process timer
from chromaflow.report.machine import machine_info  # noqa: E402 - the machine record
from harness.timer import measure  # noqa: E402

HERE = Path(__file__).resolve().parent
L = 21384
SPECIES = "Synthetica"


def env() -> dict:
    return dict(
        os.environ,
        PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
        CHROMAFLOW_PROGRESS="0",
    )


def run(cmd: list[str], cwd: Path | None = None) -> dict:
    """Run ``cmd``; wall, CPU (user+sys incl. its children) and peak RSS of that process tree (the one timer)."""
    r = measure(cmd, cwd=cwd, env=env(), check=True)
    return {k: r[k] for k in ("wall_s", "cpu_s", "user_s", "sys_s", "peak_rss_bytes", "load_before", "load_after")}


def add(a: dict, b: dict) -> dict:
    out = {k: a[k] + b[k] for k in ("wall_s", "cpu_s", "user_s", "sys_s")}
    out.update(
        peak_rss_bytes=max(a["peak_rss_bytes"], b["peak_rss_bytes"]),
        load_before=a["load_before"],
        load_after=b["load_after"],
    )
    return out


def machine() -> dict:
    import torch

    return {**machine_info(), "torch": torch.__version__}


def make_inputs(work: Path, rows: int, seed: int) -> dict:
    from chromaflow.report.sweep import write_random_fasta

    fa = work / f"genome_{rows}.fa"
    if not fa.exists():
        write_random_fasta(fa, rows // 2 * L, seed, records=1)
    h5 = work / f"genome_{rows}.h5"
    if not h5.exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "chromaflow",
                "fasta2h5",
                "--fasta",
                str(fa),
                "--species",
                SPECIES,
                "--out",
                str(h5),
            ],
            check=True,
            env=env(),
        )
    ckpt = work / "release_bihybrid.ckpt"
    if not ckpt.exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "chromaflow",
                "make-test-model",
                "--out",
                str(ckpt),
                "--preset",
                "release-bihybrid",
                "--seed",
                "0",
            ],
            check=True,
            env=env(),
        )
    return {"fasta": fa, "h5": h5, "ckpt": ckpt}


def compare(ours: Path, ref: Path, inputs: dict, ties_cache: dict) -> dict:
    import h5py
    import numpy as np

    from chromaflow.predict.compare import compare_files

    with h5py.File(ours) as a, h5py.File(ref) as b:
        same = all(
            np.array_equal(a[n][()], b[n][()])
            for n in ("data/seqids", "data/start_ends", "prediction/datasets", "prediction/predictions")
        )
    if same:
        return {"identical": True, "ok": True, "differ": 0}
    if "ties" not in ties_cache:
        import torch

        from chromaflow.model.checkpoint import build_model, load_checkpoint
        from chromaflow.predict.compare import near_ties

        torch.set_num_threads(1)
        with h5py.File(inputs["h5"]) as f:
            X = f["data/X"][()]
        ties_cache["ties"] = near_ties(build_model(load_checkpoint(inputs["ckpt"])), X)
    c = compare_files(str(ours), str(ref), ties_cache["ties"])
    out = c.as_dict()
    out["identical"] = False
    return out


def regenerate_md() -> Path:
    runs = [json.loads(p.read_text()) for p in sorted((HERE / "results").glob("*.json"))]
    lines = [
        "# chromaflow predict, both input routes, vs Predmoter",
        "",
        "Generated by `benchmarks/predict/bench_predict.py` from `benchmarks/predict/results/*.json` "
        "(do not edit by hand). Every figure below comes from a run of the command shown with it.",
        "",
    ]
    names = {
        "predmoter": "Predmoter (real, `peer-predmoter -b 120`)",
        "h5": "chromaflow predict --h5",
        "fasta2h5+h5": "chromaflow fasta2h5 + predict --h5",
        "fasta": "chromaflow predict --fasta (no h5)",
    }
    for r in runs:
        m = r["machine"]
        loads = [x["load_before"] for runs_ in r["runs"].values() for x in runs_]
        lines += [
            f"## {r['started']} UTC — {m['cpu_model']}, {m['usable_cpus']} cores, host {m['host']}",
            "",
            f"Command: `{r['command']}`. {r['rows']} subsequences of {L} bp = {r['rows'] * L / 1e6:.2f} Mbp, "
            f"model release-bihybrid (random weights), fp32 on CPU, torch {m['torch']}. {r['repeats']} rounds, "
            f"alternating; load average (1 min) before the runs: {min(loads):.1f}–{max(loads):.1f}"
            + (
                " — **the machine was shared: wall times are inflated and noisy, compare CPU seconds**"
                if max(loads) > m["usable_cpus"] + 0.5
                else ""
            )
            + ".",
            "",
            "| case | wall s, median [min–max] | CPU s (user+sys) | sys s | peak RSS | Predmoter ÷ case, wall | "
            "Predmoter ÷ case, CPU | output vs Predmoter |",
            "|---|---|---|---|---|---|---|---|",
        ]
        pm = r["runs"].get("predmoter")
        for key, runs_ in r["runs"].items():
            w = [x["wall_s"] for x in runs_]
            c = [x["cpu_s"] for x in runs_]
            sy = [x["sys_s"] for x in runs_]
            rss = max(x["peak_rss_bytes"] for x in runs_)
            ratio_w = (
                f"{statistics.median([x['wall_s'] for x in pm]) / statistics.median(w):.2f}×"
                if pm and key != "predmoter"
                else "–"
            )
            ratio_c = (
                f"{statistics.median([x['cpu_s'] for x in pm]) / statistics.median(c):.2f}×"
                if pm and key != "predmoter"
                else "–"
            )
            cmp = r["compare"].get(key)
            if cmp is None:
                verdict = "(reference)" if key == "predmoter" else "–"
            elif all(x["identical"] for x in cmp):
                verdict = "identical"
            elif all(x["ok"] for x in cmp):
                verdict = "identical except near-ties"
            else:
                verdict = "**DIFFERENT**"
            lines.append(
                f"| {names.get(key, key)} | {statistics.median(w):.2f} [{min(w):.2f}–{max(w):.2f}] | "
                f"{statistics.median(c):.2f} "
                f"[{min(c):.2f}–{max(c):.2f}] | {statistics.median(sy):.2f} | {rss / 2**20:.0f} MiB | {ratio_w} | "
                f"{ratio_c} | {verdict} |"
            )
        b = r.get("bf16")
        if b:
            d, pc = b["vs_fp32"], b.get("precision_check") or {}
            lines += [
                "",
                f"bf16 (`--precision bf16`, one run): {b['run']['wall_s']:.2f} s wall, {b['run']['cpu_s']:.2f} "
                f"CPU-s; vs fp32 {d['differ']} of {d['values']} values differ ({d['fraction']:.4%}), max |Δ| "
                f"{d['max_abs']}; the run's own sample ({pc.get('rows_sampled')} rows): "
                f"{pc.get('differ')} of {pc.get('values')} differ, raw exp() max |Δ| "
                f"{pc.get('raw_max_abs', float('nan')):.3g}.",
            ]
        lines.append("")
    md = HERE / "ROUTES.md"
    md.write_text("\n".join(lines) + "\n")
    return md


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=120, help="subsequences (even; default 120 = 2.57 Mbp)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--peers", default=str(ROOT / ".." / "shared" / "peers"))
    ap.add_argument("--cases", default="predmoter,h5,fasta2h5+h5,fasta")
    ap.add_argument("--no-bf16", action="store_true")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--regenerate", action="store_true", help="only rebuild ROUTES.md from results/*.json")
    args = ap.parse_args()
    if args.regenerate:
        print(regenerate_md().read_text())
        return
    peer = Path(args.peers) / "bin" / "peer-predmoter"
    cases = args.cases.split(",")
    if "predmoter" in cases and not peer.exists():
        raise SystemExit(f"bench_predict: {peer} not found (see ../shared/peers/README.md)")
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench_predict_"))
    work.mkdir(parents=True, exist_ok=True)
    inputs = make_inputs(work, args.rows, args.seed)
    py = sys.executable
    cf = [py, "-m", "chromaflow"]
    result = {
        "command": " ".join(["python benchmarks/predict/bench_predict.py"] + sys.argv[1:]),
        "machine": machine(),
        "started": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "rows": args.rows,
        "repeats": args.repeats,
        "runs": {c: [] for c in cases},
        "compare": {},
    }
    ties: dict = {}
    ref = work / "predmoter" / f"genome_{args.rows}_predictions.h5"
    for rep in range(args.repeats):
        for case in cases:
            out = work / f"{case}_{rep}.h5"
            out.unlink(missing_ok=True)
            if case == "predmoter":
                d = work / f"predmoter_{rep}"
                shutil.rmtree(d, ignore_errors=True)
                d.mkdir()
                r = run(
                    [
                        str(peer),
                        "-m",
                        "predict",
                        "-f",
                        str(inputs["h5"]),
                        "-o",
                        str(d),
                        "--model",
                        str(inputs["ckpt"]),
                        "--device",
                        "cpu",
                        "-b",
                        "120",
                    ]
                )
                out = d / f"genome_{args.rows}_predictions.h5"
                if rep == 0:
                    ref.parent.mkdir(exist_ok=True)
                    shutil.copy(out, ref)
            elif case == "h5":
                r = run(cf + ["predict", "--h5", str(inputs["h5"]), "--model", str(inputs["ckpt"]), "--out", str(out)])
            elif case == "fasta2h5+h5":
                h5 = work / f"tmp_{rep}.h5"
                h5.unlink(missing_ok=True)
                r = add(
                    run(cf + ["fasta2h5", "--fasta", str(inputs["fasta"]), "--species", SPECIES, "--out", str(h5)]),
                    run(cf + ["predict", "--h5", str(h5), "--model", str(inputs["ckpt"]), "--out", str(out)]),
                )
                h5.unlink()
            elif case == "fasta":
                r = run(
                    cf
                    + [
                        "predict",
                        "--fasta",
                        str(inputs["fasta"]),
                        "--species",
                        SPECIES,
                        "--model",
                        str(inputs["ckpt"]),
                        "--out",
                        str(out),
                    ]
                )
            else:
                raise SystemExit(f"unknown case {case}")
            result["runs"][case].append(r)
            if case != "predmoter" and ref.exists():
                result["compare"].setdefault(case, []).append(compare(out, ref, inputs, ties))
            print(
                f"[{rep + 1}] {case}: {r['wall_s']:.2f} s wall, {r['cpu_s']:.2f} CPU-s (sys {r['sys_s']:.2f}), "
                f"{r['peak_rss_bytes'] / 2**20:.0f} MiB, load {r['load_before']:.1f}",
                flush=True,
            )
            if case != "predmoter":
                out.unlink(missing_ok=True)
    if not args.no_bf16:
        out32, out16 = work / "fp32_ref.h5", work / "bf16.h5"
        for p in (out32, out16):
            p.unlink(missing_ok=True)
        run(cf + ["predict", "--h5", str(inputs["h5"]), "--model", str(inputs["ckpt"]), "--out", str(out32)])
        rb = run(
            cf
            + [
                "predict",
                "--h5",
                str(inputs["h5"]),
                "--model",
                str(inputs["ckpt"]),
                "--out",
                str(out16),
                "--precision",
                "bf16",
                "--metrics",
                str(work / "bf16.json"),
            ]
        )
        import h5py
        import numpy as np

        with h5py.File(out32) as a, h5py.File(out16) as b:
            x, y = a["prediction/predictions"][()], b["prediction/predictions"][()]
        d = np.abs(x - y)
        result["bf16"] = {
            "run": rb,
            "vs_fp32": {
                "values": int(d.size),
                "differ": int((d != 0).sum()),
                "fraction": float((d != 0).mean()),
                "max_abs": int(d.max()),
            },
            "precision_check": json.loads((work / "bf16.json").read_text()).get("precision_check"),
        }
    (HERE / "results").mkdir(exist_ok=True)
    path = (
        HERE
        / "results"
        / f"{result['started'][:10]}-{socket.gethostname()}-{result['started'][11:].replace(':', '')}.json"
    )
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(regenerate_md().read_text())
    bad = [c for c, v in result["compare"].items() if not all(x["ok"] for x in v)]
    if bad:
        print(f"bench_predict: outputs differ from Predmoter outside near-ties: {', '.join(bad)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
