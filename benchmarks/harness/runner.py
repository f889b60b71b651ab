"""Run one command and report what it cost, as one JSON line on stdout (used by the harness).

    python -S -I runner.py OUT.json CWD -- ARGV...

Started as a small interpreter (``-S -I``: no site packages), so the command's peak RSS is not inflated
by a big parent (Linux carries the pre-exec high-water mark of the forking process into ``ru_maxrss``).
The command is forked and exec'd here and reaped with ``os.wait4``: user and system CPU seconds include
every descendant the command itself waited for; ``ru_maxrss`` is the largest single process of that tree.
The command's stdout/stderr go to CWD/stdout.txt and CWD/stderr.txt.
"""
import json
import os
import sys
import time


def main() -> int:
    out, cwd, sep, *argv = sys.argv[1:]
    assert sep == "--" and argv
    so = os.open(os.path.join(cwd, "stdout.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    se = os.open(os.path.join(cwd, "stderr.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.chdir(cwd)
            os.dup2(so, 1)
            os.dup2(se, 2)
            os.execvp(argv[0], argv)
        except BaseException as exc:  # noqa: BLE001 - report and leave with the exec-failure code
            os.write(se, f"runner: cannot run {argv[0]}: {exc}\n".encode())
        finally:
            os._exit(127)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    rec = {"wall_s": wall, "user_s": ru.ru_utime, "sys_s": ru.ru_stime, "cpu_s": ru.ru_utime + ru.ru_stime,
           "maxrss_bytes": ru.ru_maxrss * 1024, "exit": os.waitstatus_to_exitcode(status),
           "minflt": ru.ru_minflt, "majflt": ru.ru_majflt}
    with open(out, "w") as f:
        json.dump(rec, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
