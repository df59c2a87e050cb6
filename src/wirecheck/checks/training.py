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
from wirecheck.checks.words import Words
from wirecheck.core.precision import NAMES as PRECISIONS
from wirecheck.node.hardware import Hardware
from wirecheck.thresholds.declared import Rule
from wirecheck.thresholds.fields import Call, Count, Qty, Source, per_mode, spec
from wirecheck.thresholds.limits import ANY, COUNT, Axis, Entry, Table, check_name
from wirecheck.thresholds.yaml_reader import SOURCE_HINT, _At
from wirecheck.training.memory_model import predict
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
THROUGHPUT_FLOORS = Table("training.throughput_floors",
                   (Axis("klass", lambda: CLASSES, "placement class", "throughput floors are keyed by placement class"),
                    STRATEGY, COUNT), THROUGHPUT_ENTRY, "throughput floor", simulated=SIMULATED_THROUGHPUT,
                   present=lambda: TRAINING_CLASSES, example='{nvswitch: {ddp: {any: {min: "20000 tokens/s", source: ...}}}, ...}',
                   cover=("strategy", 'add {name}: {{any: {{min: "...", source: ...}}}} under each placement class'))
PEAK_MEMORY_LIMITS = Table("training.peak_memory",
                    (Axis("klass", lambda: CLASSES, "placement class", "peak_memory is keyed by placement class or `any`",
                          extra=(ANY,)), STRATEGY), Entry("size", ("max",), ("max",)), "peak-memory limit",
                    example='{any: {ddp: {max: "60 GiB", source: ...}}}',
                    cover=("strategy", 'add any: {{{name}: {{max: "...", source: ...}}}}'))
SIMULATED_SINGLE_GPU = Table("training.simulated_single_gpu_throughput_floor", (), THROUGHPUT_ENTRY, "throughput floor",
                             rule="simulated", example='{min: "1 tokens/s", source: ...}')
SINGLE_GPU_FLOORS = Table("training.single_gpu_throughput_floors", (MODEL,), THROUGHPUT_ENTRY, "throughput floor",
                   simulated=SIMULATED_SINGLE_GPU, match_hardware=False,
                   example='{"NVIDIA H200": {min: "38300 tokens/s", source: ...}}')
AGREEMENT = Rule("training.agreement", per_mode(Tolerance, "agreement per mode", '{first_loss_max_rel_diff: "2 %", source: ...}',
                                                '{first_loss_max_rel_diff: "0.1 %", source: ...}'),
                 "{hardware: {...}, simulated: {...}}")
MODEL_STATE_LIMITS = Rule("training.model_state", ModelStateLimits,
                   '{max_rel_diff_from_model: "10 %", zero3_vs_fsdp_max_rel_diff: "10 %", source: ...}')
SLOW_WIRE_LIMITS = Rule("training.slow_wire", SlowWire, '{min_slowdown: "1.05 x", max_spread_ratio: "1.5 x", source: ...}')
CAPACITY_LIMITS = Rule("training.capacity", Capacity, '{model_state_target: "110 %", steps: 2, timeout: "600 s", source: ...}')
PEAK_FLOPS = Rule("training.peak_flops", _peak_flops, '{"NVIDIA H200": {bf16: "989 TFLOP/s", source: ...}}')

# What every training check says of a record measured on another workload, and of a step time not settled.
_WORKLOAD = {"other_workload": "measured on another workload than {section} of {path} sets: {diffs}. Its limits do "
                               "not apply: judge the record with the thresholds it ran under, or measure again",
             "differs": "{key} {value!r} (thresholds: {ours!r})"}
_MEDIAN = {"unsettled": "the median step time had not settled ({known}, the training steps ceiling): the step time "
                        "moved during the run, see the record's step_times_s",
           "steady": "the median step time was known to {known}: a steady shortfall, not noise",
           "known": "+-{halfwidth:.1%} at 95 % after {steps} timed steps"}

STEPS = Words(
    what="{strategy} losses finite",
    means="a training strategy produced non-finite losses or missing steps",
    todo="run `pytest -k '<strategy> and <placement>' -v`; a wrong collective (see collective_correct) is the usual "
         "cause",
    say={"rank": "rank {rank}: {losses}", "non_finite": "{strategy} on {placement}: non-finite losses"})
