"""The `training` section of thresholds.yaml: how the training runs are made and what they must reach.

Run settings per mode (hardware, simulated): the model shape, micro-batch, warm-up, timed steps
until the median settles, precision. Limits: first-step loss agreement across strategies, model
state against the memory model, peak memory and tokens/s floors per placement class and strategy
(gloo sanity floors in simulation), the slowdown when the wire is forced onto the host path, the
capacity check, and each GPU model's dense peak (the MFU denominator). Kept apart from
wirecheck.thresholds.file, which holds the settings and limits per mode.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from types import MappingProxyType
from typing import Any, Mapping

from wirecheck.node.placement import CLASSES, TRAINING_CLASSES
from wirecheck.core.precision import NAMES as PRECISIONS
from wirecheck.core.precision import why_unsupported
from wirecheck.thresholds.tables import ANY, CountTable, Limit, _ratio_section
from wirecheck.thresholds.tables import _bounds_entry, _by_count, _check_name, _count_table, as_rule, lookup
from wirecheck.thresholds.yaml_reader import SOURCE_HINT, _At
from wirecheck.training import strategies

# The classes training runs on (the placement table's `training`): each needs a throughput-floor section.
THROUGHPUT_FLOOR_CLASSES = TRAINING_CLASSES


@dataclass(frozen=True)
class ModelShape:
    n_layer: int
    n_head: int
    d_model: int
    vocab_size: int
    seq_len: int


@dataclass(frozen=True)
class MedianBound:
    """When the timed steps' median has settled: its distribution-free confidence interval at
    `confidence` lies within `max_halfwidth` of it (both fractions)."""

    confidence: float
    max_halfwidth: float
    source: str
    yaml_path: str


@dataclass(frozen=True)
class TrainingSettings:
    model: ModelShape
    micro_batch: int
    warmup_steps: int
    min_steps: int  # timed steps: at least this many...
    max_steps: int  # ...then until the median settles (median_ci), at most this many
    median_ci: MedianBound
    timeout_s: float
    precision: str  # a name in wirecheck.core.precision.PRECISIONS
    gc_freq: int = 0  # steps between manual GC collections (training/manual_gc.py); 0: Python's automatic GC

    def workload(self) -> dict:
        """What the training limits were measured on, as a run's record states it (the runner's
        shape, micro_batch and precision): a record of another workload is not judged by them."""
        return {"shape": asdict(self.model), "micro_batch": self.micro_batch, "precision": self.precision}

    def run_kwargs(self, strategy: str) -> dict:
        """The arguments of training.runner.run_strategy these settings fix, for `strategy` (seed 0:
        every strategy starts from the same weights and data)."""
        return {
            "strategy": strategy,
            "shape": asdict(self.model),
            "micro_batch": self.micro_batch,
            "warmup_steps": self.warmup_steps,
            "steps": self.min_steps,
            "max_steps": self.max_steps,
            "ci_confidence": self.median_ci.confidence,
            "ci_max_halfwidth": self.median_ci.max_halfwidth,
            "seed": 0,
            "precision": self.precision,
            "gc_freq": self.gc_freq,
        }


@dataclass(frozen=True)
class PeakFlops:
    """A GPU model's dense tensor-core peak for one precision, FLOP/s (the MFU denominator)."""

    gpu_model: str
    precision: str
    flops: float
    source: str
    yaml_path: str


@dataclass(frozen=True)
class Tolerance:
    max_rel_diff: float  # fraction
    source: str
    yaml_path: str


@dataclass(frozen=True)
class ModelStateLimits:
    max_rel_diff_from_model: float  # fraction
    zero3_vs_fsdp_max_rel_diff: float  # fraction
    source: str
    yaml_path: str


@dataclass(frozen=True)
class SlowWire:
    min_slowdown_by_strategy: Mapping[str, float]  # ratio: NVLink tokens/s / forced_pcie tokens/s
    max_spread_ratio: float  # ratio: spread_slow <= spread_fast x this
    source: str
    yaml_path: str

    def min_slowdown(self, strategy: str) -> float:
        _check_name(strategy, strategies.NAMES, "strategy")
        return self.min_slowdown_by_strategy[strategy]


@dataclass(frozen=True)
class Capacity:
    model_state_target: float  # fraction of GPU memory for the DDP model state
    steps: int
    timeout_s: float
    source: str
    yaml_path: str


