"""Waiting for one reply per rank under a deadline, and noticing the ranks that die meanwhile.

A rank fails by raising (it says so) or by dying (its pipe closes or its process ends, noticed by
polling); a rank that does neither by the deadline has hung. The first failure opens a short grace
period in which the others may still reply or fail: after a raise the others are likely stuck in a
collective the raising rank no longer joins, and after a death NCCL peers spin in their kernel
forever. The caller (launcher) then decides what the silent ranks were and what the failure is.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any, Callable

from wirecheck.core import failures as F
from wirecheck.core.failures import RankFailure
from wirecheck.workers import protocol
from wirecheck.workers.evidence import STDERR_TAIL_LINES, describe_exit, tail
from wirecheck.workers.spawn import RankProcesses

# Poll interval while waiting for replies: how late a death without a closed socket is noticed.
POLL_S = 0.1


@dataclass(frozen=True)
class Grace:
    """How long the other ranks may still answer after the first failure, by its kind."""

    after_raise_s: float
    after_death_s: float

    def after(self, kind: str) -> float:
        return self.after_death_s if kind == F.DIED else self.after_raise_s


class Replies:
    """What one wait for replies has gathered so far, recorded as the ranks' messages and deaths come.

    `seq`: the call awaited (None: the start, whose replies are 'ready'); `on_port`: called when
    rank 0 reports its store during the start.
    """

    def __init__(self, ranks: RankProcesses, seq: int | None, on_port: Callable[[int], None] | None = None):
        self.ranks = ranks
        self.seq = seq
        self.on_port = on_port
        self.pending = set(range(len(ranks.procs)))  # neither replied nor failed
        self.values: dict[int, Any] = {}
        self.failed: dict[int, RankFailure] = {}
        self.grace_end: float | None = None
        # When the pipes of the ranks still running were last seen open (time.time()): a death
        # found later happened after this, and is dated here (see record_death).
        self.alive_at = time.time()

    def silent(self) -> list[int]:
        """The ranks still running that neither replied nor failed."""
        return sorted(r for r in self.pending if self.ranks.procs[r].poll() is None)

    def take_reply(self, rank: int) -> None:
        try:
            msg = self.ranks.conns[rank].recv()
        except (EOFError, OSError):
            # The pipe closed: the process is exiting.
            self.record_death(rank)
            return
        self.record(rank, msg)

    def record(self, rank: int, msg: tuple) -> None:
        reply = protocol.decode(rank, msg, self.seq)
        if isinstance(reply, protocol.StorePort):
            self.on_port(reply.port)
            return
        if isinstance(reply, protocol.Returned):
            self.values[rank] = reply.value
        elif isinstance(reply, protocol.Raised):
            self.failed[rank] = self._raised(rank, reply)
        else:
            return
        self.pending.discard(rank)

    def _raised(self, rank: int, reply: protocol.Raised) -> RankFailure:
        facts = reply.facts
        return RankFailure(rank=rank, kind=F.RAISED, at=facts.get("at"), summary=reply.summary,
                           pid=self.ranks.procs[rank].pid, exception=facts.get("exception"),
                           out_of_memory=bool(facts.get("out_of_memory")), evidence=reply.traceback,
                           log=self.ranks.log_paths[rank])

    def record_death(self, rank: int) -> None:
        """A rank's pipe closed or its process ended. It is dated at the last moment its pipe was
        seen open, not when this (possibly descheduled) parent noticed: a peer's "connection closed"
        error is stamped by the peer itself within milliseconds of the death and must not come
        first. The worker holds its pipe on its lowest descriptor and the kernel closes a dying
        process's descriptors in ascending order, so the pipe closes before any socket a peer
        could see close. A peer's raise stamped before that moment did come first."""
        if rank in self.failed:
            return  # it raised first: its death (an abort after the error) is a consequence
        proc = self.ranks.procs[rank]
        try:
            proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            pass
        log = self.ranks.log_paths[rank]
        self.failed[rank] = RankFailure(
            rank=rank, kind=F.DIED, at=self.alive_at, summary=describe_exit(proc.returncode), pid=proc.pid,
            returncode=proc.returncode, evidence=tail(log, STDERR_TAIL_LINES), log=log)
        self.pending.discard(rank)

    def drain(self, rank: int) -> None:
        """Read what a dead rank managed to send before it died."""
        conn = self.ranks.conns[rank]
        try:
            while conn.poll(0):
                self.record(rank, conn.recv())
        except (EOFError, OSError):
            pass


def collect(ranks: RankProcesses, seq: int | None, deadline_s: float, grace: Grace,
            on_port: Callable[[int], None]) -> Replies:
    """Wait until every rank replied or failed, the deadline passed, or the grace after the first
    failure ended; return what was gathered (every rank replied: `pending` and `failed` are empty)."""
    end = time.monotonic() + deadline_s
    call = Replies(ranks, seq, on_port)
    while call.pending:
        now = time.monotonic()
        limit = min(end, call.grace_end) if call.grace_end is not None else end
        if now >= limit:
            break
        # Every rank not failed yet, also those that replied: one that replied and then
        # died leaves the others waiting for it in the next collective.
        listening = [ranks.conns[r] for r in range(len(ranks.conns)) if r not in call.failed]
        ready = wait(listening, timeout=min(POLL_S, limit - now))
        checked_at = time.time()  # every pipe not ready was open until here
        for conn in ready:
            call.take_reply(ranks.conns.index(conn))
        for rank, proc in enumerate(ranks.procs):
            if proc.poll() is not None and rank not in call.failed:
                call.drain(rank)
                call.record_death(rank)
        call.alive_at = checked_at
        if call.failed and call.grace_end is None:
            died = any(f.kind == F.DIED for f in call.failed.values())
            call.grace_end = time.monotonic() + grace.after(F.DIED if died else F.RAISED)
    return call


def dead_while_idle(ranks: RankProcesses, wait_s: float = 0.0) -> Replies | None:
    """Before a call: the ranks found dead (a rank that died while idle makes the group unusable),
    looking for `wait_s` seconds; None when every rank is running."""
    end = time.monotonic() + wait_s
    while True:
        if ranks.any_exited():
            call = Replies(ranks, None)
            for rank, proc in enumerate(ranks.procs):
                if proc.poll() is not None:
                    call.record_death(rank)
            call.pending.clear()
            return call
        if time.monotonic() >= end:
            return None
        time.sleep(POLL_S)
