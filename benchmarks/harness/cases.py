"""The stages of ``benchmarks/run``: inputs, the commands compared, and how their outputs are checked.

Each stage function returns ``(warm-up commands, cases)``. Inputs are generated (seeded) into the work
directory once and reused by later runs (resume). Sizes: ``FULL`` for people (about an hour in all on a
2-core machine), ``QUICK`` for CI (a few minutes, 1 repeat).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .core import ROOT, TREE_NORMALISED, Case, Contender
from .slurm_cluster import SlurmCluster

PY = sys.executable
SPECIES = "Bench_species"
L = 21384
STAGES = (
    "fasta2h5",
    "predict",
    "bigwig",
    "peaks",
    "genie3",
    "network",
    "coverage",
    "train",
    "genie3scale",
    "scale",
    "scaling",
)
#: stages run only when --stages names them (the scale stage's full run takes hours of the whole pipeline)
OPT_IN = ("scale",)

FULL = {
    "fasta2h5": [("5x10Mbp", 50_000_000, 5), ("1x50Mbp", 50_000_000, 1), ("10000x5kbp", 50_000_000, 10_000)],
    "fasta2h5_variants": ["onehot:5", "zlib", "libdeflate", "isal"],  # besides the default, on the first case
    "predict_rows": 120,  # 2.57 Mbp of subsequences (60 per strand)
    "bigwig_mbp": 200,
    "bigwig_worst_mbp": 50,
    "bigwig_variants": [
        ("bigwig", "avg", None),
        ("bedgraph", "avg", None),
        ("bigwig", "+", None),
        ("bigwig", "-", None),
        ("bigwig", "avg", 150),
        ("bedgraph", "avg", 150),
    ],
    "bigwig_worst_variants": [("bigwig", "avg", None)],
    "peaks_mbp": 200,
    # seeds: the peers' (arboreto ~9 min of 2 cores per seed for the 5 networks) and ours (seconds per seed)
    "genie3_networks": [1, 2, 3, 4, 5],
    "genie3_trees": 1000,
    "genie3_seeds": 6,
    "genie3_reference_seeds": 1,
    "genie3_our_seeds": 12,
    "genie3_synthetic": (500, 300, 300),  # genes, samples, trees
    "scaling_fasta2h5_mbp": [10, 50, 200],
    "scaling_bigwig_mbp": [10, 50, 200],
    "scaling_genie3_genes": [100, 1000, 5000],
    "scaling_genie3_samples": 100,
    "scaling_genie3_trees": 100,
    "scaling_genie3_peer_max_genes": 1000,  # arboreto beside us up to this size (5,000 genes: hours)
    # the planted network (harness/planted.py): one network per seed; genes, TFs, samples, trees
    "network_seeds": [1, 2, 3, 4, 5],
    "network_size": (100, 10, 100),
    "network_trees": 1000,
    # add-coverage: (records, bp per record, reads of 100 bp); the first is the shape of FORMATS.md §7.1's peer
    # measurement, the second the same read density on a 5x smaller genome (peak RSS must not grow with the genome)
    "coverage": [(5, 10_000_000, 1_000_000), (5, 2_000_000, 200_000)],
    "coverage_threads": [1, 2],
    # train: 1 training file of 10 chunks per strand (213,840 bp), a half-size validation file, Predmoter's default
    # architecture, 1 epoch; our variants (train_variants()) beside Predmoter -m train. Sized for 3 repeats in about
    # half an hour on a shared 2-core machine (a Predmoter run of 60 chunks took over 10 min there at load 15)
    "train_files": 1,
    "train_record_bp": 10 * L,
    "train_epochs": 1,
    "train_model": "default",
    "train_variants": ["ours", "ours_procs"],
    # genie3scale (issue 30 §2): the run whose cost is predicted (genes, regulators, samples, trees); the cost
    # model's points (one factor at a time around the largest of each; TARGETS targets of a chunk, --threads 1);
    # the whole plan -> chunks -> merge path (genes, TFs, samples, trees, chunk size: trees chosen so that the four
    # pipeline runs take well under an hour of a 2-core machine); per-task peak RSS bounds (a failed bound fails
    # the case)
    "g3scale_predict": (25_000, 1_700, 500, 1000),
    "g3scale_cost": {
        "samples": [100, 250, 500],
        "regulators": [200, 600, 1700],
        "trees": [10, 20, 40],
        "targets": 40,
        "extra_genes": 300,
    },
    "g3scale_pipeline": (5_000, 340, 500, 20, 500),
    "g3scale_pipeline_repeats": 1,
    "g3scale_rss_bound": {"plan": 512 << 20, "chunk": 512 << 20, "merge": 1 << 30, "merge_streamed": 256 << 20},
    # the merge alone at the predicted size, on synthetic parts (targets, regulators, chunks); its bounds
    "g3scale_merge": (25_000, 1_700, 50),
    "g3scale_merge_bound": {"merge": 2 << 30, "merge_streamed": 256 << 20},
}
QUICK = {
    "fasta2h5": [("5x200kbp", 1_000_000, 5), ("1x1Mbp", 1_000_000, 1), ("200x5kbp", 1_000_000, 200)],
    "fasta2h5_variants": ["zlib"],
    "predict_rows": 4,
    "bigwig_mbp": 2,
    "bigwig_worst_mbp": 1,
    # one realistic case: the two real-Predmoter cases quick adds already cover bedGraph and windows
    "bigwig_variants": [("bigwig", "avg", None)],
    "bigwig_worst_variants": [],
    "peaks_mbp": 2,
    "genie3_networks": [1],
    "genie3_trees": 20,
    "genie3_seeds": 1,
    "genie3_reference_seeds": 1,
    "genie3_our_seeds": 1,
    "genie3_synthetic": None,  # DREAM4 net 1 runs every GENIE3 contender already
    "scaling_fasta2h5_mbp": [1, 2, 4],
    "scaling_bigwig_mbp": [1, 2, 4],
    "scaling_genie3_genes": [20, 40, 80],
    "scaling_genie3_samples": 40,
    "scaling_genie3_trees": 10,
    "scaling_genie3_peer_max_genes": 20,
    "network_seeds": [1, 2],
    "network_size": (40, 6, 40),
    "network_trees": 100,
    "coverage": [(2, 200_000, 20_000)],
    "coverage_threads": [1, 2],
    "train_files": 1,
    "train_record_bp": 2 * L,
    "train_epochs": 1,
    "train_model": "small",
    "train_variants": ["ours"],  # Predmoter's start-up alone is ~20 CPU s: one of ours beside it
    "g3scale_predict": (25_000, 1_700, 500, 1000),
    "g3scale_cost": {
        "samples": [20, 40, 60],
        "regulators": [10, 20, 40],
        "trees": [5, 10, 20],
        "targets": 10,
        "extra_genes": 40,
    },
    "g3scale_pipeline": (200, 20, 40, 5, 50),
    "g3scale_pipeline_repeats": 1,
    "g3scale_rss_bound": {"plan": 512 << 20, "chunk": 512 << 20, "merge": 1 << 30, "merge_streamed": 256 << 20},
    "g3scale_merge": (1_000, 100, 4),
    "g3scale_merge_bound": {"merge": 2 << 30, "merge_streamed": 256 << 20},
}


@dataclass
class Ctx:
    peers: Path
    work: Path
    quick: bool
    repeats: int
    log: callable
    inputs_dir: Path | None = None  # default: <work>/inputs
    #: the results file's records (case id -> record) when this run adds to it: a scale case reads the smaller
    #: genome's measurement from there when that genome has not run in this work dir (a fresh machine)
    earlier: dict = field(default_factory=dict)

    @property
    def cfg(self) -> dict:
        return QUICK if self.quick else FULL

    def peer(self, name: str) -> str:
        return str(self.peers / "bin" / name)

    def inputs(self) -> Path:
        d = self.inputs_dir or self.work / "inputs"
        d.mkdir(parents=True, exist_ok=True)
        return d


def ours(*args) -> list[str]:
    return [PY, "-m", "chromaflow", *map(str, args)]


BENCH = Path(__file__).resolve().parents[1]


def _run(argv: list[str], what: str) -> None:
    p = subprocess.run(list(map(str, argv)), capture_output=True, text=True, cwd=BENCH)
    if p.returncode != 0:
        raise RuntimeError(f"{what} failed: {' '.join(map(str, argv))}\n{p.stderr[-2000:]}")


def _score(links: Path, gold: Path) -> dict:
    """harness.agree's AUROC/AUPR of a link list, in this process: scikit-learn is imported once instead of once per
    scored run (~1.3 CPU-s each; a quick run scores some 20). A crash is a failed comparison, as in :func:`_agree`."""
    from . import agree

    try:
        return agree.score(str(links), str(gold))
    except Exception as exc:  # noqa: BLE001 -- reported like a crashed comparison child
        return {"ok": False, "detail": f"comparison crashed: {type(exc).__name__}: {exc}"}


def _agree(*args) -> dict:
    p = subprocess.run([PY, "-m", "harness.agree", *map(str, args)], capture_output=True, text=True, cwd=BENCH)
    if p.returncode != 0:
        return {"ok": False, "detail": "comparison crashed: " + (p.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def _gen(*args) -> None:
    _run([PY, "-m", "harness.gen", *map(str, args)], f"generating {args[0]}")


def _sizes(*names: str):
    def f(d: Path) -> dict:
        return {n: (d / n).stat().st_size for n in names if (d / n).exists()}

    return f


def fasta(ctx: Ctx, total: int, records: int, seed: int = 42, make: bool = True) -> Path:
    p = ctx.inputs() / f"random_{total}bp_{records}rec_seed{seed}.fa"
    if make and not p.exists():
        ctx.log(f"  generating {p.name}")
        _gen("fasta", p, total, records, seed)
    return p


# --------------------------------------------------------------------------------------------------
# FASTA -> h5
# --------------------------------------------------------------------------------------------------
def fasta2h5(ctx: Ctx) -> tuple[list, list[Case]]:
    cfg = ctx.cfg
    small = fasta(ctx, 200_000, 2, seed=7)
    warm = [
        [
            ctx.peer("peer-helixer-fasta2h5"),
            "--fasta-path",
            small,
            "--h5-output-path",
            "{d}/w.h5",
            "--species",
            SPECIES,
        ],
        ours("fasta2h5", "--fasta", small, "--species", SPECIES, "--out", "{d}/w.h5"),
    ]
    cases = []
    for i, (name, total, records) in enumerate(cfg["fasta2h5"]):
        fa = fasta(ctx, total, records, make=False)
        helixer = Contender(
            "helixer",
            "Helixer fasta2h5.py (default: gzip 4, multiprocess)",
            "peer",
            lambda d, r, fa=fa: [
                ctx.peer("peer-helixer-fasta2h5"),
                "--fasta-path",
                fa,
                "--h5-output-path",
                d / "out.h5",
                "--species",
                SPECIES,
            ],
            outputs=_sizes("out.h5"),
        )
        mine = [
            Contender(
                "chromaflow",
                "chromaflow fasta2h5 (default)",
                "ours",
                lambda d, r, fa=fa: ours("fasta2h5", "--fasta", fa, "--species", SPECIES, "--out", d / "out.h5"),
                outputs=_sizes("out.h5"),
            )
        ]
        for v in cfg["fasta2h5_variants"] if i == 0 else ["zlib"]:
            mine.append(
                Contender(
                    f"chromaflow --deflate {v}",
                    f"chromaflow fasta2h5 --deflate {v}",
                    "ours",
                    lambda d, r, fa=fa, v=v: ours(
                        "fasta2h5", "--fasta", fa, "--species", SPECIES, "--out", d / "out.h5", "--deflate", v
                    ),
                    outputs=_sizes("out.h5"),
                )
            )

        def agree(dirs: dict, mine=mine) -> dict:
            per = {c.key: _agree("h5", dirs[c.key] / "out.h5", dirs["helixer"] / "out.h5") for c in mine}
            ok = all(x.get("ok") for x in per.values())
            return {
                "ok": ok,
                "per_contender": per,
                "detail": "; ".join(
                    f"{k}: {'same datasets' if v.get('ok') else v.get('detail')}, size "
                    f"{v.get('size_ratio', float('nan')):.3f}x"
                    for k, v in per.items()
                ),
            }

        cases.append(
            Case(
                "fasta2h5",
                name,
                {"bp": total, "records": records, "seed": 42, "L": L},
                [helixer, *mine],
                [(c.key, "helixer") for c in mine],
                agree,
                note="headline: the default, whose file must be no larger than Helixer's (+5 %)",
                prepare=lambda t=total, r=records: fasta(ctx, t, r),
            )
        )
    return warm, cases


# --------------------------------------------------------------------------------------------------
# predict
# --------------------------------------------------------------------------------------------------
FULLSIZE = [
    "--model-type",
    "bi-hybrid",
    "--cnn-layers",
    "3",
    "--filter-size",
    "64",
    "--kernel-size",
    "9",
    "--step",
    "2",
    "--up",
    "2",
    "--dilation",
    "1",
    "--lstm-layers",
    "2",
    "--hidden-size",
    "128",
    "--bnorm",
    "--dropout",
    "0.3",
    "--datasets",
    "atacseq",
    "h3k4me3",
]


def predict(ctx: Ctx) -> tuple[list, list[Case]]:
    rows = ctx.cfg["predict_rows"]
    inp = ctx.inputs()
    ckpt = inp / "fullsize_bihybrid_seed0.ckpt"
    if not ckpt.exists():
        ctx.log("  writing the full-size bi-hybrid test checkpoint (random weights, seed 0)")
        _run(ours("make-test-model", "--out", ckpt, "--seed", "0", *FULLSIZE), "make-test-model")
    fa = fasta(ctx, rows // 2 * L, 1, seed=11)
    genome = inp / f"predict_{rows}rows.h5"
    if not genome.exists():
        _run(ours("fasta2h5", "--fasta", fa, "--species", SPECIES, "--out", genome), "fasta2h5")
    warm_h5 = inp / "predict_warm.h5"
    if not warm_h5.exists():
        _run(
            ours("fasta2h5", "--fasta", fasta(ctx, 5000, 1, seed=3), "--species", SPECIES, "--out", warm_h5), "fasta2h5"
        )
    warm = [
        [
            ctx.peer("peer-predmoter"),
            "-m",
            "predict",
            "-f",
            warm_h5,
            "-o",
            "{d}",
            "--model",
            ckpt,
            "--device",
            "cpu",
            "-b",
            "120",
        ],
        ours("predict", "--h5", warm_h5, "--model", ckpt, "--out", "{d}/w.h5", "--device", "cpu"),
    ]
    pm = Contender(
        "predmoter",
        "Predmoter.py -m predict --device cpu -b 120",
        "peer",
        lambda d, r: [
            ctx.peer("peer-predmoter"),
            "-m",
            "predict",
            "-f",
            genome,
            "-o",
            d,
            "--model",
            ckpt,
            "--device",
            "cpu",
            "-b",
            "120",
        ],
        outputs=_sizes(f"{genome.stem}_predictions.h5"),
    )
    fp32 = Contender(
        "chromaflow fp32",
        "chromaflow predict --device cpu (fp32, default)",
        "ours",
        lambda d, r: ours(
            "predict", "--h5", genome, "--model", ckpt, "--out", d / "pred.h5", "--device", "cpu", "--batch-size", "120"
        ),
        outputs=_sizes("pred.h5"),
    )
    bf16 = Contender(
        "chromaflow bf16",
        "chromaflow predict --device cpu --precision bf16",
        "ours",
        lambda d, r: ours(
            "predict",
            "--h5",
            genome,
            "--model",
            ckpt,
            "--out",
            d / "pred.h5",
            "--device",
            "cpu",
            "--batch-size",
            "120",
            "--precision",
            "bf16",
        ),
        outputs=_sizes("pred.h5"),
    )

    def agree(dirs: dict) -> dict:
        peer_out = dirs["predmoter"] / f"{genome.stem}_predictions.h5"
        fp = _agree("predictions", dirs["chromaflow fp32"] / "pred.h5", peer_out, ckpt, genome)
        bf = _agree("deviation", dirs["chromaflow bf16"] / "pred.h5", peer_out)
        return {
            "ok": fp.get("ok"),
            "fp32": fp,
            "bf16": bf,
            "detail": f"fp32: {fp.get('detail')}; bf16 vs Predmoter: {bf.get('detail')}",
        }

    case = Case(
        "predict",
        f"fullsize_{rows}rows",
        {
            "rows": rows,
            "bp": rows * L,
            "model": "bi-hybrid full size, random weights (make-test-model seed 0)",
            "batch_size": 120,
        },
        [pm, fp32, bf16],
        [("chromaflow fp32", "predmoter"), ("chromaflow bf16", "predmoter")],
        agree,
        note="end to end (process start-up included); fp32 must equal Predmoter's output (ties allowed)",
    )
    return warm, [case]


# --------------------------------------------------------------------------------------------------
# bigWig / bedGraph
# --------------------------------------------------------------------------------------------------
GENERATOR = ROOT / "benchmarks" / "bigwig" / "synth_predictions.py"


def _predictions(ctx: Ctx, mbp: float, mode: str, seed: int = 1, make: bool = False) -> tuple[Path | None, str | None]:
    if not GENERATOR.exists():
        return None, (
            f"generator missing: {GENERATOR.relative_to(ROOT)} (written by the bigwig engineer) is not on this branch"
        )
    p = ctx.inputs() / f"predictions_{mode}_{mbp:g}Mbp_seed{seed}.h5"
    if make and not p.exists():
        ctx.log(f"  generating {p.name}")
        tmp = p.with_name(p.name + ".tmp.h5")
        _run(
            [PY, GENERATOR, "--mbp", f"{mbp:g}", "--mode", mode, "--seed", str(seed), "--out", tmp],
            "synth_predictions.py",
        )
        tmp.replace(p)
    return p, None


def _bw_case(
    ctx: Ctx, pred: Path | None, skip: str | None, label: str, fmt: str, strand: str, ws: int | None, params: dict
) -> Case:
    ext = "bw" if fmt == "bigwig" else "bg"
    name = f"{label}_{ext}_{'avg' if strand == 'avg' else 'plus' if strand == '+' else 'minus'}" + (
        f"_ws{ws}" if ws else ""
    )

    def peer_argv(d, r):
        a = [ctx.peer("peer-predmoter-convert"), "-i", pred, "-o", d, "--basename", "bench", "-of", fmt]
        a += ["--strand", strand] if strand != "avg" else []
        return a + (["--window-size", str(ws)] if ws else [])

    def our_argv(d, r):
        return ours(
            "bigwig",
            "--predictions",
            pred,
            "--outdir",
            d,
            "--basename",
            "bench",
            "--format",
            fmt,
            "--strand",
            strand,
            "--no-browser-files",
            *(["--window-size", ws] if ws else []),
        )

    def tracks_of(d: Path) -> dict:
        return {p.name: p.stat().st_size for p in d.iterdir() if p.name.endswith((".bw", ".bg.gz"))}

    peer = Contender("predmoter", "Predmoter convert2coverage.py", "peer", peer_argv, outputs=tracks_of)
    mine = Contender("chromaflow", "chromaflow bigwig", "ours", our_argv, outputs=tracks_of)
    make = params.pop("make", None)
    return Case(
        "bigwig",
        name,
        dict(params, format=fmt, strand=strand, window_size=ws),
        [peer, mine],
        [("chromaflow", "predmoter")],
        lambda dirs: _agree("tracks", dirs["chromaflow"], dirs["predmoter"], pred, ws or 0),
        skip=skip,
        prepare=make,
    )


def bigwig(ctx: Ctx) -> tuple[list, list[Case]]:
    cfg = ctx.cfg
    cases = []
    ref = ROOT.parent / "shared" / "reference" / "predmoter" / "pred_data_1_predictions.h5"
    warm = []
    if ref.exists():
        warm = [
            [ctx.peer("peer-predmoter-convert"), "-i", ref, "-o", "{d}", "--basename", "w", "-of", "bw"],
            ours("bigwig", "--predictions", ref, "--outdir", "{d}", "--basename", "w", "--no-browser-files"),
        ]
        if ctx.quick:  # real Predmoter output, wherever the reference folder is
            for fmt, strand, ws in (("bigwig", "avg", 150), ("bedgraph", "+", None)):
                cases.append(
                    _bw_case(
                        ctx,
                        ref,
                        None,
                        "reference_pred_data_1",
                        fmt,
                        strand,
                        ws,
                        {"input": "reference predmoter/pred_data_1_predictions.h5", "mbp": 0.154},
                    )
                )
    mbp = cfg["bigwig_mbp"]
    pred, skip = _predictions(ctx, mbp, "realistic")
    for fmt, strand, ws in cfg["bigwig_variants"]:
        cases.append(
            _bw_case(
                ctx,
                pred,
                skip,
                f"realistic_{mbp}Mbp",
                fmt,
                strand,
                ws,
                {
                    "input": "synth_predictions.py --mode realistic --seed 1",
                    "mbp": mbp,
                    "make": lambda: _predictions(ctx, mbp, "realistic", make=True),
                },
            )
        )
    if cfg["bigwig_worst_variants"]:
        wm = cfg["bigwig_worst_mbp"]
        pred_w, skip_w = _predictions(ctx, wm, "worst")
        for fmt, strand, ws in cfg["bigwig_worst_variants"]:
            cases.append(
                _bw_case(
                    ctx,
                    pred_w,
                    skip_w,
                    f"worst_{wm}Mbp",
                    fmt,
                    strand,
                    ws,
                    {
                        "input": "synth_predictions.py --mode worst --seed 1",
                        "mbp": wm,
                        "make": lambda: _predictions(ctx, wm, "worst", make=True),
                    },
                )
            )
    return warm, cases


# --------------------------------------------------------------------------------------------------
# peaks
# --------------------------------------------------------------------------------------------------
#: bdgpeakcall settings of the peaks cases: the realistic track has the template's (mini model's) value scale,
#: strand averages mostly 2 and 3 with 3s in runs of 1-4 bp, so cutoff 3 with a 50-bp max gap calls ~100k peaks per
#: 50 Mbp (a cutoff of 25 would call none)
PEAKS_ARGS = {"cutoff": 3, "min_length": 50, "max_gap": 50}


def _macs3() -> str | None:
    exe = Path(PY).with_name("macs3")
    return str(exe) if exe.exists() else None


def _narrowpeak_rows(path: Path) -> list[list[str]]:
    return [ln.split("\t") for ln in path.read_text().splitlines() if ln and not ln.startswith("track")]


def _peaks_agree(dirs: dict) -> dict:
    """Columns 1-6 and 10 of every peak equal (chromaflow's 7-9: summit value, -1, -1; MACS3's: 0, 0, 0)."""
    ours_rows = _narrowpeak_rows(dirs["chromaflow"] / "peaks.narrowPeak")
    theirs = _narrowpeak_rows(dirs["macs3"] / "peaks")
    if len(ours_rows) != len(theirs):
        return {"ok": False, "detail": f"{len(ours_rows)} peaks vs MACS3's {len(theirs)}"}
    for a, b in zip(ours_rows, theirs):
        if a[:6] + a[9:] != b[:6] + b[9:]:
            return {"ok": False, "detail": f"first difference: {a} vs {b}"}
    return {
        "ok": True,
        "detail": f"{len(theirs)} peaks identical (coordinates, name, score, summit)",
        "peaks": len(theirs),
    }


def peaks(ctx: Ctx) -> tuple[list, list[Case]]:
    """chromaflow peaks on the predictions h5 vs MACS3 bdgpeakcall on the bedGraph of the same track (made
    beforehand by chromaflow bigwig and not timed: the peer's time is the peak call alone)."""
    mbp = ctx.cfg["peaks_mbp"]
    pred, skip = _predictions(ctx, mbp, "realistic")
    macs3 = _macs3()
    if macs3 is None:
        skip = skip or "MACS3 is not installed in the chromaflow venv (pip install MACS3)"
    bg = ctx.inputs() / f"predictions_realistic_{mbp:g}Mbp_seed1_atacseq_avg.bg"
    a = PEAKS_ARGS

    def prepare():
        _predictions(ctx, mbp, "realistic", make=True)
        if not bg.exists():
            ctx.log(f"  generating {bg.name}")
            d = ctx.inputs() / "peaks_bg"
            _run(
                ours(
                    "bigwig",
                    "--predictions",
                    pred,
                    "--outdir",
                    d,
                    "--basename",
                    "b",
                    "--format",
                    "bedgraph",
                    "--datasets",
                    "atacseq",
                    "--no-browser-files",
                    "--force",
                ),
                "chromaflow bigwig",
            )
            with open(bg.with_name(bg.name + ".tmp"), "wb") as fh:
                subprocess.run(["gzip", "-dc", str(d / "b_atacseq_avg_strand.bg.gz")], stdout=fh, check=True)
            bg.with_name(bg.name + ".tmp").replace(bg)

    peer = Contender(
        "macs3",
        "MACS3 bdgpeakcall (on the bedGraph)",
        "peer",
        lambda d, r: [
            macs3,
            "bdgpeakcall",
            "-i",
            bg,
            "-c",
            str(a["cutoff"]),
            "-l",
            str(a["min_length"]),
            "-g",
            str(a["max_gap"]),
            "--outdir",
            d,
            "-o",
            "peaks",
        ],
        outputs=_sizes("peaks"),
    )
    mine = Contender(
        "chromaflow",
        "chromaflow peaks (on the predictions h5)",
        "ours",
        lambda d, r: ours(
            "peaks",
            "--predictions",
            pred,
            "--dataset",
            "atacseq",
            "--out",
            d / "peaks.narrowPeak",
            "--name",
            "peaks",
            "--cutoff",
            a["cutoff"],
            "--min-length",
            a["min_length"],
            "--max-gap",
            a["max_gap"],
        ),
        outputs=_sizes("peaks.narrowPeak"),
    )
    case = Case(
        "peaks",
        f"realistic_{mbp}Mbp_atacseq_avg",
        {"input": "synth_predictions.py --mode realistic --seed 1", "mbp": mbp, **a},
        [peer, mine],
        [("chromaflow", "macs3")],
        _peaks_agree,
        skip=skip,
        prepare=prepare,
        note="MACS3 reads the bedGraph chromaflow bigwig wrote (not timed); chromaflow reads the h5",
    )
    return [], [case]


# --------------------------------------------------------------------------------------------------
# GENIE3
# --------------------------------------------------------------------------------------------------
DREAM4 = ROOT.parent / "shared" / "reference" / "dream4"
GRNBOOST2 = Path(__file__).with_name("grnboost2_peer.py")


def _genie3_contenders(
    ctx: Ctx,
    expr: Path,
    trees: int,
    seeds: int,
    ref_seeds: int | None,
    grnboost: bool = True,
    our_seeds: int | None = None,
    tree_normalised: bool = False,
) -> list[Contender]:
    def ours_c(key, label, extra):
        return Contender(
            key,
            label,
            "ours",
            lambda d, r: ours(
                "genie3",
                "--expression",
                expr,
                "--layout",
                "samples-x-genes",
                "--n-trees",
                trees,
                *extra,
                "--seed",
                r + 1,
                "--threads",
                "2",
                "--out",
                d / "links.tsv.gz",
            ),
            repeats=our_seeds or seeds,
            seed_for_repeat=True,
        )

    cs = [
        ours_c("chromaflow", f"chromaflow genie3 --n-trees {trees} --threads 2", []),
        Contender(
            "arboreto genie3",
            f"arboreto 0.1.6 GENIE3 (RF, {trees} trees, 2 dask workers)",
            "peer",
            lambda d, r: [
                ctx.peer("peer-arboreto-python"),
                ctx.peers / "checks" / "arboreto_genie3.py",
                expr,
                d / "links.tsv",
                "--trees",
                str(trees),
                "--seed",
                str(r + 1),
                "--workers",
                "2",
            ],
            repeats=seeds,
            seed_for_repeat=True,
        ),
    ]
    if tree_normalised:  # arboreto's importance (scikit-learn's feature_importances_): the like-for-like accuracy
        cs.insert(
            1,
            ours_c(
                TREE_NORMALISED,
                f"chromaflow genie3 --n-trees {trees} --importance tree-normalised --threads 2",
                ["--importance", "tree-normalised"],
            ),
        )
    if ref_seeds:
        cs.append(
            Contender(
                "reference GENIE3",
                f"reference GENIE3.py (RF, K=sqrt, {trees} trees, 2 processes)",
                "peer",
                lambda d, r: [
                    ctx.peer("peer-genie3-python"),
                    ctx.peers / "checks" / "reference_genie3.py",
                    expr,
                    d / "links.tsv",
                    "--trees",
                    str(trees),
                    "--seed",
                    str(r + 1),
                    "--threads",
                    "2",
                ],
                repeats=ref_seeds,
                seed_for_repeat=True,
            )
        )
    if grnboost:
        cs.append(
            Contender(
                "arboreto grnboost2",
                "arboreto 0.1.6 GRNBoost2 (2 dask workers)",
                "peer",
                lambda d, r: [
                    ctx.peer("peer-arboreto-python"),
                    GRNBOOST2,
                    expr,
                    d / "links.tsv",
                    "--seed",
                    str(r + 1),
                    "--workers",
                    "2",
                ],
                repeats=seeds,
                seed_for_repeat=True,
            )
        )
    return cs


def _scorer(gold: Path):
    def per_run(key: str, d: Path) -> dict:
        links = d / ("links.tsv.gz" if (d / "links.tsv.gz").exists() else "links.tsv")
        s = _score(links, gold)
        return {"auroc": s.get("auroc"), "aupr": s.get("aupr"), "scored_links": s.get("scored_links")}

    return per_run


def _genie3_summary(dirs: dict) -> dict:
    return {
        "ok": None,
        "detail": "accuracy per run (AUROC/AUPR) beside the times; no equality check (different random forests)",
    }


def genie3(ctx: Ctx) -> tuple[list, list[Case]]:
    cfg = ctx.cfg
    cases = []
    trees, seeds = cfg["genie3_trees"], cfg["genie3_seeds"]
    for net in cfg["genie3_networks"]:
        expr = DREAM4 / f"insilico_size100_{net}_multifactorial.tsv"
        gold = DREAM4 / f"DREAM4_GoldStandard_InSilico_Size100_multifactorial_{net}.tsv"
        skip = None if expr.exists() else f"reference folder missing: {expr}"
        ns = cfg["genie3_our_seeds"]
        cs = _genie3_contenders(
            ctx, expr, trees, seeds, cfg["genie3_reference_seeds"], our_seeds=ns, tree_normalised=True
        )
        cases.append(
            Case(
                "genie3",
                f"dream4_net{net}",
                {
                    "network": net,
                    "genes": 100,
                    "samples": 100,
                    "trees": trees,
                    "seeds": list(range(1, seeds + 1)),
                    "our_seeds": list(range(1, ns + 1)),
                },
                cs,
                [("chromaflow", c.key) for c in cs if c.role == "peer"] + [(TREE_NORMALISED, "arboreto genie3")],
                _genie3_summary,
                per_run=_scorer(gold),
                skip=skip,
                note=f"repeat r uses seed r + 1 for every tool; peers seeds 1-{seeds}, ours 1-{ns} (seconds "
                "each); AUROC/AUPR per run",
            )
        )
    if cfg["genie3_synthetic"]:
        cases.append(_synthetic_genie3(ctx, *cfg["genie3_synthetic"]))
    warm = []
    if (DREAM4 / "insilico_size100_1_multifactorial.tsv").exists():
        e = DREAM4 / "insilico_size100_1_multifactorial.tsv"
        warm = [
            [
                ctx.peer("peer-arboreto-python"),
                ctx.peers / "checks" / "arboreto_genie3.py",
                e,
                "{d}/l.tsv",
                "--trees",
                "5",
            ],
            [
                ctx.peer("peer-genie3-python"),
                ctx.peers / "checks" / "reference_genie3.py",
                e,
                "{d}/l.tsv",
                "--trees",
                "5",
            ],
            ours("genie3", "--expression", e, "--layout", "samples-x-genes", "--n-trees", "5", "--out", "{d}/l.tsv.gz"),
        ]
    return warm, cases


def _synthetic_genie3(ctx: Ctx, g: int, s: int, t: int) -> Case:
    """GENIE3 on a generated matrix (genes x samples, t trees), scored against the edges that generated it."""
    expr = ctx.inputs() / f"expression_{g}x{s}_seed1.tsv"
    gold = ctx.inputs() / f"expression_{g}x{s}_seed1.gold.tsv"
    if not expr.exists():
        _gen("expression", expr, g, s, 1, gold)
    cs = _genie3_contenders(ctx, expr, t, ctx.repeats, None)
    return Case(
        "genie3",
        f"synthetic_{g}x{s}",
        {"genes": g, "samples": s, "trees": t, "regulators": "all genes"},
        cs,
        [("chromaflow", c.key) for c in cs[1:]],
        _genie3_summary,
        per_run=_scorer(gold),
        note="reference GENIE3 left out at this size (hours); gold = the generating edges",
    )


# --------------------------------------------------------------------------------------------------
# network: GENIE3 with and without a motif prior on a planted network (harness/planted.py)
# --------------------------------------------------------------------------------------------------
#: the shuffled prior may cost at most this much AUPR (median over seeds) against plain GENIE3 (issue 29)
SHUFFLED_TOLERANCE = 0.01
NETWORK_ALPHAS = (0.25, 0.5, 1)


def _planted(*args) -> None:
    """``python -m harness.planted`` (make, shuffle-prior: inputs written in a process of their own, like
    harness.gen)."""
    p = subprocess.run([PY, "-m", "harness.planted", *map(str, args)], capture_output=True, text=True, cwd=BENCH)
    if p.returncode != 0:
        raise RuntimeError(f"harness.planted {args[0]} failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}")


def _network_inputs(ctx: Ctx, seed: int) -> Path:
    """The planted network of ``seed`` and its priors (motif, accessibility-weighted, shuffled), made once."""
    g, t, s = ctx.cfg["network_size"]
    d = ctx.inputs() / f"planted_{g}g_{t}tf_{s}s_seed{seed}"
    if (d / "prior_shuffled.tsv.gz").exists():
        return d
    ctx.log(f"  generating {d.name}")
    _planted("make", d, seed, g, t, s)
    common = [
        "--fasta",
        d / "genome.fa",
        "--annotation",
        d / "genes.gff3",
        "--motifs",
        d / "motifs.jaspar",
        "--tf-motifs",
        d / "tf_motifs.tsv",
        "--force",
    ]
    _run(ours("motif-prior", *common, "--out", d / "prior.tsv.gz"), "motif-prior")
    _run(
        ours(
            "gene-accessibility",
            "--annotation",
            d / "genes.gff3",
            "--bigwig",
            d / "atac.bw",
            "--out",
            d / "genes.tsv",
            "--force",
        ),
        "gene-accessibility",
    )
    _run(
        ours(
            "motif-prior",
            *common,
            "--accessibility",
            d / "genes.tsv",
            "--dataset",
            "atac",
            "--out",
            d / "prior_accessibility.tsv.gz",
        ),
        "motif-prior --accessibility",
    )
    _planted("shuffle-prior", d / "prior.tsv.gz", d / "prior_shuffled.tsv.gz", seed)
    return d


def _network_summary(dirs: dict) -> dict:
    """No output check (every contender is scored against the planted edges instead): ``ok`` stays None. The
    verdicts of issue 29 (a gain with the informative prior, at most SHUFFLED_TOLERANCE lost with the shuffled
    one) are computed from the per-run scores by ``render.network_verdicts``: a failed verdict is a result."""
    return {"ok": None, "detail": "every run scored against the planted edges; verdicts in the network table"}


def network(ctx: Ctx) -> tuple[list, list[Case]]:
    cfg = ctx.cfg
    seeds = cfg["network_seeds"]
    trees = cfg["network_trees"]
    g, t, s = cfg["network_size"]
    g_name = f"planted_{g}g_{t}tf_{s}s"

    def inp(r: int) -> Path:
        return ctx.inputs() / f"{g_name}_seed{seeds[r]}"

    def genie3_c(key, label, prior=None, alpha=None, check="auto"):
        def argv(d, r):
            a = ours(
                "genie3",
                "--expression",
                inp(r) / "expression.tsv",
                "--layout",
                "samples-x-genes",
                "--regulators",
                inp(r) / "regulators.txt",
                "--n-trees",
                trees,
                "--seed",
                1,
                "--threads",
                "2",
                "--out",
                d / "links.tsv.gz",
                "--summary",
                d / "summary.json",
            )
            return a + (
                ["--prior", str(inp(r) / prior), "--prior-alpha", f"{alpha:g}", "--prior-check", check] if prior else []
            )

        return Contender(key, label, "ours", argv, repeats=len(seeds), seed_for_repeat=True)

    def alone_c(key, label, prior):
        return Contender(
            key,
            label,
            "ours",
            lambda d, r: [PY, BENCH / "harness" / "planted.py", "rank-prior", inp(r) / prior, d / "links.tsv.gz"],
            repeats=len(seeds),
            seed_for_repeat=True,
        )

    base = f"chromaflow genie3 --n-trees {trees}"
    cs = [genie3_c("genie3", f"{base} (GENIE3, no prior = α 0)")]
    cs += [
        genie3_c(f"alpha {a:g}", f"{base} --prior motif --prior-alpha {a:g}", "prior.tsv.gz", a) for a in NETWORK_ALPHAS
    ]
    cs += [
        genie3_c(
            "accessibility alpha 0.5",
            f"{base} --prior motif×accessibility --prior-alpha 0.5",
            "prior_accessibility.tsv.gz",
            0.5,
        ),
        genie3_c(
            "shuffled alpha 0.5", f"{base} --prior shuffled motif --prior-alpha 0.5", "prior_shuffled.tsv.gz", 0.5
        ),
        genie3_c(
            "shuffled alpha 0.5 check off",
            f"{base} --prior shuffled motif --prior-alpha 0.5 --prior-check off (no check: always weighted)",
            "prior_shuffled.tsv.gz",
            0.5,
            "off",
        ),
        alone_c("prior alone", "the motif prior alone (rank by prior, then hits)", "prior.tsv.gz"),
        alone_c("accessibility prior alone", "the motif×accessibility prior alone", "prior_accessibility.tsv.gz"),
    ]

    def per_run(key: str, d: Path) -> dict:
        r = int(d.name[1:])
        from . import planted  # in this process, like _score: one scikit-learn import for every run

        sc = planted.score(str(d / "links.tsv.gz"), str(inp(r) / "gold.tsv"))
        sc.pop("pairs", None)
        summ = d / "summary.json"
        pc = json.loads(summ.read_text()).get("prior_check") if summ.exists() else None
        if pc:  # --prior-check auto: its decision and one-sided p (docs/genie3.md, "Prior check")
            sc.update(prior_check=pc["decision"], prior_check_p=pc["p"], prior_check_z=pc["z"])
        return dict(sc, network_seed=seeds[r])

    def prepare():
        for sd in seeds:
            _network_inputs(ctx, sd)
        tr = [json.loads((inp(r) / "truth.json").read_text()) for r in range(len(seeds))]
        params["edges_per_seed"] = [x["edges"] for x in tr]
        params["planted_per_seed"] = [x["planted"] for x in tr]
        params["simulator"] = tr[0]["simulator"]

    params = {
        "genes": g,
        "tfs": t,
        "samples": s,
        "trees": trees,
        "seeds": seeds,
        "decoy_rate": "0.1 per non-edge (TF, gene)",
        "unregulated_genes": 0.3,
        "promoter_open": "0.8 if regulated, 0.2 if not",
        "alphas": list(NETWORK_ALPHAS),
        "shuffled_tolerance": SHUFFLED_TOLERANCE,
    }
    case = Case(
        "network",
        g_name,
        params,
        cs,
        [("alpha 0.5", "genie3"), ("accessibility alpha 0.5", "genie3")],
        _network_summary,
        per_run=per_run,
        prepare=prepare,
        note="one planted network per seed (run r = seed r); timing: weighted vs plain GENIE3, same inputs",
    )
    warm = [ours("genie3", "--help")]
    return warm, [case]


# --------------------------------------------------------------------------------------------------
# add-coverage: chromaflow add-coverage vs Helixer's add_ngs_coverage.py
# --------------------------------------------------------------------------------------------------
COVERAGE_PREFIX = "atacseq"


def _fresh_genome(src: Path):
    """Setup of an add-coverage run: a fresh copy of the genome h5 in the run dir (both tools update it in place;
    the copy is not timed)."""

    def setup(d: Path, r: int) -> None:
        d.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, d / "genome.h5")

    return setup


