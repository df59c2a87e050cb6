"""Run a child command the way a shell runs a foreground job: Ctrl-C is the child's to handle.

`wirecheck validate` starts pytest as a child. A Ctrl-C in the terminal sends SIGINT to the whole
foreground process group, so pytest gets it directly and, given the time, prints its summary
and the plugin closes its records. The parent must neither die first (a Python traceback and a
shell prompt over pytest's output) nor kill the child. So, like system(3), the parent does not
act on the first SIGINT that the child also received; it only waits and reports it.

Who else got a SIGINT is read from its siginfo: the terminal's carries si_code SI_KERNEL (the
whole foreground group got it). Any other (`kill -INT <pid>`, `timeout -s INT`) was sent by a
process, most likely to the parent alone, so it is passed on to the child once; a signal sent
to the whole group that way reaches the child twice, which only means an early second Ctrl-C.
A second SIGINT stops the child with SIGTERM (no summary), a third with SIGKILL. SIGTERM and SIGHUP
are passed on (a second one to a child that got it too is harmless), so the child is never orphaned.

The child dies with the parent: if the parent is killed outright (SIGKILL from a supervisor or a job
step's hard kill), the kernel sends the child SIGTERM (Linux's parent-death signal,
wirecheck.workers.parent_death), which pytest takes as it takes a scheduler's SIGTERM: the test in
progress stops, the workers are ended, the record gets its end line, the node lock is let go.

The siginfo needs sigtimedwait (Linux, the BSDs); where it is missing (macOS) the parent only
counts SIGINTs and passes SIGTERM on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from wirecheck.core.threads import STOP_SIGNALS
from wirecheck.workers import parent_death

SI_KERNEL = 0x80  # si_code of a signal the kernel sent itself: the tty's Ctrl-C (not in `signal`)
_POLL_S = 1.0  # SIGCHLD wakes the wait at once; this only bounds a missed one


@dataclass(frozen=True)
class Outcome:
    returncode: int  # the child's; negative: killed by that signal
    interrupts: int  # SIGINTs the parent received while the child ran
    terminated: bool  # the parent received SIGTERM
    hangup: bool = False  # the parent received SIGHUP (its terminal or ssh session closed)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _send(proc: subprocess.Popen, sig: int) -> None:
    try:
        proc.send_signal(sig)
    except ProcessLookupError:  # already gone: nothing left to stop
        pass


class _Policy:
    """What the parent does on each signal; shared by both waiting loops."""

    def __init__(self, proc: subprocess.Popen, name: str, notice: Callable[[str], None]):
        self.proc, self.name, self.notice = proc, name, notice
        self.interrupts = 0
        self.terminated = False
        self.hangup = False

    def on_sigint(self, from_terminal: bool) -> None:
        self.interrupts += 1
        if self.interrupts == 1:
            if not from_terminal:
                _send(self.proc, signal.SIGINT)
        elif self.interrupts == 2:
            self.notice(f"{self.name}: interrupted again: stopping pytest now (SIGTERM; its summary may be lost)")
            _send(self.proc, signal.SIGTERM)
        else:
            self.notice(f"{self.name}: interrupted a third time: killing pytest (SIGKILL)")
            _send(self.proc, signal.SIGKILL)

    def on_sigterm(self) -> None:
        self.terminated = True
        _send(self.proc, signal.SIGTERM)

    def on_sighup(self) -> None:
        self.hangup = True
        _send(self.proc, signal.SIGHUP)


_WAITED = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD}


def _run_with_siginfo(cmd: Sequence[str], name: str, notice: Callable[[str], None], pass_fds: Sequence[int] = (),
                      env: Mapping[str, str] | None = None) -> Outcome:
    # The signals stay blocked in the parent and are taken with sigtimedwait, which gives their
    # siginfo; the child gets the original mask back before exec (masks are inherited).
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _WAITED)
    parent = os.getpid()
    # Only a child of the main thread may die with us (the signal follows the thread that forked it).
    dies_with_us = parent_death.prepare() and parent_death.forked_by_main_thread()

    def in_child() -> None:  # after the fork, before exec: no library is loaded here (prepare did)
        # pytest must take Ctrl-C itself: one started with SIGINT ignored (inherited through exec from whoever
        # started this command) keeps ignoring it, so the terminal's Ctrl-C and the one passed on are both lost
        # and the run goes to its end. The parent handles the signals for the child's sake, so they are default.
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask - STOP_SIGNALS)
        if dies_with_us:
            parent_death.arm(signal.SIGTERM, parent)

    try:
        proc = subprocess.Popen(list(cmd), preexec_fn=in_child, pass_fds=tuple(pass_fds), env=env)
        policy = _Policy(proc, name, notice)

        def handle(info) -> None:
            if info.si_signo == signal.SIGINT:
                policy.on_sigint(from_terminal=info.si_code == SI_KERNEL)
            elif info.si_signo == signal.SIGTERM:
                policy.on_sigterm()
            elif info.si_signo == signal.SIGHUP:
                policy.on_sighup()

        while proc.poll() is None:
            info = signal.sigtimedwait(_WAITED, _POLL_S)
            if info is not None:
                handle(info)
        # Signals that came while the child was exiting: counted, and not left pending, or
        # unblocking would raise them here as a KeyboardInterrupt.
        while (info := signal.sigtimedwait(_WAITED, 0)) is not None:
            if info.si_signo == signal.SIGINT:
                policy.interrupts += 1
            elif info.si_signo == signal.SIGTERM:
                policy.terminated = True
            elif info.si_signo == signal.SIGHUP:
                policy.hangup = True
        return Outcome(proc.returncode, policy.interrupts, policy.terminated, policy.hangup)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def _run_with_handlers(cmd: Sequence[str], name: str, notice: Callable[[str], None], pass_fds: Sequence[int] = (),
                       env: Mapping[str, str] | None = None) -> Outcome:
    proc = subprocess.Popen(list(cmd), pass_fds=tuple(pass_fds), env=env)
    policy = _Policy(proc, name, notice)
    previous = {
        signal.SIGINT: signal.signal(signal.SIGINT, lambda *_: policy.on_sigint(from_terminal=True)),
        signal.SIGTERM: signal.signal(signal.SIGTERM, lambda *_: policy.on_sigterm()),
        signal.SIGHUP: signal.signal(signal.SIGHUP, lambda *_: policy.on_sighup()),
    }
    try:
        proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return Outcome(proc.returncode, policy.interrupts, policy.terminated, policy.hangup)


def run_foreground(cmd: Sequence[str], name: str = "wirecheck", notice: Callable[[str], None] = _stderr,
                   pass_fds: Sequence[int] = (), env: Mapping[str, str] | None = None) -> Outcome:
    """Run `cmd` to its end, handling SIGINT/SIGTERM as the module docstring says; `pass_fds`: descriptors
    the child keeps (subprocess's); `env`: its environment (None: this process's).

    Call from the main thread (signal masks and handlers are per thread / main-thread only).
    """
    if hasattr(signal, "sigtimedwait"):
        return _run_with_siginfo(cmd, name, notice, pass_fds, env)
    return _run_with_handlers(cmd, name, notice, pass_fds, env)
