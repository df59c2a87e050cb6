"""The `gpu_health` section of thresholds.yaml: each GPU on its own, every GPU at once.

Run settings (hardware / simulated): the HBM buffers, the GEMM size and iterations, the
sustained load's duration per level (`quick`, `acceptance`, `burn_in`: the run's --level
picks one), its windows and NVML sampling, the memory pattern test's coverage and passes.
Limits: floors per GPU model as NVML names it (HBM copy and read, GEMM bf16 and fp8, sustained
bf16), CPU sanity floors for simulation, the below-its-peers rule, which clock-event reasons
fail, the power share of the limit, the temperature margin below NVML's slowdown threshold,
the growth of memory-error counters allowed over a run, and XIDs allowed (none by default).
Kept apart from wirecheck.thresholds.file, which holds one field of this type.

Which figures have floors and which limit sections there are beside the run settings and the peer
rule is what the checks declare (`@check(..., limits=(Floor(...), Value(...), Section(...)))`,
wirecheck.thresholds.declared): a new check's limit is read here without an edit, and a key no check
declares is refused, naming the keys that are.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Mapping

from wirecheck.core.quantity import EXAMPLES
from wirecheck.node.gpu_sampling import CLOCK_EVENT_REASONS
from wirecheck.thresholds import declared
from wirecheck.thresholds.declared import Value
from wirecheck.thresholds.tables import ENTRY_EXTRAS, Limit, as_rule, entry_resolution, entry_rule
from wirecheck.thresholds.yaml_reader import SOURCE_HINT, _At, _suggest

LEVELS = ("quick", "acceptance", "burn_in")
LEVEL = "acceptance"  # the default level (--level picks the run's: wirecheck.core.levels.thresholds_key)
# The sections of gpu_health that are not a check's: the run settings, the floor tables, the peer rule.
FIXED = {
    "hardware": "{hbm: {...}, gemm: {...}, memory_pattern: {...}, sustained: {...}, timeout: ...}",
    "simulated": "{hbm: {...}, gemm: {...}, memory_pattern: {...}, sustained: {...}, timeout: ...}",
    "floors": '{"NVIDIA H200": {hbm_copy: {min: "3840 GB/s", source: ...}, ...}}',
    "simulated_floors": '{hbm_copy: {min: "0.01 GB/s", source: ...}, ...}',
    "peers": '{hardware: {max_below_median: "10 %", mad_k: "3 x", source: ...}, simulated: {...}}',
}


def figures() -> dict[str, str]:
    """figure -> its quantity kind in the file: the checks' declared floors (Floor)."""
    return {figure: floor.kind for figure, floor in declared.floors().items()}


@dataclass(frozen=True)
class GpuHealthSettings:
    """How the per-GPU load runs (one of hardware / simulated)."""

    hbm_size: int  # bytes per buffer (the copy holds two)
    hbm_warmup_iters: int
    hbm_iters: int
    gemm_n: int  # square matrices n x n
    gemm_warmup_iters: int
    gemm_iters: int
    gemm_compare_iters: int  # results compared with the reference after the timed ones
    seed: int
    memory_coverage: float  # fraction of the GPU's free memory the pattern test covers
    memory_chunk: int  # bytes per allocation
    memory_cap: int | None  # bytes at most (simulation: CPU memory is not the GPU's)
    _memory_passes: Mapping[str, int]  # level -> passes
    _sustained_duration: Mapping[str, float]  # level -> seconds
    window_s: float
    check_every: int  # results between two comparisons with the reference under load
    sample_interval_s: float
    timeout_s: float  # a call (figures, memory test); the sustained call: its duration + this
    yaml_path: str
    # The quick level's GEMM (warmup, timed) products, where the file gives them: a window that still fails a
    # GPU doing half its work, shorter than the settled one every other level times (docs/levels.md)
    gemm_quick: tuple[int, int] | None = None

    def sustained_duration_s(self, level: str = LEVEL) -> float:
        return self._sustained_duration[level]

    def memory_passes(self, level: str = LEVEL) -> int:
        return self._memory_passes[level]

    def gemm_products(self, level: str = LEVEL) -> tuple[int, int]:
        """(warmup, timed) GEMM products of the figures at `level`."""
        if level == "quick" and self.gemm_quick is not None:
            return self.gemm_quick
        return self.gemm_warmup_iters, self.gemm_iters

    def figures_kwargs(self, level: str = LEVEL) -> dict[str, Any]:
        """The figures worker's arguments (wirecheck.gpu.worker.figures)."""
        warmup, timed = self.gemm_products(level)
        return {"hbm": {"size": self.hbm_size, "warmup_iters": self.hbm_warmup_iters, "iters": self.hbm_iters},
                "gemm": {"n": self.gemm_n, "warmup_iters": warmup, "iters": timed,
                         "compare_iters": self.gemm_compare_iters},
                "seed": self.seed}

    def sustained_kwargs(self, level: str = LEVEL) -> dict[str, Any]:
        return {"n": self.gemm_n, "duration_s": self.sustained_duration_s(level), "window_s": self.window_s,
                "check_every": self.check_every, "seed": self.seed}

    def memory_kwargs(self, level: str = LEVEL) -> dict[str, Any]:
        return {"coverage": self.memory_coverage, "chunk": self.memory_chunk, "cap": self.memory_cap,
                "passes": self.memory_passes(level)}


