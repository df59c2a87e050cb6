"""The small-message checks of a collective's curve: latency ceiling and n½ ceiling.

Each is one function of (measured curve, limit) returning a `CurveCheck`: the reading (plain data for
the record), the verdict, or why it is not judged. A node whose small messages are slow fails here by
name even when its large-message bandwidth passes the floors.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

from wirecheck.curve import HalfPeak, Latency, Point, half_peak_size, small_message_latency
from wirecheck.quantity import format_bw, format_bytes, format_time
from wirecheck.verdict import Verdict, judge


@dataclass(frozen=True)
class CurveCheck:
    reading: Latency | HalfPeak | None
    verdict: Verdict | None  # None: not judged (skip_reason says why)
    skip_reason: str | None = None

    @property
    def value(self) -> float | None:
        """The judged number in base units (seconds, bytes), for the record."""
        if isinstance(self.reading, Latency):
            return self.reading.time_s
        if isinstance(self.reading, HalfPeak):
            return self.reading.size
        return None

    def details(self) -> dict[str, Any]:
        return asdict(self.reading) if self.reading is not None else {}


def latency_check(points: Sequence[Point], limit, up_to: int, op: str, where: str) -> CurveCheck:
    """Median time per call over the sizes up to `up_to` against `limit.max` (a thresholds Limit, kind time)."""
    reading = small_message_latency(points, up_to)
    if reading is None:
        return CurveCheck(None, None, f"{op} on {where}: no size up to {format_bytes(up_to)} was measured; "
                                      "the sweep must start at or below collectives.latency.up_to")
    if limit is None:
        return CurveCheck(reading, None, f"{op} on {where}: no small-message latency ceiling for this class, op "
                                         "and GPU count in collectives.latency")
    per_size = ", ".join(f"{format_bytes(s)} {format_time(t)}{' ' + p if p else ''}"
                         for s, t, p in zip(reading.sizes, reading.times_s, reading.paths))
    what = f"{op} small-message latency ({reading.describe()}: {per_size})"
    return CurveCheck(reading, judge(reading.time_s, limit, what, where, format_time))


def half_peak_check(points: Sequence[Point], limit, fraction: float, op: str, where: str) -> CurveCheck:
    """n½ (interpolated) against `limit.max` (a thresholds Limit, kind size)."""
    reading = half_peak_size(points, fraction)
    if reading is None:
        return CurveCheck(None, None, f"{op} on {where}: no bandwidth measured, no n½")
    if limit is None:
        return CurveCheck(reading, None, f"{op} on {where}: no n½ ceiling for this class, op and GPU count in "
                                         "collectives.half_peak")
    around = (f"between {format_bytes(reading.below_size)} and {format_bytes(reading.first_size)}"
              if reading.below_size is not None else f"at or below the smallest size {format_bytes(reading.first_size)}")
    what = (f"{op} n½ (busbw first reaches {reading.fraction:.0%} of the peak {format_bw(reading.peak_busbw)} "
            f"at {format_bytes(reading.peak_size)} {around})")
    return CurveCheck(reading, judge(reading.size, limit, what, where, format_bytes))
