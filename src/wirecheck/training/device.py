"""The worker's device, for the training loops of the runner and of one GPU alone (worker side: torch)."""

from __future__ import annotations

import platform

import torch


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op on the CPU), so host clocks time what ran."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_name(device: torch.device) -> str:
    """The name training.peak_flops and the floors are keyed by (NVML's and torch's agree)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine() or "cpu"
