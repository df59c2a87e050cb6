"""Limits no node could meet, refused when the file is loaded.

A floor above the physical peak it is judged against can only fail, whatever the node; a ceiling
below any reading a real node gives can only fail too. Both are typing mistakes ("29500 GB/s" for
"295 GB/s") that would otherwise drain every node hours later.

A busbw floor is held against the wire of the placements it judges (`wire_of_entry`, one rule the
loader calls): each node profile of the file the entry applies to (its `hardware:`, or every profile
when it names none) gives its placements of the entry's class and GPU count, and the slowest of their
wires (wirecheck.node.wire: the NV# into the placement x that NVLink generation's per-link speed, the
host path's PCIe) is the peak. An entry no profile describes is held against its own `hardware:`
(`{nvlink: 4, links: 18}`: 18 x NVLink 4's per-link rate), else the largest any shipping NVIDIA part has
(NVLink 5, 18 links; PCIe Gen6 x16). A GPU figure is held against its model's HBM and math peaks where
a profile describes the model, else the largest ones. NVSwitch placements allow for in-switch
reduction (NVLS), under which an all_reduce's busbw reads up to ~2x the links.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from wirecheck.core import gpu_arch
from wirecheck.core.quantity import format_quantity
from wirecheck.node import hardware as node_hardware
from wirecheck.node.hardware import PCIE_LANE_BYTES_PER_S, Hardware
from wirecheck.node.placement import (CLASS_CROSS_QUAD, CLASS_FORCED_PCIE, CLASS_NETWORK, CLASS_NVSWITCH, CLASS_PAIR,
                                      CLASS_PCIE, enumerate_placements)
from wirecheck.node.profile_topology import from_profile as profile_topology
from wirecheck.node.wire import wire_peak
from wirecheck.thresholds.limits import ANY, describe_hardware
from wirecheck.thresholds.yaml_reader import _At

PCIE_PATH_CLASSES = (CLASS_PCIE, CLASS_CROSS_QUAD, CLASS_FORCED_PCIE)
SWITCHED_CLASSES = (CLASS_NVSWITCH, CLASS_PAIR)  # a pair may sit on a switch
# The largest of any shipping NVIDIA GPU, with a quarter of headroom for the next one: B200/B300 HBM3e
# 8 TB/s; B300 2.5 PFLOP/s bf16 dense, 5 fp8 (datasheets).
LARGEST = {"bandwidth": 8e12 * 1.25, "bf16": 2.5e15 * 1.25, "fp8": 5e15 * 1.25}
# Below these no reading of real hardware falls: PCIe Gen3 x1 moves ~1 GB/s; NCCL's smallest call on
# NVLink takes ~4 us (2x H200 SXM: 3.7 us broadcast), a kernel launch alone ~2 us.
SLOWEST_BANDWIDTH = 1e9
FASTEST_CALL_S = 1e-6
PCIE_LARGEST = PCIE_LANE_BYTES_PER_S[max(PCIE_LANE_BYTES_PER_S)] * 16


def nvlink_peak(spec: Mapping[str, Any] | None, switched: bool) -> tuple[float, str]:
    """The most an NVLink placement's busbw could read for an entry's hardware (bytes/s, how)."""
    spec = spec or {}
    gen = spec.get("nvlink")
    links = spec.get("links") or gpu_arch.NVLINK_MAX_LINKS
    speed = gpu_arch.NVLINK_LINK_SPEED.get(gen) if gen else None
    if speed is None:
        gen, speed = max(gpu_arch.NVLINK_LINK_SPEED.items())
        what = f"{links} x NVLink {gen} ({speed / 1e9:g} GB/s per link, the fastest NVLink)"
    else:
        what = f"{links} x NVLink {gen} ({speed / 1e9:g} GB/s per link)"
    peak = links * speed
    if switched:
        peak *= gpu_arch.IN_SWITCH_REDUCTION
        what += f" x {gpu_arch.IN_SWITCH_REDUCTION:g} for in-switch reduction (NVLS)"
    return peak, what


def pcie_peak(spec: Mapping[str, Any] | None) -> tuple[float, str]:
    spec = spec or {}
    gen, width = spec.get("pcie_gen"), spec.get("pcie_width")
    if gen in PCIE_LANE_BYTES_PER_S and width:
        return PCIE_LANE_BYTES_PER_S[gen] * width, f"PCIe Gen{gen} x{width} one way"
    return PCIE_LARGEST, "PCIe Gen6 x16 one way (the fastest PCIe link)"


def _refuse_floor(at: _At, value: float, peak: float, what: str, kind: str, hardware: Mapping | None,
                  can_name_hardware: bool = True) -> None:
    on = f" of {describe_hardware(hardware)}" if hardware else ""
    raise at.error(
        f"min {format_quantity(value, kind)} is above the physical peak{on} it is judged against: {what} = "
        f"{format_quantity(peak, kind)}; no node could pass it",
        f"write the floor below {format_quantity(peak, kind)} (a floor is ~0.9 x a measured value: a digit too many?)"
        + ("" if hardware or not can_name_hardware else ", or name the hardware it was measured on with hardware: {...}"),
    )


def _refuse_ceiling(at: _At, value: float, lowest: float, why: str, kind: str) -> None:
    raise at.error(
        f"max {format_quantity(value, kind)} is below any reading real hardware gives ({why}: "
        f"{format_quantity(lowest, kind)}); every node would fail it",
        f"write the ceiling above {format_quantity(lowest, kind)} (a digit missing, or the wrong unit?)",
    )


def _entry_at(at: _At, *keys: Any) -> _At:
    for key in keys:
        at = at.child(key) if key in at.value else at.child(str(key))
    return at


@dataclass(frozen=True)
class ProfileWires:
    """One node profile's placements, each with the peak of its wire (made once per file read)."""

    name: str
    hardware: Hardware
    wires: tuple  # ((Placement, WirePeak), ...)


