"""Worker functions for `wirecheck diagnose`'s self-tests: the probes' own (wirecheck.diagnose.worker, and
the GPU load's wirecheck.gpu.worker) with one fault injected on one simulated GPU, pair or link, chosen by
the environment (it passes through to the workers):

- WIRECHECK_FAULT_SLOW_PAIR="5,6": every collective call whose ranks include both GPUs sleeps
  SLOW_PAIR_SLEEP_S first (a degraded link between them: the pair, and any placement holding it, is slow);
- WIRECHECK_FAULT_WRONG_GPU="6": that GPU's output is off by one at element 5 after every call;
- WIRECHECK_FAULT_NEIGHBOUR_SLOW_GPU="1": that GPU's GEMM does NEIGHBOUR_SLOW_TIMES the work while other
  GPUs are loaded with it (the GPU load's group has more than one rank), its results still right.

Which GPU a rank is: a probe's collective sub-group is labelled by its GPUs (`diagnose-4.5.6.7`, `pair-5.6`:
rank r is the r-th GPU listed); the GPU load runs on the pool's ranks over every GPU of the node, rank r on
GPU r, and the ranks of the call (`group_ranks`) are the GPUs loaded: one is the suspect GPU alone.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import torch

from wirecheck.diagnose import worker as probes
from wirecheck.gpu import gemm, worker as gpu_worker
from wirecheck.measure import collective_worker

from selftests.slowdown import Slowdown

SLOW_PAIR_SLEEP_S = 0.15  # per call at least, and SLOWDOWN x this process's quickest call of its op and size:
# the simulated pair rule names a pair 90 % below its peers' median (thresholds.yaml), and a fixed 0.15 s once
# made the pair only 89.9 % slower (slowdown.py)
_slow_pair = Slowdown(SLOW_PAIR_SLEEP_S)
NEIGHBOUR_SLOW_TIMES = 40  # past the simulated peer rule (80 %) with room: a loaded neighbour on shared CPU cores ran 3x slower
WRONG_INDEX = 5


def _gpus(label: str) -> list[int]:
    return [int(g) for g in label.rsplit("-", 1)[-1].split(".")]


def _env_gpus(name: str) -> set[int]:
    value = os.environ.get(name, "")
    return {int(g) for g in value.split(",") if g.strip()}


def _with_faults(ctx, op: str, ranks: list[int]):
    """A launch for `op` with the environment's faults, for a call among job ranks `ranks`."""
    gpus = _gpus(ctx.label)
    mine = gpus[ctx.rank]
    among = {gpus[r] for r in ranks}
    slow = _env_gpus("WIRECHECK_FAULT_SLOW_PAIR")
    wrong = _env_gpus("WIRECHECK_FAULT_WRONG_GPU")
    launch = collective_worker.KERNELS[op].launch

    def faulty(inp, out, **kw):
        if slow and slow <= among:
            _slow_pair.call((op, inp.numel()), lambda: launch(inp, out, **kw))
        else:
            launch(inp, out, **kw)
        if mine in wrong:
            flat = out.view(-1)
            flat[min(WRONG_INDEX, flat.numel() - 1)] += 1.0

    return faulty


def _swapped(ctx, op: str, ranks: list[int], call):
    c = collective_worker.KERNELS[op]
    collective_worker.KERNELS[op] = dataclasses.replace(c, launch=_with_faults(ctx, op, ranks))
    try:
        return call()
    finally:
        collective_worker.KERNELS[op] = c


def measure(ctx, op: str, **kw: Any) -> dict:
    return _swapped(ctx, op, list(range(ctx.world_size)), lambda: probes.measure(ctx, op=op, **kw))


# -- the GPU load ----------------------------------------------------------------------------------


def _heavier(matmul, times: int):
    def product(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
        for _ in range(times):
            matmul(a, b, out)  # the same product again: the result stays right

    return product


def figures(ctx, **kwargs: Any) -> dict:
    loaded = len(ctx.group_ranks) if ctx.group_ranks is not None else ctx.world_size
    slow = ctx.rank in _env_gpus("WIRECHECK_FAULT_NEIGHBOUR_SLOW_GPU") and loaded > 1
    saved = gemm.matmul
    if slow:
        gemm.matmul = _heavier(saved, NEIGHBOUR_SLOW_TIMES)
    try:
        return gpu_worker.figures(ctx, **kwargs)
    finally:
        gemm.matmul = saved


def sustained(ctx, **kwargs: Any) -> dict:
    return gpu_worker.sustained(ctx, **kwargs)


def memory(ctx, **kwargs: Any) -> dict:
    return gpu_worker.memory(ctx, **kwargs)
