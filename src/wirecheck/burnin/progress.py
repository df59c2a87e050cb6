"""The burn-in's progress line, as text: elapsed, remaining, the round, each GPU's last figures (TFLOP/s,
hottest °C, mean W) and the round's last busbw; its first and last lines. The plugin writes them
through pytest's terminal reporter: rewritten in place on a terminal (cut to its width), one plain line
per round otherwise (a log, a pipe, a CI job).
"""

from __future__ import annotations

import time

from wirecheck.burnin.loop import COMPLETE, BurnIn, RoundReport
from wirecheck.burnin.plan import BurnInPlan
from wirecheck.core.quantity import format_bw

PREFIX = "burn-in"


def clock(seconds: float) -> str:
    """4:00:00, 0:05:07."""
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _tflops(value: float | None) -> str:
    if value is None:
        return "- TFLOP/s"
    # CPU ranks in simulation compute GFLOP/s: shown with their digits, not as 0.0 TFLOP/s
    return f"{value / 1e12:.1f} TFLOP/s" if value >= 1e12 else f"{value / 1e9:.3g} GFLOP/s"


def _gpu(gpu: int, figures: dict, compact: bool) -> str:
    temp, power = figures.get("temperature_c"), figures.get("power_w")
    t = f"{temp:.0f}°C" if temp is not None else "-°C"
    w = f"{power:.0f}W" if power is not None else "-W"
    flops = figures.get("flops_per_s")
    if compact:
        f = f"{flops / 1e12:.0f}" if flops and flops >= 1e12 else (f"{flops / 1e9:.3g}G" if flops else "-")
        return f"{gpu}:{f}/{t}/{w}"
    return f"GPU{gpu} {_tflops(flops)} {t} {w}"


def _tail(report: RoundReport) -> list[str]:
    parts = []
    if report.busbw is not None:
        placement, op, busbw = report.busbw
        parts.append(f"{op} {placement} {format_bw(busbw) if busbw >= 1e9 else f'{busbw / 1e9:.3g} GB/s'}")
    if report.fault is not None:
        parts.append(f"STOPPED: {report.fault.kind}" + (f" on {report.fault.where}" if report.fault.where else ""))
    elif report.interrupted:
        parts.append("interrupted")
    return parts


def line(report: RoundReport, width: int | None = None) -> str:
    """One round's line; with `width` (a terminal), made to fit it: compact GPUs, then cut."""
    head = (f"{PREFIX} {clock(report.elapsed_s)} of {clock(report.duration_s)} ({clock(report.remaining_s)} left) "
            f"round {report.number}")
    for compact in (False, True):
        gpus = [_gpu(g, f, compact) for g, f in report.gpus.items()]
        text = " | ".join([head, (" " if compact else " | ").join(gpus), *_tail(report)])
        if width is None or len(text) < width:
            return text
    return text[:max(0, width - 2)] + "…"


def left_out(placements: dict[str, str]) -> str:
    """The placements out of the cycle, grouped by why: 'forced_pcie-2gpu-0.1: needs ...; 16 placements: not
    among the burn-in's GPUs'."""
    by_reason: dict[str, list[str]] = {}
    for pid, why in placements.items():
        by_reason.setdefault(why, []).append(pid)
    return "; ".join(f"{ids[0]}: {why}" if len(ids) == 1 else f"{len(ids)} placements ({ids[0]}, ...): {why}"
                     for why, ids in by_reason.items())


def opening(plan: BurnInPlan) -> str:
    """What the burn-in runs, said once before its first round."""
    ops = sorted({s.op for s in plan.steps})
    placements = plan.placements
    traffic = (f"collectives cycle over {len(placements)} placement(s) ({', '.join(p.id for p in placements)}): "
               f"{', '.join(ops)}" if placements else "no collective placement among these GPUs")
    left = f"; left out: {left_out(plan.left_out)}" if plan.left_out else ""
    return (f"wirecheck: {PREFIX} for {clock(plan.duration_s)} on {len(plan.gpus)} GPU(s) "
            f"({', '.join(f'GPU{g}' for g in plan.gpus)}) in rounds of {plan.round_s:g} s: the GEMM load on every GPU "
            f"while {traffic}; the memory test ({plan.memory_passes} pass(es)) after each round; Ctrl-C stops it and "
            f"keeps every round{left}")


def closing(burn: BurnIn) -> str:
    """How the burn-in ended, said once after its last round."""
    n = len(burn.rounds)
    head = f"wirecheck: {PREFIX} {burn.status}: {n} round(s) in {clock(burn.seconds)} of {clock(burn.plan.duration_s)}"
    if burn.fault is not None:
        return f"{head}; {burn.fault.describe()}"
    if burn.status != COMPLETE:
        at = time.strftime("%H:%M:%S", time.localtime(burn.ended)) if burn.ended else "?"
        return f"{head}; stopped at {at}, every round so far is in the record"
    return f"{head}; no hard fault (the verdicts over all rounds follow)"
