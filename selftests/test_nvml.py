"""wirecheck.node.nvml against a fake pynvml: topology rules, error messages, health markers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from wirecheck.node import nvml
from wirecheck.node.nvml import GpuLost, NvmlUnavailable, Unsupported
from wirecheck.node.topology import BRIDGED, NVSWITCH, PCIE

try:  # selftests/ may or may not be a package
    from selftests import fake_pynvml as fake
except ModuleNotFoundError:
    import fake_pynvml as fake

REFERENCE = Path(__file__).resolve().parent.parent / "fixtures" / "reference" / "h200-sxm-2" / "nvml.json"


@pytest.fixture
def install(monkeypatch):
    """Put a fake pynvml built from a scenario where `import pynvml` finds it."""

    def _install(scenario: fake.Scenario):
        module = fake.build(scenario)
        monkeypatch.setitem(sys.modules, "pynvml", module)
        return module

    return _install


def _nv_values(topo) -> set[int]:
    return {topo.nv(i, j) for i in range(topo.n_gpus) for j in range(topo.n_gpus) if i != j}


# -- topology ---------------------------------------------------------------------------


def test_nvswitch_with_one_link_down_uses_min_rule(install):
    module = install(fake.nvswitch(8, down={3: [5]}))
    topo = nvml.read_topology()
    assert topo.fabric == NVSWITCH and topo.declared_fabric == NVSWITCH
    assert topo.groups == ((0, 1, 2, 3, 4, 5, 6, 7),)
    assert topo.gpus[3].active_links == 17
    assert [g.active_links for g in topo.gpus if g.index != 3] == [18] * 7
    assert all(topo.nv(3, j) == 17 for j in range(8) if j != 3)
    assert all(topo.nv(i, j) == 18 for i in range(8) for j in range(8) if i != j and 3 not in (i, j))
    assert topo.cell(0, 3) == "NV17" and topo.cell(0, 1) == "NV18"
    assert topo.gpus[3].nvlinks[5].active is False
    assert module.init_count() == 0  # nvmlShutdown ran


def test_nvswitch_link_details(install):
    install(fake.nvswitch(2))
    topo = nvml.read_topology()
    link = topo.gpus[0].nvlinks[0]
    assert (link.remote_type, link.remote_bus_id, link.version, link.speed_mbps) == ("switch", fake.SWITCH_BUS, 6, 26562)
    gpu = topo.gpus[1]
    assert (gpu.bus_id, gpu.name, gpu.memory_bytes) == (fake.bus(1), "NVIDIA H100 80GB HBM3", 80 * 2**30)
    assert (gpu.pcie_gen, gpu.pcie_width, gpu.pcie_gen_max, gpu.pcie_width_max) == (5, 16, 5, 16)
    assert (gpu.cpu_affinity, gpu.numa_affinity) == ("0-31", "0")
    assert (topo.driver_version, topo.cuda_driver_version, topo.source) == ("580.159.04", "13.0", "nvml")
    assert topo.pcie_paths[0][1] == "SYS" and topo.pcie_paths[0][0] is None


def test_link_count_falls_back_to_probing_links(install):
    scenario = fake.nvswitch(2)
    for g in scenario.gpus:
        g.link_count_field = False
    module = install(scenario)
    topo = nvml.read_topology()
    assert topo.nv(0, 1) == 18
    probes = [args[1] for name, args in module.calls if name == "nvmlDeviceGetNvLinkState" and args[0].index == 0]
    assert 18 in probes and 19 not in probes  # stopped at the first InvalidArgument


def test_nvl_quads_are_bridged_groups(install):
    install(fake.nvl_quads(8))
    topo = nvml.read_topology()
    assert topo.fabric == BRIDGED and topo.declared_fabric == BRIDGED
    assert topo.groups == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert topo.nv(0, 1) == 6 and topo.nv(5, 7) == 6 and topo.nv(0, 4) == 0
    assert topo.cell(0, 4) == "SYS"
    assert {link.remote_type for link in topo.gpus[0].nvlinks} == {"gpu"}


def test_pcie_only_node(install):
    install(fake.pcie_only(4))
    topo = nvml.read_topology()
    assert topo.fabric == PCIE and topo.declared_fabric == PCIE
    assert topo.groups == ((0,), (1,), (2,), (3,))
    assert all(g.nvlinks == () for g in topo.gpus)


def test_pcie_only_node_without_link_count_field(install):
    install(fake.pcie_only(2, link_count_field=False))
    topo = nvml.read_topology()
    assert topo.fabric == PCIE and topo.gpus[0].nvlinks == ()


@pytest.mark.parametrize("how", ["missing_in_binding", "function_not_found"])
def test_driver_without_remote_device_type_falls_back_to_bus_id(install, how):
    scenario = fake.nvswitch(2)
    name = "nvmlDeviceGetNvLinkRemoteDeviceType"
    (scenario.missing if how == "missing_in_binding" else scenario.function_not_found).add(name)
    install(scenario)
    topo = nvml.read_topology()
    assert topo.declared_fabric == NVSWITCH and topo.nv(0, 1) == 18


def test_fallback_counts_links_to_known_gpus_as_direct(install):
    scenario = fake.nvl_quads(4)
    scenario.missing.add("nvmlDeviceGetNvLinkRemoteDeviceType")
    install(scenario)
    topo = nvml.read_topology()
    assert topo.declared_fabric == BRIDGED and topo.nv(0, 3) == 6


@pytest.mark.parametrize("remote_type", [None, 2], ids=["as-recorded", "with-remote-type"])
def test_real_h200_reading_replayed(install, remote_type):
    install(fake.from_reference(REFERENCE, remote_type=remote_type))
    topo = nvml.read_topology()
    assert topo.fabric == NVSWITCH
    assert topo.matrix() == [["X", "NV18"], ["NV18", "X"]]
    assert topo.gpus[0].bus_id == "00000000:00:06.0" and topo.gpus[0].name == "NVIDIA H200"
    assert topo.pcie_paths[0][1] == "PHB"  # the VM's virtual root bus; NVLink wins in the cell
    assert topo.driver_version == "580.159.04"


# -- errors -----------------------------------------------------------------------------


def test_missing_binding_says_install_nvidia_ml_py(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    with pytest.raises(NvmlUnavailable, match="nvidia-ml-py"):
        nvml.read_topology()


@pytest.mark.parametrize("kind", ["LibraryNotFound", "DriverNotLoaded"])
def test_no_driver_points_to_simulate(install, kind):
    install(fake.Scenario(gpus=[], init_error=kind))
    with pytest.raises(NvmlUnavailable, match="no NVIDIA driver on this machine; for a dry run use --simulate"):
        nvml.read_topology()


def test_zero_gpus(install):
    module = install(fake.Scenario(gpus=[]))
    with pytest.raises(NvmlUnavailable, match="0 GPUs"):
        nvml.read_health()
    assert module.init_count() == 0


def test_lost_gpu_is_named_by_index(install):
    scenario = fake.nvswitch(4)
    scenario.gpus[2].lost = True
    module = install(scenario)
    with pytest.raises(GpuLost, match="GPU 2 is lost") as info:
        nvml.read_topology()
    assert info.value.index == 2 and isinstance(info.value, NvmlUnavailable)
    assert module.init_count() == 0  # shutdown ran despite the error


def test_unexpected_nvml_error_names_gpu_and_call(install):
    module = install(fake.nvswitch(2))

    def broken(h):
        raise fake.error("Unknown")

    module.nvmlDeviceGetPcieReplayCounter = broken
    with pytest.raises(NvmlUnavailable, match="GPU 0: nvmlDeviceGetPcieReplayCounter failed"):
        nvml.read_health()


# -- health, versions, p2p --------------------------------------------------------------


def test_health_readings(install):
    scenario = fake.nvswitch(2)
    scenario.gpus[1].processes = [(4242, "python", 1 << 30), (4243, None, None)]
    scenario.gpus[1].links[0].counters = (1, 2, 3, 4, 5)
    scenario.gpus[0].remapped = (0, 0, 1, 0)
    install(scenario)
    health = nvml.read_health()
    assert [h.index for h in health] == [0, 1]
    h0, h1 = health
    assert h0.persistence_mode == 1 and h0.ecc_mode == (1, 1) and h0.volatile_uncorrected_ecc == 0
    assert h0.remapped_rows.pending == 1 and h0.remapped_rows.failure == 0
    assert h0.fabric_state.completed and h0.fabric_state.status_ok and str(h0.fabric_state) == "COMPLETED, status SUCCESS"
    assert h0.mig_mode == (0, 0) and h0.virtualization_mode == 0
    assert h0.pcie_replay_counter == 0 and h0.clocks_event_reasons == 1
    assert h1.compute_processes == ((4242, "python", 1 << 30), (4243, None, None))
    assert len(h1.nvlink_counters) == 18
    c = h1.nvlink_counters[0]
    assert (c.link, c.replay, c.recovery, c.crc_flit, c.crc_data) == (0, 1, 2, 3, 4)


def test_not_supported_is_a_marker_with_reason_never_a_value(install):
    scenario = fake.pcie_only(1)
    scenario.gpus[0].fabric = None
    scenario.gpus[0].not_supported = {"nvmlDeviceGetRemappedRows", "nvmlDeviceGetEccMode", "nvmlDeviceGetMigMode"}
    install(scenario)
    (health,) = nvml.read_health()
    for value in (health.remapped_rows, health.ecc_mode, health.mig_mode, health.fabric_state):
        assert isinstance(value, Unsupported) and not nvml.is_supported(value)
        assert "NotSupported on this GPU/driver" in value.reason
    assert health.nvlink_counters == ()


def test_fabric_manager_still_working(install):
    scenario = fake.nvswitch(1)
    scenario.gpus[0].fabric = (2, 0)
    install(scenario)
    (health,) = nvml.read_health()
    assert not health.fabric_state.completed and str(health.fabric_state) == "IN_PROGRESS, status SUCCESS"


def test_fabric_state_not_supported_on_a_bridge_is_unsupported(install):
    install(fake.nvl_quads(4))
    health = nvml.read_health()
    assert isinstance(health[0].fabric_state, Unsupported)
    assert "NOT_SUPPORTED" in health[0].fabric_state.reason


def test_old_binding_without_fabric_v_or_event_reasons(install):
    scenario = fake.nvswitch(1)
    scenario.missing |= {"nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetCurrentClocksEventReasons"}
    install(scenario)
    (health,) = nvml.read_health()
    assert health.fabric_state == nvml.FabricState(3, 0)
    assert health.clocks_event_reasons == 1


def test_versions(install):
    install(fake.Scenario(gpus=[], cuda=12040))
    assert nvml.read_versions() == {"driver": "580.159.04", "cuda_driver": "12.4", "nvml": "13.580.159.04"}


def test_p2p_status_uses_plain_int_indices(install):
    scenario = fake.nvswitch(2)
    scenario.p2p[(0, 1, 4)] = 5  # PCI P2P NOT_SUPPORTED, as in the H200 VM
    module = install(scenario)
    assert nvml.p2p_status(0, 1) == {"read": "OK", "write": "OK", "nvlink": "OK", "atomics": "OK", "pci": "NOT_SUPPORTED"}
    indices = [args[2] for name, args in module.calls if name == "nvmlDeviceGetP2PStatus"]
    assert indices == [0, 1, 2, 3, 4] and all(type(i) is int for i in indices)
    assert module.init_count() == 0


def test_p2p_status_rejects_unknown_gpu(install):
    install(fake.nvswitch(2))
    with pytest.raises(ValueError, match="GPU index 5 is out of range; NVML sees GPUs 0..1"):
        nvml.p2p_status(0, 5)


def test_library_imports_without_pynvml_or_pytest():
    # A fresh interpreter: the modules must import with pynvml absent and never pull in pytest.
    code = (
        "import sys; sys.modules['pynvml'] = None; "
        "import wirecheck.node.nvml, wirecheck.node.topo_text, wirecheck.node.placement; "
        "assert 'pytest' not in sys.modules, 'the library imported pytest'"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
