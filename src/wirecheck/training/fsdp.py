"""FSDP2 (`fully_shard`): parameters, gradients and Adam state sharded over the ranks.

Used through torch directly: Accelerate's FSDP plugin is silently dropped on CPU (the model
comes back unwrapped and ranks train independently), so the CPU checks could not see it.
Laid out as torchtitan's `apply_fsdp` (settings `units: torchtitan`): the token embedding, each
transformer block, and [final norm + head] are FSDP units, the root holds the rest (position
embedding). The last unit is not resharded after forward: backward needs it first.
`units: blocks` is the plain layout (blocks, root holds everything else).

bf16: MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32 by default): the sharded
parameters stay fp32 (4/N bytes per parameter), the bf16 copies exist only while a unit is
gathered, gradients are reduce-scattered into fp32 shards (4/N), Adam fp32 m and v (8/N).
reshard_after_forward=False keeps the blocks' bf16 copies from forward to backward (no second
all-gather; ZeRO-2-like memory during the step); the state at rest is the same.
Explicit prefetch (forward_prefetch/backward_prefetch > 0) is set as in PyTorch's FSDP2 example.
"""

from __future__ import annotations

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, Shard

from wirecheck.training.torch_trainer import TorchTrainer

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


class FSDPTrainer(TorchTrainer):
    def __init__(self, ctx, strategy, model: torch.nn.Module, lr: float, precision: str, micro_batch: int,
                 settings: dict):
        self.strategy = strategy.name
        mesh = init_device_mesh(ctx.device.type, (ctx.world_size,))
        if precision == "bf16":
            mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=DTYPES[settings["reduce_dtype"]])
        else:
            mp = MixedPrecisionPolicy()  # fp32 throughout: reduce_dtype is the parameters' fp32
        self._precision = precision
        common = {"mesh": mesh, "mp_policy": mp}
        reshard = settings["reshard_after_forward"]
        if settings["units"] == "torchtitan":
            fully_shard(model.wte, **common, reshard_after_forward=reshard)
        for block in model.blocks:
            fully_shard(block, **common, reshard_after_forward=reshard)
        if settings["units"] == "torchtitan":
            fully_shard([model.ln_f, model.lm_head], **common, reshard_after_forward=False)
        root = fully_shard(model, **common)
        _set_prefetch(list(model.blocks), settings["forward_prefetch"], settings["backward_prefetch"])
        self._finish(root, lr, settings["optimizer"])
        self._check(ctx)

    def in_force(self) -> dict:
        model = self.model
        blocks = list(model.blocks)
        groups = [_param_group(b) for b in blocks]
        units = {name for name, m in model.named_modules() if isinstance(m, FSDPModule)}
        torchtitan = {"", "wte", "ln_f", "lm_head"} | {f"blocks.{i}" for i in range(len(blocks))}
        plain = {""} | {f"blocks.{i}" for i in range(len(blocks))}
        layout = "torchtitan" if units == torchtitan and _param_group(model.ln_f).post_forward_mesh_info is None \
            else "blocks" if units == plain else f"other: {sorted(units)}"
        reshard = {g.post_forward_mesh_info is not None for g in groups}
        reduce = {g.mp_policy.reduce_dtype or g.mp_policy.param_dtype for g in groups}
        names = {v: k for k, v in DTYPES.items()}
        in_force = {
            **super().in_force(),
            "units": layout,
            "reshard_after_forward": reshard.pop() if len(reshard) == 1 else "mixed",
            "forward_prefetch": max(len(_state(b)._states_to_forward_prefetch) for b in blocks),
            "backward_prefetch": max(len(_state(b)._states_to_backward_prefetch) for b in blocks),
        }
        if self._precision == "bf16":
            in_force["reduce_dtype"] = names.get(reduce.pop(), "other") if len(reduce) == 1 else "mixed"
        else:
            in_force["reduce_dtype"] = "fp32" if reduce <= {None, torch.float32} else "other"
        return in_force

    def _check(self, ctx) -> None:
        # every parameter must be a DTensor sharded over all ranks, or this is not FSDP
        for name, p in self.model.named_parameters():
            if not isinstance(p, DTensor):
                raise RuntimeError(f"{self.strategy}: parameter {name} is {type(p).__name__}, not a sharded DTensor")
            if p.device_mesh.size() != ctx.world_size or tuple(p.placements) != (Shard(0),):
                raise RuntimeError(
                    f"{self.strategy}: parameter {name} placed {p.placements} over a mesh of "
                    f"{p.device_mesh.size()}, expected Shard(0) over {ctx.world_size}"
                )


def _state(module):
    return module._get_fsdp_state()


def _param_group(module):
    group = _state(module)._fsdp_param_group
    if group is None:
        raise RuntimeError(f"fsdp: {type(module).__name__} has no FSDP parameter group")
    return group


def _set_prefetch(blocks: list, forward: int, backward: int) -> None:
    """Each block issues the all-gathers of the next `forward` blocks before its forward, and of
    the previous `backward` blocks before its backward (0: leave FSDP2's implicit prefetch)."""
    for i, block in enumerate(blocks):
        if forward:
            ahead = blocks[i + 1:i + 1 + forward]
            if ahead:
                block.set_modules_to_forward_prefetch(ahead)
        if backward:
            behind = blocks[max(0, i - backward):i][::-1]
            if behind:
                block.set_modules_to_backward_prefetch(behind)
