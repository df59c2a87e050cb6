"""A record ended by the signal that stops its process, outside pytest (the multi-node job's ranks).

Slurm sends SIGTERM to every process of a step at its time limit, a closed session sends SIGHUP, Ctrl-C
sends SIGINT to the terminal's process group. Python's default ends the process at once, and the record
is left without its end line: `fleet report` then cannot tell a job cut by its time limit from one that
died. Here the signals are taken by a thread of their own with `sigtimedwait`: the main thread may be
inside a collective for minutes (a hung peer, gloo's or NCCL's timeout), where a Python signal handler
would not run until it returns. The thread calls `on_signal(name, code)` (rank 0 writes the end line
naming the signal, with the exit code 128+N) and the process exits with that code, as a shell reports a
job stopped by the signal.

    with EndOnSignal(lock) as stopper:   # before torch starts threads: they inherit the blocked mask
        ...                              # stopper.on_signal = ... once the record exists

Leaving the block gives the signals back to the calling thread (an in-process caller, a self-test,
keeps its own Ctrl-C, and its later subprocesses do not inherit a blocked mask).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Callable

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
POLL_S = 0.2  # how soon the waiting thread notices the block was left


class EndOnSignal:
    """Takes the stop signals while the block runs; on one, runs `on_signal(signal_name, exit_code)`
    under `lock` (which the record's writers hold while they write, so the end line is the last line)
    and exits the process with the code it returns (128+N, or the code of a record already ended)."""

    def __init__(self, lock: threading.Lock):
        self.lock = lock
        self.on_signal: Callable[[str, int], int | None] | None = None  # set once the record exists
        self._left = threading.Event()
        self._thread: threading.Thread | None = None
        self._mask: set | None = None

    def __enter__(self) -> "EndOnSignal":
        if threading.current_thread() is threading.main_thread():  # signals come to the main thread only
            self._mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
            self._thread = threading.Thread(target=self._wait, name="wirecheck-stop-signals", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is None:
            return
        self._left.set()
        self._thread.join()
        signal.pthread_sigmask(signal.SIG_SETMASK, self._mask)  # one pending now is delivered as usual

    def _wait(self) -> None:
        while not self._left.is_set():
            info = signal.sigtimedwait(STOP_SIGNALS, POLL_S)
            if info is not None:
                self._stop(info.si_signo)

    def _stop(self, signum: int) -> None:
        name = signal.Signals(signum).name
        code = 128 + signum
        with self.lock:
            if self.on_signal is not None:
                # The record may already be ended (the main thread got there first): its code stands.
                code = self.on_signal(name, code) or code
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
