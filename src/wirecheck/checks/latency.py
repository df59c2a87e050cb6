"""The small-message end of a collective's curve: a latency ceiling and an n½ ceiling.

A node whose small messages are slow (PCIe ACS/IOMMU settings, a protocol choice, launch
problems) fails here by name even when its large-message bandwidth passes the floors.
Inputs are the measured curve as plain data: [{"bytes", "time_s", "busbw", "path"}].
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from types import SimpleNamespace

from wirecheck.checks import check
from wirecheck.checks.collectives import CLASS, FLOOR_CLASSES, OP
from wirecheck.checks.words import Words
from wirecheck.measure.curve import half_peak_size, small_message_latency
from wirecheck.core.quantity import format_bytes, format_time
from wirecheck.core.verdict import Verdict, skip, within
from wirecheck.node.hardware import Hardware
from wirecheck.thresholds import plausible
from wirecheck.thresholds.declared import Rule
from wirecheck.thresholds.fields import Share
from wirecheck.thresholds.limits import COUNT, Entry, Table
from wirecheck.thresholds.yaml_reader import _At


@dataclass(frozen=True)
class LatencyRule:
    """Small-message latency: the median time per call over the sweep's sizes up to `up_to`."""

    up_to: int  # bytes
    yaml_path: str


@dataclass(frozen=True)
class HalfPeakRule:
    """n½: the size where busbw first reaches `fraction` of the curve's peak busbw."""

    fraction: float
    yaml_path: str


def _ceilings(section: str, kind: str, what: str, plausible_check=None) -> tuple[Table, Table]:
    """A section's ceilings by class, op and GPU count, and the simulated ones by op (CPU: the class says nothing)."""
    entry = Entry(kind, ("max",), ("max",))
    simulated = Table(f"collectives.{section}.simulated_ceilings", (OP, COUNT), entry, what, rule="simulated",
                      example="{all_reduce: {any: {max: ..., source: ...}}}  (or {} to judge nothing in simulation)")
    return Table(f"collectives.{section}.ceilings", (CLASS, OP, COUNT), entry, what, simulated=simulated,
                 present=FLOOR_CLASSES, plausible=plausible_check,
                 example="{nvswitch: {all_reduce: {2: {max: ..., source: ...}}}, ...}"), simulated


def _up_to(at: _At) -> LatencyRule:
    return LatencyRule(int(at.quantity("size", positive=True)), at.cite)


def _fraction(at: _At) -> HalfPeakRule:
    return HalfPeakRule(Share('"50 %"', "n½ is where busbw first reaches a fraction of its peak: write e.g. 50 %")(at),
                        at.cite)


LATENCY_LIMITS = (Rule("collectives.latency.up_to", _up_to, '"64 KiB"'),
                  *_ceilings("latency", "time", "latency ceiling", lambda at, table, _: plausible.check_latency(at, table)))
HALF_PEAK_LIMITS = (Rule("collectives.half_peak.fraction", _fraction, '"50 %"'),
                    *_ceilings("half_peak", "size", "n½ ceiling"))

LATENCY = Words(
    what="{op} small-message latency ({reading}: {per_size})",
    means="small collectives take too long: launch or synchronisation overhead (CPU contention, NCCL settings)",
    todo="check for other processes on the host (`top`), NCCL_* variables in the environment and CPU frequency "
         "scaling; run the placement again with -v",
    say={"what": "{op} small-message latency",
         "no_size": "no size up to {up_to:size} was measured; the sweep must start at or below collectives.latency.up_to",
         "no_limit": "no small-message latency ceiling for {klass}/{op}/{n_gpus} GPUs in collectives.latency{why}",
         "why": " ({why})",
         "eager": "the ceilings in collectives.latency are CUDA-graph replay times and no replay was timed up to "
                  "{up_to:size}: {notes}"})
