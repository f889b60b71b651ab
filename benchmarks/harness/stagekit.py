"""What every stage builder of ``benchmarks/run`` shares: the run context (:class:`Ctx`: peers, work dir, sizes,
repeats), our command line, the seeded inputs made in child processes, and the output comparisons run as
children (``benchmarks.harness.agree``)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .env import ROOT, child_env, module

PY = sys.executable


SPECIES = "Bench_species"


L = 21384


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
        """Every stage's sizes of this run (``QUICK`` with --quick, else ``FULL``)."""
        from ..stages import sizes as stage_sizes

        return stage_sizes(self.quick)

    def peer(self, name: str) -> str:
        return str(self.peers / "bin" / name)

    def inputs(self) -> Path:
        d = self.inputs_dir or self.work / "inputs"
        d.mkdir(parents=True, exist_ok=True)
        return d


def ours(*args) -> list[str]:
    return [PY, "-m", "chromaflow", *map(str, args)]


#: the benchmarks folder (the working directory of the input generators)
BENCH = ROOT / "benchmarks"


def run_checked(argv: list[str], what: str) -> None:
    p = subprocess.run(list(map(str, argv)), capture_output=True, text=True, cwd=BENCH, env=child_env())
    if p.returncode != 0:
        raise RuntimeError(f"{what} failed: {' '.join(map(str, argv))}\n{p.stderr[-2000:]}")


def score_links(links: Path, gold: Path) -> dict:
    """``harness.agree``'s AUROC/AUPR of a link list, in this process: scikit-learn is imported once, not once per
    scored run (~1.3 CPU-s each; a quick run scores some 20). A crash is a failed comparison, as in
    :func:`agree_child`."""
    from . import agree

    try:
        return agree.score(str(links), str(gold))
    except Exception as exc:  # noqa: BLE001 -- reported like a crashed comparison child
        return {"ok": False, "detail": f"comparison crashed: {type(exc).__name__}: {exc}"}


def agree_child(*args) -> dict:
    p = subprocess.run([*module("agree"), *map(str, args)], capture_output=True, text=True, cwd=BENCH, env=child_env())
    if p.returncode != 0:
        return {"ok": False, "detail": "comparison crashed: " + (p.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def gen(*args) -> None:
    run_checked([*module("gen"), *map(str, args)], f"generating {args[0]}")


def sizes(*names: str):
    def f(d: Path) -> dict:
        return {n: (d / n).stat().st_size for n in names if (d / n).exists()}

    return f


def fasta(ctx: Ctx, total: int, records: int, seed: int = 42, make: bool = True) -> Path:
    p = ctx.inputs() / f"random_{total}bp_{records}rec_seed{seed}.fa"
    if make and not p.exists():
        ctx.log(f"  generating {p.name}")
        gen("fasta", p, total, records, seed)
    return p


#: the predictions generator (``python -m benchmarks.harness.synth_predictions``)
GENERATOR = ROOT / "benchmarks" / "harness" / "synth_predictions.py"


def predictions(ctx: Ctx, mbp: float, mode: str, seed: int = 1, make: bool = False) -> tuple[Path | None, str | None]:
    if not GENERATOR.exists():
        return None, (
            f"generator missing: {GENERATOR.relative_to(ROOT)} (written by the bigwig engineer) is not on this branch"
        )
    p = ctx.inputs() / f"predictions_{mode}_{mbp:g}Mbp_seed{seed}.h5"
    if make and not p.exists():
        ctx.log(f"  generating {p.name}")
        tmp = p.with_name(p.name + ".tmp.h5")
        run_checked(
            [*module("synth_predictions"), "--mbp", f"{mbp:g}", "--mode", mode, "--seed", str(seed), "--out", tmp],
            "synth_predictions",
        )
        tmp.replace(p)
    return p, None


def count_chunks(folder: Path) -> int:
    from .training import chunks

    return chunks(folder)


def require_cuda() -> None:
    """NotRunnable (the case is skipped with the reason) unless torch sees a CUDA device, asked in a child."""
    from .core import NotRunnable

    p = subprocess.run(
        [PY, "-c", "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)"],
        capture_output=True,
        env=child_env(),
    )
    if p.returncode != 0:
        raise NotRunnable("CUDA is not available here (torch.cuda.is_available() is False)")


def seeded_model(ctx: Ctx, path: Path, preset: str) -> None:
    """``make-test-model --preset preset --seed 0`` at ``path`` when absent (written beside it, then renamed)."""
    if not path.exists():
        ctx.log(f"  writing {path.name}")
        tmp = path.with_name(path.name + ".tmp.ckpt")
        run_checked(ours("make-test-model", "--out", tmp, "--preset", preset, "--seed", 0, "--force"), "model")
        tmp.replace(path)
