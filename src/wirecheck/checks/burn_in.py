"""What only a burn-in judges: that no hard fault stopped it, that no GPU lost throughput from its first
rounds to its last, that no (placement, collective) had a round far below its others.

The figures every acceptance check judges (each GPU's sustained TFLOP/s against its floor and its peers,
clock-event reasons, power, temperature, the memory test; each placement's busbw against its floor) are
judged over a whole burn-in by those same checks (wirecheck.checks.gpu_health, .collectives) on inputs
wirecheck.burnin.judging gathers from every round. Limits: thresholds.yaml `burn_in`.
"""

from __future__ import annotations

import statistics
import time

from dataclasses import dataclass

from wirecheck.checks import check
from wirecheck.checks.advice import Advice
from wirecheck.core.quantity import format_bw
from wirecheck.core.render import FORMATS
from wirecheck.core.verdict import FAIL, PASS, Verdict, skip
from wirecheck.thresholds.declared import Rule
from wirecheck.thresholds.fields import Count, Nested, Share, Source, spec

# --- the limits only a burn-in has, per mode (hardware / simulated) --------------------------------------

_NEVER = "nothing could ever fail; write less than 100 %, e.g. {example}"


@dataclass(frozen=True)
class MaxDrop:
    WHAT = "max_drop and source"
    value: float = spec(Share('"10 %"', _NEVER, positive=False, below_one=True), key="max_drop")
    source: str = spec(Source())
    yaml_path: str


@dataclass(frozen=True)
class MaxBelowMedian:
    WHAT = "max_below_median and source"
    value: float = spec(Share('"15 %"', _NEVER, positive=False, below_one=True), key="max_below_median")
    source: str = spec(Source())
    yaml_path: str


@dataclass(frozen=True)
class Drift:
    """How far a GPU's TFLOP/s may fall from its first rounds to its last (a GPU that cannot shed its heat
    loses clocks after minutes, not seconds); `rounds`: how many rounds at each end are compared."""

    WHAT = "drift settings"
    rounds: int = spec(Count(minimum=1), "3")
    hardware: MaxDrop = spec(Nested('{max_drop: "10 %", source: ...}', MaxDrop))
    simulated: MaxDrop = spec(Nested('{max_drop: "90 %", source: ...}', MaxDrop))


@dataclass(frozen=True)
class Spread:
    """How far a (placement, collective)'s slowest round may fall below its median round (a link that degrades
    when hot, or retrains under load)."""

    WHAT = "busbw spread per mode"
    hardware: MaxBelowMedian = spec(Nested('{max_below_median: "15 %", source: ...}', MaxBelowMedian))
    simulated: MaxBelowMedian = spec(Nested('{max_below_median: "95 %", source: ...}', MaxBelowMedian))


@dataclass(frozen=True)
class BurnInLimits:
    WHAT = "burn_in sections"
    drift_settings: Drift = spec(Nested('{rounds: 3, hardware: {max_drop: "10 %", source: ...}, simulated: '
                                        '{max_drop: "90 %", source: ...}}', Drift), key="drift")
    spread: Spread = spec(Nested('{hardware: {max_below_median: "15 %", source: ...}, simulated: {...}}', Spread),
                          key="busbw_spread")
    yaml_path: str

    drift_rounds = property(lambda s: s.drift_settings.rounds)

    def drift(self, simulated: bool) -> MaxDrop:
        return self.drift_settings.simulated if simulated else self.drift_settings.hardware

    def busbw_spread(self, simulated: bool) -> MaxBelowMedian:
        return self.spread.simulated if simulated else self.spread.hardware


BURN_IN = Rule("burn_in", BurnInLimits, "{drift: {rounds: 3, hardware: {...}, simulated: {...}}, busbw_spread: {...}}")

ADVICE_FAULT = ("drain the node: a GPU that computes or stores wrong, reports an XID, or hangs under hours of load "
                "is the infant mortality a burn-in is for; `nvidia-smi -q -d ECC,ROW_REMAPPER`, `dmesg | grep -i xid` "
                "and the logs the message names say more; reset the GPU and burn it in again, replace it if it repeats")


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


@check("burn_in_no_hard_fault", advice=Advice(
    "the node failed under hours of load: an XID, memory errors, a wrong product or element, or a hang",
    "drain the node; the message names the round, the GPU or placement and the fault: an XID or ECC growth means "
    "a GPU reset and a second burn-in, a wrong result or memory word replacing that GPU"))
