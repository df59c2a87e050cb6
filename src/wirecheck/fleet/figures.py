"""A node's key figures, read from its record: what the fleet rule compares across nodes.

- busbw per placement and collective at the floor size (the size its floors are judged at);
- training tokens/s per placement (the wire: nvswitch, forced_pcie, ...) and strategy;
- the NIC line rate (tests/test_network.py records it);
- one GPU alone training the strategies' model (tests/test_strategies.py::test_single_gpu_training).

Keys carry the placement id, so only like is compared with like: nodes of another topology have other
ids and are never each other's peers.

Apart from those, `gpu_figures` reads each GPU's health figures (HBM copy and read, GEMM bf16 and fp8,
sustained TFLOP/s): they are compared with every other GPU of the same model in the fleet, whatever
node or index it has (wirecheck.fleet.judging).
"""

from __future__ import annotations

from dataclasses import dataclass

from wirecheck.core.quantity import format_bytes
from wirecheck.records.file import RunRecord

BUSBW, THROUGHPUT = "busbw", "throughput"


@dataclass(frozen=True)
class Figure:
    key: str  # "busbw:all_reduce:nvswitch-2gpu-0.1", "tokens:fsdp:forced_pcie-2gpu-0.1", "line_rate"
    label: str  # for people: "all_reduce busbw on nvswitch-2gpu-0.1 at 1 GiB"
    kind: str  # busbw | throughput: which fleet rule judges it
    unit: str  # GB/s | tokens/s
    value: float


def node_figures(run: RunRecord, floor_size: int) -> dict[str, Figure]:
    """Every key figure in `run`; a figure measured twice keeps the last reading."""
    out: dict[str, Figure] = {}
    for m in run.measurements:
        d = m.get("details") or {}
        kind, where = m.get("kind"), m.get("placement")
        if kind == "collective" and d.get("busbw") is not None and d.get("requested_bytes") == floor_size:
            key = f"busbw:{d['op']}:{where}"
            out[key] = Figure(key, f"{d['op']} busbw on {where} at {format_bytes(floor_size)}", BUSBW, "GB/s",
                              d["busbw"] / 1e9)
        elif kind == "strategy" and m.get("value") is not None and not d.get("error"):
            key = f"tokens:{d['strategy']}:{where}"
            out[key] = Figure(key, f"{d['strategy']} tokens/s on {where}", THROUGHPUT, "tokens/s", float(m["value"]))
        elif kind == "network" and m.get("value") is not None:
            out["line_rate"] = Figure("line_rate", "NIC line rate", BUSBW, "GB/s", float(m["value"]))
        elif kind == "single_gpu_training" and m.get("value") is not None and not d.get("error"):
            key = f"tokens:single_gpu:{where}"
            out[key] = Figure(key, f"one GPU alone tokens/s on {where}", THROUGHPUT, "tokens/s", float(m["value"]))
    return out


# The GPU health figures the fleet compares: key -> (label, unit, display units per base unit).
GPU_FIGURES = {
    "hbm_copy": ("HBM copy bandwidth (read+write)", "GB/s", 1e-9),
    "hbm_read": ("HBM read bandwidth", "GB/s", 1e-9),
    "gemm_bf16": ("dense GEMM bf16 throughput", "TFLOP/s", 1e-12),
    "gemm_fp8": ("dense GEMM fp8 throughput", "TFLOP/s", 1e-12),
    "sustained_bf16": ("sustained bf16 GEMM throughput", "TFLOP/s", 1e-12),
}


@dataclass(frozen=True)
class GpuFigure:
    gpu: int
    bus_id: str | None
    model: str  # NVML's name: only GPUs of one model are compared
    key: str  # a GPU_FIGURES key
    value: float  # in the figure's display unit (GB/s, TFLOP/s)

    @property
    def label(self) -> str:
        return GPU_FIGURES[self.key][0]

    @property
    def unit(self) -> str:
        return GPU_FIGURES[self.key][1]


def _per_s(part) -> float | None:
    if not isinstance(part, dict) or part.get("error") or part.get("unsupported"):
        return None
    value = (part.get("throughput") or part).get("per_s")
    return float(value) if isinstance(value, (int, float)) else None


def gpu_figures(run: RunRecord) -> list[GpuFigure]:
    """Each GPU's health figures in `run`, leaving out a GPU without a model name, a figure that
    failed, and one measured while another process computed on the GPU (it says nothing of the GPU)."""
    out: dict[tuple[int, str], GpuFigure] = {}
    for m in run.measurements:
        kind, d = m.get("kind"), m.get("details") or {}
        gpu, model = d.get("gpu"), d.get("gpu_model")
        if kind not in ("gpu_figures", "gpu_sustained") or not isinstance(gpu, int) or not model:
            continue
        if d.get("error") or d.get("foreign_processes"):
            continue
        result = d.get("result") or {}
        if kind == "gpu_figures":
            hbm = result.get("hbm") or {}
            values = {"hbm_copy": None if hbm.get("error") else _per_s(hbm.get("copy")),
                      "hbm_read": None if hbm.get("error") else _per_s(hbm.get("read")),
                      "gemm_bf16": _per_s(result.get("gemm_bf16")), "gemm_fp8": _per_s(result.get("gemm_fp8"))}
        else:  # recorded in TFLOP/s: the median of the load's full windows (wirecheck.gpu.inputs)
            values = {"sustained_bf16": float(m["value"]) * 1e12 if isinstance(m.get("value"), (int, float)) else None}
        for key, value in values.items():
            if value is not None:
                out[(gpu, key)] = GpuFigure(gpu, d.get("bus_id"), model, key, value * GPU_FIGURES[key][2])
    return list(out.values())
