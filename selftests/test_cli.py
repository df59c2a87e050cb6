"""The `wirecheck` dispatcher: every command registered the same way; no traceback when the
reader of its output goes away."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from wirecheck.cli.main import COMMANDS, main


def test_every_command_has_a_name_a_parser_and_a_run():
    assert [c.NAME for c in COMMANDS] == ["topo", "limits", "memory", "advise", "validate", "plan", "node-state", "judge",
                                          "calibrate", "report", "diagnose", "fleet",
                                          "nccl-tests"]
    for command in COMMANDS:
        assert callable(command.add_parser) and callable(command.run)


def test_unknown_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["judgee"])
    assert info.value.code == 2
    assert "invalid choice: 'judgee'" in capsys.readouterr().err


def test_closed_pipe_stops_quietly():
    """`wirecheck topo --json | head -1`: before, a BrokenPipeError traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "wirecheck.cli.main", "topo", "--simulate", "h200-nvl-8", "--json"],
            stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 141, done.stderr  # 128 + SIGPIPE, as the shell reports a broken pipe
    assert "Traceback" not in done.stderr
