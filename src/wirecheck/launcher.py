"""WorkerGroup: one process per rank, pinned to a GPU subset, serving calls with hard timeouts.

The pytest process never touches CUDA; it starts fresh interpreters (`python -m wirecheck.worker`) that
do, sends them calls ("package.module:function" plus kwargs) and collects one return value per rank.
Whatever goes wrong in a rank comes back as a `WorkerError` that names the group, the operation and the
rank, with the evidence attached: a worker's traceback, a hung rank's Python stack (faulthandler on
SIGUSR1) or a dead rank's exit status and stderr tail. After a hang or a crash the group is killed and
unusable; the caller starts a new one.
"""

from __future__ import annotations

import atexit
import os
import pickle
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from multiprocessing import Pipe
from multiprocessing.connection import Connection, wait
from typing import Any, NoReturn

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
    """Anything that went wrong in a worker group. `partial`: {rank: value} of ranks that did reply."""

    def __init__(self, message: str, *, label: str, what: str, partial: dict[int, Any] | None = None):
        super().__init__(message)
        self.label = label
        self.what = what
        self.partial = dict(partial or {})


class WorkerCallError(WorkerError):
    """A worker function raised. `rank` is the lowest rank that raised; `errors` has every one."""

    def __init__(self, message: str, *, rank: int, errors: dict[int, tuple[str, str]], **kw: Any):
        super().__init__(message, **kw)
        self.rank = rank
        self.errors = errors  # rank -> (one-line summary, traceback text)
        self.traceback = errors[rank][1]


class WorkerTimeout(WorkerError):
    """The call did not finish in time. `stacks`: {rank: Python stack dump} of ranks that had not replied."""

    def __init__(self, message: str, *, replied: list[int], stacks: dict[int, str], **kw: Any):
        super().__init__(message, **kw)
        self.replied = replied
        self.stacks = stacks


class WorkerCrash(WorkerError):
    """A worker process died. `returncode` is Popen's: negative for a signal."""

    def __init__(self, message: str, *, rank: int, returncode: int | None, stderr_tail: str, **kw: Any):
        super().__init__(message, **kw)
        self.rank = rank
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class WorkerGroupDead(WorkerError):
    """The group was closed or killed earlier; create a new one."""


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


def _free_port() -> int:
    # Racy by nature (the port is free now, rank 0 binds it later); WorkerGroup retries on EADDRINUSE.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _python_path(existing: str | None) -> str:
    """The parent's import path for the workers: cwd and sys.path first, then what PYTHONPATH had.

    Worker functions live in modules the parent can import (pytest puts test directories on sys.path,
    `selftests.faulty_workers` resolves from the repository root); a fresh interpreter would not see them.
    """
    entries = [os.getcwd()]
    entries += [os.path.abspath(p) if p else os.getcwd() for p in sys.path if isinstance(p, str)]
    entries += [p for p in (existing or "").split(os.pathsep) if p]
    seen: set[str] = set()
    kept = []
    for p in entries:
        if p not in seen and os.path.exists(p):
            seen.add(p)
            kept.append(p)
    return os.pathsep.join(kept)


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


_LIVE_GROUPS: "weakref.WeakSet[WorkerGroup]" = weakref.WeakSet()


@atexit.register
def _kill_live_groups() -> None:
    # The parent leaving without close() (a crash in a test, Ctrl-C) must not leave GPU processes behind.
    for group in list(_LIVE_GROUPS):
        group._kill("the parent interpreter exited")
        group._remove_logs()


