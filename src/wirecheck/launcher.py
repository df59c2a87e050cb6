"""WorkerGroup: one process per rank, pinned to a GPU subset, serving calls under deadlines.

The pytest process never touches CUDA; it starts fresh interpreters (`python -m wirecheck.worker`) that
do, sends them calls ("package.module:function" plus kwargs) and collects one return value per rank.

Whatever goes wrong comes back as a `WorkerError` carrying a `failures.GroupFailure` (plain data: which
rank did what, when, with its traceback, stderr tail or Python stack). The root cause is the earliest
failure in time, not the lowest rank. After a hang or a crash the group is killed and unusable; the
caller starts a new one. A failed group's per-rank logs are kept (in `log_dir` when given) and named
in the failure; a group that closes without failing removes them.

Start-up: rank 0 creates the group's store on a port the kernel picks and reports it here; the other
ranks get it from us (wirecheck.rendezvous). No port is chosen in advance, so none can be stolen.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from multiprocessing import Pipe
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from wirecheck import bytecode
from wirecheck import failures as F
from wirecheck.deadlines import Deadline
from wirecheck.failures import GroupFailure, RankFailure
from wirecheck.safefs import make_dirs, path_problem
from wirecheck.worker import RankContext

__all__ = [
    "RankContext",
    "WorkerCallError",
    "WorkerCrash",
    "WorkerError",
    "WorkerGroup",
    "WorkerGroupDead",
    "WorkerTimeout",
]

BACKENDS = ("nccl", "gloo")
STDERR_TAIL_LINES = 40
STACK_DUMP_LINES = 60
# Poll interval while waiting for replies: how late a death without a closed socket is noticed.
POLL_S = 0.1


class WorkerError(RuntimeError):
    """Anything that went wrong in a worker group. `failure`: the data (None only for a group
    closed on purpose); `partial`: {rank: value} of ranks that did reply."""

    def __init__(self, message: str, *, label: str, what: str, failure: GroupFailure | None = None,
                 partial: dict[int, Any] | None = None):
        super().__init__(message)
        self.label = label
        self.what = what
        self.failure = failure
        self.partial = dict(partial or {})


class WorkerCallError(WorkerError):
    """The root cause is a rank that raised. `rank`: that rank; `errors`: every rank that raised."""

    @property
    def rank(self) -> int:
        return self.failure.root.rank

    @property
    def errors(self) -> dict[int, tuple[str, str]]:
        return {r.rank: (r.summary, r.evidence) for r in self.failure.ranks if r.kind == F.RAISED}

    @property
    def traceback(self) -> str:
        return self.failure.root.evidence


class WorkerTimeout(WorkerError):
    """The call did not finish by its deadline and no rank failed first. `stacks`: {rank: Python
    stack dump} of the ranks that had not replied."""

    @property
    def replied(self) -> list[int]:
        return list(self.failure.replied)

    @property
    def stacks(self) -> dict[int, str]:
        return {r.rank: r.evidence for r in self.failure.ranks if r.kind == F.HUNG}


class WorkerCrash(WorkerError):
    """The root cause is a worker process that died. `returncode` is Popen's: negative for a signal."""

    @property
    def rank(self) -> int:
        return self.failure.root.rank

    @property
    def returncode(self) -> int | None:
        return self.failure.root.returncode

    @property
    def stderr_tail(self) -> str:
        return self.failure.root.evidence


class WorkerGroupDead(WorkerError):
    """The group was closed or killed earlier; create a new one. `failure` is the earlier one, if any."""


