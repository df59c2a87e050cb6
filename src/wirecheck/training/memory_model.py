"""Predicted model-state bytes per GPU (params, grads, optimizer state) for each strategy.

Both accountings read each strategy's row of the strategies table: what it shards (`shards`:
that part is divided by the GPU count) and, for the implementation accounting, what its
implementation holds per parameter before sharding (`holds`). A new strategy needs no line here.

Two accountings:

ARTICLE: the textbook mixed-precision Adam figure the project was founded on, 2 B params +
2 B grads + 8 B Adam m and v per parameter, sharded as each strategy shards:
    DDP 2+2+8, ZeRO-1 2+2+8/N, ZeRO-2 2+(2+8)/N, ZeRO-3 and FSDP (2+2+8)/N.
It reproduces the article's Mistral-7B figures (7.24e9 params, 4 GPUs: DDP ~87 GB, FSDP
~22 GB). It leaves out the fp32 master copy that real mixed-precision Adam keeps.
In fp32 the same accounting holds params and grads in 4 bytes: 4+4+8 (no master copy is
needed when the parameters are fp32 already).

IMPLEMENTATION: what the implementations used here really allocate, checked against the
tensors they hold (wirecheck.training.state_bytes, self-tests on CPU at 2 ranks) and
DeepSpeed 0.19.8's source (runtime/zero/stage_1_and_2.py, stage3.py):
- DDP with bf16 autocast keeps fp32 params (4), fp32 grads (4, as views into its reduce
  buckets) and fp32 Adam m, v (8): 16 B/param, bf16 or not.
- DeepSpeed bf16: bf16 params (2) and bf16 grads (2; DeepSpeed accumulates in the model
  dtype unless data_types.grad_accum_dtype says fp32), plus, for the local partition, an
  fp32 master copy (4) and Adam m, v (8), so optimizer 12/N. ZeRO-1 holds the full
  gradients at the end of backward (it reduces then and keeps its partition); ZeRO-2
  reduces during backward and keeps only its partition (2/N); ZeRO-3 also shards params.
  In fp32 DeepSpeed still clones an fp32 master partition, so everything is 4 B and the
  optimizer 12/N. Not modelled (each below ~1-4 % at the sizes used): the fp32 copy of the
  gradient partition that exists only inside step(), the ZeRO-2 partition buffer that
  covers whole parameters at the partition edges, ZeRO-3's reduce bucket and the small
  parameters it keeps whole (stage3_param_persistence_threshold).
- FSDP2 with MixedPrecisionPolicy(bf16 params, fp32 reduce): the sharded params stay fp32
  (4/N), grads are fp32 shards (4/N), Adam 8/N; the bf16 copies exist only while a unit is
  gathered. fp32 is the same.

Model state only: activations, gathered parameters, communication buffers and allocator
slack come on top of it in any measured peak.
"""

from __future__ import annotations

import math
from numbers import Real
from typing import NamedTuple

from wirecheck.core.precision import DEFAULT as DEFAULT_PRECISION
from wirecheck.core.precision import precision as _precision
from wirecheck.vocab.strategies import FP32, GRADS, NAMES, OPTIMIZER, PARAMS, STATE_PARTS, Strategy, strategy as _strategy

ARTICLE = "article"
IMPLEMENTATION = "implementation"
ACCOUNTINGS = (ARTICLE, IMPLEMENTATION)
GB = 1e9  # the article's GB: decimal
ARTICLE_ADAM_BYTES = 8  # Adam m and v in fp32; the article leaves out the fp32 master copy
FP32_BYTES = 4


class StateBytes(NamedTuple):
    params: int
    grads: int
    optimizer: int
    total: int


def _check(strategy: str, n_gpus: int, accounting: str, precision: str) -> Strategy:
    row = _strategy(strategy)
    if accounting not in ACCOUNTINGS:
        raise ValueError(f"accounting {accounting!r}: expected one of {ACCOUNTINGS}")
    _precision(precision)
    if isinstance(n_gpus, bool) or not isinstance(n_gpus, int) or n_gpus < 1:
        raise ValueError(f"n_gpus must be a positive integer, got {n_gpus!r}")
    return row


