"""The worker functions the GpuLoad calls on every rank at once (one rank per GPU):
`figures` (HBM bandwidth, GEMM bf16 and fp8, results against the reference), `sustained`
(the GEMM load held for a duration) and `memory` (the pattern test).

Each part that fails (out of memory because another process holds the GPU, an fp8 kernel
torch cannot launch) comes back as {"error": ...} in its place, so the other parts of that
GPU and every other GPU are still judged; the GPU's memory is given back after each call.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

import torch

from wirecheck.gpu import gemm as gemm_ops, hbm as hbm_ops, memory_pattern, sustained as sustained_load

if TYPE_CHECKING:
    from wirecheck.workers.worker import RankContext


def _release(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


def _part(device: torch.device, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        out = fn()
    except Exception as exc:  # noqa: BLE001 - reported in the result, judged as a failed figure
        out = {"error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"}
    _release(device)
    out["wall_s"] = time.perf_counter() - t0
    return out


def device_info(device: torch.device) -> dict[str, Any]:
    info: dict[str, Any] = {"device": str(device), "torch": str(torch.__version__), "cuda": torch.version.cuda}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(name=props.name, capability=list(torch.cuda.get_device_capability(device)),
                    memory_bytes=props.total_memory, sms=props.multi_processor_count)
    else:
        info.update(name="cpu", capability=None, memory_bytes=None, sms=None)
    return info


def figures(ctx: RankContext, hbm: dict, gemm: dict, seed: int) -> dict[str, Any]:
    """{"device", "hbm", "gemm_bf16", "gemm_fp8"}: parts as in wirecheck.gpu.hbm and .gemm."""
    device = ctx.device
    g = dict(gemm)
    compare_iters = g.pop("compare_iters")
    return {
        "device": device_info(device),
        "hbm": _part(device, lambda: hbm_ops.bandwidth(device, **hbm)),
        "gemm_bf16": _part(device, lambda: gemm_ops.bf16(device, compare_iters=compare_iters, seed=seed, **g)),
        "gemm_fp8": _part(device, lambda: gemm_ops.fp8(device, seed=seed, **g)),
    }


def sustained(ctx: RankContext, n: int, duration_s: float, window_s: float, check_every: int, seed: int,
              aside: dict | None = None) -> dict[str, Any]:
    """`aside`: {"function": "module:function", "kwargs": {...}}, called once as function(ctx, **kwargs) in the
    load's shadow (sustained.run's `aside`) by the first rank: the next work of this worker prepared meanwhile."""
    device = ctx.device
    call = _aside_call(ctx, aside) if aside and ctx.rank == 0 else None
    return _part(device, lambda: sustained_load.run(device, n, duration_s, window_s, check_every, seed, aside=call))


def _aside_call(ctx: RankContext, aside: dict) -> Callable[[], dict]:
    from wirecheck.workers.worker import resolve  # the worker's own lookup; imported here, inside the worker

    def call() -> dict:
        return resolve(aside["function"])(ctx, **aside.get("kwargs", {}))
    return call


def memory(ctx: RankContext, coverage: float, chunk: int, cap: int | None, passes: int) -> dict[str, Any]:
    device = ctx.device
    return _part(device, lambda: memory_pattern.run(device, coverage, chunk, cap, passes))