@dataclass(frozen=True, eq=False)
class TrainingLimits:
    simulated: bool
    agreement: Tolerance  # first-step losses across strategies (training.agreement)
    model_state: ModelStateLimits
    slow_wire: SlowWire
    capacity: Capacity
    _peak_memory: Mapping[tuple[str, str], Limit]
    _throughput: Mapping[tuple[str, str], CountTable]
    _simulated_throughput: Mapping[str, CountTable]
    _peak_flops: Mapping[tuple[str, str], PeakFlops]
    _single_gpu: Mapping[str, Limit]  # GPU model -> one GPU's tokens/s floor
    _simulated_single_gpu: Limit

    def peak_flops(self, gpu_model: str, precision: str) -> PeakFlops | None:
        """The dense peak of `gpu_model` (NVML's/torch's name) in `precision`; None when the
        table has no entry (MFU then stays unreported) and always in simulation (CPU ranks)."""
        _check_name(precision, PRECISIONS, "precision")
        if self.simulated:
            return None
        return self._peak_flops.get((gpu_model, precision))

    def single_gpu_floor(self, gpu_model: str | None) -> Limit | None:
        """Min tokens/s of one GPU alone training the strategies' model, for `gpu_model` (NVML's
        name); the CPU sanity floor in simulation; None when the table has no entry for the model."""
        if self.simulated:
            return self._simulated_single_gpu
        return self._single_gpu.get(gpu_model or "")

    def peak_memory(self, placement_class: str, strategy: str) -> Limit | None:
        """Max peak allocated bytes per GPU; None in simulation (no CUDA memory to read)."""
        _check_name(placement_class, CLASSES, "placement class")
        _check_name(strategy, strategies.NAMES, "strategy")
        if self.simulated:
            return None
        return self._peak_memory.get((placement_class, strategy)) or self._peak_memory.get((ANY, strategy))

    def throughput_floor(self, placement_class: str, strategy: str, n_gpus: int, hardware=None) -> Limit | None:
        """Min tokens/s over all ranks: exact GPU count, then `any`, of the entries measured on this
        node's `hardware` (wirecheck.node.hardware.Hardware; None: unknown, every entry applies)."""
        return self.throughput_rule(placement_class, strategy, n_gpus, hardware)[0]

    def throughput_rule(self, placement_class: str, strategy: str, n_gpus: int, hardware=None) -> tuple[Limit | None, str]:
        """(the floor, "") or (None, why the entries there do not apply to this node)."""
        _check_name(placement_class, CLASSES, "placement class")
        _check_name(strategy, strategies.NAMES, "strategy")
        if self.simulated:
            return lookup(self._simulated_throughput.get(strategy), n_gpus)
        return lookup(self._throughput.get((placement_class, strategy)), n_gpus, hardware)


def _model_shape(at: _At) -> ModelShape:
    f = at.fields(
        "model shape",
        required={"n_layer": "20", "n_head": "16", "d_model": "2048", "vocab_size": "32000", "seq_len": "1024"},
    )
    shape = ModelShape(**{key: f[key].count(minimum=1) for key in f})
    if shape.d_model % shape.n_head:
        raise f["n_head"].error(
            f"d_model {shape.d_model} does not split into {shape.n_head} heads", "pick n_head dividing d_model"
        )
    return shape


# The fewest samples whose median has a 95 % order-statistics interval at all (see
# wirecheck.training.timing.median_ci_ranks): with fewer, the rule could never be met.
def _min_samples(confidence: float) -> int:
    n = 1
    while 2 * 0.5**n > 1 - confidence:  # coverage of [min, max] is 1 - 2 * 2**-n
        n += 1
    return n


def _median_bound(at: _At) -> MedianBound:
    f = at.fields(
        "median confidence bound",
        required={"confidence": '"95 %"', "max_halfwidth": '"2 %"', "source": SOURCE_HINT},
    )
    confidence = f["confidence"].quantity("percent", positive=True)
    if confidence >= 1:
        raise f["confidence"].error(f'"{f["confidence"].value}" must be below 100 %', 'write e.g. "95 %"')
    return MedianBound(confidence, f["max_halfwidth"].quantity("percent"), f["source"].source(), at.cite)


def _training_settings(at: _At) -> TrainingSettings:
    f = at.fields(
        "training run settings",
        required={
            "model": "{n_layer: 20, n_head: 16, d_model: 2048, vocab_size: 32000, seq_len: 1024}",
            "micro_batch": "8",
            "warmup_steps": "3",
            "steps": "{min: 8, max: 30}",
            "median_ci": '{confidence: "95 %", max_halfwidth: "2 %", source: ...}',
            "timeout": '"600 s"',
            "precision": "bf16",
        },
        optional={"gc_freq": "50"},
    )
    steps = f["steps"].fields("timed steps", required={"min": "8", "max": "30"})
    min_steps, max_steps = steps["min"].count(minimum=1), steps["max"].count(minimum=1)
    if max_steps < min_steps:
        raise f["steps"].error(f"max {max_steps} is below min {min_steps}", "make max at least min")
    bound = _median_bound(f["median_ci"])
    needed = _min_samples(bound.confidence)
    if max_steps < needed:
        raise steps["max"].error(
            f"{max_steps} steps can never give a {bound.confidence:.0%} interval for the median",
            f"allow at least {needed} (or lower median_ci.confidence)",
        )
    return TrainingSettings(
        model=_model_shape(f["model"]),
        micro_batch=f["micro_batch"].count(minimum=1),
        warmup_steps=f["warmup_steps"].count(),
        min_steps=min_steps,
        max_steps=max_steps,
        median_ci=bound,
        timeout_s=f["timeout"].quantity("time", positive=True),
        precision=_precision(f["precision"]),
        gc_freq=f["gc_freq"].count() if "gc_freq" in f else 0,
    )


