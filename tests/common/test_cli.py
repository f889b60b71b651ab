"""Every registered subcommand loads and answers --help (a registry entry without its module would crash)."""

from __future__ import annotations

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
