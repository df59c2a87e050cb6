"""Verdicts as data: one object per checked thing, recorded and asserted as the same object.

A check is a library function of (thresholds, measured inputs) that returns a `Verdict`
(see wirecheck.checks). The test asserts `verdict.ok` with `verdict.message`; the record
file keeps the verdict with the inputs it was computed from, so `wirecheck judge` can call
the same function again on a recorded run, with other thresholds, without GPUs.

A verdict is structure: what was judged and where, the measured value with its unit and display
format, the bound (its kind and values), the rule, source and YAML path of the limit, the problems,
note and hint the structure cannot say (each a sentence of its check's words, wirecheck.checks.words),
and the kind of problem it had beside its figures (`problem`, wirecheck.core.problems), which readers
decide by. Its line comes from wirecheck.core.render, the one place every face (the message, the
failure block, judge, the report, the drain reason) is written from; the message is rendered when it is first read (a fleet report makes a verdict per
node and figure, and shows the words of the few that fail) and recorded with the verdict.
"""

from __future__ import annotations

import copy
from dataclasses import MISSING, asdict, dataclass, field, replace
from typing import Any

from wirecheck.core import failure_codes, problems, render
from wirecheck.core.quantity import KIND_ALIASES, UNITS

# warn: nothing failed but the check has something to say (a GPU far from every NIC); it passes the
# test and the run, never drains a node, and is counted and shown apart from the passes.
PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"
OUTCOMES = (PASS, WARN, FAIL, SKIP)

# Which rule made a limit: a table entry measured on this very hardware (GPU model, or NVLink
# generation and link count), a table entry nobody measured yet (its source a `guess:`), derived from the
# node's physics (links x speed, HBM and math peaks from NVML), calibrated on the site's good nodes, a
# bound a site file sets over another file's entry with no source or rule of its own (`site`: nobody says
# how it was made), this GPU's or placement's own history, the node's peers (its median), the fleet's, or
# a CPU sanity bound of a simulated run.
RULES = ("measured", "guess", "derived", "calibrated", "site", "history", "peers", "fleet", "simulated")


def source_rule(source: str | None) -> str:
    """The rule a table entry's `source:` says made it: `guess` where it starts so (no run measured it),
    else `measured`. Also read from a record's verdict written before verdicts kept their rule."""
    return "guess" if str(source or "").lstrip().lower().startswith("guess") else "measured"


class _Message:
    """The `message` field: a message given when the verdict is made is kept; an empty one is rendered
    from the verdict's structure when first read (rendering was half of judging a fleet's figures)."""

    def __get__(self, verdict, owner=None) -> str:
        if verdict is None:
            return ""  # the field's default
        text = verdict.__dict__.get("_message")
        if not text:
            text = render.message(verdict)
            verdict.__dict__["_message"] = text
        return text

    def __set__(self, verdict, text: str) -> None:
        verdict.__dict__["_message"] = text


@dataclass(frozen=True)
class Verdict:
    """What was checked, where, what was measured against which limit, and the outcome."""

    check: str  # the check function's name in wirecheck.checks.CHECKS
    what: str  # the figure judged: "all_reduce busbw at 1 GiB"
    where: str | None  # a placement id, "GPU3", or None for the node
    outcome: str  # pass | warn | fail | skip
    message: str = _Message()  # rendered from the rest when first read (wirecheck.core.render.message)
    measured: Any = None
    unit: str | None = None
    limit: dict | None = None  # {"min", "max", "expected", ...}: the bounds, in `unit`
    source: str | None = None  # where the limit came from (thresholds.yaml `source:`)
    yaml_path: str | None = None  # where the limit is written: "thresholds.yaml: collectives.floors..."
    rule: str | None = None  # which rule made the limit (RULES); None for a verdict without a numeric limit
    inputs: dict = field(default_factory=dict)  # the check's arguments, to judge it again
    details: dict = field(default_factory=dict)  # "problems": what was found wrong, one line each
    # The structure the words are made from (records written before these fields load with the defaults):
    fmt: str | None = None  # display format of measured and limit (render.FORMATS: a quantity kind, "number")
    bound: str | None = None  # render.BOUNDS: floor, ceiling, range, expected, peers; None: no bound
    place: str | None = None  # `where` as the words name it: "GPU3 (0000:1b:00.0)"
    note: str = ""  # a fact shown with the verdict whatever its outcome
    hint: str = ""  # a fact the figures cannot say (shown when it fails or warns); a skip's reason
    problem: str | None = None  # the kind of problem beside the figures (core.problems: cut_short, not_measured...)

    def __post_init__(self) -> None:
        if self.bound is None and self.limit:
            object.__setattr__(self, "bound", render.bound_kind(self))

    def __repr__(self) -> str:  # short: pytest prints it under a failed `assert verdict.ok`
        return f"Verdict({self.check} {self.outcome} on {self.where or 'the node'})"

    @property
    def ok(self) -> bool:
        return self.outcome != FAIL

    @property
    def skipped(self) -> bool:
        return self.outcome == SKIP

    @property
    def code(self) -> str | None:
        """The stable failure code of this check and outcome (wirecheck.core.failure_codes: WC2021 for a
        failed busbw); None for a pass, a skip, or a check the table does not know. Derived, never stored
        apart: a record's `code` is written from it, and read back it is derived again."""
        return failure_codes.code(self.check, self.outcome)

    def as_record(self) -> dict:
        return {**asdict(self), "code": self.code}

    @classmethod
    def from_record(cls, rec: dict) -> "Verdict":
        """A recorded verdict line as a Verdict; ValueError naming what a damaged or foreign line lacks."""
        names = cls.__dataclass_fields__
        missing = [n for n, f in names.items() if n not in rec and f.default is MISSING and f.default_factory is MISSING]
        if missing:
            raise ValueError(f"the verdict of {rec.get('test') or 'a test'} has no {', '.join(missing)}: a damaged or "
                             "edited record line")
        return cls(**{k: v for k, v in rec.items() if k in names})

    def with_inputs(self, check: str, inputs: dict) -> "Verdict":
        # A copy with two fields set, not dataclasses.replace: nothing is rendered again (the words do not
        # name the check), and a fleet report makes one per judged verdict of every node.
        out = copy.copy(self)
        object.__setattr__(out, "check", check)
        object.__setattr__(out, "inputs", inputs)
        return out

    def amended(self, **changes: Any) -> "Verdict":
        """The verdict with `changes` (a note, details), its message rendered again from them."""
        return replace(self, message="", **changes)


