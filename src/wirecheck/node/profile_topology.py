"""The topology a node profile describes (thresholds.yaml `profiles:`), for a dry run of that node.

`wirecheck validate --profile h200-sxm-8` on a machine without GPUs simulates the node the profile
expects, not some other recorded one: its GPU count and model, its fabric (NVSwitch: every pair
through the switches; bridged: groups of `group_size` joined by `nvlinks_per_peer` links; PCIe: no
NVLink), its NVLinks per GPU and their speed. Bridged groups are consecutive indices, as the recorded
H200 NVL topology has them (a real node's groups come from NVML, never from this).

The profile is read through its attributes (gpu_count, gpu_model, fabric, nvlinks_per_gpu,
nvlinks_per_peer, group_size, nvlink_speed, pcie_gen, pcie_width, gpu_memory, name): this package
sits below the thresholds loader.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from wirecheck.core.gpu_arch import NVLINK_VERSION_TO_GENERATION
from wirecheck.node.topo_text import load_recorded
from wirecheck.node.topology import Gpu, NvLink, Topology

# The Gpu fields a profile's hardware description fills (None where it describes none).
HARDWARE_FIELDS = ("compute_capability", "sm_count", "sm_clock_max_mhz", "mem_bus_width", "mem_clock_max_mhz",
                   "power_limit_w")


def hardware_fields(profile) -> dict:
    return {name: getattr(profile, name, None) for name in HARDWARE_FIELDS}

PREFIX = "profile:"  # --simulate profile:NAME


def from_profile(profile, where: str = "thresholds.yaml") -> Topology:
    n = profile.gpu_count
    fabric = profile.fabric
    group = profile.group_size or n

    def nv(i: int, j: int) -> int:
        if i == j or fabric == "pcie":
            return 0
        if fabric == "nvswitch":
            return profile.nvlinks_per_gpu
        return (profile.nvlinks_per_peer or 0) if i // group == j // group else 0

    speed = int(profile.nvlink_speed / 1e6) if profile.nvlink_speed else None  # NVML's MB/s per link
    remote = "switch" if fabric == "nvswitch" else "gpu"
    gen = getattr(profile, "nvlink_gen", None)
    version = max((v for v, g in NVLINK_VERSION_TO_GENERATION.items() if g == gen), default=None)  # NVML's enum
    gpus = tuple(
        Gpu(index=i, name=profile.gpu_model, bus_id=f"00000000:{i + 1:02X}:00.0", memory_bytes=profile.gpu_memory,
            nvlinks=tuple(NvLink(index=k, active=True, remote_type=remote, speed_mbps=speed, version=version)
                          for k in range(profile.nvlinks_per_gpu if fabric != "pcie" else 0)),
            pcie_gen=profile.pcie_gen, pcie_gen_max=profile.pcie_gen, pcie_width=profile.pcie_width,
            pcie_width_max=profile.pcie_width, **hardware_fields(profile))
        for i in range(n))
    return Topology(
        gpus=gpus,
        nvlinks=tuple(tuple(nv(i, j) for j in range(n)) for i in range(n)),
        pcie_paths=tuple(tuple(None if i == j or nv(i, j) else "SYS" for j in range(n)) for i in range(n)),
        source=f"the node profile {profile.name} describes ({where}: profiles.{profile.name})",
        declared_fabric=fabric,
    )


def profile_name(spec: str | None) -> str | None:
    """NAME of a `--simulate profile:NAME`; None for any other topology."""
    return spec[len(PREFIX):] if spec and spec.startswith(PREFIX) else None


def simulated(spec: str, thresholds, topologies: Path) -> Topology:
    """The topology a dry run replays (`--simulate SPEC`, for the suite and every command that takes it):
    `profile:NAME` (the recorded topology the thresholds profile names, else the node its figures describe), a
    recorded NAME in `topologies`, or a file. ValueError (or OSError) naming SPEC and what is wrong."""
    if not spec.strip():  # `--simulate ""`: an empty variable in a script, never "no simulation"
        raise ValueError("an empty topology: give a recorded topology NAME, a file, or profile:NAME")
    name = profile_name(spec)
    if name is None:
        return load_recorded(spec, topologies)
    profile = thresholds.profile(name)  # an unknown name: ThresholdsError naming the known ones
    if profile.topology is None:
        return from_profile(profile, str(thresholds.path))
    # The profile names a recorded node of its type (profiles.NAME.topology): the truer picture (NICs, real bus
    # ids), and what `wirecheck plan --profile NAME` plans on too. The run still simulates the profile's node, so
    # the source names the profile first: "SIMULATION on .../h100-sxm-8-nics.txt" read as another node.
    try:
        recorded = load_recorded(profile.topology, topologies)
    except (ValueError, OSError) as exc:
        raise ValueError(f"profiles.{name}.topology {profile.topology}: {exc}") from None
    return replace(recorded, source=f"the node profile {name} (wired as recorded in {recorded.source})")
