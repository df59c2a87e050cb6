"""Each GPU on its own: HBM bandwidth, GEMM throughput, results against a reference, the
sustained load (throughput, clock-event reasons, power, temperature), the memory pattern test,
XIDs during the run, and memory-error counters grown over the run.

Figures (HBM, GEMM, sustained TFLOP/s) fail below their GPU model's floor, and also when the
GPU is below its node's other GPUs of the same model by more than the peer rule allows
(wirecheck.core.peer_stats, the fleet's rule inside a node), whatever the floor: on an 8-GPU
node that GPU is the straggler every data-parallel step waits for. Every failure says what to
do. Inputs come from wirecheck.gpu.inputs, as plain data.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from wirecheck.checks import check
from wirecheck.core.peer_stats import RULE as PEERS_RULE, below_median
from wirecheck.core.quantity import DEGREES_C, format_bytes, format_bw, format_time
from wirecheck.core.verdict import FAIL, PASS, Verdict, cite, no_problems, skip
from wirecheck.node.gpu_sampling import CLOCK_EVENT_REASONS, REASON_TEXT, decode_reasons
from wirecheck.node.hardware import Hardware
from wirecheck.node.xid_events import describe as describe_event

SIMULATION = "simulation: no NVML on CPU ranks"
BITWISE = ("exact: a bf16 GEMM repeated on one H200 gave bitwise-identical results (issue 20's probe, "
           "research/gpu-health-anchors.md)")

ADVICE = {
    "hbm": "HBM slow: reseat or replace the GPU; compare `nvidia-smi -q -d CLOCK,PERFORMANCE` with its peers "
           "(memory clock held down?) and check `nvidia-smi -q -d ECC,ROW_REMAPPER`",
    "gemm": "Compute slow: check `nvidia-smi -q -d CLOCK,PERFORMANCE,POWER` (clocks held, power limit lowered, "
            "another process?), then reseat or replace the GPU",
    "sustained": "Cannot hold its throughput under load: check its cooling (fans, airflow, inlet temperature) and "
                 "power delivery; `nvidia-smi -q -d PERFORMANCE` shows which limit held it",
}


def _loc(gpu: int, bus_id: str | None) -> str:
    return f"GPU{gpu} ({bus_id})" if bus_id else f"GPU{gpu}"


def _tflops(value: float) -> str:
    # CPU ranks in simulation compute GFLOP/s: shown with their digits, not as 0.0 TFLOP/s
    return f"{value / 1e12:.1f} TFLOP/s" if value >= 1e12 else f"{value / 1e9:.3g} GFLOP/s"


def _gbs(value: float) -> str:
    return format_bw(value) if value >= 1e9 else f"{value / 1e9:.3g} GB/s"


def _foreign(processes: list) -> str:
    return ", ".join(f"pid {p[0]}" + (f" ({p[1]})" if len(p) > 1 and p[1] else "") for p in processes)


def _figure(thresholds, *, figure: str, what: str, advice: str, gpu: int, bus_id: str | None, gpu_model: str | None,
            value: float | None, peers: dict, simulated: bool, foreign_processes: list | None, error: str | None,
            fmt: Callable[[float], str], unit: str, scale: float, hardware: dict | None = None) -> Verdict:
    """A figure against its model's floor (the table's, else derived from the GPU's own peak: `hardware`,
    wirecheck.node.hardware.Hardware.as_dict) and against its peers (the other GPUs of its model)."""
    where, loc = f"GPU{gpu}", _loc(gpu, bus_id)
    if error or value is None:
        return Verdict("", what, where, FAIL, f"{what} on {loc}: not measured: {error}")
    if foreign_processes:
        return Verdict("", what, where, FAIL,
                       f"{what} on {loc}: measured {fmt(value)} while other processes computed on the GPU "
                       f"({_foreign(foreign_processes)}): the figure is invalid; stop them or pick another node",
                       measured=value * scale, unit=unit, details={"foreign_processes": foreign_processes})
    health = thresholds.gpu_health
    floor, no_floor = health.floor_rule(figure, gpu_model, simulated, Hardware.from_dict(hardware))
    rule = health.peers(simulated)
    peer = below_median(value, list(peers.values()), rule.max_below_median, rule.mad_k) if peers else None
    if floor is None and peer is None:
        return skip(what, where, f"{no_floor}; no other GPU of that model to compare with; measured {fmt(value)}",
                    measured=value * scale, unit=unit)
    limit: dict[str, Any] = {"min": floor.min * scale if floor else None}
    details: dict[str, Any] = {"peers": peers, "gpu_model": gpu_model}
    parts, failed, source, yaml_path, made_by = [], [], None, None, None
    if floor is not None:
        source, yaml_path, made_by = floor.source, floor.yaml_path, floor.rule
        if value < floor.min:
            failed.append("floor")
            parts.append(f"measured {fmt(value)} < floor {fmt(floor.min)} ({cite(floor.yaml_path, floor.source)})")
        else:
            parts.append(f"measured {fmt(value)} >= {fmt(floor.min)} ({cite(floor.yaml_path, floor.source)})")
    else:
        parts.append(f"measured {fmt(value)}; {no_floor}")
    if peer is not None:
        limit.update(peers_median=peer.median * scale, max_below_median=rule.max_below_median)
        details.update(below_median=peer.below, named_by_peers=peer.named)
        text = peer.describe(fmt).replace(f" of {peer.n_reference} ", f" of its {peer.n_reference} peer(s) ")
        if peer.named:
            failed.append("peers")
            if source is None or failed == ["peers"]:
                source, yaml_path, made_by = rule.source, rule.yaml_path, PEERS_RULE
            parts.append(f"{text}: more than the {rule.max_below_median * 100:g} % its peers allow "
                         f"({cite(rule.yaml_path, rule.source)})")
        else:
            parts.append(text)
    message = f"{what} on {loc}: " + "; ".join(parts)
    if failed:
        message += f". {advice}"
    return Verdict("", what, where, FAIL if failed else PASS, message, measured=value * scale, unit=unit, limit=limit,
                   source=source, yaml_path=yaml_path, rule=made_by or PEERS_RULE, details={**details, "failed_by": failed})


@check("hbm_bandwidth")
def hbm_bandwidth(thresholds, *, gpu: int, bus_id: str | None, gpu_model: str | None, kind: str,
                  bytes_per_s: float | None, peers: dict, simulated: bool, foreign_processes: list | None = None,
                  error: str | None = None, hardware: dict | None = None) -> Verdict:
    """HBM bandwidth of one GPU: `kind` copy (device to device, read+write counted) or read (a sum)."""
    what = {"copy": "HBM copy bandwidth (read+write)", "read": "HBM read bandwidth"}[kind]
    return _figure(thresholds, figure=f"hbm_{kind}", what=what, advice=ADVICE["hbm"], gpu=gpu, bus_id=bus_id,
                   gpu_model=gpu_model, value=bytes_per_s, peers=peers, simulated=simulated,
                   foreign_processes=foreign_processes, error=error, fmt=_gbs, unit="GB/s", scale=1e-9, hardware=hardware)


@check("gemm_throughput")
def gemm_throughput(thresholds, *, gpu: int, bus_id: str | None, gpu_model: str | None, dtype: str,
                    flops_per_s: float | None, peers: dict, simulated: bool, foreign_processes: list | None = None,
                    unsupported: str | None = None, error: str | None = None, hardware: dict | None = None) -> Verdict:
    """Dense square GEMM throughput (TFLOP/s = 2 n^3 / time) in `dtype` (bf16, fp8)."""
    what = f"dense GEMM {dtype} throughput"
    if unsupported and not error:
        return skip(what, f"GPU{gpu}", unsupported)
    return _figure(thresholds, figure=f"gemm_{dtype}", what=what, advice=ADVICE["gemm"], gpu=gpu, bus_id=bus_id,
                   gpu_model=gpu_model, value=flops_per_s, peers=peers, simulated=simulated,
                   foreign_processes=foreign_processes, error=error, fmt=_tflops, unit="TFLOP/s", scale=1e-12,
                   hardware=hardware)


@check("sustained_throughput")
def sustained_throughput(thresholds, *, gpu: int, bus_id: str | None, gpu_model: str | None,
                         flops_per_s: float | None, windows: dict | None, peers: dict, simulated: bool,
                         foreign_processes: list | None = None, error: str | None = None,
                         hardware: dict | None = None) -> Verdict:
    """The median window's bf16 TFLOP/s while every GPU of the node is loaded at once.
    `windows`: {"windows", "seconds", "first", "last", "min", "max"} of the load proper."""
    v = _figure(thresholds, figure="sustained_bf16", what="sustained bf16 GEMM throughput (median window)",
                advice=ADVICE["sustained"], gpu=gpu, bus_id=bus_id, gpu_model=gpu_model, value=flops_per_s,
                peers=peers, simulated=simulated, foreign_processes=foreign_processes, error=error, fmt=_tflops,
                unit="TFLOP/s", scale=1e-12, hardware=hardware)
    if windows and windows.get("windows"):
        span = (f" [{windows['windows']} windows over {windows['seconds']:.0f} s: first {_tflops(windows['first'])}, "
                f"last {_tflops(windows['last'])}, lowest {_tflops(windows['min'])}]")
        v = replace(v, message=v.message + span, details={**v.details, "windows": windows})
    return v


@check("gemm_matches_reference")
def gemm_matches_reference(thresholds, *, gpu: int, bus_id: str | None, phases: dict, error: str | None = None) -> Verdict:
    """Every compared product bit-identical to the reference, in every phase that ran
    (`phases`: {"figures"|"sustained": {"checked", "mismatched_results", "mismatched_elements",
    "first", "reference_nonfinite", "reference_digest"}})."""
    what, where = "GEMM results against the reference", f"GPU{gpu}"
    if not phases:
        return Verdict("", what, where, FAIL, f"{what} on {_loc(gpu, bus_id)}: not measured: {error}")
    problems = []
    for name, m in phases.items():
        if m.get("reference_nonfinite"):
            problems.append(f"{name}: the reference has {m['reference_nonfinite']} non-finite elements (the inputs "
                            "are finite: the GPU computed NaN or Inf)")
        if m.get("mismatched_results"):
            first = m.get("first") or {}
            at = (f"result {first['result']}, " if "result" in first else
                  f"window {first['window']}, " if "window" in first else "")
            problems.append(f"{name}: {m['mismatched_results']} of {m['checked']} results differ from the reference, "
                            f"{m['mismatched_elements']} elements in all; first: {at}element {first.get('index')} "
                            f"(row {first.get('row')}, col {first.get('col')})")
    digests = {name: m["reference_digest"] for name, m in phases.items() if m.get("reference_digest")}
    if len(set(digests.values())) > 1:
        problems.append("the reference computed again for the sustained load differs from the first one "
                        f"({', '.join(f'{k} {v}' for k, v in digests.items())}): the same inputs gave other bits")
    if error:
        problems.append(error)
    checked = {name: m.get("checked", 0) for name, m in phases.items()}
    measured = {name: m.get("mismatched_elements", 0) for name, m in phases.items()}
    if problems:
        return no_problems(what, where, problems, measured=measured,
                           intro=f"{_loc(gpu, bus_id)} computed wrong GEMM results (silent data corruption: drain the "
                                 "node and replace the GPU; the same inputs must give the same bits)",
                           source=BITWISE)
    counts = ", ".join(f"{k} {n}" for k, n in checked.items())
    return Verdict("", what, where, PASS,
                   f"{what} on {_loc(gpu, bus_id)}: all {sum(checked.values())} compared products bit-identical ({counts})",
                   measured=measured, source=BITWISE, details={"checked": checked})


@check("sustained_clocks")
def sustained_clocks(thresholds, *, gpu: int, bus_id: str | None, reason_counts: dict, samples: int,
                     violations_ns: dict, simulated: bool, unsupported: str | None = None,
                     error: str | None = None) -> Verdict:
    """No clock-event reason of `gpu_health.clocks.fail_on` in any sample under load, and NVML's
    thermal throttle time within its limit. `reason_counts`: {"0x4": samples with that mask}."""
    what, where = "clock-event reasons under load", f"GPU{gpu}"
    if simulated:
        return skip(what, where, SIMULATION)
    if error:
        return Verdict("", what, where, FAIL, f"{what} on {_loc(gpu, bus_id)}: not measured: {error}")
    if unsupported:
        return skip(what, where, f"NVML gives no clock-event reasons: {unsupported}")
    rule = thresholds.gpu_health.clocks
    seen: dict[str, int] = {}
    for mask, count in reason_counts.items():
        for name in decode_reasons(int(mask, 16)):
            seen[name] = seen.get(name, 0) + count
    problems = [f"{REASON_TEXT[name]} (0x{CLOCK_EVENT_REASONS[name]:x}) in {seen[name]} of {samples} samples"
                for name in rule.fail_on if name in seen]
    thermal_ns = violations_ns.get("thermal")
    if thermal_ns is not None and thermal_ns / 1e9 > rule.max_thermal_violation_s:
        problems.append(f"NVML counted {format_time(thermal_ns / 1e9)} of thermal throttling over the load "
                        f"(nvmlDeviceGetViolationStatus; allowed {format_time(rule.max_thermal_violation_s)})")
    note = ""
    if "sw_power_cap" in seen:
        note = (f"; SW power cap (0x4) in {seen['sw_power_cap']} of {samples} samples: normal under GEMM "
                "(the GPU holds its power limit)")
    measured = {"reasons": seen, "samples": samples, "violations_ns": violations_ns}
    if problems:
        v = no_problems(what, where, problems, measured=measured,
                        intro=f"{_loc(gpu, bus_id)} slowed down under load (thermal: check fans, airflow, inlet "
                              "temperature and the heatsink; HW slowdown or power brake: check the power supply and "
                              "`nvidia-smi -q -d PERFORMANCE`, `dmesg`)",
                        source=rule.source, yaml_path=rule.yaml_path)
        return replace(v, message=v.message + note)
    shown = ", ".join(f"{REASON_TEXT.get(n, n)} {c}" for n, c in seen.items()) or "none"
    return Verdict("", what, where, PASS, f"{what} on {_loc(gpu, bus_id)}: none of {', '.join(rule.fail_on)} in "
                   f"{samples} samples (seen: {shown}){note}", measured=measured, source=rule.source,
                   yaml_path=rule.yaml_path)


@check("sustained_power")
def sustained_power(thresholds, *, gpu: int, bus_id: str | None, peak_w: float | None, limit_w: float | None,
                    default_limit_w: float | None, samples: int, simulated: bool, unsupported: str | None = None,
                    error: str | None = None) -> Verdict:
    """Under load the GPU draws at least `gpu_health.power.min_share_of_limit` of its enforced
    power limit (DCGM's targeted power)."""
    what, where = "peak power under load", f"GPU{gpu}"
    if simulated:
        return skip(what, where, SIMULATION)
    if error:
        return Verdict("", what, where, FAIL, f"{what} on {_loc(gpu, bus_id)}: not measured: {error}")
    if unsupported or peak_w is None or not limit_w:
        return skip(what, where, f"NVML gives no power reading or limit: {unsupported or 'no power limit'}")
    rule = thresholds.gpu_health.power
    share = peak_w / limit_w
    lowered = (f"; the enforced limit is below the default {default_limit_w:.0f} W (`nvidia-smi -q -d POWER`; "
               "`nvidia-smi -pl` sets it)" if default_limit_w and limit_w < default_limit_w - 0.5 else "")
    ok = share >= rule.value
    message = (f"{what} on {_loc(gpu, bus_id)}: {peak_w:.1f} W = {share * 100:.1f} % of its {limit_w:.0f} W limit "
               f"{'>=' if ok else '<'} required {rule.value * 100:g} % over {samples} samples "
               f"({cite(rule.yaml_path, rule.source)}){lowered}")
    if not ok:
        message += (". The GPU never drew its power under a full GEMM load: it is held back (clocks locked, power "
                    "brake, a slow power supply) or did not run the load; check `nvidia-smi -q -d POWER,PERFORMANCE`")
    return Verdict("", what, where, PASS if ok else FAIL, message, measured=share, unit="of the power limit",
                   limit={"min": rule.value}, source=rule.source, yaml_path=rule.yaml_path,
                   details={"peak_w": peak_w, "limit_w": limit_w, "default_limit_w": default_limit_w})


@check("sustained_temperature")
def sustained_temperature(thresholds, *, gpu: int, bus_id: str | None, max_c: float | None, slowdown_c: float | None,
                          samples: int, simulated: bool, unsupported: str | None = None,
                          error: str | None = None) -> Verdict:
    """The hottest sample stays `gpu_health.temperature.margin_to_slowdown` below NVML's own
    slowdown threshold for this GPU."""
    what, where = "temperature under load", f"GPU{gpu}"
    if simulated:
        return skip(what, where, SIMULATION)
    if error:
        return Verdict("", what, where, FAIL, f"{what} on {_loc(gpu, bus_id)}: not measured: {error}")
    if unsupported or max_c is None or slowdown_c is None:
        return skip(what, where, f"NVML gives no temperature or slowdown threshold: {unsupported or 'no threshold'}")
    rule = thresholds.gpu_health.temperature
    allowed = slowdown_c - rule.value
    ok = max_c <= allowed
    message = (f"{what} on {_loc(gpu, bus_id)}: hottest {max_c:g} {DEGREES_C} {'<=' if ok else '>'} allowed "
               f"{allowed:g} {DEGREES_C} (NVML's slowdown threshold {slowdown_c:g} {DEGREES_C} less the margin "
               f"{rule.value:g} {DEGREES_C}; {cite(rule.yaml_path, rule.source)}) over {samples} samples")
    if not ok:
        message += (". It will throttle under a longer load: check its cooling (fans, airflow, inlet temperature, "
                    "the heatsink's contact)")
    return Verdict("", what, where, PASS if ok else FAIL, message, measured=max_c, unit=DEGREES_C,
                   limit={"max": allowed}, source=rule.source, yaml_path=rule.yaml_path,
                   details={"slowdown_c": slowdown_c})


@check("memory_pattern")
def memory_pattern(thresholds, *, gpu: int, bus_id: str | None, result: dict | None, simulated: bool,
                   error: str | None = None) -> Verdict:
    """Every pattern read back as written, over at least `memory_pattern.coverage` of the free memory.
    `result`: {"free_bytes", "bytes_covered", "passes", "patterns": [{"pass", "pattern",
    "mismatched_words", "first_bad_offset", "seconds"}], "allocation_error", "wall_s"}."""
    what, where = "memory pattern test", f"GPU{gpu}"
    if error or not result:
        return Verdict("", what, where, FAIL, f"{what} on {_loc(gpu, bus_id)}: not measured: {error}")
    settings = thresholds.gpu_health.settings(simulated)
    problems = []
    for p in result["patterns"]:
        if p["mismatched_words"]:
            offset = p["first_bad_offset"]
            problems.append(f"pattern {p['pattern']} (pass {p['pass']}): {p['mismatched_words']} 8-byte words read back "
                            f"wrong; first bad byte offset {offset} (0x{offset:x}, {format_bytes(offset)} into the tested range)")
    free, covered = result["free_bytes"], result["bytes_covered"]
    share = covered / free if free else 0.0
    # the target is rounded down to whole 8-byte words
    if covered + 8 < settings.memory_coverage * free:
        problems.append(f"covered {format_bytes(covered)} = {share * 100:.1f} % of {format_bytes(free)} free < required "
                        f"{settings.memory_coverage * 100:g} % ({settings.yaml_path}.memory_pattern.coverage)"
                        + (f": {result['allocation_error']}" if result.get("allocation_error") else ""))
    names = sorted({p["pattern"] for p in result["patterns"]})
    measured = {"bytes_covered": covered, "mismatched_words": sum(p["mismatched_words"] for p in result["patterns"])}
    if problems:
        return no_problems(what, where, problems, measured=measured,
                           intro=f"{_loc(gpu, bus_id)}: memory read back wrong or not tested (drain the node; check "
                                 "`nvidia-smi -q -d ECC,ROW_REMAPPER`; reset the GPU and test again; replace it if "
                                 "errors repeat)")
    return Verdict("", what, where, PASS,
                   f"{what} on {_loc(gpu, bus_id)}: {format_bytes(covered)} ({share * 100:.1f} % of the free memory) "
                   f"written and read back with {len(names)} patterns ({', '.join(names)}) x {result['passes']} pass(es) "
                   f"in {result['wall_s']:.1f} s: no word wrong", measured=measured,
                   details={"wall_s": result["wall_s"]})


def failing_event(event: dict, allowed: tuple[int, ...]) -> bool:
    """An event that fails a run: an XID not allowed, an uncorrectable ECC error, a failed row remap, a lost GPU."""
    if event["kind"] == "xid":
        return event.get("code") not in allowed
    return event["kind"] != "ecc_sbe"  # a corrected error is counted by the ECC growth check instead


@check("no_xid")
def no_xid(thresholds, *, events: list, watched: list, unwatched: dict, error: str | None, simulated: bool,
           during: str | None = None) -> Verdict:
    """No critical XID (nor uncorrectable ECC or row-remap failure event) while the suite ran
    (`during`: the test it arrived in; None: the whole run). `events`: [{"time", "gpu", "bus_id",
    "kind", "code"}] as wirecheck.node.xid_events recorded them."""
    what = "XID and ECC events" + (f" during {during}" if during else " during the run")
    rule = thresholds.gpu_health.xid
    failing = [e for e in events if failing_event(e, rule.allowed)]
    gpus = sorted({e["gpu"] for e in failing if e.get("gpu") is not None})
    where = ",".join(f"GPU{g}" for g in gpus) or None
    if failing:
        return no_problems(what, where, [describe_event(e) for e in failing], measured=[e.get("code") for e in failing],
                           intro=f"{what}: the GPU reported errors (drain the node; `dmesg | grep -i xid` and "
                                 "`nvidia-smi -q -d ECC,ROW_REMAPPER` say more; XIDs 48, 63, 64, 79, 94 and 95 need a "
                                 "GPU reset or replacement)",
                           source=rule.source, yaml_path=rule.yaml_path)
    if simulated:
        return skip(what, None, SIMULATION)
    if not watched:
        reasons = "; ".join(f"{g}: {r}" for g, r in unwatched.items()) or error or "no GPU registered"
        return skip(what, None, f"no GPU could be watched for XIDs: {reasons}")
    notes = []
    others = [e for e in events if not failing_event(e, rule.allowed)]
    if others:
        notes.append("recorded, not failed: " + "; ".join(describe_event(e) for e in others))
    if unwatched:
        notes.append("not watched: " + "; ".join(f"{g}: {r}" for g, r in unwatched.items()))
    if error:
        notes.append(f"the watch stopped early: {error}")
    watched_text = ", ".join(f"GPU{g}" for g in watched)
    return Verdict("", what, None, PASS, f"{what}: none on {watched_text}" + (f" ({'; '.join(notes)})" if notes else ""),
                   measured=[], source=rule.source, yaml_path=rule.yaml_path)


def _rows(rows: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in rows.items())


def _grew(before: Any, after: Any) -> int | None:
    if isinstance(before, dict) or isinstance(after, dict):  # {"unsupported": reason}
        return None
    return after - before


@check("ecc_row_remap_growth")
def ecc_row_remap_growth(thresholds, *, gpu: int, bus_id: str | None, before: dict, after: dict, seconds: float,
                         simulated: bool) -> Verdict:
    """Volatile ECC errors and remapped rows grew no more than `gpu_health.memory_errors` allows
    between the session's first NVML reading and its last, and no remap is pending or failed at
    the end. `before`/`after`: wirecheck.node.memory_errors readings."""
    what, where = "ECC errors and remapped rows over the run", f"GPU{gpu}"
    if simulated:
        return skip(what, where, SIMULATION)
    limits = thresholds.gpu_health.memory_errors
    problems, unreadable, measured = [], [], {}
    for key, label, allowed in (("volatile_sbe", "volatile single-bit (corrected) ECC errors", limits.volatile_sbe),
                                ("volatile_dbe", "volatile double-bit (uncorrected) ECC errors", limits.volatile_dbe)):
        grew = _grew(before.get(key), after.get(key))
        if grew is None:
            unreadable.append(label)
            continue
        measured[key] = grew
        if grew > allowed:
            problems.append(f"{label} grew by {grew} ({before[key]} -> {after[key]}; allowed {allowed})")
    rows_before, rows_after = before.get("remapped_rows"), after.get("remapped_rows")
    if not isinstance(rows_before, dict) or "unsupported" in rows_before or "unsupported" in (rows_after or {}):
        unreadable.append("remapped rows")
    else:
        grew = sum(rows_after[k] - rows_before[k] for k in ("correctable", "uncorrectable"))
        measured["remapped_rows"] = grew
        if grew > limits.remapped_rows:
            problems.append(f"remapped rows grew by {grew} ({_rows(rows_before)} -> {_rows(rows_after)}; "
                            f"allowed {limits.remapped_rows})")
        if rows_after["pending"]:
            problems.append(f"a row remap is pending ({_rows(rows_after)}): reset the GPU before use (`nvidia-smi -r`)")
        if rows_after["failure"]:
            problems.append(f"row remapping FAILED ({_rows(rows_after)}): the GPU needs replacing")
    if problems:
        return no_problems(what, where, problems, measured=measured,
                           intro=f"{_loc(gpu, bus_id)}: memory errors during the run (drain the node; `nvidia-smi -q -d "
                                 "ECC,ROW_REMAPPER`; a pending remap needs a GPU reset, uncorrectable errors that keep "
                                 "coming or a failed remap mean replacing the GPU)",
                           source=limits.source, yaml_path=limits.yaml_path)
    if len(unreadable) == 3:
        return skip(what, where, "NVML reads neither ECC counters nor remapped rows on this GPU")
    note = f"; not readable: {', '.join(unreadable)}" if unreadable else ""
    return Verdict("", what, where, PASS, f"{what} on {_loc(gpu, bus_id)}: no growth over {seconds:.0f} s, no remap "
                   f"pending or failed{note}", measured=measured, source=limits.source, yaml_path=limits.yaml_path)
