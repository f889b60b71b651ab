"""Measuring, alternating and recording: the parts of ``benchmarks/run`` that know nothing of the stages."""

from __future__ import annotations

import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from chromaflow.report.machine import machine_info  # noqa: F401 - the machine record of every results file

from .env import ROOT, child_env
from .timer import TreeSampler, loadavg

HERE = Path(__file__).resolve().parent

RUNNER = HERE / "runner.py"
SCHEMA = "chromaflow-bench-run/1"
# GENIE3: the key of our --importance tree-normalised contender (arboreto's importance), in cases and tables
TREE_NORMALISED = "chromaflow tree-normalised"


# --------------------------------------------------------------------------------------------------
# the machine: the package's one machine record (src/chromaflow/report/machine.py)
# --------------------------------------------------------------------------------------------------
def software_versions() -> dict:
    """Installed versions (package metadata: nothing is imported, so the harness stays small)."""
    from importlib import metadata

    out = {}
    for dist in ("numpy", "h5py", "torch", "pyBigWig", "pybigtools", "scikit-learn", "isal", "deflate", "chromaflow"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    if out["chromaflow"] is None:  # run from the checkout (scripts/env.sh puts src/ on PYTHONPATH)
        try:
            out["chromaflow"] = __import__("chromaflow").__version__ + " (checkout)"
        except Exception:  # noqa: BLE001
            pass
    return out


def git_state() -> dict:
    """The checkout's commit and whether it has uncommitted changes (commit None where git or the repository is
    missing, e.g. a tree copied to a device machine)."""

    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        except OSError:
            return ""

    return {"commit": git("rev-parse", "HEAD") or None, "dirty": bool(git("status", "--porcelain"))}


# --------------------------------------------------------------------------------------------------
# one timed run: the runner (a small interpreter) times it with timer.measure, the one process timer
# --------------------------------------------------------------------------------------------------
def timed_run(argv: list[str], cwd: Path, env: dict | None = None, timeout: float | None = None) -> dict:
    """Run ``argv`` in ``cwd`` through the runner; wall/CPU/RSS, load before/after, exit status."""
    cwd.mkdir(parents=True, exist_ok=True)
    fd, res_path = tempfile.mkstemp(prefix=".run.", suffix=".json", dir=cwd)
    os.close(fd)
    full_env = child_env({"CHROMAFLOW_PROGRESS": "0", **(env or {})})
    load0 = loadavg()
    proc = subprocess.Popen(
        [sys.executable, "-S", "-E", "-s", str(RUNNER), res_path, str(cwd), "--", *argv],
        env=full_env,
        stdin=subprocess.DEVNULL,
    )
    with TreeSampler(proc.pid) as ts:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_tree(proc.pid)
            proc.wait()
            raise RuntimeError(f"timed out after {timeout} s: {' '.join(argv)}") from None
    rec = json.loads(Path(res_path).read_text() or "{}")
    os.unlink(res_path)
    rec.update(
        load_before=load0,
        load_after=loadavg(),
        peak_tree_rss_bytes=max(ts.peak, rec.get("maxrss_bytes", 0)),
        processes=ts.nproc,
        tree_cpu_s=round(ts.cpu_s, 4),
    )
    # CPU: wait4 counts the descendants that were waited for; processes nobody waits for (DDP ranks, daemons) only
    # the sampled tree sees (a lower bound: up to one 50-ms sample late), so the larger of the two
    if "cpu_s" in rec:
        rec["cpu_s"] = max(rec["cpu_s"], ts.cpu_s)
    rec["peak_rss_bytes"] = rec.pop("maxrss_bytes", None)
    for k in ("wall_s", "user_s", "sys_s", "cpu_s"):
        if k in rec:
            rec[k] = round(rec[k], 4)
    return rec


def _kill_tree(pid: int) -> None:
    import psutil

    try:
        root = psutil.Process(pid)
        procs = root.children(recursive=True) + [root]
    except psutil.Error:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass


# --------------------------------------------------------------------------------------------------
# statistics
# --------------------------------------------------------------------------------------------------
def summarize(values: list[float]) -> dict | None:
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    n = len(v)
    q = statistics.quantiles(v, n=4, method="inclusive") if n >= 2 else [v[0], v[0], v[0]]
    return {"n": n, "median": statistics.median(v), "min": v[0], "max": v[-1], "q1": q[0], "q3": q[2]}


def ratio(peer: dict | None, ours: dict | None) -> dict | None:
    """Peer cost / our cost: ratio of medians, and the widest ratio the runs allow (min/max over max/min)."""
    if not peer or not ours or not ours["median"] or not ours["min"]:
        return None
    return {
        "of_medians": peer["median"] / ours["median"],
        "low": peer["min"] / ours["max"],
        "high": peer["max"] / ours["min"],
    }


# --------------------------------------------------------------------------------------------------
# cases
# --------------------------------------------------------------------------------------------------
class NotRunnable(Exception):
    """Raised by a case's ``prepare`` when this machine cannot run it (e.g. too little free disk): the message is
    recorded as the case's skip reason, and nothing is started."""


@dataclass
class Contender:
    key: str  # unique within the case, e.g. "chromaflow", "helixer"
    label: str  # shown in tables: the command in words
    role: str  # "ours" or "peer"
    argv: Callable[[Path, int], list[str]]  # (run dir, repeat index) -> command line
    repeats: int | None = None  # default: the run's --repeats
    env: dict = field(default_factory=dict)
    outputs: Callable[[Path], dict] = lambda d: {}  # run dir -> {name: size in bytes} (recorded)
    seed_for_repeat: bool = False  # GENIE3: repeat r runs with seed r + 1 (recorded with the run)
    # (run dir, repeat index) -> None: untimed, just before each run (and again before its retry), e.g. a fresh
    # copy of an input that the command updates in place (add-coverage)
    setup: Callable[[Path, int], None] | None = None
    # runs again once after a failure (a tool may fail for reasons of the moment); 0 for hours-long runs (the scale
    # stage), where a second attempt doubles the time and removes the failed attempt's logs
    retries: int = 1


@dataclass
class Case:
    stage: str
    name: str
    params: dict
    contenders: list[Contender]
    # (ours key, peer key) -> ratio reported; the first pair is the case's headline
    pairs: list[tuple[str, str]]
    # run dirs of repeat 0 of every contender -> {"ok": bool|None, "detail": str, ...}
    agree: Callable[[dict[str, Path]], dict] | None = None
    # after each run: run dir -> extra fields stored with the run (e.g. AUROC/AUPR)
    per_run: Callable[[str, Path], dict] | None = None
    skip: str | None = None  # reason this case cannot run here (recorded, not an error)
    prepare: Callable[[], None] | None = None  # make the inputs (seeded, cached in the work dir) just before
    note: str = ""
    keep_outputs: bool = False

    @property
    def id(self) -> str:
        return f"{self.stage}/{self.name}"


def _case_record(case: Case) -> dict:
    """A case's record before its runs: what it is, the machine, when it started."""
    return {
        "stage": case.stage,
        "case": case.name,
        "id": case.id,
        "params": case.params,
        "note": case.note,
        "machine": MACHINE_BRIEF,
        "started": now(),
        "runs": [],
        "contenders": {},
    }


def _skipped(case: Case, rec: dict, log: Callable[[str], None]) -> bool:
    """Make the case's inputs; True (the reason recorded) when it is skipped or they cannot be made."""
    if case.skip:
        rec.update(skipped=case.skip, finished=now())
        log(f"  skipped: {case.skip}")
        return True
    if case.prepare:
        try:
            case.prepare()
        except NotRunnable as exc:
            rec.update(skipped=str(exc), not_runnable=True, finished=now())
            log(f"  skipped: {rec['skipped']}")
            return True
        except Exception as exc:  # noqa: BLE001 - the inputs could not be made: recorded as skipped
            rec.update(skipped=f"inputs could not be made: {exc}", finished=now())
            log(f"  skipped: {rec['skipped']}")
            return True
    return False


def _attempts(c: Contender, argv: list, d: Path, r: int, timeout: float | None, log: Callable[[str], None]) -> dict:
    """Repeat ``r`` of ``c`` in ``d``, run again after a failure up to ``c.retries`` times: the last attempt's
    measurement, the failed ones listed in it."""
    env = dict(c.env)
    attempts = []
    for attempt in range(c.retries + 1):  # a tool may fail for reasons of the moment (e.g. dask's start-up
        try:  # timeout on a saturated machine); a failed attempt stays recorded
            if c.setup:
                c.setup(d, r)
            m = timed_run(argv, d, env, timeout=timeout)
        except RuntimeError as exc:  # timed out: recorded as a failed run
            m = {"exit": None, "wall_s": timeout, "load_before": loadavg(), "load_after": loadavg()}
            (d / "stderr.txt").write_text(str(exc))
        if m.get("exit") == 0 or attempt == c.retries:
            break
        tail = (d / "stderr.txt").read_text(errors="replace").strip().splitlines()[-3:]
        attempts.append({"exit": m.get("exit"), "wall_s": m.get("wall_s"), "error": " | ".join(tail)})
        log(f"  {c.key} r{r}: exit {m.get('exit')}, running it once more")
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    if attempts:
        m["failed_attempts"] = attempts
    return m


def _label_run(case: Case, c: Contender, d: Path, r: int, m: dict, failed: dict, log: Callable[[str], None]) -> None:
    """Add to a run's measurement its contender, repeat, outputs and seed, and its error (also into ``failed``) or
    the case's per-run fields."""
    m.update(contender=c.key, repeat=r, outputs=c.outputs(d))
    if c.seed_for_repeat:
        m["seed"] = r + 1
    if m.get("exit") != 0:
        err = (d / "stderr.txt").read_text(errors="replace").strip().splitlines()[-5:]
        failed[c.key] = f"exit {m.get('exit')}: " + " | ".join(err)
        m["error"] = failed[c.key]
        log(f"  {c.key} r{r}: FAILED {failed[c.key]}")
    else:
        if case.per_run:
            m.update(case.per_run(c.key, d))
        log(
            f"  {c.key:<28} r{r}  wall {m['wall_s']:8.2f} s  cpu {m['cpu_s']:8.2f} s  "
            f"rss {m['peak_tree_rss_bytes'] / 2**20:7.0f} MiB  load {m['load_before'][:1]}"
        )


def _alternate(
    case: Case, cdir: Path, work: Path, repeats: int, rec: dict, log: Callable[[str], None], timeout: float | None
) -> tuple[dict[str, Path], dict[str, str]]:
    """The contenders in turn (A B C A B C ...), every run into ``rec``; a contender that fails stops. Returns the
    run dirs of repeat 0 and the failed contenders' errors."""
    n = {c.key: c.repeats or repeats for c in case.contenders}
    first_dirs: dict[str, Path] = {}
    failed: dict[str, str] = {}
    for r in range(max(n.values())):
        for c in case.contenders:
            if r >= n[c.key] or c.key in failed:
                continue
            d = cdir / c.key / f"r{r}"
            argv = c.argv(d, r)
            d.mkdir(parents=True, exist_ok=True)
            m = _attempts(c, argv, d, r, timeout, log)
            _label_run(case, c, d, r, m, failed, log)
            m["argv"] = [_shorten(a, work) for a in argv]
            rec["runs"].append(m)
            if r == 0:
                first_dirs[c.key] = d
            elif not case.keep_outputs:
                shutil.rmtree(d, ignore_errors=True)
    return first_dirs, failed


def _summarize_runs(case: Case, rec: dict, failed: dict) -> None:
    """Each contender's medians and spreads of its successful runs, and the case's ratios (ours vs peer)."""
    for c in case.contenders:
        runs = [x for x in rec["runs"] if x["contender"] == c.key and x.get("exit") == 0]
        rec["contenders"][c.key] = {
            "label": c.label,
            "role": c.role,
            "failed": failed.get(c.key),
            "wall_s": summarize([x["wall_s"] for x in runs]),
            "cpu_s": summarize([x["cpu_s"] for x in runs]),
            "peak_rss_bytes": summarize([x["peak_tree_rss_bytes"] for x in runs]),
        }
    rec["ratios"] = []
    for ours, peer in case.pairs:
        co, cp = rec["contenders"].get(ours), rec["contenders"].get(peer)
        if not co or not cp:
            continue
        rec["ratios"].append(
            {
                "ours": ours,
                "peer": peer,
                "wall": ratio(cp["wall_s"], co["wall_s"]),
                "cpu": ratio(cp["cpu_s"], co["cpu_s"]),
            }
        )


def _check_agreement(case: Case, rec: dict, first_dirs: dict, failed: dict) -> None:
    """The case's output comparison on repeat 0 (not compared when a contender failed)."""
    if case.agree and not failed:
        try:
            rec["agreement"] = case.agree(first_dirs)
        except Exception as exc:  # noqa: BLE001 - a broken comparison is a failed check, recorded
            rec["agreement"] = {"ok": False, "detail": f"comparison failed: {type(exc).__name__}: {exc}"}
    elif failed:
        rec["agreement"] = {"ok": False, "detail": "not compared: " + "; ".join(f"{k}: {v}" for k, v in failed.items())}


def run_case(case: Case, work: Path, repeats: int, log: Callable[[str], None], timeout: float | None = None) -> dict:
    """Alternate the contenders (A B C A B C ...), record every run, check agreement on repeat 0."""
    rec = _case_record(case)
    if _skipped(case, rec, log):
        return rec
    cdir = work / case.id.replace("/", "__")
    shutil.rmtree(cdir, ignore_errors=True)
    first_dirs, failed = _alternate(case, cdir, work, repeats, rec, log, timeout)
    _summarize_runs(case, rec, failed)
    _check_agreement(case, rec, first_dirs, failed)
    if not case.keep_outputs:
        shutil.rmtree(cdir, ignore_errors=True)
    rec["finished"] = now()
    ag = rec.get("agreement")
    if ag:
        log(
            f"  agreement: {'OK' if ag.get('ok') else 'FAILED' if ag.get('ok') is False else 'n/a'} - "
            f"{ag.get('detail', '')}"
        )
    return rec


def _shorten(arg: str, work: Path) -> str:
    s = str(arg)
    for base, name in ((str(work), "$WORK"), (str(ROOT), "$REPO"), (str(Path.home()), "~")):
        s = s.replace(base, name)
    return s


MACHINE_BRIEF: dict = {}


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# --------------------------------------------------------------------------------------------------
# the results file
# --------------------------------------------------------------------------------------------------
def machine_brief(m: dict) -> tuple:
    """What makes two machine records the same machine for a benchmark: CPU model, SIMD flags, CPUs, memory."""
    return (
        m.get("cpu_model"),
        tuple(m.get("cpu_flags") or ()),
        m.get("logical_cpus"),
        m.get("usable_cpus"),
        m.get("memory_bytes"),
    )


def load_results(path: Path) -> dict | None:
    if path.exists():
        return json.loads(path.read_text())
    return None


def json_files(folder: Path):
    """(path, contents) of every readable JSON file in ``folder``, in name order (unreadable ones skipped)."""
    for p in sorted(folder.glob("*.json")):
        try:
            yield p, json.loads(p.read_text())
        except (OSError, ValueError):
            continue


def write_json(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=False) + "\n")
    os.replace(tmp, path)
