"""Each GPU check's inputs, as plain data, from the GPU load's phases (parent side, no torch).

The checks (wirecheck.checks.gpu_health) take only numbers, strings, lists and dicts so that a
recorded run can be judged again; this module picks them out of the workers' results and the
NVML samples, per GPU: its figure, its peers' figures (the other GPUs of the same model), the
samples that fell inside its load, and whatever went wrong on the way. A new GPU check's builder may
live in its own check module instead, beside its declaration, from the helpers here (`where`,
`phase_error`, `load_span`, the NVML sampling of a phase).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Callable

from typing import TYPE_CHECKING

from wirecheck.node.gpu_sampling import Sampling
from wirecheck.records.figures import noise_of
from wirecheck.vocab.work import FIGURES, SUSTAINED

if TYPE_CHECKING:  # the checks import this module's builders: no worker groups behind them
    from wirecheck.gpu.load import GpuRun, Phase

SIMULATED_NVML = "simulation: no NVML beside the CPU ranks"


@dataclass(frozen=True)
class FromPhase:
    """A GPU check's inputs as its declaration names them (`@check(..., inputs=FromPhase(...))`): the
    GPU load's phase they come from and the builder `(run, phase, gpu, **test's arguments) -> inputs`
    that picks them out. The plugin builds every GPU check's inputs from this, by the check's name."""

    phase: str
    build: Callable[..., dict[str, Any]]


def where(run: GpuRun, gpu: int) -> dict[str, Any]:
    return {"gpu": gpu, "bus_id": run.bus_ids.get(gpu)}


def phase_error(phase: Phase, gpu: int, part: dict | None) -> str | None:
    if phase.error:
        return phase.error
    if phase.of(gpu) is None:
        return f"GPU{gpu} is missing from the {phase.name} measurement"
    if part is None:
        return f"GPU{gpu}: the {phase.name} measurement returned nothing for this figure"
    return part.get("error")


def _peers(run: GpuRun, phase: Phase, gpu: int, pick) -> dict[str, float]:
    """The same figure on the other GPUs of the same model (JSON keys: "GPU3")."""
    out = {}
    for other in run.gpus:
        if other == gpu or run.names.get(other) != run.names.get(gpu):
            continue
        try:
            value = pick(phase.of(other))
        except (KeyError, TypeError, AttributeError):  # that GPU has no result (the phase failed): no peer figure
            value = None
        if isinstance(value, (int, float)) and math.isfinite(value):
            out[f"GPU{other}"] = value
    return out


def _common(run: GpuRun, gpu: int) -> dict[str, Any]:
    return {**where(run, gpu), "gpu_model": run.names.get(gpu), "simulated": run.simulated,
            "foreign_processes": run.foreign_processes.get(gpu, []), "hardware": run.hardware.get(gpu)}


# -- figures ----------------------------------------------------------------------------------


def hbm(run: GpuRun, phase: Phase, gpu: int, kind: str) -> dict[str, Any]:
    """hbm_bandwidth's inputs; kind: copy (read+write counted) or read."""
    def pick(result):
        return result["hbm"][kind]["per_s"]

    part = (phase.of(gpu) or {}).get("hbm")
    error = phase_error(phase, gpu, part)
    value = None if error else pick(phase.of(gpu))
    return {**_common(run, gpu), "kind": kind, "bytes_per_s": value, "peers": _peers(run, phase, gpu, pick),
            "error": error, "noise": None if error else _call_noise(part.get(kind))}


def _call_noise(summary: dict | None) -> dict | None:
    """The figure's repeats within the run (wirecheck.gpu.stopwatch.summary: calls and their spread) and the
    standard error of their median, as the history rule and calibration read them."""
    summary = summary or {}
    return noise_of(summary.get("spread"), summary.get("calls"))


def gemm(run: GpuRun, phase: Phase, gpu: int, dtype: str) -> dict[str, Any]:
    key = f"gemm_{dtype}"

    def pick(result):
        return result[key]["throughput"]["per_s"]

    part = (phase.of(gpu) or {}).get(key)
    error = phase_error(phase, gpu, part)
    unsupported = None if error else part.get("unsupported")
    value = None if error or unsupported else pick(phase.of(gpu))
    return {**_common(run, gpu), "dtype": dtype, "flops_per_s": value, "peers": _peers(run, phase, gpu, pick),
            "unsupported": unsupported, "error": error,
            "noise": None if value is None else _call_noise(part.get("throughput"))}


def math_check(run: GpuRun, phases: dict[str, Phase], gpu: int) -> dict[str, Any]:
    """gemm_matches_reference's inputs: the comparisons of every phase that ran."""
    found, errors = {}, []
    for name, key in ((FIGURES, "gemm_bf16"), (SUSTAINED, None)):
        phase = phases.get(name)
        if phase is None:
            continue
        result = phase.of(gpu) or {}
        part = result.get(key) if key else result
        error = phase_error(phase, gpu, part if part else None)
        if error:
            errors.append(f"{name}: {error}")
        else:
            found[name] = part["math"]
    return {**where(run, gpu), "phases": found, "error": "; ".join(errors) or None}


# -- sustained load ---------------------------------------------------------------------------


def full_windows(result: dict) -> list[dict]:
    """The windows of the load proper: the first, short ones (sized up from a few products) left
    out, unless nothing else is there."""
    windows = [w for w in result.get("windows", []) if w.get("flops_per_s")]
    full = [w for w in windows if w["seconds"] >= 0.5 * result["window_s"]]
    return full or windows


def _sustained_figure(result: dict) -> float | None:
    windows = full_windows(result)
    return statistics.median(w["flops_per_s"] for w in windows) if windows else None


def _summary(result: dict) -> dict[str, Any]:
    windows = full_windows(result)
    values = [w["flops_per_s"] for w in windows]
    if not values:
        return {"windows": 0}
    return {"windows": len(values), "seconds": sum(w["seconds"] for w in windows), "first": values[0],
            "last": values[-1], "min": min(values), "max": max(values)}


def _window_noise(result: dict) -> dict | None:
    """The sustained figure's repeats: its full windows, their spread ((p90 - p10) / median, as the calls'
    spread; max - min under 10) and the standard error of their median."""
    values = sorted(w["flops_per_s"] for w in full_windows(result))
    if len(values) < 2:
        return None
    median = statistics.median(values)
    if len(values) >= 10:
        deciles = statistics.quantiles(values, n=10)
        spread = (deciles[-1] - deciles[0]) / median
    else:
        spread = (values[-1] - values[0]) / median
    return noise_of(spread, len(values))


def sustained(run: GpuRun, phase: Phase, gpu: int) -> dict[str, Any]:
    part = phase.of(gpu)
    error = phase_error(phase, gpu, part)
    value = None if error else _sustained_figure(part)
    return {**_common(run, gpu), "flops_per_s": value, "windows": None if error else _summary(part),
            "peers": _peers(run, phase, gpu, _sustained_figure), "error": error,
            "noise": None if error else _window_noise(part)}


def load_span(result: dict | None) -> tuple[float, float] | None:
    """(unix start, end) of a GPU's load: its first window's start to its last window's end."""
    windows = (result or {}).get("windows") or []
    return (windows[0]["t0"], windows[-1]["t1"]) if windows else None


def _samples(sampling: Sampling, gpu: int, span: tuple[float, float] | None):
    samples = sampling.of(gpu)
    if span is None:
        return samples
    return [s for s in samples if span[0] <= s.t <= span[1]]


def _nvml(run: GpuRun, phase: Phase, gpu: int) -> tuple[Sampling | None, str | None]:
    """The sampling and why the NVML checks cannot judge this GPU (None: they can)."""
    if run.simulated:
        return None, SIMULATED_NVML
    error = phase_error(phase, gpu, phase.of(gpu))
    if error:
        return None, error
    if phase.sampling is None:
        return None, "no NVML sampling was made"
    return phase.sampling, None


def _unreadable(sampling: Sampling, gpu: int, values: list, *readings: str) -> tuple[str | None, str | None]:
    """(why NVML cannot give these readings: a skip, why none was taken: a failure), or (None, None)."""
    unsupported = sampling.unsupported.get(gpu, {})
    for reading in readings:
        if reading in unsupported:
            return unsupported[reading], None
    if values:
        return None, None
    if sampling.error:
        return None, f"NVML failed while sampling: {sampling.error}"
    return None, "no NVML sample fell inside the load (it lasted less than one sampling interval)"


def clocks(run: GpuRun, phase: Phase, gpu: int) -> dict[str, Any]:
    """sustained_clocks' inputs: how often each reasons mask was seen under load, and NVML's throttle time."""
    sampling, problem = _nvml(run, phase, gpu)
    base = {**where(run, gpu), "simulated": run.simulated}
    if problem:
        return {**base, "reason_counts": {}, "samples": 0, "violations_ns": {}, "unsupported": None,
                "error": None if run.simulated else problem}
    within = [s for s in _samples(sampling, gpu, load_span(phase.of(gpu))) if s.reasons is not None]
    counts: dict[str, int] = {}
    for s in within:
        counts[f"0x{s.reasons:x}"] = counts.get(f"0x{s.reasons:x}", 0) + 1
    unsupported, error = _unreadable(sampling, gpu, within, "clock-event reasons")
    return {**base, "reason_counts": counts, "samples": len(within), "violations_ns": sampling.violations_ns.get(gpu, {}),
            "unsupported": unsupported, "error": error}


def power(run: GpuRun, phase: Phase, gpu: int) -> dict[str, Any]:
    sampling, problem = _nvml(run, phase, gpu)
    base = {**where(run, gpu), "simulated": run.simulated}
    if problem:
        return {**base, "peak_w": None, "limit_w": None, "default_limit_w": None, "samples": 0, "unsupported": None,
                "error": None if run.simulated else problem}
    within = [s.power_w for s in _samples(sampling, gpu, load_span(phase.of(gpu))) if s.power_w is not None]
    limits = sampling.limits.get(gpu)
    unsupported, error = _unreadable(sampling, gpu, within, "power", "nvmlDeviceGetEnforcedPowerLimit")
    return {**base, "peak_w": max(within) if within else None,
            "limit_w": limits.power_limit_w if limits else None,
            "default_limit_w": limits.default_power_limit_w if limits else None,
            "samples": len(within), "unsupported": unsupported, "error": error}


def temperature(run: GpuRun, phase: Phase, gpu: int) -> dict[str, Any]:
    sampling, problem = _nvml(run, phase, gpu)
    base = {**where(run, gpu), "simulated": run.simulated}
    if problem:
        return {**base, "max_c": None, "slowdown_c": None, "samples": 0, "unsupported": None,
                "error": None if run.simulated else problem}
    # every sample: a GPU is hottest just after the load ends
    values = [s.temperature_c for s in sampling.of(gpu) if s.temperature_c is not None]
    limits = sampling.limits.get(gpu)
    unsupported, error = _unreadable(sampling, gpu, values, "temperature", "slowdown temperature")
    return {**base, "max_c": max(values) if values else None, "slowdown_c": limits.slowdown_c if limits else None,
            "samples": len(values), "unsupported": unsupported, "error": error}


# -- memory test ------------------------------------------------------------------------------


def memory(run: GpuRun, phase: Phase, gpu: int) -> dict[str, Any]:
    part = phase.of(gpu)
    error = phase_error(phase, gpu, part)
    keep = ("free_bytes", "total_bytes", "target_bytes", "bytes_covered", "passes", "patterns", "allocation_error",
            "wall_s")
    return {**where(run, gpu), "simulated": run.simulated,
            "result": None if error else {k: part.get(k) for k in keep}, "error": error}
