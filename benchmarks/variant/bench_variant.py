#!/usr/bin/env python3
"""``chromaflow variant-effect`` speed: variants per second with the full-size model, on the CPU or a CUDA device.

There is no peer to run beside it (no Predmoter-type tool scores variants); the figure is chromaflow's own rate.

Input (seeded, made once in ``--workdir``): a random ACGT genome (``--mbp``, 4 records) and a VCF of ``--variants``
variants at random positions (70 % SNVs, 15 % insertions of 1-10 bp, 15 % deletions of 1-10 bp, every 20th record
with a second ALT), bgzipped and indexed. Model: ``make-test-model --preset release-bihybrid --seed 0`` (the released
models' architecture, FORMATS.md §2.9, 1,534,358 parameters, seeded random weights, seq_len 21384: every variant
is 2 windows x 2 strands = 4 model rows of 21384 bp, the reference window shared by the ALTs of one record).

Per run (``--repeats`` runs, each a fresh process): end-to-end wall, CPU seconds and peak RSS (the benchmarks' process
timer), and from the command's metrics the loop's variants/s (FASTA reading and model loading excluded), the batch
size and the model rows. ``--device cuda`` is the GPU case (``--precision fp32,bf16``; the batch size is probed as
predict probes it); ``benchmarks/gpu/run --phases variant`` runs this script on a GPU machine.

Writes ``results/<date>-<host>-<device>.json`` and regenerates ``RESULTS.md`` from every JSON in ``results/``.

usage: python benchmarks/variant/bench_variant.py [--variants 100] [--mbp 10] [--device cpu] [--precision fp32]
                                                  [--repeats 3] [--workdir DIR] [--threads N]
       python benchmarks/variant/bench_variant.py --regenerate
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
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


def env() -> dict:
    return dict(
        os.environ,
        PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
        CHROMAFLOW_PROGRESS="0",
    )


def make_inputs(work: Path, mbp: float, n_variants: int, seed: int) -> dict:
    import numpy as np
    import pysam

    from chromaflow.report.sweep import write_random_fasta

    total = int(mbp * 1e6)
    fa = work / f"genome_{mbp:g}Mbp_seed{seed}.fa"
    if not fa.exists():
        write_random_fasta(fa, total, seed, records=4)
    vcf = work / f"variants_{n_variants}_{mbp:g}Mbp_seed{seed}.vcf.gz"
    if not vcf.exists():
        seqs = {}
        name = None
        for line in fa.read_text().splitlines():
            if line.startswith(">"):
                name = line[1:].split()[0]
                seqs[name] = []
            else:
                seqs[name].append(line)
        seqs = {k: "".join(v) for k, v in seqs.items()}
        rng = np.random.default_rng(seed + 1)
        names = list(seqs)
        recs = set()
        while len(recs) < n_variants:
            c = names[int(rng.integers(len(names)))]
            recs.add((c, int(rng.integers(100, len(seqs[c]) - 100))))
        lines = []
        for i, (c, p) in enumerate(sorted(recs, key=lambda t: (names.index(t[0]), t[1]))):
            s = seqs[c]
            u = rng.random()
            other = lambda b: "ACGT"[("ACGT".index(b) + int(rng.integers(1, 4))) % 4]  # noqa: E731
            if u < 0.70:
                ref, alt = s[p - 1], other(s[p - 1])
            elif u < 0.85:
                ref, alt = s[p - 1], s[p - 1] + "".join("ACGT"[int(k)] for k in rng.integers(0, 4, rng.integers(1, 11)))
            else:
                k = int(rng.integers(1, 11))
                ref, alt = s[p - 1 : p + k], s[p - 1]
            if i % 20 == 19 and len(ref) == 1:
                alt += "," + "".join(b for b in "ACGT" if b != ref and b != alt[0])[:1]
            lines.append(f"{c}\t{p}\tv{i}\t{ref}\t{alt}\t.\t.\t.")
        head = "##fileformat=VCFv4.2\n" + "".join(f"##contig=<ID={c},length={len(s)}>\n" for c, s in seqs.items())
        plain = work / "variants.vcf"
        plain.write_text(head + "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n" + "\n".join(lines) + "\n")
        pysam.tabix_compress(str(plain), str(vcf), force=True)
        pysam.tabix_index(str(vcf), preset="vcf", force=True)
        plain.unlink()
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
    return {"fasta": fa, "vcf": vcf, "ckpt": ckpt}


def regenerate_md() -> Path:
    runs = [json.loads(p.read_text()) for p in sorted((HERE / "results").glob("*.json"))]
    lines = [
        "# chromaflow variant-effect: variants per second",
        "",
        "Generated by `benchmarks/variant/bench_variant.py` from `benchmarks/variant/results/*.json` (do not edit "
        "by hand). Full-size model (`make-test-model --preset release-bihybrid`, random weights, seq_len 21384): "
        "each variant is 4 model rows of 21384 bp (reference and alternative window, both strands). *loop*: "
        "the scoring loop alone (FASTA read and checks, model load and batch size excluded), from the command's "
        "metrics; *end to end*: the whole process. No peer exists to run beside it.",
        "",
    ]
    for r in runs:
        m = r["machine"]
        gpu = ", ".join(g.get("name", "?") for g in m.get("gpus") or []) or "none"
        lines += [
            f"## {r['started']} UTC — {r['device']}, host {m['host']}",
            "",
            f"Command: `{r['command']}`. {r['variants']} VCF records ({r['alleles']} (variant, ALT) rows) on a "
            f"{r['mbp']:g} Mbp random genome; CPU {m['cpu_model']} ({m['usable_cpus']} usable), GPU {gpu}, "
            f"torch {m['torch']}. {r['repeats']} runs per precision.",
            "",
            "| device | precision | threads | runs | variants/s loop, median (min–max) | end to end s, median | "
            "variants/s end to end | CPU s median | peak RSS MiB | batch | model rows | load |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for prec, rs in r["runs"].items():
            vps = [x["metrics"]["variants_per_s"] for x in rs]
            wall = statistics.median([x["wall_s"] for x in rs])
            loads = [x["load_before"] for x in rs if x.get("load_before") is not None]
            lines.append(
                f"| {r['device']} | {prec} | {rs[0]['metrics']['threads']} | {len(rs)} | {statistics.median(vps):.3g} "
                f"({min(vps):.3g}–{max(vps):.3g}) | {wall:.1f} | {rs[0]['metrics']['scored'] / wall:.3g} | "
                f"{statistics.median([x['cpu_s'] for x in rs]):.1f} | "
                f"{max(x['peak_rss_bytes'] for x in rs) / 2**20:,.0f} | "
                f"{rs[0]['metrics']['batch_size']} | {rs[0]['metrics']['model_rows']} | "
                f"{min(loads) if loads else '?'}–{max(loads) if loads else '?'} |"
            )
        lines.append("")
    out = HERE / "RESULTS.md"
    out.write_text("\n".join(lines))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", type=int, default=100)
    ap.add_argument("--mbp", type=float, default=10.0)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--precision", default="fp32", help="comma-separated: fp32,bf16")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--out-dir", type=Path, default=HERE / "results")
    ap.add_argument("--regenerate", action="store_true")
    args = ap.parse_args()
    if args.regenerate:
        print(regenerate_md().read_text())
        return
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("bench_variant: --device cuda but CUDA is not available", file=sys.stderr)
        sys.exit(2)
    work = args.workdir or Path(tempfile.gettempdir()) / f"chromaflow-bench-variant-{socket.gethostname()}"
    work.mkdir(parents=True, exist_ok=True)
    inputs = make_inputs(work, args.mbp, args.variants, args.seed)
    precisions = args.precision.split(",")
    result = {
        "command": " ".join(["python benchmarks/variant/bench_variant.py"] + sys.argv[1:]),
        "machine": {**machine_info(), "torch": torch.__version__},
        "device": args.device,
        "mbp": args.mbp,
        "variants": args.variants,
        "repeats": args.repeats,
        "started": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "runs": {p: [] for p in precisions},
    }
    for rep in range(args.repeats):
        for prec in precisions:
            out, met = work / f"effects_{prec}.tsv.gz", work / f"metrics_{prec}.json"
            cmd = [
                sys.executable,
                "-m",
                "chromaflow",
                "variant-effect",
                "--vcf",
                inputs["vcf"],
                "--fasta",
                inputs["fasta"],
                "--model",
                inputs["ckpt"],
                "--out",
                out,
                "--metrics",
                met,
                "--device",
                args.device,
                "--precision",
                prec,
                "--force",
            ]
            if args.threads:
                cmd += ["--threads", str(args.threads)]
            r = measure(cmd, env=env(), check=True)
            m = json.loads(met.read_text())
            r = {k: r[k] for k in ("wall_s", "cpu_s", "peak_rss_bytes", "load_before", "load_after")}
            r["metrics"] = {
                k: m.get(k)
                for k in (
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
            }
            result["alleles"] = m["variants"]
            result["runs"][prec].append(r)
            print(
                f"[{rep + 1}] {args.device} {prec}: {m['variants_per_s']:.3g} variants/s (loop), "
                f"{r['wall_s']:.1f} s wall end to end, batch {m['batch_size']}",
                flush=True,
            )
    args.out_dir.mkdir(parents=True, exist_ok=True)
    stamp = result["started"].replace(" ", "-").replace(":", "")
    path = args.out_dir / f"{stamp}-{socket.gethostname()}-{args.device}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    if args.out_dir.resolve() == (HERE / "results").resolve():
        print(regenerate_md().read_text())


if __name__ == "__main__":
    main()
