"""The peak of the wire a placement's collectives ride: the most its bus bandwidth could read, one way.

NVLink classes: the links each GPU has into the placement, at the per-link speed, for the GPU with the
fewest. Through NVSwitch a GPU reaches every peer over all of its switch links (its NV# to any peer is
its switch links: 18 on an HGX H200, 478 GB/s); in a bridged group it reaches each peer over that pair's
NV# only, so its links into the placement are the sum over its peers there (an H200 NVL pair NV6: 6
links, 159 GB/s; a quad, three NV6 peers: 18 links, 478 GB/s). The host path (cross_quad, forced_pcie,
pcie): the PCIe link of the placement's slowest GPU, one way. The network has no wire here (its NICs').

Both the thresholds loader (a floor above the wire it judges is refused: `thresholds/plausible.py`) and
`wirecheck advise` (a profile without measured figures: the wire x the measured efficiency) read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from wirecheck.core import gpu_arch
from wirecheck.node.hardware import PCIE_LANE_BYTES_PER_S
from wirecheck.node.placement import CLASS_NETWORK, CLASS_SINGLE, Placement
from wirecheck.node.topology import NVSWITCH, Topology


@dataclass(frozen=True)
class WirePeak:
    bytes_per_s: float
    how: str  # how it was reached, for a message: "6 x NVLink 4 links (26.562 GB/s each) into nvl_pair-2gpu-0.1"
    nvlink: bool  # NVLink (else the host path's PCIe)
    switched: bool = False  # through NVSwitch (in-switch reduction may lift an all_reduce above the links)


def links_into(topology: Topology, placement: Placement) -> int:
    """The NVLinks of the placement's GPU with the fewest into the placement (see the module's doc)."""
    counts = []
    for g in placement.gpus:
        peers = [topology.nv_between(g, h) for h in placement.gpus if h != g]
        counts.append(max(peers, default=0) if topology.fabric == NVSWITCH else sum(peers))
    return min(counts, default=0)


def link_speed(topology: Topology, placement: Placement, hardware=None) -> tuple[float | None, str]:
    """(bytes/s per link per direction, its NVLink generation's words): NVML's reading of the placement's
    links, else the hardware's (a profile's) speed, else its NVLink generation's rate (gpu_arch)."""
    links = [link for g in placement.gpus for link in topology.gpu(g).nvlinks if link.active]
    speeds = [link.speed_mbps * 1e6 for link in links if link.speed_mbps]
    versions = {gpu_arch.NVLINK_VERSION_TO_GENERATION.get(link.version) for link in links if link.version} - {None}
    gen = versions.pop() if len(versions) == 1 else getattr(hardware, "nvlink_gen", None)
    speed = min(speeds) if speeds else getattr(hardware, "nvlink_speed", None) or gpu_arch.NVLINK_LINK_SPEED.get(gen)
    return speed, f"NVLink {gen}" if gen else "NVLink"


def pcie_link(topology: Topology, placement: Placement, hardware=None) -> tuple[int | None, int | None]:
    """(generation, width) of the slowest GPU of the placement: its link's maximum (it trains down at idle),
    else the hardware's (a profile's)."""
    gpus = [topology.gpu(g) for g in placement.gpus]
    gens = [g.pcie_gen_max or g.pcie_gen for g in gpus]
    widths = [g.pcie_width_max or g.pcie_width for g in gpus]
    gen = min(gens) if gens and all(gens) else getattr(hardware, "pcie_gen", None)
    width = min(widths) if widths and all(widths) else getattr(hardware, "pcie_width", None)
    return gen, width


def wire_peak(topology: Topology, placement: Placement, hardware=None) -> WirePeak | None:
    """The wire's peak for this placement on this topology (`hardware`: a wirecheck.node.hardware.Hardware
    for what the topology does not say, as a profile's); None where it cannot be known."""
    if placement.klass in (CLASS_NETWORK, CLASS_SINGLE):
        return None
    if placement.nvlink:
        links = links_into(topology, placement)
        speed, generation = link_speed(topology, placement, hardware)
        if not links or not speed:
            return None
        switched = topology.fabric == NVSWITCH
        through = ("its NVSwitch links (every peer over all of them)" if switched
                   else "the NV# to its peers there, summed")
        return WirePeak(links * speed, f"{links} x {generation} links ({speed / 1e9:.3f} GB/s each) into "
                                       f"{placement.id}: {through}", True, switched)
    gen, width = pcie_link(topology, placement, hardware)
    lane = PCIE_LANE_BYTES_PER_S.get(gen or 0)
    if not lane or not width:
        return None
    return WirePeak(lane * width, f"PCIe Gen{gen} x{width} one way, the host path of {placement.id}", False)
