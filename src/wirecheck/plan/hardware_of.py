"""The hardware a plan prices a recorded topology with, where the topology itself names none.

A `nvidia-smi topo -m` text records the wiring but not the GPU model, its NVLink speed or its PCIe
link; on the node, NVML gives them, and the busbw checks derive their floors from them. Planning on
such a text would price an op with no measured figure and no table floor at the thresholds' slowest
floor (10 GB/s: minutes too many on an NVLink node). The thresholds' node profile whose `topology`
names this very file describes that node's hardware, so the plan takes its hardware from there (only
the hardware: the limits stay those of a run without --profile) and says so.
"""

from __future__ import annotations

from pathlib import Path

from wirecheck.node.hardware import from_profile
from wirecheck.node.topo_text import recorded_path

# Hardware fields a topology records itself (a `topo -m` text counts the NVLinks per GPU, nothing else).
WIRING_ONLY = {"nvlinks_per_gpu"}


def names_no_hardware(header: dict) -> bool:
    """True when the run's header holds no hardware beyond the wiring (a simulated `topo -m` text)."""
    hardware = header.get("hardware") or {}
    return not any(v for k, v in hardware.items() if k not in WIRING_ONLY)


def describing_profile(thresholds, source: str | None, topologies: Path) -> str | None:
    """The one profile whose `topology` is the recorded file `source` (a simulated header's
    simulation_source); None when none or several name it."""
    if not source:
        return None
    target = Path(source).resolve()
    found = []
    for name in thresholds.profile_names:
        named = thresholds.profile(name).topology
        path = recorded_path(named, topologies) if named else None
        if path is not None and path.resolve() == target:
            found.append(name)
    return found[0] if len(found) == 1 else None


def with_profile_hardware(header: dict, thresholds, topologies: Path) -> tuple[dict, str | None]:
    """The header with the hardware of the profile that describes its simulated topology, and that
    profile's name; the header unchanged and None where it names hardware already or no profile fits."""
    if not header.get("simulated") or not names_no_hardware(header):
        return header, None
    name = describing_profile(thresholds, header.get("simulation_source"), topologies)
    if name is None:
        return header, None
    return dict(header, hardware=from_profile(thresholds.profile(name)).as_dict()), name
