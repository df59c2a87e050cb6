"""The node's inventory and health: GPUs present, as expected, healthy and idle.

What needs live NVML skips in simulation with its reason; what a recorded topology can
answer is checked against it.
"""

from __future__ import annotations

import pytest

from wirecheck.nvml import Unsupported


def test_gpus_visible(node, record):
    """NVML answers and sees at least one GPU."""
    if node.topology is None:
        record("inventory", "GPUs visible", value=0, verdict="fail", details={"reason": node.unavailable})
        pytest.fail(f"no GPU visible: {node.unavailable}\nFor a dry run on a machine without GPUs: "
                    "pytest --simulate (or --simulate NAME|FILE, see `wirecheck topo --help`)", pytrace=False)
    n = node.topology.n_gpus
    record("inventory", "GPUs visible", value=n, verdict="pass" if n else "fail")
    assert n > 0, f"NVML sees no GPU ({node.topology.source})"


def test_gpu_count(topology, profile, record):
    ok = topology.n_gpus == profile.gpu_count
    record("inventory", "GPU count", value=topology.n_gpus, limit={"expected": profile.gpu_count}, verdict="pass" if ok else "fail")
    assert ok, f"{topology.n_gpus} GPUs visible, profile {profile.name} expects {profile.gpu_count} ({topology.source})"


def test_gpu_model(topology, profile, gpu, record):
    name = topology.gpus[gpu].name
    if name is None:
        pytest.skip(f"{topology.source} does not record GPU models (a `topo -m` text); a `wirecheck topo --save` snapshot does")
    ok = name == profile.gpu_model
    record("inventory", f"GPU{gpu} model", value=name, limit={"expected": profile.gpu_model}, verdict="pass" if ok else "fail")
    assert ok, f"GPU{gpu} is {name!r}, profile {profile.name} expects {profile.gpu_model!r}"


def test_fabric_matches_profile(topology, profile, record):
    ok = topology.fabric == profile.fabric
    record("inventory", "fabric", value=topology.fabric, limit={"expected": profile.fabric}, verdict="pass" if ok else "fail")
    assert ok, (f"detected fabric {topology.fabric} (groups {list(topology.groups)}), profile {profile.name} expects "
                f"{profile.fabric}: check NVLink state with `wirecheck topo`")


def test_pcie_width(topology, gpu, record):
    """The PCIe link runs at its full width (a narrower link is a seating or riser fault)."""
    g = topology.gpus[gpu]
    if g.pcie_width is None or g.pcie_width_max is None:
        pytest.skip(f"{topology.source} has no PCIe link data for GPU{gpu}")
    ok = g.pcie_width == g.pcie_width_max
    record("inventory", f"GPU{gpu} PCIe width", value=g.pcie_width, limit={"expected": g.pcie_width_max}, verdict="pass" if ok else "fail")
    assert ok, f"GPU{gpu} ({g.bus_id}) PCIe link x{g.pcie_width}, capable of x{g.pcie_width_max}: reseat the card or check the riser"


def test_pcie_generation(topology, profile, gpu, record):
    """PCIe generation as the profile expects. It drops at idle to save power, so a lower
    generation at idle is reported as a skip with its value, never as a pass."""
    g = topology.gpus[gpu]
    if g.pcie_gen_max is None:
        pytest.skip(f"{topology.source} has no PCIe link data for GPU{gpu}")
    ok_max = g.pcie_gen_max >= profile.pcie_gen
    record("inventory", f"GPU{gpu} PCIe gen", value={"current": g.pcie_gen, "max": g.pcie_gen_max},
           limit={"expected": profile.pcie_gen}, verdict="pass" if ok_max and g.pcie_gen == g.pcie_gen_max else "info")
    assert ok_max, f"GPU{gpu} PCIe link capable of Gen{g.pcie_gen_max} only, profile {profile.name} expects Gen{profile.pcie_gen}"
    if g.pcie_gen != g.pcie_gen_max:
        pytest.skip(f"GPU{gpu} at Gen{g.pcie_gen} of Gen{g.pcie_gen_max} while idle (it drops at idle); re-check under load")


def _value(value, what: str, gpu: int):
    if isinstance(value, Unsupported):
        pytest.skip(f"GPU{gpu} {what}: {value.reason}")
    return value


def test_ecc_uncorrected(gpu_health, gpu, record):
    """No volatile uncorrectable ECC error since the driver loaded."""
    count = _value(gpu_health[gpu].volatile_uncorrected_ecc, "volatile uncorrected ECC", gpu)
    record("health", f"GPU{gpu} volatile uncorrected ECC", value=count, limit={"max": 0}, verdict="pass" if count == 0 else "fail")
    assert count == 0, f"GPU{gpu}: {count} volatile uncorrectable ECC errors: drain the node and reset the GPU"


def test_row_remapping(gpu_health, gpu, record):
    """No row remap pending (needs a GPU reset) or failed (the GPU needs replacing)."""
    rows = _value(gpu_health[gpu].remapped_rows, "row remapping", gpu)
    record("health", f"GPU{gpu} remapped rows", value=rows, verdict="pass" if not (rows.pending or rows.failure) else "fail")
    assert not rows.failure, f"GPU{gpu}: row remapping FAILED ({rows}): the GPU needs replacing"
    assert not rows.pending, f"GPU{gpu}: row remap pending ({rows}): reset the GPU before use"


def test_persistence_mode(gpu_health, gpu, record):
    mode = _value(gpu_health[gpu].persistence_mode, "persistence mode", gpu)
    record("health", f"GPU{gpu} persistence mode", value=mode, limit={"expected": 1}, verdict="pass" if mode == 1 else "fail")
    assert mode == 1, f"GPU{gpu}: persistence mode off: enable it (nvidia-persistenced, or nvidia-smi -pm 1)"


def test_fabric_manager(gpu_health, topology, gpu, record):
    """On NVSwitch nodes the fabric must be fully set up, or CUDA fails with error 802."""
    if topology.fabric != "nvswitch":
        pytest.skip(f"fabric is {topology.fabric}: no fabric manager involved")
    fabric = _value(gpu_health[gpu].fabric_state, "fabric state", gpu)
    ok = fabric.completed and fabric.status_ok
    record("health", f"GPU{gpu} fabric state", value=str(fabric), verdict="pass" if ok else "fail")
    assert ok, f"GPU{gpu}: NVSwitch fabric {fabric}: check nvidia-fabricmanager (systemctl status nvidia-fabricmanager)"


def test_no_foreign_processes(gpu_health, gpu, record):
    """Nothing else runs on the GPUs: measurements would be invalid."""
    procs = _value(gpu_health[gpu].compute_processes, "compute processes", gpu)
    record("health", f"GPU{gpu} foreign processes", value=[list(p) for p in procs], verdict="pass" if not procs else "fail")
    assert not procs, f"GPU{gpu} is in use by {procs}: results would be invalid; stop them or pick another node"
