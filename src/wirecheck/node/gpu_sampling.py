"""NVML beside a load: each GPU's clocks, power, temperature and clock-event reasons, sampled
in a thread of the pytest process while the workers compute, and NVML's own throttle-time
counters (`nvmlDeviceGetViolationStatus`) read before and after.

Both, because each misses what the other sees: a sample is a moment (a 50 ms thermal dip
between two samples is invisible), the violation counters are cumulative nanoseconds of
throttling with no gap but no cause per moment. The pytest process only reads NVML here; the
load itself runs in the workers (wirecheck.gpu). A reading the GPU or driver cannot give is
left out of the samples and its reason kept per GPU: the checks skip on it, never pass.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from wirecheck.node import nvml
from wirecheck.node.nvml import NvmlUnavailable, Unsupported
from wirecheck.core.threads import start_helper

# nvmlClocksEventReason* bits (nvml.h; nvidia-smi -q -d PERFORMANCE shows the same names).
CLOCK_EVENT_REASONS = {
    "gpu_idle": 0x1,
    "applications_clocks": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal": 0x20,
    "hw_thermal": 0x40,
    "hw_power_brake": 0x80,
    "display_clock": 0x100,
}
REASON_TEXT = {
    "gpu_idle": "idle",
    "applications_clocks": "applications clocks setting",
    "sw_power_cap": "SW power cap",
    "hw_slowdown": "HW slowdown",
    "sync_boost": "sync boost",
    "sw_thermal": "SW thermal slowdown",
    "hw_thermal": "HW thermal slowdown",
    "hw_power_brake": "HW power brake",
    "display_clock": "display clock setting",
}
# nvmlPerfPolicyType_t: what nvmlDeviceGetViolationStatus counts throttle time for.
VIOLATION_POLICIES = {"power": 0, "thermal": 1, "sync_boost": 2, "board_limit": 3, "low_utilization": 4,
                      "reliability": 5}
CLOCK_SM, CLOCK_MEM = 1, 2
TEMPERATURE_GPU = 0
THRESHOLD_SHUTDOWN, THRESHOLD_SLOWDOWN = 0, 1


def decode_reasons(mask: int) -> list[str]:
    """Names of the bits set in a clock-event-reasons mask; unknown bits as hex."""
    names = [name for name, bit in CLOCK_EVENT_REASONS.items() if mask & bit]
    rest = mask & ~sum(CLOCK_EVENT_REASONS.values())
    return names + ([f"0x{rest:x}"] if rest else [])


@dataclass(frozen=True)
class Sample:
    """One GPU at one moment (unix time `t`); None where NVML gave nothing."""

    t: float
    gpu: int
    sm_mhz: int | None
    mem_mhz: int | None
    power_w: float | None
    temperature_c: int | None
    reasons: int | None  # clock-event reasons mask
    utilization_pct: int | None


@dataclass(frozen=True)
class GpuLimits:
    """What a GPU's own NVML says its limits are (None where it cannot say)."""

    gpu: int
    power_limit_w: float | None  # enforced
    default_power_limit_w: float | None
    slowdown_c: int | None  # NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
    shutdown_c: int | None
    max_sm_mhz: int | None


@dataclass
class Sampling:
    """What a LoadSampler saw: the time series, the limits, throttle time per policy over the window."""

    gpus: tuple[int, ...]
    interval_s: float
    samples: list[Sample] = field(default_factory=list)
    limits: dict[int, GpuLimits] = field(default_factory=dict)
    violations_ns: dict[int, dict[str, int]] = field(default_factory=dict)  # gpu -> policy -> ns during the window
    unsupported: dict[int, dict[str, str]] = field(default_factory=dict)  # gpu -> reading -> why NVML gave none
    error: str | None = None  # NVML failed outright (the samples so far are kept)
    started: float | None = None
    ended: float | None = None

    def of(self, gpu: int) -> list[Sample]:
        return [s for s in self.samples if s.gpu == gpu]

    def as_record(self, gpu: int) -> dict[str, Any]:
        """One GPU's part, as plain data for the record (short keys: a minute is ~120 samples)."""
        limits = self.limits.get(gpu)
        return {
            "interval_s": self.interval_s,
            "started": self.started,
            "ended": self.ended,
            "samples": [{k: v for k, v in asdict(s).items() if k != "gpu"} for s in self.of(gpu)],
            "limits": asdict(limits) if limits else None,
            "violations_ns": self.violations_ns.get(gpu, {}),
            "unsupported": self.unsupported.get(gpu, {}),
            "error": self.error,
        }


