"""The `copy_bandwidth` section of thresholds.yaml: floors for plain copies without NCCL.

What nvbandwidth measures: pinned host->device and device->host per GPU, device->device per
NVLink pair (cudaMemcpyPeer). Floors are per fabric (nvswitch, bridged, pcie) and direction;
a direction without an entry is judged by a floor derived from the link the copy rides:
the GPU's PCIe link (generation x width, at its maximum) for host copies, NV# x per-link
speed for peer copies, times an efficiency. Kept apart from wirecheck.thresholds.file, which
holds one field of this type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from wirecheck.core.quantity import format_bw
from wirecheck.thresholds.tables import _bounds_entry, applies, efficiency
from wirecheck.thresholds.yaml_reader import SOURCE_HINT, _At
from wirecheck.node.topology import FABRICS

DIRECTIONS = ("h2d", "d2h", "peer")
HOST_DIRECTIONS = ("h2d", "d2h")

# One direction of one PCIe lane after encoding, bytes/s (PCIe specs: 8b/10b up to Gen2,
# 128b/130b from Gen3; Gen6's FLIT mode ~242/256). Gen5 x16 = 63 GB/s, as nvbandwidth's
# readers quote it.
PCIE_LANE_BYTES_PER_S = {1: 0.25e9, 2: 0.5e9, 3: 0.985e9, 4: 1.969e9, 5: 3.938e9, 6: 7.563e9}


def pcie_ceiling(gen: int | None, width: int | None) -> float | None:
    """One-way PCIe bandwidth of a link (bytes/s), or None when gen/width are unknown."""
    if not gen or not width or gen not in PCIE_LANE_BYTES_PER_S:
        return None
    return PCIE_LANE_BYTES_PER_S[gen] * width


@dataclass(frozen=True)
class CopyLimit:
    min: float  # bytes/s
    source: str
    yaml_path: str
    max: float | None = None  # the `within` helper reads both bounds
    rule: str = "measured"  # which rule made it (wirecheck.core.verdict.RULES)
    hardware: Mapping | None = field(default=None, compare=False)  # what it was measured on (tables.hardware_spec)
    resolution: Mapping | None = field(default=None, compare=False)  # a calibrated entry's (tables.Limit.resolution)


@dataclass(frozen=True)
class CopySettings:
    size: int  # bytes per copy
    warmup_iters: int
    iters: int
    timeout_s: float


@dataclass(frozen=True)
class CopyBandwidth:
    settings: CopySettings
    _floors: Mapping[tuple[str, str], CopyLimit]  # (fabric, direction)
    host_efficiency: float  # of the PCIe link's one-way ceiling
    peer_efficiency: float  # of NV# x per-link speed
    derived_source: str
    derived_yaml_path: str

    def limit(self, fabric: str, direction: str, link_ceiling_bytes_per_s: float | None,
              hardware=None) -> CopyLimit | None:
        """The floor for a copy in `direction` on a node of `fabric`: the table entry measured on
        this `hardware` (wirecheck.node.hardware.Hardware; None: unknown, the entry applies), else
        derived from `link_ceiling_bytes_per_s` (the PCIe link for host copies, NV# x link speed for
        peer copies), else None (not judged)."""
        return self.limit_rule(fabric, direction, link_ceiling_bytes_per_s, hardware)[0]

    def limit_rule(self, fabric: str, direction: str, link_ceiling_bytes_per_s: float | None,
                   hardware=None) -> tuple[CopyLimit | None, str]:
        """(the floor, "") or (None, why there is none)."""
        if direction not in DIRECTIONS:
            raise ValueError(f"unknown copy direction {direction!r}; known: {', '.join(DIRECTIONS)}")
        found, unmatched = applies(self._floors.get((fabric, direction)), hardware)
        if found is not None:
            return found, ""
        note = f" ({unmatched})" if unmatched else ""
        link = "the PCIe link" if direction in HOST_DIRECTIONS else "NV# x per-link speed"
        if not link_ceiling_bytes_per_s:
            return None, f"no {fabric}/{direction} copy floor{note} and no reading of {link} to derive one"
        eff = self.host_efficiency if direction in HOST_DIRECTIONS else self.peer_efficiency
        return CopyLimit(
            min=link_ceiling_bytes_per_s * eff,
            source=(f"derived: {eff * 100:g} % of {link} {format_bw(link_ceiling_bytes_per_s)} (no {fabric}/{direction} "
                    f"entry{note}; efficiency: {self.derived_source})"),
            yaml_path=self.derived_yaml_path,
            rule="derived",
        ), ""


def parse_copy_bandwidth(at: _At) -> CopyBandwidth:
    f = at.fields(
        "copy-bandwidth sections",
        required={
            "settings": '{size: "1 GiB", warmup_iters: 2, iters: 10, timeout: "120 s"}',
            "floors": '{nvswitch: {h2d: {min: "48 GB/s", source: ...}, ...}, ...}',
            "derived_floor": '{host_efficiency: "70 %", peer_efficiency: "60 %", source: ...}',
        },
    )
    s = f["settings"].fields(
        "copy run settings",
        required={"size": '"1 GiB"', "warmup_iters": "2", "iters": "10", "timeout": '"120 s"'},
    )
    settings = CopySettings(
        size=int(s["size"].quantity("size", positive=True)),
        warmup_iters=s["warmup_iters"].count(),
        iters=s["iters"].count(minimum=1),
        timeout_s=s["timeout"].quantity("time", positive=True),
    )
    floors: dict[tuple[str, str], CopyLimit] = {}
    for fabric, fabric_at in f["floors"].keyed(FABRICS, "fabric", "copy floors are keyed by fabric").items():
        for direction, entry_at in fabric_at.keyed(DIRECTIONS, "copy direction", "directions are").items():
            e = _bounds_entry(entry_at, "bandwidth", ("min",), required=("min",), what="a copy floor", positive=True)
            floors[(fabric, direction)] = CopyLimit(e.min, e.source, e.yaml_path, rule=e.rule, hardware=e.hardware,
                                                    resolution=e.resolution)
    d = f["derived_floor"].fields(
        "derived copy floor",
        required={"host_efficiency": '"70 %"', "peer_efficiency": '"60 %"', "source": SOURCE_HINT},
    )
    efficiencies = [efficiency(d[key], "the link it rides") for key in ("host_efficiency", "peer_efficiency")]
    return CopyBandwidth(settings, MappingProxyType(floors), efficiencies[0], efficiencies[1], d["source"].source(),
                         f["derived_floor"].cite)
