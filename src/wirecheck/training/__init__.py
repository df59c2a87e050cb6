"""Training workload for the strategy checks: a small GPT, seeded data, one runner per strategy.

Worker entry points: `wirecheck.training:run_strategy`, named by strategy_run.RUN_STRATEGY_WORKER
(runner.py's function; see there for the record), and `wirecheck.training.single_gpu:train_alone`: one
GPU alone, the dial's baseline (scaling.py holds its parent side and the scaling efficiency; dial.py
the dial as text). The parent's side of a run (`strategy_run`: the run on a fresh group, its figures
and record), the strategies table (`wirecheck.vocab.strategies`: the strategy names are its NAMES),
the memory model and the figures (`.figures`) import no torch, so the pytest process can read them;
everything else is loaded on first use, and the trainer modules the table names (ddp,
deepspeed_zero, fsdp) only inside the worker, so importing this package imports neither torch,
DeepSpeed nor Accelerate.

May import: core, vocab, records, node, workers.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "GPT": "wirecheck.training.model",
    "GPTShape": "wirecheck.vocab.shape",
    "param_count": "wirecheck.vocab.shape",
    "shape_for_params": "wirecheck.vocab.shape",
    "local_batch": "wirecheck.training.data",
    "run_strategy": "wirecheck.training.runner",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'wirecheck.training' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
