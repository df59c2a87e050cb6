"""A failed verdict as the operator reads it at the end of a run: one block, set as the failing test's
report (fixtures/last_screen.py), so pytest's terminal, its short summary and --junitxml all show it.

    busbw FAILED on nvswitch-2gpu-0.1: all_reduce busbw at 1 GiB
      measured  1.2 GB/s
      limit     >= 5,000 GB/s  (thresholds.yaml: collectives.simulated_floors.all_reduce.any)
      source    selftest: raised
      means     the GPUs of this placement move data slower than their fabric allows
      to do     compare `wirecheck topo` with the expected wiring ...
      detail    all_reduce busbw at 1 GiB on nvswitch-2gpu-0.1: measured 1.2 GB/s < floor 5000.0 GB/s (...)

The numbers are the verdict's own (as recorded); `means` and `to do` come from advice.py.
"""

from __future__ import annotations

import json
from typing import Any

from wirecheck.checks.advice import advice_for
from wirecheck.core.verdict import Verdict

_LONGEST_VALUE = 300  # a measured list (the processes on a GPU) is cut here: the detail line has it all


def number(value: float) -> str:
    """4 significant digits, thousands grouped from 10,000 on: 0.005, 1.234, 327.5, 126,668."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if value != value or value in (float("inf"), float("-inf")):
        return str(value)
    if 1e4 <= abs(value) < 1e15:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def value_text(value: Any, unit: str | None = None) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return number(value) + (f" {unit}" if unit else "")
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if len(text) > _LONGEST_VALUE:
        text = text[:_LONGEST_VALUE] + " ..."
    return text + (f" {unit}" if unit and isinstance(value, str) else "")


def limit_text(limit: dict | None, unit: str | None) -> str:
    if not limit:
        return "-"
    low, high = limit.get("min"), limit.get("max")
    parts = []
    if low is not None and high is not None:
        parts.append(f"{value_text(low)} to {value_text(high, unit)}")
    elif low is not None:
        parts.append(f">= {value_text(low, unit)}")
    elif high is not None:
        parts.append(f"<= {value_text(high, unit)}")
    if "expected" in limit:
        parts.append(f"expected {value_text(limit['expected'])}")
    parts += [f"{k} {value_text(v)}" for k, v in limit.items() if k not in ("min", "max", "expected") and v is not None]
    return "; ".join(parts) or "-"


def reason(verdict: Verdict) -> str:
    """One short line for pytest's short summary (cut to the terminal's width after the test id): the
    figure against its limit where there is one, else the message's first line."""
    measured, limit = verdict.measured, verdict.limit or {}
    if isinstance(measured, (int, float)) and not isinstance(measured, bool):
        low, high = limit.get("min"), limit.get("max")
        if isinstance(low, (int, float)) and measured < low:
            return f"{verdict.check} {number(measured)} < {value_text(low, verdict.unit)}"
        if isinstance(high, (int, float)) and measured > high:
            return f"{verdict.check} {number(measured)} > {value_text(high, verdict.unit)}"
        if limit:
            return f"{verdict.check}: measured {value_text(measured, verdict.unit)}, limit {limit_text(limit, verdict.unit)}"
    return verdict.message.strip().splitlines()[0] if verdict.message.strip() else f"{verdict.check} failed"


def render(verdict: Verdict, test: str | None = None) -> list[str]:
    """The block's lines, without trailing newlines."""
    advice = advice_for(verdict.check, verdict.details)
    where = verdict.where or "the node"
    # Not "FAILED ...": scripts read pytest's short summary lines by that word.
    lines = [f"{verdict.check or 'check'} FAILED on {where}: {verdict.what}"]

    def field(name: str, text: str) -> None:
        first, *rest = str(text).splitlines() or [""]
        lines.append(f"  {name:9} {first}")
        lines.extend(f"  {'':9} {line}" for line in rest)

    if verdict.measured is not None:
        field("measured", value_text(verdict.measured, verdict.unit))
    if verdict.limit or verdict.yaml_path:
        field("limit", limit_text(verdict.limit, verdict.unit) + (f"  ({verdict.yaml_path})" if verdict.yaml_path else ""))
    if verdict.source:
        field("source", verdict.source)
    field("means", advice.means)
    field("to do", advice.todo)
    field("detail", verdict.message.strip())
    if test:
        field("test", test)
    return lines