AGREE = Words(
    what="{strategy} loss at step {step} vs {reference}",
    means="a strategy's losses differ from DDP's on the same data: its gradients are wrong",
    todo="check collective_correct on the same placement; then the library versions in the header",
    say={"losses": "{strategy} {loss:.6f} vs {reference} {reference_loss:.6f}: a wrong gradient or update path"})
MODEL_STATE = Words(
    what="{strategy} model state per GPU",
    means="a strategy holds more (or less) model state per GPU than the memory model predicts",
    todo="check the library versions in the header and `wirecheck memory`; the strategy may not shard as configured",
    say={"bytes": "{measured:size} measured vs {expected:size} predicted; per rank {per_rank}"})
STAIRCASE_WORDS = Words(
    what="staircase of model state",
    means="the strategies' model state per GPU is not in the order DDP >= ZeRO-1 >= ZeRO-2 >= ZeRO-3",
    todo="as model_state: a strategy does not shard as configured",
    say={"below": "{a} {a_bytes:size} < {b} {b_bytes:size}",
         "zero3": "zero3 {zero3:size} vs fsdp {fsdp:size}: ratio {ratio:.2f}, expected {expected:.2f} for {precision} "
                  "(allowed {allowed:.0%} off)",
         "nothing_saved": "sharding saved nothing: ddp {ddp:size} vs zero3 {zero3:size}",
         "broken": "staircase broken on {placement}"})
PEAK_MEMORY = Words(
    what="{strategy} peak allocated memory per GPU",
    means="a strategy used more GPU memory than its limit",
    todo="check another process's memory (`nvidia-smi`) and the library versions; compare with the record's memory "
         "figures",
    say={**_WORKLOAD, "simulation": "simulation: CPU ranks have no device memory counters",
         "no_limit": "no peak-memory limit for {klass}/{strategy} in {path}"})
THROUGHPUT = Words(
    what="{strategy} throughput",
    means="training runs slower than the floor for this wiring and strategy",
    todo="check the placement's collectives (busbw) and the host (the -v dial's `py loop`); a slow host, not the wire, "
         "shows there",
    say={**_WORKLOAD, **_MEDIAN, "no_limit": "no throughput floor for {klass}/{strategy}/{n_gpus} GPUs in {path}{why}",
         "why": " ({why})"})
SINGLE_GPU = Words(
    what="one GPU alone: training throughput",
    means="one GPU alone trains the strategies' model slower than its floor, or its losses are not finite: the GPU or "
          "its host, not the wire (no other GPU takes part)",
    todo="compare with the GPU health checks (GEMM, HBM, sustained load: -m health) of the same GPU, `nvidia-smi -q -d "
         "PERFORMANCE,POWER` and the -v dial's `py loop` (a slow host); non-finite losses: run the GPU's math check "
         "(`pytest -k gemm_matches_reference`)",
    say={**_WORKLOAD, **_MEDIAN, "step": "step {step}: {loss}", "no_step": "no step ran",
         "non_finite": "one GPU alone on {placement}: non-finite losses (the GPU computed NaN or Inf from finite inputs)",
         "mfu": "MFU {mfu:.1%}",
         "no_limit": "no training.single_gpu_throughput_floors entry for {gpu_model!r} in {path}; measured "
                     "{tokens:throughput}{mfu}, every loss finite",
         "alone": "with no other GPU to wait for, the GPU itself or its host is slow"})
SLOW_WIRE = Words(
    what="{strategy} NVLink/host-path throughput ({nvlink:throughput} on {nvlink_placement} vs {host:throughput})",
    means="a strategy does not slow down on the host path as it should: the NVLink run was slow, or the host path is "
          "not the host path",
    todo="check busbw and nccl_path on both placements",
    say=_WORKLOAD)
DIAL = Words(
    what="strategy spread on the host path (NVLink {nvlink_placement}: {spread:.2f}x)",
    means="one strategy collapses on the host path far beyond the others",
    todo="compare the dial tables (-v) of both placements; check that strategy's library version",
    say=_WORKLOAD)
CAPACITY = Words(
    what="{strategy} with a {billions:.1f}B-parameter model",
    means="a model that must not fit under DDP did, or FSDP could not train it",
    todo="check GPU memory (`nvidia-smi`) and the library versions",
    say={"unexpected": "{strategy} on {placement} with {billions:.1f}B parameters (DDP state {target:.0%} of "
                       "{memory:size}): expected {expected}, got {outcome}{error}"})


