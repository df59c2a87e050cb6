"""The capacity case: a model the memory model says DDP cannot hold on one GPU, while
FSDP on the placement can (the article's Mistral-7B on 80 GB, scaled to the GPU at hand)."""

from __future__ import annotations

from wirecheck.core.failures import GroupFailure
from wirecheck.training.memory_model import predict
from wirecheck.vocab.shape import shape_for_params

FIT, OOM, FAILURE = "fit", "oom", "failure"


def capacity_params(gpu_memory_bytes: int, ddp_fraction: float, precision: str) -> float:
    """Parameter count whose DDP model state is `ddp_fraction` of one GPU's memory."""
    per_param = predict("ddp", 1, 1, accounting="implementation", precision=precision).total
    return ddp_fraction * gpu_memory_bytes / per_param


def capacity_shape(gpu_memory_bytes: int, ddp_fraction: float, precision: str, seq_len: int, vocab: int) -> dict:
    return shape_for_params(capacity_params(gpu_memory_bytes, ddp_fraction, precision), seq_len, vocab)


def outcome(failure: GroupFailure | None) -> str:
    """fit (the run completed), oom (the first failure was a rank raising torch's out-of-memory
    error, decided in the rank by exception type), or failure (a hang, a dead rank, any other
    error first: never an acceptable answer). A rank's allocator failing takes the others down in
    their next collective; only the earliest failure says what happened."""
    if failure is None:
        return FIT
    return OOM if failure.out_of_memory else FAILURE
