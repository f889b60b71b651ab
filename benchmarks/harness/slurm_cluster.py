"""A real single-node SLURM cluster on localhost: for the tests (``slurm_cluster`` fixture,
tests/helpers/slurm_cluster.py)
and for the harness's runs through ``-profile slurm`` (harness.genie3scale slurm).

The fixture starts, from the Debian packages installed by ``scripts/install-system-deps``:

* its own ``munged`` (as the ``munge`` user) with its own key, socket, pid, log and seed files in a
  temporary directory, so it neither needs nor disturbs a system munged;
* ``slurmctld`` and ``slurmd`` in the foreground (``-D``) as children of the test process, on free TCP
  ports chosen at start-up, with all state/spool/log/pid files in the same temporary directory.

Nothing is written to ``/etc``: the client tools (``sbatch``, ``squeue``, ``scancel``, ``sinfo``,
``scontrol``), which Nextflow's SLURM executor runs, find the configuration through ``SLURM_CONF``, and
that file names the private munge socket (``AuthInfo=socket=...``). Pass ``cluster.env`` to every
subprocess that talks to the cluster.

Per-job records (read with ``cluster.jobs()``) come from two sources written by slurmctld itself:

* ``JobCompType=jobcomp/filetxt`` -- one line per finished job (JobId, Name, JobState, Partition, ...);
  it has no GRES request in 22.05, so additionally
* an ``EpilogSlurmctld`` script that, when the job ends, saves ``scontrol show job -o <id>`` (which has
  ``Partition=`` and ``TresPerNode=gres:gpu:N`` / ``TRES=...gres/gpu=N``) to ``records/<id>.job``.

The node: ``CPUs=2 RealMemory=20000 Gres=gpu:1``; the "gpu" is an ordinary empty file named in
``gres.conf`` -- the scheduler counts it, nothing can compute on it. Partitions ``cpu`` (default) and
``gpu`` share the node.

If SLURM cannot be started (packages missing, not root, a daemon dies) the fixture skips with the reason,
except under ``CI=true``, where it fails.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

STARTUP_TIMEOUT = 30.0  # seconds; normally ready in a few
REQUIRED_BINARIES = (
    "munged",
    "munge",
    "unmunge",
    "slurmctld",
    "slurmd",
    "sbatch",
    "squeue",
    "sinfo",
    "scontrol",
    "scancel",
)


class SlurmUnavailable(RuntimeError):
    """SLURM could not be started here; the message says why."""


def _search_path() -> str:
    """PATH plus the sbin directories (daemons live in /usr/sbin, which a non-login PATH may lack)."""
    parts = os.environ.get("PATH", os.defpath).split(os.pathsep)
    return os.pathsep.join(parts + [d for d in ("/usr/sbin", "/sbin", "/usr/bin", "/bin") if d not in parts])


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child still "exists"; look at its state
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


_KV = re.compile(r"(\S+?)=(.*?)(?=\s+\S+?=|$)")


def parse_kv_line(line: str) -> dict[str, str]:
    """Parse ``Key=value Key2=value with spaces ...`` as written by jobcomp/filetxt and ``scontrol -o``."""
    return {m.group(1): m.group(2) for m in _KV.finditer(line.strip())}


def _gres_from_scontrol(sc: dict[str, str]) -> str:
    """GRES requested by a job, from ``scontrol show job`` fields: ``--gres=gpu:1`` gives
    ``TresPerNode=gres:gpu:1``, ``--gpus=1`` ``TresPerJob=gres:gpu:1``; returns e.g. ``gpu:1`` or ''."""
    parts = []
    for key in ("TresPerNode", "TresPerJob", "TresPerSocket", "TresPerTask"):
        for t in sc.get(key, "").split(","):
            if t and t != "(null)":
                parts.append(t[len("gres:") :] if t.startswith("gres:") else t)
    return ",".join(parts)


class SlurmCluster:
    """A running single-node cluster. Use :meth:`start` / :meth:`stop` or the ``slurm_cluster`` fixture."""

    def __init__(
        self, root: Path | None = None, cpus: int = 2, real_memory: int = 20000, def_mem_per_cpu: int = 1000
    ) -> None:
        self._own_root = root is None
        self.root = Path(root or tempfile.mkdtemp(prefix="chromaflow-slurm-"))
        self.hostname = socket.gethostname().split(".")[0]
        self.cpus = cpus
        self.real_memory = real_memory
        self.def_mem_per_cpu = def_mem_per_cpu
        self.conf_dir = self.root / "etc"
        self.conf_path = self.conf_dir / "slurm.conf"
        self.munge_dir = self.root / "munge"
        self.munge_socket = self.munge_dir / "munge.socket"
        self.state_dir = self.root / "state"
        self.spool_dir = self.root / "spool"
        self.log_dir = self.root / "log"
        self.records_dir = self.root / "records"
        self.gpu_file = self.root / "fake-gpu0"
        self.jobcomp_path = self.root / "jobcomp.txt"
        self.ctld_port = 0
        self.slurmd_port = 0
        self.procs: dict[str, subprocess.Popen] = {}
        self._logs: list = []
        self.env: dict[str, str] = {}

    # ------------------------------------------------------------------ set-up
    @staticmethod
    def unavailable() -> str | None:
        """Why a cluster cannot be started here (one line), or None: what :meth:`start` checks first."""
        try:
            SlurmCluster._check_prerequisites()
        except SlurmUnavailable as exc:
            return str(exc)
        return None

    @staticmethod
    def _check_prerequisites() -> None:
        missing = [b for b in REQUIRED_BINARIES if shutil.which(b, path=_search_path()) is None]
        if missing:
            raise SlurmUnavailable(
                f"SLURM/munge binaries not found: {', '.join(missing)} (run scripts/install-system-deps as root)"
            )
        if os.geteuid() != 0:
            raise SlurmUnavailable(
                "the test SLURM cluster needs root (slurmd runs jobs as their user; munged must run as the munge user)"
            )
        try:
            pwd.getpwnam("munge")
        except KeyError as exc:
            raise SlurmUnavailable("no 'munge' user (is the munge package installed?)") from exc

    def _write_epilog(self) -> Path:
        """The EpilogSlurmctld script: saves each finished job's record (see the module docstring)."""
        epilog = self.conf_dir / "epilog_slurmctld.sh"
        # Runs in slurmctld when a job ends; the job record is still complete then.
        epilog.write_text(
            "#!/bin/sh\n"
            f"export SLURM_CONF='{self.conf_path}'\n"
            f"out='{self.records_dir}'/\"$SLURM_JOB_ID\"\n"
            "scontrol show job -o \"$SLURM_JOB_ID\" > \"$out.tmp\" 2>&1\n"
            "env | grep '^SLURM_' | sort > \"$out.env\"\n"
            "mv -f \"$out.tmp\" \"$out.job\"\n"
            "exit 0\n"
        )
        epilog.chmod(0o755)
        return epilog

    def _slurm_conf(self, epilog: Path) -> str:
        """slurm.conf of the one-node cluster (its ports, folders and files: this instance's)."""
        h = self.hostname
        return f"""\
# chromaflow test cluster (tests/helpers/slurm_cluster.py) -- generated, do not edit
ClusterName=chromaflowtest
SlurmctldHost={h}(127.0.0.1)
SlurmctldPort={self.ctld_port}
SlurmdPort={self.slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
StateSaveLocation={self.state_dir}
SlurmdSpoolDir={self.spool_dir}/slurmd-%n
SlurmctldPidFile={self.root}/slurmctld.pid
SlurmdPidFile={self.root}/slurmd.pid
SlurmctldLogFile={self.log_dir}/slurmctld.log
SlurmdLogFile={self.log_dir}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig={self.conf_dir}/plugstack.conf
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MailProg=/bin/true
JobCompType=jobcomp/filetxt
JobCompLoc={self.jobcomp_path}
EpilogSlurmctld={epilog}
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_min_interval=0,defer_batch=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
ReturnToService=2
MinJobAge=3600
KillWait=5
InactiveLimit=0
MessageTimeout=10
SlurmdTimeout=60
SlurmdParameters=config_overrides
SlurmctldTimeout=60
DefMemPerCPU={self.def_mem_per_cpu}
NodeName={h} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={self.real_memory} Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes={h} Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes={h} Default=NO MaxTime=INFINITE State=UP
"""

    def _write_files(self) -> None:
        """The cluster's folders, free ports, slurm.conf and the other config files; ``env`` set."""
        self.root.chmod(0o755)  # munge must be able to traverse it
        for d in (self.conf_dir, self.state_dir, self.spool_dir, self.log_dir, self.records_dir):
            d.mkdir(parents=True, exist_ok=True)
        self.gpu_file.write_text("")
        self.ctld_port = _free_port()
        self.slurmd_port = _free_port()
        while self.slurmd_port == self.ctld_port:
            self.slurmd_port = _free_port()
        epilog = self._write_epilog()
        h = self.hostname
        self.conf_path.write_text(self._slurm_conf(epilog))
        (self.conf_dir / "plugstack.conf").write_text("")
        (self.conf_dir / "gres.conf").write_text(f"NodeName={h} Name=gpu File={self.gpu_file}\n")
        # Read by slurmd only if a cgroup plugin is configured (none is); harmless otherwise.
        (self.conf_dir / "cgroup.conf").write_text("CgroupPlugin=autodetect\n")
        self.env = {"SLURM_CONF": str(self.conf_path)}

    def _subprocess_env(self) -> dict[str, str]:
        env = dict(os.environ)
        # settings from an outer SLURM job/environment must not leak into ours
        for k in list(env):
            if k.startswith(("SLURM_", "SBATCH_", "SQUEUE_", "SINFO_", "SALLOC_", "SRUN_")):
                del env[k]
        env.update(self.env)
        env["PATH"] = _search_path()
        return env

    def _start_munged(self) -> None:
        munge = pwd.getpwnam("munge")
        self.munge_dir.mkdir(exist_ok=True)
        self.munge_dir.chmod(0o755)  # munged: socket dir must be executable by all
        key = self.munge_dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        for p in (self.munge_dir, key):
            os.chown(p, munge.pw_uid, munge.pw_gid)
        log = open(self.log_dir / "munged.stdout", "wb")
        self._logs.append(log)
        self.procs["munged"] = subprocess.Popen(
            [
                shutil.which("munged", path=_search_path()),
                "--foreground",
                f"--socket={self.munge_socket}",
                f"--key-file={key}",
                f"--pid-file={self.munge_dir / 'munged.pid'}",
                f"--log-file={self.munge_dir / 'munged.log'}",
                f"--seed-file={self.munge_dir / 'munged.seed'}",
                "--num-threads=2",
            ],
            user=munge.pw_uid,
            group=munge.pw_gid,
            extra_groups=[],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=self.munge_dir,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.procs["munged"].poll() is not None:
                raise SlurmUnavailable(
                    f"munged exited with {self.procs['munged'].returncode}: "
                    + self._tail(self.log_dir / "munged.stdout")
                    + self._tail(self.munge_dir / "munged.log")
                )
            if self.munge_socket.exists():
                r = subprocess.run(
                    f"munge -S '{self.munge_socket}' -n | unmunge -S '{self.munge_socket}'",
                    shell=True,
                    capture_output=True,
                    text=True,
                    env=self._subprocess_env(),
                )
                if r.returncode == 0 and "Success" in r.stdout:
                    return
            time.sleep(0.1)
        raise SlurmUnavailable(
            "munged did not answer `munge -n | unmunge` within 10 s: " + self._tail(self.munge_dir / "munged.log")
        )

    def _start_daemon(self, name: str) -> None:
        log = open(self.log_dir / f"{name}.stdout", "wb")
        self._logs.append(log)
        cmd = [shutil.which(name, path=_search_path()), "-D"]
        cmd += ["-c", "-i"] if name == "slurmctld" else ["-N", self.hostname]
        self.procs[name] = subprocess.Popen(
            cmd,
            env=self._subprocess_env(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=self.root,
        )

    def run(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run a SLURM client command against this cluster; returns the CompletedProcess (text)."""
        return subprocess.run(
            list(args), env=self._subprocess_env(), capture_output=True, text=True, check=check, timeout=timeout
        )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        last = ""
        while time.monotonic() < deadline:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise SlurmUnavailable(
                        f"{name} exited with {p.returncode} during start-up: "
                        + self._tail(self.log_dir / f"{name}.stdout")
                        + self._tail(self.log_dir / f"{name}.log")
                    )
            r = self.run("sinfo", "--noheader", "-o", "%P %t", check=False, timeout=10)
            last = (r.stdout + r.stderr).strip()
            states = dict(line.split() for line in r.stdout.splitlines() if len(line.split()) == 2)
            if states.get("cpu*") == "idle" and states.get("gpu") == "idle":
                return
            if any(s.startswith(("drain", "down")) for s in states.values()):
                # ReturnToService=2 should return it; make sure
                self.run("scontrol", "update", f"NodeName={self.hostname}", "State=RESUME", check=False)
            time.sleep(0.2)
        raise SlurmUnavailable(
            f"SLURM node not idle in both partitions after {STARTUP_TIMEOUT:.0f} s; "
            f"sinfo said: {last!r}; "
            + self._tail(self.log_dir / "slurmctld.log")
            + self._tail(self.log_dir / "slurmd.log")
        )

    @staticmethod
    def _tail(path: Path, n: int = 15) -> str:
        try:
            lines = path.read_text(errors="replace").splitlines()[-n:]
        except OSError:
            return ""
        return f"\n--- {path.name} (last {len(lines)} lines) ---\n" + "\n".join(lines)

    def start(self) -> "SlurmCluster":
        try:
            self._check_prerequisites()
            self._write_files()
            self._start_munged()
            self._start_daemon("slurmctld")
            self._start_daemon("slurmd")
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    # ------------------------------------------------------------------ teardown
    def pids(self) -> dict[str, int]:
        """pids of the daemons this object started (slurmctld, slurmd, munged)."""
        return {name: p.pid for name, p in self.procs.items()}

    def stop(self, keep_files: bool = False) -> None:
        """Cancel remaining jobs, stop slurmd, slurmctld, munged (by pid), remove the temp dir."""
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            self.run("scancel", "--full", "--user", str(os.getuid()), check=False, timeout=15)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                r = self.run("squeue", "--noheader", "-h", "-t", "R,CG,PD", "-o", "%i", check=False, timeout=10)
                if r.returncode != 0 or not r.stdout.strip():
                    break
                time.sleep(0.2)
        for name in ("slurmd", "slurmctld", "munged"):
            p = self.procs.get(name)
            if p is None:
                continue
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=5)
        self._kill_leftover_stepds()
        for log in self._logs:
            log.close()
        self._logs.clear()
        if self._own_root and not keep_files:
            shutil.rmtree(self.root, ignore_errors=True)

    def _kill_leftover_stepds(self) -> None:
        """slurmstepd processes reparent to init; kill any that belong to our spool dir."""
        spool = str(self.spool_dir)
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmd = (proc / "cmdline").read_bytes().split(b"\0")
                if not cmd or not cmd[0].endswith(b"slurmstepd"):
                    continue
                environ = (proc / "environ").read_bytes()
                cwd = os.readlink(proc / "cwd")
            except OSError:
                continue
            if spool.encode() in environ or cwd.startswith(spool) or str(self.conf_path).encode() in environ:
                try:
                    os.kill(int(proc.name), signal.SIGKILL)
                except OSError:
                    pass

    # ------------------------------------------------------------------ job records
    def jobs(self, wait: float = 10.0) -> list[dict[str, str]]:
        """One dict per finished job, in the order the jobs finished.

        Keys (strings): ``JobId``, ``JobName``, ``Partition``, ``State`` (COMPLETED, FAILED, CANCELLED,
        TIMEOUT...), ``ExitCode``, ``NodeList``, ``StartTime``, ``EndTime``, ``Gres`` (e.g. ``gpu:1``,
        empty when the job asked for none), ``Tres`` (allocated, e.g. ``cpu=1,mem=1000M,node=1,
        billing=1,gres/gpu=1``), ``jobcomp`` (the raw jobcomp/filetxt fields) and ``scontrol`` (the
        fields of ``scontrol show job -o`` saved by EpilogSlurmctld, empty if that record is missing).

        A job leaves the queue slightly before slurmctld has written its records; this waits up to
        ``wait`` seconds until every job slurmctld knows as finished has both records.
        """
        deadline = time.monotonic() + wait
        while True:
            comp = self._read_jobcomp()
            complete = all((self.records_dir / f"{j['JobId']}.job").exists() for j in comp)
            if complete and self._queue_finished_ids() <= {j["JobId"] for j in comp}:
                break
            if time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        out = []
        for raw in comp:
            jid = raw.get("JobId", "")
            sc: dict[str, str] = {}
            rec = self.records_dir / f"{jid}.job"
            if rec.exists():
                sc = parse_kv_line(rec.read_text())
            gres = _gres_from_scontrol(sc)
            out.append(
                {
                    "JobId": jid,
                    "JobName": raw.get("Name", sc.get("JobName", "")),
                    "Partition": raw.get("Partition", sc.get("Partition", "")),
                    "State": raw.get("JobState", sc.get("JobState", "")),
                    "ExitCode": raw.get("ExitCode", sc.get("ExitCode", "")),
                    "NodeList": raw.get("NodeList", ""),
                    "StartTime": raw.get("StartTime", ""),
                    "EndTime": raw.get("EndTime", ""),
                    "Gres": gres,
                    "Tres": raw.get("Tres", sc.get("TRES", "")),
                    "jobcomp": raw,
                    "scontrol": sc,
                }
            )
        return out

    def job(self, name: str, **kw) -> dict[str, str]:
        """The single finished job whose JobName is ``name`` (AssertionError if none or several)."""
        found = [j for j in self.jobs(**kw) if j["JobName"] == name]
        assert len(found) == 1, f"expected one job named {name!r}, found {len(found)}: {found}"
        return found[0]

    def jobs_matching(self, pattern: str, **kw) -> list[dict[str, str]]:
        """Finished jobs whose JobName matches the regular expression ``pattern`` (``re.search``).
        Nextflow 24.10 names a task's job ``nf-`` + the task name with spaces replaced by ``_``, e.g.
        process GPU_TASK with tag s1 -> ``nf-GPU_TASK_(s1)``; so ``cluster.jobs_matching(r"^nf-.*PREDICT")``."""
        rx = re.compile(pattern)
        return [j for j in self.jobs(**kw) if rx.search(j["JobName"])]

    def _read_jobcomp(self) -> list[dict[str, str]]:
        try:
            text = self.jobcomp_path.read_text(errors="replace")
        except FileNotFoundError:
            return []
        return [parse_kv_line(line) for line in text.splitlines() if line.strip()]

    def _queue_finished_ids(self) -> set[str]:
        r = self.run("squeue", "--noheader", "-t", "CD,F,CA,TO,NF,OOM,BF,DL,PR", "-o", "%i", check=False, timeout=10)
        return set(r.stdout.split()) if r.returncode == 0 else set()