def _check_params(n_params: object) -> None:
    # A count from a computation (capacity.py sizes a model from a memory budget) need not be
    # whole, but it must be a real, finite count of at least one parameter: NaN and inf would
    # fail deep inside round(), and a fraction of a parameter predicts a table of zeros.
    if isinstance(n_params, bool) or not isinstance(n_params, Real):
        raise ValueError(f"n_params must be a number of parameters, got {n_params!r}")
    if not math.isfinite(n_params):
        raise ValueError(f"n_params must be a finite number of parameters, got {n_params!r}")
    if n_params < 1:
        raise ValueError(f"n_params must be at least 1 (a model has at least one parameter), got {n_params!r}")


def bytes_per_param(
    strategy: str, n_gpus: int, accounting: str = IMPLEMENTATION, precision: str = DEFAULT_PRECISION
) -> tuple[float, float, float]:
    """(params, grads, optimizer) bytes per model parameter held by one GPU of n_gpus.

    ARTICLE: params and grads in the precision's bytes (bf16 2, fp32 4) and Adam m, v 8.
    IMPLEMENTATION: what the strategy's row says its implementation holds (`holds`).
    Either way a part the strategy shards is divided by n_gpus.
    """
    row = _check(strategy, n_gpus, accounting, precision)
    low = _precision(precision).model_bytes  # the article's params/grads; DeepSpeed's model dtype
    if accounting == ARTICLE:
        whole = {PARAMS: low, GRADS: low, OPTIMIZER: ARTICLE_ADAM_BYTES}
    else:
        def dtype_bytes(dtype: str) -> int:
            return FP32_BYTES if dtype == FP32 else low

        whole = {PARAMS: dtype_bytes(row.holds.params), GRADS: dtype_bytes(row.holds.grads),
                 OPTIMIZER: row.holds.optimizer_bytes}
    p, g, o = (whole[part] / n_gpus if part in row.shards else whole[part] for part in STATE_PARTS)
    return p, g, o


def predict(
    strategy: str,
    n_params: int,
    n_gpus: int,
    accounting: str = IMPLEMENTATION,
    precision: str = DEFAULT_PRECISION,
) -> StateBytes:
    """Model-state bytes one GPU holds when n_gpus train a model of n_params with `strategy`."""
    _check_params(n_params)
    p, g, o = (round(b * n_params) for b in bytes_per_param(strategy, n_gpus, accounting, precision))
    return StateBytes(p, g, o, p + g + o)


def format_memory_table(
    n_params: int, n_gpus: int, accounting: str = IMPLEMENTATION, precision: str = DEFAULT_PRECISION
) -> str:
    """Per-strategy GB per GPU (params, grads, optimizer, total), for `wirecheck memory`."""
    rows = [(s, predict(s, n_params, n_gpus, accounting, precision)) for s in NAMES]
    if accounting == ARTICLE:
        low = _precision(precision).model_bytes
        kind = "mixed-precision" if low < 4 else "full-precision"
        what = f"{precision} {kind} Adam, {low}+{low}+8 B/param"
    else:
        what = precision
    lines = [
        f"model state per GPU: {n_params:.3g} parameters on {n_gpus} GPU(s), "
        f"{accounting} accounting ({what}); GB = 1e9 bytes",
        f"{'strategy':<9} {'params':>9} {'grads':>9} {'optim':>9} {'total':>9}",
    ]
    for name, b in rows:
        lines.append(
            f"{name:<9} {b.params / GB:>9.2f} {b.grads / GB:>9.2f} "
            f"{b.optimizer / GB:>9.2f} {b.total / GB:>9.2f}"
        )
    lines.append("activations, gathered parameters and communication buffers come on top")
    return "\n".join(lines)
