"""A zygote: one worker interpreter that has imported torch and forks spare workers from itself.

Most of a worker's start is `import torch` (3.1-4.5 s of the 4-5 s on a 1x H200 node:
fixtures/reference/h200-1/start-costs-2026-12-02), and on a small machine it is CPU the tests need. A fork of
a process that has imported torch shares its memory and costs milliseconds. The run's spare stock
(spares.py) asks the zygote for each spare it wants, and for one more whenever a rank finds none waiting;
a new interpreter is only for a rank whose environment a spare cannot take on.

Why a forked spare is the same as a new one: the zygote is a spare that never becomes a rank. It has
touched no CUDA and no NCCL (checked before it forks anything, as a spare checks), runs no thread of its
own when it forks (its parent watch is its own loop), and each child resets what the zygote set for
itself (the SIGCHLD handler) before it waits as a spare. One difference, on purpose: what the child inherited is
frozen (gc.freeze before each fork), so its collections walk only the objects it made (see `serve`).

A forked spare is the zygote's child, not ours: `ForkedProcess` is its Popen-like handle here. The zygote
reaps its children and writes each exit status to a file named by the pid, which `poll` reads.

Protocol (over the zygote's private pipe, a socket pair): zygote -> parent ("ready",) once it has imported
torch, or ("cannot", why) where it may not fork (CUDA initialised, more than one thread), and it ends;
parent -> zygote ("fork", log_path) followed by the child's end of a new pipe (SCM_RIGHTS); zygote -> parent
("forked", pid), or ("cannot", why) where it may fork no more. ("preload",) asks it to import what the training
strategies' set-up imports (TRAINER_MODULES) the next time it is idle, so that the spares forked after it have
them. ("exit",) ends it.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import time
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from multiprocessing.reduction import recv_handle, send_handle

from wirecheck.workers import evidence, parent_death, spawn

# How long the parent waits for a fork: the first one waits for the zygote's `import torch` (4-5 s on a
# GPU node, up to 40 s on a loaded 2-core machine); past this the zygote is given up and ranks start as
# new interpreters.
FORK_TIMEOUT_S = 120.0
# How often the zygote looks at its parent and reaps its children when nothing else wakes it.
IDLE_POLL_S = 0.2
# What every training strategy's set-up imports beyond torch: DDP's construction pulls in torch._dynamo (and sympy
# with it), FSDP torch.distributed.fsdp and DTensor. In a new process on a 1x H200 node they took 1.3-1.4 s and
# 2.3-2.9 s after torch (fixtures/reference/h200-1/start-end-2026-12-04/), paid by every strategy run. Imported in
# the zygote on request, when idle and after the first spares: a run's first groups must not wait for them, and a
# run without training (a one-GPU node, a simulation) never asks. Pure Python: no CUDA, no thread (checked after,
# as at the start).
TRAINER_MODULES = ("torch._dynamo", "torch.distributed.fsdp", "torch.distributed.tensor")


def available() -> bool:
    """Forking is Linux's (and other POSIX systems'); elsewhere every worker is a new interpreter."""
    return hasattr(os, "fork") and sys.platform.startswith("linux")


class ForkedProcess:
    """The handle of a spare the zygote forked, with what the workers' code asks of a Popen: pid, poll, wait,
    returncode (teardown kills by process group, as for a new interpreter). Its status is the zygote's file
    `status_dir/PID`; a child whose zygote is gone died of its parent-death signal then, and reads as killed."""

    def __init__(self, pid: int, status_dir: str, zygote: subprocess.Popen):
        self.pid = pid
        self.returncode: int | None = None
        self.args = ["(forked by the zygote)", str(zygote.pid)]
        self._status = os.path.join(status_dir, str(pid))
        self._zygote = zygote

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._written()
            if self.returncode is None and self._zygote.poll() is not None:
                # The zygote ended: the kernel sent this child its parent-death signal (SIGKILL) then, unless
                # the zygote wrote its status just before it ended.
                self.returncode = self._written()
                if self.returncode is None:
                    self.returncode = -signal.SIGKILL
        return self.returncode

    def _written(self) -> int | None:
        try:
            with open(self._status, encoding="ascii") as fh:
                return int(fh.read())
        except (FileNotFoundError, ValueError):
            return None

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.01)
        return self.returncode


class Zygote:
    """The parent's side: the zygote's process (started as a worker with `--zygote`) and `fork`."""

    def __init__(self, folder: str):
        """Started now, from the main thread (parent_death), with its log and exit files in `folder`."""
        self.status_dir = os.path.join(folder, "exits")
        os.makedirs(self.status_dir, exist_ok=True)
        self.env = spawn.base_env({})
        self.cwd = os.getcwd()
        self.log_path = os.path.join(folder, "zygote.log")
        self.proc, self.conn = spawn.launch(["--zygote", self.status_dir, "--parent-death-signal"], self.env, self.log_path)
        self.forked = 0
        self.failed: str | None = None  # why it was given up
        self._ready = False  # it said it imported torch

    def alive(self) -> bool:
        return self.failed is None and self.proc.poll() is None

    def ready(self) -> bool:
        """Whether it has imported torch, without waiting: a stock fills only from a ready zygote, so that the
        run's start never waits for the import (a rank that needs a spare does)."""
        if not self._ready and self.failed is None:  # an ended zygote's last words are still to read
            try:
                if self.conn.poll(0):
                    self._said(self.conn.recv())
            except (OSError, EOFError, ValueError) as exc:
                self.give_up(self._why_not(exc))
        return self._ready

    def _said(self, msg: tuple) -> None:
        if msg[0] != "ready":
            raise ValueError(msg[1])
        self._ready = True

    def _why_not(self, exc: BaseException) -> str:
        said = "" if isinstance(exc, ValueError) else evidence.tail(self.log_path, 1).strip()  # a death's why
        return (f"the zygote (pid {self.proc.pid}) did not fork: {str(exc) or type(exc).__name__}"
                + (f" ({said})" if said else ""))

    def fork(self, log_path: str) -> tuple[ForkedProcess, Connection] | None:
        """A new spare whose output goes to `log_path`, and the parent's end of its pipe; None where the zygote
        cannot give one (it died, refused, or did not answer in FORK_TIMEOUT_S): it is then given up."""
        if not self.alive():
            return None
        parent_end, child_end = Pipe(duplex=True)
        try:
            if not self._ready:  # its import first (a rank waits for it: a new interpreter would import too)
                if not self.conn.poll(FORK_TIMEOUT_S):
                    raise TimeoutError(f"not ready in {FORK_TIMEOUT_S:g} s")
                self._said(self.conn.recv())
            self.conn.send(("fork", log_path))
            send_handle(self.conn, child_end.fileno(), self.proc.pid)
            if not self.conn.poll(FORK_TIMEOUT_S):
                raise TimeoutError(f"no answer in {FORK_TIMEOUT_S:g} s")
            kind, answer = self.conn.recv()
            if kind != "forked":
                raise ValueError(answer)
        except (OSError, EOFError, TimeoutError, ValueError) as exc:
            parent_end.close()
            self.give_up(self._why_not(exc))
            return None
        finally:
            child_end.close()
        pid = answer
        self.forked += 1
        return ForkedProcess(pid, self.status_dir, self.proc), parent_end

    def preload(self) -> None:
        """Ask it to import TRAINER_MODULES when it is next idle (the spares forked after have them)."""
        if self.alive():
            try:
                self.conn.send(("preload",))
            except OSError as exc:
                self.give_up(self._why_not(exc))

    def give_up(self, why: str) -> None:
        """Fork no more from it. It is not killed here: ranks it forked may be running in groups, and they die
        with it (their parent-death signal). `close`, at the stock's end, kills it."""
        self.failed = self.failed or why

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.conn.close()