@check("steps_complete", words=STEPS)
def steps_complete(thresholds, *, placement: str, strategy: str, losses_by_rank: dict) -> Verdict:
    """Every step ran on every rank and every loss is finite. `losses_by_rank`: {rank: [loss, ...]}."""
    bad = {r: losses for r, losses in losses_by_rank.items() if not losses or not all(math.isfinite(x) for x in losses)}
    return no_problems(STEPS.judged(strategy=strategy), placement,
                       [STEPS.said("rank", rank=r, losses=v) for r, v in bad.items()],
                       measured=next(iter(losses_by_rank.values()), None),
                       intro=STEPS.said("non_finite", strategy=strategy, placement=placement))


@check("losses_agree", words=AGREE, limits=(AGREEMENT,))
def losses_agree(thresholds, *, placement: str, strategy: str, reference: str, step: int, loss: float,
                 reference_loss: float, simulated: bool) -> Verdict:
    """Same seed, same data: loss `step` (1-based) matches the reference strategy's."""
    tol = thresholds.training_limits(simulated).agreement
    rel = abs(loss - reference_loss) / abs(reference_loss)
    what = AGREE.judged(strategy=strategy, step=step, reference=reference)
    return at_most(what, placement, rel, tol.max_rel_diff, "relative difference", tol.source, tol.yaml_path,
                   fmt="number", hint=AGREE.said("losses", strategy=strategy, loss=loss, reference=reference,
                                                 reference_loss=reference_loss),
                   rule="simulated" if simulated else "measured")


@check("model_state", words=MODEL_STATE, limits=(MODEL_STATE_LIMITS,))
def model_state(thresholds, *, placement: str, strategy: str, n_params: int, n_gpus: int, precision: str,
                measured_bytes: int, per_rank: list, simulated: bool) -> Verdict:
    """Parameters + gradients + optimizer state held per GPU (local shards only) within
    tolerance of the memory model for this implementation and precision."""
    expected = predict(strategy, n_params, n_gpus, accounting="implementation", precision=precision).total
    tol = thresholds.training_limits(simulated).model_state
    rel = abs(measured_bytes - expected) / expected
    v = at_most(MODEL_STATE.judged(strategy=strategy), placement, rel * 100, tol.max_rel_diff_from_model * 100,
                "% off the model", tol.source, tol.yaml_path, fmt="number",
                hint=MODEL_STATE.said("bytes", measured=measured_bytes, expected=expected, per_rank=per_rank),
                rule="simulated" if simulated else "measured")
    return _with(v, measured_bytes=measured_bytes, predicted_bytes=expected)


def _median_hint(words: Words, median: dict | None) -> str:
    """A failed floor, told apart: a steady shortfall, or step times that moved during the run."""
    if not median or median.get("halfwidth") is None:
        return ""
    known = words.said("known", halfwidth=median["halfwidth"], steps=median.get("steps"))
    return words.said("unsettled" if median.get("stop") == CEILING else "steady", known=known)


def _other_workload(thresholds, words: Words, simulated: bool, workload: dict | None) -> str | None:
    """Why limits measured on the thresholds' workload do not apply to a run of another one (a
    record taken before the model or micro-batch changed, judged again), or None when they do.
    `workload`: the run's {"shape", "micro_batch", "precision"}; None (older records) is taken as
    the thresholds' own."""
    if workload is None:
        return None
    ours = thresholds.training_settings(simulated).workload()
    diffs = [words.said("differs", key=key, value=workload.get(key), ours=value) for key, value in ours.items()
             if workload.get(key) != value]
    if not diffs:
        return None
    section = "training.simulated" if simulated else "training.hardware"
    return words.said("other_workload", section=section, path=thresholds.path, diffs="; ".join(diffs))


def _with(verdict: Verdict, **details) -> Verdict:
    return replace(verdict, details={**verdict.details, **details})


STAIRCASE = ("ddp", "zero1", "zero2", "zero3")


