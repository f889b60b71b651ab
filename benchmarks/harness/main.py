"""``benchmarks/run``: every stage against the real peer, side by side, alternating, with checked outputs.

    benchmarks/run --peers ../shared/peers [--quick] [--stages fasta2h5,predict,...] [--repeats N]
                   [--out DIR] [--workdir DIR] [--resume] [--results FILE]

For each case the commands (ours and the peer's, sometimes several of ours) run in turn, A B A B ...,
``--repeats`` times each (default 3; 1 with ``--quick``), as fresh processes. Each run records wall and CPU
seconds (user + sys, descendants included, from ``wait4``), the peak RSS (largest process and the sampled
process tree), the load average before and after, and the output sizes. The outputs of the first repeat are
compared (the fidelity tests' comparisons, see ``harness/agree.py``). After every case the results file
``<out>/<date>-<host>[-quick].json`` is rewritten, with the machine in every case record, and its Markdown
table beside it (``benchmarks/render`` makes the README/docs tables from these files). A run that is cut
short keeps every finished case; ``--resume`` skips the cases already in today's file. ``--results FILE`` adds
the cases to an earlier results file instead (a full run spread over days): every case record carries its own
machine, commit, command and times, and the file keeps the first start and the last finish.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from .. import stages as S
from . import core
from .stagekit import Ctx
from .render import render_file


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="benchmarks/run",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--peers",
        default=str(core.ROOT.parent / "shared" / "peers"),
        help="the peers kit (default ../shared/peers beside the checkout)",
    )
    ap.add_argument("--quick", action="store_true", help="small inputs, 1 repeat: a few minutes (CI)")
    ap.add_argument(
        "--stages",
        default=",".join(s for s in S.STAGES if s not in S.OPT_IN),
        help=f"comma-separated subset of {','.join(S.STAGES)} (default: all but {','.join(S.OPT_IN)})",
    )
    ap.add_argument("--cases", default=None, help="only cases whose name contains one of these comma-separated words")
    ap.add_argument("--repeats", type=int, default=None, help="runs per command (default 3; --quick 1)")
    ap.add_argument("--out", default=str(core.ROOT / "benchmarks" / "results"), help="results directory")
    ap.add_argument(
        "--workdir",
        default=None,
        help="inputs and scratch outputs (default $TMPDIR/chromaflow-bench-<host>; inputs are kept "
        "there for later runs)",
    )
    ap.add_argument(
        "--inputs",
        default=None,
        help="the generated inputs (default <workdir>/inputs): each is made once, when absent, and read "
        "by every later run that names the same folder",
    )
    ap.add_argument("--resume", action="store_true", help="skip cases already in today's results file")
    ap.add_argument(
        "--results",
        default=None,
        help="add to (and --resume from) this results file instead of today's <out>/<date>-<host>.json, "
        "e.g. to finish an earlier day's full run; each case keeps its own machine and commit",
    )
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per run before it is killed")
    a = ap.parse_args(argv)
    a.repeats = a.repeats or (1 if a.quick else 3)
    bad = [s for s in a.stages.split(",") if s and s not in S.STAGES]
    if bad:
        ap.error(f"unknown stage(s) {bad}; choose from {', '.join(S.STAGES)}")
    if a.repeats < 1:
        ap.error("--repeats must be >= 1")
    if not a.quick and a.repeats < 3:
        print(
            "benchmarks/run: warning: fewer than 3 repeats: medians and spreads will not be published-grade",
            file=sys.stderr,
        )
    return a


def _peers_ready(peers: Path, launchers: list[str]) -> str | None:
    """None if every launcher runs here, else why not (one line)."""
    if not launchers:  # a stage of ours alone (network)
        return None
    if not (peers / "bin").is_dir():
        return f"peers kit not found at {peers}"
    for name in launchers:
        why = _probe(peers / "bin" / name)
        if why:
            return why
    return None


@functools.lru_cache(maxsize=None)
def _probe(exe: Path) -> str | None:
    """None if the launcher starts, else why not; once per run (predict and train share Predmoter's, genie3 and
    scaling arboreto's: each probe is a Python start with the peer's imports)."""
    probe = {"peer-arboreto-python": ["-c", "import arboreto"], "peer-genie3-python": ["-c", "import GENIE3"]}
    try:
        p = subprocess.run([str(exe), *probe.get(exe.name, ["--help"])], capture_output=True, text=True)
    except OSError as exc:  # missing or not executable
        return f"{exe.name} does not run: {exc.strerror}"
    if p.returncode != 0:
        return f"{exe.name} does not run: " + (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
    return None


def _log(msg: str) -> None:
    """The run's progress, to stderr."""
    print(msg, file=sys.stderr, flush=True)


