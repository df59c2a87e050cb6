"""A burn-in round's figures, from what its workers returned and NVML sampled (parent side, no torch).

Per GPU the same inputs the acceptance checks take (wirecheck.gpu.inputs: the median window's TFLOP/s,
clock-event reasons, peak power, hottest sample) and what an operator watches (mean SM clock, mean
power); per (placement, collective) the busbw of each step of the round, slowest rank counting
(wirecheck.measure.collectives.combine). The record keeps every window and NVML sample of the round
as compact rows (`series`), so a report draws the whole burn-in and nothing measured is lost.
"""

from __future__ import annotations

import statistics
from typing import Any

from wirecheck.gpu import inputs
from wirecheck.gpu.load import SUSTAINED, GpuRun, Phase
from wirecheck.measure import collectives

# Compact rows of the record: their columns, named once (the report reads them by these names).
WINDOW_COLUMNS = ("t0", "seconds", "flops_per_s", "mismatched_elements")
SAMPLE_COLUMNS = ("t", "sm_mhz", "power_w", "temperature_c", "reasons")


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def gpu_round(run: GpuRun, phase: Phase, gpu: int) -> dict[str, Any]:
    """One GPU's figures in one round (JSON data)."""
    sustained = inputs.sustained(run, phase, gpu)
    clocks, power, temperature = (inputs.clocks(run, phase, gpu), inputs.power(run, phase, gpu),
                                  inputs.temperature(run, phase, gpu))
    result = phase.of(gpu) or {}
    span = inputs.load_span(result)
    samples = phase.sampling.of(gpu) if phase.sampling is not None else []
    under_load = [s for s in samples if span is None or span[0] <= s.t <= span[1]]
    keep = ("samples", "unsupported", "error")
    return {
        "gpu": gpu,
        "bus_id": run.bus_ids.get(gpu),
        "gpu_model": run.names.get(gpu),
        "flops_per_s": sustained["flops_per_s"],
        "windows": sustained["windows"],
        "error": sustained["error"],
        "math": result.get("math"),
        "stopped": result.get("stopped"),
        "clocks": {"reason_counts": clocks["reason_counts"], "violations_ns": clocks["violations_ns"],
                   **{k: clocks[k] for k in keep}},
        "power": {k: power[k] for k in ("peak_w", "limit_w", "default_limit_w", *keep)},
        "temperature": {k: temperature[k] for k in ("max_c", "slowdown_c", *keep)},
        "sm_mhz": _mean([s.sm_mhz for s in under_load]),
        "power_w": _mean([s.power_w for s in under_load]),
    }


def series(phase: Phase, gpu: int) -> dict[str, Any]:
    """Every window and NVML sample of one GPU's round as rows of WINDOW_COLUMNS and SAMPLE_COLUMNS."""
    result = phase.of(gpu) or {}
    windows = [[w.get(c) for c in WINDOW_COLUMNS] for w in result.get("windows") or []]
    samples = phase.sampling.of(gpu) if phase.sampling is not None else []
    return {"windows": windows, "samples": [[getattr(s, c) for c in SAMPLE_COLUMNS] for s in samples]}


def combine_steps(gpus: tuple[int, ...], steps: list[dict], values: list[dict]) -> list[tuple[dict, Any]]:
    """[(the step as the plan gave it, its SizeResult over the placement's ranks)] in the order taken.
    `values`: each rank's round result; a step a rank took part in is in its "steps"."""
    by_step: dict[int, dict[int, dict]] = {}
    for rank, value in enumerate(values):
        for taken in value.get("steps") or []:
            by_step.setdefault(taken["step"], {})[rank] = taken
    out = []
    for number in sorted(by_step):
        step = steps[number % len(steps)]
        ranks = step["ranks"]
        taken = by_step[number]
        if sorted(taken) != sorted(ranks):
            continue  # a step the round stopped in the middle of: not every rank returned it
        records = [{"rank": i, "op": step["op"], "world_size": len(ranks), "results": [taken[r]]}
                   for i, r in enumerate(ranks)]
        (result,) = collectives.combine(step["op"], len(ranks), records)
        out.append(({**step, "step": number, "t": max(taken[r]["t"] for r in ranks)}, result))
    return out


def collective_round(combined: list[tuple[dict, Any]]) -> dict[str, dict]:
    """Per "placement op": the busbw of every step of the round (bytes/s), their median and lowest, wrong elements."""
    out: dict[str, dict] = {}
    for step, result in combined:
        key = f"{step['placement']} {step['op']}"
        entry = out.setdefault(key, {"placement": step["placement"], "op": step["op"], "bytes": result.bytes,
                                     "n_gpus": len(step["ranks"]), "busbw": [], "wrong": 0})
        entry["busbw"].append(result.busbw)
        entry["wrong"] += result.wrong or 0
    for entry in out.values():
        entry["median"] = statistics.median(entry["busbw"])
        entry["min"] = min(entry["busbw"])
    return out


def load_phase(gpus: tuple[int, ...], values: list[dict] | None, sampling, error: str | None = None) -> Phase:
    """The round as the GPU-health inputs read a sustained load: each GPU's windows and NVML's samples
    (`error`: the round's workers failed, every GPU's figures with it)."""
    phase = Phase(SUSTAINED, gpus, sampling=sampling, error=error)
    if values is not None:
        phase.ranks = dict(zip(gpus, values))
    return phase