HALF_PEAK = Words(
    what={"plain": "{op} n½",
          "between": "{op} n½ (busbw first reaches {fraction:.0%} of the peak {peak:bandwidth} at {peak_size:size} "
                     "between {below:size} and {first:size})",
          "smallest": "{op} n½ (busbw first reaches {fraction:.0%} of the peak {peak:bandwidth} at {peak_size:size} "
                      "at or below the smallest size {first:size})"},
    means="bandwidth ramps up late: medium messages are slow even if the peak is fine",
    todo="check NCCL_ALGO/NCCL_PROTO/NCCL_*CHANNELS in the environment and CPU contention; run with -v for the sweep",
    say={"no_bandwidth": "no bandwidth measured, no n½",
         "no_limit": "no n½ ceiling for {klass}/{op}/{n_gpus} GPUs in collectives.half_peak{why}",
         "why": " ({why})"})


def _points(curve: list) -> list:
    return [SimpleNamespace(**p) for p in curve]


@check("small_message_latency", words=LATENCY, limits=LATENCY_LIMITS)
def small_message_latency_check(thresholds, *, op: str, placement: str, placement_class: str, n_gpus: int,
                                simulated: bool, curve: list, hardware: dict | None = None) -> Verdict:
    """Median time per call over the sizes up to collectives.latency.up_to, against the ceiling (an entry
    measured on other `hardware`, wirecheck.node.hardware.Hardware.as_dict, does not apply)."""
    what = LATENCY.said("what", op=op)
    up_to = thresholds.latency.up_to
    reading = small_message_latency(_points(curve), up_to)
    if reading is None:
        return skip(what, placement, LATENCY.said("no_size", up_to=up_to))
    limit, why = thresholds.latency_rule(placement_class, op, n_gpus, simulated, Hardware.from_dict(hardware))
    if limit is None:
        return skip(what, placement, LATENCY.said("no_limit", klass=placement_class, op=op, n_gpus=n_gpus,
                                                  why=LATENCY.said("why", why=why) if why else ""))
    # The hardware ceilings are CUDA-graph replay times; an eager call costs the host ~40 us more
    # whatever the wire. Where no replay could be timed, judging eager times against them would fail
    # a healthy node: say why instead (the note names the cause, e.g. expandable_segments).
    notes = sorted({p.get("graph_note") for p in curve
                    if p["bytes"] <= up_to and p.get("path") != "graph" and p.get("graph_note")})
    if notes and not simulated:
        return skip(what, placement, LATENCY.said("eager", up_to=up_to, notes="; ".join(notes)))
    per_size = ", ".join(f"{format_bytes(s)} {format_time(t)}{' ' + p if p else ''}"
                         for s, t, p in zip(reading.sizes, reading.times_s, reading.paths))
    v = within(LATENCY.judged(op=op, reading=reading.describe(), per_size=per_size), placement, reading.time_s, limit,
               "µs")
    return v.amended(details=asdict(reading))


@check("half_peak_size", words=HALF_PEAK, limits=HALF_PEAK_LIMITS)
def half_peak_size_check(thresholds, *, op: str, placement: str, placement_class: str, n_gpus: int, simulated: bool,
                         curve: list, hardware: dict | None = None) -> Verdict:
    """n½ — the size where busbw first reaches half the curve's peak — against its ceiling."""
    what = HALF_PEAK.judged("plain", op=op)
    rule = thresholds.half_peak
    reading = half_peak_size(_points(curve), rule.fraction)
    if reading is None:
        return skip(what, placement, HALF_PEAK.said("no_bandwidth"))
    limit, why = thresholds.half_peak_rule(placement_class, op, n_gpus, simulated, Hardware.from_dict(hardware))
    if limit is None:
        return skip(what, placement, HALF_PEAK.said("no_limit", klass=placement_class, op=op, n_gpus=n_gpus,
                                                    why=HALF_PEAK.said("why", why=why) if why else ""))
    facts = dict(op=op, fraction=reading.fraction, peak=reading.peak_busbw, peak_size=reading.peak_size,
                 first=reading.first_size)
    what = (HALF_PEAK.judged("between", below=reading.below_size, **facts) if reading.below_size is not None
            else HALF_PEAK.judged("smallest", **facts))
    v = within(what, placement, reading.size, limit, "B")
    return v.amended(details=asdict(reading))
