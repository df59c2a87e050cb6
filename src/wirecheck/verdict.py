"""Verdicts: a measured value against a limit from thresholds.yaml, with a message that
says measured vs expected, where, and where the limit came from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Verdict:
    ok: bool
    message: str

    @property
    def word(self) -> str:
        return "pass" if self.ok else "fail"


def _cite(limit) -> str:
    return f"{limit.yaml_path}; source: {limit.source}"


def judge(value: float, limit, what: str, where: str, fmt: Callable[[float], str]) -> Verdict:
    """`value` within [limit.min, limit.max] (either may be None)."""
    if limit.min is not None and value < limit.min:
        return Verdict(False, f"{what} on {where}: measured {fmt(value)} < floor {fmt(limit.min)} ({_cite(limit)})")
    if limit.max is not None and value > limit.max:
        return Verdict(False, f"{what} on {where}: measured {fmt(value)} > ceiling {fmt(limit.max)} ({_cite(limit)})")
    bounds = " and ".join(
        b for b in (f">= {fmt(limit.min)}" if limit.min is not None else "", f"<= {fmt(limit.max)}" if limit.max is not None else "") if b
    )
    return Verdict(True, f"{what} on {where}: measured {fmt(value)} {bounds} ({_cite(limit)})")


def judge_ratio(ratio: float, minimum: float, what: str, where: str, source: str, yaml_path: str) -> Verdict:
    ok = ratio >= minimum
    sign = ">=" if ok else "<"
    return Verdict(ok, f"{what} on {where}: {ratio:.2f}x {sign} required {minimum:.2f}x ({yaml_path}; source: {source})")


def limit_dict(limit) -> dict | None:
    if limit is None:
        return None
    return {"min": limit.min, "max": limit.max, "source": limit.source, "yaml_path": limit.yaml_path}
