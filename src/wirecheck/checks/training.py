"""Strategy checks: steps complete, losses agree, model state against the memory model, the
staircase, peak memory, throughput, one GPU alone training the same model, the slow wire, and the
capacity case.

Inputs are what the workers reported (per-rank losses, bytes, tokens/s), never a wrapper object.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Mapping

from wirecheck.checks import check
from wirecheck.core.precision import NAMES as PRECISIONS
from wirecheck.node.hardware import Hardware
from wirecheck.thresholds.declared import Rule
from wirecheck.thresholds.fields import Call, Count, Qty, Source, per_mode, spec
from wirecheck.thresholds.limits import ANY, COUNT, Axis, Entry, Table, check_name
from wirecheck.thresholds.yaml_reader import SOURCE_HINT, _At
from wirecheck.training.memory_model import predict
from wirecheck.core.quantity import format_bytes
from wirecheck.training.timing import CEILING
from wirecheck.core.verdict import Verdict, at_least, at_most, expect, no_problems, skip, within
from wirecheck.vocab import strategies
from wirecheck.vocab.placements import CLASSES, TRAINING_CLASSES


# --- the limits the strategy checks read ------------------------------------------------------------------

STRATEGY = Axis("strategy", lambda: strategies.NAMES, "strategy", "strategies are")
MODEL = Axis("model", None, "GPU model")


@dataclass(frozen=True)
class Tolerance:
    WHAT = "first_loss_max_rel_diff and source"
    max_rel_diff: float = spec(Qty('"2 %"', "percent"), key="first_loss_max_rel_diff")  # a fraction
    source: str = spec(Source())
    yaml_path: str

    @classmethod
    def check(cls, v: dict, f: dict, at: _At) -> dict:
        return {**v, "yaml_path": f["first_loss_max_rel_diff"].cite}


@dataclass(frozen=True)
class ModelStateLimits:
    WHAT = "model-state tolerances"
    max_rel_diff_from_model: float = spec(Qty('"10 %"', "percent"))
    zero3_vs_fsdp_max_rel_diff: float = spec(Qty('"10 %"', "percent"))
    source: str = spec(Source())
    yaml_path: str


def _per_strategy(at: _At) -> Mapping[str, float]:
    f = at.fields("minimum slowdown per strategy", required={s: '"1.1 x"' for s in strategies.NAMES})
    return MappingProxyType({s: f[s].quantity("ratio") for s in strategies.NAMES})


@dataclass(frozen=True)
class SlowWire:
    WHAT = "slow-wire checks"
    # ratio: NVLink tokens/s over forced_pcie tokens/s, per strategy (every strategy needs one: the loader says so)
    min_slowdown_by_strategy: Mapping[str, float] = spec(Call('{ddp: "1.7 x", zero1: "1.1 x", ...}', _per_strategy),
                                                         key="min_slowdown")
    max_spread_ratio: float = spec(Qty('"1.0 x"', "ratio"))  # spread_slow <= spread_fast x this
    source: str = spec(Source())
    yaml_path: str

    def min_slowdown(self, strategy: str) -> float:
        check_name(strategy, strategies.NAMES, "strategy")
        return self.min_slowdown_by_strategy[strategy]


@dataclass(frozen=True)
class Capacity:
    WHAT = "capacity check settings"
    model_state_target: float = spec(Qty('"110 %"', "percent", positive=True))  # of GPU memory, the DDP model state
    steps: int = spec(Count(minimum=1), "2")
    timeout_s: float = spec(Qty('"600 s"', "time", positive=True), key="timeout")
    source: str = spec(Source())
    yaml_path: str


@dataclass(frozen=True)
class PeakFlops:
    """A GPU model's dense tensor-core peak for one precision, FLOP/s (the MFU denominator)."""

    gpu_model: str
    precision: str
    flops: float
    source: str
    yaml_path: str


