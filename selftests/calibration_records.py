"""Copies of the committed clean 1x H200 records (fixtures/reference/h200-1), edited as a self-test
needs them: a GPU figure lowered, a serial given to the GPU, the run marked simulated or failed."""

from __future__ import annotations

import json
from pathlib import Path

REFERENCE = Path(__file__).resolve().parent.parent / "fixtures" / "reference" / "h200-1"
# The ten complete runs without a failure (the foreign-process runs failed; the burn-in's second was interrupted).
CLEAN = [REFERENCE / p for p in (
    "wirecheck-2026-12-01-burn-in/burn.jsonl", "wirecheck-2026-12-01-final/fresh/acceptance.jsonl",
    "wirecheck-2026-12-01-final/quick/quick.jsonl", "wirecheck-2026-12-01-final2/fresh/acceptance.jsonl",
    "wirecheck-2026-12-01-final2/quick/quick.jsonl", "wirecheck-2026-12-01-health/health.jsonl",
    "wirecheck-2026-12-01-levels/acceptance.jsonl", "wirecheck-2026-12-01-levels/quick.jsonl",
    "wirecheck-2026-12-01-same/after.jsonl", "wirecheck-2026-12-01-same/before.jsonl")]
FAILED = REFERENCE / "wirecheck-2026-12-01-health/foreign.jsonl"
INTERRUPTED = REFERENCE / "wirecheck-2026-12-01-burn-in/interrupt.jsonl"

# figure -> (check, the input that tells it apart, the input holding the value)
FIGURE_INPUTS = {
    "hbm_copy": ("hbm_bandwidth", ("kind", "copy"), "bytes_per_s"),
    "hbm_read": ("hbm_bandwidth", ("kind", "read"), "bytes_per_s"),
    "gemm_bf16": ("gemm_throughput", ("dtype", "bf16"), "flops_per_s"),
    "gemm_fp8": ("gemm_throughput", ("dtype", "fp8"), "flops_per_s"),
    "sustained_bf16": ("sustained_throughput", (None, None), "flops_per_s"),
    "h2d": ("host_copy", ("direction", "h2d"), "bytes_per_s"),
    "single_gpu_throughput": ("single_gpu_training", (None, None), "tokens_per_s"),
}


def edited(src: Path, dst: Path, *, scale: dict[str, float] | None = None, serial: str | None = None,
           started: str | None = None, model: str | None = None, **header) -> Path:
    """`src` written to `dst`, its figures in `scale` multiplied, the GPU given `serial` (and `model`),
    the run's start set to `started`, and other header keys replaced."""
    scale = scale or {}
    lines = []
    for line in src.read_text().splitlines():
        obj = json.loads(line)
        if obj.get("type") == "run":
            obj.update(header)
            if started:
                obj["started"] = started
            for gpu in obj.get("gpus") or []:
                if serial:
                    gpu["serial"] = serial
                if model:
                    gpu["name"] = model
        elif obj.get("type") == "verdict":
            inputs = obj.get("inputs") or {}
            for figure, factor in scale.items():
                check, (key, value), field = FIGURE_INPUTS[figure]
                if obj.get("check") == check and (key is None or inputs.get(key) == value) and inputs.get(field):
                    inputs[field] *= factor
            if model and "gpu_model" in inputs:
                inputs["gpu_model"] = model
        lines.append(json.dumps(obj))
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text("\n".join(lines) + "\n")
    return dst
