"""How long a worker call may take: from the work it does, not one timeout for everything.

A 1 MiB all_gather takes microseconds; waiting the same 120 s for it as for twenty 1 GiB
all_reduces means a node whose broken link hangs every collective spends hours before it says
anything. A call's deadline is therefore its expected time at the slowest bandwidth the
thresholds allow (the placement class's busbw floor) times a safety factor, never below a
minimum (process round trip, buffer allocation, NCCL's lazy connection set-up on a first call)
and never above the call's hard ceiling (the `timeout` of its thresholds section).
"""

from __future__ import annotations

from dataclasses import dataclass

from wirecheck.core.quantity import format_bytes


@dataclass(frozen=True)
class DeadlineRule:
    """thresholds.yaml workers.deadlines.<hardware|simulated>."""

    minimum_s: float
    safety_factor: float
    source: str
    yaml_path: str


@dataclass(frozen=True)
class Deadline:
    """Seconds a call may take, and how that number was reached (for the failure message)."""

    seconds: float
    note: str

    def __post_init__(self) -> None:
        if not self.seconds > 0:
            raise ValueError(f"a deadline must be positive, got {self.seconds!r} s ({self.note})")


def fixed(seconds: float, why: str) -> Deadline:
    return Deadline(float(seconds), why)


def expected_collective_s(size_bytes: int, bus_factor: float, calls: int, floor_busbw: float) -> float:
    """Seconds `calls` collectives of `size_bytes` take at busbw `floor_busbw` (bytes/s).

    busbw = algbw x bus_factor and algbw = size / time (nccl-tests), so one call takes
    size x bus_factor / busbw.
    """
    if floor_busbw <= 0:
        raise ValueError(f"floor bandwidth must be positive, got {floor_busbw!r}")
    return calls * size_bytes * bus_factor / floor_busbw


def collective_deadline(rule: DeadlineRule, ceiling_s: float, op: str, size_bytes: int, bus_factor: float,
                        calls: int, floor_busbw: float | None, floor_what: str = "floor") -> Deadline:
    """clamp(safety_factor x expected time, minimum, ceiling). Without a floor: the ceiling."""
    work = f"{calls} x {op} at {format_bytes(size_bytes)}"
    if floor_busbw is None:
        return Deadline(ceiling_s, f"the ceiling: no busbw floor to estimate {work} from")
    expected = expected_collective_s(size_bytes, bus_factor, calls, floor_busbw)
    scaled = rule.safety_factor * expected
    at = f"{work} should take {_seconds(expected)} at the {floor_what} {floor_busbw / 1e9:.3g} GB/s"
    if rule.minimum_s >= ceiling_s and scaled <= rule.minimum_s:  # the ceiling wins: say so, not the minimum
        seconds, why = ceiling_s, f"the ceiling, the section's timeout, at or below the minimum ({rule.yaml_path}); {at}"
    elif scaled <= rule.minimum_s:
        seconds, why = rule.minimum_s, f"the minimum ({rule.yaml_path}); {at}"
    elif scaled >= ceiling_s:
        seconds, why = ceiling_s, f"the ceiling; {at}, x {rule.safety_factor:g} is more"
    else:
        seconds, why = scaled, f"{rule.safety_factor:g} x expected: {at}"
    return Deadline(min(seconds, ceiling_s), why)


def _seconds(s: float) -> str:
    if s >= 1:
        return f"{s:.1f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} us"
