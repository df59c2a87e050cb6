"""One training run of one strategy inside a worker process; returns a plain per-rank record.

Called by the launcher in every rank of a fresh worker group (DeepSpeed and Accelerate keep
process-global state, so a strategy never shares processes with another):

    WorkerGroup(label, world_size, backend, join_process_group=False).run(
        "wirecheck.training.runner:run_strategy", kwargs, timeout_s, what)

What the record holds and how it is measured:
- losses: the loss of every step, warm-up included, averaged over the ranks (the global
  batch loss), so it is comparable across strategies and rank counts. losses[0] is computed
  before any update: it only shows that every strategy starts from the same weights and
  data. A wrong gradient (reduction, sharding) shows from losses[1] on, so agreement checks
  must compare losses[1] too. Adam's first update is lr * g/|g| per element: a gradient
  wrong only by a constant factor (a sum where a mean was due) barely shows even there.
- step_times_s: wall time of each timed step, device synchronised at both ends; warm-up
  steps are run first and not timed. tokens_per_s is the global rate at the median step.
- model_state_bytes: params/grads/optimizer bytes this rank holds, local shards only
  (state_bytes.py), taken in an extra backward pass after the timed steps, between backward
  and the optimizer step, when gradients and optimizer state both exist (ZeRO-1 also just
  before its end-of-backward reduction: deepspeed_zero.py). The extra pass is in neither
  losses nor step times.
- peak_allocated_bytes / peak_reserved_bytes: CUDA allocator peaks over the training steps
  (reset after the model is wrapped: each rank builds the full model before sharding it,
  which a real job avoids with meta-device or zero.Init construction); None on CPU.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import platform
import statistics
import time

import torch
import torch.distributed as dist

from wirecheck.precision import precision as check_precision
from wirecheck.training.data import local_batch
from wirecheck.training.model import GPT, GPTShape, param_count

STRATEGIES = ("ddp", "zero1", "zero2", "zero3", "fsdp")


def _trainer(strategy: str, ctx, model, lr: float, precision: str, micro_batch: int):
    if strategy == "ddp":
        from wirecheck.training.ddp import DDPTrainer

        return DDPTrainer(ctx, model, lr, precision, micro_batch)
    if strategy == "fsdp":
        from wirecheck.training.fsdp import FSDPTrainer

        return FSDPTrainer(ctx, model, lr, precision, micro_batch)
    from wirecheck.training.deepspeed_zero import DeepSpeedTrainer

    return DeepSpeedTrainer(ctx, model, lr, precision, micro_batch, strategy)


def _ensure_process_group(ctx) -> None:
    """torch-native strategies join the group themselves when the launcher did not."""
    if dist.is_initialized():
        return
    kwargs = {"backend": ctx.backend, "rank": ctx.rank, "world_size": ctx.world_size}
    if ctx.device.type == "cuda":
        kwargs["device_id"] = ctx.device  # eager NCCL init on the right GPU
    dist.init_process_group(**kwargs)


def load_hook(spec: str):
    """`module:function` or `path/to/file.py:function` -> the function (test hooks only)."""
    target, _, name = spec.rpartition(":")
    if not target or not name:
        raise ValueError(f"grad_hook {spec!r}: expected 'module:function' or 'file.py:function'")
    if target.endswith(".py"):
        module_spec = importlib.util.spec_from_file_location(f"_wirecheck_hook_{name}", target)
        if module_spec is None or module_spec.loader is None:
            raise ValueError(f"grad_hook {spec!r}: cannot load {target}")
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    return getattr(module, name)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine() or "cpu"


def _validate(strategy, precision, warmup_steps, steps, micro_batch):
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy {strategy!r}: expected one of {STRATEGIES}")
    check_precision(precision)
    if steps < 1 or warmup_steps < 0 or micro_batch < 1:
        raise ValueError(f"need steps >= 1, warmup_steps >= 0, micro_batch >= 1 "
                         f"(got {steps}, {warmup_steps}, {micro_batch})")


def _train(ctx, strategy, shape, micro_batch, warmup_steps, steps, seed, precision, lr, grad_hook):
    device = ctx.device
    s = GPTShape.of(shape)
    torch.manual_seed(seed)  # same initial weights on every rank and for every strategy
    with torch.device(device):
        model = GPT(s)
    n_params = param_count(s)
    assert sum(p.numel() for p in model.parameters()) == n_params
    if grad_hook:
        load_hook(grad_hook)(model)

    trainer = _trainer(strategy, ctx, model, lr, precision, micro_batch)
    del model  # the trainer holds the (wrapped) model
    try:
        total = warmup_steps + steps
        batches = [
            local_batch(seed, i, ctx.rank, micro_batch, s.seq_len, s.vocab_size, device)
            for i in range(total)
        ]
        if device.type == "cuda":
            gc.collect()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)

        losses, times = [], []
        for i, (x, y) in enumerate(batches):
            _sync(device)
            t0 = time.perf_counter()
            loss = trainer.loss(x, y)
            trainer.update(loss)
            _sync(device)
            if i >= warmup_steps:
                times.append(time.perf_counter() - t0)
            losses.append(loss.detach().float().reshape(1))

        peaks = (None, None)
        if device.type == "cuda":  # the training steps' peak, before the measurement pass
            peaks = (torch.cuda.max_memory_allocated(device), torch.cuda.max_memory_reserved(device))

        # measurement pass: gradients and optimizer state both present (see module doc)
        x, y = batches[0]
        state = trainer.measure_state(trainer.loss(x, y))

        global_losses = torch.cat(losses)
        dist.all_reduce(global_losses, op=dist.ReduceOp.SUM)  # gloo has no AVG
        global_losses = (global_losses / ctx.world_size).tolist()

        median = statistics.median(times)
        record = {
            "strategy": strategy,
            "rank": ctx.rank,
            "world_size": ctx.world_size,
            "n_params": n_params,
            "shape": s.as_dict(),
            "micro_batch": micro_batch,
            "losses": global_losses,
            "first_loss": global_losses[0],
            "step_times_s": times,
            "step_time_median_s": median,
            "step_time_spread": max(times) / min(times),
            "tokens_per_s": micro_batch * s.seq_len * ctx.world_size / median,
            "peak_allocated_bytes": peaks[0],
            "peak_reserved_bytes": peaks[1],
            "model_state_bytes": state,  # {params, grads, optimizer}: sum them for the total
            "wrapper": trainer.wrapper,
            "precision": precision,
            "device_name": _device_name(device),
            "backend": ctx.backend,
            "torch_version": torch.__version__,
        }
        if strategy.startswith("zero"):
            import accelerate
            import deepspeed

            record["deepspeed_version"] = deepspeed.__version__
            record["accelerate_version"] = accelerate.__version__
        return record
    finally:
        trainer.close()


def run_strategy(
    ctx,
    strategy: str,
    shape: dict,
    micro_batch: int,
    warmup_steps: int,
    steps: int,
    seed: int,
    precision: str,
    lr: float = 1e-3,
    grad_hook: str | None = None,
) -> dict:
    """Train `strategy` for warmup_steps + steps steps in this rank; return its record.

    `grad_hook` ("module:function" or "file.py:function") is for self-tests only: the
    function gets the unwrapped model before the strategy wraps it and may register hooks
    that corrupt the gradient, to prove that the agreement checks catch it.
    """
    _validate(strategy, precision, warmup_steps, steps, micro_batch)
    if ctx.device.type == "cuda":
        torch.cuda.set_device(ctx.device)  # before NCCL or FSDP's device mesh pick a device
    owns_group = not dist.is_initialized()
    if strategy in ("ddp", "fsdp"):
        _ensure_process_group(ctx)
    finished = False
    try:
        record = _train(ctx, strategy, shape, micro_batch, warmup_steps, steps, seed, precision, lr, grad_hook)
        finished = True
        return record
    finally:
        # Order matters with gloo: a process group still referenced by a DDP reducer, FSDP or
        # DeepSpeed object at interpreter exit aborts the process (SIGABRT). Wrappers are
        # dropped in _train; collect them, then leave the group together. After a failure
        # the peers may never reach a barrier: leave without one.
        gc.collect()
        if dist.is_initialized():
            if finished:
                dist.barrier()
            if owns_group:
                dist.destroy_process_group()
        gc.collect()
