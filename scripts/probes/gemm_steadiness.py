"""How steady is each way of timing a GPU's GEMM? Run on a GPU node: python scripts/probes/gemm_steadiness.py OUTDIR

A short GEMM figure (the median of 50 products of 8192^3 bf16) can move by 10 % between repeats in one
process while HBM copy moves by 0.2 %. This probe repeats several ways of timing the same work in one
process, with NVML sampled every 10 ms beside each repeat (SM clock, power, clock-event reasons,
temperature), so the cause of the spread can be read rather than guessed, and the judged figure can be
the one that holds a 10 % rule. It writes OUTDIR/gemm_steadiness.json and prints one line per way.
Read-only towards the GPU's settings: clocks and power limits are never changed.
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from pathlib import Path

import pynvml
import torch

N = 8192
REPEATS = 8


class Sampler(threading.Thread):
    """NVML every 10 ms while a repeat runs (the 0.5 s sampler of the suite cannot see a 70 ms window)."""

    def __init__(self, handle):
        super().__init__(daemon=True)
        self.handle, self.samples, self.stop = handle, [], threading.Event()

    def run(self):
        while not self.stop.is_set():
            h = self.handle
            self.samples.append((pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                                 pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
                                 pynvml.nvmlDeviceGetCurrentClocksEventReasons(h),
                                 pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)))
            time.sleep(0.01)


def timed(op, warmup: int, iters: int) -> list[float]:
    for _ in range(warmup):
        op()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    events[0].record()
    for i in range(iters):
        op()
        events[i + 1].record()
    events[-1].synchronize()
    return [a.elapsed_time(b) / 1e3 for a, b in zip(events, events[1:])]


def way(name, handle, op, work, warmup, iters, idle_s, preload_s=0.0):
    rows = []
    for _ in range(REPEATS):
        time.sleep(idle_s)
        if preload_s:
            end = time.monotonic() + preload_s
            while time.monotonic() < end:
                op()
            torch.cuda.synchronize()
        sampler = Sampler(handle)
        sampler.start()
        times = timed(op, warmup, iters)
        sampler.stop.set()
        sampler.join()
        s = sampler.samples or [(0, 0.0, 0, 0)]
        q = statistics.quantiles(times, n=10)
        reasons = 0
        for x in s:
            reasons |= x[2]
        rows.append({"per_s": work / statistics.median(times), "p10_per_s": work / q[8], "p90_per_s": work / q[0],
                     "window_s": sum(times), "sm_clock_min": min(x[0] for x in s),
                     "sm_clock_median": statistics.median(x[0] for x in s),
                     "power_w_median": statistics.median(x[1] for x in s), "power_w_max": max(x[1] for x in s),
                     "reasons": hex(reasons), "temp_c": max(x[3] for x in s), "samples": len(s)})
    figures = [r["per_s"] for r in rows]
    spread = (max(figures) - min(figures)) / statistics.median(figures)
    print(f"{name:34s} median {statistics.median(figures) / 1e12:8.1f}  min {min(figures) / 1e12:8.1f}  "
          f"max {max(figures) / 1e12:8.1f}  spread {100 * spread:5.1f} %  window {rows[0]['window_s']:.3f} s  "
          f"clock {min(r['sm_clock_min'] for r in rows)}-{max(r['sm_clock_median'] for r in rows)} MHz  "
          f"power {min(r['power_w_median'] for r in rows):.0f}-{max(r['power_w_max'] for r in rows):.0f} W  "
          f"reasons {sorted({r['reasons'] for r in rows})}", flush=True)
    return {"name": name, "warmup": warmup, "iters": iters, "idle_s": idle_s, "preload_s": preload_s,
            "spread": spread, "repeats": rows}


def main(out: Path) -> None:
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    dev = torch.device("cuda", 0)
    g = torch.Generator(device=dev)
    g.manual_seed(20)
    a = torch.randn(N, N, generator=g, device=dev).to(torch.bfloat16)
    b = torch.randn(N, N, generator=g, device=dev).to(torch.bfloat16)
    z = torch.zeros_like(a)
    out_t = torch.empty_like(a)
    flops = 2.0 * N ** 3
    src = torch.empty(4 << 30, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    ways = [
        way("gemm 50 calls (as today)", handle, lambda: torch.matmul(a, b, out=out_t), flops, 10, 50, 1.0),
        way("gemm 50 calls, no idle", handle, lambda: torch.matmul(a, b, out=out_t), flops, 10, 50, 0.0),
        way("gemm 50 calls after 2 s load", handle, lambda: torch.matmul(a, b, out=out_t), flops, 10, 50, 1.0, 2.0),
        way("gemm 700 calls (~1 s)", handle, lambda: torch.matmul(a, b, out=out_t), flops, 10, 700, 1.0),
        way("gemm 2100 calls (~3 s)", handle, lambda: torch.matmul(a, b, out=out_t), flops, 10, 2100, 1.0),
        way("gemm zeros 50 calls", handle, lambda: torch.matmul(z, z, out=out_t), flops, 10, 50, 1.0),
        way("hbm copy 4 GiB 50 calls", handle, lambda: dst.copy_(src), 2.0 * src.numel(), 5, 50, 1.0),
    ]
    out.mkdir(parents=True, exist_ok=True)
    (out / "gemm_steadiness.json").write_text(json.dumps({
        "gpu": pynvml.nvmlDeviceGetName(handle), "driver": pynvml.nvmlSystemGetDriverVersion(),
        "torch": torch.__version__, "power_limit_w": pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0,
        "ways": ways}, indent=1))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/probes/gemm_steadiness.py OUTDIR")
    main(Path(sys.argv[1]))