@dataclass(frozen=True)
class PeerRule:
    """A GPU is named when it is below its node's other GPUs' median by more than
    `max_below_median` AND by more than `mad_k` scaled MADs (wirecheck.core.peer_stats)."""

    max_below_median: float
    mad_k: float
    source: str
    yaml_path: str


@dataclass(frozen=True)
class ClockRule:
    fail_on: tuple[str, ...]  # clock-event reason names (wirecheck.node.gpu_sampling.CLOCK_EVENT_REASONS)
    max_thermal_violation_s: float  # nvmlDeviceGetViolationStatus THERMAL time over the load
    source: str
    yaml_path: str


@dataclass(frozen=True)
class ShareRule:
    value: float
    source: str
    yaml_path: str


@dataclass(frozen=True)
class MemoryErrorGrowth:
    """Growth allowed over a run (events), per GPU."""

    volatile_sbe: int
    volatile_dbe: int
    remapped_rows: int
    source: str
    yaml_path: str


@dataclass(frozen=True)
class XidRule:
    allowed: tuple[int, ...]  # XIDs recorded but not failed
    wait_s: float  # nvmlEventSetWait's timeout: how late an event can be noticed
    source: str
    yaml_path: str


@dataclass(frozen=True)
class GpuHealthLimits:
    _settings: Mapping[bool, GpuHealthSettings]  # keyed by `simulated`
    _floors: Mapping[tuple[str, str], Limit]  # (GPU model, figure)
    _simulated_floors: Mapping[str, Limit]  # figure
    _peers: Mapping[bool, PeerRule]
    # The sections the checks declare, read by their declaration: `clocks` (ClockRule), `power`
    # (ShareRule: the share of the enforced limit), `temperature` (ShareRule: the margin in °C below
    # NVML's slowdown threshold), `memory_errors` (MemoryErrorGrowth), `xid` (XidRule), ...; an
    # attribute of this object each.
    _sections: Mapping[str, Any]
    floors_yaml_path: str
    # figure -> (efficiency of the GPU's own peak, source, YAML path): the derived floor of a model
    # without a table entry (wirecheck.node.hardware's peaks from NVML). Empty: no derived rule.
    _derived: Mapping[str, tuple[float, str, str]] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        sections = self.__dict__.get("_sections", {})
        if name in sections:
            return sections[name]
        raise AttributeError(f"gpu_health has no {name!r}: no check declares it (sections: {', '.join(sections)})")

    def settings(self, simulated: bool) -> GpuHealthSettings:
        return self._settings[bool(simulated)]

    def floor(self, figure: str, gpu_model: str | None, simulated: bool, hardware=None) -> Limit | None:
        """The floor of `figure` for this GPU model (its NVML name); the CPU floor in simulation;
        else derived from the GPU's own peak (`hardware`); None where neither (the check then
        judges by the peer rule only, and says why)."""
        return self.floor_rule(figure, gpu_model, simulated, hardware)[0]

    def floor_rule(self, figure: str, gpu_model: str | None, simulated: bool, hardware=None) -> tuple[Limit | None, str]:
        """(the floor, "") or (None, why there is none: no entry and which peak NVML could not give)."""
        floors = declared.floors()
        if figure not in floors:
            raise ValueError(f"unknown GPU figure {figure!r}; known: {', '.join(floors)}")
        if simulated:
            found = self._simulated_floors.get(figure)
            return found, "" if found else f"no simulated {figure} floor"
        found = self._floors.get((gpu_model or "", figure))
        if found is not None:
            return found, ""
        none = f"no {figure} floor for {gpu_model!r} in {self.floors_yaml_path}"
        if figure not in self._derived:
            return None, f"{none} and no gpu_health.derived_floors.{figure} to derive one"
        if hardware is None:
            return None, f"{none} and the GPU's hardware is unknown (no peak to derive one from)"
        wanted = floors[figure].peak
        peak, how = hardware.memory_peak() if wanted == "memory" else hardware.math_peak(wanted)
        if peak is None:
            return None, f"{none}; {how}"
        eff, why, cited = self._derived[figure]
        return Limit(min=peak * eff, max=None, kind=floors[figure].kind, rule="derived", yaml_path=cited,
                     source=f"derived: {eff * 100:g} % of the peak {how} (no entry for {gpu_model!r}; efficiency: {why})"), ""

    def peers(self, simulated: bool) -> PeerRule:
        return self._peers[bool(simulated)]

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(sorted({model for model, _ in self._floors}))


