"""The exceptions a worker group raises: one type per root cause, each carrying the plain-data
`failures.GroupFailure` that callers decide on (never on message text).
"""

from __future__ import annotations

from typing import Any

from wirecheck.core import failures as F
from wirecheck.core.failures import GroupFailure


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


def error_for(failure: GroupFailure, partial: dict[int, Any]) -> WorkerError:
    """The exception for a failure, typed by its root cause (what happened first)."""
    return _ERROR_TYPES[failure.kind](failure.message, label=failure.label, what=failure.what, failure=failure,
                                      partial=partial)
