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
from wirecheck.checks.words import Words
from wirecheck.core.verdict import FAIL, PASS, Verdict, skip
from wirecheck.workers import ras_report
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

NO_HARD_FAULT = Words(
    what="burn-in without a hard fault",
    means="the node failed under hours of load: an XID, memory errors, a wrong product or element, or a hang",
    todo="drain the node; the message names the round, the GPU or placement and the fault: an XID or ECC growth means "
         "a GPU reset and a second burn-in, a wrong result or memory word replacing that GPU; `nvidia-smi -q -d "
         "ECC,ROW_REMAPPER`, `dmesg | grep -i xid` and the logs the message names say more",
    say={"stopped": "STOPPED in round {round} at {when} after {seconds:clock} of {duration_s:clock} by a {kind}"
                    "{where}: {message}",
         "on": " on {where}",
         "no_round": "no round ran ({status} after {seconds:clock})",
         "nothing_burned": "nothing was burned in; give a --duration of a round or more",
         "passed": "{rounds} rounds in {seconds:clock} (of --duration {duration_s:clock}), {status}; no XID, no ECC "
                   "growth, no hang; compared: {counts}, every one right"})
DRIFT = Words(
    what="TFLOP/s drift from the first rounds to the last",
    means="a GPU lost throughput over the burn-in: it heats up, or its power or clocks sag over hours",
    todo="compare its temperature and power over the run in `wirecheck report` with its peers'; check its cooling (fans, "
         "airflow, inlet temperature, the heatsink's contact), its power delivery and `nvidia-smi -q -d PERFORMANCE` "
         "for what held its clocks",
    say={"too_few": "{rounds} round(s) with a figure: a drift needs two or more",
         "drop": "the drop from the first {k} round(s) {first:compute} to the last {k} {last:compute}"})
SPREAD = Words(
    what="{op} busbw, slowest round against the median round",
    means="a placement's bus bandwidth dropped in some rounds: a marginal link that degrades under heat or load",
    todo="look at that placement's busbw per round in `wirecheck report`; `nvidia-smi nvlink -e` for the links' "
         "error counters before and after; reseat or replace the link or GPU if it repeats",
    say={"too_few": "{rounds} round(s) ran {op} on {placement}: a spread needs two or more",
         "lowest": "the lowest round {lowest:bandwidth} below the median {median:bandwidth} over {rounds} rounds"})


@check("burn_in_no_hard_fault", words=NO_HARD_FAULT)
def burn_in_no_hard_fault(thresholds, *, status: str, rounds: int, seconds: float, duration_s: float,
                          fault: dict | None, checked: dict) -> Verdict:
    """The burn-in ran its rounds to the end of --duration with no hard fault (an XID or ECC event, ECC
    growth, a wrong GEMM or collective result, a memory word read back wrong, a hang or a crash).
    `fault`: wirecheck.burnin.faults.Fault as a record (a hang's or crash's with NCCL RAS's reading, `ras`);
    `checked`: what the rounds compared (counts)."""
    what = NO_HARD_FAULT.judged()
    if fault:
        when = time.strftime("%H:%M:%S", time.localtime(fault["time"])) if fault.get("time") else "?"
        where = NO_HARD_FAULT.said("on", where=fault["where"]) if fault.get("where") else ""
        stopped = NO_HARD_FAULT.said("stopped", round=fault["round"], when=when, seconds=seconds, duration_s=duration_s,
                                     kind=fault["kind"], where=where, message=fault["message"])
        # A hang's or crash's RAS reading follows: the communicators' state, the dead or missing ranks.
        said_by_ras = ras_report.lines(fault["ras"]) if fault.get("ras") is not None else []
        return Verdict("", what, fault.get("where"), FAIL, measured=fault["kind"],
                       details={"fault": fault, "problems": [stopped, *said_by_ras]})
    if not rounds:
        return Verdict("", what, None, FAIL, hint=NO_HARD_FAULT.said("nothing_burned"),
                       details={"problems": [NO_HARD_FAULT.said("no_round", status=status, seconds=seconds)]})
    counts = ", ".join(f"{v} {k}" for k, v in checked.items())
    return Verdict("", what, None, PASS, measured=rounds, unit="rounds", details={"checked": checked},
                   note=NO_HARD_FAULT.said("passed", rounds=rounds, seconds=seconds, duration_s=duration_s,
                                           status=status, counts=counts))


@check("burn_in_throughput_drift", words=DRIFT, limits=(BURN_IN,))
def burn_in_throughput_drift(thresholds, *, gpu: int, bus_id: str | None, round_flops: list, simulated: bool) -> Verdict:
    """A GPU's median TFLOP/s over its last `burn_in.drift.rounds` rounds at most `max_drop` below its
    first rounds' (`round_flops`: each round's median window, None where a round has no figure)."""
    what, where = DRIFT.judged(), f"GPU{gpu}"
    values = [v for v in round_flops if isinstance(v, (int, float)) and v > 0]
    rule = thresholds.burn_in.drift(simulated)
    k = min(thresholds.burn_in.drift_rounds, len(values) // 2)
    if k < 1:
        return skip(what, where, DRIFT.said("too_few", rounds=len(values)))
    first, last = statistics.median(values[:k]), statistics.median(values[-k:])
    drop = 1 - last / first
    loc = f"GPU{gpu} ({bus_id})" if bus_id else where
    return Verdict("", what, where, PASS if drop <= rule.value else FAIL, measured=drop * 100, unit="%", fmt="percent",
                   limit={"max": rule.value * 100}, bound="ceiling", source=rule.source, yaml_path=rule.yaml_path,
                   place=loc, note=DRIFT.said("drop", k=k, first=first, last=last),
                   details={"first": first, "last": last, "rounds_compared": k, "rounds": len(values)})


@check("burn_in_busbw_spread", words=SPREAD, limits=(BURN_IN,))
def burn_in_busbw_spread(thresholds, *, placement: str, op: str, round_busbw: list, simulated: bool) -> Verdict:
    """The slowest round's busbw (its steps' median) at most `burn_in.busbw_spread.max_below_median` below
    the median round of that placement and collective (`round_busbw`: bytes/s per round that ran it)."""
    what = SPREAD.judged(op=op)
    values = [v for v in round_busbw if isinstance(v, (int, float)) and v > 0]
    if len(values) < 2:
        return skip(what, placement, SPREAD.said("too_few", rounds=len(values), op=op, placement=placement))
    rule = thresholds.burn_in.busbw_spread(simulated)
    median, lowest = statistics.median(values), min(values)
    below = 1 - lowest / median
    return Verdict("", what, placement, PASS if below <= rule.value else FAIL, measured=below * 100, unit="%",
                   fmt="percent", limit={"max": rule.value * 100}, bound="ceiling", source=rule.source,
                   yaml_path=rule.yaml_path, note=SPREAD.said("lowest", lowest=lowest, median=median, rounds=len(values)),
                   details={"lowest": lowest, "median": median, "rounds": len(values)})