def profile_wires(profiles: Mapping[str, Any]) -> list[ProfileWires]:
    out = []
    for name, profile in profiles.items():
        topology = profile_topology(profile)
        hardware = node_hardware.from_profile(profile)
        wires = tuple((p, peak) for p in enumerate_placements(topology)
                      if (peak := wire_peak(topology, p, hardware)) is not None)
        out.append(ProfileWires(name, hardware, wires))
    return out


def wire_of_entry(klass: str, count: Any, limit, listed: tuple, profiles: list[ProfileWires]) -> tuple[float, str]:
    """(the peak, how it was reached) of the slowest wire a busbw entry judges: the placements of `klass` with
    `count` GPUs (`any`: the counts the table does not list) on every profile the entry's hardware: names.
    Where none does, the entry's own hardware: (or the fastest NVLink / PCIe any GPU has)."""
    found = []
    for prof in profiles:
        if limit.hardware and not prof.hardware.matches(limit.hardware)[0]:
            continue
        for placement, wire in prof.wires:
            if placement.klass != klass or not (placement.n_gpus == count or (count == ANY and placement.n_gpus not in listed)):
                continue
            peak, how = wire.bytes_per_s, wire.how
            if wire.switched:
                peak *= gpu_arch.IN_SWITCH_REDUCTION
                how += f", x {gpu_arch.IN_SWITCH_REDUCTION:g} for in-switch reduction (NVLS)"
            found.append((peak, f"{how}, on profile {prof.name}"))
    if found:
        return min(found, key=lambda f: f[0])
    if klass in PCIE_PATH_CLASSES:
        return pcie_peak(limit.hardware)
    return nvlink_peak(limit.hardware, klass in SWITCHED_CLASSES)


def check_busbw(at: _At, table: Mapping[tuple[str, str], Mapping], profiles: Mapping[str, Any] | None = None) -> None:
    """Collective busbw floors and ceilings (collectives.floors), each floor against the wire it judges
    (`profiles`: the file's node profiles, thresholds.file.Profile by name)."""
    wires = profile_wires(profiles or {})
    for (klass, op), counts in table.items():
        if klass == CLASS_NETWORK:
            continue  # across nodes the ceiling is the NICs', which the file does not describe
        listed = tuple(c for c in counts if c != ANY)
        for count, limit in counts.items():
            here = _entry_at(at, klass, op, count)
            if limit.min is not None:
                peak, what = wire_of_entry(klass, count, limit, listed, wires)
                if limit.min > peak:
                    _refuse_floor(here.child("min"), limit.min, peak, what, "bandwidth", limit.hardware)
            if limit.max is not None and limit.max < SLOWEST_BANDWIDTH:
                _refuse_ceiling(here.child("max"), limit.max, SLOWEST_BANDWIDTH, "PCIe Gen3 x1 one way", "bandwidth")


def check_latency(at: _At, tables: Mapping) -> None:
    """Small-message latency ceilings (collectives.latency.ceilings), hardware only."""
    for (klass, op), counts in tables.items():
        for count, limit in counts.items():
            if limit.max is not None and limit.max < FASTEST_CALL_S:
                _refuse_ceiling(_entry_at(at, klass, op, count).child("max"), limit.max, FASTEST_CALL_S,
                                "the fastest collective call a GPU makes", "time")


def check_copies(at: _At, floors: Mapping[tuple[str, str], Any]) -> None:
    """copy_bandwidth.floors: host copies ride PCIe, peer copies NVLink (no in-switch reduction)."""
    for (fabric, direction), limit in floors.items():
        peak, what = (pcie_peak(limit.hardware) if direction in ("h2d", "d2h")
                      else nvlink_peak(limit.hardware, switched=False))
        if limit.min > peak:
            _refuse_floor(_entry_at(at, fabric, direction).child("min"), limit.min, peak, what, "bandwidth",
                          limit.hardware)


def check_gpu_floors(at: _At, floors: Mapping[tuple[str, str], Any], models: Mapping[str, Hardware],
                     peaks: Mapping[str, str | None]) -> None:
    """gpu_health.floors: against the model's own peaks where a profile describes it, else the largest
    (`peaks`: figure -> the peak its declared floor names, "memory" or a math dtype; a share such as a
    utilization has none)."""
    for (model, figure), limit in floors.items():
        if not peaks.get(figure):
            continue
        hardware = models.get(model)
        dtype = "bf16" if peaks[figure] == "memory" else peaks[figure]
        peak, what = (None, "")
        if hardware is not None:
            peak, what = hardware.memory_peak() if limit.kind == "bandwidth" else hardware.math_peak(dtype)
            what = f"{model}'s peak ({what.rsplit(' = ', 1)[0]}, its profile)"
        if peak is None:
            peak = LARGEST["bandwidth" if limit.kind == "bandwidth" else dtype]
            what = (f"the largest {'HBM' if limit.kind == 'bandwidth' else dtype + ' dense math'} peak of any NVIDIA GPU "
                    "with a quarter of headroom")
        if limit.min > peak:
            _refuse_floor(_entry_at(at, model, figure).child("min"), limit.min, peak, what, limit.kind, None,
                          can_name_hardware=False)
