"""Inventory and idle health: GPUs present, as the profile expects, healthy and idle.

Every check here is about the live node, so each one skips in simulation: a recorded
topology replayed on CPU must never read as an accepted node.
"""

from __future__ import annotations

from wirecheck.checks import check
from wirecheck.checks.words import SIMULATION_INVENTORY, Words
from wirecheck.core import problems
from wirecheck.core.verdict import FAIL, PASS, Verdict, expect, skip
from wirecheck.thresholds.declared import Rule
from wirecheck.thresholds.settings import read_profiles

# The node types a run is checked against (--profile NAME), read by the inventory, link and NIC checks.
PROFILES = Rule("profiles", read_profiles, "{h200-sxm-8: {...}}")

# What every inventory check says when it cannot judge: a dry run, no profile to hold the node to, NVML silent.
_SAY = {"simulation": SIMULATION_INVENTORY,
        "no_profile": "no --profile given: pass --profile NAME to check the node against an expected inventory",
        "no_pcie": "NVML gave no PCIe link data",
        "unreadable": "not readable: {why}"}

GPUS_VISIBLE = Words(
    what="GPUs visible",
    means="no GPU could be read on this machine: nothing was validated",
    todo="make `nvidia-smi` list the GPUs (driver, kernel module, container GPU access); for a dry run, --simulate",
    say={**_SAY, "unavailable": "no GPU visible: {why}",
         "dry_run": "for a dry run on a machine without GPUs: pytest --simulate (or --simulate=NAME|FILE; `wirecheck "
                    "topo --help` lists the recorded ones)",
         "none": "no GPU visible: NVML answers but sees no GPU"})
GPU_COUNT = Words(
    what="GPU count",
    means="the node has another number of GPUs than its profile: a GPU fell off the bus or is hidden",
    todo="`nvidia-smi -L`, `dmesg | grep -i xid` (79: fallen off the bus); check CUDA_VISIBLE_DEVICES and MIG",
    say={**_SAY, "differs": "{n} GPUs visible, profile {profile} expects {expected}"})
GPU_MODEL = Words(
    what="GPU model",
    means="a GPU is another model than the profile expects",
    todo="check --profile, or the node's build sheet",
    say={**_SAY, "no_name": "NVML gave no name", "differs": "GPU{gpu} is {name!r}, profile {profile} expects {expected!r}"})
FABRIC = Words(
    what="fabric",
    means="the GPUs are wired differently from what the profile expects",
    todo="`wirecheck topo` (NVLink state); check --profile and the fabric manager",
    say={**_SAY, "differs": "detected fabric {fabric} (NVLink groups {groups}), profile {profile} expects {expected}"})
PCIE_WIDTH = Words(
    what="PCIe link width",
    means="a GPU's PCIe link is narrower than its maximum",
    todo="reseat the GPU or its riser; `lspci -vv` shows LnkSta against LnkCap",
    say={**_SAY, "narrow": "GPU{gpu} ({bus_id}) PCIe link x{width}, capable of x{width_max}"})
PCIE_GENERATION = Words(
    what="PCIe generation",
    means="a GPU's PCIe link cannot reach the profile's generation",
    todo="check the BIOS PCIe generation setting and the riser; reseat the GPU",
    say={**_SAY, "short": "GPU{gpu} PCIe link capable of Gen{gen_max} only, profile {profile} expects Gen{expected}",
         "idle": "at Gen{gen} of Gen{gen_max} while idle (the link drops at idle); the copy-bandwidth check judges it "
                 "under load"})
ECC_UNCORRECTED = Words(
    what="volatile uncorrectable ECC errors",
    means="a GPU reports uncorrectable memory errors",
    todo="drain the node; `nvidia-smi -q -d ECC,ROW_REMAPPER`; reset the GPU, replace it if errors come back",
    say={**_SAY, "errors": "GPU{gpu}: {count} volatile uncorrectable ECC errors"})
ROW_REMAPPING = Words(
    what="row remapping",
    means="a GPU has a pending or failed memory row remap",
    todo="a pending remap needs a GPU reset (`nvidia-smi -r`); a failed one means replacing the GPU",
    say={**_SAY, "no_failure": "no failure", "none_pending": "none pending",
         "failed": "GPU{gpu}: row remapping FAILED ({rows}): the GPU needs replacing",
         "pending": "GPU{gpu}: row remap pending ({rows}): reset the GPU before use"})
PERSISTENCE = Words(
    what="persistence mode",
    means="persistence mode is off: every job pays the driver's start-up and clocks may reset",
    todo="`nvidia-smi -pm 1` (or enable nvidia-persistenced)",
    say={**_SAY, "off": "GPU{gpu}: persistence mode off"})
FABRIC_MANAGER = Words(
    what="NVSwitch fabric registration",
    means="the NVSwitch fabric is not up: GPUs cannot use NVLink across the switches (CUDA fails with error 802)",
    todo="`systemctl status nvidia-fabricmanager` and its log; restart it, then reset the GPUs",
    say={**_SAY, "no_switch": "fabric is {fabric}: no fabric manager involved",
         "expected": "COMPLETED, status SUCCESS", "state": "GPU{gpu}: NVSwitch fabric {state}"})
