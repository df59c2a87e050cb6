"""Copy bandwidth without NCCL: host<->device per GPU, peer copies per NVLink pair, and the
PCIe link as it runs under load.

Bandwidths come in as bytes/s and are recorded in GB/s (1e9 B/s). A host copy below its floor
names the GPU and the PCIe link it ran on (read from NVML during the copy), so a link trained
down to Gen3 or x8 shows as the cause; the link itself is judged under load by
`pcie_link_under_load` (at idle it drops by design, which the inventory check can only skip).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from wirecheck.checks import check
from wirecheck.checks.words import Words
from wirecheck.core import render
from wirecheck.core.quantity import format_bw
from wirecheck.core.verdict import FAIL, Verdict, expect, not_measured, skip, within
from wirecheck.node.hardware import PCIE_LANE_BYTES_PER_S, Hardware
from wirecheck.node.topology import FABRICS
from wirecheck.thresholds import plausible
from wirecheck.thresholds.declared import Rule
from wirecheck.thresholds.fields import Share, Source, spec
from wirecheck.thresholds.limits import Axis, Entry, Limit, Table

GB = 1e9
DIRECTION_NAMES = {"h2d": "host->device", "d2h": "device->host"}
_SIMULATION = "simulation: no GPU memory to copy to or from"
_NO_LIMIT = "{why} in {path}"

HOST_COPY = Words(
    what="{direction} copy bandwidth",
    means="copies between host and GPU are slow: the GPU's PCIe link runs below its generation or width, or the "
          "CPU/NUMA placement is wrong",
    todo="`nvidia-smi -q -d PCIE` under load (Gen and width), `lspci -vv` for the slot; reseat the GPU or its riser",
    say={"simulation": _SIMULATION, "no_limit": _NO_LIMIT,
         "ran_on": "the copy ran on PCIe Gen{gen} x{width}", "capable": " (capable of Gen{gen_max} x{width_max})",
         "after": ", read after the copies ended", "unreadable": "the copy's PCIe link was not readable"})
PCIE_UNDER_LOAD = Words(
    what="PCIe link under load",
    means="the PCIe link trained down (lower generation or width) while data moved",
    todo="reseat the GPU (or riser/retimer), check the BIOS PCIe settings and `dmesg` for AER errors",
    say={"simulation": _SIMULATION,
         "no_reading": "NVML gave no PCIe link reading: {error}",
         "after": "the reading came after the copies had ended (the link may have dropped to idle); raise "
                  "copy_bandwidth.settings.iters",
         "trained_down": "{measured} while copying, capable of {expected}: the link trained down (reseat the GPU or "
                         "riser, check the slot's BIOS setting and `lspci -vv` LnkSta)"})
PEER_COPY = Words(
    what={"copy": "peer copy bandwidth", "slower": "peer copy bandwidth (slower direction GPU{src}->GPU{dst})"},
    means="direct GPU-to-GPU copies are slow: a link of the pair is down or peer access is off",
    todo="`nvidia-smi nvlink -s` on both GPUs and `nvidia-smi topo -p2p r`; check the IOMMU/ACS settings",
    say={"simulation": _SIMULATION, "no_limit": _NO_LIMIT,
         "no_access": "GPU{src} cannot access GPU{dst}'s memory directly (NV{nv}): the copy was staged through the host",
         "suspect": "{both}; suspect the NVLinks of GPU{src} or GPU{dst}"})

DIRECTIONS = ("h2d", "d2h", "peer")
HOST_DIRECTIONS = ("h2d", "d2h")


def pcie_ceiling(gen: int | None, width: int | None) -> float | None:
    """One-way PCIe bandwidth of a link (bytes/s), or None when gen/width are unknown."""
    if not gen or not width or gen not in PCIE_LANE_BYTES_PER_S:
        return None
    return PCIE_LANE_BYTES_PER_S[gen] * width


# --- the limits the copy checks read: what nvbandwidth measures, floors per fabric and direction ----------


@dataclass(frozen=True)
class DerivedCopyFloor:
    """A direction without an entry: a share of the link the copy rides (the GPU's PCIe link for host copies,
    NV# x per-link speed for peer copies)."""

    WHAT = "derived copy floor"
    host_efficiency: float = spec(Share('"70 %"', "a floor cannot exceed the link it rides; write at most 100 %"))
    peer_efficiency: float = spec(Share('"60 %"', "a floor cannot exceed the link it rides; write at most 100 %"))
    source: str = spec(Source())
    yaml_path: str


def _derived_copy(th, names: tuple, n_gpus, hardware, unmatched: str, ceiling: float | None = None):
    fabric, direction = names
    note = f" ({unmatched})" if unmatched else ""
    link = "the PCIe link" if direction in HOST_DIRECTIONS else "NV# x per-link speed"
    if not ceiling:
        return None, f"no {fabric}/{direction} copy floor{note} and no reading of {link} to derive one"
    derived = th.values["copy_bandwidth.derived_floor"]
    eff = derived.host_efficiency if direction in HOST_DIRECTIONS else derived.peer_efficiency
    return Limit(min=ceiling * eff, max=None, yaml_path=derived.yaml_path, rule="derived",
                 source=(f"derived: {eff * 100:g} % of {link} {format_bw(ceiling)} (no {fabric}/{direction} "
                         f"entry{note}; efficiency: {derived.source})")), ""


FLOORS = Table("copy_bandwidth.floors", (Axis("fabric", lambda: FABRICS, "fabric", "copy floors are keyed by fabric"),
                                         Axis("direction", lambda: DIRECTIONS, "copy direction", "directions are")),
               Entry("bandwidth", ("min",), ("min",), "a copy floor", positive=True), "copy floor", derived=_derived_copy,
               plausible=lambda at, table, _: plausible.check_copies(at, table),
               example='{nvswitch: {h2d: {min: "48 GB/s", source: ...}, ...}, ...}')
DERIVED = Rule("copy_bandwidth.derived_floor", DerivedCopyFloor,
               '{host_efficiency: "70 %", peer_efficiency: "60 %", source: ...}')


def _link(pcie: dict | None) -> str:
    if not pcie or pcie.get("gen") is None:
        return HOST_COPY.said("unreadable")
    text = HOST_COPY.said("ran_on", gen=pcie["gen"], width=pcie["width"])
    if pcie.get("gen_max") is not None:
        text += HOST_COPY.said("capable", gen_max=pcie["gen_max"], width_max=pcie["width_max"])
    return text + ("" if pcie.get("under_load", True) else HOST_COPY.said("after"))


@check("host_copy", words=HOST_COPY, limits=(FLOORS, DERIVED))
def host_copy(thresholds, *, gpu: int, direction: str, fabric: str, bytes_per_s: float | None, pcie: dict | None,
              simulated: bool, error: str | None = None, hardware: dict | None = None) -> Verdict:
    """Pinned host<->device copy bandwidth of one GPU against the floor for the fabric.
    `pcie`: {"gen", "width", "gen_max", "width_max", "under_load"} read during the copies; `hardware`
    (wirecheck.node.hardware.Hardware.as_dict): which table entries apply (the PCIe reading wins)."""
    what, where = HOST_COPY.judged(direction=DIRECTION_NAMES[direction]), f"GPU{gpu}"
    if simulated:
        return skip(what, where, HOST_COPY.said("simulation"))
    if error or bytes_per_s is None:
        return not_measured(what, where, error)
    ceiling = pcie_ceiling((pcie or {}).get("gen_max"), (pcie or {}).get("width_max"))
    node = Hardware.from_dict(hardware)  # None (a record without it): every entry applies, as before
    if node is not None and pcie and pcie.get("gen_max"):
        node = replace(node, pcie_gen=pcie["gen_max"], pcie_width=pcie.get("width_max"))
    limit, why = thresholds.copy_bandwidth.limit_rule(fabric, direction, ceiling, node)
    if limit is None:
        return skip(what, where, HOST_COPY.said("no_limit", why=why, path=thresholds.path))
    return within(what, where, bytes_per_s, limit, "GB/s", hint=_link(pcie), details={"pcie": pcie})


@check("pcie_link_under_load", words=PCIE_UNDER_LOAD)
def pcie_link_under_load(thresholds, *, gpu: int, pcie: dict | None, simulated: bool) -> Verdict:
    """While host copies run, the GPU's PCIe link runs at the generation and width it is capable of."""
    what, where = PCIE_UNDER_LOAD.judged(), f"GPU{gpu}"
    if simulated:
        return skip(what, where, PCIE_UNDER_LOAD.said("simulation"))
    if not pcie or pcie.get("error") or pcie.get("gen") is None or pcie.get("gen_max") is None:
        return skip(what, where, PCIE_UNDER_LOAD.said("no_reading", error=(pcie or {}).get("error") or "not supported"))
    if not pcie.get("under_load"):
        return skip(what, where, PCIE_UNDER_LOAD.said("after"))
    now = (pcie["gen"], pcie["width"])
    best = (pcie["gen_max"], pcie["width_max"])
    measured = f"Gen{now[0]} x{now[1]}"
    expected = f"Gen{best[0]} x{best[1]}"
    source = "NVML: nvmlDeviceGetMaxPcieLinkGeneration/Width, the most this GPU and its slot can train to"
    trained_down = now[0] < best[0] or now[1] < best[1]
    return expect(what, where, measured, expected, not trained_down,
                  PCIE_UNDER_LOAD.said("trained_down", measured=measured, expected=expected), source=source)


@check("peer_copy", words=PEER_COPY, limits=(FLOORS, DERIVED))
def peer_copy(thresholds, *, pair: str, fabric: str, nv: int, link_speed_bytes_per_s: float | None,
              directions: list | None, simulated: bool, error: str | None = None,
              hardware: dict | None = None) -> Verdict:
    """Device->device copies between an NVLink pair, both directions: the slower one against the
    floor (the fabric's entry for this hardware, or NV# x per-link speed x efficiency). `directions`:
    [{"src", "dst", "bytes_per_s", "peer_access"}]."""
    what = PEER_COPY.judged("copy")
    if simulated:
        return skip(what, pair, PEER_COPY.said("simulation"))
    if error or not directions:
        return not_measured(what, pair, error)
    no_access = [d for d in directions if not d.get("peer_access")]
    if no_access:
        d = no_access[0]
        return Verdict("", what, pair, FAIL, measured=min(x["bytes_per_s"] for x in directions) / GB, unit="GB/s",
                       fmt="bandwidth",
                       details={"problems": [PEER_COPY.said("no_access", src=d["src"], dst=d["dst"], nv=nv)]})
    slow = min(directions, key=lambda d: d["bytes_per_s"])
    ceiling = nv * link_speed_bytes_per_s if nv and link_speed_bytes_per_s else None
    limit, why = thresholds.copy_bandwidth.limit_rule(fabric, "peer", ceiling, Hardware.from_dict(hardware))
    if limit is None:
        return skip(what, pair, PEER_COPY.said("no_limit", why=why, path=thresholds.path))
    both = ", ".join(f"GPU{d['src']}->GPU{d['dst']} {render.FORMATS['bandwidth'](d['bytes_per_s'])}" for d in directions)
    return within(PEER_COPY.judged("slower", src=slow["src"], dst=slow["dst"]), pair, slow["bytes_per_s"], limit,
                  "GB/s", hint=PEER_COPY.said("suspect", both=both, src=slow["src"], dst=slow["dst"]),
                  details={"directions": directions})
