"""The GPU health checks of a record, per GPU: what the report's GPU section, Prometheus' per-GPU
gauges and the fleet's GPU comparison read. Plain data, no drawing.

From the measurements (wirecheck.gpu's worker results as the plugin records them: `gpu_figures`,
`gpu_sustained` with its NVML samples, `gpu_memory`, `gpu_event`) and from the verdicts of the
health checks (the floor, the median of the node's other GPUs and the peer rule each figure was
judged against) and of the history and drift rules (the bound its own past held it to): every bound
that judged a figure, so the page shows the one that failed it. Figures are in base units (bytes/s, FLOP/s); GPU_FIGURES says how to show them.
A record judged again without its measurements still gives the judged figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wirecheck.checks import SECTION_GPU, SPECS
from wirecheck.core.verdict import FAIL, PASS, SKIP, WARN
from wirecheck.records.figures import display
from wirecheck.thresholds import declared
from wirecheck.vocab import records as kinds

# The per-GPU figures: key -> (label, display unit, display units per base unit), as the checks
# declare their floors (`@check(..., limits=(Floor(key, unit=, label=),))`).
GPU_FIGURES = {figure: (floor.label or figure, floor.unit, floor.scale) for figure, floor in declared.floors().items()}
# The checks that judge them: those whose declaration puts them in the GPU section (`@check(...,
# section=SECTION_GPU, figure=...)`); the figure a verdict is about comes from its inputs.
GPU_HEALTH_CHECKS = tuple(name for name, spec in SPECS.items() if spec.section == SECTION_GPU)
MEASUREMENT_KINDS = (kinds.GPU_FIGURES, kinds.GPU_SUSTAINED, kinds.GPU_MEMORY, kinds.GPU_EVENT)


@dataclass
class GpuJudged:
    """How a figure was judged (base units): its floor, the node's median of its peers, the peer rule."""

    outcome: str
    floor: float | None
    peers_median: float | None
    max_below_median: float | None

    @property
    def peer_limit(self) -> float | None:
        """The lowest value the peer rule lets pass (its MAD part aside)."""
        if self.peers_median is None or self.max_below_median is None:
            return None
        return self.peers_median * (1 - self.max_below_median)


@dataclass
class OwnPast:
    """How a figure was judged against the GPU's own past (base units): the history rule's bound and the
    drift rule's, with their outcomes."""

    outcome: str = SKIP  # the history rule's
    bound: float | None = None
    drift: str = SKIP  # the drift rule's
    drift_bound: float | None = None

    @property
    def worst(self) -> str:
        order = {FAIL: 3, WARN: 2, PASS: 1, SKIP: 0}
        return max((self.outcome, self.drift), key=lambda o: order.get(o, 0))


@dataclass
class GpuPoint:
    """One GPU under load: its figures (base units: bytes/s, FLOP/s), how each was judged, the
    sustained load's windows and NVML samples beside them, the memory test, XIDs during the run."""

    gpu: int
    bus_id: str | None = None
    model: str | None = None
    figures: dict[str, float] = field(default_factory=dict)
    judged: dict[str, GpuJudged] = field(default_factory=dict)
    own_past: dict[str, OwnPast] = field(default_factory=dict)  # figure -> its history and drift verdicts
    unmeasured: dict[str, str] = field(default_factory=dict)  # figure -> why (unsupported, error)
    foreign: list = field(default_factory=list)  # [[pid, name, bytes]] computing on the GPU before the load
    windows: list[dict] = field(default_factory=list)  # sustained: {t0, t1, seconds, flops_per_s, ...}
    samples: list[dict] = field(default_factory=list)  # NVML: {t, sm_mhz, power_w, temperature_c, reasons, ...}
    nvml_limits: dict | None = None  # {power_limit_w, slowdown_c, ...}
    memory: dict | None = None  # the memory test's result
    events: list[dict] = field(default_factory=list)  # XID / ECC events recorded during the run
    peak_power_w: float | None = None  # from the power verdict when no samples were recorded
    max_temperature_c: float | None = None

    @property
    def peak_power(self) -> float | None:
        values = [s["power_w"] for s in self.samples if s.get("power_w") is not None]
        return max(values) if values else self.peak_power_w

    @property
    def max_temperature(self) -> float | None:
        values = [s["temperature_c"] for s in self.samples if s.get("temperature_c") is not None]
        return max(values) if values else self.max_temperature_c

    def outcome(self, figure: str) -> str:
        """The worst verdict on `figure`: its own check's, its history's, its drift's."""
        order = {FAIL: 3, WARN: 2, PASS: 1, SKIP: 0}
        found = [j.outcome for j in (self.judged.get(figure),) if j] + [p.worst for p in (self.own_past.get(figure),) if p]
        return max(found, key=lambda o: order.get(o, 0)) if found else ""

    @property
    def memory_mismatches(self) -> int | None:
        if not self.memory or "patterns" not in self.memory:
            return None
        return sum(p.get("mismatched_words") or 0 for p in self.memory["patterns"])

    @property
    def xid_events(self) -> int:
        return sum(e.get("kind") == "xid" for e in self.events)


