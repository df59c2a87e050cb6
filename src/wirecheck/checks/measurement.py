"""A measurement that could not be made (a hang, a crashed rank) fails whatever the limits."""

from __future__ import annotations

from wirecheck.checks import check
from wirecheck.core.verdict import FAIL, PASS, Verdict


@check("measurement_completed")
def measurement_completed(thresholds, *, what: str, placement: str | None, error: str | None) -> Verdict:
    """`error`: the worker group's report (stacks of a hang, stderr tail of a dead rank)."""
    if error:
        return Verdict("", what, placement, FAIL, details={"problems": [error]})
    return Verdict("", what, placement, PASS, note="completed")
