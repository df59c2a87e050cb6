"""The GPU load's worker functions for the self-tests: the production ones (wirecheck.gpu.worker),
with one bit of one GEMM element wrong on rank 1 after each call's reference product.

A GPU that computes wrong is made by swapping wirecheck.gpu.gemm.matmul inside the worker
process for the length of a call (as faulty_workers swaps a collective's launch): the library
has no switch for it. Select it with a `gpu_health_workers` fixture returning "faulty_gpu_worker".
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import torch

from wirecheck.gpu import gemm, worker

# The rank that computes wrong: 1, or WIRECHECK_WRONG_RANK (0 on a node of one GPU: scripts/device/trusted_check.sh)
WRONG_RANK = int(os.environ.get("WIRECHECK_WRONG_RANK", "1"))
WRONG_INDEX = 5


def wrong_after_reference(matmul, index: int = WRONG_INDEX):
    """`matmul` whose every product after the first (the reference) has one bit of element `index` flipped."""
    calls = {"n": 0}

    def product(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
        matmul(a, b, out)
        calls["n"] += 1
        if calls["n"] > 1:
            flat = out.view(torch.int16).view(-1)
            flat[index] ^= 1

    return product


@contextlib.contextmanager
def _wrong_on(ctx):
    if ctx.rank != WRONG_RANK:
        yield
        return
    right = gemm.matmul
    gemm.matmul = wrong_after_reference(right)
    try:
        yield
    finally:
        gemm.matmul = right


def figures(ctx, **kwargs: Any) -> dict:
    with _wrong_on(ctx):
        return worker.figures(ctx, **kwargs)


def sustained(ctx, **kwargs: Any) -> dict:
    with _wrong_on(ctx):
        return worker.sustained(ctx, **kwargs)


def memory(ctx, **kwargs: Any) -> dict:
    return worker.memory(ctx, **kwargs)