def _peak_flops(at: _At) -> dict[tuple[str, str], PeakFlops]:
    """gpu model name -> {precision: "989 TFLOP/s", source: ...}"""
    table = {}
    for gpu_model, entry_at in at.mapping("GPU model entries", allow_empty=False).items():
        entry_at = at.child(gpu_model)
        if not isinstance(gpu_model, str) or not gpu_model.strip():
            raise entry_at.error("a GPU model must be its name as NVML reports it", 'e.g. "NVIDIA H200"')
        f = entry_at.fields(
            "dense peak per precision",
            required={"source": SOURCE_HINT},
            optional={p: '"989 TFLOP/s"' for p in PRECISIONS},
        )
        precisions = [p for p in PRECISIONS if p in f]
        if not precisions:
            raise entry_at.error(f"{gpu_model!r} gives no peak", f"add one of {', '.join(PRECISIONS)}: \"989 TFLOP/s\"")
        source = f["source"].source()
        for p in precisions:
            table[(gpu_model, p)] = PeakFlops(gpu_model, p, f[p].quantity("compute", positive=True), source, f[p].cite)
    return MappingProxyType(table)


def _precision(at: _At) -> str:
    reason = why_unsupported(at.value)
    if reason:
        # Refused here: the workers would only fail on it hours into the run.
        raise at.error(f"{at.value} is not supported by the training runners ({reason})",
                       f"write precision: {' or '.join(PRECISIONS)}")
    return at.choice(PRECISIONS)


def _agreement(at: _At) -> dict[bool, Tolerance]:
    f = at.fields(
        "agreement per mode",
        required={
            "hardware": '{first_loss_max_rel_diff: "2 %", source: ...}',
            "simulated": '{first_loss_max_rel_diff: "0.1 %", source: ...}',
        },
    )
    out = {}
    for simulated, key in ((False, "hardware"), (True, "simulated")):
        value, source = _ratio_section(f[key], "first_loss_max_rel_diff", "percent", '"2 %"')
        out[simulated] = Tolerance(value, source, f[key].child("first_loss_max_rel_diff").cite)
    return out


def _peak_memory(at: _At) -> dict[tuple[str, str], Limit]:
    classes = at.keyed(CLASSES + (ANY,), "placement class", "peak_memory is keyed by placement class or `any`")
    table = {}
    for klass, class_at in classes.items():
        for strategy, entry_at in class_at.keyed(strategies.NAMES, "strategy", "strategies are").items():
            table[(klass, strategy)] = _bounds_entry(entry_at, "size", ("max",), required=("max",))
    return MappingProxyType(table)


def _throughput_entry(at: _At) -> Limit:
    return _bounds_entry(at, "throughput", ("min",), required=("min",))


def _throughput_floors(at: _At) -> dict[tuple[str, str], CountTable]:
    classes = at.keyed(CLASSES, "placement class", "throughput floors are keyed by placement class")
    for klass in THROUGHPUT_FLOOR_CLASSES:
        if klass not in classes:
            raise at.error(f"missing placement class {klass!r}", f"add a {klass}: section (or {klass}: {{}} to leave it unjudged)")
    table = {}
    for klass, class_at in classes.items():
        for strategy, strategy_at in class_at.keyed(strategies.NAMES, "strategy", "strategies are").items():
            table[(klass, strategy)] = _count_table(strategy_at, "throughput floor", _throughput_entry)
    return MappingProxyType(table)


def _single_gpu_floors(at: _At) -> dict[str, Limit]:
    """gpu model name -> {min: "38300 tokens/s", source: ...}"""
    table = {}
    for gpu_model in at.mapping("GPU model entries"):  # {}: no model judged, each run says so
        entry_at = at.child(gpu_model)
        if not isinstance(gpu_model, str) or not gpu_model.strip():
            raise entry_at.error("a GPU model must be its name as NVML reports it", 'e.g. "NVIDIA H200"')
        # Keyed by the model: that is the hardware it was measured on.
        table[gpu_model] = replace(_throughput_entry(entry_at), hardware={"gpu_model": gpu_model})
    return MappingProxyType(table)