def _peak_flops(at: _At) -> Mapping[tuple[str, str], PeakFlops]:
    """gpu model name -> {precision: "989 TFLOP/s", source: ...}"""
    table = {}
    at.mapping("GPU model entries", allow_empty=False)
    for gpu_model, entry_at in MODEL.read(at, "").items():
        f = entry_at.fields("dense peak per precision", required={"source": SOURCE_HINT},
                            optional={p: '"989 TFLOP/s"' for p in PRECISIONS})
        precisions = [p for p in PRECISIONS if p in f]
        if not precisions:
            raise entry_at.error(f"{gpu_model!r} gives no peak", f"add one of {', '.join(PRECISIONS)}: \"989 TFLOP/s\"")
        for p in precisions:
            table[(gpu_model, p)] = PeakFlops(gpu_model, p, f[p].quantity("compute", positive=True), f["source"].source(),
                                              f[p].cite)
    return MappingProxyType(table)


THROUGHPUT_ENTRY = Entry("throughput", ("min",), ("min",))
SIMULATED_THROUGHPUT = Table("training.simulated_throughput_floors", (STRATEGY, COUNT), THROUGHPUT_ENTRY,
                             "throughput floor", rule="simulated", example='{ddp: {any: {min: "1 tokens/s", source: ...}}}',
                             cover=("strategy", 'add {name}: {{any: {{min: "1 tokens/s", source: ...}}}} (or "*")'))
THROUGHPUT = Table("training.throughput_floors",
                   (Axis("klass", lambda: CLASSES, "placement class", "throughput floors are keyed by placement class"),
                    STRATEGY, COUNT), THROUGHPUT_ENTRY, "throughput floor", simulated=SIMULATED_THROUGHPUT,
                   present=lambda: TRAINING_CLASSES, example='{nvswitch: {ddp: {any: {min: "20000 tokens/s", source: ...}}}, ...}',
                   cover=("strategy", 'add {name}: {{any: {{min: "...", source: ...}}}} under each placement class'))
PEAK_MEMORY = Table("training.peak_memory",
                    (Axis("klass", lambda: CLASSES, "placement class", "peak_memory is keyed by placement class or `any`",
                          extra=(ANY,)), STRATEGY), Entry("size", ("max",), ("max",)), "peak-memory limit",
                    example='{any: {ddp: {max: "60 GiB", source: ...}}}',
                    cover=("strategy", 'add any: {{{name}: {{max: "...", source: ...}}}}'))
SIMULATED_SINGLE_GPU = Table("training.simulated_single_gpu_throughput_floor", (), THROUGHPUT_ENTRY, "throughput floor",
                             rule="simulated", example='{min: "1 tokens/s", source: ...}')
SINGLE_GPU = Table("training.single_gpu_throughput_floors", (MODEL,), THROUGHPUT_ENTRY, "throughput floor",
                   simulated=SIMULATED_SINGLE_GPU, match_hardware=False,
                   example='{"NVIDIA H200": {min: "38300 tokens/s", source: ...}}')
AGREEMENT = Rule("training.agreement", per_mode(Tolerance, "agreement per mode", '{first_loss_max_rel_diff: "2 %", source: ...}',
                                                '{first_loss_max_rel_diff: "0.1 %", source: ...}'),
                 "{hardware: {...}, simulated: {...}}")
MODEL_STATE = Rule("training.model_state", ModelStateLimits,
                   '{max_rel_diff_from_model: "10 %", zero3_vs_fsdp_max_rel_diff: "10 %", source: ...}')
SLOW_WIRE = Rule("training.slow_wire", SlowWire, '{min_slowdown: "1.05 x", max_spread_ratio: "1.5 x", source: ...}')
CAPACITY = Rule("training.capacity", Capacity, '{model_state_target: "110 %", steps: 2, timeout: "600 s", source: ...}')
PEAK_FLOPS = Rule("training.peak_flops", _peak_flops, '{"NVIDIA H200": {bf16: "989 TFLOP/s", source: ...}}')


def _tokens(rate: float) -> str:
    return f"{rate:,.0f} tokens/s"


@check("steps_complete")
def steps_complete(thresholds, *, placement: str, strategy: str, losses_by_rank: dict) -> Verdict:
    """Every step ran on every rank and every loss is finite. `losses_by_rank`: {rank: [loss, ...]}."""
    bad = {r: losses for r, losses in losses_by_rank.items() if not losses or not all(math.isfinite(x) for x in losses)}
    return no_problems(f"{strategy} losses finite", placement, [f"rank {r}: {v}" for r, v in bad.items()],
                       measured=next(iter(losses_by_rank.values()), None), intro=f"{strategy} on {placement}: non-finite losses")


