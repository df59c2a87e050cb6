"""Each GPU on its own: HBM bandwidth, GEMM throughput, results against a reference, the
sustained load (throughput, clock-event reasons, power, temperature), the memory pattern test,
XIDs during the run, and memory-error counters grown over the run.

Figures (HBM, GEMM, sustained TFLOP/s) fail below their GPU model's floor, and also when the
GPU is below its node's other GPUs of the same model by more than the peer rule allows
(wirecheck.core.peer_stats, the fleet's rule inside a node), whatever the floor: on an 8-GPU
node that GPU is the straggler every data-parallel step waits for. Every failure says what to
do. Inputs come from wirecheck.gpu.inputs, as plain data.

Each check's declaration carries the rest of what it is: its inputs (the GPU load's phase and
builder), the limits it reads (Floor, Value, Section: read from thresholds.yaml as data by the
gpu_health loader), what a failure means and what to do, and its report section and figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from wirecheck.checks import SECTION_GPU, check
from wirecheck.checks.words import SIMULATION_NVML, Words
from wirecheck.core import render
from wirecheck.gpu import inputs as gpu_inputs
from wirecheck.gpu.inputs import FromPhase
from wirecheck.vocab.work import FIGURES, MEMORY, SUSTAINED
from wirecheck.core.peer_stats import RULE as PEERS_RULE, below_median
from wirecheck.core.quantity import DEGREES_C
from wirecheck.core.verdict import FAIL, PASS, Verdict, no_problems, not_measured, skip
from wirecheck.node.gpu_sampling import CLOCK_EVENT_REASONS, REASON_TEXT, decode_reasons
from wirecheck.node.hardware import Hardware
from wirecheck.node.xid_events import describe as describe_event
from wirecheck.thresholds.declared import Floor, Rule, Value
from wirecheck.thresholds.fields import Count, Items, Qty, Source, Word, spec

BITWISE = ("exact: a bf16 GEMM repeated on one H200 gave bitwise-identical results (the GPU health probe, "
           "scripts/device/gpu_health_probe.py, on a 1x H200 node, 2026-12-01)")

_FIGURE_SAYS = {
    "foreign": "other processes computed on the GPU while it was measured ({processes}): the figure is invalid",
    "stop_them": "stop them or pick another node",
    "no_limit": "{no_floor}; no other GPU of that model to compare with; measured {value}",
}
HBM_BANDWIDTH = Words(
    what={"copy": "HBM copy bandwidth (read+write)", "read": "HBM read bandwidth"},
    means="the GPU's memory is slow",
    todo="compare `nvidia-smi -q -d CLOCK,PERFORMANCE` with its peers (memory clock held?); check "
         "`nvidia-smi -q -d ECC,ROW_REMAPPER`; reseat or replace the GPU",
    say=_FIGURE_SAYS)
GEMM_THROUGHPUT = Words(
    what="dense GEMM {dtype} throughput",
    means="the GPU computes slower than its floor or its peers",
    todo="`nvidia-smi -q -d CLOCK,PERFORMANCE,POWER` (clocks locked, power limit lowered, another process), then "
         "reseat or replace the GPU",
    say=_FIGURE_SAYS)
SUSTAINED_THROUGHPUT = Words(
    what="sustained bf16 GEMM throughput (median window)",
    means="the GPU cannot hold its throughput under a long load",
    todo="check cooling (fans, airflow, inlet temperature) and power delivery; `nvidia-smi -q -d PERFORMANCE` says "
         "which limit held it",
    say={**_FIGURE_SAYS, "windows": "{windows} windows over {seconds:.0f} s: first {first:compute}, last "
                                    "{last:compute}, lowest {lowest:compute}"})
MATCHES_REFERENCE = Words(
    what="GEMM results against the reference",
    means="the GPU computed a wrong product: silent data corruption (the same inputs must give the same bits)",
    todo="drain the node and replace the GPU",
    say={"nonfinite": "{phase}: the reference has {count} non-finite elements (the inputs are finite: the GPU computed "
                      "NaN or Inf)",
         "result_at": "result {at}, ", "window_at": "window {at}, ",
         "differ": "{phase}: {results} of {checked} results differ from the reference, {elements} elements in all; "
                   "first: {at}element {index} (row {row}, col {col})",
         "digests": "the reference computed again for the sustained load differs from the first one ({digests}): the "
                    "same inputs gave other bits",
         "identical": "all {total} compared products bit-identical ({counts})"})
CLOCKS = Words(
    what="clock-event reasons under load",
    means="the GPU throttled under load (thermal, HW slowdown or power brake)",
    todo="thermal: check fans, airflow, inlet temperature and the heatsink; HW slowdown or power brake: the power "
         "supply or the board (`nvidia-smi -q -d PERFORMANCE`, dmesg)",
    say={"simulation": SIMULATION_NVML,
         "unsupported": "NVML gives no clock-event reasons: {why}",
         "reason": "{reason} (0x{mask:x}) in {count} of {samples} samples",
         "thermal": "NVML counted {seconds:time} of thermal throttling over the load (nvmlDeviceGetViolationStatus; "
                    "allowed {allowed:time})",
         "power_cap": "SW power cap (0x4) in {count} of {samples} samples: normal under GEMM (the GPU holds its power "
                      "limit)",
         "none": "none of {fail_on} in {samples} samples (seen: {seen})"})
POWER = Words(
    what="peak power under load",
    means="the GPU never drew its power under a full GEMM load: it is held back (clocks locked, power brake, a slow "
          "power supply) or did not run the load",
    todo="`nvidia-smi -q -d POWER,PERFORMANCE` (limit lowered, clocks locked, power brake)",
    say={"simulation": SIMULATION_NVML,
         "unsupported": "NVML gives no power reading or limit: {why}",
         "peak": "peak {peak_w:.1f} W of its {limit_w:.0f} W limit over {samples} samples",
         "lowered": "; the enforced limit is below the default {default_w:.0f} W (`nvidia-smi -q -d POWER`; "
                    "`nvidia-smi -pl` sets it)"})
TEMPERATURE = Words(
    what="temperature under load",
    means="the GPU ran close to its slowdown temperature: it will throttle under a longer load",
    todo="check its cooling (fans, airflow, inlet temperature) and the heatsink's contact",
    say={"simulation": SIMULATION_NVML,
         "unsupported": "NVML gives no temperature or slowdown threshold: {why}",
         "hottest": "the hottest of {samples} samples; the ceiling is NVML's slowdown threshold {slowdown_c:g} "
                    "{degrees} less the margin {margin:g} {degrees}"})
MEMORY_PATTERN = Words(
    what="memory pattern test",
    means="the GPU's memory read back wrong (or too little of it could be tested)",
    todo="drain the node, `nvidia-smi -q -d ECC,ROW_REMAPPER`, reset the GPU and test again; replace it if errors "
         "repeat",
    say={"wrong": "pattern {pattern} (pass {n}): {words} 8-byte words read back wrong; first bad byte offset {offset} "
                  "(0x{offset:x}, {offset:size} into the tested range)",
         "coverage": "covered {covered:size} = {share:.1f} % of {free:size} free < required {required:g} % "
                     "({yaml_path}.memory_pattern.coverage){why}",
         "passed": "{covered:size} ({share:.1f} % of the free memory) written and read back with {n} patterns "
                   "({names}) x {passes} pass(es) in {wall_s:.1f} s: no word wrong"})
NO_XID = Words(
    what={"test": "XID and ECC events during {during}", "run": "XID and ECC events during the run"},
    means="the driver reported a critical XID during the run",
    todo="drain the node; `dmesg | grep -i xid` and `nvidia-smi -q -d ECC,ROW_REMAPPER` say more; XIDs 48, 63, 64, "
         "79, 94, 95 need a GPU reset or replacement",
    say={"simulation": SIMULATION_NVML,
         "unwatched": "no GPU could be watched for XIDs: {reasons}",
         "not_failed": "recorded, not failed: {events}",
         "not_watched": "not watched: {gpus}",
         "stopped": "the watch stopped early: {error}",
         "none": "none on {gpus}", "notes": " ({notes})"})
ECC_GROWTH = Words(
    what="ECC errors and remapped rows over the run",
    means="memory errors or remapped rows grew during the run",
    todo="drain the node; `nvidia-smi -q -d ECC,ROW_REMAPPER`: a pending remap needs a GPU reset (`nvidia-smi -r`); "
         "errors that keep coming or a failed remap mean replacing the GPU",
    say={"simulation": SIMULATION_NVML,
         "sbe": "volatile single-bit (corrected) ECC errors", "dbe": "volatile double-bit (uncorrected) ECC errors",
         "rows": "remapped rows",
         "grew": "{label} grew by {grew} ({before} -> {after}; allowed {allowed})",
         "pending": "a row remap is pending ({rows}): reset the GPU before use (`nvidia-smi -r`)",
         "failed": "row remapping FAILED ({rows}): the GPU needs replacing",
         "unreadable": "NVML reads neither ECC counters nor remapped rows on this GPU",
         "passed": "no growth over {seconds:.0f} s, no remap pending or failed{unreadable}",
         "not_readable": "; not readable: {what}"})


@dataclass(frozen=True)
class ClockRule:
    WHAT = "clock-event reasons that fail"
    # clock-event reason names (wirecheck.node.gpu_sampling.CLOCK_EVENT_REASONS)
    fail_on: tuple[str, ...] = spec(Items(
        "[hw_slowdown, sw_thermal, hw_thermal, hw_power_brake]", Word(words=lambda: tuple(CLOCK_EVENT_REASONS)),
        "expected a list of clock-event reason names", lambda: f"write e.g. [hw_slowdown, sw_thermal, hw_thermal, "
        f"hw_power_brake]; known: {', '.join(CLOCK_EVENT_REASONS)}", non_empty=True))
    # nvmlDeviceGetViolationStatus THERMAL time over the load
    max_thermal_violation_s: float = spec(Qty('"0 ms"', "time"), key="max_thermal_violation")
    source: str = spec(Source())
    yaml_path: str


@dataclass(frozen=True)
class MemoryErrorGrowth:
    """Growth allowed over a run (events), per GPU."""

    WHAT = "memory-error growth allowed over a run"
    volatile_sbe: int = spec(Count(), "0")
    volatile_dbe: int = spec(Count(), "0")
    remapped_rows: int = spec(Count(), "0")
    source: str = spec(Source())
    yaml_path: str


@dataclass(frozen=True)
class XidRule:
    WHAT = "XID rule"
    allowed: tuple[int, ...] = spec(Items("[]", Count(minimum=1), "expected a list of XID numbers",
                                          "write allowed: [] (none) or e.g. [43]"))  # XIDs recorded but not failed
    wait_s: float = spec(Qty('"0.5 s"', "time", positive=True), key="wait")  # how late an event can be noticed
    source: str = spec(Source())
    yaml_path: str


def _loc(gpu: int, bus_id: str | None) -> str:
    return f"GPU{gpu} ({bus_id})" if bus_id else f"GPU{gpu}"


def _foreign(processes: list) -> str:
    return ", ".join(f"pid {p[0]}" + (f" ({p[1]})" if len(p) > 1 and p[1] else "") for p in processes)


def _figure(thresholds, *, figure: str, what: str, words: Words, gpu: int, bus_id: str | None, gpu_model: str | None,
            value: float | None, peers: dict, simulated: bool, foreign_processes: list | None, error: str | None,
            fmt: str, unit: str, scale: float, hardware: dict | None = None) -> Verdict:
    """A figure against its model's floor (the table's, else derived from the GPU's own peak: `hardware`,
    wirecheck.node.hardware.Hardware.as_dict) and against its peers (the other GPUs of its model).
    `value` is in the base unit of `fmt` (bytes/s, FLOP/s); it is recorded in `unit` (x `scale`)."""
    where, loc = f"GPU{gpu}", _loc(gpu, bus_id)
    if error or value is None:
        return not_measured(what, where, error, place=loc)
    if foreign_processes:
        return Verdict("", what, where, FAIL, measured=value * scale, unit=unit, fmt=fmt, place=loc,
                       hint=words.said("stop_them"),
                       details={"foreign_processes": foreign_processes,
                                "problems": [words.said("foreign", processes=_foreign(foreign_processes))]})
    health = thresholds.gpu_health
    floor, no_floor = health.floor_rule(figure, gpu_model, simulated, Hardware.from_dict(hardware))
    rule = health.peers(simulated)
    peer = below_median(value, list(peers.values()), rule.max_below_median, rule.mad_k) if peers else None
    if floor is None and peer is None:
        return skip(what, where, words.said("no_limit", no_floor=no_floor, value=render.FORMATS[fmt](value)),
                    measured=value * scale, unit=unit, fmt=fmt, place=loc)
    limit: dict[str, Any] = {"min": floor.min.to(unit) if floor else None}
    details: dict[str, Any] = {"peers": peers, "gpu_model": gpu_model}
    failed, source, yaml_path, note, made_by = [], None, None, "", None
    if floor is not None:
        source, yaml_path, made_by = floor.source, floor.yaml_path, floor.rule
        if value < floor.min:
            failed.append("floor")
    else:
        note = no_floor
    if peer is not None:
        limit.update(peers_median=peer.median * scale, max_below_median=rule.max_below_median)
        details.update(below_median=peer.below, named_by_peers=peer.named, scaled_mad=peer.scaled_mad * scale,
                       peers_source=rule.source, peers_yaml_path=rule.yaml_path)
        if peer.named:
            failed.append("peers")
            if source is None or failed == ["peers"]:
                source, yaml_path, made_by = rule.source, rule.yaml_path, PEERS_RULE
    return Verdict("", what, where, FAIL if failed else PASS, measured=value * scale, unit=unit, fmt=fmt, limit=limit,
                   bound="peers" if peer is not None else "floor", source=source, yaml_path=yaml_path, place=loc,
                   rule=made_by or PEERS_RULE, note=note, details={**details, "failed_by": failed})


@check("hbm_bandwidth", inputs=FromPhase(FIGURES, gpu_inputs.hbm), section=SECTION_GPU,
       figure=lambda inputs: f"hbm_{inputs.get('kind')}", words=HBM_BANDWIDTH,
       limits=(Floor("gpu_health.floors.<model>.hbm_copy", unit="GB/s", label="HBM copy (read+write)", peak="memory"),
               Floor("gpu_health.floors.<model>.hbm_read", unit="GB/s", label="HBM read", peak="memory")))
def hbm_bandwidth(thresholds, *, gpu: int, bus_id: str | None, gpu_model: str | None, kind: str,
                  bytes_per_s: float | None, peers: dict, simulated: bool, foreign_processes: list | None = None,
                  error: str | None = None, hardware: dict | None = None, noise: dict | None = None) -> Verdict:
    """HBM bandwidth of one GPU: `kind` copy (device to device, read+write counted) or read (a sum). `noise`:
    its repeats within the run (read by the history rule and calibration, not judged here)."""
    return _figure(thresholds, figure=f"hbm_{kind}", what=HBM_BANDWIDTH.judged(kind), words=HBM_BANDWIDTH, gpu=gpu,
                   bus_id=bus_id,
                   gpu_model=gpu_model, value=bytes_per_s, peers=peers, simulated=simulated,
                   foreign_processes=foreign_processes, error=error, fmt="bandwidth", unit="GB/s", scale=1e-9,
                   hardware=hardware)


@check("gemm_throughput", inputs=FromPhase(FIGURES, gpu_inputs.gemm), section=SECTION_GPU,
       figure=lambda inputs: f"gemm_{inputs.get('dtype')}", words=GEMM_THROUGHPUT,
       limits=(Floor("gpu_health.floors.<model>.gemm_bf16", unit="TFLOP/s", label="GEMM bf16", peak="bf16"),
               Floor("gpu_health.floors.<model>.gemm_fp8", unit="TFLOP/s", label="GEMM fp8", peak="fp8")))
def gemm_throughput(thresholds, *, gpu: int, bus_id: str | None, gpu_model: str | None, dtype: str,
                    flops_per_s: float | None, peers: dict, simulated: bool, foreign_processes: list | None = None,
                    unsupported: str | None = None, error: str | None = None, hardware: dict | None = None,
                    noise: dict | None = None) -> Verdict:
    """Dense square GEMM throughput (TFLOP/s = 2 n^3 / time) in `dtype` (bf16, fp8). `noise`: its repeats
    within the run (read by the history rule and calibration, not judged here)."""
    what = GEMM_THROUGHPUT.judged(dtype=dtype)
    if unsupported and not error:
        return skip(what, f"GPU{gpu}", unsupported)  # the worker's words: why this GPU has no such GEMM
    return _figure(thresholds, figure=f"gemm_{dtype}", what=what, words=GEMM_THROUGHPUT, gpu=gpu, bus_id=bus_id,
                   gpu_model=gpu_model, value=flops_per_s, peers=peers, simulated=simulated,
                   foreign_processes=foreign_processes, error=error, fmt="compute", unit="TFLOP/s", scale=1e-12,
                   hardware=hardware)


@check("sustained_throughput", inputs=FromPhase(SUSTAINED, gpu_inputs.sustained), section=SECTION_GPU,
       figure=lambda inputs: "sustained_bf16", words=SUSTAINED_THROUGHPUT,
       limits=(Floor("gpu_health.floors.<model>.sustained_bf16", unit="TFLOP/s", label="sustained bf16 (median window)",
                     peak="bf16"),))
def sustained_throughput(thresholds, *, gpu: int, bus_id: str | None, gpu_model: str | None,
                         flops_per_s: float | None, windows: dict | None, peers: dict, simulated: bool,
                         foreign_processes: list | None = None, error: str | None = None,
                         hardware: dict | None = None, noise: dict | None = None) -> Verdict:
    """The median window's bf16 TFLOP/s while every GPU of the node is loaded at once.
    `windows`: {"windows", "seconds", "first", "last", "min", "max"} of the load proper; `noise`: the
    windows as repeats (read by the history rule and calibration, not judged here)."""
    v = _figure(thresholds, figure="sustained_bf16", what=SUSTAINED_THROUGHPUT.judged(),
                words=SUSTAINED_THROUGHPUT, gpu=gpu, bus_id=bus_id, gpu_model=gpu_model, value=flops_per_s,
                peers=peers, simulated=simulated, foreign_processes=foreign_processes, error=error, fmt="compute",
                unit="TFLOP/s", scale=1e-12, hardware=hardware)
    if windows and windows.get("windows") and not v.skipped:
        span = SUSTAINED_THROUGHPUT.said("windows", windows=windows["windows"], seconds=windows["seconds"],
                                         first=windows["first"], last=windows["last"], lowest=windows["min"])
        v = v.amended(note="; ".join(n for n in (v.note, span) if n), details={**v.details, "windows": windows})
    return v


@check("gemm_matches_reference", section=SECTION_GPU, words=MATCHES_REFERENCE)  # inputs from two phases: the plugin's math_inputs
def gemm_matches_reference(thresholds, *, gpu: int, bus_id: str | None, phases: dict, error: str | None = None) -> Verdict:
    """Every compared product bit-identical to the reference, in every phase that ran
    (`phases`: {"figures"|"sustained": {"checked", "mismatched_results", "mismatched_elements",
    "first", "reference_nonfinite", "reference_digest"}})."""
    what, where = MATCHES_REFERENCE.judged(), f"GPU{gpu}"
    if not phases:
        return not_measured(what, where, error, place=_loc(gpu, bus_id))
    problems = []
    for name, m in phases.items():
        if m.get("reference_nonfinite"):
            problems.append(MATCHES_REFERENCE.said("nonfinite", phase=name, count=m["reference_nonfinite"]))
        if m.get("mismatched_results"):
            first = m.get("first") or {}
            at = (MATCHES_REFERENCE.said("result_at", at=first["result"]) if "result" in first else
                  MATCHES_REFERENCE.said("window_at", at=first["window"]) if "window" in first else "")
            problems.append(MATCHES_REFERENCE.said("differ", phase=name, results=m["mismatched_results"],
                                                   checked=m["checked"], elements=m["mismatched_elements"], at=at,
                                                   index=first.get("index"), row=first.get("row"), col=first.get("col")))
    digests = {name: m["reference_digest"] for name, m in phases.items() if m.get("reference_digest")}
    if len(set(digests.values())) > 1:
        problems.append(MATCHES_REFERENCE.said("digests", digests=", ".join(f"{k} {v}" for k, v in digests.items())))
    if error:
        problems.append(error)
    checked = {name: m.get("checked", 0) for name, m in phases.items()}
    measured = {name: m.get("mismatched_elements", 0) for name, m in phases.items()}
    if problems:
        return no_problems(what, where, problems, measured=measured, source=BITWISE, place=_loc(gpu, bus_id))
    counts = ", ".join(f"{k} {n}" for k, n in checked.items())
    return Verdict("", what, where, PASS, note=MATCHES_REFERENCE.said("identical", total=sum(checked.values()),
                                                                      counts=counts),
                   measured=measured, source=BITWISE, place=_loc(gpu, bus_id), details={"checked": checked})


@check("sustained_clocks", inputs=FromPhase(SUSTAINED, gpu_inputs.clocks), section=SECTION_GPU,
       limits=(Rule("gpu_health.clocks", ClockRule, '{fail_on: [hw_slowdown, sw_thermal, hw_thermal, '
                    'hw_power_brake], max_thermal_violation: "0 ms", source: ...}'),), words=CLOCKS)
def sustained_clocks(thresholds, *, gpu: int, bus_id: str | None, reason_counts: dict, samples: int,
                     violations_ns: dict, simulated: bool, unsupported: str | None = None,
                     error: str | None = None) -> Verdict:
    """No clock-event reason of `gpu_health.clocks.fail_on` in any sample under load, and NVML's
    thermal throttle time within its limit. `reason_counts`: {"0x4": samples with that mask}."""
    what, where = CLOCKS.judged(), f"GPU{gpu}"
    if simulated:
        return skip(what, where, CLOCKS.said("simulation"))
    if error:
        return not_measured(what, where, error, place=_loc(gpu, bus_id))
    if unsupported:
        return skip(what, where, CLOCKS.said("unsupported", why=unsupported))
    rule = thresholds.gpu_health.clocks
    seen: dict[str, int] = {}
    for mask, count in reason_counts.items():
        for name in decode_reasons(int(mask, 16)):
            seen[name] = seen.get(name, 0) + count
    problems = [CLOCKS.said("reason", reason=REASON_TEXT[name], mask=CLOCK_EVENT_REASONS[name], count=seen[name],
                            samples=samples) for name in rule.fail_on if name in seen]
    thermal_ns = violations_ns.get("thermal")
    if thermal_ns is not None and thermal_ns / 1e9 > rule.max_thermal_violation_s:
        problems.append(CLOCKS.said("thermal", seconds=thermal_ns / 1e9, allowed=rule.max_thermal_violation_s))
    note = ""
    if "sw_power_cap" in seen:
        note = CLOCKS.said("power_cap", count=seen["sw_power_cap"], samples=samples)
    measured = {"reasons": seen, "samples": samples, "violations_ns": violations_ns}
    if problems:
        return no_problems(what, where, problems, measured=measured, source=rule.source, yaml_path=rule.yaml_path,
                           note=note, place=_loc(gpu, bus_id))
    shown = ", ".join(f"{REASON_TEXT.get(n, n)} {c}" for n, c in seen.items()) or "none"
    none = CLOCKS.said("none", fail_on=", ".join(rule.fail_on), samples=samples, seen=shown)
    return Verdict("", what, where, PASS, note=none + (f"; {note}" if note else ""), measured=measured,
                   source=rule.source, yaml_path=rule.yaml_path, place=_loc(gpu, bus_id))


@check("sustained_power", inputs=FromPhase(SUSTAINED, gpu_inputs.power), section=SECTION_GPU,
       limits=(Value("gpu_health.power.min_share_of_limit", unit="%"),), words=POWER)
def sustained_power(thresholds, *, gpu: int, bus_id: str | None, peak_w: float | None, limit_w: float | None,
                    default_limit_w: float | None, samples: int, simulated: bool, unsupported: str | None = None,
                    error: str | None = None) -> Verdict:
    """Under load the GPU draws at least `gpu_health.power.min_share_of_limit` of its enforced
    power limit (DCGM's targeted power)."""
    what, where = POWER.judged(), f"GPU{gpu}"
    if simulated:
        return skip(what, where, POWER.said("simulation"))
    if error:
        return not_measured(what, where, error, place=_loc(gpu, bus_id))
    if unsupported or peak_w is None or not limit_w:
        return skip(what, where, POWER.said("unsupported", why=unsupported or "no power limit"))
    rule = thresholds.gpu_health.power
    share = peak_w / limit_w
    lowered = (POWER.said("lowered", default_w=default_limit_w)
               if default_limit_w and limit_w < default_limit_w - 0.5 else "")
    return Verdict("", what, where, PASS if share >= rule.value else FAIL, measured=share, unit="of the power limit",
                   fmt="percent", limit={"min": rule.value}, bound="floor", source=rule.source,
                   yaml_path=rule.yaml_path, place=_loc(gpu, bus_id),
                   note=POWER.said("peak", peak_w=peak_w, limit_w=limit_w, samples=samples) + lowered,
                   details={"peak_w": peak_w, "limit_w": limit_w, "default_limit_w": default_limit_w})


@check("sustained_temperature", inputs=FromPhase(SUSTAINED, gpu_inputs.temperature), section=SECTION_GPU,
       limits=(Value("gpu_health.temperature.margin_to_slowdown", unit=DEGREES_C),), words=TEMPERATURE)
def sustained_temperature(thresholds, *, gpu: int, bus_id: str | None, max_c: float | None, slowdown_c: float | None,
                          samples: int, simulated: bool, unsupported: str | None = None,
                          error: str | None = None) -> Verdict:
    """The hottest sample stays `gpu_health.temperature.margin_to_slowdown` below NVML's own
    slowdown threshold for this GPU."""
    what, where = TEMPERATURE.judged(), f"GPU{gpu}"
    if simulated:
        return skip(what, where, TEMPERATURE.said("simulation"))
    if error:
        return not_measured(what, where, error, place=_loc(gpu, bus_id))
    if unsupported or max_c is None or slowdown_c is None:
        return skip(what, where, TEMPERATURE.said("unsupported", why=unsupported or "no threshold"))
    rule = thresholds.gpu_health.temperature
    allowed = slowdown_c - rule.value
    return Verdict("", what, where, PASS if max_c <= allowed else FAIL, measured=max_c, unit=DEGREES_C,
                   fmt="temperature", limit={"max": allowed}, bound="ceiling", source=rule.source,
                   yaml_path=rule.yaml_path, place=_loc(gpu, bus_id),
                   note=TEMPERATURE.said("hottest", samples=samples, slowdown_c=slowdown_c, margin=rule.value,
                                         degrees=DEGREES_C), details={"slowdown_c": slowdown_c})


@check("memory_pattern", inputs=FromPhase(MEMORY, gpu_inputs.memory), section=SECTION_GPU,
       words=MEMORY_PATTERN)
def memory_pattern(thresholds, *, gpu: int, bus_id: str | None, result: dict | None, simulated: bool,
                   error: str | None = None) -> Verdict:
    """Every pattern read back as written, over at least `memory_pattern.coverage` of the free memory.
    `result`: {"free_bytes", "bytes_covered", "passes", "patterns": [{"pass", "pattern",
    "mismatched_words", "first_bad_offset", "seconds"}], "allocation_error", "wall_s"}."""
    what, where = MEMORY_PATTERN.judged(), f"GPU{gpu}"
    if error or not result:
        return not_measured(what, where, error, place=_loc(gpu, bus_id))
    settings = thresholds.gpu_health.settings(simulated)
    problems = []
    for p in result["patterns"]:
        if p["mismatched_words"]:
            problems.append(MEMORY_PATTERN.said("wrong", pattern=p["pattern"], n=p["pass"], words=p["mismatched_words"],
                                                offset=p["first_bad_offset"]))
    free, covered = result["free_bytes"], result["bytes_covered"]
    share = covered / free if free else 0.0
    # the target is rounded down to whole 8-byte words
    if covered + 8 < settings.memory_coverage * free:
        problems.append(MEMORY_PATTERN.said("coverage", covered=covered, share=share * 100, free=free,
                                            required=settings.memory_coverage * 100, yaml_path=settings.yaml_path,
                                            why=f": {result['allocation_error']}" if result.get("allocation_error") else ""))
    names = sorted({p["pattern"] for p in result["patterns"]})
    measured = {"bytes_covered": covered, "mismatched_words": sum(p["mismatched_words"] for p in result["patterns"])}
    if problems:
        return no_problems(what, where, problems, measured=measured, place=_loc(gpu, bus_id))
    return Verdict("", what, where, PASS,
                   note=MEMORY_PATTERN.said("passed", covered=covered, share=share * 100, n=len(names),
                                            names=", ".join(names), passes=result["passes"], wall_s=result["wall_s"]),
                   measured=measured, place=_loc(gpu, bus_id),
                   details={"wall_s": result["wall_s"]})


def failing_event(event: dict, allowed: tuple[int, ...]) -> bool:
    """An event that fails a run: an XID not allowed, an uncorrectable ECC error, a failed row remap, a lost GPU."""
    if event["kind"] == "xid":
        return event.get("code") not in allowed
    return event["kind"] != "ecc_sbe"  # a corrected error is counted by the ECC growth check instead


@check("no_xid", section=SECTION_GPU,
       limits=(Rule("gpu_health.xid", XidRule, '{allowed: [], wait: "0.5 s", source: ...}'),), words=NO_XID)
def no_xid(thresholds, *, events: list, watched: list, unwatched: dict, error: str | None, simulated: bool,
           during: str | None = None) -> Verdict:
    """No critical XID (nor uncorrectable ECC or row-remap failure event) while the suite ran
    (`during`: the test it arrived in; None: the whole run). `events`: [{"time", "gpu", "bus_id",
    "kind", "code"}] as wirecheck.node.xid_events recorded them."""
    what = NO_XID.judged("test", during=during) if during else NO_XID.judged("run")
    rule = thresholds.gpu_health.xid
    failing = [e for e in events if failing_event(e, rule.allowed)]
    gpus = sorted({e["gpu"] for e in failing if e.get("gpu") is not None})
    where = ",".join(f"GPU{g}" for g in gpus) or None
    if failing:
        return no_problems(what, where, [describe_event(e) for e in failing], measured=[e.get("code") for e in failing],
                           source=rule.source, yaml_path=rule.yaml_path)
    if simulated:
        return skip(what, None, NO_XID.said("simulation"))
    if not watched:
        reasons = "; ".join(f"{g}: {r}" for g, r in unwatched.items()) or error or "no GPU registered"
        return skip(what, None, NO_XID.said("unwatched", reasons=reasons))
    notes = []
    others = [e for e in events if not failing_event(e, rule.allowed)]
    if others:
        notes.append(NO_XID.said("not_failed", events="; ".join(describe_event(e) for e in others)))
    if unwatched:
        notes.append(NO_XID.said("not_watched", gpus="; ".join(f"{g}: {r}" for g, r in unwatched.items())))
    if error:
        notes.append(NO_XID.said("stopped", error=error))
    note = NO_XID.said("none", gpus=", ".join(f"GPU{g}" for g in watched))
    return Verdict("", what, None, PASS, note=note + (NO_XID.said("notes", notes="; ".join(notes)) if notes else ""),
                   measured=[], source=rule.source, yaml_path=rule.yaml_path)


def _rows(rows: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in rows.items())


def _grew(before: Any, after: Any) -> int | None:
    if isinstance(before, dict) or isinstance(after, dict):  # {"unsupported": reason}
        return None
    return after - before


@check("ecc_row_remap_growth", section=SECTION_GPU,
       limits=(Rule("gpu_health.memory_errors", MemoryErrorGrowth,
                    "{volatile_sbe: 0, volatile_dbe: 0, remapped_rows: 0, source: ...}"),), words=ECC_GROWTH)
def ecc_row_remap_growth(thresholds, *, gpu: int, bus_id: str | None, before: dict, after: dict, seconds: float,
                         simulated: bool) -> Verdict:
    """Volatile ECC errors and remapped rows grew no more than `gpu_health.memory_errors` allows
    between the session's first NVML reading and its last, and no remap is pending or failed at
    the end. `before`/`after`: wirecheck.node.memory_errors readings."""
    what, where = ECC_GROWTH.judged(), f"GPU{gpu}"
    if simulated:
        return skip(what, where, ECC_GROWTH.said("simulation"))
    limits = thresholds.gpu_health.memory_errors
    problems, unreadable, measured = [], [], {}
    for key, label, allowed in (("volatile_sbe", ECC_GROWTH.said("sbe"), limits.volatile_sbe),
                                ("volatile_dbe", ECC_GROWTH.said("dbe"), limits.volatile_dbe)):
        grew = _grew(before.get(key), after.get(key))
        if grew is None:
            unreadable.append(label)
            continue
        measured[key] = grew
        if grew > allowed:
            problems.append(ECC_GROWTH.said("grew", label=label, grew=grew, before=before[key], after=after[key],
                                            allowed=allowed))
    rows_before, rows_after = before.get("remapped_rows"), after.get("remapped_rows")
    if not isinstance(rows_before, dict) or "unsupported" in rows_before or "unsupported" in (rows_after or {}):
        unreadable.append(ECC_GROWTH.said("rows"))
    else:
        grew = sum(rows_after[k] - rows_before[k] for k in ("correctable", "uncorrectable"))
        measured["remapped_rows"] = grew
        if grew > limits.remapped_rows:
            problems.append(ECC_GROWTH.said("grew", label=ECC_GROWTH.said("rows"), grew=grew, before=_rows(rows_before),
                                            after=_rows(rows_after), allowed=limits.remapped_rows))
        if rows_after["pending"]:
            problems.append(ECC_GROWTH.said("pending", rows=_rows(rows_after)))
        if rows_after["failure"]:
            problems.append(ECC_GROWTH.said("failed", rows=_rows(rows_after)))
    if problems:
        return no_problems(what, where, problems, measured=measured, source=limits.source, yaml_path=limits.yaml_path,
                           place=_loc(gpu, bus_id))
    if len(unreadable) == 3:
        return skip(what, where, ECC_GROWTH.said("unreadable"))
    note = ECC_GROWTH.said("not_readable", what=", ".join(unreadable)) if unreadable else ""
    return Verdict("", what, where, PASS, note=ECC_GROWTH.said("passed", seconds=seconds, unreadable=note),
                   measured=measured, source=limits.source, yaml_path=limits.yaml_path, place=_loc(gpu, bus_id))
