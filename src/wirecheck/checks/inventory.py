"""Inventory and idle health: GPUs present, as the profile expects, healthy and idle.

Every check here is about the live node, so each one skips in simulation: a recorded
topology replayed on CPU must never read as an accepted node.
"""

from __future__ import annotations

from wirecheck.checks import check
from wirecheck.core.verdict import FAIL, PASS, Verdict, expect, skip
from wirecheck.thresholds.declared import Rule
from wirecheck.thresholds.settings import read_profiles

# The node types a run is checked against (--profile NAME), read by the inventory, link and NIC checks.
PROFILES = Rule("profiles", read_profiles, "{h200-sxm-8: {...}}")

SIMULATION_REASON = "simulation: the inventory is read from the live node only; no GPU was looked at"


def _gpu(gpu: int) -> str:
    return f"GPU{gpu}"


def _profile_or_skip(thresholds, profile: str | None, what: str, where: str | None):
    if profile is None:
        return None, skip(what, where, "no --profile given: pass --profile NAME to check the node against an expected inventory")
    return thresholds.profile(profile), None


@check("gpus_visible")
def gpus_visible(thresholds, *, n_gpus: int, unavailable: str | None, simulated: bool) -> Verdict:
    what = "GPUs visible"
    if simulated:
        return skip(what, None, SIMULATION_REASON)
    # A floor of one GPU, recorded as one (limit min 1, unit GPUs): a drain reason then reads
    # "0 GPUs < 1 GPUs", where an expected ">= 1" read "0 != >= 1".
    seen = 0 if unavailable else n_gpus
    if seen > 0:
        return Verdict("", what, None, PASS, f"{what}: {seen} as expected", measured=seen, unit="GPUs",
                       limit={"min": 1})
    failure = (f"no GPU visible: {unavailable}\nFor a dry run on a machine without GPUs: pytest --simulate "
               "(or --simulate=NAME|FILE; `wirecheck topo --help` lists the recorded ones)" if unavailable
               else "no GPU visible: NVML answers but sees no GPU")
    return Verdict("", what, None, FAIL, failure, measured=0, unit="GPUs", limit={"min": 1})


@check("gpu_count", limits=(PROFILES,))
def gpu_count(thresholds, *, n_gpus: int, profile: str | None, simulated: bool) -> Verdict:
    what = "GPU count"
    if simulated:
        return skip(what, None, SIMULATION_REASON)
    p, skipped = _profile_or_skip(thresholds, profile, what, None)
    if skipped:
        return skipped
    return expect(what, None, n_gpus, p.gpu_count, n_gpus == p.gpu_count,
                  f"{n_gpus} GPUs visible, profile {p.name} expects {p.gpu_count}: a GPU fell off the bus "
                  "(dmesg: Xid 79) or is hidden (CUDA_VISIBLE_DEVICES, MIG)", p.source, p.yaml_path)


@check("gpu_model", limits=(PROFILES,))
def gpu_model(thresholds, *, gpu: int, name: str | None, profile: str | None, simulated: bool) -> Verdict:
    what, where = "GPU model", _gpu(gpu)
    if simulated:
        return skip(what, where, SIMULATION_REASON)
    p, skipped = _profile_or_skip(thresholds, profile, what, where)
    if skipped:
        return skipped
    if name is None:
        return skip(what, where, "NVML gave no name")
    return expect(what, where, name, p.gpu_model, name == p.gpu_model,
                  f"GPU{gpu} is {name!r}, profile {p.name} expects {p.gpu_model!r}", p.source, p.yaml_path)


@check("fabric", limits=(PROFILES,))
def fabric(thresholds, *, fabric: str, groups: list, profile: str | None, simulated: bool) -> Verdict:
    what = "fabric"
    if simulated:
        return skip(what, None, SIMULATION_REASON)
    p, skipped = _profile_or_skip(thresholds, profile, what, None)
    if skipped:
        return skipped
    return expect(what, None, fabric, p.fabric, fabric == p.fabric,
                  f"detected fabric {fabric} (NVLink groups {groups}), profile {p.name} expects {p.fabric}: "
                  "check NVLink state with `wirecheck topo`", p.source, p.yaml_path)


@check("pcie_width", limits=(PROFILES,))
def pcie_width(thresholds, *, gpu: int, bus_id: str | None, width: int | None, width_max: int | None,
               simulated: bool) -> Verdict:
    what, where = "PCIe link width", _gpu(gpu)
    if simulated:
        return skip(what, where, SIMULATION_REASON)
    if width is None or width_max is None:
        return skip(what, where, "NVML gave no PCIe link data")
    return expect(what, where, width, width_max, width == width_max,
                  f"GPU{gpu} ({bus_id}) PCIe link x{width}, capable of x{width_max}: reseat the card or check the riser",
                  unit="lanes")