class WorkerGroup:
    """`world_size` worker processes for one label (a placement id), serving `run` calls.

    On NCCL rank r uses local device r of `gpus` (CUDA_VISIBLE_DEVICES is the same list for every rank).
    With join_process_group=False the rank environment (RANK, WORLD_SIZE, MASTER_ADDR, ...) is set but
    the group is left to the worker function (Accelerate/DeepSpeed initialise it themselves).
    """

    # How long the other ranks may still answer after one rank raised: a rank that raised no longer
    # joins collectives, so the others are likely stuck in one and will never reply.
    error_grace_s = 3.0
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
        self.info: list[dict[str, Any]] = []  # per rank, from the worker: pid, torch, device name, NCCL
        self._procs: list[subprocess.Popen] = []
        self._conns: list[Connection] = []
        self._dead: str | None = None
        self._seq = 0
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", label)[:60]
        self._logdir = tempfile.mkdtemp(prefix=f"wirecheck-{safe}-")
        self.log_paths = [os.path.join(self._logdir, f"rank{r}.log") for r in range(world_size)]
        _LIVE_GROUPS.add(self)
        try:
            self._start(start_timeout_s)
        except BaseException:
            self._kill("start failed")
            self._remove_logs()  # no object for the caller to close; the error carries the tails
            raise

    # ---- public -------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._dead is None and all(p.poll() is None for p in self._procs)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def run(self, fn: str, kwargs: dict[str, Any] | None, timeout_s: float, what: str | None = None) -> list[Any]:
        """Call `fn(ctx, **kwargs)` on every rank; return the values in rank order.

        Raises WorkerCallError (a rank raised), WorkerTimeout (not all replied within timeout_s),
        WorkerCrash (a rank died) or WorkerGroupDead (the group was unusable before the call).
        """
        what = what or fn
        if self._dead is not None:
            raise WorkerGroupDead(
                f"{what} on {self.label}: this worker group is no longer usable ({self._dead}); "
                "start a new WorkerGroup",
                label=self.label, what=what,
            )
        module, sep, attr = fn.partition(":")
        if not (module and sep and attr):
            raise ValueError(f"{what} on {self.label}: worker function {fn!r} must be 'package.module:function'")
        self._raise_if_dead_rank(what, {})
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
                self._raise_if_dead_rank(what, {}, wait_s=2.0)
                self._kill(f"could not send {what} to rank {rank}")
                raise WorkerGroupDead(f"{what} on {self.label}: could not send the call to rank {rank}: {exc}",
                                      label=self.label, what=what) from exc
        return self._collect(self._seq, what, timeout_s)

    def close(self) -> None:
        """Ask every rank to exit (destroy_process_group, no barrier); kill what is left after a few seconds."""
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
        self._remove_logs()

    def __enter__(self) -> WorkerGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._kill("garbage-collected without close()")
            self._remove_logs()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "alive" if self.alive else f"dead: {self._dead}"
        return f"WorkerGroup({self.label!r}, world_size={self.world_size}, backend={self.backend!r}, {state})"

    # ---- start --------------------------------------------------------------------------------

    def _worker_env(self, rank: int, port: int) -> dict[str, str]:
        env = dict(os.environ)  # pass-through: the GPU machines' NCCL_* switches must reach NCCL
        env.update(self.env)
        # As torchrun does: N ranks each spawning one OpenMP thread per core would oversubscribe.
        env.setdefault("OMP_NUM_THREADS", "1")
        env.setdefault("PYTHONUNBUFFERED", "1")  # prints reach the log before a crash
        if self.gpus is not None:
            # Placements use NVML indices, which follow PCI bus order; CUDA's default order is
            # fastest-first, which can differ on mixed nodes. Make CUDA count as NVML does.
            env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in self.gpus)
        env["PYTHONPATH"] = _python_path(env.get("PYTHONPATH"))
        env.update(
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE=str(self.world_size),
            LOCAL_WORLD_SIZE=str(self.world_size),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
        )
        return env

    def _spawn(self) -> None:
        port = _free_port()
        for rank in range(self.world_size):
            parent_end, child_end = Pipe(duplex=True)
            with open(self.log_paths[rank], "ab") as log:
                proc = subprocess.Popen(
                    [
                        sys.executable, "-m", "wirecheck.worker",
                        "--fd", str(child_end.fileno()),
                        "--parent-pid", str(os.getpid()),
                        "--label", self.label,
                        "--backend", self.backend,
                        *(["--no-process-group"] if not self.join_process_group else []),
                    ],
                    env=self._worker_env(rank, port),
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
        for attempt in range(3):
            self._spawn()
            try:
                self.info = self._collect(None, what, timeout_s)
                return
            except WorkerError as exc:
                self._kill(f"{what} failed")
                port_taken = "address already in use" in str(exc).lower() or "EADDRINUSE" in str(exc)
                if not port_taken or attempt == 2:
                    raise
                # Someone took our free port before rank 0 bound it: try another.
                self._procs, self._conns, self._dead = [], [], None
                _LIVE_GROUPS.add(self)

    # ---- waiting ------------------------------------------------------------------------------

    def _collect(self, seq: int | None, what: str, timeout_s: float) -> list[Any]:
        """Wait for one reply per rank (a call's, or 'ready' when seq is None) under one deadline."""
        deadline = time.monotonic() + timeout_s
        pending = set(range(self.world_size))
        values: dict[int, Any] = {}
        errors: dict[int, tuple[str, str]] = {}
        grace_end: float | None = None
        try:
            while pending:
                now = time.monotonic()
                if errors and grace_end is None:
                    grace_end = min(deadline, now + self.error_grace_s)
                limit = grace_end if grace_end is not None else deadline
                if now >= limit:
                    break
                ready = wait([self._conns[r] for r in sorted(pending)], timeout=min(POLL_S, limit - now))
                for conn in ready:
                    rank = self._conns.index(conn)
                    self._take_reply(rank, seq, what, values, errors, pending)
                # Every rank, not only the pending ones: a rank that replied and then died leaves
                # the others waiting for it in the next collective.
                for rank, proc in enumerate(self._procs):
                    if proc.poll() is not None:
                        self._drain(rank, seq, values, errors, pending)
                        self._raise_crash(rank, what, values, errors)
        except WorkerError:
            raise
        except BaseException:
            # Interrupted (KeyboardInterrupt, a pytest-timeout signal): the ranks are mid-call, unusable.
            self._kill(f"{what} was interrupted")
            raise

        if not pending and not errors:
            return [values[r] for r in range(self.world_size)]
        stacks = self._dump_stacks(sorted(pending)) if pending else {}
        if pending:
            self._kill(f"{what} did not finish" if not errors else f"{what} raised and left ranks hanging")
        if errors:
            if seq is None:
                self._kill(f"{what} failed")
            raise self._call_error(what, values, errors, stacks)
        replied = sorted(values)
        stuck = sorted(stacks)
        parts = [
            f"{what} on {self.label} did not finish within {timeout_s:g}s; rank stacks:",
            f"replied: {replied or 'none'}; no reply: {stuck}",
        ]
        for rank in stuck:
            parts.append(f"--- rank {rank} (pid {self._procs[rank].pid}) ---")
            parts.append(_indent(stacks[rank]))
        raise WorkerTimeout("\n".join(parts), label=self.label, what=what, partial=values,
                            replied=replied, stacks=stacks)

    def _take_reply(self, rank: int, seq: int | None, what: str, values: dict[int, Any],
                    errors: dict[int, tuple[str, str]], pending: set[int]) -> None:
        try:
            msg = self._conns[rank].recv()
        except (EOFError, OSError):
            # The socket closed: the process is exiting. Give it a moment to report its status.
            try:
                self._procs[rank].wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                pass
            self._raise_crash(rank, what, values, errors)
        self._record(rank, msg, seq, values, errors, pending)

    def _record(self, rank: int, msg: tuple, seq: int | None, values: dict[int, Any],
                errors: dict[int, tuple[str, str]], pending: set[int]) -> None:
        kind = msg[0]
        if seq is None:  # starting
            if kind == "ready":
                values[rank] = msg[1]
            elif kind == "init_error":
                errors[rank] = (msg[1], msg[2])
            else:
                return
        else:
            if kind not in ("ok", "error") or msg[1] != seq:
                return  # not this call's reply
            if kind == "ok":
                values[rank] = msg[2]
            else:
                errors[rank] = (msg[2], msg[3])
        pending.discard(rank)

    def _drain(self, rank: int, seq: int | None, values: dict[int, Any],
               errors: dict[int, tuple[str, str]], pending: set[int]) -> None:
        """Read what a dead rank managed to send before it died."""
        conn = self._conns[rank]
        try:
            while conn.poll(0):
                self._record(rank, conn.recv(), seq, values, errors, pending)
        except (EOFError, OSError):
            pass

    def _raise_if_dead_rank(self, what: str, values: dict[int, Any], wait_s: float = 0.0) -> None:
        deadline = time.monotonic() + wait_s
        while True:
            for rank, proc in enumerate(self._procs):
                if proc.poll() is not None:
                    self._raise_crash(rank, what, values, {}, idle=True)
            if time.monotonic() >= deadline:
                return
            time.sleep(POLL_S)

    def _raise_crash(self, rank: int, what: str, values: dict[int, Any],
                     errors: dict[int, tuple[str, str]], idle: bool = False) -> NoReturn:
        returncode = self._procs[rank].poll()
        others = [r for r, p in enumerate(self._procs) if r != rank and p.poll() is not None]
        self._kill(f"rank {rank} died during {what}")
        tail = _tail(self.log_paths[rank], STDERR_TAIL_LINES)
        when = "before the call (while idle)" if idle else "during the call"
        lines = [
            f"{what} on {self.label}: rank {rank} (pid {self._procs[rank].pid}) died {when}: "
            f"{describe_exit(returncode)}",
        ]
        if others:
            lines.append("also dead: " + ", ".join(
                f"rank {r} ({describe_exit(self._procs[r].returncode)})" for r in others))
        if values:
            lines.append(f"ranks that had replied: {sorted(values)}")
        for r, (summary, _) in sorted(errors.items()):
            lines.append(f"rank {r} raised: {summary}")
        lines.append(f"last {STDERR_TAIL_LINES} lines of rank {rank}'s stderr ({self.log_paths[rank]}):")
        lines.append(_indent(tail))
        raise WorkerCrash("\n".join(lines), label=self.label, what=what, partial=values,
                          rank=rank, returncode=returncode, stderr_tail=tail)

    def _call_error(self, what: str, values: dict[int, Any], errors: dict[int, tuple[str, str]],
                    stacks: dict[int, str]) -> WorkerCallError:
        first = min(errors)
        summary, tb = errors[first]
        lines = [f"{what} on {self.label}: rank {first} raised {summary}"]
        for r, (other, _) in sorted(errors.items()):
            if r != first:
                lines.append(f"rank {r} raised {other}")
        lines.append(f"traceback from rank {first}:")
        lines.append(_indent(tb))
        if stacks:
            lines.append(f"ranks {sorted(stacks)} did not reply within {self.error_grace_s:g}s after that "
                         "(likely waiting in a collective for the rank that raised); the group was killed. "
                         "Their stacks:")
            for rank, stack in sorted(stacks.items()):
                lines.append(f"--- rank {rank} (pid {self._procs[rank].pid}) ---")
                lines.append(_indent(stack))
        return WorkerCallError("\n".join(lines), label=self.label, what=what, partial=values,
                               rank=first, errors=errors)

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

    def _remove_logs(self) -> None:
        shutil.rmtree(self._logdir, ignore_errors=True)