def _point(gpus: dict[int, GpuPoint], gpu: Any, bus_id: str | None = None, model: str | None = None) -> GpuPoint | None:
    if not isinstance(gpu, int) or isinstance(gpu, bool):
        return None
    point = gpus.setdefault(gpu, GpuPoint(gpu))
    point.bus_id = point.bus_id or bus_id
    point.model = point.model or model
    return point


def _figures_phase(point: GpuPoint, result: dict, error: str | None) -> None:
    hbm = result.get("hbm") or {}
    bf16, fp8 = result.get("gemm_bf16") or {}, result.get("gemm_fp8") or {}
    parts = {"hbm_copy": (hbm.get("copy"), hbm.get("error")), "hbm_read": (hbm.get("read"), hbm.get("error")),
             "gemm_bf16": (bf16.get("throughput"), bf16.get("error")),
             "gemm_fp8": (fp8.get("throughput"), fp8.get("error") or fp8.get("unsupported"))}
    for key, (part, why) in parts.items():
        if isinstance(part, dict) and isinstance(part.get("per_s"), (int, float)):
            point.figures[key] = float(part["per_s"])
        elif why or error:
            point.unmeasured[key] = str(why or error).splitlines()[0]


def add_measurement(gpus: dict[int, GpuPoint], m: dict) -> None:
    kind, d = m.get("kind"), m.get("details") or {}
    point = _point(gpus, d.get("gpu"), d.get("bus_id"), d.get("gpu_model"))
    if point is None or kind not in MEASUREMENT_KINDS:
        return
    if kind == kinds.GPU_EVENT:
        point.events.append(d)
        return
    point.foreign = point.foreign or list(d.get("foreign_processes") or [])
    result = d.get("result") or {}
    if kind == kinds.GPU_FIGURES:
        _figures_phase(point, result, d.get("error"))
    elif kind == kinds.GPU_SUSTAINED:
        if isinstance(m.get("value"), (int, float)):
            point.figures["sustained_bf16"] = float(m["value"]) * 1e12  # recorded in TFLOP/s
        elif d.get("error") or result.get("error"):
            point.unmeasured["sustained_bf16"] = str(d.get("error") or result.get("error")).splitlines()[0]
        point.windows = [w for w in result.get("windows") or [] if isinstance(w, dict)]
        nvml = d.get("nvml") or {}
        point.samples = [x for x in nvml.get("samples") or [] if isinstance(x, dict)]
        point.nvml_limits = nvml.get("limits")
    else:
        point.memory = result if result else {"error": d.get("error")}


def _own_past(gpus: dict[int, GpuPoint], v: dict) -> None:
    """A history or drift verdict on a GPU figure: the bound it was held to, in base units."""
    inputs = v.get("inputs") or {}
    where, figure = str(inputs.get("where") or ""), inputs.get("figure")
    if figure not in GPU_FIGURES or not where.startswith("GPU") or not where[3:].isdigit():
        return
    point = _point(gpus, int(where[3:]))
    _, scale = display(str(inputs.get("kind")), inputs.get("unit"))
    bound = (v.get("limit") or {}).get("min")
    bound = bound / scale if isinstance(bound, (int, float)) and scale else None
    past = point.own_past.setdefault(figure, OwnPast())
    if v.get("check") == "history":
        past.outcome, past.bound = v.get("outcome") or SKIP, bound
    else:
        past.drift, past.drift_bound = v.get("outcome") or SKIP, bound


def add_verdict(gpus: dict[int, GpuPoint], v: dict) -> None:
    check, inputs = v.get("check"), v.get("inputs") or {}
    if check in ("history", "drift"):
        _own_past(gpus, v)
        return
    spec = SPECS.get(check)  # read per verdict: a site's check registered after this module counts too
    if spec is None or spec.section != SECTION_GPU:
        return
    point = _point(gpus, inputs.get("gpu"), inputs.get("bus_id"), inputs.get("gpu_model"))
    if point is None:
        return
    if check == "sustained_power" and inputs.get("peak_w") is not None:
        point.peak_power_w = inputs["peak_w"]
    elif check == "sustained_temperature" and inputs.get("max_c") is not None:
        point.max_temperature_c = inputs["max_c"]
    figure = spec.figure(inputs) if spec.figure else None
    if figure not in GPU_FIGURES:
        return
    per_base = GPU_FIGURES[figure][2]

    def base(x):
        return x / per_base if isinstance(x, (int, float)) else None

    limit = v.get("limit") or {}
    point.judged[figure] = GpuJudged(v.get("outcome") or SKIP, base(limit.get("min")), base(limit.get("peers_median")),
                                     limit.get("max_below_median"))
    if figure not in point.figures and isinstance(v.get("measured"), (int, float)):
        point.figures[figure] = base(v["measured"])  # a record judged again without its measurements


def gpu_points(measurements: list[dict], verdicts: list[dict]) -> dict[int, GpuPoint]:
    """GPU index -> its GpuPoint, in index order; empty when the run had no GPU health checks."""
    gpus: dict[int, GpuPoint] = {}
    for m in measurements:
        if m.get("kind") in MEASUREMENT_KINDS:
            add_measurement(gpus, m)
    for v in verdicts:
        add_verdict(gpus, v)
    return dict(sorted(gpus.items()))
