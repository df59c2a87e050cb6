"""The self-tests' pseudo-terminal (selftests/terminal.py) reads what a command wrote last even when the
command has exited before the reader got to it (a loaded machine): Ctrl-C tests wait for a parent's last line."""

from __future__ import annotations

import time

from terminal import Terminal


class LateReader(Terminal):
    def _read(self) -> None:
        time.sleep(1.0)  # the reader thread scheduled late, as beside CPU hogs
        super()._read()


def test_the_last_line_of_a_command_that_already_exited_is_found():
    term = LateReader(["sh", "-c", "echo outcome returncode=0"])
    while term.proc.poll() is None:
        time.sleep(0.01)
    term.wait_for("outcome returncode=0", timeout=10)  # gone before the reader read a byte
    assert term.finish(timeout=10) == 0
