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

import torch
import torch.nn as nn
import torch.nn.functional as F

from wirecheck.vocab.shape import GPTShape, param_count, shape_for_params  # noqa: F401 (re-exported)


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