# ---- the zygote's side ---------------------------------------------------------------------------


def _reaper(status_dir: str):
    """The SIGCHLD handler. A handler runs between any two bytecodes of the zygote, an import's included, and what
    it raises is raised there: so it only makes system calls, and raises nothing. `open(..., encoding=...)` looked
    its codec up, an import, and inside the zygote's import of torch._dynamo that failed ("unknown encoding:
    ascii"), leaving half of torch's modules imported for every child to import again (a child's DDP then failed:
    "Only a single TORCH_LIBRARY can be used to register the namespace c10d_functional")."""
    def reap(*_args) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            tmp = os.path.join(status_dir, f".{pid}")
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
                try:
                    os.write(fd, str(os.waitstatus_to_exitcode(status)).encode())
                finally:
                    os.close(fd)
                os.replace(tmp, os.path.join(status_dir, str(pid)))
            except OSError:  # the folder is gone (the stock ended): no one is left to read it
                pass

    return reap


def _import_whole(names) -> str | None:
    """`names` imported here, SIGCHLD held until they are (its handler runs after); a module missing itself is
    skipped (a torch without it: the trainer that needs it fails in its own process). Why one failed part way, or
    None: torch registers operators as its modules run, so a child importing the rest again would register them
    twice, and the zygote must fork no more."""
    import importlib

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    try:
        for name in names:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as exc:
                if exc.name != name:  # something it imports is missing: part of it ran
                    return f"importing {name} failed in the zygote ({exc}); it forks no more"
            except Exception as exc:  # noqa: BLE001 - whatever it raised, its children would inherit half of it
                return f"importing {name} failed in the zygote ({type(exc).__name__}: {exc}); it forks no more"
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
    return None


