"""What went wrong in a worker group, as plain data that crosses module boundaries.

A worker group builds one `GroupFailure` per failed call or start (workers.failure_report) and
attaches it to the exception it raises; callers decide on its fields (`kind`, `root.out_of_memory`, ...), never on message text.
Everything here is JSON-able (`as_dict`) so a record can keep it whole.

The root cause is the earliest failure in time (torch elastic's rule): when rank 1 is killed and
rank 0 then raises "connection closed by peer", rank 1's death is the cause and rank 0's error a
consequence, whatever their rank numbers. A raise is timed by the rank itself when it caught the
exception; a death by the parent, at the last moment it saw the rank's pipe open. That moment is
only as good as the kernel's order of events: on Linux the dying rank's pipe closes before its
sockets (workers.watch), but a sandboxed kernel (gVisor) resets the sockets first, and a peer's
"connection reset" was stamped up to a fraction of a millisecond before the pipe was last seen open.
So a raise less than DEATH_FIRST_WITHIN_S before a death counts as simultaneous with it, and the
death as the cause: a death makes peers raise; a raise does not kill a peer within milliseconds
(NCCL's watchdog takes minutes). A hang has no moment: ranks that never replied are `hung` and come
last.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# How close a raise and a death must be to count as simultaneous (the death then comes first):
# well above the clock error measured on a sandboxed kernel (0.2 ms), well below any real cause and
# effect between a raise and a death (seconds to minutes).
DEATH_FIRST_WITHIN_S = 0.25

RAISED = "raised"  # the worker function (or the rank's setup) raised
DIED = "died"  # the process exited or was killed
HUNG = "hung"  # no reply within the deadline
KINDS = (RAISED, DIED, HUNG)

START = "start"  # while the group was being started (rendezvous, process group)
CALL = "call"  # during a call
IDLE = "idle"  # between calls: found dead when the next call began
PHASES = (START, CALL, IDLE)


@dataclass(frozen=True)
class RankFailure:
    """One rank's part in a failure."""

    rank: int
    kind: str  # RAISED | DIED | HUNG
    at: float | None  # time.time() of the raise / of the death being seen; None for HUNG
    summary: str  # one line: "ValueError: boom", "killed by SIGKILL", "no reply within 10 s"
    pid: int | None = None
    exception: str | None = None  # qualified type of what was raised, e.g. "torch.OutOfMemoryError"
    # The raised exception, or one it was raised from, is torch's OutOfMemoryError (decided in the
    # rank, by type). Only then is an error an out-of-memory.
    out_of_memory: bool = False
    returncode: int | None = None  # DIED: Popen's, negative for a signal
    evidence: str = ""  # RAISED: traceback; DIED: stderr tail; HUNG: Python stack dump
    log: str | None = None  # the rank's full log (stdout and stderr)


@dataclass(frozen=True)
class GroupFailure:
    """A failed call or start of a worker group."""

    label: str  # the group's label (a placement id)
    what: str  # the operation, e.g. "all_reduce at 1 MiB"
    phase: str  # START | CALL | IDLE
    root: RankFailure  # the cause: the earliest raise or death; for a pure hang, the first silent rank
    ranks: tuple[RankFailure, ...]  # every rank that failed: root first, then by time, hung ranks last
    replied: tuple[int, ...] = ()  # ranks that returned normally
    deadline_s: float | None = None
    deadline_note: str = ""  # how the deadline was set (expected time, floor, minimum)
    log_dir: str | None = None  # where the ranks' logs are kept
    # NCCL RAS's reading taken before the group was killed (wirecheck.workers.ras: its communicators, the
    # dead or unresponsive ranks by host, pid and GPU), or why it was not read; None: not asked.
    ras: dict | None = None
    message: str = field(default="", compare=False)

    @property
    def kind(self) -> str:
        """The root cause's kind: what happened first."""
        return self.root.kind

    @property
    def hung(self) -> bool:
        """Some rank never replied (alone, or after another rank failed first)."""
        return any(r.kind == HUNG for r in self.ranks)

    @property
    def out_of_memory(self) -> bool:
        """The root cause is a rank that raised an out-of-memory error."""
        return self.root.kind == RAISED and self.root.out_of_memory

    def as_dict(self, message: bool = True) -> dict:
        """For a record; message=False leaves out the text (the record keeps it elsewhere)."""
        d = asdict(self)
        d["kind"] = self.kind
        if not message:
            del d["message"]
        return d


def order(failures: list[RankFailure]) -> list[RankFailure]:
    """Raises and deaths by time (a death within DEATH_FIRST_WITHIN_S after a raise first; ties:
    deaths first, then by rank), then hung ranks by rank."""
    def when(f: RankFailure) -> float:
        if f.at is None:
            return float("inf")
        return f.at - DEATH_FIRST_WITHIN_S if f.kind == DIED else f.at

    timed = sorted((f for f in failures if f.kind != HUNG), key=lambda f: (when(f), f.kind != DIED, f.rank))
    hung = sorted((f for f in failures if f.kind == HUNG), key=lambda f: f.rank)
    return timed + hung
