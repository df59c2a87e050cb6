"""A burn-in in a record, as the report's burn-in section reads it: how it ended, each round's figures, and
the time series of the whole run (every window's TFLOP/s and every NVML sample per GPU, each placement's
busbw per round). Plain data, no drawing; times are seconds from the burn-in's first round.

From the measurements `burn_in_round` (one per round, as wirecheck.burnin.loop recorded it: the round's
figures and `series`, compact rows named by wirecheck.burnin.figures' WINDOW_COLUMNS and SAMPLE_COLUMNS)
and `burn_in` (its end); a run cut short (killed) has rounds but no end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from wirecheck.burnin.figures import SAMPLE_COLUMNS, WINDOW_COLUMNS

ROUND, END = "burn_in_round", "burn_in"


@dataclass
class BurnInView:
    rounds: list[dict] = field(default_factory=list)  # each round's details, in order
    end: dict | None = None  # the `burn_in` measurement's details; None when the run was cut short
    verdicts: list[dict] = field(default_factory=list)  # the verdicts of tests/test_burn_in.py

    @cached_property
    def t0(self) -> float:
        """The first round's start. Cached: every row of every round is drawn relative to it, and
        taking the minimum over the rounds for each row made a 4,800-round page take a minute."""
        return min((r.get("started") or 0.0) for r in self.rounds) if self.rounds else 0.0

    @property
    def status(self) -> str:
        return (self.end or {}).get("status") or "cut short (no end: the run was killed)"

    @property
    def fault(self) -> dict | None:
        return (self.end or {}).get("fault") or next((r["fault"] for r in self.rounds if r.get("fault")), None)

    @property
    def gpus(self) -> list[str]:
        seen: list[str] = []
        for r in self.rounds:
            for name in r.get("gpus") or {}:
                if name not in seen:
                    seen.append(name)
        return seen

    def windows(self, gpu: str) -> list[tuple[float, float]]:
        """(seconds from the start, TFLOP/s) of every window of every round."""
        t, f, t0 = WINDOW_COLUMNS.index("t0"), WINDOW_COLUMNS.index("flops_per_s"), self.t0
        return [(row[t] - t0, row[f] / 1e12) for r in self.rounds
                for row in ((r.get("series") or {}).get(gpu) or {}).get("windows") or [] if row[f]]

    def samples(self, gpu: str, column: str) -> list[tuple[float, float]]:
        """(seconds from the start, value) of every NVML sample of `column` (sm_mhz, power_w, temperature_c)."""
        t, c, t0 = SAMPLE_COLUMNS.index("t"), SAMPLE_COLUMNS.index(column), self.t0
        return [(row[t] - t0, row[c]) for r in self.rounds
                for row in ((r.get("series") or {}).get(gpu) or {}).get("samples") or [] if row[c] is not None]

    def busbw(self) -> dict[str, list[tuple[float, float]]]:
        """"placement op" -> (the round's middle, seconds from the start; its median busbw in GB/s) per round."""
        out: dict[str, list] = {}
        for r in self.rounds:
            middle = (r["started"] + r["ended"]) / 2 - self.t0
            for key, c in (r.get("collectives") or {}).items():
                out.setdefault(key, []).append((middle, c["median"] / 1e9))
        return out


def burn_in_view(measurements: list[dict], verdicts: list[dict]) -> BurnInView | None:
    """The record's burn-in, or None when it ran none."""
    view = BurnInView()
    for m in measurements:
        if m.get("kind") == ROUND and isinstance(m.get("details"), dict):
            view.rounds.append(m["details"])
        elif m.get("kind") == END and isinstance(m.get("details"), dict):
            view.end = m["details"]
    if not view.rounds and view.end is None:
        return None
    view.rounds.sort(key=lambda r: r.get("round") or 0)  # before t0 is read (it is cached)
    view.verdicts = [v for v in verdicts if "test_burn_in" in str(v.get("test") or "")]
    return view
