"""Training benchmark: chromaflow train vs the real Predmoter ``-m train`` on the same files and settings.

  python benchmarks/train/bench_train.py [--work /tmp/cf-bench-train] [--train-files 2] [--record-bp 641520]
      [--epochs 2] [--reps 2] [--variants predmoter,ours,ours_procs,ours_ram,ours_bf16] [--model default|small]
      [--memory-files 2,8] [--out benchmarks/train/results.json]

Data (made once under --work, seeded): per training file a random 1-record FASTA (--record-bp; 641,520 bp =
30 chunks of 21,384 per strand), ``chromaflow fasta2h5`` (L = 21384), a BAM of reads per dataset
(benchmarks/coverage/make_inputs.py) and ``chromaflow add-coverage`` for ``atacseq`` (--unstranded --shift) and
``h3k4me3`` (--unstranded): the real path from reads to a training file. One validation file of half the size.

Variants (all: same files, seed 1, same architecture, global batch 120, Adam lr 0.001, --epochs, CPU):
* ``predmoter``: ``peer-predmoter -m train --device cpu -b 120`` (its defaults: 1 device, torch threads = CPUs,
  --num-workers 0, --ram-efficient true);
* ``ours``: ``chromaflow train --devices 1`` (threads = CPUs, streaming data, auto workers);
* ``ours_procs``: ``chromaflow train --devices P --threads 1 --batch-size 120/P`` with P = usable CPUs: DDP over P
  processes on one CPU, BatchNorm synchronised, so every global batch and the arithmetic equal the 1-process run;
* ``ours_ram``: ``ours`` with ``--data-mode ram``;
* ``ours_bf16``: ``ours`` with ``--precision bf16-mixed`` (opt-in; its loss curve is compared, not expected equal).

Per run: seconds per epoch (Predmoter: its log's "Training started"/"Training ended" times / epochs; ours: the
metrics JSON's epoch_s, which also includes validation), process wall, CPU seconds (user+sys of the whole process
tree: wait4, or the sampled descendants where larger, e.g. DDP ranks), peak RSS (the largest single process, or the
sampled sum over the tree where larger), and the per-epoch losses (for "same loss curve"). Variants are
alternated (rep 1: A B C, rep 2: B C A, ...) so load changes hit all of them; ratios are of medians. Memory: ``ours``
(stream) for 1 epoch with the training folder holding --memory-files copies (symlinks) of the files, to show peak RSS
does not grow with the number of files.

Results: --out (JSON) and RESULTS.md beside it, both written by this script. On a shared machine compare CPU seconds
and the alternated medians; re-run on a quiet machine for wall-clock claims.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))  # harness.timer: the benchmarks' process timer
sys.path.insert(0, str(ROOT / "src"))  # chromaflow.report.machine: the machine record
PEER = ROOT.parent / "shared" / "peers" / "bin" / "peer-predmoter"
L_CHUNK = 21384
ARCH = {
    "default": [],  # Predmoter's CLI defaults: bi-hybrid, 1 cnn layer, 64 filters, 1 BiLSTM of 128, bnorm
    "small": ["--cnn-layers", "1", "--filter-size", "16", "--hidden-size", "16"],
}


def cpus() -> int:
    return len(os.sched_getaffinity(0))


def sh(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def make_data(work: Path, train_files: int, record_bp: int, seed: int = 1) -> Path:
    sys.path.insert(0, str(ROOT / "benchmarks" / "coverage"))
    from make_inputs import write_bam, write_fasta

    data = work / "data"
    stamp = data / f".done-{train_files}-{record_bp}"
    if stamp.exists():
        return data
    shutil.rmtree(data, ignore_errors=True)
    for sub in ("train", "val", "src"):
        (data / sub).mkdir(parents=True)
    jobs = [("train", f"train_{i}", record_bp, seed + i) for i in range(train_files)]
    jobs.append(("val", "val_0", record_bp // 2 - (record_bp // 2) % 2, seed + 100))
    for split, name, bp, s in jobs:
        src = data / "src"
        fa = src / f"{name}.fa"
        sizes = write_fasta(str(fa), 1, bp, s)
        h5 = data / split / f"{name}.h5"
        sh([sys.executable, "-m", "chromaflow", "fasta2h5", "--fasta", fa, "--species", "sp", "--out", h5, "--force"])
        for k, (prefix, reads, extra) in enumerate((("atacseq", bp // 8, ["--shift"]), ("h3k4me3", bp // 25, []))):
            bam = src / f"{name}_{prefix}.bam"
            write_bam(str(bam), sizes, reads, 100, 0.0 if prefix == "atacseq" else 0.2, 500, s * 10 + k)
            sh([sys.executable, "-m", "chromaflow", "add-coverage", "--h5", h5, "--prefix", prefix, "--bam", bam,
                "--unstranded", *extra])
    stamp.write_text("ok\n")
    return data


def timed(cmd, log: Path, env=None) -> dict:
    """Run cmd (the benchmarks' process timer, the tree sampled); wall, CPU seconds of the whole process tree and
    peak RSS.

    CPU: the larger of wait4's rusage (the process and the descendants it waited for) and the sampled CPU
    seconds of every descendant (DDP ranks are not waited for, so rusage alone misses them). Peak RSS: the
    larger of wait4's ru_maxrss (this run only: the largest single process) and the sampled summed RSS of the
    tree (RUSAGE_CHILDREN's ru_maxrss is a maximum over every earlier run too, so it is not used)."""
    from harness.timer import measure

    with open(log, "w") as fh:
        r = measure(cmd, env=env, stdin=None, stdout=fh, stderr=subprocess.STDOUT, sample_tree=True)
    if r["exit"] != 0:
        raise SystemExit(f"{cmd[0]} failed (rc {r['exit']}); see {log}")
    return {k: r[k] for k in ("wall_s", "cpu_s", "peak_rss_bytes", "processes")}


def run_predmoter(data: Path, out: Path, epochs: int, arch: list[str], *, device: str = "cpu",
                  peer: list | None = None) -> dict:
    """Predmoter ``-m train`` (``peer``: the launcher, default the peers kit's; ``device``: its --device, cpu|gpu)."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    r = timed([*(peer or [PEER]), "-m", "train", "-i", data, "-o", out, "--seed", "1", "--device", device,
               "-e", str(epochs), "-b", "120", *arch], out / "stdout.log")
    log = (out / "predmoter.log").read_text()
    stamp = r"(\d\d\.\d\d\.\d{4} \d\d:\d\d:\d\d), INFO: Training "
    t_start = dt.datetime.strptime(re.search(stamp + "started", log).group(1), "%d.%m.%Y %H:%M:%S")
    t_end = dt.datetime.strptime(re.search(stamp + "ended", log).group(1), "%d.%m.%Y %H:%M:%S")
    lines = (out / "metrics.log").read_text().split("\n")
    cols = lines[0].split()
    curve = [dict(zip(cols, map(float, ln.split()))) for ln in lines[1:] if ln.strip()]
    r.update(epoch_s=(t_end - t_start).total_seconds() / max(len(curve), 1), curve=curve, epochs=len(curve))
    return r


def run_ours(data: Path, out: Path, epochs: int, arch: list[str], extra: list[str], *, device: str = "cpu") -> dict:
    """``chromaflow train`` (``device``: cpu|cuda) with ``extra`` options; the metrics JSON's epochs and curve."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    metrics = out / "metrics.json"
    r = timed([sys.executable, "-m", "chromaflow", "train", "--input-dir", data, "--out", out / "run", "--seed", "1",
               "--epochs", str(epochs), "--device", device, *arch, *extra, "--metrics", metrics, "--force"],
              out / "stdout.log", env=dict(os.environ, CHROMAFLOW_PROGRESS="0"))
    m = json.loads(metrics.read_text())
    ep = m["epochs"]
    r.update(epoch_s=statistics.fmean(e["epoch_s"] for e in ep), epochs=len(ep),
             samples_per_s=m["train_samples_per_s"], bp_per_s=m["train_bp_per_s"],
             data_wait_fraction=m["data_wait_fraction"],
             curve=[{k: e.get(k) for k in ("epoch", "avg_train_loss", "avg_train_accuracy", "avg_val_loss",
                                           "avg_val_accuracy", "epoch_s", "data_wait_fraction", "train_start_unix",
                                           "train_end_unix")} for e in ep])
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/cf-bench-train")
    ap.add_argument("--train-files", type=int, default=2)
    ap.add_argument("--record-bp", type=int, default=30 * L_CHUNK)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--variants", default="predmoter,ours,ours_procs,ours_ram")
    ap.add_argument("--model", choices=tuple(ARCH), default="default")
    ap.add_argument("--memory-files", default="2,8", help="training-folder sizes for the streaming memory check ('' = skip)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "train" / "results.json"))
    a = ap.parse_args(argv)
    arch = ARCH[a.model]
    p = cpus()
    variants = a.variants.split(",")
    extra = {
        "ours": [],
        "ours_procs": ["--devices", str(p), "--threads", "1", "--batch-size", str(120 // p)],
        "ours_ram": ["--data-mode", "ram"],
        "ours_bf16": ["--precision", "bf16-mixed"],   # opt-in: bf16 autocast (a CPU with avx512_bf16/AMX gains most)
    }
    bad = [v for v in variants if v != "predmoter" and v not in extra]
    if bad:
        ap.error(f"unknown variant(s) {bad}; choose from predmoter, {', '.join(extra)}")
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    data = make_data(work, a.train_files, a.record_bp)
    runs: dict[str, list] = {v: [] for v in variants}
    for rep in range(a.reps):
        order = variants[rep % len(variants):] + variants[:rep % len(variants)]
        for v in order:
            out = work / "runs" / f"{v}_{rep}"
            print(f"rep {rep + 1}/{a.reps}: {v} ...", flush=True)
            if v == "predmoter":
                r = run_predmoter(data, out, a.epochs, arch)
            else:
                r = run_ours(data, out, a.epochs, arch, ["--batch-size", "120"] + extra[v]
                             if "--batch-size" not in extra[v] else extra[v])
            r["load_avg"] = os.getloadavg()[0]
            runs[v].append(r)
            print(f"  epoch {r['epoch_s']:.1f} s, wall {r['wall_s']:.1f} s, cpu {r['cpu_s']:.1f} s, "
                  f"rss {r['peak_rss_bytes'] / 2**30:.2f} GiB, load {r['load_avg']:.1f}", flush=True)
    memory = []
    for n in [int(x) for x in a.memory_files.split(",") if x.strip()]:
        mdir = work / f"mem_{n}"
        shutil.rmtree(mdir, ignore_errors=True)
        (mdir / "train").mkdir(parents=True)
        (mdir / "val").symlink_to(data / "val")
        files = sorted((data / "train").glob("*.h5"))
        for i in range(n):
            (mdir / "train" / f"copy{i}.h5").symlink_to(files[i % len(files)])
        r = run_ours(mdir, work / "runs" / f"mem_{n}", 1, ARCH["small"], ["--batch-size", "120"])
        memory.append({"train_files": n, "peak_rss_bytes": r["peak_rss_bytes"], "train_chunks": None})
        print(f"memory: {n} training files -> peak RSS {r['peak_rss_bytes'] / 2**20:.0f} MiB", flush=True)

    def med(v, k):
        xs = [r[k] for r in runs[v] if r.get(k) is not None]
        return statistics.median(xs) if xs else None

    summary = {v: {k: med(v, k) for k in ("epoch_s", "wall_s", "cpu_s", "peak_rss_bytes", "samples_per_s",
                                          "data_wait_fraction")} for v in variants}
    for v in variants:
        xs = [r["epoch_s"] for r in runs[v]]
        summary[v]["epoch_s_range"] = [min(xs), max(xs)]
    ratios = {}
    if "predmoter" in runs:
        for v in variants:
            if v != "predmoter":
                ratios[v] = {"epoch": summary["predmoter"]["epoch_s"] / summary[v]["epoch_s"],
                             "cpu": summary["predmoter"]["cpu_s"] / summary[v]["cpu_s"]}
    chunks = {s: _chunks(data / s) for s in ("train", "val")}
    from chromaflow.report.machine import machine_info
    mi = machine_info()
    res = {"machine": {"cpus": p, "host": mi["host"], "cpu_model": mi.get("cpu_model"),
                       "cpu_flags": mi.get("cpu_flags")}, "model": a.model, "arch_args": arch,
           "epochs": a.epochs, "reps": a.reps, "chunks": chunks, "summary": summary, "ratios_vs_predmoter": ratios,
           "memory_stream": memory, "runs": runs,
           "command": " ".join(["python", "benchmarks/train/bench_train.py"] + (argv or sys.argv[1:]))}
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    (Path(a.out).parent / "RESULTS.md").write_text(report(res))
    print(report(res))
    return 0


def _chunks(folder: Path) -> int:
    import h5py
    n = 0
    for f in folder.glob("*.h5"):
        with h5py.File(f, "r") as fh:
            n += fh["data/X"].shape[0]
    return n


def report(res: dict) -> str:
    s = res["summary"]
    lines = ["# Training benchmark: chromaflow train vs Predmoter -m train (CPU)", "",
             f"Generated by `{res['command']}`. Do not edit by hand.", "",
             f"Machine: {res['machine'].get('cpu_model') or '?'} "
             f"({', '.join(res['machine'].get('cpu_flags') or []) or 'flags not recorded'}), "
             f"{res['machine']['cpus']} usable CPUs ({res['machine']['host']}). Model: {res['model']} "
             f"({' '.join(res['arch_args']) or 'Predmoter defaults'}); {res['chunks']['train']} training and "
             f"{res['chunks']['val']} validation chunks of 21,384 bp; global batch 120; seed 1; {res['epochs']} epochs; "
             f"{res['reps']} alternated repetitions per variant. Medians (range).", "",
             "| variant | s / epoch | process wall s | CPU s | peak RSS GiB | train samples/s | data wait % |",
             "|---|---|---|---|---|---|---|"]
    for v, m in s.items():
        lo, hi = m["epoch_s_range"]
        sps = f"{m['samples_per_s']:.2f}" if m.get("samples_per_s") else "–"
        dw = f"{100 * m['data_wait_fraction']:.1f}" if m.get("data_wait_fraction") is not None else "–"
        lines.append(f"| {v} | {m['epoch_s']:.1f} ({lo:.1f}–{hi:.1f}) | {m['wall_s']:.1f} | {m['cpu_s']:.1f} | "
                     f"{m['peak_rss_bytes'] / 2**30:.2f} | {sps} | {dw} |")
    if res["ratios_vs_predmoter"]:
        lines += ["", "Ratios (Predmoter / ours, medians): " + "; ".join(
            f"{v}: {r['epoch']:.2f}x per epoch, {r['cpu']:.2f}x CPU s" for v, r in res["ratios_vs_predmoter"].items())]
    lines += ["", "Per-epoch curves (first repetition; avg_train_loss / avg_val_loss / avg_val_accuracy):", ""]
    for v, rs in res["runs"].items():
        c = rs[0]["curve"]
        lines.append(f"* {v}: " + "; ".join(
            f"e{int(e.get('epoch', i))} {e['avg_train_loss']:.4f} / {e['avg_val_loss']:.4f} / "
            f"{e['avg_val_accuracy']:.5f}" for i, e in enumerate(c)))
    if res["memory_stream"]:
        lines += ["", "Streaming mode, peak RSS vs number of training files (1 epoch, small model): " + ", ".join(
            f"{m['train_files']} files: {m['peak_rss_bytes'] / 2**20:.0f} MiB" for m in res["memory_stream"])]
    lines += ["", f"Load average at each run: " + "; ".join(
        f"{v}: " + ", ".join(f"{r['load_avg']:.1f}" for r in rs) for v, rs in res["runs"].items()), ""]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
