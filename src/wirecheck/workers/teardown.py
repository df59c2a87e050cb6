"""Ending a group's ranks: asked to exit, or killed with everything they started; its logs kept as
evidence when it failed, removed when it did not; and no rank outliving the parent interpreter.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import time
import weakref
from typing import Protocol

from wirecheck.workers import protocol
from wirecheck.workers.spawn import RankProcesses


def ask_to_exit(ranks: RankProcesses, timeout_s: float) -> None:
    """Ask every rank to exit (destroy_process_group, no barrier) and wait at most `timeout_s` in all."""
    protocol.ask_to_exit(ranks.conns)
    deadline = time.monotonic() + timeout_s
    for proc in ranks.procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass


def kill(ranks: RankProcesses) -> None:
    """SIGKILL every rank's process group (its children too), reap, close the pipes."""
    for proc in ranks.procs:
        try:
            # Also after the rank itself exited: children it left behind share its group id,
            # and a group id stays reserved while any member lives.
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for proc in ranks.procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    for conn in ranks.conns:
        conn.close()


def finish_logs(log_dir: str, failed: bool) -> None:
    """A failed group's logs are evidence (its failure names them); a healthy group's are not."""
    if not failed:
        shutil.rmtree(log_dir, ignore_errors=True)


class Abandonable(Protocol):
    def _abandon(self, reason: str) -> None: ...


# Groups whose ranks may still run. Weak: a group dropped without close() is killed by its own
# __del__, and must not be kept alive by this set.
_LIVE: "weakref.WeakSet[Abandonable]" = weakref.WeakSet()


def track(group: Abandonable) -> None:
    _LIVE.add(group)


def untrack(group: Abandonable) -> None:
    _LIVE.discard(group)


@atexit.register
def _kill_live_groups() -> None:
    # The parent leaving without close() (a crash in a test, Ctrl-C) must not leave GPU processes behind.
    for group in list(_LIVE):
        group._abandon("the parent interpreter exited")
