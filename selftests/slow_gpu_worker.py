"""The GPU load's worker functions for fault injection: the production ones (wirecheck.gpu.worker),
with the GEMM and/or the HBM copy of every GPU doing more work than it is credited for, so its
figures read slower by a known share: a GPU "about 10 % slower" without touching clocks or power.

WIRECHECK_SLOW_GEMM=0.10 makes every bf16 product also multiply 10 % of the rows again (into a
scratch buffer: the results compared with the reference stay right); WIRECHECK_SLOW_HBM=0.10 makes
every timed copy also copy 10 % of the buffer again. 1.0 doubles the work (a GPU doing half its work).
The factors are read in the worker process (the environment passes through to it). Select the module
with a `gpu_health_workers` fixture returning "slow_gpu_worker" (a conftest.py beside the tests).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import torch

from wirecheck.gpu import gemm, hbm, worker


def _share(name: str) -> float:
    return float(os.environ.get(name, "0") or 0)


def slower_matmul(matmul, share: float):
    scratch: dict = {}

    def product(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
        matmul(a, b, out)
        rows = max(1, round(share * a.shape[0]))
        if rows not in scratch:
            scratch[rows] = torch.empty(rows, b.shape[1], dtype=out.dtype, device=out.device)
        torch.matmul(a[:rows], b, out=scratch[rows])

    return product


def slower_copy(copy, share: float):
    def copied(dst: torch.Tensor, src: torch.Tensor) -> None:
        copy(dst, src)
        words = max(1, round(share * src.numel()))
        dst[:words].copy_(src[:words])

    return copied


@contextlib.contextmanager
def _slow():
    saved = gemm.matmul, hbm.copy
    if _share("WIRECHECK_SLOW_GEMM"):
        gemm.matmul = slower_matmul(gemm.matmul, _share("WIRECHECK_SLOW_GEMM"))
    if _share("WIRECHECK_SLOW_HBM"):
        hbm.copy = slower_copy(hbm.copy, _share("WIRECHECK_SLOW_HBM"))
    try:
        yield
    finally:
        gemm.matmul, hbm.copy = saved


def figures(ctx, **kwargs: Any) -> dict:
    with _slow():
        return worker.figures(ctx, **kwargs)


def sustained(ctx, **kwargs: Any) -> dict:
    with _slow():
        return worker.sustained(ctx, **kwargs)


def memory(ctx, **kwargs: Any) -> dict:
    return worker.memory(ctx, **kwargs)
