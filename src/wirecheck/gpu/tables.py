"""The GPU load as text tables (printed with -v, as the collective sweeps are): the per-GPU
figures, the sustained load over time beside NVML's samples, and the memory test."""

from __future__ import annotations

import math

from wirecheck.core.quantity import format_bytes
from wirecheck.gpu.inputs import full_windows
from wirecheck.gpu.load import GpuRun, Phase
from wirecheck.node.gpu_sampling import decode_reasons

MAX_ROWS = 15  # sustained-load rows per GPU: windows are merged into this many at most


def _num(value, scale: float = 1.0, digits: int = 1) -> str:
    if value is None:
        return "-"
    value *= scale
    # CPU ranks in simulation: small figures keep their digits
    return f"{value:.{digits}f}" if abs(value) >= 1 or value == 0 else f"{value:.3g}"


def figures(run: GpuRun, phase: Phase) -> str:
    rows = [("GPU", "bus id", "HBM copy GB/s", "HBM read GB/s", "bf16 TFLOP/s", "fp8 TFLOP/s", "compared", "wrong")]
    for g in run.gpus:
        r = phase.of(g) or {}

        def per_s(part: dict | None, key: str | None = None) -> float | None:
            if not part or "error" in part or "unsupported" in part:
                return None
            return (part[key] if key else part["throughput"])["per_s"]

        hbm = r.get("hbm")
        bf16 = r.get("gemm_bf16") or {}
        math_part = bf16.get("math") or {}
        rows.append((f"GPU{g}", run.bus_ids.get(g) or "-", _num(per_s(hbm, "copy"), 1e-9), _num(per_s(hbm, "read"), 1e-9),
                     _num(per_s(bf16), 1e-12), _num(per_s(r.get("gemm_fp8")), 1e-12),
                     str(math_part.get("checked", "-")), str(math_part.get("mismatched_elements", "-"))))
    return _grid(rows) + (f"\nerror: {phase.error}" if phase.error else "")


def sustained(run: GpuRun, phase: Phase, gpu: int) -> str:
    """t (s from the load's start), TFLOP/s, and NVML over the same span: mean SM clock, peak
    power, peak temperature, every clock-event reason seen."""
    r = phase.of(gpu)
    if not r or "windows" not in r:
        return f"no sustained load measured on GPU{gpu}: {phase.error or (r or {}).get('error')}"
    windows = full_windows(r)
    if not windows:
        return "no window completed"
    step = max(1, math.ceil(len(windows) / MAX_ROWS))
    samples = phase.sampling.of(gpu) if phase.sampling else []
    t_start = windows[0]["t0"]
    rows = [("t s", "TFLOP/s", "SM MHz", "power W", "temp °C", "reasons", "wrong")]
    for i in range(0, len(windows), step):
        group = windows[i:i + step]
        t0, t1 = group[0]["t0"], group[-1]["t1"]
        flops = sum(w["flops_per_s"] * w["seconds"] for w in group) / sum(w["seconds"] for w in group)
        inside = [s for s in samples if t0 <= s.t <= t1]
        clocks = [s.sm_mhz for s in inside if s.sm_mhz is not None]
        power = [s.power_w for s in inside if s.power_w is not None]
        temps = [s.temperature_c for s in inside if s.temperature_c is not None]
        mask = 0
        for s in inside:
            mask |= s.reasons or 0
        reasons = f"0x{mask:x} " + "+".join(decode_reasons(mask)) if inside else "-"
        rows.append((f"{t0 - t_start:.1f}-{t1 - t_start:.1f}", _num(flops, 1e-12),
                     _num(sum(clocks) / len(clocks), digits=0) if clocks else "-",
                     _num(max(power)) if power else "-", str(max(temps)) if temps else "-", reasons,
                     str(sum(w["mismatched_elements"] for w in group))))
    return _grid(rows)


def memory(run: GpuRun, phase: Phase) -> str:
    rows = [("GPU", "covered", "of free", "patterns x passes", "wrong words", "first bad offset", "wall s")]
    for g in run.gpus:
        r = phase.of(g) or {}
        if "patterns" not in r:
            rows.append((f"GPU{g}", "-", "-", "-", "-", "-", r.get("error") or phase.error or "-"))
            continue
        bad = [p for p in r["patterns"] if p["mismatched_words"]]
        rows.append((f"GPU{g}", format_bytes(r["bytes_covered"]),
                     f"{100 * r['bytes_covered'] / r['free_bytes']:.1f} %" if r["free_bytes"] else "-",
                     f"{len({p['pattern'] for p in r['patterns']})} x {r['passes']}",
                     str(sum(p["mismatched_words"] for p in r["patterns"])),
                     str(bad[0]["first_bad_offset"]) if bad else "-", f"{r['wall_s']:.2f}"))
    return _grid(rows)


def _grid(rows: list[tuple]) -> str:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).rjust(w) for c, w in zip(row, widths)) for row in rows)
