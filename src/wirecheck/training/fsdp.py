"""FSDP2 (`fully_shard`): parameters, gradients and Adam state sharded over the ranks.

Used through torch directly: Accelerate's FSDP plugin is silently dropped on CPU (the model
comes back unwrapped and ranks train independently), so the CPU checks could not see it.
Each transformer block is one FSDP unit (all-gathered before its forward and backward,
resharded after), the root holds the embeddings, final norm and head.

bf16: MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): the sharded parameters stay
fp32 (4/N bytes per parameter), the bf16 copies exist only while a unit is gathered, and
gradients are reduce-scattered in fp32 into fp32 shards (4/N), Adam fp32 m and v (8/N).
"""

from __future__ import annotations

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, Shard

from wirecheck.training.torch_trainer import TorchTrainer


class FSDPTrainer(TorchTrainer):
    strategy = "fsdp"

    def __init__(self, ctx, model: torch.nn.Module, lr: float, precision: str, micro_batch: int):
        mesh = init_device_mesh(ctx.device.type, (ctx.world_size,))
        if precision == "bf16":
            mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        else:
            mp = MixedPrecisionPolicy()
        for block in model.blocks:
            fully_shard(block, mesh=mesh, mp_policy=mp)
        self._finish(fully_shard(model, mesh=mesh, mp_policy=mp), lr)
        self._check(ctx)

    def _check(self, ctx) -> None:
        # every parameter must be a DTensor sharded over all ranks, or this is not FSDP
        for name, p in self.model.named_parameters():
            if not isinstance(p, DTensor):
                raise RuntimeError(f"fsdp: parameter {name} is {type(p).__name__}, not a sharded DTensor")
            if p.device_mesh.size() != ctx.world_size or tuple(p.placements) != (Shard(0),):
                raise RuntimeError(
                    f"fsdp: parameter {name} placed {p.placements} over a mesh of "
                    f"{p.device_mesh.size()}, expected Shard(0) over {ctx.world_size}"
                )
