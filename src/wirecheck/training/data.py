"""Synthetic token batches that are the same whatever the strategy and the rank count.

Every sample of the global batch is drawn from its own generator seeded by
(seed, step, global sample index); rank r takes samples [r*micro_batch, (r+1)*micro_batch).
So the global batch of a step depends only on (seed, step, global batch size): DDP on
2 ranks, FSDP on 2 ranks and one process with twice the micro batch all see the same data,
and the loss averaged over ranks is comparable across strategies.

The sequences are learnable (each token is the previous one plus 1, 2 or 3, modulo the
vocabulary), so the loss falls from ln(vocab) towards ln(3) and a broken update shows.
"""

from __future__ import annotations

import hashlib

import torch

MAX_STRIDE = 3


def _sample_seed(seed: int, step: int, index: int) -> int:
    digest = hashlib.blake2b(f"{seed}:{step}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


def sample(seed: int, step: int, index: int, seq_len: int, vocab: int) -> torch.Tensor:
    """Global sample `index` of `step`: seq_len + 1 tokens (inputs and shifted targets)."""
    g = torch.Generator().manual_seed(_sample_seed(seed, step, index))
    start = torch.randint(0, vocab, (1,), generator=g)
    strides = torch.randint(1, MAX_STRIDE + 1, (seq_len,), generator=g)
    return torch.cat([start, start + torch.cumsum(strides, 0)]) % vocab


def local_batch(
    seed: int, step: int, rank: int, micro_batch: int, seq_len: int, vocab: int,
    device: torch.device | str = "cpu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets) of shape (micro_batch, seq_len) for `rank` at `step`."""
    first = rank * micro_batch
    tokens = torch.stack(
        [sample(seed, step, first + i, seq_len, vocab) for i in range(micro_batch)]
    )
    tokens = tokens.to(device)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
