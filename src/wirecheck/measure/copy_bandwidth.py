"""Copy bandwidth without NCCL, as nvbandwidth measures it: the worker side.

One worker process sees every GPU it measures (CUDA_VISIBLE_DEVICES lists them all, in NVML's
PCI order) and copies one thing at a time, so each figure is one link's:
- host->device and device->host per GPU, from pinned host memory (what a PCIe link can move);
- device->device per NVLink pair, both directions (`dst.copy_(src)` with peer access is
  cudaMemcpyPeerAsync: the copy engines over NVLink, no NCCL, no SMs).
Each figure is `iters` back-to-back copies of `size` bytes bracketed by CUDA events on the
stream that runs them, after `warmup_iters`. While an extra, untimed batch of host copies is
in flight the GPU's PCIe link is read from NVML: the link trains down at idle, so only a
reading under load says what the copy ran on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import torch

from wirecheck.measure.collective_timing import time_events

if TYPE_CHECKING:
    from wirecheck.workers.worker import RankContext


def _time_copies(device: int, copy: Callable[[], Any], warmup_iters: int, iters: int) -> float:
    """Seconds per copy, from CUDA events on `device`'s current stream (where torch runs it)."""
    with torch.cuda.device(device):
        for _ in range(warmup_iters):
            copy()
        torch.cuda.synchronize(device)
        return time_events(copy, iters)


def _pcie_under_load(device: int, gpu: int, copy: Callable[[], Any], iters: int) -> dict[str, Any]:
    """NVML's PCIe link reading for `gpu` taken while `iters` untimed copies run on `device`."""
    from wirecheck.node import nvml

    with torch.cuda.device(device):
        for _ in range(iters):
            copy()
        done = torch.cuda.Event()
        done.record()
        try:
            link = nvml.read_pcie_links([gpu])[gpu]
            error = None
        except nvml.NvmlUnavailable as exc:
            link, error = None, str(exc)
        # Still running when NVML answered: the reading was taken under load.
        under_load = not done.query()
        done.synchronize()
    return {"link": link, "under_load": under_load, "error": error}


def _host(local: int, gpu: int, host: torch.Tensor, warmup_iters: int, iters: int) -> dict[str, Any]:
    dev = torch.empty_like(host, device=torch.device("cuda", local))
    h2d = _time_copies(local, lambda: dev.copy_(host, non_blocking=True), warmup_iters, iters)
    d2h = _time_copies(local, lambda: host.copy_(dev, non_blocking=True), warmup_iters, iters)
    pcie = _pcie_under_load(local, gpu, lambda: dev.copy_(host, non_blocking=True), iters)
    n = host.numel()
    return {"gpu": gpu, "h2d_bytes_per_s": n / h2d, "d2h_bytes_per_s": n / d2h, "h2d_time_s": h2d, "d2h_time_s": d2h,
            "pcie": pcie}


def _peer(locals_: dict[int, int], a: int, b: int, size: int, warmup_iters: int, iters: int) -> list[dict[str, Any]]:
    buf = {g: torch.empty(size, dtype=torch.uint8, device=torch.device("cuda", locals_[g])) for g in (a, b)}
    out = []
    for src, dst in ((a, b), (b, a)):
        ls, ld = locals_[src], locals_[dst]
        access = torch.cuda.can_device_access_peer(ls, ld)
        t = _time_copies(ls, lambda: buf[dst].copy_(buf[src], non_blocking=True), warmup_iters, iters)
        out.append({"src": src, "dst": dst, "bytes_per_s": size / t, "time_s": t, "peer_access": access})
    return out


def _release(devices) -> None:
    """Give the 1 GiB buffers of the last GPU or pair back before the next one allocates."""
    for d in devices:
        with torch.cuda.device(d):
            torch.cuda.empty_cache()


def measure(ctx: RankContext, gpus: list[int], pairs: list[list[int]], size: int, warmup_iters: int,
            iters: int) -> dict[str, Any]:
    """Worker function: host copies for every GPU in `gpus`, peer copies for every pair in `pairs`.

    `gpus` are NVML indices in the order this process sees them (local device i is gpus[i]).
    """
    if torch.cuda.device_count() != len(gpus):
        raise RuntimeError(f"this worker sees {torch.cuda.device_count()} GPUs, expected {len(gpus)} ({gpus}); "
                           "CUDA_VISIBLE_DEVICES must list them all")
    locals_ = {g: i for i, g in enumerate(gpus)}
    host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    host_results = []
    for g in gpus:
        host_results.append(_host(locals_[g], g, host, warmup_iters, iters))
        _release([locals_[g]])
    del host
    peer_results = []
    for a, b in pairs:
        peer_results += _peer(locals_, a, b, size, warmup_iters, iters)
        _release([locals_[a], locals_[b]])
    return {
        "size": size,
        "warmup_iters": warmup_iters,
        "iters": iters,
        "host": host_results,
        "peer": peer_results,
        "device_names": {g: torch.cuda.get_device_name(locals_[g]) for g in gpus},
        "torch": str(torch.__version__),
    }


def host_each(ctx: RankContext, gpus: list[int], size: int, warmup_iters: int, iters: int) -> dict[str, Any]:
    """Worker function: host copies of this rank's GPU (local device ctx.rank, NVML index gpus[ctx.rank]),
    every rank of the group at the same time (a barrier lines them up): what GPUs behind one PCIe switch
    get together, where `measure` copies one GPU at a time. A group of one rank is the GPU alone."""
    import torch.distributed as dist

    host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
    try:
        return _host(ctx.rank, gpus[ctx.rank], host, warmup_iters, iters)
    finally:
        del host
        _release([ctx.rank])
