"""A node's key figures, read from its record: what the fleet rule compares across nodes.

- busbw per placement and collective at the floor size (the size its floors are judged at);
- training tokens/s per placement (the wire: nvswitch, forced_pcie, ...) and strategy;
- the NIC line rate (tests/test_network.py records it).

Keys carry the placement id, so only like is compared with like: nodes of another topology have other
ids and are never each other's peers.
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
    return out
