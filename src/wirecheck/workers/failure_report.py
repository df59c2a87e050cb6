"""A failed wait for replies as one `failures.GroupFailure`: every rank's part in time order (the
root cause first), the ranks that never replied with their stack dumps, and the message that names
placement, operation, deadline, evidence and where the logs were kept.
"""

from __future__ import annotations

import dataclasses

from wirecheck.core import failures as F
from wirecheck.core.failures import GroupFailure, RankFailure
from wirecheck.workers import ras_report
from wirecheck.workers.deadlines import Deadline
from wirecheck.workers.evidence import STDERR_TAIL_LINES
from wirecheck.workers.watch import Grace, Replies


def group_failure(call: Replies, stacks: dict[int, str], *, label: str, what: str, phase: str,
                  deadline: Deadline | None, grace: Grace, log_dir: str, ras: dict | None = None) -> GroupFailure:
    """The failure of `call`; `stacks`: the silent ranks (running, never replied) and their dumps;
    `ras`: NCCL RAS's reading taken before the kill (wirecheck.workers.ras), or None when not asked.
    The silent ranks are added to `call.failed` as hung."""
    # A hang alone waited the whole deadline; after another rank's failure, only the grace.
    waited = deadline.seconds if deadline is not None and not call.failed else None
    for rank, stack in stacks.items():
        call.failed[rank] = RankFailure(
            rank=rank, kind=F.HUNG, at=None, pid=call.ranks.procs[rank].pid, evidence=stack,
            summary=(f"no reply within {waited:g}s" if waited is not None else
                     "no reply after that (likely waiting in a collective for the failed rank)"),
            log=call.ranks.log_paths[rank])
    ranks = F.order(list(call.failed.values()))
    failure = GroupFailure(
        label=label, what=what, phase=phase, root=ranks[0], ranks=tuple(ranks),
        replied=tuple(sorted(call.values)), deadline_s=deadline.seconds if deadline else None,
        deadline_note=deadline.note if deadline else "", log_dir=log_dir, ras=ras,
    )
    return dataclasses.replace(failure, message=message(failure, grace))


def message(failure: GroupFailure, grace: Grace) -> str:
    replied = list(failure.replied)
    root, what, label = failure.root, failure.what, failure.label
    lines: list[str] = []
    if root.kind == F.HUNG:
        note = f" ({failure.deadline_note})" if failure.deadline_note else ""
        lines.append(f"{what} on {label} did not finish within {failure.deadline_s:g}s{note}; rank stacks:")
        lines.append(f"replied: {list(failure.replied) or 'none'}; "
                     f"no reply: {[r.rank for r in failure.ranks]}")
    elif root.kind == F.RAISED:
        lines.append(f"{what} on {label}: rank {root.rank} raised {root.summary}")
    else:
        when = {F.IDLE: "before the call (while idle)", F.START: "during the start"}.get(failure.phase,
                                                                                       "during the call")
        lines.append(f"{what} on {label}: rank {root.rank} (pid {root.pid}) died {when}: {root.summary}")
    later = [r for r in failure.ranks[1:] if r.kind != F.HUNG]
    if later:
        lines.append("root cause: the earliest failure; after it: " + "; ".join(
            f"rank {r.rank} {r.kind} ({r.summary}) {r.at - root.at:+.2f}s" if r.at and root.at
            else f"rank {r.rank} {r.kind} ({r.summary})" for r in later))
    if replied and root.kind != F.HUNG:
        lines.append(f"ranks that had replied: {replied}")
    if root.kind == F.RAISED:
        lines.append(f"traceback from rank {root.rank}:")
        lines.append(_indent(root.evidence))
    elif root.kind == F.DIED:
        lines.append(f"last {STDERR_TAIL_LINES} lines of rank {root.rank}'s stderr ({root.log}):")
        lines.append(_indent(root.evidence))
    hung = [r for r in failure.ranks if r.kind == F.HUNG]
    if hung and root.kind != F.HUNG:
        lines.append(f"ranks {[r.rank for r in hung]} did not reply within {grace.after(root.kind):g}s after that "
                     "(likely waiting in a collective for the failed rank); the group was killed. "
                     "Their stacks:")
    for r in hung:
        lines.append(f"--- rank {r.rank} (pid {r.pid}) ---")
        lines.append(_indent(r.evidence))
    if failure.ras is not None:
        lines.extend(ras_report.lines(failure.ras))
    lines.append(f"logs of every rank kept in {failure.log_dir}")
    return "\n".join(lines)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines()) if text.strip() else "    <nothing written>"