def _import_trainer_modules() -> str | None:
    """TRAINER_MODULES imported here (`_import_whole`); why the zygote may fork no more after them, or None."""
    import torch

    failed = _import_whole(TRAINER_MODULES)
    if failed:
        return failed
    if torch.cuda.is_initialized():
        return f"importing {', '.join(TRAINER_MODULES)} initialised CUDA in the zygote"
    threads = len(os.listdir("/proc/self/task"))
    if threads > 1:
        return f"the zygote runs {threads} threads after importing {', '.join(TRAINER_MODULES)}; a fork copies only one"
    return None


def serve(conn: Connection, status_dir: str, parent_pid: int) -> tuple[int, str, int] | None:
    """Run as the zygote until told to exit (None) or the parent goes (exits). Returns only in a forked child:
    the descriptor of its pipe to the parent, its log path and the zygote's pid, for it to go on as a spare."""
    import torch
    import torch.distributed  # noqa: F401  (as a spare imports it)

    cannot = None  # why this zygote may fork nothing (more): said instead of ready (and it ends), or of a fork
    if torch.cuda.is_initialized():
        cannot = "CUDA was initialised in the zygote: its children would share its context"
    elif len(os.listdir("/proc/self/task")) > 1:
        # An OpenMP pool started at import (OMP_NUM_THREADS above 1): a fork copies only this thread, and
        # the children's pool would wait for threads that are not there.
        cannot = (f"the zygote runs {len(os.listdir('/proc/self/task'))} threads after importing torch "
                  f"(OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}); a fork copies only one")
    if cannot is not None:
        conn.send(("cannot", cannot))
        return None
    reap = _reaper(status_dir)
    signal.signal(signal.SIGCHLD, reap)
    conn.send(("ready",))
    preload = False  # asked to import TRAINER_MODULES, not done yet
    while True:
        if os.getppid() != parent_pid:
            os._exit(70)
        reap()
        try:
            if not conn.poll(IDLE_POLL_S):
                if preload:
                    preload = False
                    cannot = _import_trainer_modules()
                continue
            msg = conn.recv()
            if msg[0] == "preload":
                preload = True
                continue
            if msg[0] != "fork":
                return None
            fd = recv_handle(conn)
        except (EOFError, OSError):
            return None
        if cannot is not None:
            os.close(fd)
            conn.send(("cannot", cannot))
            continue
        zygote_pid = os.getpid()
        # What the zygote holds (torch's modules and, after a preload, the trainers'), out of every collection from
        # now on, here and in the child: a training run collects fully four or five times (before its steps, after
        # them, at its end), and each full collection walked these hundreds of thousands of objects, writing to each
        # one's header, so the child's first also copied the pages it shares with the zygote. The objects a child
        # makes are collected as before. Python's gc.freeze documentation recommends it before a fork.
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the rank's own subprocesses are its to wait for
            conn.close()
            return _as_child(fd, msg[1], zygote_pid)
        os.close(fd)
        conn.send(("forked", pid))


def _as_child(fd: int, log_path: str, zygote_pid: int) -> tuple[int, str, int]:
    """In the forked child: its own session (as a new interpreter's start_new_session), its output to
    `log_path`, the parent-death signal from the zygote."""
    os.setsid()
    parent_death.arm(signal.SIGKILL, zygote_pid)
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    return fd, log_path, zygote_pid