@check("losses_agree", limits=(AGREEMENT,))
def losses_agree(thresholds, *, placement: str, strategy: str, reference: str, step: int, loss: float,
                 reference_loss: float, simulated: bool) -> Verdict:
    """Same seed, same data: loss `step` (1-based) matches the reference strategy's."""
    tol = thresholds.training_limits(simulated).agreement
    rel = abs(loss - reference_loss) / abs(reference_loss)
    what = f"{strategy} loss at step {step} vs {reference}"
    return at_most(what, placement, rel, tol.max_rel_diff, "relative difference", tol.source, tol.yaml_path,
                   fmt="number",
                   hint=f" ({strategy} {loss:.6f} vs {reference} {reference_loss:.6f}): a wrong gradient or update path",
                   rule="simulated" if simulated else "measured")


@check("model_state", limits=(MODEL_STATE,))
def model_state(thresholds, *, placement: str, strategy: str, n_params: int, n_gpus: int, precision: str,
                measured_bytes: int, per_rank: list, simulated: bool) -> Verdict:
    """Parameters + gradients + optimizer state held per GPU (local shards only) within
    tolerance of the memory model for this implementation and precision."""
    expected = predict(strategy, n_params, n_gpus, accounting="implementation", precision=precision).total
    tol = thresholds.training_limits(simulated).model_state
    rel = abs(measured_bytes - expected) / expected
    what = f"{strategy} model state per GPU"
    v = at_most(what, placement, rel * 100, tol.max_rel_diff_from_model * 100, "% off the model", tol.source,
                tol.yaml_path, fmt="number",
                hint=f": {format_bytes(measured_bytes)} measured vs {format_bytes(expected)} predicted; per rank {per_rank}",
                rule="simulated" if simulated else "measured")
    return _with(v, measured_bytes=measured_bytes, predicted_bytes=expected)


def _median_hint(median: dict | None) -> str:
    """A failed floor, told apart: a steady shortfall, or step times that moved during the run."""
    if not median or median.get("halfwidth") is None:
        return ""
    known = f"+-{median['halfwidth']:.1%} at 95 % after {median.get('steps')} timed steps"
    if median.get("stop") == CEILING:
        return (f"; the median step time had not settled ({known}, the training steps ceiling): the step "
                "time moved during the run, see the record's step_times_s")
    return f"; the median step time was known to {known}: a steady shortfall, not noise"


def _other_workload(thresholds, simulated: bool, workload: dict | None) -> str | None:
    """Why limits measured on the thresholds' workload do not apply to a run of another one (a
    record taken before the model or micro-batch changed, judged again), or None when they do.
    `workload`: the run's {"shape", "micro_batch", "precision"}; None (older records) is taken as
    the thresholds' own."""
    if workload is None:
        return None
    ours = thresholds.training_settings(simulated).workload()
    diffs = [f"{key} {workload.get(key)!r} (thresholds: {value!r})" for key, value in ours.items() if workload.get(key) != value]
    if not diffs:
        return None
    section = "training.simulated" if simulated else "training.hardware"
    return (f"measured on another workload than {section} of {thresholds.path} sets: {'; '.join(diffs)}. "
            "Its limits do not apply: judge the record with the thresholds it ran under, or measure again")


def _with(verdict: Verdict, **details) -> Verdict:
    return replace(verdict, details={**verdict.details, **details})


STAIRCASE = ("ddp", "zero1", "zero2", "zero3")