@check("staircase", words=STAIRCASE_WORDS, limits=(MODEL_STATE_LIMITS,))
def staircase(thresholds, *, placement: str, n_gpus: int, n_params: int, precision: str, state_bytes: dict,
              simulated: bool) -> Verdict:
    """Model state per GPU: DDP >= ZeRO-1 >= ZeRO-2 >= ZeRO-3 ~ FSDP."""
    tol = thresholds.training_limits(simulated).model_state
    s = state_bytes
    broken = [STAIRCASE_WORDS.said("below", a=a, a_bytes=s[a], b=b, b_bytes=s[b])
              for a, b in zip(STAIRCASE, STAIRCASE[1:]) if s[a] < s[b]]
    # ZeRO-3 ~ FSDP: the same sharding in two implementations, judged against what each
    # implementation stores (in fp32 DeepSpeed keeps an extra fp32 master copy; in bf16 both
    # hold 16/N bytes per parameter), so only a real difference in sharding shows.
    expected = (predict("zero3", n_params, n_gpus, precision=precision).total
                / predict("fsdp", n_params, n_gpus, precision=precision).total)
    gap = abs(s["zero3"] / s["fsdp"] / expected - 1)
    if gap > tol.zero3_vs_fsdp_max_rel_diff:
        broken.append(STAIRCASE_WORDS.said("zero3", zero3=s["zero3"], fsdp=s["fsdp"], ratio=s["zero3"] / s["fsdp"],
                                           expected=expected, precision=precision,
                                           allowed=tol.zero3_vs_fsdp_max_rel_diff))
    if n_gpus > 1 and not s["ddp"] > s["zero3"]:
        broken.append(STAIRCASE_WORDS.said("nothing_saved", ddp=s["ddp"], zero3=s["zero3"]))
    return no_problems(STAIRCASE_WORDS.judged(), placement, broken, measured=s, unit="B",
                       intro=STAIRCASE_WORDS.said("broken", placement=placement),
                       source=tol.source if broken else None, yaml_path=tol.yaml_path if broken else None)


@check("peak_memory", words=PEAK_MEMORY, limits=(PEAK_MEMORY_LIMITS,))
def peak_memory(thresholds, *, placement: str, placement_class: str, strategy: str, peak_bytes: int | None,
                simulated: bool, workload: dict | None = None) -> Verdict:
    """Peak allocated GPU memory per rank within the limit for this strategy."""
    what = PEAK_MEMORY.judged(strategy=strategy)
    if simulated or peak_bytes is None:
        return skip(what, placement, PEAK_MEMORY.said("simulation"))
    other = _other_workload(thresholds, PEAK_MEMORY, simulated, workload)
    if other:
        return skip(what, placement, other)
    limit = thresholds.training_limits(simulated).peak_memory(placement_class, strategy)
    if limit is None:
        return skip(what, placement, PEAK_MEMORY.said("no_limit", klass=placement_class, strategy=strategy,
                                                      path=thresholds.path))
    return within(what, placement, peak_bytes, limit, "GiB", fmt="memory")


@check("throughput", words=THROUGHPUT, limits=(THROUGHPUT_FLOORS, SIMULATED_THROUGHPUT, PEAK_FLOPS))
def throughput(thresholds, *, placement: str, placement_class: str, strategy: str, n_gpus: int,
               tokens_per_s: float, simulated: bool, workload: dict | None = None,
               median: dict | None = None, hardware: dict | None = None) -> Verdict:
    """Training throughput (global tokens/s, slowest rank) above the floor for the class. `median`
    (training.strategy_run.median_of): how well the run knew its median; a failure says whether it was steady.
    `hardware` (wirecheck.node.hardware.Hardware.as_dict): an entry measured on other hardware does not apply."""
    what = THROUGHPUT.judged(strategy=strategy)
    other = _other_workload(thresholds, THROUGHPUT, simulated, workload)
    if other:
        return skip(what, placement, other)
    limit, why = thresholds.training_limits(simulated).throughput_rule(placement_class, strategy, n_gpus,
                                                                        Hardware.from_dict(hardware))
    if limit is None:
        return skip(what, placement, THROUGHPUT.said("no_limit", klass=placement_class, strategy=strategy,
                                                     n_gpus=n_gpus, path=thresholds.path,
                                                     why=THROUGHPUT.said("why", why=why) if why else ""))
    return within(what, placement, tokens_per_s, limit, "tokens/s", hint=_median_hint(THROUGHPUT, median))