class LoadSampler:
    """Samples `gpus` every `interval_s` in a thread from start() until stop().

    start() returns once the first sample and the violation counters' baseline are taken (or
    NVML failed), so the load started after it is covered from its first moment.
    """

    def __init__(self, gpus: tuple[int, ...] | list[int], interval_s: float):
        self.result = Sampling(tuple(gpus), interval_s)
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wirecheck-nvml-sampler", daemon=True)

    def start(self, timeout_s: float = 30.0) -> "LoadSampler":
        start_helper(self._thread)
        self._ready.wait(timeout_s)
        return self

    def stop(self, timeout_s: float = 30.0) -> Sampling:
        self._stop.set()
        self._thread.join(timeout_s)
        return self.result

    def __enter__(self) -> "LoadSampler":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the thread ------------------------------------------------------------------------

    def _note(self, gpu: int, reading: str, value: Any) -> Any:
        """The value, or None with its reason kept once per GPU and reading."""
        if isinstance(value, Unsupported):
            self.result.unsupported.setdefault(gpu, {}).setdefault(reading, value.reason)
            return None
        return value

    def _run(self) -> None:
        out = self.result
        try:
            with nvml._session() as nv:
                handles = {g: nvml._handle(nv, g) for g in out.gpus}
                out.limits = {g: self._limits(nv, g, h) for g, h in handles.items()}
                before = {g: self._violations(nv, g, h) for g, h in handles.items()}
                out.started = time.time()
                self._sample_all(nv, handles)
                self._ready.set()
                while not self._stop.wait(out.interval_s):
                    self._sample_all(nv, handles)
                self._sample_all(nv, handles)
                out.ended = time.time()
                after = {g: self._violations(nv, g, h) for g, h in handles.items()}
                out.violations_ns = {g: {p: after[g][p] - before[g][p] for p in before[g] if p in after[g]}
                                     for g in handles}
        except NvmlUnavailable as exc:
            out.error = str(exc)
        finally:
            if out.ended is None:
                out.ended = time.time()
            self._ready.set()

    def _limits(self, nv: Any, g: int, h: Any) -> GpuLimits:
        def watts(name: str) -> float | None:
            value = self._note(g, name, nvml._try(nv, g, name, h))
            return value / 1000.0 if value is not None else None

        return GpuLimits(
            gpu=g,
            power_limit_w=watts("nvmlDeviceGetEnforcedPowerLimit"),
            default_power_limit_w=watts("nvmlDeviceGetPowerManagementDefaultLimit"),
            slowdown_c=self._note(g, "slowdown temperature", nvml._try(
                nv, g, "nvmlDeviceGetTemperatureThreshold", h, THRESHOLD_SLOWDOWN)),
            shutdown_c=self._note(g, "shutdown temperature", nvml._try(
                nv, g, "nvmlDeviceGetTemperatureThreshold", h, THRESHOLD_SHUTDOWN)),
            max_sm_mhz=self._note(g, "max SM clock", nvml._try(nv, g, "nvmlDeviceGetMaxClockInfo", h, CLOCK_SM)),
        )

    def _violations(self, nv: Any, g: int, h: Any) -> dict[str, int]:
        out = {}
        for name, policy in VIOLATION_POLICIES.items():
            value = self._note(g, f"violation time ({name})",
                               nvml._try(nv, g, "nvmlDeviceGetViolationStatus", h, policy))
            if value is not None:
                out[name] = int(value.violationTime)
        return out

    def _sample_all(self, nv: Any, handles: dict[int, Any]) -> None:
        for g, h in handles.items():
            try:
                self.result.samples.append(self._sample(nv, g, h))
            except NvmlUnavailable as exc:  # one failed reading: kept, and sampling goes on
                if self.result.error is None:
                    self.result.error = str(exc)

    def _sample(self, nv: Any, g: int, h: Any) -> Sample:
        t = time.time()
        power = self._note(g, "power", nvml._try(nv, g, "nvmlDeviceGetPowerUsage", h))
        temperature = nvml._try(nv, g, "nvmlDeviceGetTemperature", h, TEMPERATURE_GPU)
        reasons = nvml._try(nv, g, "nvmlDeviceGetCurrentClocksEventReasons", h)
        if isinstance(reasons, Unsupported):  # bindings before the 'EventReasons' rename
            reasons = nvml._try(nv, g, "nvmlDeviceGetCurrentClocksThrottleReasons", h)
        utilization = self._note(g, "utilization", nvml._try(nv, g, "nvmlDeviceGetUtilizationRates", h))
        return Sample(
            t=t,
            gpu=g,
            sm_mhz=self._note(g, "SM clock", nvml._try(nv, g, "nvmlDeviceGetClockInfo", h, CLOCK_SM)),
            mem_mhz=self._note(g, "memory clock", nvml._try(nv, g, "nvmlDeviceGetClockInfo", h, CLOCK_MEM)),
            power_w=power / 1000.0 if power is not None else None,
            temperature_c=self._note(g, "temperature", temperature),
            reasons=self._note(g, "clock-event reasons", reasons),
            utilization_pct=getattr(utilization, "gpu", None),
        )
