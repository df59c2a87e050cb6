"""The same per-rank step with communication removed: the reference for exposed communication.

After the strategy has run and been torn down, each rank trains its own micro-batches on an
unwrapped copy of the model, alone: forward, backward and the optimizer step exactly as DDP
runs them (fp32 parameters under bf16 autocast, the same AdamW implementation), timed the same
way (CUDA events, the same stop rule). No collective runs, so this is what one GPU needs for
the work of one rank. Then, per strategy and wire:

    exposed communication per step = strategy step time (median) - local step time (median)

i.e. everything distribution adds that compute does not hide: communication on the critical
path, waiting for the slower rank, and the strategy's own bookkeeping (gather/release hooks,
flattening copies, master-weight casts). One baseline for every strategy keeps the figures
comparable; its known bias: sharded strategies update only 1/N of the parameters and ZeRO/FSDP
compute on bf16 parameters without autocast's casts, so their true compute is a few percent
below this baseline and their exposed figure a few milliseconds low (it can be slightly
negative for ZeRO-1/2 on a fast wire).

Why this and not the profiler's non-overlapped NCCL time: an NCCL kernel on the GPU timeline
includes its spin-wait for the peer, the profiler needs CUPTI and perturbs the step, and gloo
on CPU has no kernels at all; this works the same on every backend. The device probe adds the
profiler's view (training/profile.py) to split the figure into communication and idle time.
"""

from __future__ import annotations

import gc
from contextlib import nullcontext

import torch

from wirecheck.training.model import GPT, GPTShape, param_count
from wirecheck.training.timing import StepClock, StopRule, time_steps

WARMUP_STEPS = 2  # Adam's state is allocated in the first step; the second is a normal one
BYTES_PER_PARAM = 16  # fp32 parameter, gradient, Adam m and v
ACTIVATION_BYTES_PER_TOKEN_LAYER_D = 34  # Megatron's estimate: 34·s·b·h bytes per layer (bf16, no recompute)
LOGIT_BYTES_PER_TOKEN_VOCAB = 12  # bf16 logits, their fp32 copy for the loss, and its gradient
MARGIN = 1.25


def optimizer_flags(implementation: str) -> dict:
    """torch AdamW keyword arguments for an implementation name of strategies.OPTIMIZER_IMPLEMENTATIONS."""
    return {"fused": {"fused": True}, "foreach": {"foreach": True},
            "for-loop": {"foreach": False, "fused": False}}[implementation]


def optimizer_implementation(optimizer: torch.optim.Optimizer) -> str:
    """Which implementation a torch optimizer runs, read from its parameter groups."""
    group = optimizer.param_groups[0]
    if group.get("fused"):
        return "fused"
    if group.get("foreach"):
        return "foreach"
    if group.get("foreach") is None and group.get("fused") is None:
        return "default"  # torch decides per step (foreach on CUDA): not what was asked
    return "for-loop"


def estimate_bytes(shape: GPTShape | dict, micro_batch: int) -> int:
    s = GPTShape.of(shape)
    tokens = micro_batch * s.seq_len
    state = BYTES_PER_PARAM * param_count(s)
    activations = ACTIVATION_BYTES_PER_TOKEN_LAYER_D * tokens * s.d_model * s.n_layer
    logits = LOGIT_BYTES_PER_TOKEN_VOCAB * tokens * s.vocab_size
    return int(MARGIN * (state + activations + logits))


class PlainLoop:
    """The unwrapped model trained as DDP's ranks train it, without communication: fp32 parameters
    under bf16 autocast (in bf16), the same AdamW implementation, zero_grad, backward and step.
    The local baseline times it after a strategy; one GPU alone (training/single_gpu.py) trains it."""

    def __init__(self, device: torch.device, shape: GPTShape | dict, seed: int, precision: str, optimizer: str,
                 lr: float):
        torch.manual_seed(seed)  # the strategies' initial weights
        with torch.device(device):
            self.model = GPT(GPTShape.of(shape))
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr, **optimizer_flags(optimizer))
        self._autocast = torch.autocast(device.type, dtype=torch.bfloat16) if precision == "bf16" else nullcontext()

    def step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """One training step; the loss (not synchronised: the caller decides when to read it)."""
        with self._autocast:
            loss = self.model(x, y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return loss

    def close(self) -> None:
        self.model = self.optimizer = None


def local_step_times(device: torch.device, shape: dict, batches: list, seed: int, precision: str,
                     optimizer: str, lr: float, rule: StopRule) -> dict:
    """Time this rank's steps on an unwrapped model; a dict of local_* fields for the record."""
    if device.type == "cuda":
        gc.collect()
        torch.cuda.empty_cache()
        free, _ = torch.cuda.mem_get_info(device)
        need = estimate_bytes(shape, batches[0][0].shape[0])
        if need > free:
            return {"local_skipped": f"needs ~{need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free"}
    loop = PlainLoop(device, shape, seed, precision, optimizer, lr)

    def step(i: int) -> None:
        x, y = batches[i % len(batches)]
        loop.step(x, y)

    try:
        for i in range(WARMUP_STEPS):
            step(i)
        timed = time_steps(step, rule, StepClock(device), first_index=WARMUP_STEPS)
    finally:
        loop.close()
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    summary = timed.summary()
    return {
        "local_step_time_median_s": summary["step_time_median_s"],
        "local_step_time_ci_s": summary["step_time_ci_s"],
        "local_timed_steps": summary["timed_steps"],
        "local_stop_reason": summary["stop_reason"],
        "local_optimizer": optimizer,
    }