@check("single_gpu_training", words=SINGLE_GPU, limits=(SINGLE_GPU_FLOORS, SIMULATED_SINGLE_GPU))
def single_gpu_training(thresholds, *, placement: str, gpu_model: str | None, tokens_per_s: float, losses: list,
                        simulated: bool, workload: dict | None = None, median: dict | None = None,
                        mfu: float | None = None) -> Verdict:
    """One GPU alone trains the strategies' model: every loss finite, and tokens/s at least the GPU
    model's floor (training.single_gpu_throughput_floors). `mfu` (of the GPU's dense peak) is shown."""
    what = SINGLE_GPU.judged()
    bad = [SINGLE_GPU.said("step", step=i + 1, loss=x) for i, x in enumerate(losses) if not math.isfinite(x)]
    if not losses or bad:
        return no_problems(what, placement, bad or [SINGLE_GPU.said("no_step")], measured=losses,
                           intro=SINGLE_GPU.said("non_finite", placement=placement))
    shown = SINGLE_GPU.said("mfu", mfu=mfu) if mfu is not None else ""
    other = _other_workload(thresholds, SINGLE_GPU, simulated, workload)
    if other:
        return skip(what, placement, other)
    limit = thresholds.training_limits(simulated).single_gpu_floor(gpu_model)
    if limit is None:
        return skip(what, placement, SINGLE_GPU.said("no_limit", gpu_model=gpu_model, path=thresholds.path,
                                                     tokens=tokens_per_s, mfu=f"; {shown}" if shown else ""),
                    measured=tokens_per_s, unit="tokens/s")
    hint = "; ".join(h for h in (_median_hint(SINGLE_GPU, median), SINGLE_GPU.said("alone")) if h)
    return within(what, placement, tokens_per_s, limit, "tokens/s", hint=hint, note=shown,
                  details={"gpu_model": gpu_model, "mfu": mfu})


@check("slow_wire", words=SLOW_WIRE, limits=(SLOW_WIRE_LIMITS,))
def slow_wire(thresholds, *, placement: str, nvlink_placement: str, strategy: str, nvlink_tokens_per_s: float,
              host_path_tokens_per_s: float, workload: dict | None = None) -> Verdict:
    """On the host path each strategy is slower than on NVLink with the same GPUs, by at least its floor."""
    rule = thresholds.training_limits(False).slow_wire
    slowdown = nvlink_tokens_per_s / host_path_tokens_per_s
    what = SLOW_WIRE.judged(strategy=strategy, nvlink=nvlink_tokens_per_s, nvlink_placement=nvlink_placement,
                            host=host_path_tokens_per_s)
    other = _other_workload(thresholds, SLOW_WIRE, False, workload)
    if other:
        return skip(what, placement, other)
    return at_least(what, placement, slowdown, rule.min_slowdown(strategy), "x", rule.source,
                    f"{rule.yaml_path}.min_slowdown.{strategy}", rule="measured")


@check("dial_flattens", words=DIAL, limits=(SLOW_WIRE_LIMITS,))
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
    what = DIAL.judged(nvlink_placement=nvlink_placement, spread=spread_fast)
    other = _other_workload(thresholds, DIAL, False, workload)
    if other:
        return skip(what, placement, other)
    return at_most(what, placement, spread_slow, spread_fast * rule.max_spread_ratio, "x", rule.source, rule.yaml_path,
                   fmt="ratio", rule="measured")


@check("capacity", words=CAPACITY, limits=(CAPACITY_LIMITS,))
def capacity(thresholds, *, placement: str, strategy: str, expected: str, outcome: str, n_params: float,
             gpu_memory_bytes: int, error: str | None) -> Verdict:
    """A model whose DDP state exceeds one GPU: DDP must stop with a clean out-of-memory, FSDP must train."""
    rule = thresholds.training_limits(False).capacity
    what = CAPACITY.judged(strategy=strategy, billions=n_params / 1e9)
    failure = CAPACITY.said("unexpected", strategy=strategy, placement=placement, billions=n_params / 1e9,
                            target=rule.model_state_target, memory=gpu_memory_bytes, expected=expected, outcome=outcome,
                            error=f"\n{error}" if error else "")
    return expect(what, placement, outcome, expected, outcome == expected, failure, rule.source, rule.yaml_path)