FOREIGN = Words(
    what="foreign processes",
    means="another process uses the GPU: every figure measured beside it is wrong",
    todo="stop that process (the pid is named above; `nvidia-smi` lists it) or drain the node from the scheduler, "
         "then run again",
    say={**_SAY, "in_use": "GPU{gpu} is in use by {processes}: results would be invalid"})


def _gpu(gpu: int) -> str:
    return f"GPU{gpu}"


def _profile_or_skip(thresholds, words: Words, profile: str | None, what: str, where: str | None):
    if profile is None:
        return None, skip(what, where, words.said("no_profile"))
    return thresholds.profile(profile), None


@check("gpus_visible", words=GPUS_VISIBLE)
def gpus_visible(thresholds, *, n_gpus: int, unavailable: str | None, simulated: bool) -> Verdict:
    what = GPUS_VISIBLE.judged()
    if simulated:
        return skip(what, None, GPUS_VISIBLE.said("simulation"))
    # A floor of one GPU, recorded as one (limit min 1, unit GPUs): a drain reason then reads
    # "0 GPUs < 1 GPUs", where an expected ">= 1" read "0 != >= 1".
    seen = 0 if unavailable else n_gpus
    if seen > 0:
        return Verdict("", what, None, PASS, measured=seen, unit="GPUs", limit={"min": 1})
    if unavailable:
        return Verdict("", what, None, FAIL, measured=0, unit="GPUs", limit={"min": 1}, problem=problems.NVML_UNREADABLE,
                       details={"problems": [GPUS_VISIBLE.said("unavailable", why=unavailable)]},
                       hint=GPUS_VISIBLE.said("dry_run"))
    return Verdict("", what, None, FAIL, measured=0, unit="GPUs", limit={"min": 1},
                   details={"problems": [GPUS_VISIBLE.said("none")]})


@check("gpu_count", words=GPU_COUNT, limits=(PROFILES,))
def gpu_count(thresholds, *, n_gpus: int, profile: str | None, simulated: bool) -> Verdict:
    what = GPU_COUNT.judged()
    if simulated:
        return skip(what, None, GPU_COUNT.said("simulation"))
    p, skipped = _profile_or_skip(thresholds, GPU_COUNT, profile, what, None)
    if skipped:
        return skipped
    return expect(what, None, n_gpus, p.gpu_count, n_gpus == p.gpu_count,
                  GPU_COUNT.said("differs", n=n_gpus, profile=p.name, expected=p.gpu_count), p.source, p.yaml_path)


@check("gpu_model", words=GPU_MODEL, limits=(PROFILES,))
def gpu_model(thresholds, *, gpu: int, name: str | None, profile: str | None, simulated: bool) -> Verdict:
    what, where = GPU_MODEL.judged(), _gpu(gpu)
    if simulated:
        return skip(what, where, GPU_MODEL.said("simulation"))
    p, skipped = _profile_or_skip(thresholds, GPU_MODEL, profile, what, where)
    if skipped:
        return skipped
    if name is None:
        return skip(what, where, GPU_MODEL.said("no_name"))
    return expect(what, where, name, p.gpu_model, name == p.gpu_model,
                  GPU_MODEL.said("differs", gpu=gpu, name=name, profile=p.name, expected=p.gpu_model),
                  p.source, p.yaml_path)


@check("fabric", words=FABRIC, limits=(PROFILES,))
def fabric(thresholds, *, fabric: str, groups: list, profile: str | None, simulated: bool) -> Verdict:
    what = FABRIC.judged()
    if simulated:
        return skip(what, None, FABRIC.said("simulation"))
    p, skipped = _profile_or_skip(thresholds, FABRIC, profile, what, None)
    if skipped:
        return skipped
    return expect(what, None, fabric, p.fabric, fabric == p.fabric,
                  FABRIC.said("differs", fabric=fabric, groups=groups, profile=p.name, expected=p.fabric),
                  p.source, p.yaml_path)


@check("pcie_width", words=PCIE_WIDTH, limits=(PROFILES,))
def pcie_width(thresholds, *, gpu: int, bus_id: str | None, width: int | None, width_max: int | None,
               simulated: bool) -> Verdict:
    what, where = PCIE_WIDTH.judged(), _gpu(gpu)
    if simulated:
        return skip(what, where, PCIE_WIDTH.said("simulation"))
    if width is None or width_max is None:
        return skip(what, where, PCIE_WIDTH.said("no_pcie"))
    return expect(what, where, width, width_max, width == width_max,
                  PCIE_WIDTH.said("narrow", gpu=gpu, bus_id=bus_id, width=width, width_max=width_max), unit="lanes")


