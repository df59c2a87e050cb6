"""Figures that explain a throughput: model FLOPs per token and MFU. No torch import.

MFU (model FLOPs utilisation, PaLM appendix B) = model FLOPs per token x tokens/s over the
peak FLOP/s of the GPUs that produced them. The model FLOPs are 6 per parameter per token
(2 forward, 4 backward: Kaplan et al. 2020), the figure a strategy's MFU is read against. The attention
score/value products are not parameter FLOPs; PaLM adds 12 · n_layer · d_model · seq_len per
token for them, reported apart (`attention_flops_per_token`) so both conventions can be read.
The peak is the GPU's dense (not sparse) tensor-core peak for the precision, from
thresholds.yaml (training.peak_flops, by GPU model name as NVML and torch report it).
"""

from __future__ import annotations


def model_flops_per_token(n_params: int) -> float:
    return 6.0 * n_params


def attention_flops_per_token(n_layer: int, d_model: int, seq_len: int) -> float:
    return 12.0 * n_layer * d_model * seq_len


def achieved_flops_per_gpu(flops_per_token: float, tokens_per_s: float, n_gpus: int) -> float:
    """FLOP/s each GPU does on average at `tokens_per_s` (global) over `n_gpus`."""
    if n_gpus < 1:
        raise ValueError(f"n_gpus must be >= 1, got {n_gpus}")
    return flops_per_token * tokens_per_s / n_gpus


def mfu(achieved_per_gpu: float, peak_per_gpu: float) -> float:
    """Fraction of the dense peak (0.4 = 40 %)."""
    if peak_per_gpu <= 0:
        raise ValueError(f"peak FLOP/s must be positive, got {peak_per_gpu}")
    return achieved_per_gpu / peak_per_gpu


def rank_mfu(rank: dict, limits, precision: str) -> float | None:
    """One rank record's MFU: its achieved FLOP/s (6 x parameters x tokens/s) over the dense peak of its GPU
    (thresholds.yaml training.peak_flops, by the device name the rank recorded); None without either."""
    peak = limits.peak_flops(rank.get("device_name", ""), precision)
    achieved = rank.get("achieved_flops_per_gpu")
    return mfu(achieved, peak.flops) if peak and achieved else None
