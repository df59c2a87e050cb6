"""Each strategy's collectives per training step, from its row of the strategies table.

Read from what the row shards and holds and from its settings, never from its name, so a new row
gets a schedule without a line here:
- shards nothing (DDP): the gradients (the dtype its implementation holds them in) all-reduced in
  `bucket_cap_mb` buckets while backward runs;
- shards the optimizer and maybe the gradients, not the parameters (ZeRO-1/2): the gradients reduced
  in `reduce_bucket_size` buckets, during backward when `overlap_comm` is on, else after it; then the
  updated parameters all-gathered in `allgather_bucket_size` buckets after the step (nothing to hide
  it under). The reduction is modelled as an all_reduce of each bucket (DeepSpeed 0.19 all-reduces a
  bucket that spans several ranks' partitions): on the 2x H200 host path ZeRO-1 exposes 122 ms per
  step, more than the 45 ms a reduce_scatter of its bf16 gradients would take there;
- shards the parameters (ZeRO-3, FSDP): every block's parameters all-gathered before its forward and
  again before its backward (once when `reshard_after_forward` is off), the gradients
  reduce-scattered (in `reduce_dtype`, or the held gradient dtype) per `reduce_bucket_size` bucket or
  per block; all of it prefetched or overlapped with compute.
Gathered parameters are in the precision's bytes (both implementations compute in it).

That is the implementation accounting (the default: what this suite's strategies run and its records
measured). The article accounting (training/memory_model.py ARTICLE, the 2+2+8 bytes of the article's
Accelerate runs) moves what the article's table says: every gradient in the precision's bytes (DDP's
all_reduce of bf16 gradients, not this suite's fp32 ones under autocast), ZeRO-1/2's gradients
reduce-scattered (not all-reduced), and ZeRO-3 and FSDP gathering each block before forward and again
before backward (Accelerate's FULL_SHARD resharding; its FSDP peak of 37 GB, under ZeRO-3's 40, holds
no gathered model). Per parameter and (N-1)/N that is 2 units of the precision's bytes for DDP and
ZeRO-1/2 and 3 for ZeRO-3 and FSDP; the implementation accounting moves 4 for DDP (fp32) and 3 for
every other strategy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from wirecheck.core.precision import precision as _precision
from wirecheck.training.memory_model import ARTICLE, IMPLEMENTATION
from wirecheck.vocab.shape import block_params
from wirecheck.vocab.strategies import FP32, GRADS, OPTIMIZER, PARAMS, strategy as _strategy

ALGBW_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
                "reduce_scatter": lambda n: (n - 1) / n}


@dataclass(frozen=True)
class Collective:
    op: str
    what: str  # "gradients", "parameters after the step", ...
    total_bytes: float  # per step, the whole buffer (nccl-tests' size convention)
    bucket_bytes: float  # the size of one call
    overlapped: bool  # issued while compute runs (it can hide under it)

    @property
    def calls(self) -> int:
        return max(1, math.ceil(self.total_bytes / self.bucket_bytes - 1e-9))

    @property
    def call_bytes(self) -> float:
        return self.total_bytes / self.calls

    def seconds(self, n_gpus: int, busbw_at) -> float:
        """Time of this step's calls at `busbw_at(size)` bytes/s: busbw = algbw x the op's factor."""
        if n_gpus < 2:
            return 0.0
        return self.calls * self.call_bytes * ALGBW_FACTOR[self.op](n_gpus) / busbw_at(self.call_bytes)


def schedule(name: str, n_params: float, shape: dict, precision: str, accounting: str = IMPLEMENTATION) -> list[Collective]:
    row = _strategy(name)
    settings = row.defaults(shape)
    low = _precision(precision).model_bytes
    article = accounting == ARTICLE
    if accounting not in (ARTICLE, IMPLEMENTATION):
        raise ValueError(f"accounting {accounting!r}: expected {IMPLEMENTATION} or {ARTICLE}")
    grad_bytes = low if article or row.holds.grads != FP32 else 4
    block = block_params(shape)
    if PARAMS in row.shards:
        reduce_bytes = 4 if settings.get("reduce_dtype") == "fp32" and not article else grad_bytes
        gathers = 1 if settings.get("reshard_after_forward") is False and not article else 2
        out = [Collective("all_gather", "parameters, each block " + ("once (kept from forward to backward)"
                                                                    if gathers == 1 else "before forward and backward"),
                          gathers * low * n_params, low * block, True)]
        bucket = settings.get("reduce_bucket_size")
        out.append(Collective("reduce_scatter", "gradients", reduce_bytes * n_params,
                              reduce_bytes * (bucket if bucket else block), True))
        return out
    if GRADS in row.shards or OPTIMIZER in row.shards:
        return [Collective("reduce_scatter" if article else "all_reduce", "gradients" + (" during backward" if settings.get("overlap_comm") else
                                                         " after backward"),
                           grad_bytes * n_params, grad_bytes * settings.get("reduce_bucket_size", n_params),
                           bool(settings.get("overlap_comm"))),
                Collective("all_gather", "parameters after the step", low * n_params,
                           low * settings.get("allgather_bucket_size", n_params), False)]
    bucket_mb = settings.get("bucket_cap_mb")
    return [Collective("all_reduce", "gradients during backward", grad_bytes * n_params,
                       bucket_mb * 2 ** 20 if bucket_mb else grad_bytes * n_params, True)]