def _results_path(a: argparse.Namespace, host: str) -> Path:
    """Today's results file (<out>/<date>-<host>[-quick].json), or the earlier one named by --results."""
    day = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    res_path = Path(a.out) / f"{day}-{host}{'-quick' if a.quick else ''}.json"
    if a.results:
        res_path = Path(a.results)
        if not res_path.is_file():
            raise SystemExit(f"benchmarks/run: --results {res_path}: no such results file")
    return res_path


def _machine() -> dict:
    """This machine's record; its brief goes into every case record (core.MACHINE_BRIEF)."""
    machine = core.machine_info()
    core.MACHINE_BRIEF.update(
        {k: machine[k] for k in ("host", "cpu_model", "cpu_flags", "logical_cpus", "usable_cpus", "memory_bytes")}
    )
    return machine


def _load_results(res_path: Path, a: argparse.Namespace) -> dict:
    """The results file's contents (empty if new); an unknown schema or a quick/full mismatch is an error."""
    results = core.load_results(res_path) or {}
    if results.get("schema") not in (None, core.SCHEMA):
        raise SystemExit(f"{res_path}: unknown schema {results.get('schema')!r}")
    if a.results and bool(results.get("quick")) != a.quick:
        raise SystemExit(
            f"benchmarks/run: --results {res_path}: a {'quick' if results.get('quick') else 'full'} "
            f"results file cannot take {'quick' if a.quick else 'full'} cases"
        )
    return results


def _start_results(results: dict, a: argparse.Namespace, machine: dict, git: dict, command: str, peers: Path) -> None:
    """This run's command, machine, software, commit and settings into the results."""
    results.setdefault("commands", [])
    if command not in results["commands"]:
        results["commands"].append(command)
    software = core.software_versions()
    if a.results and results.get("machine"):
        # continuing an earlier run: the file keeps the machine, software and commit it was started with; a
        # different machine is listed beside it (every case record carries the machine it ran on)
        if core.machine_brief(machine) != core.machine_brief(results["machine"]):
            others = results.setdefault("other_machines", [])
            if all(core.machine_brief(o["machine"]) != core.machine_brief(machine) for o in others):
                others.append({"machine": machine, "software": software, "first_used": core.now()})
    else:
        results.update({"machine": machine, "software": software, "git": git})
    results.update(
        {
            "schema": core.SCHEMA,
            "command": command,
            "quick": a.quick,
            "repeats": a.repeats,
            "peers": {"path": a.peers, **_peers_kit(peers)},
            "last_started": core.now(),
        }
    )
    results.setdefault("first_started", results["last_started"])
    results.setdefault("cases", [])


def _build_stage(stage: str, ctx: Ctx, results: dict, res_path: Path) -> tuple[list, list] | None:
    """The stage's (warm-up commands, cases); None (recorded as a skipped case) when its inputs cannot be made."""
    try:
        return S.stage(stage).build(ctx)
    except Exception as exc:  # noqa: BLE001 - inputs could not be made: record, go on with other stages
        _log(f"  cannot prepare {stage}: {exc}")
        _store(
            results,
            {
                "stage": stage,
                "case": "*",
                "id": f"{stage}/*",
                "skipped": f"inputs failed: {exc}",
                "machine": core.MACHINE_BRIEF,
            },
            res_path,
        )
        return None