def coverage(ctx: Ctx) -> tuple[list, list[Case]]:
    """Each tool adds --unstranded coverage (prefix atacseq) of the same BAM to its own fresh copy of the same genome
    h5, in place; the peer with --threads 1 (its default is 8), ours with each of ``coverage_threads``."""
    cfg = ctx.cfg
    cases = []
    warm = []
    for records, bp, reads in cfg["coverage"]:
        d = ctx.inputs() / f"coverage_{records}x{bp}bp_{reads}reads_seed1"
        name = f"{records}x{bp / 1e6:g}Mbp_{reads / 1e3:g}kreads"
        bam = d / "reads.bam"
        peer = Contender(
            "helixer",
            "Helixer add_ngs_coverage.py --threads 1",
            "peer",
            lambda dd, r, bam=bam: [
                ctx.peer("peer-helixer-add-ngs-coverage"),
                "-s",
                "sp",
                "-d",
                dd / "genome.h5",
                "-b",
                bam,
                "--unstranded",
                "--dataset-prefix",
                COVERAGE_PREFIX,
                "--threads",
                "1",
            ],
            outputs=_sizes("genome.h5"),
            setup=_fresh_genome(d / "genome.h5"),
        )
        mine = [
            Contender(
                f"chromaflow t{t}",
                f"chromaflow add-coverage --threads {t}",
                "ours",
                lambda dd, r, bam=bam, t=t: ours(
                    "add-coverage",
                    "--h5",
                    dd / "genome.h5",
                    "--prefix",
                    COVERAGE_PREFIX,
                    "--bam",
                    bam,
                    "--unstranded",
                    "--threads",
                    t,
                ),
                outputs=_sizes("genome.h5"),
                setup=_fresh_genome(d / "genome.h5"),
            )
            for t in cfg["coverage_threads"]
        ]

        def agree(dirs: dict, mine=mine) -> dict:
            per = {
                c.key: _agree("coverage", dirs[c.key] / "genome.h5", dirs["helixer"] / "genome.h5", COVERAGE_PREFIX)
                for c in mine
            }
            return {
                "ok": all(v.get("ok") for v in per.values()),
                "per_contender": per,
                "detail": "; ".join(f"{k}: {v.get('detail')}" for k, v in per.items()),
            }

        def prepare(d=d, records=records, bp=bp, reads=reads):
            if not d.exists():
                ctx.log(f"  generating {d.name}")
                _gen("coverage", d, records, bp, reads, 1)

        cases.append(
            Case(
                "coverage",
                name,
                {
                    "records": records,
                    "bp_per_record": bp,
                    "reads": reads,
                    "read_len": 100,
                    "spliced_fraction": 0.2,
                    "intron": 1000,
                    "mode": "--unstranded",
                    "prefix": COVERAGE_PREFIX,
                    "seed": 1,
                },
                [peer, *mine],
                [(c.key, "helixer") for c in mine],
                agree,
                prepare=prepare,
                note="each run on a fresh copy of the genome h5 (not timed), updated in place; outputs "
                "must equal Helixer's (values and h5 layout)",
            )
        )
        if not warm and not ctx.quick:  # quick runs no warm-up
            wd = ctx.inputs() / "coverage_1x100000bp_2000reads_seed2"
            if not wd.exists():
                _gen("coverage", wd, 1, 100_000, 2000, 2)
            # the peer updates in place: a copy first, in the same command (each warm-up command gets a fresh dir)
            warm = [
                [
                    "sh",
                    "-c",
                    'cp "$1" "$2/w.h5" && exec "$3" -s sp -d "$2/w.h5" -b "$4" --unstranded '
                    '--dataset-prefix w --threads 1',
                    "sh",
                    wd / "genome.h5",
                    "{d}",
                    ctx.peer("peer-helixer-add-ngs-coverage"),
                    wd / "reads.bam",
                ],
                ours(
                    "add-coverage",
                    "--h5",
                    wd / "genome.h5",
                    "--prefix",
                    "w",
                    "--bam",
                    wd / "reads.bam",
                    "--unstranded",
                    "--out",
                    "{d}/w2.h5",
                ),
            ]
    return warm, cases


