"""The GPT's shape and its parameter arithmetic, without torch.

Kept apart from wirecheck.training.model (the torch module) so that the pytest process (capacity
case, the strategies table beside this module, memory figures) can size a model without torch.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

HEAD_DIM = 64  # head size used by shape_for_params; the usual choice for GPT-style models
D_MODEL_STEP = 128  # shape_for_params keeps d_model a multiple of this (tensor-core friendly)
ASPECT_RATIO = 96  # d_model / n_layer aimed at: GPT-3 runs from 64 (125M) to 128 (6.7B)


@dataclass(frozen=True)
class GPTShape:
    n_layer: int
    n_head: int
    d_model: int
    vocab_size: int
    seq_len: int

    def __post_init__(self):
        for name in ("n_layer", "n_head", "d_model", "vocab_size", "seq_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"GPT shape: {name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_head:
            raise ValueError(
                f"GPT shape: d_model ({self.d_model}) must be a multiple of n_head ({self.n_head})"
            )

    @classmethod
    def of(cls, shape: GPTShape | dict) -> GPTShape:
        """Accept the plain dict that travels to worker processes, or a GPTShape."""
        if isinstance(shape, cls):
            return shape
        unknown = set(shape) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"GPT shape: unknown keys {sorted(unknown)}")
        return cls(**shape)

    def as_dict(self) -> dict:
        return asdict(self)


def param_count(shape: GPTShape | dict) -> int:
    """Exact number of parameters of GPT(shape)."""
    s = GPTShape.of(shape)
    d, v = s.d_model, s.vocab_size
    per_block = 12 * d * d + 4 * d  # qkv 3d², proj d², mlp 8d²; two LayerNorms (w, b)
    return 2 * v * d + s.seq_len * d + s.n_layer * per_block + 2 * d  # wte, lm_head, wpe, ln_f


def shape_for_params(
    target_params: float, seq_len: int, vocab: int, head_dim: int = HEAD_DIM
) -> dict:
    """A GPT shape whose parameter count is close to `target_params`.

    d_model is a multiple of D_MODEL_STEP with n_head = d_model / head_dim, and the depth
    keeps d_model / n_layer near ASPECT_RATIO: among the shapes within 2 % of the target the
    most GPT-like wins, otherwise the closest. A target below what the embeddings alone cost
    gives the smallest shape (one layer), so check `param_count` when the target is tiny.
    """
    if target_params <= 0:
        raise ValueError(f"target_params must be positive, got {target_params}")
    if D_MODEL_STEP % head_dim:
        raise ValueError(f"head_dim {head_dim} must divide {D_MODEL_STEP}")
    best = None
    for k in range(1, 513):  # d_model up to 65536
        d = k * D_MODEL_STEP
        fixed = 2 * vocab * d + seq_len * d + 2 * d
        per_block = 12 * d * d + 4 * d
        layers = max(1, round((target_params - fixed) / per_block))
        count = fixed + layers * per_block
        error = abs(count - target_params) / target_params
        aspect_penalty = abs(math.log((d / layers) / ASPECT_RATIO))
        key = (max(error, 0.02), aspect_penalty)
        if best is None or key < best[0]:
            best = (key, GPTShape(layers, d // head_dim, d, vocab, seq_len))
        if fixed > 2 * target_params:
            break
    return best[1].as_dict()


def block_params(shape: GPTShape | dict) -> int:
    """Parameters of one transformer block (qkv, proj, mlp; two LayerNorms)."""
    d = GPTShape.of(shape).d_model
    return 12 * d * d + 4 * d
