"""Helper threads leave the stop signals to the main thread (wirecheck.core.threads)."""

from __future__ import annotations

import signal
import threading

from wirecheck.core.threads import STOP_SIGNALS, start_helper


def _mask_seen_by(start) -> set:
    seen = {}
    thread = threading.Thread(target=lambda: seen.update(mask=signal.pthread_sigmask(signal.SIG_BLOCK, [])))
    start(thread)
    thread.join(5)
    return set(seen["mask"])


def test_a_helper_blocks_the_stop_signals_and_the_starter_keeps_its_mask():
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    assert STOP_SIGNALS <= _mask_seen_by(start_helper)
    assert not STOP_SIGNALS & _mask_seen_by(threading.Thread.start)  # a plain thread: the case this guards against
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before

