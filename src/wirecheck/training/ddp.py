"""DDP: every rank keeps everything; gradients all-reduced in buckets during backward.

bf16 is torch.autocast over fp32 parameters (how DDP is used for mixed precision), so DDP
holds fp32 params, fp32 grads and fp32 Adam state: 16 bytes per parameter.
Settings (strategies.py): bucket_cap_mb, gradient_as_bucket_view (.grad are views into DDP's
reduce buckets; without it DDP would hold a second full copy of the gradients), optimizer.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from wirecheck.training.torch_trainer import TorchTrainer

MiB = 2**20


class DDPTrainer(TorchTrainer):
    def __init__(self, ctx, strategy, model: torch.nn.Module, lr: float, precision: str, micro_batch: int,
                 settings: dict):
        self.strategy = strategy.name
        device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
        ddp = DistributedDataParallel(model, device_ids=device_ids, bucket_cap_mb=settings["bucket_cap_mb"],
                                      gradient_as_bucket_view=settings["gradient_as_bucket_view"])
        self._finish(ddp, lr, settings["optimizer"])
        if precision == "bf16":
            self._autocast = torch.autocast(ctx.device.type, dtype=torch.bfloat16)
        self._check(ctx)

    def _module(self) -> torch.nn.Module:
        return self.model.module

    def in_force(self) -> dict:
        return {
            **super().in_force(),
            "bucket_cap_mb": self.model.bucket_bytes_cap / MiB,
            "gradient_as_bucket_view": self.model.gradient_as_bucket_view,
        }

    def _check(self, ctx) -> None:
        # a silent fallback to single-process training must not pass as DDP
        if not isinstance(self.model, DistributedDataParallel):
            raise RuntimeError(f"{self.strategy}: model is {type(self.model).__name__}, not DistributedDataParallel")
        group_size = dist.get_world_size(self.model.process_group)
        if group_size != ctx.world_size:
            raise RuntimeError(f"{self.strategy}: process group has {group_size} ranks, expected {ctx.world_size}")
