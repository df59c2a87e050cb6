"""A record ended by the signal that stops its process, outside pytest (the multi-node job's ranks).

Slurm sends SIGTERM to every process of a step at its time limit, a closed session sends SIGHUP, Ctrl-C
sends SIGINT to the terminal's process group. Python's default ends the process at once, and the record
is left without its end line: `fleet report` then cannot tell a job cut by its time limit from one that
died. Here the signals are taken by a thread of their own with `sigwait`: the main thread may be inside
a collective for minutes (a hung peer, gloo's or NCCL's timeout), where a Python signal handler would not
run until it returns. The thread calls `on_signal(name, code)` (rank 0 writes the end line naming the
signal, with the exit code 128+N) and the process exits with that code, as a shell reports a job stopped
by the signal.

`block()` must run before the process starts threads of its own (torch's), so that they inherit the mask
and the kernel gives these signals to the waiting thread only.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Callable

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def block() -> None:
    """Keep the stop signals from this thread and every thread it starts from now on."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


class EndOnSignal:
    """Waits for a stop signal; then runs `on_signal(signal_name, exit_code)` under `lock` (which the
    record's writers hold while they write, so the end line is the last line) and exits the process."""

    def __init__(self, lock: threading.Lock):
        self.lock = lock
        self.on_signal: Callable[[str, int], int | None] | None = None  # set once the record exists
        self._thread = threading.Thread(target=self._wait, name="wirecheck-stop-signals", daemon=True)

    def start(self) -> "EndOnSignal":
        block()
        self._thread.start()
        return self

    def _wait(self) -> None:
        signum = signal.sigwait(STOP_SIGNALS)
        name = signal.Signals(signum).name
        code = 128 + signum
        with self.lock:
            if self.on_signal is not None:
                # The record may already be ended (the main thread got there first): its code stands.
                code = self.on_signal(name, code) or code
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
