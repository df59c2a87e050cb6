"""The inputs of the burn-in's verdicts, gathered over every round (parent side, plain data).

The acceptance checks take the whole burn-in's figures: a GPU's sustained TFLOP/s is the median of its
rounds' figures (each round's median window), its peers' the same; clock-event reasons are counted over
every sample under load; power and temperature are the peak over every round; the memory test is every
pass of every round (coverage: the round that covered least). A placement's busbw is the median of every
step of every round. Only a burn-in judges the drift of a GPU's TFLOP/s and the spread of a placement's
rounds (wirecheck.checks.burn_in).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from wirecheck.burnin.loop import BurnIn


def _gpu_rounds(burn: BurnIn, gpu: int) -> list[dict]:
    return [r["gpus"][f"GPU{gpu}"] for r in burn.rounds if f"GPU{gpu}" in r.get("gpus", {})]


def _figure(burn: BurnIn, gpu: int) -> float | None:
    values = [g["flops_per_s"] for g in _gpu_rounds(burn, gpu) if g.get("flops_per_s")]
    return statistics.median(values) if values else None


def _error(burn: BurnIn, gpu: int, rounds: list[dict]) -> str | None:
    if not burn.rounds:
        return f"no burn-in round ran ({burn.status})"
    if not rounds or all(g.get("flops_per_s") is None for g in rounds):
        errors = [g.get("error") for g in rounds if g.get("error")]
        return errors[0] if errors else f"GPU{gpu} has no figure in any round"
    return None


def _where(burn: BurnIn, gpu: int) -> dict:
    return {"gpu": gpu, "bus_id": burn.plan.bus_ids.get(gpu)}


def sustained(burn: BurnIn, gpu: int) -> dict[str, Any]:
    """checks.gpu_health.sustained_throughput's inputs over the whole burn-in."""
    rounds = _gpu_rounds(burn, gpu)
    error = _error(burn, gpu, rounds)
    figures = [g["flops_per_s"] for g in rounds if g.get("flops_per_s")]
    peers = {}
    for other in burn.plan.gpus:
        if other != gpu and burn.plan.names.get(other) == burn.plan.names.get(gpu):
            value = _figure(burn, other)
            if value is not None and math.isfinite(value):
                peers[f"GPU{other}"] = value
    windows = None
    if figures:
        windows = {"windows": sum((g.get("windows") or {}).get("windows", 0) for g in rounds),
                   "seconds": sum((g.get("windows") or {}).get("seconds", 0.0) for g in rounds),
                   "first": figures[0], "last": figures[-1], "min": min(figures), "max": max(figures)}
    return {**_where(burn, gpu), "gpu_model": burn.plan.names.get(gpu), "flops_per_s": None if error else _figure(burn, gpu),
            "windows": windows, "peers": peers, "simulated": burn.plan.simulated, "foreign_processes": [],
            "error": error}


def drift(burn: BurnIn, gpu: int) -> dict[str, Any]:
    return {**_where(burn, gpu), "round_flops": [g.get("flops_per_s") for g in _gpu_rounds(burn, gpu)],
            "simulated": burn.plan.simulated}


def _nvml_error(burn: BurnIn, gpu: int, part: str) -> str | None:
    """Why no round could be judged for `part` (clocks, power, temperature), or None."""
    rounds = _gpu_rounds(burn, gpu)
    if not rounds:
        return f"no burn-in round ran ({burn.status})"
    if any(not g[part].get("error") for g in rounds):
        return None
    return rounds[-1][part]["error"]


def _unsupported(rounds: list[dict], part: str) -> str | None:
    return next((g[part]["unsupported"] for g in rounds if g[part].get("unsupported")), None)


def clocks(burn: BurnIn, gpu: int) -> dict[str, Any]:
    """checks.gpu_health.sustained_clocks' inputs: reasons counted over every round's samples under load."""
    rounds = _gpu_rounds(burn, gpu)
    counts: dict[str, int] = {}
    violations: dict[str, int] = {}
    for g in rounds:
        for mask, n in g["clocks"]["reason_counts"].items():
            counts[mask] = counts.get(mask, 0) + n
        for policy, ns in (g["clocks"].get("violations_ns") or {}).items():
            violations[policy] = violations.get(policy, 0) + ns
    simulated = burn.plan.simulated
    return {**_where(burn, gpu), "reason_counts": counts, "samples": sum(g["clocks"]["samples"] for g in rounds),
            "violations_ns": violations, "simulated": simulated, "unsupported": _unsupported(rounds, "clocks"),
            "error": None if simulated else _nvml_error(burn, gpu, "clocks")}


def power(burn: BurnIn, gpu: int) -> dict[str, Any]:
    rounds = _gpu_rounds(burn, gpu)
    peaks = [g["power"]["peak_w"] for g in rounds if g["power"].get("peak_w") is not None]
    last = next((g["power"] for g in reversed(rounds) if g["power"].get("limit_w")), {})
    simulated = burn.plan.simulated
    return {**_where(burn, gpu), "peak_w": max(peaks) if peaks else None, "limit_w": last.get("limit_w"),
            "default_limit_w": last.get("default_limit_w"), "samples": sum(g["power"]["samples"] for g in rounds),
            "simulated": simulated, "unsupported": _unsupported(rounds, "power"),
            "error": None if simulated else _nvml_error(burn, gpu, "power")}


