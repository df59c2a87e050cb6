"""The node's inventory and idle health: GPUs present, as expected, healthy and idle.

Each check is read from the live node; in simulation every one of them skips, so a dry run
never reads as an accepted node.
"""

from __future__ import annotations

import pytest

from wirecheck import checks
from wirecheck.node.nvml import Unsupported

pytestmark = [pytest.mark.stage("inventory", order=1), pytest.mark.levels("quick", "acceptance", "burn-in")]


def _reading(value):
    """An NVML reading as plain data for the check (an unreadable one says why)."""
    if isinstance(value, Unsupported):
        return {"unsupported": value.reason}
    return value


@pytest.mark.work()
def test_gpus_visible(node, record):
    """NVML answers and sees at least one GPU."""
    verdict = record(checks.inventory.gpus_visible(
        node.thresholds, n_gpus=node.topology.n_gpus if node.topology else 0, unavailable=node.unavailable,
        simulated=node.simulated))
    assert verdict.ok, verdict.message


@pytest.mark.work()
def test_gpu_count(node, topology, record):
    verdict = record(checks.inventory.gpu_count(
        node.thresholds, n_gpus=topology.n_gpus, profile=node.profile_name, simulated=node.simulated))
    assert verdict.ok, verdict.message


@pytest.mark.work()
def test_gpu_model(node, topology, gpu, record):
    verdict = record(checks.inventory.gpu_model(
        node.thresholds, gpu=gpu, name=topology.gpu(gpu).name, profile=node.profile_name, simulated=node.simulated))
    assert verdict.ok, verdict.message


@pytest.mark.work()
def test_fabric_matches_profile(node, topology, record):
    verdict = record(checks.inventory.fabric(
        node.thresholds, fabric=topology.fabric, groups=[list(g) for g in topology.index_groups],
        profile=node.profile_name, simulated=node.simulated))
    assert verdict.ok, verdict.message


@pytest.mark.work()
def test_pcie_width(node, topology, gpu, record):
    """The PCIe link runs at its full width (a narrower link is a seating or riser fault)."""
    g = topology.gpu(gpu)
    verdict = record(checks.inventory.pcie_width(
        node.thresholds, gpu=gpu, bus_id=g.bus_id, width=g.pcie_width, width_max=g.pcie_width_max,
        simulated=node.simulated))
    assert verdict.ok, verdict.message


@pytest.mark.work()
def test_pcie_generation(node, topology, gpu, record):
    """The link can run at the profile's PCIe generation (a lower one at idle is a skip, never a pass)."""
    g = topology.gpu(gpu)
    verdict = record(checks.inventory.pcie_generation(
        node.thresholds, gpu=gpu, gen=g.pcie_gen, gen_max=g.pcie_gen_max, profile=node.profile_name,
        simulated=node.simulated))
    assert verdict.ok, verdict.message


@pytest.mark.work()
def test_ecc_uncorrected(node, gpu_health, gpu, record):
    """No volatile uncorrectable ECC error since the driver loaded."""
    verdict = record(checks.inventory.ecc_uncorrected(
        node.thresholds, gpu=gpu, count=_reading(gpu_health[gpu].volatile_uncorrected_ecc), simulated=node.simulated))
    assert verdict.ok, verdict.message


@pytest.mark.work()
def test_row_remapping(node, gpu_health, gpu, record):
    """No row remap pending (needs a GPU reset) or failed (the GPU needs replacing)."""
    rows = gpu_health[gpu].remapped_rows
    verdict = record(checks.inventory.row_remapping(
        node.thresholds, gpu=gpu, rows=_reading(rows if isinstance(rows, Unsupported) else rows._asdict()),
        simulated=node.simulated))
    assert verdict.ok, verdict.message


@pytest.mark.work()
def test_persistence_mode(node, gpu_health, gpu, record):
    verdict = record(checks.inventory.persistence_mode(
        node.thresholds, gpu=gpu, mode=_reading(gpu_health[gpu].persistence_mode), simulated=node.simulated))
    assert verdict.ok, verdict.message


@pytest.mark.work()
def test_fabric_manager(node, gpu_health, topology, gpu, record):
    """On NVSwitch nodes the fabric must be fully set up, or CUDA fails with error 802."""
    state = gpu_health[gpu].fabric_state
    if not isinstance(state, Unsupported):
        state = {"completed": state.completed, "status_ok": state.status_ok, "text": str(state)}
    verdict = record(checks.inventory.fabric_manager(
        node.thresholds, gpu=gpu, topology_fabric=topology.fabric, state=_reading(state), simulated=node.simulated))
    assert verdict.ok, verdict.message


@pytest.mark.work()
def test_no_foreign_processes(node, gpu_health, gpu, record):
    """Nothing else runs on the GPUs: measurements would be invalid."""
    procs = gpu_health[gpu].compute_processes
    if not isinstance(procs, Unsupported):
        procs = [list(p) for p in procs]
    verdict = record(checks.inventory.no_foreign_processes(
        node.thresholds, gpu=gpu, processes=_reading(procs), simulated=node.simulated))
    assert verdict.ok, verdict.message