def burn_in_no_hard_fault(thresholds, *, status: str, rounds: int, seconds: float, duration_s: float,
                          fault: dict | None, checked: dict) -> Verdict:
    """The burn-in ran its rounds to the end of --duration with no hard fault (an XID or ECC event, ECC
    growth, a wrong GEMM or collective result, a memory word read back wrong, a hang or a crash).
    `fault`: wirecheck.burnin.faults.Fault as a record; `checked`: what the rounds compared (counts)."""
    what = "burn-in without a hard fault"
    if fault:
        when = time.strftime("%H:%M:%S", time.localtime(fault["time"])) if fault.get("time") else "?"
        where = f" on {fault['where']}" if fault.get("where") else ""
        return Verdict("", what, fault.get("where"), FAIL, measured=fault["kind"], hint=ADVICE_FAULT,
                       details={"fault": fault, "problems": [
                           f"STOPPED in round {fault['round']} at {when} after {_clock(seconds)} of "
                           f"{_clock(duration_s)} by a {fault['kind']}{where}: {fault['message']}"]})
    if not rounds:
        return Verdict("", what, None, FAIL, hint="nothing was burned in; give a --duration of a round or more",
                       details={"problems": [f"no round ran ({status} after {_clock(seconds)})"]})
    counts = ", ".join(f"{v} {k}" for k, v in checked.items())
    return Verdict("", what, None, PASS, note=f"{rounds} rounds in {_clock(seconds)} (of --duration "
                                              f"{_clock(duration_s)}), {status}; no XID, no ECC growth, no hang; "
                                              f"compared: {counts}, every one right", measured=rounds, unit="rounds",
                   details={"checked": checked})


@check("burn_in_throughput_drift", limits=(BURN_IN,), advice=Advice(
    "a GPU lost throughput over the burn-in: it heats up, or its power or clocks sag over hours",
    "compare its temperature and power over the run in `wirecheck report` with its peers'; check its cooling and "
    "power delivery"))
def burn_in_throughput_drift(thresholds, *, gpu: int, bus_id: str | None, round_flops: list, simulated: bool) -> Verdict:
    """A GPU's median TFLOP/s over its last `burn_in.drift.rounds` rounds at most `max_drop` below its
    first rounds' (`round_flops`: each round's median window, None where a round has no figure)."""
    what, where = "TFLOP/s drift from the first rounds to the last", f"GPU{gpu}"
    values = [v for v in round_flops if isinstance(v, (int, float)) and v > 0]
    rule = thresholds.burn_in.drift(simulated)
    k = min(thresholds.burn_in.drift_rounds, len(values) // 2)
    if k < 1:
        return skip(what, where, f"{len(values)} round(s) with a figure: a drift needs two or more")
    first, last = statistics.median(values[:k]), statistics.median(values[-k:])
    drop = 1 - last / first
    loc = f"GPU{gpu} ({bus_id})" if bus_id else where
    tflops = FORMATS["compute"]
    return Verdict("", what, where, PASS if drop <= rule.value else FAIL, measured=drop * 100, unit="%", fmt="percent",
                   limit={"max": rule.value * 100}, bound="ceiling", source=rule.source, yaml_path=rule.yaml_path,
                   place=loc, note=f"the drop from the first {k} round(s) {tflops(first)} to the last {k} {tflops(last)}",
                   hint=(f"{loc} lost throughput as the burn-in went on: check its cooling (fans, airflow, inlet "
                         "temperature, the heatsink's contact) and `nvidia-smi -q -d PERFORMANCE` for what held its "
                         "clocks"),
                   details={"first": first, "last": last, "rounds_compared": k, "rounds": len(values)})


@check("burn_in_busbw_spread", limits=(BURN_IN,), advice=Advice(
    "a placement's bus bandwidth dropped in some rounds: a marginal link that degrades under heat or load",
    "look at that placement's busbw per round in `wirecheck report`; `nvidia-smi nvlink -e` for the links' "
    "error counters; reseat or replace the link or GPU if it repeats"))
def burn_in_busbw_spread(thresholds, *, placement: str, op: str, round_busbw: list, simulated: bool) -> Verdict:
    """The slowest round's busbw (its steps' median) at most `burn_in.busbw_spread.max_below_median` below
    the median round of that placement and collective (`round_busbw`: bytes/s per round that ran it)."""
    what = f"{op} busbw, slowest round against the median round"
    values = [v for v in round_busbw if isinstance(v, (int, float)) and v > 0]
    if len(values) < 2:
        return skip(what, placement, f"{len(values)} round(s) ran {op} on {placement}: a spread needs two or more")
    rule = thresholds.burn_in.busbw_spread(simulated)
    median, lowest = statistics.median(values), min(values)
    below = 1 - lowest / median
    return Verdict("", what, placement, PASS if below <= rule.value else FAIL, measured=below * 100, unit="%",
                   fmt="percent", limit={"max": rule.value * 100}, bound="ceiling", source=rule.source,
                   yaml_path=rule.yaml_path,
                   note=(f"the lowest round {format_bw(lowest)} below the median {format_bw(median)} over "
                         f"{len(values)} rounds"),
                   hint=(f"A link of {placement} slowed down under load (retraining, errors, heat): compare "
                         "`nvidia-smi nvlink -e` before and after, and the link counters of the record"),
                   details={"lowest": lowest, "median": median, "rounds": len(values)})
