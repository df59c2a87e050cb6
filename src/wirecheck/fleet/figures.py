"""A node's key figures, read from its record: what the fleet rule compares across nodes.

- busbw per placement and collective at the floor size (the size its floors are judged at);
- training tokens/s per placement (the wire: nvswitch, forced_pcie, ...) and strategy;
- the NIC line rate (tests/test_network.py records it);
- one GPU alone training the strategies' model (tests/test_strategies.py::test_single_gpu_training).

Keys carry the placement id, so only like is compared with like: nodes of another topology have other
ids and are never each other's peers. Placements of one id on another GPU model (an H100 node among H200
nodes) have the same id: each figure keeps the models of its placement's GPUs (`models`), and the fleet
rule compares a figure with the nodes of the same models only.

Apart from those, `gpu_figures` reads each GPU's health figures (HBM copy and read, GEMM bf16 and fp8,
sustained TFLOP/s): they are compared with every other GPU of the same model in the fleet, whatever
node or index it has (wirecheck.fleet.judging).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from wirecheck.core.quantity import format_bytes
from wirecheck.records.file import RunRecord
from wirecheck.report.gpus import GPU_FIGURES, MEASUREMENT_KINDS as GPU_KINDS, gpu_points
from wirecheck.vocab import records as kinds
from wirecheck.vocab.ops import axes_name

BUSBW, THROUGHPUT = "busbw", "throughput"


@dataclass(frozen=True)
class Figure:
    key: str  # "busbw:all_reduce:nvswitch-2gpu-0.1", "tokens:fsdp:forced_pcie-2gpu-0.1", "line_rate"
    label: str  # for people: "all_reduce busbw on nvswitch-2gpu-0.1 at 1 GiB"
    kind: str  # busbw | throughput: which fleet rule judges it
    unit: str  # GB/s | tokens/s
    value: float
    models: tuple = ()  # the GPU models of its placement's GPUs, as the header names them (): none named)


# The measurement kinds node_figures and gpu_figures read whole (a collective only at the floor size):
# what a lean read of a record (fleet.judging.LeanLines) must parse.
KINDS_READ = frozenset((kinds.STRATEGY, kinds.NETWORK, kinds.SINGLE_GPU_TRAINING) + tuple(GPU_KINDS))


def node_figures(run: RunRecord, floor_size: int) -> dict[str, Figure]:
    """Every key figure in `run`; a figure measured twice keeps the last reading."""
    names = {g.get("index"): str(g.get("name") or "?") for g in run.run.get("gpus") or [] if isinstance(g, dict)}
    models = {p.get("id"): tuple(sorted({names.get(i, "?") for i in p.get("gpus") or []}))
              for p in run.run.get("placements") or [] if isinstance(p, dict) and names}
    # A placement the header does not list (an older record): the node's models, so that it meets the same figure
    # of a newer record of the same GPUs rather than a group of its own with no peers
    node_models = tuple(sorted(set(names.values())))
    models = defaultdict(lambda: node_models, models)
    out: dict[str, Figure] = {}
    for m in run.measurements:
        d = m.get("details") or {}
        kind, where = m.get("kind"), m.get("placement")
        if kind == kinds.COLLECTIVE and d.get("busbw") is not None and d.get("requested_bytes") == floor_size:
            name, words = axes_name(d)  # each dtype and reduction a figure of its own: all_reduce-bf16-max
            key = f"busbw:{name}:{where}"
            out[key] = Figure(key, f"{words} busbw on {where} at {format_bytes(floor_size)}", BUSBW, "GB/s",
                              d["busbw"] / 1e9, models[where])
        elif kind == kinds.STRATEGY and m.get("value") is not None and not d.get("error"):
            key = f"tokens:{d['strategy']}:{where}"
            out[key] = Figure(key, f"{d['strategy']} tokens/s on {where}", THROUGHPUT, "tokens/s", float(m["value"]),
                              models[where])
        elif kind == kinds.NETWORK and m.get("value") is not None:
            out["line_rate"] = Figure("line_rate", "NIC line rate", BUSBW, "GB/s", float(m["value"]))  # a NIC's: any GPUs
        elif kind == kinds.SINGLE_GPU_TRAINING and m.get("value") is not None and not d.get("error"):
            key = f"tokens:single_gpu:{where}"
            out[key] = Figure(key, f"one GPU alone tokens/s on {where}", THROUGHPUT, "tokens/s", float(m["value"]),
                              models[where])
    return out


@dataclass(frozen=True)
class GpuFigure:
    gpu: int
    bus_id: str | None
    model: str  # NVML's name: only GPUs of one model are compared
    key: str  # a report.gpus.GPU_FIGURES key
    value: float  # in the figure's display unit (GB/s, TFLOP/s)

    @property
    def label(self) -> str:
        return GPU_FIGURES[self.key][0]

    @property
    def unit(self) -> str:
        return GPU_FIGURES[self.key][1]


def gpu_figures(run: RunRecord) -> list[GpuFigure]:
    """Each GPU's health figures in `run` (read as the report reads them: wirecheck.report.gpus),
    leaving out a GPU without a model name and one measured while another process computed on it
    (its figures say nothing of the GPU)."""
    out = []
    for p in gpu_points(run.measurements, []).values():
        if not p.model or p.foreign:
            continue
        out += [GpuFigure(p.gpu, p.bus_id, p.model, key, value * GPU_FIGURES[key][2]) for key, value in p.figures.items()]
    return out