@check("staircase", limits=(MODEL_STATE,))
def staircase(thresholds, *, placement: str, n_gpus: int, n_params: int, precision: str, state_bytes: dict,
              simulated: bool) -> Verdict:
    """Model state per GPU: DDP >= ZeRO-1 >= ZeRO-2 >= ZeRO-3 ~ FSDP."""
    tol = thresholds.training_limits(simulated).model_state
    s = state_bytes
    broken = [f"{a} {format_bytes(s[a])} < {b} {format_bytes(s[b])}" for a, b in zip(STAIRCASE, STAIRCASE[1:]) if s[a] < s[b]]
    # ZeRO-3 ~ FSDP: the same sharding in two implementations, judged against what each
    # implementation stores (in fp32 DeepSpeed keeps an extra fp32 master copy; in bf16 both
    # hold 16/N bytes per parameter), so only a real difference in sharding shows.
    expected = (predict("zero3", n_params, n_gpus, precision=precision).total
                / predict("fsdp", n_params, n_gpus, precision=precision).total)
    gap = abs(s["zero3"] / s["fsdp"] / expected - 1)
    if gap > tol.zero3_vs_fsdp_max_rel_diff:
        broken.append(f"zero3 {format_bytes(s['zero3'])} vs fsdp {format_bytes(s['fsdp'])}: ratio {s['zero3'] / s['fsdp']:.2f}, "
                      f"expected {expected:.2f} for {precision} (allowed {tol.zero3_vs_fsdp_max_rel_diff:.0%} off)")
    if n_gpus > 1 and not s["ddp"] > s["zero3"]:
        broken.append(f"sharding saved nothing: ddp {format_bytes(s['ddp'])} vs zero3 {format_bytes(s['zero3'])}")
    return no_problems("staircase of model state", placement, broken, measured=s, unit="B",
                       intro=f"staircase broken on {placement}", source=tol.source if broken else None,
                       yaml_path=tol.yaml_path if broken else None)


@check("peak_memory", limits=(PEAK_MEMORY,))
def peak_memory(thresholds, *, placement: str, placement_class: str, strategy: str, peak_bytes: int | None,
                simulated: bool, workload: dict | None = None) -> Verdict:
    """Peak allocated GPU memory per rank within the limit for this strategy."""
    what = f"{strategy} peak allocated memory per GPU"
    if simulated or peak_bytes is None:
        return skip(what, placement, "simulation: CPU ranks have no device memory counters")
    other = _other_workload(thresholds, simulated, workload)
    if other:
        return skip(what, placement, other)
    limit = thresholds.training_limits(simulated).peak_memory(placement_class, strategy)
    if limit is None:
        return skip(what, placement, f"no peak-memory limit for {placement_class}/{strategy} in {thresholds.path}")
    return within(what, placement, peak_bytes, limit, "GiB", fmt="memory")


@check("throughput", limits=(THROUGHPUT, SIMULATED_THROUGHPUT, PEAK_FLOPS))
def throughput(thresholds, *, placement: str, placement_class: str, strategy: str, n_gpus: int,
               tokens_per_s: float, simulated: bool, workload: dict | None = None,
               median: dict | None = None, hardware: dict | None = None) -> Verdict:
    """Training throughput (global tokens/s, slowest rank) above the floor for the class. `median`
    (training.strategy_run.median_of): how well the run knew its median; a failure says whether it was steady.
    `hardware` (wirecheck.node.hardware.Hardware.as_dict): an entry measured on other hardware does not apply."""
    what = f"{strategy} throughput"
    other = _other_workload(thresholds, simulated, workload)
    if other:
        return skip(what, placement, other)
    limit, why = thresholds.training_limits(simulated).throughput_rule(placement_class, strategy, n_gpus,
                                                                        Hardware.from_dict(hardware))
    if limit is None:
        return skip(what, placement, f"no throughput floor for {placement_class}/{strategy}/{n_gpus} GPUs in {thresholds.path}"
                                     + (f" ({why})" if why else ""))
    return within(what, placement, tokens_per_s, limit, "tokens/s", hint=_median_hint(median))