# --------------------------------------------------------------------------------------------------
# train: chromaflow train vs Predmoter -m train
# --------------------------------------------------------------------------------------------------
def _usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def train_variants(p: int) -> dict[str, tuple[str, list[str]]]:
    """Our training variants beside Predmoter: key -> (label, options after --batch-size 120). ``ours_procs``:
    DDP over p processes of one thread on one CPU (BatchNorm synchronised, global batch 120 = p x 120/p): the same
    arithmetic as one process."""
    return {
        "ours": ("chromaflow train --devices 1 (streaming data)", []),
        "ours_procs": (
            f"chromaflow train --devices {p} --threads 1 --batch-size {120 // p} (DDP)",
            ["--devices", str(p), "--threads", "1", "--batch-size", str(120 // p)],
        ),
        "ours_ram": ("chromaflow train --data-mode ram", ["--data-mode", "ram"]),
        "ours_bf16": ("chromaflow train --precision bf16-mixed", ["--precision", "bf16-mixed"]),
    }


def train(ctx: Ctx) -> tuple[list, list[Case]]:
    """Same files, seed 1, architecture, global batch 120, Adam lr 0.001 and epochs, on the CPU. Each run reports
    its seconds per epoch (Predmoter: its log's training start/end; ours: the metrics JSON, validation included)
    and its loss curve, which must equal Predmoter's (the fidelity test's rule)."""
    from .training import ARCH, ours_run, predmoter_run

    cfg = ctx.cfg
    files, bp, epochs, model = cfg["train_files"], cfg["train_record_bp"], cfg["train_epochs"], cfg["train_model"]
    arch = ARCH[model]
    data = ctx.inputs() / f"training_{files}x{bp}bp_seed1"
    p = _usable_cpus()
    variants = train_variants(p)
    peer = Contender(
        "predmoter",
        f"Predmoter -m train --device cpu -b 120 ({epochs} epoch{'s' * (epochs > 1)})",
        "peer",
        lambda d, r: [
            ctx.peer("peer-predmoter"),
            "-m",
            "train",
            "-i",
            data,
            "-o",
            d,
            "--seed",
            "1",
            "--device",
            "cpu",
            "-e",
            str(epochs),
            "-b",
            "120",
            *arch,
        ],
    )
    mine = [
        Contender(
            v,
            variants[v][0],
            "ours",
            lambda d, r, v=v: ours(
                "train",
                "--input-dir",
                data,
                "--out",
                d / "run",
                "--seed",
                1,
                "--epochs",
                epochs,
                "--device",
                "cpu",
                *arch,
                "--batch-size",
                120,
                *variants[v][1],
                "--metrics",
                d / "metrics.json",
            ),
        )
        for v in cfg["train_variants"]
    ]

    def per_run(key: str, d: Path) -> dict:
        r = predmoter_run(d) if key == "predmoter" else ours_run(d / "metrics.json")
        for e in r["curve"]:
            e.pop("train_start_unix", None)
            e.pop("train_end_unix", None)
        return r

    def agree(dirs: dict) -> dict:
        per = {
            c.key: _agree("losscurve", dirs[c.key] / "run" / "metrics.tsv", dirs["predmoter"] / "metrics.log")
            for c in mine
            if c.key != "ours_bf16"
        }  # bf16: its curve is recorded, not expected equal
        return {
            "ok": all(v.get("ok") for v in per.values()),
            "per_contender": per,
            "detail": "; ".join(f"{k}: {v.get('detail')}" for k, v in per.items()),
        }

    def prepare():
        if not data.exists():
            ctx.log(f"  generating {data.name}")
            _gen("training", data, files, bp, 1)
        params["chunks"] = {s: _chunks(data / s) for s in ("train", "val")}

    params = {
        "train_files": files,
        "bp_per_file": bp,
        "validation_bp": bp // 2,
        "epochs": epochs,
        "model": model,
        "arch_args": " ".join(arch) or "Predmoter defaults",
        "batch_size": 120,
        "seed": 1,
        "usable_cpus": p,
        "data": "gen.py training: fasta2h5 + add-coverage of seeded reads (atacseq --shift, h3k4me3)",
    }
    case = Case(
        "train",
        f"{files}x{bp / 1e3:g}kbp_{model}_{epochs}epoch",
        params,
        [peer, *mine],
        [(c.key, "predmoter") for c in mine],
        agree,
        per_run=per_run,
        prepare=prepare,
        note="process wall and CPU (start-up included); s / epoch from each tool's own record (Predmoter: its "
        "log's 'Training started' to 'Training ended', 1-s resolution, over the epochs; ours: the "
        "metrics JSON's epoch_s, validation included); loss curves must equal Predmoter's (rel 1e-3 or "
        "abs 1e-5 per epoch)",
    )
    return [], [case]


def _chunks(folder: Path) -> int:
    from .training import chunks

    return chunks(folder)


# --------------------------------------------------------------------------------------------------
# genie3scale: GENIE3 at genome scale (cost model, the chunked pipeline, strong and weak scaling)
# --------------------------------------------------------------------------------------------------
def _scale(*args) -> None:
    _run([PY, "-m", "harness.genie3scale", *map(str, args)], f"harness.genie3scale {args[0]}")


def cost_points(cfg: dict) -> list[dict]:
    """The cost model's points: every factor at each of its values with the others at their largest (one factor at
    a time around one centre: 3 + 2 + 2 = 7 distinct points for 3 values each)."""
    c = cfg["g3scale_cost"]
    centre = {f: max(c[f]) for f in ("samples", "regulators", "trees")}
    pts = []
    for f in ("samples", "regulators", "trees"):
        for v in c[f]:
            p = dict(centre, **{f: v})
            if p not in pts:
                pts.append(p)
    return pts


def _chunk_cost(d: Path) -> dict:
    m = json.loads((d / "m.json").read_text())
    return {
        "targets": m["targets"],
        "compute_cpu_s": m["compute_cpu_s"],
        "compute_s": m["compute_s"],
        "cpu_s_per_target": m["compute_cpu_s"] / m["targets"],
        "task_cpu_s": m["cpu_s"],
        "overhead_s": m["cpu_s"] - m["compute_cpu_s"],
        "cells": m["genes"] * m["samples"],
        "task_peak_rss_bytes": m["peak_rss_bytes"],
    }


#: disk bounds of the pipeline's tasks: a chunk's part at most its float64 weights uncompressed (8 bytes per
#: regulator x target) + 1 MiB of metadata (the gene names); a merge's outputs at most 64 bytes per link written
#: (two names, a %.9g value, gzip never much larger than the text) + 1 MiB (summary JSON and plot)
DISK_PER_WEIGHT, DISK_PER_LINK, DISK_FIXED = 8, 64, 1 << 20


def disk_bound(task: dict) -> int | None:
    if "out_bytes" not in task:
        return None
    if task["task"].startswith("chunk"):
        return DISK_PER_WEIGHT * task["regulators"] * task["targets"] + DISK_FIXED
    return DISK_PER_LINK * task["links"] + DISK_FIXED


def _bound_check(bounds: dict):
    """agree(): every task's peak RSS (wait4) of the pipeline's tasks.json against its bound, and its output
    bytes against :func:`disk_bound`; AUPR shown."""

    def check(dirs: dict) -> dict:
        bad, worst = [], {}
        for key, d in dirs.items():
            doc = json.loads((d / "w" / "tasks.json").read_text())
            tasks = [doc["plan_task"], *doc["chunks"], *doc["merges"]]
            for t in tasks:
                kind = "chunk" if t["task"].startswith("chunk") else t["task"]
                worst[kind] = max(worst.get(kind, 0), t["peak_rss_bytes"])
                if t["peak_rss_bytes"] > bounds[kind]:
                    bad.append(
                        f"{key} {t['task']}: peak RSS {t['peak_rss_bytes'] / 2**20:.0f} MiB > bound "
                        f"{bounds[kind] / 2**20:.0f} MiB"
                    )
                db = disk_bound(t)
                if db is not None and t["out_bytes"] > db:
                    bad.append(f"{key} {t['task']}: {t['out_bytes']:,} bytes written > disk bound {db:,}")
        detail = (
            "; ".join(bad)
            if bad
            else "per-task peak RSS within bounds: "
            + ", ".join(f"{k} {v / 2**20:.0f} ≤ {bounds[k] / 2**20:.0f} MiB" for k, v in sorted(worst.items()))
            + (
                "; every task's output bytes within its disk bound"
                if any(
                    "out_bytes" in t
                    for d in dirs.values()
                    for t in json.loads((d / "w" / "tasks.json").read_text())["chunks"]
                )
                else ""
            )
        )
        return {"ok": not bad, "detail": detail, "worst_rss_bytes": worst}

    return check


def _tasks_summary(key: str, d: Path) -> dict:
    doc = json.loads((d / "tasks.json").read_text())
    ch = doc["chunks"]
    out = {
        "plan": doc["plan"],
        "parallel": doc["parallel"],
        "chunks_run": len(ch),
        "chunks_wall_s": doc["chunks_wall_s"],
        "pipeline_wall_s": doc["wall_s"],
        "chunk_wall_s": [c["wall_s"] for c in ch],
        "chunk_cpu_s": [c["cpu_s"] for c in ch],
        "chunk_compute_cpu_s": [c.get("compute_cpu_s") for c in ch],
        "chunk_targets": [c["targets"] for c in ch],
        "chunk_peak_rss_bytes": max(c["peak_rss_bytes"] for c in ch),
        "chunk_out_bytes": max((c.get("out_bytes") or 0) for c in ch) or None,
        "plan_task": doc["plan_task"],
        "merges": doc["merges"],
        "score": doc["score"],
    }
    return out


def genie3scale(ctx: Ctx) -> tuple[list, list[Case]]:
    cfg = ctx.cfg
    c = cfg["g3scale_cost"]
    G, R, S, N = cfg["g3scale_predict"]
    bounds = cfg["g3scale_rss_bound"]
    cases = []
    # (a) the cost model: one chunk of ~TARGETS non-TF targets (the last chunk: TFs come first in the file)
    cost_genes = max(c["regulators"]) + c["extra_genes"]
    cost_dir = ctx.inputs() / f"g3scale_cost_{cost_genes}x{max(c['samples'])}_seed7"
    n_chunks = cost_genes // c["targets"]

    def make_cost():
        if not (cost_dir / "truth.json").exists():
            _scale(
                "make",
                cost_dir,
                7,
                cost_genes,
                max(c["regulators"]),
                max(c["samples"]),
                "--sample-subsets",
                ",".join(str(x) for x in c["samples"] if x != max(c["samples"])),
                "--regulator-subsets",
                ",".join(str(x) for x in c["regulators"] if x != max(c["regulators"])),
            )

    for p in cost_points(cfg):
        expr = cost_dir / ("expression.tsv" if p["samples"] == max(c["samples"]) else f"expression_s{p['samples']}.tsv")
        regs = cost_dir / (
            "regulators.txt" if p["regulators"] == max(c["regulators"]) else f"regulators_r{p['regulators']}.txt"
        )
        con = Contender(
            "chromaflow",
            f"chromaflow genie3 --targets-chunk {n_chunks}/{n_chunks} --threads 1",
            "ours",
            lambda d, r, expr=expr, regs=regs, p=p: ours(
                "genie3",
                "--expression",
                expr,
                "--layout",
                "genes-x-samples",
                "--regulators",
                regs,
                "--n-trees",
                p["trees"],
                "--threads",
                "1",
                "--targets-chunk",
                f"{n_chunks}/{n_chunks}",
                "--out",
                d / "part.npz",
                "--metrics",
                d / "m.json",
            ),
        )
        cases.append(
            Case(
                "genie3scale",
                f"cost_s{p['samples']}_r{p['regulators']}_t{p['trees']}",
                {"series": "cost", **p, "genes": cost_genes, "chunk": f"{n_chunks}/{n_chunks}"},
                [con],
                [],
                per_run=lambda key, d: _chunk_cost(d),
                prepare=make_cost,
                note="CPU s per target = the metrics' compute_cpu_s (tree growing, --threads 1) / targets",
            )
        )
    # (b) + (c): the plan -> chunks -> merge path, 1 and 2 tasks at a time (local processes), and weak scaling
    PG, PT, PS, PN, PC = cfg["g3scale_pipeline"]
    pdir = ctx.inputs() / f"g3scale_planted_{PG}x{PT}x{PS}_seed11"

    def make_pipe():
        if not (pdir / "truth.json").exists():
            _scale("make", pdir, 11, PG, PT, PS)

    reps = cfg["g3scale_pipeline_repeats"]

    def pipe_contender(kind: str, what: str, par: int, extra: list) -> Contender:
        """``python -m harness.genie3scale KIND`` (pipeline: local processes; slurm: SLURM jobs) on the planted run."""
        return Contender(
            "chromaflow",
            what,
            "ours",
            lambda d, r: list(
                map(
                    str,
                    [
                        PY,
                        "-m",
                        "harness.genie3scale",
                        kind,
                        d / "w",
                        pdir / "expression.tsv",
                        pdir / "regulators.txt",
                        pdir / "gold.tsv",
                        PN,
                        PC,
                        par,
                        *extra,
                    ],
                )
            ),
            repeats=reps,
            env={"PYTHONPATH": os.pathsep.join(x for x in (str(BENCH), os.environ.get("PYTHONPATH", "")) if x)},
        )

    for name, par, only in (("strong_p1", 1, None), ("strong_p2", 2, None), ("weak_p1", 1, 1), ("weak_p2", 2, 2)):
        extra = [] if only is None else ["--chunks-only", only]
        what = (
            f"genie3-plan -> {PG // PC} x genie3 --targets-chunk ({par} at a time) -> genie3-merge"
            if only is None
            else f"the first {only} chunk(s) of {PG // PC}, {par} at a time"
        )
        con = pipe_contender("pipeline", what, par, extra)
        cases.append(
            Case(
                "genie3scale",
                f"pipeline_{name}",
                {
                    "series": name.split("_")[0],
                    "tasks": par,
                    "genes": PG,
                    "regulators": PT,
                    "samples": PS,
                    "trees": PN,
                    "chunk_size": PC,
                    "chunks_only": only,
                    "rss_bounds": bounds,
                    "executor": "local processes (harness.genie3scale; not SLURM)",
                },
                [con],
                [],
                agree=_bound_check(bounds),
                per_run=lambda key, d: _tasks_summary(key, d / "w"),
                prepare=make_pipe,
                note="tasks as fresh processes, wall/CPU/peak RSS of each from wait4; a task over its "
                "RSS bound fails the case",
            )
        )
    # (d) the same through SLURM: the real pipeline, -profile slurm, on a single-node cluster started by the run
    # (harness.slurm_cluster, as root), 1 and 2 jobs of one CPU at a time; weak: 1 and 2 chunks of PC genes
    no_slurm = SlurmCluster.unavailable()
    for name, par, genes in (
        ("strong_p1", 1, None),
        ("strong_p2", 2, None),
        ("weak_p1", 1, PC),
        ("weak_p2", 2, 2 * PC),
    ):
        extra = [] if genes is None else ["--genes", genes]
        g = genes or PG
        what = f"-profile slurm: GENIE3_PLAN -> {g // PC} GENIE3 jobs ({par} at a time) -> GENIE3_MERGE, {g:,} genes"
        con = pipe_contender("slurm", what, par, extra)
        cases.append(
            Case(
                "genie3scale",
                f"slurm_{name}",
                {
                    "series": "slurm_" + name.split("_")[0],
                    "tasks": par,
                    "genes": g,
                    "regulators": PT,
                    "samples": PS,
                    "trees": PN,
                    "chunk_size": PC,
                    "rss_bounds": bounds,
                    "executor": "SLURM 22.05 (-profile slurm; one node, 2 CPUs, started by the run)",
                },
                [con],
                [],
                agree=_bound_check(bounds),
                per_run=lambda key, d: _tasks_summary(key, d / "w"),
                prepare=make_pipe,
                skip=f"SLURM unavailable: {no_slurm}" if no_slurm else None,
                note="every task an sbatch job; wall/CPU/peak RSS from Nextflow's trace; the chunk "
                "phase from the first GENIE3 job's start to the last one's end",
            )
        )
    # the merge alone at the predicted size: synthetic parts (harness.genie3scale.make_parts), both merge paths
    MT, MR, MC = cfg["g3scale_merge"]
    mdir = ctx.inputs() / f"g3scale_parts_{MT}x{MR}_{MC}chunks"
    mparts = [mdir / f"part{i}.npz" for i in range(1, MC + 1)]
    mb = cfg["g3scale_merge_bound"]
    env = {"PYTHONPATH": os.pathsep.join(x for x in (str(BENCH), os.environ.get("PYTHONPATH", "")) if x)}

    def task(d: Path, *argv) -> list[str]:
        return list(map(str, [PY, "-m", "harness.genie3scale", "task", d / "task.json", "--", *ours(*argv)]))

    merge_cons = [
        Contender(
            "merge",
            "genie3-merge --max-links 100000 --summary --plot (the pipeline's merge)",
            "ours",
            lambda d, r: task(
                d,
                "genie3-merge",
                "--max-links",
                "100000",
                "--out",
                d / "top.tsv.gz",
                "--summary",
                d / "s.json",
                "--plot",
                d / "p.png",
                "--threads",
                "1",
                *mparts,
            ),
            env=env,
        ),
        Contender(
            "merge_streamed",
            "genie3-merge --max-links 100000 (streamed)",
            "ours",
            lambda d, r: task(
                d, "genie3-merge", "--max-links", "100000", "--out", d / "top.tsv.gz", "--threads", "1", *mparts
            ),
            env=env,
        ),
    ]

    def merge_bounds(dirs: dict) -> dict:
        bad, got = [], []
        for key, d in dirs.items():
            rss = json.loads((d / "task.json").read_text())["peak_rss_bytes"]
            got.append(f"{key} {rss / 2**20:.0f} ≤ {mb[key] / 2**20:.0f} MiB")
            if rss > mb[key]:
                bad.append(f"{key}: peak RSS {rss / 2**20:.0f} MiB > bound {mb[key] / 2**20:.0f} MiB")
        return {"ok": not bad, "detail": "; ".join(bad) or "peak RSS within bounds: " + ", ".join(got)}

    cases.append(
        Case(
            "genie3scale",
            f"merge_{MT}x{MR}",
            {
                "series": "merge",
                "targets": MT,
                "regulators": MR,
                "chunks": MC,
                "rss_bounds": mb,
                "dense_copy_bytes": MT * MR * 8,
            },
            merge_cons,
            [],
            agree=merge_bounds,
            per_run=lambda key, d: {"task": json.loads((d / "task.json").read_text())},
            prepare=lambda: _scale("parts", mdir, MT, MR, MC),
            note="synthetic parts of the predicted run's shape (70 % zeros); peak RSS of the merge "
            "process itself (wait4) against the bounds: a failed bound fails the case",
        )
    )
    return [], cases


# --------------------------------------------------------------------------------------------------
# scaling: our cost vs input size
# --------------------------------------------------------------------------------------------------
def scaling(ctx: Ctx) -> tuple[list, list[Case]]:
    cfg = ctx.cfg
    cases = []
    for mbp in cfg["scaling_fasta2h5_mbp"]:
        fa = fasta(ctx, int(mbp * 1e6), 4, seed=5, make=False)
        c = Contender(
            "chromaflow",
            "chromaflow fasta2h5 (default)",
            "ours",
            lambda d, r, fa=fa: ours("fasta2h5", "--fasta", fa, "--species", SPECIES, "--out", d / "out.h5"),
            outputs=_sizes("out.h5"),
        )
        cases.append(
            Case(
                "scaling",
                f"fasta2h5_{mbp:g}Mbp",
                {"series": "fasta2h5", "size": mbp, "unit": "Mbp", "records": 4},
                [c],
                [],
                prepare=lambda mbp=mbp: fasta(ctx, int(mbp * 1e6), 4, seed=5),
            )
        )
    for mbp in cfg["scaling_bigwig_mbp"]:
        pred, skip = _predictions(ctx, mbp, "realistic")
        c = Contender(
            "chromaflow",
            "chromaflow bigwig (bigWig, avg)",
            "ours",
            lambda d, r, pred=pred: ours(
                "bigwig", "--predictions", pred, "--outdir", d, "--basename", "bench", "--no-browser-files"
            ),
        )
        cases.append(
            Case(
                "scaling",
                f"bigwig_{mbp:g}Mbp",
                {"series": "bigwig", "size": mbp, "unit": "Mbp"},
                [c],
                [],
                skip=skip,
                prepare=lambda mbp=mbp: _predictions(ctx, mbp, "realistic", make=True),
            )
        )
    s, t = cfg["scaling_genie3_samples"], cfg["scaling_genie3_trees"]
    for g in cfg["scaling_genie3_genes"]:
        expr = ctx.inputs() / f"expression_{g}x{s}_seed2.tsv"
        c = Contender(
            "chromaflow",
            f"chromaflow genie3 --n-trees {t} --threads 2",
            "ours",
            lambda d, r, expr=expr: ours(
                "genie3",
                "--expression",
                expr,
                "--layout",
                "samples-x-genes",
                "--n-trees",
                t,
                "--threads",
                "2",
                "--out",
                d / "links.tsv.gz",
            ),
        )
        cs = [c]
        if g <= cfg["scaling_genie3_peer_max_genes"]:  # the ratio as genes grow, where the peer ends in minutes
            cs.append(
                Contender(
                    "arboreto genie3",
                    f"arboreto 0.1.6 GENIE3 (RF, {t} trees, 2 dask workers)",
                    "peer",
                    lambda d, r, expr=expr: [
                        ctx.peer("peer-arboreto-python"),
                        ctx.peers / "checks" / "arboreto_genie3.py",
                        expr,
                        d / "links.tsv",
                        "--trees",
                        str(t),
                        "--seed",
                        "1",
                        "--workers",
                        "2",
                    ],
                )
            )
        cases.append(
            Case(
                "scaling",
                f"genie3_{g}genes",
                {"series": "genie3", "size": g, "unit": "genes", "samples": s, "trees": t},
                cs,
                [("chromaflow", "arboreto genie3")] if len(cs) > 1 else [],
                prepare=lambda expr=expr, g=g: expr.exists() or _gen("expression", expr, g, s, 2, str(expr) + ".gold"),
            )
        )
    return [], cases


# --------------------------------------------------------------------------------------------------
# scale: the real pipeline (-profile test, tiny model, local executor) on synthetic assemblies (issue 30 §2);
# harness/scale.py runs and measures it, harness/synth.py writes the inputs
# --------------------------------------------------------------------------------------------------
#: one assembly shape at every size (a draft genome: 10 huge records and a long tail of 1-20 kbp contigs), scaled:
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


def _scale_env() -> dict:
    pp = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": str(BENCH) + (os.pathsep + pp if pp else "")}


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
    from .scale import check_disk, check_task_memory

    bad = check_task_memory(rec["processes"])
    bad += [f"{f}: pyBigWig cannot open it" for f in rec.get("unreadable_browser_files", [])[:5]]
    if disk:
        shard = rec["processes"].get("PREDICT", {}).get("max_wchar_bytes", 0)
        bad += check_disk(rec["peak_work_bytes"], rec["outputs_bytes"], shard)
    return bad


def scale(ctx: Ctx) -> tuple[list, list[Case]]:
    """The pipeline at scale, measured from outside (harness/scale.py): per-process wall, CPU, peak RSS and task
    counts from the trace, the driver's RSS and CPU and the disk of work/ and the outdir sampled every second. The
    bounds are checked from the measured numbers; a failed bound fails the case (``agreement.ok`` False)."""
    from . import scale as S
    from .synth import lengths, single_sheet, write_assembly, write_sheet

    cfg = SCALE_QUICK if ctx.quick else SCALE_FULL
    # a full run takes up to hours: not run again after a failure (that would double the time and remove the failed
    # attempt's logs); the quick ones keep the harness's one retry
    retries = 1 if ctx.quick else 0
    sd = _scale_dir(ctx)
    cases = []
    fastas: dict[str, Path] = {}
    totals: dict[str, int] = {}
    for i, (name, rec_bp, records, contigs) in enumerate(cfg["genomes"]):
        fa = ctx.inputs() / f"scale_{name}_{records}x{rec_bp}_{contigs}ctg_seed{SCALE_SEED}.fa"
        fastas[name] = fa
        sheet = ctx.inputs() / f"{fa.stem}.samplesheet.csv"
        smaller = cfg["genomes"][i - 1][0] if i else None

        total_bp = totals[name] = sum(n for _, n in lengths(SCALE_SEED, [rec_bp] * records, (contigs, *SCALE_CONTIGS)))

        def prepare(fa=fa, sheet=sheet, name=name, rec_bp=rec_bp, records=records, contigs=contigs, total_bp=total_bp):
            if not fa.exists():
                ctx.log(f"  generating {fa.name}")
                write_assembly(fa, SCALE_SEED, [rec_bp] * records, (contigs, *SCALE_CONTIGS))
            single_sheet(sheet, f"scale{name}", fa)
            S.check_free_disk(ctx.work, total_bp, name)

        c = Contender(
            "pipeline",
            f"nextflow run main.nf -profile test --predict_from fasta ({name})",
            "ours",
            lambda d, r, sheet=sheet: [
                PY,
                "-m",
                "harness.scale",
                "run",
                d,
                sheet,
                "--shard-rows",
                str(cfg["shard_rows"]),
            ],
            repeats=1,
            env=_scale_env(),
            retries=retries,
        )

        def agree(dirs: dict, name=name, smaller=smaller) -> dict:
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
                else f"bounds hold: per-task peak RSS <= 2 GiB, work/ <= outputs + "
                f"one shard's temporaries + slack; {flat}",
            }

        cases.append(
            Case(
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
                agree,
                per_run=_scale_per_run(ctx, name),
                prepare=prepare,
                note="the whole pipeline; the bounds are checked from the measured numbers",
            )
        )

    name = cfg["resume"]
    fa = fastas[name]
    sheet = ctx.inputs() / f"{fa.stem}.samplesheet.csv"
    c = Contender(
        "pipeline",
        f"kill -9 during PREDICT, then -resume ({name})",
        "ours",
        lambda d, r: [PY, "-m", "harness.scale", "resume", d, sheet, "--shard-rows", str(cfg["shard_rows"])],
        repeats=1,
        env=_scale_env(),
        retries=retries,
    )

    def resume_agree(dirs: dict, name=name) -> dict:
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

    def resume_prepare(fa=fa):
        if not fa.exists() or not sheet.exists():
            raise RuntimeError(f"{fa.name}: run the case size_{name} first")
        S.check_free_disk(ctx.work, totals[name], f"resume_{name}")

    cases.append(
        Case(
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
            resume_agree,
            per_run=_scale_per_run(ctx, None),
            prepare=resume_prepare,
            note="killed run + one -resume; only unfinished PREDICT shards may rerun; outputs equal the "
            "uninterrupted run's (md5 of h5 datasets, bigWig/bigBed/BED bytes)",
        )
    )

    n, n_expr, rec_bp, contigs = cfg["many"]
    md = ctx.inputs() / f"scale_many_{n}x{rec_bp}_{contigs}ctg_{n_expr}expr_seed{SCALE_SEED}"

    def many_prepare():
        if not (md / "samplesheet.csv").exists():
            ctx.log(f"  generating {md.name}")
            write_sheet(md, n, SCALE_SEED, [rec_bp], (contigs, *SCALE_CONTIGS), n_expr)

    def many_argv(group_mbp):
        return lambda d, r: [
            PY,
            "-m",
            "harness.scale",
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
    c = Contender(
        "pipeline",
        f"nextflow run main.nf -profile test, {n} assemblies in one sheet, --predict_group_mbp {SCALE_GROUP_MBP:g}",
        "ours",
        many_argv(SCALE_GROUP_MBP),
        repeats=1,
        env=_scale_env(),
        retries=retries,
    )
    c_one = Contender(
        "ungrouped",
        "the same with --predict_group_mbp 0 (one PREDICT task per assembly)",
        "ours",
        many_argv(0),
        repeats=1,
        env=_scale_env(),
        retries=retries,
    )

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

    cases.append(
        Case(
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
            many_agree,
            per_run=_scale_per_run(ctx, None),
            prepare=many_prepare,
            note="one sheet of many small assemblies: the driver's memory and overhead per task, the reports' size",
        )
    )
    return [], cases


BUILDERS = {
    "fasta2h5": fasta2h5,
    "predict": predict,
    "bigwig": bigwig,
    "peaks": peaks,
    "genie3": genie3,
    "network": network,
    "coverage": coverage,
    "train": train,
    "genie3scale": genie3scale,
    "scaling": scaling,
    "scale": scale,
}

#: launchers each stage needs
PEERS_NEEDED = {
    "fasta2h5": ["peer-helixer-fasta2h5"],
    "predict": ["peer-predmoter"],
    "bigwig": ["peer-predmoter-convert"],
    "peaks": [],
    "genie3": ["peer-arboreto-python", "peer-genie3-python"],
    "network": [],
    "coverage": ["peer-helixer-add-ngs-coverage"],
    "train": ["peer-predmoter"],
    "genie3scale": [],
    "scaling": ["peer-arboreto-python"],
    "scale": [],
}
