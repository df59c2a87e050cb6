"""The capacity case: a model the memory model says DDP cannot hold on one GPU, while
FSDP on the placement can (the article's Mistral-7B on 80 GB, scaled to the GPU at hand)."""

from __future__ import annotations

import re

from wirecheck.memory_model import predict
from wirecheck.training.shape import shape_for_params

FIT, OOM, FAILURE = "fit", "oom", "failure"

# How a rank's allocator running out of device memory reads in the launcher's headline
# ("... rank 0 raised OutOfMemoryError: CUDA out of memory ..."; older torch builds raise
# RuntimeError "CUDA out of memory"). Only the headline counts: a traceback that merely
# mentions the word is not an out-of-memory.
_OOM_HEADLINE = re.compile(r"raised (\w+\.)*OutOfMemoryError|raised RuntimeError: CUDA out of memory")


def capacity_params(gpu_memory_bytes: int, ddp_fraction: float, precision: str) -> float:
    """Parameter count whose DDP model state is `ddp_fraction` of one GPU's memory."""
    per_param = predict("ddp", 1, 1, accounting="implementation", precision=precision).total
    return ddp_fraction * gpu_memory_bytes / per_param


def capacity_shape(gpu_memory_bytes: int, ddp_fraction: float, precision: str, seq_len: int, vocab: int) -> dict:
    return shape_for_params(capacity_params(gpu_memory_bytes, ddp_fraction, precision), seq_len, vocab)


def outcome(error: str | None) -> str:
    """fit (the run completed), oom (a clean, reported out-of-memory in a rank), or failure
    (a hang, a crash, any other error: never an acceptable answer)."""
    if error is None:
        return FIT
    headline = error.split("\n", 1)[0]
    if "did not finish within" in headline or " died " in headline:  # launcher: hang / dead rank
        return FAILURE
    return OOM if _OOM_HEADLINE.search(headline) else FAILURE
