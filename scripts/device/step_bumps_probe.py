"""On a GPU node: why the one-GPU training's timed steps 5 to 7 are slower than the rest. In all 26 one-GPU
acceptance runs on 1x H200 nodes in fixtures/reference/h200-1/level-times-*/ the slowest of them took 122-133 ms
where the first four took 114-120 ms, and steps slowed again every 8 or 9 steps (about once a second) in the runs
that went on. With them in the sample the median's interval took 16-30 steps to settle instead of 12 in 13 of the
26 runs (0.5-2.2 s more). DDP on two GPUs, with no GPU load before it, held 76-77 ms over its fifth to seventh
steps in all three runs (fixtures/reference/h200-sxm-2/wirecheck-2026-11-30b/). Is it the GPU's clocks (the power
controller after the load), the caching allocator, or our own process?

    python scripts/device/step_bumps_probe.py [--load-s 60] [--steps 30]   (--cpu: a rehearsal, no NVML)

In one process, as the pool's worker does on a one-GPU node: the sustained GEMM load and one memory-pattern pass
with the thresholds' acceptance settings (the load --load-s long), then the one-GPU training
(wirecheck.training.single_gpu.train_alone, its 3 warm-up steps, --steps timed), then the same training again
(the caching allocator warm), then again after --rest-s idle. Another process reads the GPU's SM clock, power
and clock-event reasons from NVML every 10 ms throughout. Prints per training one `RESULT` line (the step times)
and one `STEPS` table: each timed step's milliseconds beside the mean SM clock and power over its span (from the
step times back from the end of the timed phase) and the clock-event reasons seen in it. If the slow steps' clock
is lower by about as much, it is the GPU's power management; if the second run is flat, it is the first run's
allocations. The environment is passed through untouched; nothing of the GPU's settings is changed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

SAMPLER = r"""
import json, sys, time
import pynvml
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(int(sys.argv[1]))
reasons = (getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
           or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons)
print("ready", flush=True)
while True:
    t = time.monotonic()
    print(json.dumps([t, pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                      pynvml.nvmlDeviceGetPowerUsage(h) / 1e3, reasons(h)]), flush=True)
    time.sleep(max(0.0, 0.01 - (time.monotonic() - t)))
"""


class Sampler:
    """NVML every 10 ms in a process of its own (no GIL shared with the training), its lines in a file."""

    def __init__(self, gpu: int, folder: str):
        self.path = os.path.join(folder, "nvml.jsonl")
        self.out = open(self.path, "w", encoding="utf-8")
        self.proc = subprocess.Popen([sys.executable, "-c", SAMPLER, str(gpu)], stdout=self.out, text=True)
        deadline = time.monotonic() + 60
        while not self.samples():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"the NVML sampler did not start (exit {self.proc.returncode})")
            time.sleep(0.05)

    def samples(self) -> list[tuple[float, int, float, int]]:
        rows = []
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("[") and line.endswith("\n"):  # not a line the sampler is still writing
                    rows.append(tuple(json.loads(line)))
        return rows

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.out.close()


def steps_table(step_s: list[float], t_end: float, samples: list) -> list[dict]:
    """Each timed step's span, counted back from the end of the timed phase, with the samples inside it."""
    rows, end = [], t_end
    for i in range(len(step_s) - 1, -1, -1):
        start = end - step_s[i]
        inside = [s for s in samples if start <= s[0] < end]
        rows.append({"step": i, "ms": step_s[i] * 1e3,
                     "sm_mhz": sum(s[1] for s in inside) / len(inside) if inside else None,
                     "watts": sum(s[2] for s in inside) / len(inside) if inside else None,
                     "reasons": f"0x{_or(s[3] for s in inside):x}" if inside else None, "samples": len(inside)})
        end = start
    return rows[::-1]


def _or(values) -> int:
    out = 0
    for v in values:
        out |= v
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--load-s", type=float, default=60.0, help="the sustained load's seconds (acceptance: 60)")
    parser.add_argument("--steps", type=int, default=30, help="timed steps of each training (the ceiling: 30)")
    parser.add_argument("--rest-s", type=float, default=10.0, help="idle seconds before the last training")
    parser.add_argument("--cpu", action="store_true", help="a rehearsal on a CPU machine: simulated settings, no NVML")
    args = parser.parse_args()

    import torch

    from wirecheck.gpu import memory_pattern, sustained
    from wirecheck.gpu.load import MEMORY, SUSTAINED, GpuLoad, GpuRun
    from wirecheck.thresholds.file import load_thresholds
    from wirecheck.training.scaling import single_gpu_kwargs
    from wirecheck.training.single_gpu import train_alone
    from wirecheck.workers.worker import RankContext

    th = load_thresholds(ROOT / "thresholds.yaml")
    device = torch.device("cpu" if args.cpu else "cuda:0")
    run = GpuRun((0,), args.cpu, {0: None}, {0: None})
    load = GpuLoad(run, th.gpu_health.settings(simulated=args.cpu), "acceptance")
    hold = dict(load.kwargs(SUSTAINED), duration_s=args.load_s)
    memory = load.kwargs(MEMORY)
    train = single_gpu_kwargs(th.training_settings(args.cpu))
    train.update(steps=args.steps, max_steps=args.steps)
    ctx = RankContext(0, 1, 0, "gloo" if args.cpu else "nccl", device, "step-bumps")
    if not args.cpu:
        torch.cuda.set_device(device)

    with tempfile.TemporaryDirectory(prefix="step-bumps-") as folder:
        sampler = None if args.cpu else Sampler(0, folder)
        try:
            t0 = time.monotonic()
            done = sustained.run(device, **hold)
            said = json.dumps({k: v for k, v in done.items() if k != "windows"})[:300]
            print(f"LOAD {time.monotonic() - t0:.1f} s: {said}", flush=True)
            t0 = time.monotonic()
            memory_pattern.run(device, **memory)
            if device.type == "cuda":
                torch.cuda.synchronize()
                torch.cuda.empty_cache()  # as the worker gives the memory back after each phase
            print(f"MEMORY {time.monotonic() - t0:.1f} s", flush=True)
            for name in ("after-load", "again", "rested"):
                if name == "rested":
                    time.sleep(args.rest_s)
                record = train_alone(ctx, **train)
                t_end = time.monotonic()
                step_s = record["step_times_s"]
                print(f"RESULT {name} phase={json.dumps({k: round(v, 3) for k, v in record['phase_s'].items()})} "
                      f"warmup=[{', '.join(f'{s:.3f}' for s in record['warmup_step_s'])}] "
                      f"steps_ms=[{', '.join(f'{s * 1e3:.0f}' for s in step_s)}]", flush=True)
                if sampler is not None:
                    time.sleep(0.05)  # the sampler's lines up to now
                    # the timed phase ended just before the record was built (a loss read and a dict)
                    for row in steps_table(step_s, t_end, sampler.samples()):
                        print(f"STEPS {name} " + json.dumps({k: round(v, 1) if isinstance(v, float) else v
                                                             for k, v in row.items()}), flush=True)
        finally:
            if sampler is not None:
                sampler.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