# ---------------------------------------------------------------------------------------------


def _levels(at: _At, kind: str | None, example: str) -> Mapping[str, Any]:
    f = at.fields("levels", required={level: example for level in LEVELS})
    out = {level: (f[level].quantity(kind, positive=True) if kind else f[level].count(minimum=1)) for level in LEVELS}
    if kind and not out["quick"] <= out["acceptance"] <= out["burn_in"]:
        raise at.error("the levels must grow: quick <= acceptance <= burn_in", "reorder the values")
    return MappingProxyType(out)


def _fraction(at: _At, example: str) -> float:
    value = at.quantity("percent", positive=True)
    if value > 1:
        raise at.error("is above 100 %", f"write at most 100 %, e.g. {example}")
    return value


def _settings(at: _At, simulated: bool) -> GpuHealthSettings:
    f = at.fields("per-GPU load settings", required={
        "hbm": '{size: "4 GiB", warmup_iters: 5, iters: 50}',
        "gemm": "{n: 8192, warmup_iters: 10, iters: 50, compare_iters: 20, seed: 20}",
        "memory_pattern": '{coverage: "90 %", chunk: "2 GiB", passes: {quick: 1, acceptance: 1, burn_in: 10}}',
        "sustained": '{duration: {quick: "5 s", acceptance: "60 s", burn_in: "600 s"}, window: "1 s", check_every: 8, '
                     'sample_interval: "0.5 s"}',
        "timeout": '"300 s"',
    })
    hbm = f["hbm"].fields("HBM bandwidth settings", required={"size": '"4 GiB"', "warmup_iters": "5", "iters": "50"})
    gemm = f["gemm"].fields("GEMM settings", required={"n": "8192", "warmup_iters": "10", "iters": "50",
                                                         "compare_iters": "20", "seed": "20"},
                            optional={"quick": "{warmup_iters: 200, iters: 200}  (the quick level's, shorter)"})
    quick = gemm["quick"].fields("the quick level's GEMM settings", required={"warmup_iters": "200", "iters": "200"}) \
        if "quick" in gemm else None
    mem = f["memory_pattern"].fields(
        "memory pattern test settings",
        required={"coverage": '"90 %"', "chunk": '"2 GiB"', "passes": "{quick: 1, acceptance: 1, burn_in: 10}"},
        optional={"cap": '"16 MiB"  (at most this many bytes: simulation tests CPU memory)'})
    if simulated and "cap" not in mem:
        raise f["memory_pattern"].error("simulation needs a cap", 'add cap: "16 MiB" (CPU memory is not the GPU\'s)')
    sus = f["sustained"].fields("sustained load settings", required={
        "duration": '{quick: "5 s", acceptance: "60 s", burn_in: "600 s"}', "window": '"1 s"', "check_every": "8",
        "sample_interval": '"0.5 s"'})
    n = gemm["n"].count(minimum=16)
    if n % 16:
        raise gemm["n"].error(f"{n} is not a multiple of 16", "fp8 GEMMs need sides that are multiples of 16, e.g. 8192")
    size = int(hbm["size"].quantity("size", positive=True))
    if size % 4:
        raise hbm["size"].error("is not a whole number of 4-byte words", 'write e.g. "4 GiB"')
    chunk = int(mem["chunk"].quantity("size", positive=True))
    if chunk % 8:
        raise mem["chunk"].error("is not a whole number of 8-byte words", 'write e.g. "2 GiB"')
    return GpuHealthSettings(
        hbm_size=size,
        hbm_warmup_iters=hbm["warmup_iters"].count(),
        hbm_iters=hbm["iters"].count(minimum=1),
        gemm_n=n,
        gemm_warmup_iters=gemm["warmup_iters"].count(),
        gemm_iters=gemm["iters"].count(minimum=1),
        gemm_compare_iters=gemm["compare_iters"].count(minimum=1),
        gemm_quick=(quick["warmup_iters"].count(), quick["iters"].count(minimum=1)) if quick else None,
        seed=gemm["seed"].count(),
        memory_coverage=_fraction(mem["coverage"], '"90 %"'),
        memory_chunk=chunk,
        memory_cap=int(mem["cap"].quantity("size", positive=True)) if "cap" in mem else None,
        _memory_passes=_levels(mem["passes"], None, "1"),
        _sustained_duration=_levels(sus["duration"], "time", '"60 s"'),
        window_s=sus["window"].quantity("time", positive=True),
        check_every=sus["check_every"].count(minimum=1),
        sample_interval_s=sus["sample_interval"].quantity("time", positive=True),
        timeout_s=f["timeout"].quantity("time", positive=True),
        yaml_path=at.cite,
    )


