"""Strategy checks: steps complete, losses agree, model state against the memory model, the
staircase, peak memory, throughput, one GPU alone training the same model, the slow wire, and the
capacity case.

Inputs are what the workers reported (per-rank losses, bytes, tokens/s), never a wrapper object.
"""

from __future__ import annotations

import math
from dataclasses import replace

from wirecheck.checks import check
from wirecheck.node.hardware import Hardware
from wirecheck.training.memory_model import predict
from wirecheck.core.quantity import format_bytes
from wirecheck.training.timing import CEILING
from wirecheck.core.verdict import Verdict, at_least, at_most, expect, no_problems, skip, within

GIB = 2**30


def _tokens(rate: float) -> str:
    return f"{rate:,.0f} tokens/s"


def _gib(n: float) -> str:
    return f"{n / GIB:.2f} GiB"


@check("steps_complete")
def steps_complete(thresholds, *, placement: str, strategy: str, losses_by_rank: dict) -> Verdict:
    """Every step ran on every rank and every loss is finite. `losses_by_rank`: {rank: [loss, ...]}."""
    bad = {r: losses for r, losses in losses_by_rank.items() if not losses or not all(math.isfinite(x) for x in losses)}
    return no_problems(f"{strategy} losses finite", placement, [f"rank {r}: {v}" for r, v in bad.items()],
                       measured=next(iter(losses_by_rank.values()), None), intro=f"{strategy} on {placement}: non-finite losses")


@check("losses_agree")
def losses_agree(thresholds, *, placement: str, strategy: str, reference: str, step: int, loss: float,
                 reference_loss: float, simulated: bool) -> Verdict:
    """Same seed, same data: loss `step` (1-based) matches the reference strategy's."""
    tol = thresholds.training_limits(simulated).agreement
    rel = abs(loss - reference_loss) / abs(reference_loss)
    what = f"{strategy} loss at step {step} vs {reference}"
    return at_most(what, placement, rel, tol.max_rel_diff, "relative difference", tol.source, tol.yaml_path,
                   fmt=lambda v: f"{v:.2e}",
                   hint=f" ({strategy} {loss:.6f} vs {reference} {reference_loss:.6f}): a wrong gradient or update path",
                   rule="simulated" if simulated else "measured")


@check("model_state")
def model_state(thresholds, *, placement: str, strategy: str, n_params: int, n_gpus: int, precision: str,
                measured_bytes: int, per_rank: list, simulated: bool) -> Verdict:
    """Parameters + gradients + optimizer state held per GPU (local shards only) within
    tolerance of the memory model for this implementation and precision."""
    expected = predict(strategy, n_params, n_gpus, accounting="implementation", precision=precision).total
    tol = thresholds.training_limits(simulated).model_state
    rel = abs(measured_bytes - expected) / expected
    what = f"{strategy} model state per GPU"
    v = at_most(what, placement, rel * 100, tol.max_rel_diff_from_model * 100, "% off the model", tol.source,
                tol.yaml_path, fmt=lambda x: f"{x:.1f} %",
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


@check("staircase")
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


@check("peak_memory")
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
    return within(what, placement, peak_bytes, limit, _gib, "GiB", scale=1 / GIB)


@check("throughput")
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
    return within(what, placement, tokens_per_s, limit, _tokens, "tokens/s", hint=_median_hint(median))


@check("single_gpu_training")
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
    shown = f"; MFU {mfu:.1%}" if mfu is not None else ""
    other = _other_workload(thresholds, simulated, workload)
    if other:
        return skip(what, placement, other)
    limit = thresholds.training_limits(simulated).single_gpu_floor(gpu_model)
    if limit is None:
        return skip(what, placement, f"no training.single_gpu_throughput_floors entry for {gpu_model!r} in "
                                     f"{thresholds.path}; measured {_tokens(tokens_per_s)}{shown}, every loss finite",
                    measured=tokens_per_s, unit="tokens/s")
    advice = (". With no other GPU to wait for, the GPU itself or its host is slow: see its GEMM and HBM figures "
              "(-m health) and `nvidia-smi -q -d PERFORMANCE,POWER`")
    v = within(what, placement, tokens_per_s, limit, _tokens, "tokens/s", hint=_median_hint(median) + advice)
    return _with(replace(v, message=v.message + shown), gpu_model=gpu_model, mfu=mfu)


@check("slow_wire")
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


@check("dial_flattens")
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
                   fmt=lambda v: f"{v:.2f}x", rule="measured")


@check("capacity")
def capacity(thresholds, *, placement: str, strategy: str, expected: str, outcome: str, n_params: float,
             gpu_memory_bytes: int, error: str | None) -> Verdict:
    """A model whose DDP state exceeds one GPU: DDP must stop with a clean out-of-memory, FSDP must train."""
    rule = thresholds.training_limits(False).capacity
    what = f"{strategy} with a {n_params / 1e9:.1f}B-parameter model"
    failure = (f"{strategy} on {placement} with {n_params / 1e9:.1f}B parameters (DDP state {rule.model_state_target:.0%} "
               f"of {format_bytes(gpu_memory_bytes)}): expected {expected}, got {outcome}" + (f"\n{error}" if error else ""))
    return expect(what, placement, outcome, expected, outcome == expected, failure, rule.source, rule.yaml_path)
