"""Run one command and report what it cost, as one JSON file (used by the harness).

    python -S -E -s runner.py OUT.json CWD -- ARGV...

Started as a small interpreter (``-S -E -s``: no site packages, no PYTHON* variables; this folder is first on
``sys.path``, as for any script, so ``timer`` is the harness's), so the command's peak RSS is not inflated
by a big parent (Linux carries the pre-exec high-water mark of the forking process into ``ru_maxrss``).
The command is timed by the benchmarks' one process timer (``timer.measure``: started from here and reaped
with ``os.wait4``): user and system CPU seconds include every descendant the command itself waited for;
``ru_maxrss`` is the largest single process of that tree.
The command's stdout/stderr go to CWD/stdout.txt and CWD/stderr.txt.
"""

import json
import os
import sys

from timer import measure


def main() -> int:
    out, cwd, sep, *argv = sys.argv[1:]
    assert sep == "--" and argv
    with open(os.path.join(cwd, "stdout.txt"), "wb") as so, open(os.path.join(cwd, "stderr.txt"), "wb") as se:
        try:
            rec = measure(argv, cwd=cwd, stdout=so, stderr=se)
        except OSError as exc:  # report and record the exec-failure code, as a shell would
            se.write(f"runner: cannot run {argv[0]}: {exc}\n".encode())
            rec = {"wall_s": 0.0, "user_s": 0.0, "sys_s": 0.0, "cpu_s": 0.0, "peak_rss_bytes": 0, "exit": 127}
    rec["maxrss_bytes"] = rec.pop("peak_rss_bytes")
    for k in ("load_before", "load_after"):  # the harness records the load itself, around the runner
        rec.pop(k, None)
    with open(out, "w") as f:
        json.dump(rec, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
