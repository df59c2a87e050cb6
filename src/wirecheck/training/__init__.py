"""Training workload for the strategy checks: a small GPT, seeded data, one runner per strategy.

Worker entry point: `wirecheck.training.runner:run_strategy` (see runner.py for the record).
The strategy modules (ddp, deepspeed_zero, fsdp) are imported only by the runner, inside the
worker, so importing this package does not import DeepSpeed or Accelerate.
"""

from wirecheck.training.data import local_batch
from wirecheck.training.model import GPT, GPTShape, param_count, shape_for_params
from wirecheck.training.runner import STRATEGIES, run_strategy

__all__ = [
    "GPT",
    "GPTShape",
    "STRATEGIES",
    "local_batch",
    "param_count",
    "run_strategy",
    "shape_for_params",
]
