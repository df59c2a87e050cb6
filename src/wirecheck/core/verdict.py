"""Verdicts as data: one object per checked thing, recorded and asserted as the same object.

A check is a library function of (thresholds, measured inputs) that returns a `Verdict`
(see wirecheck.checks). The test asserts `verdict.ok` with `verdict.message`; the record
file keeps the verdict with the inputs it was computed from, so `wirecheck judge` can call
the same function again on a recorded run, with other thresholds, without GPUs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable

PASS, FAIL, SKIP = "pass", "fail", "skip"
OUTCOMES = (PASS, FAIL, SKIP)

# Which rule made a limit: a table entry measured on this very hardware (GPU model, or NVLink
# generation and link count), derived from the node's physics (links x speed, HBM and math peaks
# from NVML), calibrated on the site's good nodes, this GPU's or placement's own history, the node's
# peers (its median), the fleet's, or a CPU sanity bound of a simulated run.
RULES = ("measured", "derived", "calibrated", "history", "peers", "fleet", "simulated")


@dataclass(frozen=True)
class Verdict:
    """What was checked, where, what was measured against which limit, and the outcome."""

    check: str  # the check function's name in wirecheck.checks.CHECKS
    what: str  # "all_reduce busbw at 1 GiB"
    where: str | None  # a placement id, "GPU3", or None for the node
    outcome: str  # pass | fail | skip
    message: str  # measured vs limit, where, and the limit's source; a skip's reason
    measured: Any = None
    unit: str | None = None
    limit: dict | None = None  # {"min", "max", "expected"}: the bounds, in `unit`
    source: str | None = None  # where the limit came from (thresholds.yaml `source:`)
    yaml_path: str | None = None  # where the limit is written: "thresholds.yaml: collectives.floors..."
    rule: str | None = None  # which rule made the limit (RULES); None for a verdict without a numeric limit
    inputs: dict = field(default_factory=dict)  # the check's arguments, to judge it again
    details: dict = field(default_factory=dict)

    def __repr__(self) -> str:  # short: pytest prints it under a failed `assert verdict.ok`
        return f"Verdict({self.check} {self.outcome} on {self.where or 'the node'})"

    @property
    def ok(self) -> bool:
        return self.outcome != FAIL

    @property
    def skipped(self) -> bool:
        return self.outcome == SKIP

    def as_record(self) -> dict:
        return asdict(self)

    @classmethod
    def from_record(cls, rec: dict) -> "Verdict":
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in rec.items() if k in names})

    def with_inputs(self, check: str, inputs: dict) -> "Verdict":
        return replace(self, check=check, inputs=inputs)


def cite(yaml_path: str | None, source: str | None) -> str:
    return f"{yaml_path}; source: {source}" if yaml_path else f"source: {source}"


def skip(what: str, where: str | None, reason: str, **extra: Any) -> Verdict:
    """Not judged, with the reason (no limit for this case, nothing readable, simulation)."""
    return Verdict("", what, where, SKIP, f"{what} on {where or 'the node'}: {reason}" if where else f"{what}: {reason}",
                   **extra)


def within(what: str, where: str | None, value: float, limit, fmt: Callable[[float], str], unit: str,
           scale: float = 1.0, hint: str = "") -> Verdict:
    """`value` inside [limit.min, limit.max] (either may be None). `scale` converts base units
    (bytes/s) to the recorded unit (GB/s)."""
    bounds = {"min": limit.min, "max": limit.max}
    failed = None
    if limit.min is not None and value < limit.min:
        failed = f"measured {fmt(value)} < floor {fmt(limit.min)}"
    elif limit.max is not None and value > limit.max:
        failed = f"measured {fmt(value)} > ceiling {fmt(limit.max)}"
    if failed:
        message = f"{what} on {where}: {failed} ({cite(limit.yaml_path, limit.source)}){hint}"
    else:
        shown = " and ".join(b for b in (f">= {fmt(limit.min)}" if limit.min is not None else "",
                                         f"<= {fmt(limit.max)}" if limit.max is not None else "") if b)
        message = f"{what} on {where}: measured {fmt(value)} {shown} ({cite(limit.yaml_path, limit.source)})"
    return Verdict("", what, where, FAIL if failed else PASS, message, measured=value * scale, unit=unit,
                   limit={k: (v * scale if v is not None else None) for k, v in bounds.items()},
                   source=limit.source, yaml_path=limit.yaml_path, rule=getattr(limit, "rule", None))


def at_least(what: str, where: str | None, value: float, minimum: float, unit: str, source: str, yaml_path: str,
             fmt: Callable[[float], str] = lambda v: f"{v:.2f}x", hint: str = "", rule: str | None = None) -> Verdict:
    ok = value >= minimum
    sign = ">=" if ok else "<"
    message = f"{what} on {where}: {fmt(value)} {sign} required {fmt(minimum)} ({cite(yaml_path, source)})"
    return Verdict("", what, where, PASS if ok else FAIL, message + ("" if ok else hint), measured=value, unit=unit,
                   limit={"min": minimum}, source=source, yaml_path=yaml_path, rule=rule)


def at_most(what: str, where: str | None, value: float, maximum: float, unit: str, source: str, yaml_path: str,
            fmt: Callable[[float], str], hint: str = "", rule: str | None = None) -> Verdict:
    ok = value <= maximum
    sign = "<=" if ok else ">"
    message = f"{what} on {where}: {fmt(value)} {sign} allowed {fmt(maximum)} ({cite(yaml_path, source)})"
    return Verdict("", what, where, PASS if ok else FAIL, message + ("" if ok else hint), measured=value, unit=unit,
                   limit={"max": maximum}, source=source, yaml_path=yaml_path, rule=rule)


def expect(what: str, where: str | None, measured: Any, expected: Any, ok: bool, failure: str,
           source: str | None = None, yaml_path: str | None = None, unit: str | None = None) -> Verdict:
    """An expected value (a profile's GPU count, a fabric state): `failure` says what is wrong and the fix."""
    if ok:
        message = f"{what} on {where}: {measured!r} as expected" if where else f"{what}: {measured!r} as expected"
    else:
        message = failure + (f" ({cite(yaml_path, source)})" if source else "")
    return Verdict("", what, where, PASS if ok else FAIL, message, measured=measured, unit=unit,
                   limit={"expected": expected}, source=source, yaml_path=yaml_path)


def no_problems(what: str, where: str | None, problems: list[str], measured: Any = None, intro: str = "",
                source: str | None = None, yaml_path: str | None = None, unit: str | None = None) -> Verdict:
    """Pass when `problems` is empty; otherwise fail listing them."""
    if problems:
        listed = problems[0] if len(problems) == 1 else "\n  " + "\n  ".join(problems)
        text = (intro or f"{what} on {where}") + ": " + listed
        if source:
            text += f" ({cite(yaml_path, source)})"
        return Verdict("", what, where, FAIL, text, measured=measured, unit=unit, source=source, yaml_path=yaml_path,
                       details={"problems": problems})
    return Verdict("", what, where, PASS, f"{what} on {where}: ok" if where else f"{what}: ok", measured=measured,
                   unit=unit, source=source, yaml_path=yaml_path)
