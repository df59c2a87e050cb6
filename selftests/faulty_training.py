"""Gradient hooks for the self-tests only: ways for a strategy to compute a wrong gradient.

Passed to `wirecheck.training.runner.run_strategy` as grad_hook="selftests.faulty_training:<name>";
the runner calls the function on the unwrapped model, before DDP/DeepSpeed/FSDP wrap it. The
library has no switch for this: a wrong gradient is something only a test may ask for.
"""

from __future__ import annotations

import torch


class _ScaleGrad(torch.autograd.Function):
    """Identity forward, gradient times `factor` backward."""

    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.factor, None


def flip_first_block_grad(model: torch.nn.Module) -> None:
    """Reverse the gradient flowing back out of the first transformer block.

    The forward pass is unchanged, so the first loss still matches every other strategy;
    block 0 and the embeddings get the negated gradient, so the first update moves them
    the wrong way and the loss of step 2 differs. Not a scaling: Adam's first update is
    lr * g / |g| per element, so a gradient off by a constant factor (say, a sum where a
    mean was due) moves the weights the same way and would not show at step 2.
    A module hook survives every wrapper (DDP, DeepSpeed, FSDP keep the module objects),
    where a tensor hook on a parameter would not (FSDP and ZeRO-3 replace or release the
    parameter tensors).
    """
    model.blocks[0].register_forward_hook(lambda module, args, out: _ScaleGrad.apply(out, -1.0))
