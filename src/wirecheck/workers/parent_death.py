"""A child process that ends with its parent: Linux's parent-death signal (prctl PR_SET_PDEATHSIG).

`wirecheck validate` runs pytest as a child, and pytest runs the worker processes. When a parent is
killed (a supervisor's SIGKILL, a job step's hard kill, the out-of-memory killer) nothing else ends
its child: it is re-parented to PID 1 and goes on holding the CPUs, the GPUs and the node lock.

Two traps, both handled here:
- the kernel sends the signal when the *thread* that forked the child ends, not the process: only a
  child forked by its parent's main thread may ask for it (`forked_by_main_thread`), since the main
  thread lives as long as the process;
- the parent may die between the fork and prctl: the child then finds that its parent is no longer
  the one that started it and sends itself the signal at once.

Elsewhere than Linux there is no such call: `arm` does nothing and says so (False); the workers still
watch their parent (worker.py).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

_libc_prctl = None


def _prctl():
    """libc's prctl, looked up once in the parent: dlopen in a forked child of a threaded process may
    hang on a lock another thread held at the fork."""
    global _libc_prctl
    if _libc_prctl is None and sys.platform.startswith("linux"):
        try:
            _libc_prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            _libc_prctl = False
    return _libc_prctl or None


def prepare() -> bool:
    """Look prctl up now, in the parent, before it forks: True where the parent-death signal exists."""
    return _prctl() is not None


def forked_by_main_thread() -> bool:
    """Whether a child forked now would be the main thread's (the only one safe to arm)."""
    return threading.current_thread() is threading.main_thread()


def arm(sig: int, parent_pid: int) -> bool:
    """In the child: `sig` when the parent dies. If the parent `parent_pid` is gone already (it died
    before this call), the signal is sent now. False where the call does not exist or failed."""
    prctl = _prctl()
    if prctl is None or prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        return False
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), sig)
    return True
