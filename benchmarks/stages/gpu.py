"""GPU: chromaflow's prediction end to end, Predmoter side by side on the same GPU, training and variant effects
(opt-in: ``benchmarks/gpu/run``, the launcher of ``benchmarks/run --stages gpu``; ``benchmarks/harness/gpu.py``).

Cases (``--cases`` picks them by name):

* ``predict_<mbp>Mbp``: a synthetic assembly predicted straight from FASTA with ``make-test-model --preset
  release-bihybrid`` (FORMATS.md §2.9, seeded random weights), each precision twice: *first* (empty batch-size
  cache: the probe runs, as on a fresh node) and *cached* (the size the first run probed). Per run the process's
  wall and CPU, the metrics of ``--metrics`` (loop bp/s, ``phases_s``, NVML from inside, CUDA-event time line, host
  waits) and NVML utilisation from outside. fp32 is checked against the CPU path on evenly spaced rows (identical
  except ±1 at documented near-ties), bf16 against fp32 on every value.
* ``forward_<batch>`` (``gpu_forward``, off by default): the model alone, eager / cudnn.benchmark / torch.compile.
* ``peer_<mbp>Mbp``: Predmoter ``-m predict`` and ``chromaflow predict`` on the same genome h5 (made by
  ``chromaflow fasta2h5``, timed), same batch size (ours, probed), alternated: Predmoter fp32, ours fp32, ours fp32
  ``--deflate zlib:9`` (Predmoter's own chunk bytes, compared), ours bf16; values compared over every row.
* ``train_<chunks>chunks_<epochs>epochs``: Predmoter ``-m train`` and ``chromaflow train`` (fp32 streaming,
  bf16-mixed, in RAM) on the same synthetic learnable files (``chromaflow.train.synthetic``), Predmoter's model,
  batch 120, seed 1: s/epoch, data wait, loss per epoch, NVML utilisation while training.
* ``variant/<device>_...``: ``chromaflow variant-effect`` variants/s on the device, per precision: the variant
  stage's case (:func:`variant_cases`).

Without CUDA the stage runs only with ``--quick`` (toy sizes, tiny model, on the CPU: a check before device time
is spent). The render section (:func:`results_page`) makes ``benchmarks/gpu/RESULTS.md`` from every results file in
``benchmarks/gpu/results/``; files of the former ``benchmarks/gpu/run`` are read through :func:`from_legacy`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..harness.core import SCHEMA, Case, Contender, json_files
from ..harness.env import child_env, module
from ..harness.gpu import RESULTS, GpuWindows, cuda_available, device_record
from ..harness.stagekit import Ctx, L, count_chunks, ours, run_checked
from ..harness.timer import measure
from ..harness.training import ARCH, ours_run, predmoter_run

#: Predmoter's launcher is checked per case (the predict case runs without it)
PEERS: list[str] = []
#: sizes of the full run (on one GPU; keys carry the stage's name, as Ctx.cfg merges every stage's)
FULL = {
    "gpu_mbp": 200.0,  # the predict case's assembly (both strands: 400 Mbp of rows)
    "gpu_records": 8,
    "gpu_seed": 0,
    "gpu_precisions": "fp32,bf16",
    "gpu_check_rows": 16,  # rows of the fp32 output checked on the CPU
    "gpu_deflate": "auto",  # predict's --deflate (auto: zlib level 1 on CUDA)
    "gpu_model_preset": "release-bihybrid",
    "gpu_forward": False,  # the forward-only eager / cudnn.benchmark / torch.compile case
    "gpu_peer_mbp": 25.0,
    "gpu_peer_reps": 1,
    "gpu_peer_batch": None,  # both tools' batch size (default: ours, probed by the predict case; else 256)
    "gpu_train_chunks": 1200,  # training rows (both strands) over the files
    "gpu_train_files": 2,
    "gpu_train_length": L,
    "gpu_train_model": "default",  # harness/training.py ARCH name (default: Predmoter's)
    "gpu_epochs": 2,
    "gpu_variant_reps": 2,  # runs per precision of the variant stage's case on this device (its sizes: variant_devices)
}
#: sizes of the --quick run (the CPU dry run: minutes on a small machine)
QUICK = {
    **FULL,
    "gpu_mbp": 0.2,
    "gpu_records": 2,
    "gpu_check_rows": 4,
    "gpu_model_preset": "tiny",
    "gpu_peer_mbp": 0.1,
    "gpu_train_chunks": 8,
    "gpu_train_files": 1,
    "gpu_train_model": "small",
    "gpu_epochs": 1,
    "gpu_variant_reps": 1,
}
SPECIES = "Synthetica"
NO_CUDA = "no CUDA device here (torch.cuda.is_available() is False): the gpu stage's full run needs an NVIDIA GPU"


def override(settings: list[str]) -> None:
    """``KEY=VALUE`` settings (``benchmarks/gpu/run --set``) into FULL and QUICK; KEY with or without ``gpu_``,
    VALUE as JSON where it parses (numbers, true, null), else the text."""
    for item in settings:
        key, sep, text = item.partition("=")
        key = key if key.startswith("gpu_") else f"gpu_{key}"
        if not sep or key not in FULL:
            raise SystemExit(f"benchmarks/gpu/run: --set {item}: expected KEY=VALUE with KEY one of {', '.join(FULL)}")
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        FULL[key] = QUICK[key] = value


@dataclass
class _Run:
    """What the stage's cases share in one run: the device, the model, the NVML windows, and the batch size per
    precision that the predict case found (the peer and forward cases run at ours)."""

    ctx: Ctx
    cfg: dict
    cuda: bool
    record: dict
    windows: GpuWindows
    batch: dict = field(default_factory=dict)

    @property
    def device(self) -> str:
        return "cuda" if self.cuda else "cpu"

    @property
    def inputs(self) -> Path:
        return self.ctx.inputs().resolve()

    @property
    def ckpt(self) -> Path:
        return self.inputs / f"gpu_model_{self.cfg['gpu_model_preset']}_seed{self.cfg['gpu_seed']}.ckpt"

    def make_model(self) -> None:
        if not self.ckpt.exists():
            argv = ours("make-test-model", "--out", self.ckpt, "--preset", self.cfg["gpu_model_preset"])
            run_checked([*argv, "--seed", self.cfg["gpu_seed"], "--force"], "make-test-model")

    def peer_missing(self) -> str | None:
        exe = Path(self.ctx.peer("peer-predmoter"))
        return None if exe.exists() else f"peer unavailable: {exe} not found"


def build(ctx: Ctx) -> tuple[list, list[Case]]:
    """The stage's cases (no warm-up: each case's first run is what a fresh node sees)."""
    cuda = bool(cuda_available())
    if not cuda and not ctx.quick:
        raise RuntimeError(NO_CUDA + " (--quick runs it on the CPU at toy sizes)")
    st = _Run(ctx, ctx.cfg, cuda, device_record(), GpuWindows(cuda))
    cases = [predict_case(st), peer_case(st), train_case(st), *variant_cases(st)]
    if st.cfg["gpu_forward"]:
        cases.insert(1, forward_case(st))
    return [], cases


def gpu_tool(*args) -> dict:
    """One of ``benchmarks.harness.gpu``'s checks in a child process: its JSON, or a failed check saying why."""
    p = subprocess.run([*module("gpu"), *map(str, args)], capture_output=True, text=True, env=child_env())
    if p.returncode != 0:
        return {"ok": False, "detail": "check crashed: " + (p.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------------
# predict: each precision first (batch probe) and cached, from FASTA
# --------------------------------------------------------------------------------------------------
#: the metrics of ``chromaflow predict --metrics`` kept with each run
METRICS = (
    "batch_size",
    "batch_probe",
    "batch_size_final",
    "peak_gpu_bytes",
    "gpu",
    "data_wait_fraction",
    "gpu_timing",
    "host_wait_fraction",
    "transfer_dtypes",
    "h2d_bytes",
    "d2h_bytes",
    "precision_check",
    "deflate",
    "write_wait_s",
    "loop_s",
    "notes",
    "phases_s",
    "drain_s",
    "batch_probe_source",
)


def predict_fields(m: dict, key: str) -> dict:
    """A predict run's record from its metrics JSON ``m`` (the process's wall and CPU are the harness's);
    ``key`` ``<precision>_<first|cached>`` names the run."""
    return {
        "precision": m["precision"],
        "run": key.partition("_")[2] or None,
        "stage_wall_s": m["wall_s"],
        "stage_peak_rss_bytes": m.get("peak_rss_bytes"),
        "bp": m["bp"],
        "bp_per_s_loop": m["bp"] / m["loop_s"],
        "gpu_devices": (m.get("gpu") or {}).get("devices"),
        **{k: m.get(k) for k in METRICS},
    }


def _predict_argv(st: _Run, src: list, d: Path, prec: str, *extra) -> list[str]:
    return ours(
        "predict",
        *src,
        "--model",
        st.ckpt,
        "--out",
        d / "out.h5",
        "--force",
        "--device",
        st.device,
        "--precision",
        prec,
        "--metrics",
        d / "metrics.json",
        *extra,
    )


def predict_case(st: _Run) -> Case:
    cfg = st.cfg
    mbp, records, seed = cfg["gpu_mbp"], cfg["gpu_records"], cfg["gpu_seed"]
    fasta = st.inputs / f"gpu_{mbp:g}Mbp_{records}rec_seed{seed}.fa"
    cache = st.ctx.work.resolve() / "gpu-batch-cache"
    src = ["--fasta", fasta, "--species", SPECIES]

    def setup(kind: str):
        def f(d: Path, r: int) -> None:
            if kind == "first":  # an empty cache: the probe runs, as on a fresh node
                shutil.rmtree(cache, ignore_errors=True)
            st.windows.open(d)

        return f

    mine = [
        Contender(
            f"{prec}_{kind}",
            f"chromaflow predict --fasta --precision {prec} ({kind})",
            "ours",
            lambda d, r, prec=prec: _predict_argv(st, src, d, prec, "--deflate", cfg["gpu_deflate"]),
            repeats=1,
            env={"CHROMAFLOW_CACHE": str(cache)},
            setup=setup(kind),
            retries=0,
        )
        for prec in cfg["gpu_precisions"].split(",")
        for kind in ("first", "cached")
    ]

    def prepare() -> None:
        from chromaflow.report.sweep import write_random_fasta

        st.make_model()
        if not fasta.exists():
            write_random_fasta(fasta, int(mbp * 1e6), seed, records=records)

    def per_run(key: str, d: Path) -> dict:
        rec = predict_fields(json.loads((d / "metrics.json").read_text()), key)
        st.batch.setdefault(rec["precision"], rec["batch_size"])
        return {**rec, "gpu_util_outside": st.windows.busy(d)}

    params = {"mbp": mbp, "records": records, "seed": seed, "deflate": cfg["gpu_deflate"]}
    params.update(model_preset=cfg["gpu_model_preset"], check_rows=cfg["gpu_check_rows"], device=st.record)
    return Case(
        "gpu",
        f"predict_{mbp:g}Mbp",
        params,
        mine,
        [],
        lambda dirs: predict_checks(st, fasta, dirs),
        per_run=per_run,
        prepare=prepare,
        note="wall and CPU of the whole chromaflow predict process; first: empty batch-size cache (the probe runs), "
        "cached: the size the first run probed",
    )


def predict_checks(st: _Run, fasta: Path, dirs: dict[str, Path]) -> dict:
    """fp32 (first run) vs the CPU path on evenly spaced rows; bf16 vs fp32 on every value."""
    out: dict = {"ok": None}
    fp32, bf16 = dirs.get("fp32_first"), dirs.get("bf16_first")
    if fp32:
        c = gpu_tool("check-cpu", fasta, st.ckpt, fp32 / "out.h5", "--rows", st.cfg["gpu_check_rows"])
        out.update(ok=c.get("ok"), fp32_vs_cpu=c)
    if fp32 and bf16:
        out["bf16_vs_fp32"] = gpu_tool("deviation", bf16 / "out.h5", fp32 / "out.h5")
    out["detail"] = "; ".join(f"{k}: {_check_text(v)}" for k, v in out.items() if isinstance(v, dict))
    return out


def _check_text(c: dict) -> str:
    if "differ" not in c:
        return c.get("detail", "?")
    return f"{c['differ']} of {c['values']} values differ" + (
        f" ({c.get('unexpected_count', 0)} outside near-ties)" if "unexpected_count" in c else ""
    )


def forward_case(st: _Run) -> Case:
    """The model alone on the device (eager, cudnn.benchmark, torch.compile), at the fp32 batch the predict case
    probed (at most 256; on the CPU of a quick run, the batch of its toy prediction)."""

    def argv(d: Path, r: int) -> list[str]:
        batch = min(st.batch.get("fp32") or next(iter(st.batch.values()), 256), 256)
        tail = ["--batch", batch, "--out", d / "forward.json", "--device", st.device]
        return [*module("gpu"), "forward", *map(str, [st.ckpt, *tail])]

    c = Contender(
        "forward",
        "model forward only: eager / cudnn.benchmark / torch.compile, fp32 and bf16",
        "ours",
        argv,
        repeats=1,
        retries=0,
    )
    return Case(
        "gpu",
        "forward",
        {"device": st.record},
        [c],
        [],
        per_run=lambda key, d: {"model_variants": json.loads((d / "forward.json").read_text())},
        prepare=st.make_model,
        note="warm-up 2 forwards, then the mean of 3",
    )


# --------------------------------------------------------------------------------------------------
# peer: Predmoter -m predict and ours on the same genome h5 and batch size
# --------------------------------------------------------------------------------------------------
#: contender key -> (tool, precision, our --deflate or None for the run's)
PEER_TOOLS = {
    "predmoter fp32": ("predmoter", "fp32", None),
    "chromaflow fp32": ("chromaflow", "fp32", None),
    "chromaflow zlib:9 fp32": ("chromaflow zlib:9", "fp32", "zlib:9"),
    "chromaflow bf16": ("chromaflow", "bf16", None),
}


def peer_case(st: _Run) -> Case:
    cfg = st.cfg
    mbp, seed = cfg["gpu_peer_mbp"], cfg["gpu_seed"] + 1
    fasta = st.inputs / f"gpu_peer_{mbp:g}Mbp_seed{seed}.fa"
    h5 = fasta.with_suffix(".h5")
    params: dict = {"mbp": mbp, "batch_size": None, "reps": cfg["gpu_peer_reps"], "device": st.record}

    def batch() -> int:
        return cfg["gpu_peer_batch"] or st.batch.get("fp32") or 256

    def setup(d: Path, r: int) -> None:
        params["batch_size"] = batch()
        st.windows.open(d)

    def argv(key: str):
        tool, prec, deflate = PEER_TOOLS[key]
        if tool == "predmoter":
            dev = "gpu" if st.cuda else "cpu"
            pm = [st.ctx.peer("peer-predmoter"), "-m", "predict", "-f", h5, "-o"]
            return lambda d, r: [*map(str, pm), str(d), "--model", str(st.ckpt), "--device", dev, "-b", str(batch())]
        deflate = deflate or cfg["gpu_deflate"]
        return lambda d, r: _predict_argv(st, ["--h5", h5], d, prec, "--batch-size", str(batch()), "--deflate", deflate)

    tools = [
        Contender(k, f"{t[0]} predict {t[1]}", "peer" if t[0] == "predmoter" else "ours", argv(k), setup=setup)
        for k, t in PEER_TOOLS.items()
    ]
    for c in tools:
        c.repeats, c.retries = cfg["gpu_peer_reps"], 0

    def prepare() -> None:
        from chromaflow.report.sweep import write_random_fasta

        st.make_model()
        if not fasta.exists():
            write_random_fasta(fasta, int(mbp * 1e6), seed, records=4)
        conv = ours("fasta2h5", "--fasta", fasta, "--species", SPECIES, "--out", h5, "--force")
        params["fasta2h5_wall_s"] = measure(conv, env=child_env({"CHROMAFLOW_PROGRESS": "0"}), check=True)["wall_s"]
        params["bp_rows"] = _rows_bp(h5)

    def per_run(key: str, d: Path) -> dict:
        tool, prec, _ = PEER_TOOLS[key]
        mine = {} if tool == "predmoter" else predict_fields(json.loads((d / "metrics.json").read_text()), key)
        return {**mine, "tool": tool, "precision": prec, "gpu_util_outside": st.windows.busy(d)}

    return Case(
        "gpu",
        f"peer_{mbp:g}Mbp",
        params,
        tools,
        [(k, "predmoter fp32") for k in PEER_TOOLS if k != "predmoter fp32"],
        peer_checks,
        per_run=per_run,
        prepare=prepare,
        skip=st.peer_missing(),
        note="wall of the whole process; the same genome h5 and batch size for both tools",
    )


def _rows_bp(h5: Path) -> int:
    import h5py

    with h5py.File(h5) as f:
        return int(f["data/X"].shape[0]) * int(f["data/X"].shape[1])


def peer_checks(dirs: dict[str, Path]) -> dict:
    """Ours fp32 and bf16 values vs Predmoter's (every value), ours zlib:9 chunk bytes vs Predmoter's; not judged
    (``ok`` None), unless a comparison could not be made (False)."""
    found = sorted(dirs["predmoter fp32"].glob("*_predictions.h5"))  # Predmoter names it after the input's stem
    if not found:
        return {"ok": False, "detail": f"Predmoter wrote no *_predictions.h5 in {dirs['predmoter fp32']}"}
    pm = found[0]
    out: dict = {
        "ok": None,
        "fp32_values_vs_predmoter": gpu_tool("deviation", dirs["chromaflow fp32"] / "out.h5", pm),
        "zlib9_chunk_bytes_vs_predmoter": gpu_tool("chunk-bytes", dirs["chromaflow zlib:9 fp32"] / "out.h5", pm),
        "bf16_values_vs_predmoter": gpu_tool("deviation", dirs["chromaflow bf16"] / "out.h5", pm),
    }
    if any(c.get("ok") is False for c in out.values() if isinstance(c, dict)):
        out["ok"] = False
    z = out["zlib9_chunk_bytes_vs_predmoter"]
    out["detail"] = (
        f"fp32 vs Predmoter: {_check_text(out['fp32_values_vs_predmoter'])}; zlib:9 chunks identical: "
        f"{z.get('identical')} of {z.get('chunks')}; bf16 vs Predmoter: {_check_text(out['bf16_values_vs_predmoter'])}"
    )
    return out


# --------------------------------------------------------------------------------------------------
# train: Predmoter -m train and chromaflow train on the same synthetic files
# --------------------------------------------------------------------------------------------------
#: our training variants beside Predmoter: key -> options after --batch-size 120
TRAIN_VARIANTS = {"ours": [], "ours_bf16": ["--precision", "bf16-mixed"], "ours_ram": ["--data-mode", "ram"]}


def make_train_data(data: Path, chunks: int, files: int, length: int, seed: int) -> None:
    """Seeded learnable training files (``chromaflow.train.synthetic``): ``chunks`` rows over ``files`` training
    files, a quarter of a file's rows for validation (made once: ``.done`` marks a finished folder)."""
    from chromaflow.train.synthetic import make_file

    if (data / ".done").exists():
        return
    shutil.rmtree(data, ignore_errors=True)
    for sub in ("train", "val"):
        (data / sub).mkdir(parents=True)
    per_file = max(1, chunks // 2 // files)  # chunks per strand and file
    kw = {"length": length, "datasets": {"atacseq": 2, "h3k4me3": 1}}
    for i in range(files):
        make_file(str(data / "train" / f"t{i}.h5"), records={"c1": per_file * length}, seed=seed + i, **kw)
    make_file(str(data / "val" / "v0.h5"), records={"c1": max(1, per_file // 4) * length}, seed=seed + 100, **kw)
    (data / ".done").write_text("ok\n")


def train_case(st: _Run) -> Case:
    cfg = st.cfg
    chunks, files, length, epochs = (cfg[f"gpu_{k}"] for k in ("train_chunks", "train_files", "train_length", "epochs"))
    arch, seed = ARCH[cfg["gpu_train_model"]], cfg["gpu_seed"]
    data = st.inputs / f"gpu_train_{chunks}chunks_{files}files_L{length}_seed{seed}"
    peer = Contender(
        "predmoter",
        f"Predmoter -m train -b 120 ({epochs} epochs)",
        "peer",
        lambda d, r: _train_peer_argv(st, data, d, epochs, arch),
    )
    mine = [
        Contender(
            v,
            f"chromaflow train {' '.join(extra) or '(streaming, fp32)'}",
            "ours",
            lambda d, r, extra=extra: _train_ours_argv(st, data, d, epochs, [*arch, "--batch-size", "120", *extra]),
        )
        for v, extra in TRAIN_VARIANTS.items()
    ]
    for c in (peer, *mine):
        c.repeats, c.retries, c.setup = 1, 0, st.windows.open

    def prepare() -> None:
        make_train_data(data, chunks, files, length, seed)
        params["chunks"] = {s: count_chunks(data / s) for s in ("train", "val")}

    def per_run(key: str, d: Path) -> dict:
        r = predmoter_run(d) if key == "predmoter" else ours_run(d / "metrics.json")
        st.windows.epochs(d, r["curve"])
        return {**r, "gpu_util_outside": st.windows.busy(d)}

    params = {"chunks": None, "length": length, "model": cfg["gpu_train_model"], "arch_args": arch}
    params.update(batch_size=120, epochs=epochs, device=st.record)
    return Case(
        "gpu",
        f"train_{chunks}chunks_{epochs}epochs",
        params,
        [peer, *mine],
        [(c.key, "predmoter") for c in mine],
        per_run=per_run,
        prepare=prepare,
        skip=st.peer_missing(),
        note="s / epoch from each tool's own record (Predmoter: its log's start/end stamps, whole seconds; ours: the "
        "metrics JSON, each epoch with its validation); NVML utilisation inside each of our epochs' training part",
    )


def _train_peer_argv(st: _Run, data: Path, d: Path, epochs: int, arch: list[str]) -> list[str]:
    """Predmoter ``-m train`` (its defaults: streaming h5, no workers) into the run's folder."""
    dev = "gpu" if st.cuda else "cpu"
    argv = [st.ctx.peer("peer-predmoter"), "-m", "train", "-i", data, "-o", d, "--seed", "1", "--device", dev]
    return [*map(str, argv), "-e", str(epochs), "-b", "120", *arch]


def _train_ours_argv(st: _Run, data: Path, d: Path, epochs: int, options: list[str]) -> list[str]:
    """``chromaflow train`` with ``options`` (architecture, batch size, the variant's), its metrics JSON in the
    run's folder."""
    argv = ours("train", "--input-dir", data, "--out", d / "run", "--seed", 1, "--epochs", epochs)
    return [*argv, "--device", st.device, *options, "--metrics", str(d / "metrics.json")]


# --------------------------------------------------------------------------------------------------
# variant effects on the device: the variant stage's case
# --------------------------------------------------------------------------------------------------
def variant_cases(st: _Run) -> list[Case]:
    """``chromaflow variant-effect`` variants/s on this run's device, per precision: the variant stage's case for the
    device (``benchmarks/stages/variant.py``: its sizes, inputs, contenders and check), ``gpu_variant_reps`` runs
    per precision. Its record keeps the variant stage's name (``variant/<device>_...``), so the variant page reads
    it like one of ``benchmarks/run --stages variant``."""
    from . import variant

    _, cases = variant.build(st.ctx)
    mine = [c for c in cases if c.params["device"] == st.device]
    for c in (x for case in mine for x in case.contenders):
        c.repeats, c.retries = st.cfg["gpu_variant_reps"], 0
    return mine


# --------------------------------------------------------------------------------------------------
# results files: this stage's (the harness's) and the former benchmarks/gpu/run's
# --------------------------------------------------------------------------------------------------
#: the machine keys of the former gpu/run's record that describe the device
DEVICE_KEYS = ("gpu", "gpu_memory_bytes", "gpu_capability", "torch", "cuda", "cudnn")


def gpu_results(results_dir: Path) -> list[tuple[Path, dict]]:
    """Every results file of ``results_dir`` with GPU cases, as the harness writes them (files of the former
    ``benchmarks/gpu/run`` converted by :func:`from_legacy`)."""
    out = []
    for p, d in json_files(Path(results_dir)):
        res = from_legacy(d) if "schema" not in d and "precisions" in d else d
        if _device(res):  # a file with GPU cases
            out.append((p, res))
    return out


def from_legacy(d: dict) -> dict:
    """A results file of the former ``benchmarks/gpu/run`` (one JSON per run; its phases as keys: ``precisions``,
    ``fp32_vs_cpu``/``bf16_vs_fp32``, ``model_variants``, ``peer_predict``, ``train``) as the harness's results of
    this stage: the same numbers, one case per phase, each run a run record. The committed files stay as they were
    measured; ``benchmarks/render`` reads them through this."""
    m = d["machine"]
    device = {k: m.get(k) for k in DEVICE_KEYS}
    cases = [c for c in (_legacy_predict(d), _legacy_forward(d), _legacy_peer(d), _legacy_train(d)) if c]
    for c in cases:
        c.update(stage="gpu", id=f"gpu/{c['case']}", contenders=_contenders(c["runs"]))
        c["params"]["device"] = device
    return {
        "schema": SCHEMA,
        "converted_from": "benchmarks/gpu/run (before the harness)",
        "command": d.get("command"),
        "machine": {
            "host": m.get("host"),
            "cpu_model": m.get("cpu"),
            "usable_cpus": m.get("cores"),
            "python": m.get("python"),
        },
        "first_started": d["started"].replace(" ", "T") + (":00Z" if len(d["started"]) == 16 else ""),  # minutes, UTC
        "quick": bool(d.get("dry_run")),
        "phase_errors": d.get("phase_errors") or [],
        "cases": cases,
    }


def _contenders(runs: list[dict]) -> dict:
    keys = dict.fromkeys(r["contender"] for r in runs)
    return {k: {"label": k, "role": "peer" if k.startswith("predmoter") else "ours"} for k in keys}


def _legacy_predict(d: dict) -> dict | None:
    if not d["precisions"]:
        return None
    runs = [
        {**p, "contender": p["precision"] + (f"_{p['run']}" if p.get("run") else ""), "repeat": 0, "exit": 0}
        for p in d["precisions"]
    ]
    c = d.get("fp32_vs_cpu")
    params = {k: d.get(k) for k in ("mbp", "records", "seed", "deflate", "model_preset")}
    checks = {k: d[k] for k in ("fp32_vs_cpu", "bf16_vs_fp32") if d.get(k)}
    return {
        "case": f"predict_{d['mbp']:g}Mbp",
        "params": params,
        "runs": runs,
        "agreement": {"ok": c and c["ok"], **checks},
    }


def _legacy_forward(d: dict) -> dict | None:
    if not d.get("model_variants"):
        return None
    runs = [{"contender": "forward", "repeat": 0, "exit": 0, "model_variants": d["model_variants"]}]
    return {"case": "forward", "params": {}, "runs": runs}


def _legacy_peer(d: dict) -> dict | None:
    pp = d.get("peer_predict")
    if not pp:
        return None
    runs = [
        {**x, "contender": f"{x['tool']} {x['precision']}", "repeat": x["rep"], "exit": 1 if x.get("error") else 0}
        for x in pp["rows"]
    ]
    params = {k: pp[k] for k in ("mbp", "batch_size", "reps", "fasta2h5_wall_s")}
    params["bp_rows"] = pp["rows"][0]["bp_rows"] if pp["rows"] else None
    return {"case": f"peer_{pp['mbp']:g}Mbp", "params": params, "runs": runs, "agreement": {"ok": None, **pp["checks"]}}


def _legacy_train(d: dict) -> dict | None:
    tr = d.get("train")
    if not tr:
        return None
    runs = [{**x, "contender": v, "repeat": 0, "exit": 1 if x.get("error") else 0} for v, x in tr["runs"].items()]
    params = {k: tr[k] for k in ("chunks", "length", "model", "arch_args", "batch_size", "epochs")}
    return {"case": f"train_{tr['chunks']['train']}chunks_{tr['epochs']}epochs", "params": params, "runs": runs}


def gpu_cases(res: dict) -> dict[str, dict]:
    """A results file's GPU cases that ran, by kind (the case name's first word: predict, forward, peer, train,
    variant)."""
    return {
        c["case"].split("_")[0]: c for c in res.get("cases") or [] if c.get("stage") == "gpu" and not c.get("skipped")
    }


def predict_rows(res: dict) -> tuple[dict, list[dict]]:
    """The predict case's parameters and its measured runs (none failed), of one results file."""
    c = gpu_cases(res).get("predict")
    if not c:
        return {}, []
    return c["params"], [r for r in c["runs"] if r.get("exit") == 0]


# --------------------------------------------------------------------------------------------------
# the render section: benchmarks/gpu/RESULTS.md
# --------------------------------------------------------------------------------------------------
PAGE_HEAD = [
    "# GPU benchmark results",
    "",
    "Generated by `benchmarks/render` (and `benchmarks/gpu/run` after a run) from the results files in "
    "`benchmarks/gpu/results/`: the harness's `gpu` stage (`benchmarks/stages/gpu.py`), files of the former "
    "`benchmarks/gpu/run` read through its converter. Do not edit by hand.",
    "",
    "bp counts every predicted position of every row: each assembly base is predicted on both strands, "
    "so a 200 Mbp assembly is 400 Mbp of rows. *End to end* is the whole `chromaflow predict` process "
    "(start-up, model load, batch probe, FASTA read, write); *loop* is the prediction loop alone. "
    "*first*: the batch size is probed (a fresh node); *cached*: the size probed before is reused.",
    "",
]
PENDING = [
    "**Pending: no run on a GPU yet.** `benchmarks/gpu/run` needs an NVIDIA GPU (it refuses to run "
    "without CUDA); run it on one and commit `benchmarks/gpu/results/*.json` and this file.",
    "",
]


def fmt(v, spec="{:.3g}"):
    return "–" if v is None else spec.format(v)


def results_page(results_dir: Path) -> str:
    """The GPU page: every run of ``results_dir`` (default deflate first, then by start), each with its predict,
    phases, targets, Predmoter and training sections."""
    runs = [res for _, res in gpu_results(results_dir)]
    runs.sort(key=lambda r: (predict_rows(r)[0].get("deflate", "auto") != "auto", r.get("first_started", "")))
    lines = [*PAGE_HEAD, *([] if runs else PENDING)]
    for res in runs:
        cs = gpu_cases(res)
        params, rows = predict_rows(res)
        lines += predict_section(res, rows, cs.get("forward"))
        lines += phases_section(rows) + targets_section(params, rows)
        lines += peer_section(cs.get("peer")) + train_section(cs.get("train")) + failures_section(res)
    return "\n".join(lines) + "\n"


def label(p: dict) -> str:
    return p["precision"] + (f" ({p['run']})" if p.get("run") else "")


def e2e(p: dict) -> float:
    """bp per second of the whole process."""
    return p["bp"] / p["wall_s"]


def _device(res: dict) -> dict | None:
    """The device record of a results file's GPU cases (None where no GPU case was built)."""
    params = (c.get("params") or {} for c in res.get("cases") or [] if c.get("stage") == "gpu")
    return next((p["device"] for p in params if p.get("device")), None)


def predict_section(res: dict, rows: list[dict], forward: dict | None) -> list[str]:
    m, dev = res["machine"], _device(res)
    versions = (
        f"torch {dev['torch']}, CUDA {dev['cuda']}, cuDNN {dev['cudnn']}; host CPU {m['cpu_model']} "
        f"({m['usable_cpus']} cores)."
    )
    started = res["first_started"][:16].replace("T", " ")
    lines = [f"## {dev['gpu']} — {started} UTC, host {m['host']}", ""]
    if not rows:
        return lines + [f"Command: `{res['command']}`. {versions}", ""]
    pred = gpu_cases(res)["predict"]
    p = pred["params"]
    lines += [
        f"Command: `{res['command']}`. {p['mbp']:g} Mbp synthetic assembly ({p['records']} records), L = {L}, "
        f"model `make-test-model --preset {p.get('model_preset') or 'release-bihybrid'}` (random weights). "
        f"{versions} Output deflate: `--deflate {p.get('deflate') or 'auto'}`.",
        "",
        "| precision | end to end (s) | bp/s end to end | bp/s loop | batch (auto) | GPU util mean / max (%) | "
        "GPU mem max | peak allocated | device data-wait | host waits on writer (s) | output deflate | "
        "host CPU-s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        *map(_predict_row, rows),
        "",
    ]
    lines += [_time_line(x) for x in rows if (x.get("gpu_timing") and x.get("loop_s"))]
    return lines + _predict_checks(pred.get("agreement") or {}) + _forward_table(forward) + [""]


def _predict_row(p: dict) -> str:
    g = (p.get("gpu_devices") or [{}])[0]
    return (
        f"| {label(p)} | {p['wall_s']:.1f} | {fmt(e2e(p))} | {fmt(p['bp_per_s_loop'])} | "
        f"{p['batch_size']} | {fmt(g.get('utilization_mean_pct'), '{:.0f}')} / "
        f"{fmt(g.get('utilization_max_pct'), '{:.0f}')} | {fmt(g.get('memory_used_max_bytes'))} | "
        f"{fmt(p.get('peak_gpu_bytes'))} | {fmt(p.get('data_wait_fraction'), '{:.1%}')} | "
        f"{fmt(p.get('write_wait_s'), '{:.2f}')} | {p.get('deflate') or 'zlib:9'} | {p['cpu_s']:.1f} |"
    )


def _time_line(p: dict) -> str:
    t = p["gpu_timing"]
    return (
        f"* {label(p)} time line: GPU (CUDA events) model {t['model_s']:.2f} s, other device work "
        f"(one-hot, rounding, copies) {t['busy_s'] - t['model_s']:.2f} s, idle {t['idle_s']:.2f} s of a "
        f"{t['span_s']:.2f} s span; host loop {p['loop_s']:.2f} s, of which waiting for the reader "
        f"{p['host_wait_fraction'] * p['loop_s']:.2f} s and for the writer {p['write_wait_s']:.2f} s."
    )


def _predict_checks(ag: dict) -> list[str]:
    lines = []
    c = ag.get("fp32_vs_cpu")
    if c and "values" in c:
        lines += [
            "",
            f"fp32 vs the CPU path on {len(c['rows'])} rows: {c['values']} values, {c['differ']} differ "
            f"({len(c['allowed'])} at near-ties, allowed; {c['unexpected_count']} elsewhere) — "
            f"{'**identical except documented ties**' if c['ok'] else '**FAILED**'}.",
        ]
    elif c:
        lines += ["", f"fp32 vs the CPU path: **FAILED** ({c.get('detail')})."]
    d = ag.get("bf16_vs_fp32")
    if d and "values" in d:
        lines += [
            f"bf16 vs fp32 (every value): {d['differ']} of {d['values']} differ ({fmt(d['fraction'], '{:.4%}')}), "
            f"max |Δ| {d['max_abs']}."
        ]
    return lines


def _forward_table(forward: dict | None) -> list[str]:
    variants = next((r["model_variants"] for r in (forward or {}).get("runs", []) if r.get("model_variants")), None)
    if not variants:
        return []
    lines = ["", "| model forward only | precision | Mbp/s | max \\|Δ\\| vs eager fp32 |", "|---|---|---|---|"]
    for v in variants:
        lines.append(
            f"| {v['variant']} | {v['precision']} | {fmt(v.get('mbp_per_s'))} | "
            f"{fmt(v.get('max_abs_vs_eager_fp32')) if 'error' not in v else v['error']} |"
        )
    return lines


PHASE_COLUMNS = (
    ("before_run", "interpreter + CLI"),
    ("checks_imports", "checks + torch import"),
    ("model_load", "model load"),
    ("batch_size", "batch size"),
    ("setup", "set-up"),
)


def phases_section(runs: list[dict]) -> list[str]:
    """Where the end-to-end seconds go: the process's own phases (metrics ``phases_s``) and what is left to exit."""
    rows = [p for p in runs if p.get("phases_s")]
    if not rows:
        return []
    lines = [
        "Where a process's seconds go (`phases_s` of the metrics; *exit* = wall from outside minus the phases: "
        "interpreter shutdown, CUDA context teardown):",
        "",
        "| run | " + " | ".join(name for _, name in PHASE_COLUMNS) + " | loop | drain | finish | exit | wall |",
        "|---" * (len(PHASE_COLUMNS) + 6) + "|",
    ]
    for p in rows:
        ph = p["phases_s"]
        loop = p.get("loop_s") or 0.0
        drain = (ph.get("loop_and_drain") or 0.0) - loop
        known = sum(v for v in ph.values() if v is not None)
        cells = [fmt(ph.get(k), "{:.2f}") for k, _ in PHASE_COLUMNS]
        lines.append(
            f"| {label(p)} | " + " | ".join(cells) + f" | {loop:.2f} | {drain:.2f} | "
            f"{fmt(ph.get('finish'), '{:.2f}')} | {p['wall_s'] - known:.2f} | {p['wall_s']:.2f} |"
        )
    return lines + [""]


#: targets of the GPU issue, whole process, 200 Mbp assembly straight from FASTA, one H100
TARGETS = {"bf16": 180e6, "fp32": 40e6}
TARGET_UTIL_PCT = 90.0


def targets_section(params: dict, runs: list[dict]) -> list[str]:
    rows = [p for p in runs if p.get("run") and p["precision"] in TARGETS]
    if not rows or params["mbp"] < 200:
        return []
    lines = [
        "| target (one GPU, 200 Mbp from FASTA, whole process) | run | measured | met | largest parts of the wall "
        "| loop rate (the figure with no start-up at all) |",
        "|---|---|---|---|---|---|",
    ]
    for p in rows:
        goal, rate = TARGETS[p["precision"]], e2e(p)
        lines.append(
            f"| {p['precision']} ≥ {goal / 1e6:g} Mbp/s of rows end to end | {p['run']} | "
            f"{rate / 1e6:.1f} Mbp/s | {'✔' if rate >= goal else '✘'} | {largest_phases(p)} | "
            f"{p['bp_per_s_loop'] / 1e6:.1f} Mbp/s ({'above' if p['bp_per_s_loop'] >= goal else 'below'} "
            f"the target) |"
        )
        util = ((p.get("gpu_devices") or [{}])[0]).get("utilization_mean_pct")
        if util is not None:
            lines.append(
                f"| {p['precision']}: mean GPU utilisation ≥ {TARGET_UTIL_PCT:g} % over the prediction | "
                f"{p['run']} | {util:.0f} % | {'✔' if util >= TARGET_UTIL_PCT else '✘'} | | |"
            )
    return lines + [""]


def largest_phases(p: dict, n: int = 3) -> str:
    """The ``n`` largest parts of a run's wall (phases, the loop and drain split, exit), in seconds."""
    ph = dict(p.get("phases_s") or {})
    if not ph:
        return "–"
    names = dict(PHASE_COLUMNS, finish="finish")
    loop = p.get("loop_s") or 0.0
    parts = {k: v for k, v in ph.items() if k != "loop_and_drain" and v is not None}
    parts.update(
        loop=loop,
        drain=(ph.get("loop_and_drain") or 0.0) - loop,
        exit=p["wall_s"] - sum(v for v in ph.values() if v is not None),
    )
    top = sorted(parts.items(), key=lambda kv: -kv[1])[:n]
    return ", ".join(f"{names.get(k, k)} {v:.1f} s" for k, v in top)


def peer_section(case: dict | None) -> list[str]:
    if not case:
        return []
    pp = case["params"]
    lines = [
        f"### Predmoter side by side (same GPU, same {pp['mbp']:g} Mbp genome h5 made by `chromaflow "
        f"fasta2h5` in {pp['fasta2h5_wall_s']:.1f} s, batch size {pp['batch_size']} for both, "
        f"{pp['reps']} alternated repetition(s); wall of the whole process)",
        "",
        "| tool | precision | wall (s) | bp of rows/s | GPU util, busy span (%) | Predmoter wall ÷ this |",
        "|---|---|---|---|---|---|",
    ]
    pm = sorted(x["wall_s"] for x in case["runs"] if x["contender"].startswith("predmoter") and not x.get("error"))
    pm_med = pm[len(pm) // 2] if pm else None
    for x in case["runs"]:
        u = x.get("gpu_util_outside") or {}
        peer = x["contender"].startswith("predmoter")
        ratio = "–" if pm_med is None or peer else f"{pm_med / x['wall_s']:.2f}×"
        wall = f"error: {x['error']}" if x.get("error") else f"{x['wall_s']:.1f}"
        tool, prec = (x["tool"], x["precision"]) if "tool" in x else PEER_TOOLS[x["contender"]][:2]
        rate = pp["bp_rows"] / x["wall_s"] if pp.get("bp_rows") and x.get("wall_s") else None
        lines.append(
            f"| {tool} | {prec} | {wall} | {fmt(rate)} | {fmt(u.get('busy_span_mean_pct'), '{:.0f}')} | {ratio} |"
        )
    return lines + _peer_checks(case.get("agreement") or {}) + [""]


def _peer_checks(ch: dict) -> list[str]:
    d, z, b = (ch.get(k) or {} for k in PEER_CHECKS)
    if not ("values" in d and "chunks" in z and "values" in b):
        return []
    return [
        "",
        f"Ours fp32 vs Predmoter (every value): {d['differ']} of {d['values']} differ, max |Δ| "
        f"{d['max_abs']}. Ours `--deflate zlib:9` vs Predmoter: {z['identical']} of {z['chunks']} "
        f"sampled chunks byte-identical. Ours bf16 vs Predmoter fp32: {b['differ']} of {b['values']} "
        f"differ ({fmt(b['fraction'], '{:.4%}')}), max |Δ| {b['max_abs']}.",
    ]


PEER_CHECKS = ("fp32_values_vs_predmoter", "zlib9_chunk_bytes_vs_predmoter", "bf16_values_vs_predmoter")


def train_section(case: dict | None) -> list[str]:
    if not case:
        return []
    tr, runs = case["params"], {x["contender"]: x for x in case["runs"]}
    lines = [
        f"### Training side by side ({tr['chunks']['train']} training and {tr['chunks']['val']} validation "
        f"chunks of {tr['length']:,} bp, synthetic learnable coverage; model {tr['model']} "
        f"({' '.join(tr['arch_args']) or 'Predmoter defaults'}), batch {tr['batch_size']}, seed 1, "
        f"{tr['epochs']} epochs)",
        "",
        "| variant | s / epoch | process wall s | data wait (mean / last epoch) | GPU util while training, last "
        "epoch (%) | GPU util, busy span (%) | Predmoter s/epoch ÷ this | avg_train_loss per epoch |",
        "|---|---|---|---|---|---|---|---|",
    ]
    pm = (runs.get("predmoter") or {}).get("epoch_s")
    lines += [_train_row(v, x, pm) for v, x in runs.items()]
    lines += [
        "",
        "Predmoter's s/epoch comes from its log's start/end stamps (whole seconds) ÷ epochs; ours from "
        "the metrics JSON (each epoch with its validation).",
        "",
    ]
    return lines + train_targets(runs)


def _train_row(v: str, x: dict, pm: float | None) -> str:
    if x.get("error"):
        return f"| {v} | error: {x['error']} | | | | | | |"
    u = x.get("gpu_util_outside") or {}
    ratio = "–" if not pm or v == "predmoter" else f"{pm / x['epoch_s']:.2f}×"
    curve = x.get("curve") or [{}]
    losses = ", ".join(f"{e['avg_train_loss']:.4f}" for e in curve if e.get("avg_train_loss") is not None)
    last = curve[-1]
    return (
        f"| {v} | {x['epoch_s']:.2f} | {x['wall_s']:.1f} | {fmt(x.get('data_wait_fraction'), '{:.1%}')} / "
        f"{fmt(last.get('data_wait_fraction'), '{:.1%}')} | {fmt(last.get('gpu_util_train_pct'), '{:.0f}')} | "
        f"{fmt(u.get('busy_span_mean_pct'), '{:.0f}')} | {ratio} | {losses} |"
    )


TRAIN_TARGETS = {"ratio": 2.0, "data_wait": 0.05, "util_pct": 90.0}


def _rel(a: float, b: float) -> float:
    """|a - b| / |b|: the relative difference of a against b."""
    return abs(a - b) / abs(b)


def _mark(ok: bool) -> str:
    return "✔" if ok else "✘"


def train_targets(runs: dict) -> list[str]:
    """The training targets per variant of ours: ≥ 2× Predmoter per epoch at the same loss curve (largest relative
    difference of avg_train_loss per epoch), data wait < 5 % and GPU utilisation ≥ 90 % in the last epoch."""
    pm = runs.get("predmoter") or {}
    ours_ = {v: x for v, x in runs.items() if v != "predmoter" and not x.get("error") and x.get("curve")}
    if not pm.get("epoch_s") or not ours_ or not (ours_[next(iter(ours_))]["curve"][-1].get("gpu_util_train_pct")):
        return []
    lines = ["| training target | " + " | ".join(ours_) + " |", "|---" * (len(ours_) + 1) + "|"]

    def row(name, cell):
        lines.append(f"| {name} | " + " | ".join(cell(x) for x in ours_.values()) + " |")

    def speed(x):
        r = pm["epoch_s"] / x["epoch_s"]
        return f"{r:.2f}× {_mark(r >= TRAIN_TARGETS['ratio'])}"

    def wait(x):
        w = x["curve"][-1]["data_wait_fraction"]
        return f"{w:.1%} {_mark(w < TRAIN_TARGETS['data_wait'])}"

    def util(x):
        u = x["curve"][-1]["gpu_util_train_pct"]
        return f"{u:.0f} % {_mark(u >= TRAIN_TARGETS['util_pct'])}"

    row(f"≥ {TRAIN_TARGETS['ratio']:g}× Predmoter per epoch", speed)
    row(
        "loss curve vs Predmoter: largest relative difference of avg_train_loss",
        lambda x: f"{max(_rel(a['avg_train_loss'], b['avg_train_loss']) for a, b in zip(x['curve'], pm['curve'])):.2%}",
    )
    row(f"data wait < {TRAIN_TARGETS['data_wait']:.0%} (last epoch)", wait)
    row(f"GPU utilisation ≥ {TRAIN_TARGETS['util_pct']:g} % while training (last epoch)", util)
    return lines + [""]


def failures_section(res: dict) -> list[str]:
    """What did not run: the former script's failed phases, the stage's skipped cases and failed predict runs."""
    errors = list(res.get("phase_errors") or [])
    for c in res.get("cases") or []:
        if c.get("stage") != "gpu":
            continue
        if c.get("skipped"):
            errors.append(f"{c['case']}: skipped: {c['skipped']}")
        elif c["case"].startswith("predict"):
            errors += [f"{c['case']} {r['contender']}: {r.get('error')}" for r in c["runs"] if r.get("exit") != 0]
    if not errors:
        return []
    return ["Phases that failed or did not run: " + "; ".join(f"`{e}`" for e in errors) + ".", ""]


def published(results_dir: Path | None = None) -> dict[Path, str]:
    """The page this stage publishes (``benchmarks/render``): benchmarks/gpu/RESULTS.md from every results file in
    benchmarks/gpu/results/ (the stage's own folder: ``results_dir``, the suite's, holds no GPU run)."""
    return {RESULTS.parent / "RESULTS.md": results_page(RESULTS)}