@check("single_gpu_training", limits=(SINGLE_GPU, SIMULATED_SINGLE_GPU))
def single_gpu_training(thresholds, *, placement: str, gpu_model: str | None, tokens_per_s: float, losses: list,
                        simulated: bool, workload: dict | None = None, median: dict | None = None,
                        mfu: float | None = None) -> Verdict:
    """One GPU alone trains the strategies' model: every loss finite, and tokens/s at least the GPU
    model's floor (training.single_gpu_throughput_floors). `mfu` (of the GPU's dense peak) is shown."""
    what = "one GPU alone: training throughput"
    bad = [f"step {i + 1}: {x}" for i, x in enumerate(losses) if not math.isfinite(x)]
    if not losses or bad:
        return no_problems(what, placement, bad or ["no step ran"], measured=losses,
                           intro=f"one GPU alone on {placement}: non-finite losses (the GPU computed NaN or Inf from "
                                 "finite inputs: run the GPU health checks, -m health, on it)")
    shown = f"MFU {mfu:.1%}" if mfu is not None else ""
    other = _other_workload(thresholds, simulated, workload)
    if other:
        return skip(what, placement, other)
    limit = thresholds.training_limits(simulated).single_gpu_floor(gpu_model)
    if limit is None:
        return skip(what, placement, f"no training.single_gpu_throughput_floors entry for {gpu_model!r} in "
                                     f"{thresholds.path}; measured {_tokens(tokens_per_s)}"
                                     + (f"; {shown}" if shown else "") + ", every loss finite",
                    measured=tokens_per_s, unit="tokens/s")
    advice = (". With no other GPU to wait for, the GPU itself or its host is slow: see its GEMM and HBM figures "
              "(-m health) and `nvidia-smi -q -d PERFORMANCE,POWER`")
    return within(what, placement, tokens_per_s, limit, "tokens/s", hint=_median_hint(median) + advice,
                  note=shown, details={"gpu_model": gpu_model, "mfu": mfu})


@check("slow_wire", limits=(SLOW_WIRE,))
def slow_wire(thresholds, *, placement: str, nvlink_placement: str, strategy: str, nvlink_tokens_per_s: float,
              host_path_tokens_per_s: float, workload: dict | None = None) -> Verdict:
    """On the host path each strategy is slower than on NVLink with the same GPUs, by at least its floor."""
    rule = thresholds.training_limits(False).slow_wire
    slowdown = nvlink_tokens_per_s / host_path_tokens_per_s
    what = (f"{strategy} NVLink/host-path throughput ({_tokens(nvlink_tokens_per_s)} on {nvlink_placement} vs "
            f"{_tokens(host_path_tokens_per_s)})")
    other = _other_workload(thresholds, False, workload)
    if other:
        return skip(what, placement, other)
    return at_least(what, placement, slowdown, rule.min_slowdown(strategy), "x", rule.source,
                    f"{rule.yaml_path}.min_slowdown.{strategy}", rule="measured")


@check("dial_flattens", limits=(SLOW_WIRE,))
def dial_flattens(thresholds, *, placement: str, nvlink_placement: str, nvlink_tokens_per_s: dict,
                  host_path_tokens_per_s: dict, workload: dict | None = None) -> Verdict:
    """The strategy spread on the slow wire stays within max_spread_ratio of the spread on NVLink:
    no strategy collapses on the host path far beyond the others. (Untuned, hook-bound strategies
    moved closer together there, the article's "dial flattens"; tuned ones spread a little, by
    how much communication each leaves exposed: thresholds.yaml training.slow_wire.)"""
    rule = thresholds.training_limits(False).slow_wire
    fast, slow = nvlink_tokens_per_s, host_path_tokens_per_s
    spread_fast = max(fast.values()) / min(fast.values())
    spread_slow = max(slow.values()) / min(slow.values())
    what = f"strategy spread on the host path (NVLink {nvlink_placement}: {spread_fast:.2f}x)"
    other = _other_workload(thresholds, False, workload)
    if other:
        return skip(what, placement, other)
    return at_most(what, placement, spread_slow, spread_fast * rule.max_spread_ratio, "x", rule.source, rule.yaml_path,
                   fmt="ratio", rule="measured")


@check("capacity", limits=(CAPACITY,))
def capacity(thresholds, *, placement: str, strategy: str, expected: str, outcome: str, n_params: float,
             gpu_memory_bytes: int, error: str | None) -> Verdict:
    """A model whose DDP state exceeds one GPU: DDP must stop with a clean out-of-memory, FSDP must train."""
    rule = thresholds.training_limits(False).capacity
    what = f"{strategy} with a {n_params / 1e9:.1f}B-parameter model"
    failure = (f"{strategy} on {placement} with {n_params / 1e9:.1f}B parameters (DDP state {rule.model_state_target:.0%} "
               f"of {format_bytes(gpu_memory_bytes)}): expected {expected}, got {outcome}" + (f"\n{error}" if error else ""))
    return expect(what, placement, outcome, expected, outcome == expected, failure, rule.source, rule.yaml_path)
