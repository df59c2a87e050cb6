"""The hardware a limit is made for: what NVML reports (or a profile describes) about a node's GPUs.

One `Hardware` per node (its GPUs are one model; a field the GPUs disagree on takes the lowest, so a
GPU whose link trained down or whose clock is capped does not raise its peers' limits). It answers
two questions: does a table entry's `hardware:` (the GPU model, NVLink generation and link count,
PCIe generation and width it was measured on) describe this node, and what are the node's peaks
(wirecheck.core.gpu_arch). A verdict carries it as a plain dict among its inputs, so `wirecheck
judge` makes the same limits again from the record.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping

from wirecheck.core import gpu_arch

# The keys a thresholds entry's `hardware:` may name, and the Hardware field each one compares.
MATCH_KEYS = {"gpu_model": "gpu_model", "nvlink": "nvlink_gen", "links": "nvlinks_per_gpu",
              "pcie_gen": "pcie_gen", "pcie_width": "pcie_width"}
_WORDS = {"gpu_model": "GPU model", "nvlink": "NVLink generation", "links": "NVLinks per GPU",
          "pcie_gen": "PCIe generation", "pcie_width": "PCIe width"}


@dataclass(frozen=True)
class Hardware:
    gpu_model: str | None = None
    compute_capability: str | None = None
    sm_count: int | None = None
    sm_clock_max_mhz: float | None = None
    mem_bus_width: int | None = None  # bits
    mem_clock_max_mhz: float | None = None
    power_limit_w: float | None = None
    nvlinks_per_gpu: int | None = None  # links per GPU, down ones included
    nvlink_speed: float | None = None  # bytes/s per link per direction
    nvlink_gen: int | None = None  # 3, 4, 5 (not NVML's version enum)
    pcie_gen: int | None = None  # the link's maximum (it trains down at idle)
    pcie_width: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "Hardware | None":
        if not data:
            return None
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def describe(self) -> str:
        parts = [self.gpu_model or "unknown GPU model"]
        if self.nvlink_gen or self.nvlinks_per_gpu:
            parts.append(f"NVLink {self.nvlink_gen or '?'} x {self.nvlinks_per_gpu if self.nvlinks_per_gpu is not None else '?'}")
        elif self.nvlinks_per_gpu == 0:
            parts.append("no NVLink")
        if self.pcie_gen or self.pcie_width:
            parts.append(f"PCIe Gen{self.pcie_gen or '?'} x{self.pcie_width or '?'}")
        return ", ".join(parts)

    def matches(self, spec: Mapping[str, Any]) -> tuple[bool, str]:
        """(True, "") when every key of `spec` (a table entry's hardware:) is what this node has; else
        (False, the first difference, or the field NVML could not give)."""
        for key, want in spec.items():
            have = getattr(self, MATCH_KEYS[key])
            if have is None:
                return False, f"this node's {_WORDS[key]} is unknown (NVML gave none)"
            if have != want:
                return False, f"this node's {_WORDS[key]} is {have}, the entry's {want}"
        return True, ""

    # -- peaks ---------------------------------------------------------------------------------

    def math_peak(self, dtype: str) -> tuple[float | None, str]:
        return gpu_arch.math_peak(self.compute_capability, self.sm_count, self.sm_clock_max_mhz, dtype)

    def memory_peak(self) -> tuple[float | None, str]:
        return gpu_arch.memory_peak(self.mem_bus_width, self.mem_clock_max_mhz)

    def pcie_peak(self) -> tuple[float | None, str]:
        # Kept here (not with the copy checks) so node-level code needs no thresholds import.
        lane = PCIE_LANE_BYTES_PER_S.get(self.pcie_gen or 0)
        if not lane or not self.pcie_width:
            return None, "no PCIe peak: NVML gave no PCIe generation or width"
        peak = lane * self.pcie_width
        return peak, f"PCIe Gen{self.pcie_gen} x{self.pcie_width} one way = {peak / 1e9:.1f} GB/s"


# One direction of one PCIe lane after encoding, bytes/s (8b/10b to Gen2, 128b/130b from Gen3, Gen6 FLIT ~242/256).
PCIE_LANE_BYTES_PER_S = {1: 0.25e9, 2: 0.5e9, 3: 0.985e9, 4: 1.969e9, 5: 3.938e9, 6: 7.563e9}


def _lowest(values: list) -> Any:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def _links_per_gpu(topology, chosen) -> int | None:
    """NVLinks per GPU, down ones included (what the hardware is: a link down is a fault the topology
    checks name, not another kind of node; the derived floors scale with the active NV# themselves);
    a `topo -m` text has the NV# matrix but no links: unknown unless it shows no NVLink at all."""
    if any(g.nvlinks for g in chosen):
        return max(len(g.nvlinks) for g in chosen)
    if not any(any(row) for row in topology.nvlinks):
        return 0
    return None


def from_topology(topology, gpus: list[int] | tuple[int, ...] | None = None) -> Hardware | None:
    """The node's hardware from its topology (NVML's reading, or a profile's dry-run picture)."""
    if topology is None or not topology.gpus:
        return None
    chosen = [g for g in topology.gpus if gpus is None or g.index in gpus] or list(topology.gpus)
    names = {g.name for g in chosen if g.name}
    links = [link for g in chosen for link in g.nvlinks if link.active]
    versions = {link.version for link in links if link.version}
    speeds = [link.speed_mbps * 1e6 for link in links if link.speed_mbps]
    gens = {gpu_arch.NVLINK_VERSION_TO_GENERATION.get(v) for v in versions} - {None}
    capabilities = {g.compute_capability for g in chosen if g.compute_capability}
    return Hardware(
        gpu_model=names.pop() if len(names) == 1 else None,
        compute_capability=capabilities.pop() if len(capabilities) == 1 else None,
        sm_count=_lowest([g.sm_count for g in chosen]),
        sm_clock_max_mhz=_lowest([g.sm_clock_max_mhz for g in chosen]),
        mem_bus_width=_lowest([g.mem_bus_width for g in chosen]),
        mem_clock_max_mhz=_lowest([g.mem_clock_max_mhz for g in chosen]),
        power_limit_w=_lowest([g.power_limit_w for g in chosen]),
        nvlinks_per_gpu=_links_per_gpu(topology, chosen),
        nvlink_speed=min(speeds) if speeds else None,
        nvlink_gen=gens.pop() if len(gens) == 1 else None,
        pcie_gen=_lowest([g.pcie_gen_max or g.pcie_gen for g in chosen]),
        pcie_width=_lowest([g.pcie_width_max or g.pcie_width for g in chosen]),
    )


def from_profile(profile) -> Hardware:
    """The hardware a node profile (thresholds.yaml `profiles:`) describes: what `wirecheck limits
    --profile NAME` holds such a node to before it is ever run."""
    links = profile.nvlinks_per_gpu if profile.fabric != "pcie" else 0
    return Hardware(
        gpu_model=profile.gpu_model,
        compute_capability=profile.compute_capability,
        sm_count=profile.sm_count,
        sm_clock_max_mhz=profile.sm_clock_max_mhz,
        mem_bus_width=profile.mem_bus_width,
        mem_clock_max_mhz=profile.mem_clock_max_mhz,
        power_limit_w=profile.power_limit_w,
        nvlinks_per_gpu=links,
        nvlink_speed=profile.nvlink_speed if links else None,
        nvlink_gen=profile.nvlink_gen if links else None,
        pcie_gen=profile.pcie_gen,
        pcie_width=profile.pcie_width,
    )