_ERROR_TYPES = {F.RAISED: WorkerCallError, F.DIED: WorkerCrash, F.HUNG: WorkerTimeout}


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode >= 0:
        return f"exit code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    hint = " (also what the kernel's OOM killer sends: check dmesg)" if -returncode == signal.SIGKILL else ""
    return f"killed by {name}{hint}"


def _import_path_entries(existing: str | None) -> list[tuple[str, str | None]]:
    """(entry, why it is left out or None), in order, for the workers' import path."""
    entries = [os.getcwd()]
    entries += [os.path.abspath(p) if p else os.getcwd() for p in sys.path if isinstance(p, str)]
    entries += [p for p in (existing or "").split(os.pathsep) if p]
    seen: set[str] = set()
    out = []
    root = os.geteuid() == 0
    for p in entries:
        if p not in seen and os.path.exists(p):
            seen.add(p)
            # As root, a folder another user can write is code they choose (a torch.py planted in a
            # world-writable working directory would be imported before the real one): left out.
            out.append((p, path_problem(p) if root else None))
    return out


def _python_path(existing: str | None) -> str:
    """The parent's import path for the workers: cwd and sys.path first, then what PYTHONPATH had;
    as root, without the folders another user could write (untrusted_import_path says which).

    Worker functions live in modules the parent can import (pytest puts test directories on sys.path,
    `selftests.faulty_workers` resolves from the repository root); a fresh interpreter would not see them.
    """
    return os.pathsep.join(p for p, problem in _import_path_entries(existing) if problem is None)


def untrusted_import_path() -> list[str]:
    """The folders a run as root leaves out of its workers' import path, each with why."""
    return [f"{p} ({problem})" for p, problem in _import_path_entries(os.environ.get("PYTHONPATH")) if problem]


def _tail(path: str, lines: int, start: int = 0) -> str:
    """The last `lines` lines of a log, from byte `start` on."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            end = f.tell()
            begin = max(start, end - 256 * 1024)
            f.seek(begin)
            data = f.read()
    except OSError as exc:
        return f"<log {path} unreadable: {exc}>"
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines()) if text.strip() else "    <nothing written>"


def _as_deadline(timeout_s: float | Deadline) -> Deadline:
    if isinstance(timeout_s, Deadline):
        return timeout_s
    return Deadline(float(timeout_s), "")


_LIVE_GROUPS: "weakref.WeakSet[WorkerGroup]" = weakref.WeakSet()


@atexit.register
def _kill_live_groups() -> None:
    # The parent leaving without close() (a crash in a test, Ctrl-C) must not leave GPU processes behind.
    for group in list(_LIVE_GROUPS):
        group._kill("the parent interpreter exited")
        group._finish_logs()


class _Call:
    """What one wait for replies has gathered so far."""

    def __init__(self, world_size: int):
        self.pending = set(range(world_size))  # neither replied nor failed
        self.values: dict[int, Any] = {}
        self.failed: dict[int, RankFailure] = {}
        self.grace_end: float | None = None
        # When the pipes of the ranks still running were last seen open (time.time()): a death
        # found later happened after this, and is dated here (see _record_death).
        self.alive_at = time.time()


class WorkerGroup:
    """`world_size` worker processes for one label (a placement id), serving `run` calls.

    On NCCL rank r uses local device r of `gpus` (CUDA_VISIBLE_DEVICES is the same list for every rank).
    With join_process_group=False the rank environment (RANK, WORLD_SIZE, MASTER_ADDR/PORT of the
    group's running store, ...) is set but the group is left to the worker function (Accelerate and
    DeepSpeed initialise it themselves). `log_dir`: where the ranks' logs go (a folder per group);
    default: the system's temporary directory.
    """

    # How long the other ranks may still answer after one rank raised: a rank that raised no longer
    # joins collectives, so the others are likely stuck in one and will never reply.
    error_grace_s = 3.0
    # After a rank died: long enough for peers that notice (gloo: a closed socket, within
    # milliseconds) to report; NCCL peers spin in their kernel and never do.
    death_grace_s = 1.0
    # How long a SIGUSR1'd rank gets to write its stack dump.
    stack_dump_wait_s = 1.0
    close_timeout_s = 5.0

    def __init__(
        self,
        label: str,
        world_size: int,
        backend: str,
        gpus: tuple[int, ...] | None = None,
        env: dict[str, str] | None = None,
        join_process_group: bool = True,
        start_timeout_s: float = 120,
        log_dir: str | os.PathLike | None = None,
    ):
        if backend not in BACKENDS:
            raise ValueError(f"WorkerGroup {label!r}: backend {backend!r} is not one of {BACKENDS}")
        if world_size < 1:
            raise ValueError(f"WorkerGroup {label!r}: world_size must be >= 1, got {world_size}")
        if gpus is not None and len(gpus) != world_size:
            raise ValueError(
                f"WorkerGroup {label!r}: {len(gpus)} GPUs {tuple(gpus)} for world_size {world_size}; "
                "one GPU per rank"
            )
        self.label = label
        self.world_size = world_size
        self.backend = backend
        self.gpus = tuple(gpus) if gpus is not None else None
        self.env = dict(env or {})
        self.join_process_group = join_process_group
        self.info: list[dict[str, Any]] = []  # per rank, from the worker: pid, port, torch, device, NCCL
        self.port: int | None = None  # the group's store, as rank 0 reported it
        self.failure: GroupFailure | None = None  # the latest failed call or start, if any
        self._procs: list[subprocess.Popen] = []
        self._conns: list[Connection] = []
        self._dead: str | None = None
        self._seq = 0
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", label)[:60]
        if log_dir is not None:  # as root, only a folder no other user can redirect (safefs.make_dirs)
            make_dirs(log_dir, what="the workers' log folder", fix="pass --wirecheck-json with a path in a folder "
                      "only root can write (the logs go beside it)")
        # mkdtemp: a new folder of this user's, 0700, that no one else can rename or fill.
        self.log_dir = tempfile.mkdtemp(prefix=f"{safe}-" if log_dir is not None else f"wirecheck-{safe}-",
                                        dir=log_dir)
        self.log_paths = [os.path.join(self.log_dir, f"rank{r}.log") for r in range(world_size)]
        _LIVE_GROUPS.add(self)
        try:
            self._start(start_timeout_s)
        except BaseException:
            self._kill("start failed")
            self._finish_logs()  # kept when the start failed: the error names them
            raise

    # ---- public -------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._dead is None and all(p.poll() is None for p in self._procs)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def run(self, fn: str, kwargs: dict[str, Any] | None, timeout_s: float | Deadline,
            what: str | None = None) -> list[Any]:
        """Call `fn(ctx, **kwargs)` on every rank; return the values in rank order.

        `timeout_s`: seconds, or a `deadlines.Deadline` whose note the failure repeats.
        Raises WorkerCallError (a rank raised first), WorkerCrash (a rank died first), WorkerTimeout
        (not all replied in time, nobody failed) or WorkerGroupDead (unusable before the call).
        """
        what = what or fn
        deadline = _as_deadline(timeout_s)
        if self._dead is not None:
            raise WorkerGroupDead(
                f"{what} on {self.label}: this worker group is no longer usable ({self._dead}); "
                "start a new WorkerGroup",
                label=self.label, what=what, failure=self.failure,
            )
        module, sep, attr = fn.partition(":")
        if not (module and sep and attr):
            raise ValueError(f"{what} on {self.label}: worker function {fn!r} must be 'package.module:function'")
        self._raise_if_dead_rank(what)
        self._seq += 1
        try:
            # Pickled once, here: a bad argument fails before any rank got the call.
            payload = pickle.dumps(("call", self._seq, fn, dict(kwargs or {})), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            raise ValueError(f"{what} on {self.label}: the arguments cannot be sent to the workers: {exc}") from exc
        for rank, conn in enumerate(self._conns):
            try:
                conn.send_bytes(payload)
            except (OSError, EOFError) as exc:
                # A closed socket means a dying rank; some ranks already have the call: unusable.
                self._raise_if_dead_rank(what, wait_s=2.0)
                self._kill(f"could not send {what} to rank {rank}")
                raise WorkerGroupDead(f"{what} on {self.label}: could not send the call to rank {rank}: {exc}",
                                      label=self.label, what=what) from exc
        return self._collect(self._seq, what, deadline, F.CALL)

    def close(self) -> None:
        """Ask every rank to exit (destroy_process_group, no barrier); kill what is left after a few
        seconds. The logs go unless the group failed."""
        if self._dead is None:
            for conn in self._conns:
                try:
                    conn.send(("exit",))
                except (OSError, EOFError):
                    pass
            deadline = time.monotonic() + self.close_timeout_s
            for proc in self._procs:
                try:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        self._kill(self._dead or "closed")
        self._finish_logs()

    def __enter__(self) -> WorkerGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._kill("garbage-collected without close()")
            self._finish_logs()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "alive" if self.alive else f"dead: {self._dead}"
        return f"WorkerGroup({self.label!r}, world_size={self.world_size}, backend={self.backend!r}, {state})"

    # ---- start --------------------------------------------------------------------------------

    def _worker_env(self, rank: int) -> dict[str, str]:
        env = dict(os.environ)  # pass-through: the GPU machines' NCCL_* switches must reach NCCL
        env.update(self.env)
        # As torchrun does: N ranks each spawning one OpenMP thread per core would oversubscribe.
        env.setdefault("OMP_NUM_THREADS", "1")
        env.setdefault("PYTHONUNBUFFERED", "1")  # prints reach the log before a crash
        # A rank whose NCCL watchdog sees an error or a timed-out collective ends its process without
        # waiting in ncclCommAbort, which can itself hang on a broken link (torch's default since 2.2;
        # explicit so an older torch behaves the same). The parent kills the group anyway; this keeps
        # a rank from wedging if the parent is gone. A value the user set is kept.
        env.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "3")
        # NCCL's support for graph-captured launches mixed with eager ones in flight at the same time
        # adds a cross-stream dependency to every captured NCCL launch: 1-16 MiB replays took 3-6 us
        # more per call on 2x H200 with it (issue 13; NCCL picks the same ring/Simple/24 channels
        # either way). Our workers never have both in flight: every timed path ends synchronised
        # (collective_timing), and no other worker function captures. A value the user set is kept.
        env.setdefault("NCCL_GRAPH_MIXING_SUPPORT", "0")
        if self.gpus is not None:
            # Placements use NVML indices, which follow PCI bus order; CUDA's default order is
            # fastest-first, which can differ on mixed nodes. Make CUDA count as NVML does.
            env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in self.gpus)
        env["PYTHONPATH"] = _python_path(env.get("PYTHONPATH"))
        # Where the node's Python cannot keep compiled bytecode, read it from wirecheck's cache
        # (bytecode.py): otherwise every worker compiles torch from source again (3+ s each).
        env = bytecode.worker_env(env)
        # No MASTER_PORT yet: the worker sets it to the store's real port after the rendezvous, and
        # a stale one from the parent's environment (a run inside torchrun) must not be read before.
        for name in ("MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE"):
            env.pop(name, None)
        env.update(
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE=str(self.world_size),
            LOCAL_WORLD_SIZE=str(self.world_size),
            MASTER_ADDR="127.0.0.1",
        )
        return env

    def _spawn(self, rendezvous_timeout_s: float) -> None:
        for rank in range(self.world_size):
            parent_end, child_end = Pipe(duplex=True)
            # A new file in the group's own folder (mkdtemp), never through a link.
            fd = os.open(self.log_paths[rank], os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o644)
            with open(fd, "ab") as log:
                proc = subprocess.Popen(
                    [
                        sys.executable, "-m", "wirecheck.worker",
                        "--fd", str(child_end.fileno()),
                        "--parent-pid", str(os.getpid()),
                        "--label", self.label,
                        "--backend", self.backend,
                        "--rendezvous-timeout", f"{rendezvous_timeout_s:g}",
                        *(["--no-process-group"] if not self.join_process_group else []),
                    ],
                    env=self._worker_env(rank),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    pass_fds=(child_end.fileno(),),
                    # Own process group: killpg takes the rank's children too, and a terminal's
                    # Ctrl-C goes to the parent only, which then cleans up.
                    start_new_session=True,
                )
            # Only the child may hold its end: its death must read as EOF here.
            child_end.close()
            self._procs.append(proc)
            self._conns.append(parent_end)

    def _start(self, timeout_s: float) -> None:
        what = f"start of {self.world_size} {self.backend} worker(s)"
        self._spawn(timeout_s)
        self.info = self._collect(None, what, Deadline(float(timeout_s), "the start timeout"), F.START)

    # ---- waiting ------------------------------------------------------------------------------

    def _collect(self, seq: int | None, what: str, deadline: Deadline, phase: str) -> list[Any]:
        """Wait for one reply per rank (a call's, or 'ready' when seq is None) under one deadline.

        The first failure (a raise or a death) opens a short grace period in which the others may
        still reply or fail; then the ranks still silent are dumped and the group killed.
        """
        end = time.monotonic() + deadline.seconds
        call = _Call(self.world_size)
        try:
            while call.pending:
                now = time.monotonic()
                limit = min(end, call.grace_end) if call.grace_end is not None else end
                if now >= limit:
                    break
                # Every rank not failed yet, also those that replied: one that replied and then
                # died leaves the others waiting for it in the next collective.
                listening = [self._conns[r] for r in range(self.world_size) if r not in call.failed]
                ready = wait(listening, timeout=min(POLL_S, limit - now))
                checked_at = time.time()  # every pipe not ready was open until here
                for conn in ready:
                    self._take_reply(self._conns.index(conn), seq, call)
                for rank, proc in enumerate(self._procs):
                    if proc.poll() is not None and rank not in call.failed:
                        self._drain(rank, seq, call)
                        self._record_death(rank, call)
                call.alive_at = checked_at
                if call.failed and call.grace_end is None:
                    died = any(f.kind == F.DIED for f in call.failed.values())
                    call.grace_end = time.monotonic() + (self.death_grace_s if died else self.error_grace_s)
        except BaseException:
            # Interrupted (KeyboardInterrupt, a pytest-timeout signal): the ranks are mid-call, unusable.
            self._kill(f"{what} was interrupted")
            raise

        if not call.pending and not call.failed:
            return [call.values[r] for r in range(self.world_size)]
        raise self._failure_error(what, deadline, phase, call)

    def _take_reply(self, rank: int, seq: int | None, call: _Call) -> None:
        try:
            msg = self._conns[rank].recv()
        except (EOFError, OSError):
            # The pipe closed: the process is exiting.
            self._record_death(rank, call)
            return
        self._record(rank, msg, seq, call)

    def _record(self, rank: int, msg: tuple, seq: int | None, call: _Call) -> None:
        kind = msg[0]
        if seq is None:  # starting
            if kind == "rendezvous" and rank == 0:
                self._relay_port(int(msg[1]))
                return
            if kind == "ready":
                call.values[rank] = msg[1]
            elif kind == "init_error":
                call.failed[rank] = self._raised(rank, msg[1], msg[2], msg[3])
            else:
                return
        else:
            if kind not in ("ok", "error") or msg[1] != seq:
                return  # not this call's reply
            if kind == "ok":
                call.values[rank] = msg[2]
            else:
                call.failed[rank] = self._raised(rank, msg[2], msg[3], msg[4])
        call.pending.discard(rank)

    def _relay_port(self, port: int) -> None:
        """Rank 0's store is up: tell the others where (a dead rank shows up in the poll loop)."""
        self.port = port
        for conn in self._conns[1:]:
            try:
                conn.send(("rendezvous", port))
            except (OSError, EOFError):
                pass

    def _raised(self, rank: int, summary: str, tb: str, facts: dict) -> RankFailure:
        return RankFailure(rank=rank, kind=F.RAISED, at=facts.get("at"), summary=summary,
                           pid=self._procs[rank].pid, exception=facts.get("exception"),
                           out_of_memory=bool(facts.get("out_of_memory")), evidence=tb,
                           log=self.log_paths[rank])

    def _record_death(self, rank: int, call: _Call) -> None:
        """A rank's pipe closed or its process ended. It is dated at the last moment its pipe was
        seen open, not when this (possibly descheduled) parent noticed: a peer's "connection closed"
        error is stamped by the peer itself within milliseconds of the death and must not come
        first. The worker holds its pipe on its lowest descriptor and the kernel closes a dying
        process's descriptors in ascending order, so the pipe closes before any socket a peer
        could see close. A peer's raise stamped before that moment did come first."""
        if rank in call.failed:
            return  # it raised first: its death (an abort after the error) is a consequence
        proc = self._procs[rank]
        try:
            proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            pass
        call.failed[rank] = RankFailure(
            rank=rank, kind=F.DIED, at=call.alive_at, summary=describe_exit(proc.returncode), pid=proc.pid,
            returncode=proc.returncode, evidence=_tail(self.log_paths[rank], STDERR_TAIL_LINES),
            log=self.log_paths[rank])
        call.pending.discard(rank)

    def _drain(self, rank: int, seq: int | None, call: _Call) -> None:
        """Read what a dead rank managed to send before it died."""
        conn = self._conns[rank]
        try:
            while conn.poll(0):
                self._record(rank, conn.recv(), seq, call)
        except (EOFError, OSError):
            pass

    def _raise_if_dead_rank(self, what: str, wait_s: float = 0.0) -> None:
        """Before a call: a rank that died while idle makes the group unusable."""
        end = time.monotonic() + wait_s
        while True:
            if any(p.poll() is not None for p in self._procs):
                call = _Call(self.world_size)
                for rank, proc in enumerate(self._procs):
                    if proc.poll() is not None:
                        self._record_death(rank, call)
                call.pending.clear()
                raise self._failure_error(what, None, F.IDLE, call)
            if time.monotonic() >= end:
                return
            time.sleep(POLL_S)

    # ---- the failure --------------------------------------------------------------------------

    def _failure_error(self, what: str, deadline: Deadline | None, phase: str, call: _Call) -> WorkerError:
        """Dump the silent ranks' stacks, kill the group, and build the failure and its message."""
        silent = sorted(r for r in call.pending if self._procs[r].poll() is None)
        stacks = self._dump_stacks(silent) if silent else {}
        consistent = phase == F.CALL and not silent and all(f.kind == F.RAISED for f in call.failed.values())
        if not consistent:
            self._kill(f"{what} failed" if call.failed else f"{what} did not finish")
        # else: every rank answered (some with an error): the group is still in step and usable.
        waited = deadline.seconds if deadline is not None and not call.failed else None
        for rank in silent:
            call.failed[rank] = RankFailure(
                rank=rank, kind=F.HUNG, at=None, pid=self._procs[rank].pid, evidence=stacks[rank],
                summary=(f"no reply within {waited:g}s" if waited is not None else
                         "no reply after that (likely waiting in a collective for the failed rank)"),
                log=self.log_paths[rank])
        ranks = F.order(list(call.failed.values()))
        failure = GroupFailure(
            label=self.label, what=what, phase=phase, root=ranks[0], ranks=tuple(ranks),
            replied=tuple(sorted(call.values)), deadline_s=deadline.seconds if deadline else None,
            deadline_note=deadline.note if deadline else "", log_dir=self.log_dir,
        )
        failure = dataclasses.replace(failure, message=self._message(failure, call))
        self.failure = failure  # also keeps the logs at close, the message names them
        return _ERROR_TYPES[failure.kind](failure.message, label=self.label, what=what, failure=failure,
                                          partial=call.values)

    def _message(self, failure: GroupFailure, call: _Call) -> str:
        root, what = failure.root, failure.what
        lines: list[str] = []
        if root.kind == F.HUNG:
            note = f" ({failure.deadline_note})" if failure.deadline_note else ""
            lines.append(f"{what} on {self.label} did not finish within {failure.deadline_s:g}s{note}; rank stacks:")
            lines.append(f"replied: {list(failure.replied) or 'none'}; "
                         f"no reply: {[r.rank for r in failure.ranks]}")
        elif root.kind == F.RAISED:
            lines.append(f"{what} on {self.label}: rank {root.rank} raised {root.summary}")
        else:
            when = {F.IDLE: "before the call (while idle)", F.START: "during the start"}.get(failure.phase,
                                                                                           "during the call")
            lines.append(f"{what} on {self.label}: rank {root.rank} (pid {root.pid}) died {when}: {root.summary}")
        later = [r for r in failure.ranks[1:] if r.kind != F.HUNG]
        if later:
            lines.append("root cause: the earliest failure; after it: " + "; ".join(
                f"rank {r.rank} {r.kind} ({r.summary}) {r.at - root.at:+.2f}s" if r.at and root.at
                else f"rank {r.rank} {r.kind} ({r.summary})" for r in later))
        if call.values and root.kind != F.HUNG:
            lines.append(f"ranks that had replied: {sorted(call.values)}")
        if root.kind == F.RAISED:
            lines.append(f"traceback from rank {root.rank}:")
            lines.append(_indent(root.evidence))
        elif root.kind == F.DIED:
            lines.append(f"last {STDERR_TAIL_LINES} lines of rank {root.rank}'s stderr ({root.log}):")
            lines.append(_indent(root.evidence))
        hung = [r for r in failure.ranks if r.kind == F.HUNG]
        if hung and root.kind != F.HUNG:
            grace = self.death_grace_s if root.kind == F.DIED else self.error_grace_s
            lines.append(f"ranks {[r.rank for r in hung]} did not reply within {grace:g}s after that "
                         "(likely waiting in a collective for the failed rank); the group was killed. "
                         "Their stacks:")
        for r in hung:
            lines.append(f"--- rank {r.rank} (pid {r.pid}) ---")
            lines.append(_indent(r.evidence))
        lines.append(f"logs of every rank kept in {self.log_dir}")
        return "\n".join(lines)

    def _dump_stacks(self, ranks: list[int]) -> dict[int, str]:
        """SIGUSR1 -> faulthandler writes each rank's Python stacks to its log; return what was written."""
        sizes: dict[int, int] = {}
        for rank in ranks:
            proc = self._procs[rank]
            try:
                sizes[rank] = os.path.getsize(self.log_paths[rank])
            except OSError:
                sizes[rank] = 0
            if proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGUSR1)
                except ProcessLookupError:
                    pass
        # Wait until every log has grown and then stopped growing, at most stack_dump_wait_s.
        deadline = time.monotonic() + self.stack_dump_wait_s
        last: dict[int, int] = {}
        while time.monotonic() < deadline:
            time.sleep(0.1)
            now = {r: os.path.getsize(self.log_paths[r]) for r in ranks}
            if all(now[r] > sizes[r] for r in ranks) and now == last:
                break
            last = now
        stacks = {}
        for rank in ranks:
            dump = _tail(self.log_paths[rank], STACK_DUMP_LINES, start=sizes[rank])
            if not dump.strip():
                dump = ("<no stack dump written; last lines of its log:>\n"
                        + _tail(self.log_paths[rank], STDERR_TAIL_LINES))
            stacks[rank] = dump
        return stacks

    # ---- teardown -----------------------------------------------------------------------------

    def _kill(self, reason: str) -> None:
        """SIGKILL every rank's process group (its children too), reap, close the sockets."""
        if self._dead is None:
            self._dead = reason
        for proc in self._procs:
            try:
                # Also after the rank itself exited: children it left behind share its group id,
                # and a group id stays reserved while any member lives.
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for proc in self._procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for conn in self._conns:
            conn.close()
        _LIVE_GROUPS.discard(self)

    def _finish_logs(self) -> None:
        """A failed group's logs are evidence (its failure names them); a healthy group's are not."""
        if self.failure is None:
            shutil.rmtree(self.log_dir, ignore_errors=True)