def cite(yaml_path: str | None, source: str | None) -> str:
    return render.cite(yaml_path, source)


def skip(what: str, where: str | None, reason: str, **extra: Any) -> Verdict:
    """Not judged, with the reason (no limit for this case, nothing readable, simulation)."""
    return Verdict("", what, where, SKIP, hint=reason, **extra)


def not_measured(what: str, where: str | None, error: str | None, **extra: Any) -> Verdict:
    """A figure that could not be measured (the worker's error) fails whatever its limit."""
    details = {**extra.pop("details", {}), "problems": [f"not measured: {error}"]}
    return Verdict("", what, where, FAIL, details=details, problem=problems.NOT_MEASURED, **extra)


def within(what: str, where: str | None, value: float, limit, unit: str, fmt: str | None = None,
           hint: str = "", **extra: Any) -> Verdict:
    """`value` (base units: bytes/s) inside [limit.min, limit.max] (typed: wirecheck.core.quantity.Quantity;
    either may be None), both recorded in `unit` (GB/s); `fmt` names the display format (render.FORMATS),
    by default the limit's quantity kind."""
    failed = ((limit.min is not None and value < limit.min) or (limit.max is not None and value > limit.max))
    fmt = fmt or limit.kind
    scale = 1.0 / UNITS[KIND_ALIASES.get("memory" if fmt == "memory" else fmt, fmt)][unit]
    bounds = {"min": limit.min, "max": limit.max}
    return Verdict("", what, where, FAIL if failed else PASS, measured=value * scale, unit=unit,
                   limit={k: (v.to(unit) if v is not None else None) for k, v in bounds.items()}, fmt=fmt,
                   bound="range" if limit.min is not None and limit.max is not None else
                   "floor" if limit.min is not None else "ceiling",
                   source=limit.source, yaml_path=limit.yaml_path, rule=getattr(limit, "rule", None),
                   hint=hint, **extra)


def at_least(what: str, where: str | None, value: float, minimum: float, unit: str, source: str, yaml_path: str,
             fmt: str = "ratio", hint: str = "", rule: str | None = None, **extra: Any) -> Verdict:
    return Verdict("", what, where, PASS if value >= minimum else FAIL, measured=value, unit=unit,
                   limit={"min": minimum}, bound="floor", fmt=fmt, source=source, yaml_path=yaml_path, rule=rule,
                   hint=hint, **extra)


def at_most(what: str, where: str | None, value: float, maximum: float, unit: str, source: str, yaml_path: str,
            fmt: str, hint: str = "", rule: str | None = None, **extra: Any) -> Verdict:
    return Verdict("", what, where, PASS if value <= maximum else FAIL, measured=value, unit=unit,
                   limit={"max": maximum}, bound="ceiling", fmt=fmt, source=source, yaml_path=yaml_path, rule=rule,
                   hint=hint, **extra)


def expect(what: str, where: str | None, measured: Any, expected: Any, ok: bool, failure: str,
           source: str | None = None, yaml_path: str | None = None, unit: str | None = None, **extra: Any) -> Verdict:
    """An expected value (a profile's GPU count, a fabric state): `failure` says what is wrong and the fix."""
    details = {**extra.pop("details", {}), **({} if ok else {"problems": [failure]})}
    return Verdict("", what, where, PASS if ok else FAIL, measured=measured, unit=unit, limit={"expected": expected},
                   bound="expected", source=source, yaml_path=yaml_path, details=details, **extra)


def no_problems(what: str, where: str | None, problems: list[str], measured: Any = None, intro: str = "",
                source: str | None = None, yaml_path: str | None = None, unit: str | None = None,
                **extra: Any) -> Verdict:
    """Pass when `problems` is empty; otherwise fail listing them (`intro`: what they mean, what to do)."""
    if problems:
        return Verdict("", what, where, FAIL, measured=measured, unit=unit, source=source, yaml_path=yaml_path,
                       details={**extra.pop("details", {}), "problems": list(problems)}, hint=intro, **extra)
    return Verdict("", what, where, PASS, measured=measured, unit=unit, source=source, yaml_path=yaml_path,
                   **({"note": "ok"} if "note" not in extra else {}), **extra)