def _floor(at: _At, figure: str) -> Limit:
    kind = declared.floors()[figure].kind
    e = at.fields(f"a {figure} floor", required={"min": f'"{EXAMPLES[kind]}"', "source": SOURCE_HINT},
                  optional=ENTRY_EXTRAS)
    return Limit(min=e["min"].quantity(kind, positive=True), max=None, source=e["source"].source(), yaml_path=at.cite,
                 kind=kind, rule=entry_rule(e, at), resolution=entry_resolution(e))


def _declared_fix(kind: str) -> str:
    return f"{kind} are keyed by the figures the checks declare (@check(..., limits=(Floor(...),)))"


def _figures(at: _At) -> dict[str, Limit]:
    return {figure: _floor(entry, figure)
            for figure, entry in at.keyed(tuple(declared.floors()), "GPU figure", _declared_fix("floors")).items()}


def _model_floors(at: _At) -> Mapping[tuple[str, str], Limit]:
    table = {}
    for model in at.mapping("GPU model entries"):
        entry = at.child(model)
        if not isinstance(model, str) or not model.strip():
            raise entry.error("a GPU model must be its name as NVML reports it", 'e.g. "NVIDIA H200"')
        for figure, limit in _figures(entry).items():
            # Keyed by the model: that is the hardware it was measured on (or guessed for).
            table[(model, figure)] = replace(limit, hardware={"gpu_model": model})
    return MappingProxyType(table)


def _derived_floors(at: _At) -> Mapping[str, tuple[float, str, str]]:
    """figure -> {efficiency: "78 %", source: ...}: the floor is that share of the GPU's own peak."""
    out = {}
    peaked = tuple(f for f, floor in declared.floors().items() if floor.peak)
    for figure, entry in at.keyed(peaked, "GPU figure", _declared_fix("derived floors") + " with a peak").items():
        e = entry.fields(f"a derived {figure} floor", required={"efficiency": '"78 %"', "source": SOURCE_HINT})
        out[figure] = (_fraction(e["efficiency"], '"78 %"'), e["source"].source(), entry.cite)
    return MappingProxyType(out)


def _peer_rule(at: _At) -> PeerRule:
    f = at.fields("below-its-peers rule", required={"max_below_median": '"10 %"', "mad_k": '"3 x"', "source": SOURCE_HINT})
    below = f["max_below_median"].quantity("percent")
    if below >= 1:
        raise f["max_below_median"].error("is 100 % or more", "no GPU could ever be named; write less than 100 %")
    return PeerRule(below, f["mad_k"].quantity("ratio"), f["source"].source(), at.cite)