@check("pcie_generation", words=PCIE_GENERATION, limits=(PROFILES,))
def pcie_generation(thresholds, *, gpu: int, gen: int | None, gen_max: int | None, profile: str | None,
                    simulated: bool) -> Verdict:
    """The link can run at the profile's generation. It drops at idle to save power, so a lower
    current generation at idle is a skip with its value, never a pass."""
    what, where = PCIE_GENERATION.judged(), _gpu(gpu)
    if simulated:
        return skip(what, where, PCIE_GENERATION.said("simulation"))
    p, skipped = _profile_or_skip(thresholds, PCIE_GENERATION, profile, what, where)
    if skipped:
        return skipped
    if gen_max is None:
        return skip(what, where, PCIE_GENERATION.said("no_pcie"))
    if gen_max < p.pcie_gen:
        return expect(what, where, gen_max, p.pcie_gen, False,
                      PCIE_GENERATION.said("short", gpu=gpu, gen_max=gen_max, profile=p.name, expected=p.pcie_gen),
                      p.source, p.yaml_path)
    if gen != gen_max:
        return skip(what, where, PCIE_GENERATION.said("idle", gen=gen, gen_max=gen_max), measured=gen)
    return expect(what, where, gen, p.pcie_gen, True, "", p.source, p.yaml_path)


def _unsupported(words: Words, what: str, where: str, reading) -> Verdict | None:
    if isinstance(reading, dict) and "unsupported" in reading:
        return skip(what, where, words.said("unreadable", why=reading["unsupported"]))
    return None


@check("ecc_uncorrected", words=ECC_UNCORRECTED)
def ecc_uncorrected(thresholds, *, gpu: int, count, simulated: bool) -> Verdict:
    """No volatile uncorrectable ECC error since the driver loaded."""
    what, where = ECC_UNCORRECTED.judged(), _gpu(gpu)
    if simulated:
        return skip(what, where, ECC_UNCORRECTED.said("simulation"))
    return _unsupported(ECC_UNCORRECTED, what, where, count) or expect(
        what, where, count, 0, count == 0, ECC_UNCORRECTED.said("errors", gpu=gpu, count=count))


@check("row_remapping", words=ROW_REMAPPING)
def row_remapping(thresholds, *, gpu: int, rows, simulated: bool) -> Verdict:
    """No row remap pending (needs a GPU reset) or failed (the GPU needs replacing)."""
    what, where = ROW_REMAPPING.judged(), _gpu(gpu)
    if simulated:
        return skip(what, where, ROW_REMAPPING.said("simulation"))
    unsupported = _unsupported(ROW_REMAPPING, what, where, rows)
    if unsupported:
        return unsupported
    if rows["failure"]:
        return expect(what, where, rows, ROW_REMAPPING.said("no_failure"), False,
                      ROW_REMAPPING.said("failed", gpu=gpu, rows=rows))
    return expect(what, where, rows, ROW_REMAPPING.said("none_pending"), not rows["pending"],
                  ROW_REMAPPING.said("pending", gpu=gpu, rows=rows))


@check("persistence_mode", words=PERSISTENCE)
def persistence_mode(thresholds, *, gpu: int, mode, simulated: bool) -> Verdict:
    what, where = PERSISTENCE.judged(), _gpu(gpu)
    if simulated:
        return skip(what, where, PERSISTENCE.said("simulation"))
    return _unsupported(PERSISTENCE, what, where, mode) or expect(
        what, where, mode, 1, mode == 1, PERSISTENCE.said("off", gpu=gpu))


@check("fabric_manager", words=FABRIC_MANAGER)
def fabric_manager(thresholds, *, gpu: int, topology_fabric: str, state, simulated: bool) -> Verdict:
    """On NVSwitch nodes the fabric must be fully set up, or CUDA fails with error 802."""
    what, where = FABRIC_MANAGER.judged(), _gpu(gpu)
    if simulated:
        return skip(what, where, FABRIC_MANAGER.said("simulation"))
    if topology_fabric != "nvswitch":
        return skip(what, where, FABRIC_MANAGER.said("no_switch", fabric=topology_fabric))
    unsupported = _unsupported(FABRIC_MANAGER, what, where, state)
    if unsupported:
        return unsupported
    ok = state["completed"] and state["status_ok"]
    return expect(what, where, state["text"], FABRIC_MANAGER.said("expected"), ok,
                  FABRIC_MANAGER.said("state", gpu=gpu, state=state["text"]))


@check("no_foreign_processes", words=FOREIGN)
def no_foreign_processes(thresholds, *, gpu: int, processes, simulated: bool) -> Verdict:
    """Nothing else runs on the GPUs: measurements would be invalid."""
    what, where = FOREIGN.judged(), _gpu(gpu)
    if simulated:
        return skip(what, where, FOREIGN.said("simulation"))
    unsupported = _unsupported(FOREIGN, what, where, processes)
    if unsupported:
        return unsupported
    return expect(what, where, processes, [], not processes, FOREIGN.said("in_use", gpu=gpu, processes=processes))
