"""A hang or a dead rank, from the record and the ranks' logs (no probe runs): the rank that failed
first, the GPU it ran on, the operation and size, its one-line summary, and the last lines of its log
where the log is still there.
"""

from __future__ import annotations

from pathlib import Path

from wirecheck.diagnose.findings import FOUND, NOT_LOCALIZED, Finding
from wirecheck.diagnose.suspects import Suspect

LOG_TAIL_LINES = 5


def _log_tail(failure: dict, rank: int) -> list[str]:
    paths = [r.get("log") for r in failure.get("ranks") or [] if isinstance(r, dict) and r.get("rank") == rank]
    if failure.get("log_dir"):
        paths.append(str(Path(failure["log_dir"]) / f"rank{rank}.log"))
    for path in paths:
        try:
            lines = Path(path).read_text(errors="replace").splitlines()
        except (OSError, TypeError):
            continue
        return [line for line in lines if line.strip()][-LOG_TAIL_LINES:]
    return []


def diagnose(s: Suspect) -> Finding:
    failure = s.failure or {}
    root = failure.get("root") if isinstance(failure.get("root"), dict) else {}
    rank = root.get("rank")
    if not isinstance(rank, int):
        return Finding(s, NOT_LOCALIZED, evidence=[f"{s.failed}: the record names no rank"])
    gpu = s.gpus[rank] if rank < len(s.gpus) else None
    what = failure.get("what") or "its call"
    others = [f"rank {r.get('rank')} {r.get('kind')}" for r in failure.get("ranks") or []
              if isinstance(r, dict) and r.get("rank") != rank]
    evidence = [f"{s.where}: rank {rank}" + (f" (GPU{gpu})" if gpu is not None else "") +
                f" {root.get('kind')} first in {what}: {root.get('summary')}"]
    if others:
        evidence.append("then: " + ", ".join(others))
    if failure.get("deadline_s"):
        evidence.append(f"deadline {failure['deadline_s']:g} s ({failure.get('deadline_note') or 'no note'})")
    tail = _log_tail(failure, rank)
    evidence += [f"rank {rank} log: {line}" for line in tail] or [f"rank {rank}'s log is no longer there"]
    who = f"GPU{gpu}" if gpu is not None else f"rank {rank} of {s.where}"
    culprit = f"{who} (rank {rank} of {s.where}) {root.get('kind')} in {what}: {root.get('summary')}"
    return Finding(s, FOUND, who, culprit, evidence, {"rank": rank, "gpu": gpu, "what": what, "kind": root.get("kind")})
