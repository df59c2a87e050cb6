"""WorkerGroup: one process per rank, pinned to a GPU subset, serving calls under deadlines.

The pytest process never touches CUDA; it starts fresh interpreters (`python -m wirecheck.workers.worker`) that
do, sends them calls ("package.module:function" plus kwargs) and collects one return value per rank.

Whatever goes wrong comes back as a `WorkerError` carrying a `failures.GroupFailure` (plain data: which
rank did what, when, with its traceback, stderr tail or Python stack). The root cause is the earliest
failure in time, not the lowest rank. After a hang or a crash the group is killed and unusable; the
caller starts a new one. A failed group's per-rank logs are kept (in `log_dir` when given) and named
in the failure; a group that closes without failing removes them.

Start-up: rank 0 creates the group's store on a port the kernel picks and reports it here; the other
ranks get it from us (wirecheck.workers.rendezvous). No port is chosen in advance, so none can be stolen.

This class holds the group's state and the order of things; each step is its own module: `spawn`
(the rank processes and their environment), `protocol` (the messages on their pipes), `watch`
(waiting for replies against the deadline, noticing deaths), `evidence` and `failure_report` (stack
dumps, stderr tails, the GroupFailure and its message), `teardown` (exit, kill, logs) and `errors`.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from wirecheck.core import failures as F
from wirecheck.core.failures import GroupFailure
from wirecheck.core.safefs import make_dirs
from wirecheck.workers import evidence, failure_report, protocol, ras, spares, spawn, teardown, watch
from wirecheck.workers.deadlines import Deadline
from wirecheck.workers.errors import (
    WorkerCallError,
    WorkerCrash,
    WorkerError,
    WorkerGroupDead,
    WorkerTimeout,
    error_for,
)
from wirecheck.workers.evidence import describe_exit
from wirecheck.workers.spawn import untrusted_import_path
from wirecheck.workers.worker import RankContext

__all__ = [
    "RankContext",
    "WorkerCallError",
    "WorkerCrash",
    "WorkerError",
    "WorkerGroup",
    "WorkerGroupDead",
    "WorkerTimeout",
    "describe_exit",
    "untrusted_import_path",
]

BACKENDS = ("nccl", "gloo")


def _as_deadline(timeout_s: float | Deadline) -> Deadline:
    if isinstance(timeout_s, Deadline):
        return timeout_s
    return Deadline(float(timeout_s), "")


class WorkerGroup:
    """`world_size` worker processes for one label (a placement id), serving `run` calls.

    On NCCL rank r uses local device r of `gpus` (CUDA_VISIBLE_DEVICES is the same list for every rank).
    With join_process_group=False the rank environment (RANK, WORLD_SIZE, MASTER_ADDR/PORT of the
    group's running store, ...) is set but the group is left to the worker function (Accelerate and
    DeepSpeed initialise it themselves). `log_dir`: where the ranks' logs go (a folder per group);
    default: the system's temporary directory. `use_spares`: ranks may be the run's spare workers, which
    imported torch already (wirecheck.workers.spares), where one may take a rank's environment.
    `ras_evidence`: ask NCCL's RAS about the group's communicators when a call hangs, a rank dies or a collective
    fails, before the group is killed (its reading goes into the failure); None: on the nccl backend only
    (gloo has no RAS: the failure says so).
    """

    # How long the other ranks may still answer after one rank raised: a rank that raised no longer
    # joins collectives, so the others are likely stuck in one and will never reply.
    error_grace_s = 3.0
    # After a rank died: long enough for peers that notice (gloo: a closed socket, within
    # milliseconds) to report; NCCL peers spin in their kernel and never do.
    death_grace_s = 1.0
    # How long a SIGUSR1'd rank gets to write its stack dump.
    stack_dump_wait_s = 1.0
    # How long a failure waits for NCCL RAS's reading before the group is killed (RAS gathers for
    # wirecheck.workers.ras.GATHER_S of it).
    ras_wait_s = ras.GATHER_S + ras.MARGIN_S
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
        use_spares: bool = True,
        ras_evidence: bool | None = None,
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
        self.use_spares = use_spares
        self.ras_evidence = backend == "nccl" if ras_evidence is None else ras_evidence
        self.info: list[dict[str, Any]] = []  # per rank, from the worker: pid, port, torch, device, NCCL (spare: its import)
        self.start_s: float | None = None  # seconds from the first rank's spawn to the last one's ready
        self.spawned_at: float | None = None  # wall clock: the spawn began (the ranks' info says when each started)
        self.port: int | None = None  # the group's store, as rank 0 reported it
        self.failure: GroupFailure | None = None  # the latest failed call or start, if any
        self._dead: str | None = None
        self._seq = 0
        self._call_label = label  # what a failure names: the group's label, or a call's own (run's `label`)
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", label)[:60]
        if log_dir is not None:  # as root, only a folder no other user can redirect (safefs.make_dirs)
            make_dirs(log_dir, what="the workers' log folder", fix="pass --wirecheck-json with a path in a folder "
                      "only root can write (the logs go beside it)")
        # mkdtemp: a new folder of this user's, 0700, that no one else can rename or fill.
        self.log_dir = tempfile.mkdtemp(prefix=f"{safe}-" if log_dir is not None else f"wirecheck-{safe}-",
                                        dir=log_dir)
        self.log_paths = [os.path.join(self.log_dir, f"rank{r}.log") for r in range(world_size)]
        self._ranks = spawn.RankProcesses(self.log_paths)
        teardown.track(self)
        try:
            self._start(start_timeout_s)
        except BaseException:
            self._kill("start failed")
            self._finish_logs()  # kept when the start failed: the error names them
            raise

    # ---- public -------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._dead is None and self._ranks.all_running()

    @property
    def pids(self) -> list[int]:
        return self._ranks.pids

    def run(self, fn: str, kwargs: dict[str, Any] | None, timeout_s: float | Deadline,
            what: str | None = None, label: str | None = None) -> list[Any]:
        """Call `fn(ctx, **kwargs)` on every rank; return the values in rank order.

        `timeout_s`: seconds, or a `deadlines.Deadline` whose note the failure repeats. `label`: what a
        failure of this call names instead of the group's own label (a placement served by a sub-group
        of a pool, wirecheck.workers.subgroups).
        Raises WorkerCallError (a rank raised first), WorkerCrash (a rank died first), WorkerTimeout
        (not all replied in time, nobody failed) or WorkerGroupDead (unusable before the call).
        """
        what = what or fn
        self._call_label = label or self.label
        try:
            return self._run(fn, kwargs, _as_deadline(timeout_s), what)
        finally:
            self._call_label = self.label

    def _run(self, fn: str, kwargs: dict[str, Any] | None, deadline: Deadline, what: str) -> list[Any]:
        label = self._call_label
        if self._dead is not None:
            raise WorkerGroupDead(
                f"{what} on {label}: this worker group is no longer usable ({self._dead}); "
                "start a new WorkerGroup",
                label=label, what=what, failure=self.failure,
            )
        where = f"{what} on {label}"
        protocol.check_function_name(fn, where)
        self._raise_if_dead_rank(what)
        self._seq += 1
        payload = protocol.encode_call(self._seq, fn, kwargs or {}, where)
        unreached = protocol.send_call(self._ranks.conns, payload)
        if unreached is not None:
            rank, exc = unreached
            # A closed socket means a dying rank; some ranks already have the call: unusable.
            self._raise_if_dead_rank(what, wait_s=2.0)
            self._kill(f"could not send {what} to rank {rank}")
            raise WorkerGroupDead(f"{what} on {label}: could not send the call to rank {rank}: {exc}",
                                  label=label, what=what) from exc
        return self._collect(self._seq, what, deadline, F.CALL)

    def ask_ras(self) -> dict:
        """NCCL RAS's status as the group's ranks see it (the address their environment gives), while they
        run: its communicators and any dead or unresponsive rank (wirecheck.workers.ras)."""
        reading = ras.ask_status({**os.environ, **self.env}, self.ras_wait_s)
        return {**reading, "group_pids": self.pids}

    def start_record(self) -> dict | None:
        """How this group started, for a record: its seconds, and per rank whether it was a spare worker (its
        import and wait), the start's steps, and when its interpreter started and was ready, in seconds after
        the spawn began. None before the start."""
        if self.start_s is None:
            return None
        return {"seconds": round(self.start_s, 3),
                "spare": [i.get("spare") for i in self.info],
                "steps_s": [i.get("start_steps_s") for i in self.info],
                "ranks_s": [[round(i[k] - self.spawned_at, 3) for k in ("started_at", "ready_at")]
                            if i.get("started_at") else None for i in self.info]}

    def close(self) -> None:
        """Ask every rank to exit (destroy_process_group, no barrier); kill what is left after a few
        seconds. The logs go unless the group failed."""
        if self._dead is None:
            teardown.ask_to_exit(self._ranks, self.close_timeout_s)
        self._kill(self._dead or "closed")
        self._finish_logs()

    def __enter__(self) -> WorkerGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._abandon("garbage-collected without close()")
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "alive" if self.alive else f"dead: {self._dead}"
        return f"WorkerGroup({self.label!r}, world_size={self.world_size}, backend={self.backend!r}, {state})"

    # ---- start and calls ----------------------------------------------------------------------

    def _start(self, timeout_s: float) -> None:
        what = f"start of {self.world_size} {self.backend} worker(s)"
        t0, self.spawned_at = time.monotonic(), time.time()
        spawn.spawn(self._ranks, label=self.label, backend=self.backend, world_size=self.world_size,
                    gpus=self.gpus, extra_env=self.env, join_process_group=self.join_process_group,
                    rendezvous_timeout_s=timeout_s, spares=spares.installed() if self.use_spares else None)
        self.info = self._collect(None, what, Deadline(float(timeout_s), "the start timeout"), F.START)
        self.start_s = time.monotonic() - t0

    def _grace(self) -> watch.Grace:
        # Read at each call: a caller (a self-test) may shorten one group's grace.
        return watch.Grace(after_raise_s=self.error_grace_s, after_death_s=self.death_grace_s)

    def _collect(self, seq: int | None, what: str, deadline: Deadline, phase: str) -> list[Any]:
        """Wait for one reply per rank (a call's, or 'ready' when seq is None) under one deadline.

        The first failure (a raise or a death) opens a short grace period in which the others may
        still reply or fail; then the ranks still silent are dumped and the group killed.
        """
        try:
            call = watch.collect(self._ranks, seq, deadline.seconds, self._grace(), self._relay_port)
        except BaseException:
            # Interrupted (KeyboardInterrupt, a pytest-timeout signal): the ranks are mid-call, unusable.
            self._kill(f"{what} was interrupted")
            raise
        if not call.pending and not call.failed:
            return [call.values[r] for r in range(self.world_size)]
        raise self._failure_error(what, deadline, phase, call)

    def _relay_port(self, port: int) -> None:
        """Rank 0's store is up: tell the others where."""
        self.port = port
        protocol.relay_port(self._ranks.conns, port)

    def _raise_if_dead_rank(self, what: str, wait_s: float = 0.0) -> None:
        """Before a call: a rank that died while idle makes the group unusable."""
        call = watch.dead_while_idle(self._ranks, wait_s)
        if call is not None:
            raise self._failure_error(what, None, F.IDLE, call)

    def _failure_error(self, what: str, deadline: Deadline | None, phase: str, call: watch.Replies) -> WorkerError:
        """Dump the silent ranks' stacks, kill the group, and build the failure and its message."""
        silent = call.silent()
        stacks = evidence.dump_stacks(self._ranks, silent, self.stack_dump_wait_s) if silent else {}
        # RAS lives in the ranks' own processes: it is asked before they are killed.
        reading = (self.ask_ras() if self.ras_evidence else
                   ras.not_read(f"not asked: the {self.backend} backend has no NCCL RAS"))
        consistent = phase == F.CALL and not silent and all(f.kind == F.RAISED for f in call.failed.values())
        if not consistent:
            self._kill(f"{what} failed" if call.failed else f"{what} did not finish")
        # else: every rank answered (some with an error): the group is still in step and usable.
        self.failure = failure_report.group_failure(  # also keeps the logs at close, the message names them
            call, stacks, label=self._call_label, what=what, phase=phase, deadline=deadline, grace=self._grace(),
            log_dir=self.log_dir, ras=reading)
        return error_for(self.failure, call.values)

    # ---- teardown -----------------------------------------------------------------------------

    def _kill(self, reason: str) -> None:
        """Kill every rank and what it started; the group is unusable from now on, for `reason`."""
        if self._dead is None:
            self._dead = reason
        teardown.kill(self._ranks)
        teardown.untrack(self)

    def _finish_logs(self) -> None:
        teardown.finish_logs(self.log_dir, failed=self.failure is not None)

    def _abandon(self, reason: str) -> None:
        """Kill without asking the ranks: the group was dropped without close(), or the parent exits."""
        self._kill(reason)
        self._finish_logs()
