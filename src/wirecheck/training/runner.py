"""One training run of one strategy inside a worker process; returns a plain per-rank record.

Called by the launcher in every rank of a fresh worker group (DeepSpeed and Accelerate keep
process-global state, so a strategy never shares processes with another):

    WorkerGroup(label, world_size, backend, join_process_group=False).run(
        RUN_STRATEGY_WORKER, kwargs, timeout_s, what)

(training/strategy_run.py: the name, and run_strategy_on, the parent's side.)

The run: build the model (same seed on every rank), wrap it with the trainer the strategy's row
of the strategies table names (training/trainer.py), with the row's settings, and read every
setting back (vocab/strategies.py), warm up, time steps
until the median settles (training/timing.py), optionally profile a few steps, measure the
model state, tear the strategy down, then time the same micro-batches on the unwrapped model
alone (training/baseline.py) for the exposed-communication figure.

What the record holds and how it is measured:
- losses: the loss of every step, warm-up included, averaged over the ranks (the global
  batch loss), so it is comparable across strategies and rank counts. losses[0] is computed
  before any update: it only shows that every strategy starts from the same weights and
  data. A wrong gradient (reduction, sharding) shows from losses[1] on, so agreement checks
  must compare losses[1] too. Adam's first update is lr * g/|g| per element: a gradient
  wrong only by a constant factor (a sum where a mean was due) barely shows even there.
- step_times_s: each timed step, CUDA events on GPUs (perf_counter on CPU), the slowest rank
  per step; identical on every rank (so tokens_per_s is the same on every rank too). The host
  synchronises only every few steps (timing.py), so the CPU may run ahead as in real training. At least `steps` of them, then more until the median's
  distribution-free confidence interval (ci_confidence) lies within ci_max_halfwidth of the
  median, at most max_steps (stop_reason says which). tokens_per_s is the global rate at the
  median step; tokens_per_s_min/max at the slowest/fastest step.
- model_state_bytes: params/grads/optimizer bytes this rank holds, local shards only
  (state_bytes.py), taken in an extra backward pass after the timed steps, between backward
  and the optimizer step, when gradients and optimizer state both exist (ZeRO-1 also just
  before its end-of-backward reduction: deepspeed_zero.py). The extra pass is in neither
  losses nor step times.
- comm_buffer_bytes: DeepSpeed's reduce buckets held at the state measurement, kept out of
  model_state_bytes (their size is a setting: reduce_bucket_size).
- peak_allocated_bytes / peak_reserved_bytes: CUDA allocator peaks over the training steps
  (reset after the model is wrapped: each rank builds the full model before sharding it,
  which a real job avoids with meta-device or zero.Init construction); None on CPU.
- settings: the strategy's settings as read back from the engine/module (all asked ones,
  checked equal before any step runs).
- model_flops_per_token (6 N), attention_flops_per_token (12 L d T), achieved_flops_per_gpu
  (6 N x tokens/s / ranks): divide by the GPU's dense peak for MFU (training/figures.py).
- local_step_time_median_s, exposed_comm_s (= step median - local median; None with
  local_skipped when the unwrapped model does not fit), exposed_comm_fraction (of the step);
  local_from where an earlier run on this GPU measured the local figure (training/local_baselines.py:
  once per GPU and run) and no "local" phase then.
- phase_s: wall seconds of setup (of which build: the model on the device, wrap: the
  strategy's construction, its trainer module's import included), warm-up, timed steps, profile,
  state pass, local baseline.
- setup_profile (setup_profile > 0): the wrapping's slowest functions by cumulative time.
- profile (profile_steps > 0): the device timeline of a few steps (training/profile.py).
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import time

import torch
import torch.distributed as dist

from wirecheck.core.precision import precision as check_precision
from wirecheck.training import figures
from wirecheck.training.baseline import local_step_times
from wirecheck.training.data import local_batch
from wirecheck.training.host import HostWatch
from wirecheck.training.device import device_name, sync
from wirecheck.training.manual_gc import ManualGC
from wirecheck.training.setup_profile import SetupProfile
from wirecheck.training.model import GPT
from wirecheck.vocab.shape import GPTShape, param_count
from wirecheck.vocab.strategies import check_in_force, resolve_settings
from wirecheck.vocab.strategies import strategy as strategy_row
from wirecheck.training.timing import StepClock, StopRule, time_steps
from wirecheck.training.trainer import trainer_class

CHECK_EVERY = 4  # steps between looks at the stop rule (each look synchronises the device)


def _ensure_process_group(ctx) -> None:
    """A trainer whose library does not join the group (torch's own) gets it joined here when the
    launcher did not."""
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




def _slowest_rank(device: torch.device):
    """Per-step durations -> the slowest rank's, identical on every rank (one all-reduce)."""
    def combine(durations: list[float]) -> list[float]:
        t = torch.tensor(durations, dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.tolist()

    return combine


def _validate(strategy, precision, warmup_steps, steps, micro_batch, max_steps):
    strategy_row(strategy)  # a name the table does not have: ValueError naming the known ones
    check_precision(precision)
    if steps < 1 or warmup_steps < 0 or micro_batch < 1:
        raise ValueError(f"need steps >= 1, warmup_steps >= 0, micro_batch >= 1 "
                         f"(got {steps}, {warmup_steps}, {micro_batch})")
    if max_steps is not None and max_steps < steps:
        raise ValueError(f"max_steps ({max_steps}) must be >= steps ({steps})")


def _train(ctx, strategy, trainer_cls, import_s, s, micro_batch, warmup_steps, rule, seed, precision, lr, grad_hook,
           settings, local_baseline, profile_steps, gc_freq, setup_profile):
    device = ctx.device
    phases = {}
    t0 = time.perf_counter()
    torch.manual_seed(seed)  # same initial weights on every rank and for every strategy
    with torch.device(device):
        model = GPT(s)
    n_params = param_count(s)
    assert sum(p.numel() for p in model.parameters()) == n_params
    if grad_hook:
        load_hook(grad_hook)(model)

    sync(device)
    phases["build"] = time.perf_counter() - t0
    manual_gc = ManualGC(gc_freq)
    t_wrap = time.perf_counter()
    with SetupProfile(setup_profile) as wrap_profile:
        trainer = trainer_cls(ctx, strategy_row(strategy), model, lr, precision, micro_batch, settings)
        sync(device)
    phases["wrap"] = time.perf_counter() - t_wrap + import_s
    del model  # the trainer holds the (wrapped) model
    try:
        in_force = trainer.in_force()
        check_in_force(strategy, settings, in_force)  # before any step: a wrong setting wastes nothing
        total = warmup_steps + (rule.max_steps or rule.min_steps) + profile_steps
        batches = [
            local_batch(seed, i, ctx.rank, micro_batch, s.seq_len, s.vocab_size, device)
            for i in range(total)
        ]
        if device.type == "cuda":
            gc.collect()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        losses = []

        def step(i: int) -> None:
            manual_gc.at_step(i)
            x, y = batches[i]
            loss = trainer.loss(x, y)
            trainer.update(loss)
            losses.append(loss.detach().float().reshape(1))  # no host sync inside the loop

        sync(device)
        phases["setup"] = time.perf_counter() - t0 + import_s
        t0 = time.perf_counter()
        manual_gc.start()
        for i in range(warmup_steps):
            step(i)
        sync(device)
        phases["warmup"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        with HostWatch() as host:
            timed = time_steps(step, rule, StepClock(device), _slowest_rank(device), CHECK_EVERY, warmup_steps)
        phases["timed"] = time.perf_counter() - t0
        manual_gc.stop()
        profile = None
        if profile_steps:
            from wirecheck.training.profile import profile_steps as run_profile

            t0 = time.perf_counter()
            try:
                profile = run_profile(step, profile_steps, device, warmup_steps + len(timed.durations))
            except Exception as exc:  # the profile explains; it must not cost the measurement
                profile = {"error": f"{type(exc).__name__}: {exc}"}
            phases["profile"] = time.perf_counter() - t0

        peaks = (None, None)
        if device.type == "cuda":  # the training steps' peak, before the measurement pass
            peaks = (torch.cuda.max_memory_allocated(device), torch.cuda.max_memory_reserved(device))

        t0 = time.perf_counter()
        # measurement pass: gradients and optimizer state both present (see module doc)
        x, y = batches[0]
        state = trainer.measure_state(trainer.loss(x, y))
        buffers = state.pop("buffers", 0)
        phases["state"] = time.perf_counter() - t0

        global_losses = torch.cat(losses)
        dist.all_reduce(global_losses, op=dist.ReduceOp.SUM)  # gloo has no AVG
        global_losses = (global_losses / ctx.world_size).tolist()
        wrapper = trainer.wrapper
    finally:
        manual_gc.stop()
        trainer.close()
        trainer = None

    tokens = micro_batch * s.seq_len * ctx.world_size
    summary = timed.summary()
    record = {
        "strategy": strategy,
        "rank": ctx.rank,
        "world_size": ctx.world_size,
        "n_params": n_params,
        "shape": s.as_dict(),
        "micro_batch": micro_batch,
        "tokens_per_step": tokens,
        "losses": global_losses,
        "first_loss": global_losses[0],
        **summary,
        "tokens_per_s": tokens / summary["step_time_median_s"],
        "tokens_per_s_min": tokens / summary["step_time_max_s"],
        "tokens_per_s_max": tokens / summary["step_time_min_s"],
        "peak_allocated_bytes": peaks[0],
        "peak_reserved_bytes": peaks[1],
        "model_state_bytes": state,  # {params, grads, optimizer}: sum them for the total
        "comm_buffer_bytes": buffers,  # DeepSpeed reduce buckets held at that point (state_bytes.py); 0 for torch
        "settings": in_force,
        "gc_freq": gc_freq,
        "host": host.figures(),
        "wrapper": wrapper,
        "precision": precision,
        "device_name": device_name(device),
        "backend": ctx.backend,
        "torch_version": str(torch.__version__),
    }
    flops = figures.model_flops_per_token(n_params)
    record["model_flops_per_token"] = flops
    record["attention_flops_per_token"] = figures.attention_flops_per_token(s.n_layer, s.d_model, s.seq_len)
    record["achieved_flops_per_gpu"] = figures.achieved_flops_per_gpu(flops, record["tokens_per_s"], ctx.world_size)
    if profile is not None:
        record["profile"] = profile
    if setup_profile:
        record["setup_profile"] = wrap_profile.top
    record.update(trainer_cls.library_versions())

    record["exposed_comm_s"] = record["exposed_comm_fraction"] = None
    local = None
    if isinstance(local_baseline, dict):  # measured on this rank's GPU by an earlier run (training/local_baselines.py)
        local = {**local_baseline["ranks"][str(ctx.rank)], "local_from": local_baseline["from"][str(ctx.rank)]}
    elif local_baseline:
        t0 = time.perf_counter()
        local_rule = StopRule(rule.min_steps, rule.max_steps, rule.confidence, rule.max_halfwidth)
        local = local_step_times(device, s.as_dict(), batches, seed, precision, settings["optimizer"], lr, local_rule)
        phases["local"] = time.perf_counter() - t0
    if local is not None:
        record.update(local)
        if "local_step_time_median_s" in local:
            exposed = summary["step_time_median_s"] - local["local_step_time_median_s"]
            record["exposed_comm_s"] = exposed
            record["exposed_comm_fraction"] = exposed / summary["step_time_median_s"]
    record["phase_s"] = phases
    return record


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
    max_steps: int | None = None,
    ci_confidence: float = 0.95,
    ci_max_halfwidth: float = 0.02,
    settings: dict | None = None,
    local_baseline: bool | dict = True,
    profile_steps: int = 0,
    gc_freq: int = 0,
    setup_profile: int = 0,
) -> dict:
    """Train `strategy` for warmup_steps, then `steps` to `max_steps` timed steps (exactly `steps`
    when max_steps is None); return this rank's record.

    `settings` overrides entries of the strategies table (the training probe's variants, scripts/device/training_probe.py).
    `local_baseline` times the unwrapped model afterwards (exposed communication); the
    capacity case turns it off; a dict hands each rank the figure an earlier run measured on its GPU
    instead (training/local_baselines.py: {"ranks": {"r": fields}, "from": {"r": which run}}).
    `profile_steps` profiles that many extra steps.
    `gc_freq` > 0 turns Python's automatic garbage collection off for the steps and collects
    the young generations every gc_freq steps instead (training/manual_gc.py); 0 leaves it on.
    `setup_profile` > 0 runs the strategy's wrapping (trainer construction) under cProfile and
    records that many functions with the most cumulative time (the training probe's question:
    where a strategy's set-up seconds go).
    `grad_hook` ("module:function" or "file.py:function") is for self-tests only: the
    function gets the unwrapped model before the strategy wraps it and may register hooks
    that corrupt the gradient, to prove that the agreement checks catch it.
    """
    _validate(strategy, precision, warmup_steps, steps, micro_batch, max_steps)
    asked = resolve_settings(strategy, shape, settings)
    rule = StopRule(steps, max_steps, ci_confidence, ci_max_halfwidth)
    if ctx.device.type == "cuda":
        torch.cuda.set_device(ctx.device)  # before NCCL or FSDP's device mesh pick a device
    # The trainer's class says whether its library joins the process group, so it is imported before
    # the group is joined; its import time still counts as part of wrapping (set-up), as it always did.
    t_import = time.perf_counter()
    trainer_cls = trainer_class(strategy_row(strategy))
    import_s = time.perf_counter() - t_import
    owns_group = not dist.is_initialized()
    if not trainer_cls.joins_process_group:
        _ensure_process_group(ctx)
    finished = False
    try:
        record = _train(ctx, strategy, trainer_cls, import_s, GPTShape.of(shape), micro_batch, warmup_steps, rule, seed,
                        precision, lr, grad_hook, asked, local_baseline, profile_steps, gc_freq, setup_profile)
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