def temperature(burn: BurnIn, gpu: int) -> dict[str, Any]:
    rounds = _gpu_rounds(burn, gpu)
    hottest = [g["temperature"]["max_c"] for g in rounds if g["temperature"].get("max_c") is not None]
    slowdown = next((g["temperature"]["slowdown_c"] for g in rounds if g["temperature"].get("slowdown_c")), None)
    simulated = burn.plan.simulated
    return {**_where(burn, gpu), "max_c": max(hottest) if hottest else None, "slowdown_c": slowdown,
            "samples": sum(g["temperature"]["samples"] for g in rounds), "simulated": simulated,
            "unsupported": _unsupported(rounds, "temperature"),
            "error": None if simulated else _nvml_error(burn, gpu, "temperature")}


def memory(burn: BurnIn, gpu: int) -> dict[str, Any]:
    """checks.gpu_health.memory_pattern's inputs: every pass of every round (numbered by round), the coverage
    of the round that covered least."""
    ran = [(r["round"], r["gpus"][f"GPU{gpu}"]["memory"]) for r in burn.rounds
           if (r["gpus"].get(f"GPU{gpu}") or {}).get("memory")]
    failed = [f"round {number}: {m.get('error') or 'no result'}" for number, m in ran
              if m.get("error") or "patterns" not in m]
    tested = [(number, m) for number, m in ran if not m.get("error") and "patterns" in m]
    if failed or not tested:
        error = "; ".join(failed) or (f"no memory test ran ({burn.status} after {len(burn.rounds)} round(s)): the "
                                      "memory test follows each round's load")
        return {**_where(burn, gpu), "simulated": burn.plan.simulated, "result": None, "error": error}
    least = min(tested, key=lambda t: t[1]["bytes_covered"] / t[1]["free_bytes"] if t[1].get("free_bytes") else 0)[1]
    patterns = [{**p, "pass": f"{p['pass']} of round {number}"} for number, m in tested for p in m.get("patterns") or []]
    result = {"free_bytes": least.get("free_bytes"), "total_bytes": least.get("total_bytes"),
              "target_bytes": least.get("target_bytes"), "bytes_covered": least.get("bytes_covered"),
              "passes": sum(m.get("passes") or 0 for _, m in tested), "patterns": patterns,
              "allocation_error": least.get("allocation_error"), "wall_s": sum(m.get("wall_s") or 0.0 for _, m in tested)}
    return {**_where(burn, gpu), "simulated": burn.plan.simulated, "result": result, "error": None}


def collective_rounds(burn: BurnIn, placement: str, op: str) -> list[dict]:
    """Each round's entry for (placement, op), in order (rounds that never reached it left out)."""
    key = f"{placement} {op}"
    return [r["collectives"][key] for r in burn.rounds if key in r.get("collectives", {})]


def not_in_cycle(burn: BurnIn, placement: str, op: str) -> str | None:
    """Why (placement, op) has no busbw to judge, or None."""
    if placement in burn.plan.left_out:
        return f"left out of the burn-in's collective cycle: {burn.plan.left_out[placement]}"
    if not any(s.placement.id == placement and s.op == op for s in burn.plan.steps):
        return f"{op} is not in the burn-in's cycle on {placement}"
    if not collective_rounds(burn, placement, op):
        return (f"the cycle did not reach {op} on {placement} in {len(burn.rounds)} round(s) ({burn.status}): a longer "
                "--duration reaches every step")
    return None


def busbw(burn: BurnIn, placement: str, op: str) -> tuple[float, int]:
    """(the median busbw of every step of every round in bytes/s, its size in bytes)."""
    entries = collective_rounds(burn, placement, op)
    return statistics.median(v for e in entries for v in e["busbw"]), entries[0]["bytes"]


def spread(burn: BurnIn, placement: str, op: str) -> dict[str, Any]:
    return {"placement": placement, "op": op, "round_busbw": [e["median"] for e in collective_rounds(burn, placement, op)],
            "simulated": burn.plan.simulated}


def hard_fault(burn: BurnIn) -> dict[str, Any]:
    """checks.burn_in.burn_in_no_hard_fault's inputs."""
    gemm = sum(((g.get("math") or {}).get("checked") or 0) for r in burn.rounds for g in r["gpus"].values())
    steps = sum(len(e["busbw"]) for r in burn.rounds for e in r.get("collectives", {}).values())
    passes = sum(((g.get("memory") or {}).get("passes") or 0) for r in burn.rounds for g in r["gpus"].values())
    return {"status": burn.status, "rounds": len(burn.rounds), "seconds": burn.seconds, "duration_s": burn.plan.duration_s,
            "fault": burn.fault.as_record() if burn.fault else None,
            "checked": {"GEMM products": gemm, "collective steps": steps, "memory-test passes": passes}}
