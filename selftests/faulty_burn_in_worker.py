"""The burn-in's worker functions for the self-tests: the production ones (wirecheck.burnin.worker), with
rank 1 (GPU1) computing one bit of element 5 wrong in every GEMM product from its second round on
(faulty_gpu_worker's fault; the reference, made in the first round, stays right). Select it with a
module-scoped `burn_in_workers` fixture returning "faulty_burn_in_worker"."""

from __future__ import annotations

from typing import Any

from faulty_gpu_worker import WRONG_RANK, wrong_after_reference
from wirecheck.burnin import worker
from wirecheck.gpu import gemm

WRONG_FROM_ROUND = 2
_rounds = {"n": 0}  # this worker process's rounds so far
memory = worker.memory


def load_round(ctx, **kwargs: Any) -> dict:
    _rounds["n"] += 1
    if ctx.rank != WRONG_RANK or _rounds["n"] < WRONG_FROM_ROUND:
        return worker.load_round(ctx, **kwargs)
    right = gemm.matmul
    gemm.matmul = wrong_after_reference(right)
    try:
        return worker.load_round(ctx, **kwargs)
    finally:
        gemm.matmul = right
