"""Run a command as the foreground job of its own pseudo-terminal, so a self-test can press
Ctrl-C the way a person does: the terminal's line discipline sends SIGINT to the whole
foreground process group (the command and every child it did not move out of the group)."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import termios
import threading
import time


class Terminal:
    def __init__(self, cmd: list[str], env: dict | None = None, cwd: str | None = None):
        master, slave = os.openpty()
        self._master = master
        # start_new_session: a session of its own; then the pty becomes its controlling terminal
        # and the command's process group the terminal's foreground group.
        self.proc = subprocess.Popen(
            cmd, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )
        os.close(slave)
        self._out = bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:  # EIO: every process holding the terminal is gone
                return
            if not chunk:
                return
            self._out.extend(chunk)

    @property
    def output(self) -> str:
        return self._out.decode(errors="replace").replace("\r\n", "\n")

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output:
            if self.proc.poll() is not None:
                # The command is gone, but what it wrote last may still be in the pty: the reader ends at
                # EIO once every process holding the terminal has exited (on a loaded machine, seconds later).
                self._reader.join(max(5.0, deadline - time.monotonic()))
                if text in self.output:
                    return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never appeared (exit {self.proc.poll()}):\n{self.output[-4000:]}")
            time.sleep(0.05)

    def ctrl_c(self) -> None:
        os.write(self._master, b"\x03")  # the line discipline turns it into SIGINT for the group

    def signal_leader(self, sig: int) -> None:
        """A signal to the command alone (kill PID, timeout -s INT), not to its group."""
        os.kill(self.proc.pid, sig)

    def finish(self, timeout: float) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError(f"still running after {timeout} s:\n{self.output[-4000:]}") from None
        self._reader.join(5)
        os.close(self._master)
        return code
