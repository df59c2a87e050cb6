"""Helper threads that leave the stop signals to the main thread.

The kernel hands a signal sent to the process (a terminal's Ctrl-C, a scheduler's SIGTERM) to any thread
that does not block it. Python runs its handler in the main thread, but only the receiving thread's
blocking call is interrupted: where that is a sampler's sleep, the main thread may sit in a long wait (a
burn-in round, a worker call) before it notices, and the Ctrl-C seems ignored. A helper thread started
here blocks SIGINT, SIGTERM and SIGHUP from its first instruction (it inherits the mask the starting thread
holds for that moment), so the kernel delivers them to the main thread.
"""

from __future__ import annotations

import signal
import threading

STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


def start_helper(thread: threading.Thread) -> threading.Thread:
    """`thread` started with the stop signals blocked in it."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        thread.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    return thread
