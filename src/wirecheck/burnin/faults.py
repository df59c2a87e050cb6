"""Hard faults: what stops a burn-in at once, named (what, on which GPU or placement, when, in which
round). Anything else (a GPU slower than its peers, clocks held, busbw drifting) is a soft finding,
recorded and judged at the end.

Each fault is found by the check that judges the same thing at acceptance (wirecheck.checks): an XID,
ECC growth over `gpu_health.memory_errors` (uncorrectable errors, corrected ones over the limit, row
remaps), a GEMM result or a collective element that differs, a memory word read back wrong; its message
is that check's. A hang or a crash of the workers is the launcher's failure, with what each rank was
doing when it stopped answering and NCCL RAS's reading of their communicators, taken before they were
killed (wirecheck.workers.ras: the dead or unresponsive ranks by host, GPU and pid), or why it was not read.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from wirecheck.checks import collectives as collective_checks, gpu_health
from wirecheck.core.failures import HUNG
from wirecheck.core.verdict import FAIL
from wirecheck.node.memory_errors import memory_errors
from wirecheck.node.xid_events import describe
from wirecheck.workers import ras as nccl_ras

XID, ECC, WRONG_GEMM, WRONG_COLLECTIVE, MEMORY, HANG, CRASH = (
    "xid", "ecc", "wrong GEMM result", "wrong collective result", "memory test", "hang", "crash")


@dataclass(frozen=True)
class Fault:
    kind: str
    round: int
    time: float  # unix time it was found
    where: str | None  # "GPU1", a placement id, None for the node
    message: str
    # A hang's or crash's NCCL RAS reading (wirecheck.workers.ras_report's fields, or why it was not read);
    # None for a fault the workers did not break on (an XID, a wrong result).
    ras: dict | None = None

    def as_record(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        when = time.strftime("%H:%M:%S", time.localtime(self.time))
        return f"{self.kind} in round {self.round} at {when}" + (f" on {self.where}" if self.where else "") + \
            f": {self.message}"


def from_events(thresholds, events: list[dict], number: int) -> Fault | None:
    """The first failing XID or ECC event (an allowed XID or a corrected-error event is no fault here)."""
    allowed = thresholds.gpu_health.xid.allowed
    failing = [e for e in events if gpu_health.failing_event(e, allowed)]
    if not failing:
        return None
    first = failing[0]
    where = f"GPU{first['gpu']}" if first.get("gpu") is not None else None
    more = f" (and {len(failing) - 1} more)" if len(failing) > 1 else ""
    return Fault(XID, number, first.get("time") or time.time(), where, describe(first) + more)


def from_gemm(thresholds, gpu: int, bus_id: str | None, math: dict | None, number: int) -> Fault | None:
    if not math:
        return None
    v = gpu_health.gemm_matches_reference(thresholds, gpu=gpu, bus_id=bus_id, phases={f"round {number}": math})
    return Fault(WRONG_GEMM, number, time.time(), f"GPU{gpu}", v.message) if v.outcome == FAIL else None


def from_step(thresholds, placement: str, op: str, result, number: int, step: int) -> Fault | None:
    """A collective step's combined result (wirecheck.measure.collectives.SizeResult) with a wrong element."""
    if result.ok:
        return None
    sizes = [{"bytes": result.bytes, "wrong_by_rank": result.wrong_by_rank, "first_bad_by_rank": result.first_bad_by_rank}]
    v = collective_checks.collective_correct(thresholds, op=op, placement=placement, sizes=sizes, error=None)
    return Fault(WRONG_COLLECTIVE, number, time.time(), placement, f"{v.message} (step {step} of the cycle)")


def from_memory(gpu: int, bus_id: str | None, result: dict | None, number: int) -> Fault | None:
    """Words read back wrong (a coverage short of the target is judged at the end, not a fault)."""
    bad = [p for p in (result or {}).get("patterns") or [] if p.get("mismatched_words")]
    if not bad:
        return None
    first = bad[0]
    where = f"GPU{gpu} ({bus_id})" if bus_id else f"GPU{gpu}"
    offset = first.get("first_bad_offset")
    return Fault(MEMORY, number, time.time(), f"GPU{gpu}",
                 f"{where}: pattern {first['pattern']} read back {first['mismatched_words']} words wrong, first at byte "
                 f"offset {offset}" + (f" ({len(bad)} patterns wrong)" if len(bad) > 1 else ""))


def from_health(thresholds, gpu: int, bus_id: str | None, before, after, seconds: float, number: int) -> Fault | None:
    """ECC errors or remapped rows grown since the burn-in started beyond gpu_health.memory_errors."""
    v = gpu_health.ecc_row_remap_growth(thresholds, gpu=gpu, bus_id=bus_id, before=memory_errors(before),
                                        after=memory_errors(after), seconds=seconds, simulated=False)
    return Fault(ECC, number, time.time(), f"GPU{gpu}", v.message) if v.outcome == FAIL else None


def from_error(error, number: int, doing: dict[int, str], gpus: tuple[int, ...]) -> Fault:
    """The round's or the memory test's worker failure; `doing`: rank -> what it last said it did this round.

    A hang leaves every rank waiting (in the round's vote, or a collective), so the launcher's root cause, the
    lowest rank, says nothing of which GPU stopped. What does: a rank that said nothing this round while the
    others did. Where exactly one is silent it is named; where none or several are, the fault names no one GPU.
    The message keeps the error's first line, every rank's last word (the silent ones too) and where the logs
    are; the stacks stay in the round's record."""
    failure = getattr(error, "failure", None)
    hung = failure is not None and failure.kind == HUNG
    lines = str(error).strip().splitlines()
    message = (lines[0] if lines else type(error).__name__).removesuffix(" rank stacks:").rstrip(";: ")
    silent = [r for r in range(len(gpus)) if r not in doing] if doing else []
    seen = [f"GPU{gpus[r]} (rank {r}): {doing[r]}" if r in doing else f"GPU{gpus[r]} (rank {r}): nothing this round"
            for r in range(len(gpus))] if doing else []
    if seen:
        message += f" [last seen: {'; '.join(seen)}]"
    message += "".join(f"; {line.strip()}" for line in lines[1:] if line.strip().startswith("logs of every rank"))
    where = None
    if hung:
        where = f"GPU{gpus[silent[0]]}" if len(silent) == 1 else None
    elif failure is not None and 0 <= failure.root.rank < len(gpus):
        where = f"GPU{gpus[failure.root.rank]}"  # a rank that raised or died: the launcher's root cause
    return Fault(HANG if hung else CRASH, number, time.time(), where, message, _ras_of(failure))


# Why a hang's or crash's fault holds no RAS reading: no call failed, or the group did not ask.
NO_FAILURE = "not asked: the workers' error carries no failed call (the group was closed or unreachable)"
NOT_ASKED = "not asked by the worker group"


def _ras_of(failure) -> dict:
    """The RAS reading the launcher took before it killed the ranks; its absence said, never None."""
    reading = getattr(failure, "ras", None)
    if reading is not None:
        return reading
    if failure is None:  # a group closed, or a call it could not send: no call failed, so RAS was not asked
        return nccl_ras.not_read(NO_FAILURE)
    return nccl_ras.not_read(NOT_ASKED)
