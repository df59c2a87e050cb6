"""A measurement that could not be made (a hang, a crashed rank) fails whatever the limits.

Its evidence is the worker group's report (stacks of a hang, stderr tail of a dead rank) and, where NCCL ran,
NCCL RAS's reading taken before the group was killed: the communicators' state and the dead, unresponsive or
stuck ranks by host, pid and GPU (wirecheck.workers.ras; `ras` input, shown in the problems).
"""

from __future__ import annotations

from wirecheck.checks import check
from wirecheck.checks.words import Words
from wirecheck.core.problems import BROKEN
from wirecheck.core.verdict import FAIL, PASS, Verdict
from wirecheck.workers import ras_report


COMPLETED = Words(
    what="{what}",  # the measurement's own name, as the test gives it ("all_reduce sweep on nvswitch-2gpu-0.1")
    means="the measurement itself broke (a rank hung, raised or died): nothing could be judged",
    todo="read the ranks' stacks and logs named above; a hang on one wire only points at its link or GPU",
    say={"completed": "completed"})


@check("measurement_completed", words=COMPLETED)
def measurement_completed(thresholds, *, what: str, placement: str | None, error: str | None,
                          ras: dict | None = None) -> Verdict:
    """`error`: the worker group's report; `ras`: NCCL RAS's reading of the failure (None: not asked)."""
    if error:
        problems = [error]
        if ras is not None and not any(line in error for line in ras_report.lines(ras)[:1]):
            problems += ras_report.lines(ras)  # the group's message says it already when it holds the reading
        return Verdict("", COMPLETED.judged(what=what), placement, FAIL, details={"problems": problems}, problem=BROKEN)
    return Verdict("", COMPLETED.judged(what=what), placement, PASS, note=COMPLETED.said("completed"))
