"""On a GPU node: where a worker's end goes, and what the trainers' imports cost after torch.

    python scripts/device/exit_probe.py [--repeats 3] [--gib 30]

end      a process like a pool's one worker (torch imported, a one-rank NCCL group on GPU 0, --gib GiB
         held, a GEMM run) is asked to exit; the parent times the request to the process's end, the
         child its own destroy_process_group. Three ways to leave, alternately: Python's normal exit
         (interpreter finalisation), os._exit right after destroy_process_group, and os._exit without it.
imports  in a new interpreter that imported torch: each module the trainers import, its seconds, and
         whether it loaded the CUDA driver library or started CUDA (a zygote must not fork after that).

Prints one `RESULT ...` line per figure. The environment is passed through untouched (NCCL_NVLS_ENABLE=0
and the rest reach every process).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

CHILD = r"""
import os, sys, time, gc
import torch, torch.distributed as dist
mode, gib = sys.argv[1], float(sys.argv[2])
torch.cuda.set_device(0)
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
held = torch.empty(int(gib * 2**30), dtype=torch.uint8, device="cuda")
a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
for _ in range(20):
    b = a @ a
t = torch.ones(1, device="cuda"); dist.all_reduce(t)
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.readline()
t0 = time.monotonic()
if mode != "exit_no_destroy":
    del held, a, b, t
    gc.collect()
    dist.destroy_process_group()
t1 = time.monotonic()
print(f"destroy {t1 - t0:.3f}", flush=True)
if mode == "normal":
    sys.exit(0)
os._exit(0)
"""

IMPORTS = r"""
import sys, time, importlib, json
import torch
def cuda_state():
    maps = open("/proc/self/maps").read()
    return {"libcuda_mapped": "libcuda.so" in maps, "cuda_initialized": torch.cuda.is_initialized()}
out = {"after torch": cuda_state()}
for name in sys.argv[1:]:
    t = time.monotonic()
    try:
        importlib.import_module(name)
        out[name] = {"s": round(time.monotonic() - t, 3), **cuda_state()}
    except Exception as exc:
        out[name] = {"error": f"{type(exc).__name__}: {exc}"}
print(json.dumps(out))
"""

MODULES = ["torch.distributed.fsdp", "torch._dynamo", "torch.distributed.tensor", "torch.nn.parallel",
           "accelerate", "deepspeed", "deepspeed.runtime.zero.stage_1_and_2", "deepspeed.runtime.zero.stage3"]


def end_once(mode: str, gib: float) -> tuple[float, float]:
    child = subprocess.Popen([sys.executable, "-c", CHILD, mode, str(gib)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    t0 = time.monotonic()
    child.stdin.write("go\n")
    child.stdin.flush()
    destroy = float(child.stdout.readline().split()[1])
    child.wait()
    return time.monotonic() - t0, destroy


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--gib", type=float, default=30.0)
    args = parser.parse_args()
    modes = ("normal", "exit_after_destroy", "exit_no_destroy")
    times: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
    for _ in range(args.repeats):
        for mode in modes:
            times[mode].append(end_once(mode, args.gib))
    for mode in modes:
        ends = [e for e, _ in times[mode]]
        destroys = [d for _, d in times[mode]]
        print(f"RESULT end {mode}: request to exit {', '.join(f'{e:.3f}' for e in ends)} s (median "
              f"{statistics.median(ends):.3f}); destroy_process_group {', '.join(f'{d:.3f}' for d in destroys)} s",
              flush=True)
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", IMPORTS, *MODULES], capture_output=True, text=True)
        print(f"RESULT imports {out.stdout.strip() or out.stderr[-2000:]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
