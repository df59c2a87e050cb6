"""A small GPT (nanoGPT-shaped) sized by a parameter count.

The workload only has to be a realistic transformer whose parameter count we control: the
strategies differ in what each GPU stores, and that is proportional to the parameter count.
Choices that keep every strategy honest:
- no weight tying: a tied embedding is one parameter used by two modules, which ZeRO-3 and
  FSDP treat specially; untied, every parameter belongs to exactly one module;
- Linear layers without bias, LayerNorm with weight and bias (as nanoGPT with bias=False
  but LayerNorm kept standard), so `param_count` is a closed formula;
- the loss is computed inside forward in fp32, so every wrapper (DDP, DeepSpeed engine,
  FSDP root) sees one call returning one scalar.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

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


class CausalSelfAttention(nn.Module):
    def __init__(self, s: GPTShape):
        super().__init__()
        self.n_head = s.n_head
        self.qkv = nn.Linear(s.d_model, 3 * s.d_model, bias=False)
        self.proj = nn.Linear(s.d_model, s.d_model, bias=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.reshape(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class MLP(nn.Module):
    def __init__(self, s: GPTShape):
        super().__init__()
        self.fc = nn.Linear(s.d_model, 4 * s.d_model, bias=False)
        self.proj = nn.Linear(4 * s.d_model, s.d_model, bias=False)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self, s: GPTShape):
        super().__init__()
        self.ln1 = nn.LayerNorm(s.d_model)
        self.attn = CausalSelfAttention(s)
        self.ln2 = nn.LayerNorm(s.d_model)
        self.mlp = MLP(s)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, shape: GPTShape | dict):
        super().__init__()
        s = self.shape = GPTShape.of(shape)
        self.wte = nn.Embedding(s.vocab_size, s.d_model)
        self.wpe = nn.Embedding(s.seq_len, s.d_model)
        self.blocks = nn.ModuleList(Block(s) for _ in range(s.n_layer))
        self.ln_f = nn.LayerNorm(s.d_model)
        self.lm_head = nn.Linear(s.d_model, s.vocab_size, bias=False)
        self.apply(self._init_weights)
        # GPT-2: residual projections scaled so the residual stream does not grow with depth
        for name, p in self.named_parameters():
            if name.endswith("proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * s.n_layer))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits
        # reshape, not view: under some wrappers/precisions logits are not contiguous
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))