def parse_clocks(at: _At) -> ClockRule:
    f = at.fields("clock-event reasons that fail", required={
        "fail_on": "[hw_slowdown, sw_thermal, hw_thermal, hw_power_brake]", "max_thermal_violation": '"0 ms"',
        "source": SOURCE_HINT})
    names = f["fail_on"].value
    if not isinstance(names, list) or not names:
        raise f["fail_on"].error("expected a list of clock-event reason names",
                                 f"write e.g. [hw_slowdown, sw_thermal, hw_thermal, hw_power_brake]; known: "
                                 f"{', '.join(CLOCK_EVENT_REASONS)}")
    for i, name in enumerate(names):
        _At(f["fail_on"].file, f["fail_on"].path[:-1] + (f"fail_on[{i}]",), name, f["fail_on"].line).choice(
            tuple(CLOCK_EVENT_REASONS))
    return ClockRule(tuple(names), f["max_thermal_violation"].quantity("time"), f["source"].source(), at.cite)


def _value(at: _At, limit: Value) -> ShareRule:
    """A declared Value: `{FIELD: value, source: ...}`."""
    example = f'"{EXAMPLES.get(limit.kind, "1")}"'
    f = at.fields(f"{limit.field} and source", required={limit.field: example, "source": SOURCE_HINT})
    value = _fraction(f[limit.field], example) if limit.kind == "percent" else f[limit.field].quantity(limit.kind)
    return ShareRule(value, f["source"].source(), at.cite)


def parse_memory_errors(at: _At) -> MemoryErrorGrowth:
    f = at.fields("memory-error growth allowed over a run", required={
        "volatile_sbe": "0", "volatile_dbe": "0", "remapped_rows": "0", "source": SOURCE_HINT})
    return MemoryErrorGrowth(f["volatile_sbe"].count(), f["volatile_dbe"].count(), f["remapped_rows"].count(),
                             f["source"].source(), at.cite)


def parse_xid(at: _At) -> XidRule:
    f = at.fields("XID rule", required={"allowed": "[]", "wait": '"0.5 s"', "source": SOURCE_HINT})
    allowed = f["allowed"].value
    if not isinstance(allowed, list):
        raise f["allowed"].error("expected a list of XID numbers", "write allowed: [] (none) or e.g. [43]")
    xids = tuple(_At(f["allowed"].file, f["allowed"].path[:-1] + (f"allowed[{i}]",), x, f["allowed"].line).count(1)
                 for i, x in enumerate(allowed))
    return XidRule(xids, f["wait"].quantity("time", positive=True), f["source"].source(), at.cite)


def _example(limit) -> str:
    if isinstance(limit, Value):
        return f'{{{limit.field}: "{EXAMPLES.get(limit.kind, "1")}", source: ...}}'
    return limit.example


def parse_gpu_health(at: _At) -> GpuHealthLimits:
    sections = declared.sections()
    owners = {d.section: owner for owner, d in declared.declarations().values() if hasattr(d, "section")}
    optional = {"derived_floors": '{hbm_copy: {efficiency: "78 %", source: ...}, ...}  (of the GPU\'s own peak, '
                                  'for models without floors)'}
    known = (*FIXED, *optional, *sections)
    for key in at.mapping("gpu_health sections"):
        if key not in known:
            raise at.child(key).error(
                f"unknown key {str(key)!r} in gpu_health sections{_suggest(key, known)}",
                f"expected one of: {', '.join((*FIXED, *optional))} or a section a check declares: "
                + ", ".join(f"{name} ({owners[name]})" for name in sections))
    f = at.fields("gpu_health sections", required={**FIXED, **{name: _example(d) for name, d in sections.items()}},
                  optional=optional)
    peers = f["peers"].fields("peer rules", required={"hardware": "{...}", "simulated": "{...}"})
    return GpuHealthLimits(
        _settings=MappingProxyType({False: _settings(f["hardware"], simulated=False),
                                    True: _settings(f["simulated"], simulated=True)}),
        _floors=_model_floors(f["floors"]),
        _simulated_floors=as_rule(_figures(f["simulated_floors"]), "simulated"),
        _peers=MappingProxyType({False: _peer_rule(peers["hardware"]), True: _peer_rule(peers["simulated"])}),
        _sections=MappingProxyType({name: _value(f[name], d) if isinstance(d, Value) else d.parse(f[name])
                                    for name, d in sections.items()}),
        floors_yaml_path=f["floors"].cite,
        _derived=_derived_floors(f["derived_floors"]) if "derived_floors" in f else MappingProxyType({}),
    )
