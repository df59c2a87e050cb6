"""DDP: every rank keeps everything; one all-reduce of the gradients per step.

bf16 is torch.autocast over fp32 parameters (how DDP is used for mixed precision), so DDP
holds fp32 params, fp32 grads and fp32 Adam state: 16 bytes per parameter.
gradient_as_bucket_view=True makes .grad a view into DDP's reduce buckets; without it DDP
would hold a second full copy of the gradients (the buckets) besides .grad.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from wirecheck.training.state_bytes import torch_module_state


class DDPTrainer:
    strategy = "ddp"

    def __init__(self, ctx, model: torch.nn.Module, lr: float, precision: str, micro_batch: int):
        device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
        self.model = DistributedDataParallel(
            model, device_ids=device_ids, gradient_as_bucket_view=True
        )
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr)
        self._autocast = (
            torch.autocast(ctx.device.type, dtype=torch.bfloat16)
            if precision == "bf16"
            else nullcontext()
        )
        self.wrapper = type(self.model).__name__
        self._check(ctx)

    def _check(self, ctx) -> None:
        # a silent fallback to single-process training must not pass as DDP
        if not isinstance(self.model, DistributedDataParallel):
            raise RuntimeError(f"ddp: model is {type(self.model).__name__}, not DistributedDataParallel")
        group_size = dist.get_world_size(self.model.process_group)
        if group_size != ctx.world_size:
            raise RuntimeError(f"ddp: process group has {group_size} ranks, expected {ctx.world_size}")

    def loss(self, x, y):
        with self._autocast:
            return self.model(x, y)

    def update(self, loss) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()

    def measure_state(self, loss) -> dict:
        """Backward without the step: gradients and optimizer state both held."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        return torch_module_state(self.model.module, self.optimizer)

    def close(self) -> None:
        # DDP's reducer holds the process group; drop it before the group is destroyed
        self.optimizer = None
        self.model = None
