"""HBM bandwidth of one GPU, in a worker: a device-to-device copy (each byte read once and
written once: both counted, as nvbandwidth and the issue's probe count a local copy) and a
read (a sum over the buffer: each byte read once, the scalar result is nothing).

The buffers are large (4 GiB on Hopper) so that launch cost and caches are noise; each call is
timed on its own with CUDA events and the median counts (stopwatch.summary)."""

from __future__ import annotations

from typing import Any

import torch

from wirecheck.gpu.stopwatch import Stopwatch, summary


def copy(dst: torch.Tensor, src: torch.Tensor) -> None:
    """Every timed copy goes through here (one name the self-tests can swap in the worker)."""
    dst.copy_(src)


def read(src: torch.Tensor) -> torch.Tensor:
    """Every timed read goes through here (one name the self-tests can swap in the worker)."""
    return src.sum()


def bandwidth(device: torch.device, size: int, warmup_iters: int, iters: int) -> dict[str, Any]:
    """{"size", "copy": summary in bytes/s (read+write), "read": summary in bytes/s}."""
    words = size // 4
    src = torch.ones(words, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    watch = Stopwatch(device)
    copied = summary(watch.each(lambda: copy(dst, src), warmup_iters, iters), 2.0 * words * 4)
    del dst
    summed = summary(watch.each(lambda: read(src), warmup_iters, iters), float(words * 4))
    return {"size": words * 4, "copy": copied, "read": summed}