@check("pcie_generation", limits=(PROFILES,))
def pcie_generation(thresholds, *, gpu: int, gen: int | None, gen_max: int | None, profile: str | None,
                    simulated: bool) -> Verdict:
    """The link can run at the profile's generation. It drops at idle to save power, so a lower
    current generation at idle is a skip with its value, never a pass."""
    what, where = "PCIe generation", _gpu(gpu)
    if simulated:
        return skip(what, where, SIMULATION_REASON)
    p, skipped = _profile_or_skip(thresholds, profile, what, where)
    if skipped:
        return skipped
    if gen_max is None:
        return skip(what, where, "NVML gave no PCIe link data")
    if gen_max < p.pcie_gen:
        return expect(what, where, gen_max, p.pcie_gen, False,
                      f"GPU{gpu} PCIe link capable of Gen{gen_max} only, profile {p.name} expects Gen{p.pcie_gen}",
                      p.source, p.yaml_path)
    if gen != gen_max:
        return skip(what, where, f"at Gen{gen} of Gen{gen_max} while idle (the link drops at idle); "
                                 "the copy-bandwidth check judges it under load", measured=gen)
    return expect(what, where, gen, p.pcie_gen, True, "", p.source, p.yaml_path)


def _unsupported(what: str, where: str, reading) -> Verdict | None:
    if isinstance(reading, dict) and "unsupported" in reading:
        return skip(what, where, f"not readable: {reading['unsupported']}")
    return None


@check("ecc_uncorrected")
def ecc_uncorrected(thresholds, *, gpu: int, count, simulated: bool) -> Verdict:
    """No volatile uncorrectable ECC error since the driver loaded."""
    what, where = "volatile uncorrectable ECC errors", _gpu(gpu)
    if simulated:
        return skip(what, where, SIMULATION_REASON)
    return _unsupported(what, where, count) or expect(
        what, where, count, 0, count == 0, f"GPU{gpu}: {count} volatile uncorrectable ECC errors: drain the node and reset the GPU")


@check("row_remapping")
def row_remapping(thresholds, *, gpu: int, rows, simulated: bool) -> Verdict:
    """No row remap pending (needs a GPU reset) or failed (the GPU needs replacing)."""
    what, where = "row remapping", _gpu(gpu)
    if simulated:
        return skip(what, where, SIMULATION_REASON)
    unsupported = _unsupported(what, where, rows)
    if unsupported:
        return unsupported
    if rows["failure"]:
        return expect(what, where, rows, "no failure", False, f"GPU{gpu}: row remapping FAILED ({rows}): the GPU needs replacing")
    return expect(what, where, rows, "none pending", not rows["pending"],
                  f"GPU{gpu}: row remap pending ({rows}): reset the GPU before use")


@check("persistence_mode")
def persistence_mode(thresholds, *, gpu: int, mode, simulated: bool) -> Verdict:
    what, where = "persistence mode", _gpu(gpu)
    if simulated:
        return skip(what, where, SIMULATION_REASON)
    return _unsupported(what, where, mode) or expect(
        what, where, mode, 1, mode == 1, f"GPU{gpu}: persistence mode off: enable it (nvidia-persistenced, or nvidia-smi -pm 1)")


@check("fabric_manager")
def fabric_manager(thresholds, *, gpu: int, topology_fabric: str, state, simulated: bool) -> Verdict:
    """On NVSwitch nodes the fabric must be fully set up, or CUDA fails with error 802."""
    what, where = "NVSwitch fabric registration", _gpu(gpu)
    if simulated:
        return skip(what, where, SIMULATION_REASON)
    if topology_fabric != "nvswitch":
        return skip(what, where, f"fabric is {topology_fabric}: no fabric manager involved")
    unsupported = _unsupported(what, where, state)
    if unsupported:
        return unsupported
    ok = state["completed"] and state["status_ok"]
    return expect(what, where, state["text"], "COMPLETED, status SUCCESS", ok,
                  f"GPU{gpu}: NVSwitch fabric {state['text']}: check nvidia-fabricmanager (systemctl status nvidia-fabricmanager)")


@check("no_foreign_processes")
def no_foreign_processes(thresholds, *, gpu: int, processes, simulated: bool) -> Verdict:
    """Nothing else runs on the GPUs: measurements would be invalid."""
    what, where = "foreign processes", _gpu(gpu)
    if simulated:
        return skip(what, where, SIMULATION_REASON)
    unsupported = _unsupported(what, where, processes)
    if unsupported:
        return unsupported
    return expect(what, where, processes, [], not processes,
                  f"GPU{gpu} is in use by {processes}: results would be invalid; stop them or pick another node")