def _run_stage(
    stage: str, ctx: Ctx, a: argparse.Namespace, done: set, results: dict, res_path: Path, stamp: dict
) -> int:
    """Run the stage's selected cases not yet ``done``, each stored as it ends (with ``stamp``: repeats, command,
    commit); the number of failures (cases that did not agree, or a stage that could not be prepared)."""
    _log(f"== {stage}")
    why = _peers_ready(ctx.peers, S.stage(stage).PEERS)
    built = _build_stage(stage, ctx, results, res_path)
    if built is None:
        return 1
    warm, cases = built
    words = [w for w in (a.cases or "").split(",") if w]
    cases = [c for c in cases if not words or any(w in c.name for w in words)]
    if why:
        for c in cases:
            c.skip = c.skip or f"peer unavailable: {why}"
    todo = [c for c in cases if c.id not in done]
    if any(not c.skip for c in todo) and not a.quick:  # quick: 1 unpublished repeat, no warm-up
        _warm_up(warm, ctx.work / "warmup", _log)
    failures = 0
    for case in todo:
        _log(f"-- {case.id}")
        rec = core.run_case(case, ctx.work / "runs", a.repeats, _log, timeout=a.timeout)
        rec.update(stamp)
        _store(results, rec, res_path)
        ag = rec.get("agreement") or {}
        failures += ag.get("ok") is False
    return failures


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    t_start = time.time()
    peers = Path(a.peers).resolve()
    host = socket.gethostname().split(".")[0]
    res_path = _results_path(a, host)
    work = Path(a.workdir or Path(os.environ.get("TMPDIR", "/tmp")) / f"chromaflow-bench-{host}")
    work.mkdir(parents=True, exist_ok=True)
    machine = _machine()
    results = _load_results(res_path, a)
    git = core.git_state()
    command = "benchmarks/run " + " ".join(shlex.quote(x) for x in (argv if argv is not None else sys.argv[1:]))
    _start_results(results, a, machine, git, command, peers)
    done = {c["id"] for c in results["cases"] if not c.get("skipped")} if a.resume else set()
    ctx = Ctx(
        peers=peers,
        work=work,
        quick=a.quick,
        repeats=a.repeats,
        log=_log,
        inputs_dir=Path(a.inputs).resolve() if a.inputs else None,
        earlier={c["id"]: c for c in results["cases"] if not c.get("skipped")},
    )
    stamp = {"repeats": a.repeats, "command": command, "git": git}
    failures = 0
    for stage in [s for s in S.STAGES if s in a.stages.split(",")]:
        failures += _run_stage(stage, ctx, a, done, results, res_path, stamp)
    results["last_finished"] = core.now()
    results["elapsed_s"] = round(time.time() - t_start, 1)
    core.write_json(res_path, results)
    md = render_file(res_path)
    _log(f"wrote {res_path} and {md} ({results['elapsed_s']:.0f} s)")
    skipped = [c["id"] for c in results["cases"] if c.get("skipped")]
    if skipped:
        _log(f"benchmarks/run: {len(skipped)} case(s) skipped (reasons in the results): {', '.join(skipped)}")
    if failures:
        _log(f"benchmarks/run: {failures} case(s) whose outputs did not agree or could not be prepared")
    return 1 if failures else 0


def _peers_kit(peers: Path) -> dict:
    import hashlib

    sums = peers / "SHA256SUMS"
    return {"sha256sums": hashlib.sha256(sums.read_bytes()).hexdigest()[:16] if sums.exists() else None}


def _store(results: dict, rec: dict, path: Path) -> None:
    if rec.get("not_runnable") and any(c["id"] == rec["id"] and not c.get("skipped") for c in results["cases"]):
        return  # this machine could not run it now (core.NotRunnable): the earlier measurement stays
    results["cases"] = [c for c in results["cases"] if c["id"] != rec["id"]] + [rec]
    core.write_json(path, results)
    render_file(path, plot=False)  # the plot is drawn once, when the run ends


def _warm_up(commands: list, d: Path, log) -> None:
    """Untimed first runs: imports into the page cache, the onehot kernel compiled, the peers' venvs read."""
    for argv in commands:
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        full = [str(x).replace("{d}", str(d)) for x in argv]
        p = subprocess.run(full, capture_output=True, text=True, env=dict(os.environ, CHROMAFLOW_PROGRESS="0"))
        if p.returncode != 0:
            log(f"  warm-up failed (ignored): {' '.join(full)}: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
