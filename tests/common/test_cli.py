"""Every registered subcommand loads and answers --help (a registry entry without its module would crash); the
program, and only the program, ends with its objects frozen."""

from __future__ import annotations

import subprocess
import sys

import pytest

from chromaflow.cli import COMMANDS, main


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    assert f"chromaflow {command}" in capsys.readouterr().out


def test_unknown_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["no-such-stage"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


_END = """
import gc, sys
from chromaflow.cli import main
sys.argv = ["chromaflow", "versions", "TEST"]
rc = main() if {program} else main(["versions", "TEST"])
sys.stdout.flush()
print("frozen", gc.get_freeze_count(), "rc", rc)
"""


@pytest.mark.parametrize("program", [True, False])
def test_only_the_program_freezes_its_objects_for_a_cheap_exit(program):
    """As the program (no argv) the command ends with its objects frozen, so Python's finalisation skips them;
    called in-process (argv given: tests, notebooks) it leaves the caller's garbage collector as it was."""
    res = subprocess.run([sys.executable, "-c", _END.format(program=program)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert '"TEST":' in res.stdout  # the command itself ran
    frozen = int(res.stdout.split("frozen ")[1].split()[0])
    assert (frozen > 0) == program, res.stdout