def parse_training(at: _At) -> dict[str, Any]:
    """The `training` section, validated: {"settings": ..., "limits": ...}, each keyed by `simulated`."""
    f = at.fields(
        "training sections",
        required={
            "hardware": "{model: {...}, micro_batch: 8, ...}",
            "simulated": "{model: {...}, micro_batch: 2, ...}",
            "agreement": "{hardware: {...}, simulated: {...}}",
            "model_state": '{max_rel_diff_from_model: "10 %", zero3_vs_fsdp_max_rel_diff: "10 %", source: ...}',
            "peak_memory": '{any: {ddp: {max: "60 GiB", source: ...}}}',
            "throughput_floors": '{nvswitch: {ddp: {any: {min: "20000 tokens/s", source: ...}}}, ...}',
            "simulated_throughput_floors": '{ddp: {any: {min: "1 tokens/s", source: ...}}}',
            "slow_wire": '{min_slowdown: "1.05 x", max_spread_ratio: "1.5 x", source: ...}',
            "capacity": '{model_state_target: "110 %", steps: 2, timeout: "600 s", source: ...}',
            "peak_flops": '{"NVIDIA H200": {bf16: "989 TFLOP/s", source: ...}}',
            "single_gpu_throughput_floors": '{"NVIDIA H200": {min: "38300 tokens/s", source: ...}}',
            "simulated_single_gpu_throughput_floor": '{min: "1 tokens/s", source: ...}',
        },
    )
    ms = f["model_state"].fields(
        "model-state tolerances",
        required={"max_rel_diff_from_model": '"10 %"', "zero3_vs_fsdp_max_rel_diff": '"10 %"', "source": SOURCE_HINT},
    )
    model_state = ModelStateLimits(
        ms["max_rel_diff_from_model"].quantity("percent"),
        ms["zero3_vs_fsdp_max_rel_diff"].quantity("percent"),
        ms["source"].source(),
        f["model_state"].cite,
    )
    sw = f["slow_wire"].fields(
        "slow-wire checks",
        required={"min_slowdown": '{ddp: "1.7 x", zero1: "1.1 x", ...}', "max_spread_ratio": '"1.0 x"', "source": SOURCE_HINT},
    )
    per_strategy = sw["min_slowdown"].fields(
        "minimum slowdown per strategy", required={s: '"1.1 x"' for s in strategies.NAMES}
    )
    slow_wire = SlowWire(
        MappingProxyType({s: per_strategy[s].quantity("ratio") for s in strategies.NAMES}),
        sw["max_spread_ratio"].quantity("ratio"),
        sw["source"].source(),
        f["slow_wire"].cite,
    )
    cap = f["capacity"].fields(
        "capacity check settings",
        required={"model_state_target": '"110 %"', "steps": "2", "timeout": '"600 s"', "source": SOURCE_HINT},
    )
    capacity = Capacity(
        cap["model_state_target"].quantity("percent", positive=True),
        cap["steps"].count(minimum=1),
        cap["timeout"].quantity("time", positive=True),
        cap["source"].source(),
        f["capacity"].cite,
    )
    agreement = _agreement(f["agreement"])
    peak = _peak_memory(f["peak_memory"])
    throughput = _throughput_floors(f["throughput_floors"])
    sim_strategies = f["simulated_throughput_floors"].keyed(strategies.NAMES, "strategy", "strategies are")
    sim_throughput = as_rule(
        {s: _count_table(s_at, "throughput floor", _throughput_entry) for s, s_at in sim_strategies.items()}, "simulated"
    )
    peak_flops = _peak_flops(f["peak_flops"])
    single_gpu = _single_gpu_floors(f["single_gpu_throughput_floors"])
    simulated_single_gpu = replace(_throughput_entry(f["simulated_single_gpu_throughput_floor"]), rule="simulated")
    limits = {
        simulated: TrainingLimits(
            simulated=simulated,
            agreement=agreement[simulated],
            model_state=model_state,
            slow_wire=slow_wire,
            capacity=capacity,
            _peak_memory=peak,
            _throughput=throughput,
            _simulated_throughput=sim_throughput,
            _peak_flops=peak_flops,
            _single_gpu=single_gpu,
            _simulated_single_gpu=simulated_single_gpu,
        )
        for simulated in (False, True)
    }
    settings = {False: _training_settings(f["hardware"]), True: _training_settings(f["simulated"])}
    return dict(settings=MappingProxyType(settings), limits=MappingProxyType(limits))
