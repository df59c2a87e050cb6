"""One GPU alone trains the strategy checks' model: the baseline every strategy's scaling is
measured against. Runs in a worker of a one-rank group; no process group, no collective.

    WorkerGroup(label, 1, backend, join_process_group=False).run(
        "wirecheck.training.single_gpu:train_alone", kwargs, timeout_s, what)

The loop is the local baseline's (training/baseline.py PlainLoop): the model DDP trains, built
from the same seed, fp32 parameters under bf16 autocast, the same AdamW implementation, the
same synthetic batches (rank 0's micro-batch of each step), timed as the strategies are (CUDA
events, the median until it settles: training/timing.py). What one GPU reaches this way is
the most a data-parallel job can give per GPU, so tokens/s per GPU of a strategy over this
figure is its scaling efficiency (training/scaling.py).

The record keeps the strategy runner's names for what both have (losses, step_times_s,
tokens_per_s, peak_allocated_bytes, achieved_flops_per_gpu, ...: training/runner.py says what
each is), so the same readers take both; warmup_step_s is its own: each warm-up step's seconds,
synchronised one by one (a node's first run spends 1.5-2.5 s more there than its later runs).

`prepare` does that first step's one-time work ahead, on one block of the model: the GPU load calls it in
its sustained load's shadow in the worker that trains next (a one-GPU node's pool worker), so the training
finds its imports done and its kernels compiled (cuDNN's attention is compiled at run time, and kept in the
CUDA JIT cache, on a node's first use: fixtures/reference/h200-1/first-warmup-2026-12-05).
"""

from __future__ import annotations

import time
from contextlib import nullcontext

import torch

from wirecheck.core.precision import precision as check_precision
from wirecheck.training import figures
from wirecheck.training.baseline import PlainLoop, optimizer_flags
from wirecheck.training.data import local_batch
from wirecheck.training.device import device_name, sync
from wirecheck.training.manual_gc import ManualGC
from wirecheck.training.model import Block
from wirecheck.vocab.shape import GPTShape, param_count
from wirecheck.training.timing import StepClock, StopRule, time_steps


CHECK_EVERY = 4  # steps between looks at the stop rule, as the strategy runner's (each look synchronises)


def prepare(ctx, shape: dict, micro_batch: int, precision: str, optimizer: str = "fused") -> dict:
    """train_alone's one-time work, done ahead in this process: the imports of its set-up (AdamW's construction
    imports torch._dynamo) and the kernels of its step (one block of the model at the run's micro-batch, sequence
    and precision: forward, backward, the optimizer's step). Queues its kernels without waiting for them (the
    caller's GPU work goes on) and leaves the random state and the model's weights as they were."""
    check_precision(precision)
    device = ctx.device
    t0 = time.perf_counter()
    if device.type == "cuda":
        torch.cuda.set_device(device)
    s = GPTShape.of(shape)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        with torch.device(device):
            block = Block(s)
            x = torch.randn(micro_batch, s.seq_len, s.d_model)
        opt = torch.optim.AdamW(block.parameters(), **optimizer_flags(optimizer))
        setup_s = time.perf_counter() - t0
        with torch.autocast(device.type, dtype=torch.bfloat16) if precision == "bf16" else nullcontext():
            y = block(x)
        y.float().square().mean().backward()
        opt.step()
    del block, opt, x, y
    return {"what": "one block of the training's model: forward, backward and the optimizer's step",
            "setup_s": setup_s, "seconds": time.perf_counter() - t0}


def train_alone(ctx, shape: dict, micro_batch: int, warmup_steps: int, steps: int, seed: int, precision: str,
                optimizer: str = "fused", lr: float = 1e-3, max_steps: int | None = None,
                ci_confidence: float = 0.95, ci_max_halfwidth: float = 0.02, gc_freq: int = 0) -> dict:
    """Train for warmup_steps, then `steps` to `max_steps` timed steps on this rank's one device;
    return the record (the strategy runner's fields where they mean the same)."""
    if ctx.world_size != 1:
        raise ValueError(f"one GPU alone: the group must have 1 rank, it has {ctx.world_size}")
    check_precision(precision)
    if steps < 1 or warmup_steps < 0 or micro_batch < 1:
        raise ValueError(f"need steps >= 1, warmup_steps >= 0, micro_batch >= 1 (got {steps}, {warmup_steps}, "
                         f"{micro_batch})")
    rule = StopRule(steps, max_steps, ci_confidence, ci_max_halfwidth)
    device = ctx.device
    if device.type == "cuda":
        torch.cuda.set_device(device)
    s = GPTShape.of(shape)
    phases = {}
    t0 = time.perf_counter()
    loop = PlainLoop(device, s, seed, precision, optimizer, lr)
    n_params = param_count(s)
    batches = [local_batch(seed, i, 0, micro_batch, s.seq_len, s.vocab_size, device)
               for i in range(warmup_steps + (max_steps or steps))]
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    sync(device)
    phases["setup"] = time.perf_counter() - t0
    losses: list[torch.Tensor] = []
    manual_gc = ManualGC(gc_freq)

    def step(i: int) -> None:
        manual_gc.at_step(i)
        x, y = batches[i]
        losses.append(loop.step(x, y).detach().float().reshape(1))  # no host sync inside the loop

    warmup_step_s = []  # each warm-up step alone: a node's first run spends its extra seconds in the first ones
    try:
        t0 = time.perf_counter()
        manual_gc.start()
        for i in range(warmup_steps):
            t_step = time.perf_counter()
            step(i)
            sync(device)
            warmup_step_s.append(time.perf_counter() - t_step)
        phases["warmup"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        timed = time_steps(step, rule, StepClock(device), chunk=CHECK_EVERY, first_index=warmup_steps)
        phases["timed"] = time.perf_counter() - t0
    finally:
        manual_gc.stop()
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    loss_values = torch.cat(losses).tolist()
    loop.close()

    tokens = micro_batch * s.seq_len
    summary = timed.summary()
    tokens_per_s = tokens / summary["step_time_median_s"]
    flops = figures.model_flops_per_token(n_params)
    return {
        "rank": 0,
        "world_size": 1,
        "n_params": n_params,
        "shape": s.as_dict(),
        "micro_batch": micro_batch,
        "tokens_per_step": tokens,
        "losses": loss_values,
        "first_loss": loss_values[0],
        **summary,
        "tokens_per_s": tokens_per_s,
        "tokens_per_s_min": tokens / summary["step_time_max_s"],
        "tokens_per_s_max": tokens / summary["step_time_min_s"],
        "peak_allocated_bytes": peak,
        "optimizer": optimizer,
        "gc_freq": gc_freq,
        "precision": precision,
        "device_name": device_name(device),
        "backend": ctx.backend,
        "torch_version": str(torch.__version__),
        "model_flops_per_token": flops,
        "attention_flops_per_token": figures.attention_flops_per_token(s.n_layer, s.d_model, s.seq_len),
        "achieved_flops_per_gpu": figures.achieved_flops_per_gpu(flops, tokens_per_s, 1),
        "phase_s": phases,
        "warmup_step_s": warmup_step_s,
    }
