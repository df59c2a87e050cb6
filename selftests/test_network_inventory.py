"""The network inventory: NIC ports from a sysfs tree, GPU-to-NIC paths from recorded `topo -m`
texts, the line rate a job can use, and the network checks passing and failing on them.

The sysfs trees are built here with the files and links the kernel writes (a fake root), so every
case is one the kernel can produce: a port down, a port trained down, RoCE next to Ethernet, virtual
interfaces that are not NICs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from e2e import PROJECT, make_project, run_suite, thresholds_with
from wirecheck import checks
from wirecheck.node import network
from wirecheck.thresholds.file import load_thresholds
from wirecheck.thresholds.yaml_reader import ThresholdsError

TOPOLOGIES = PROJECT / "fixtures" / "pytest_wirecheck" / "topologies"


@pytest.fixture(scope="module")
def shipped():
    return load_thresholds(PROJECT / "thresholds.yaml")


def _ib_port(root: Path, dev: str, port: int, state: str, phys: str, rate: str, layer: str = "InfiniBand",
             pci: str = "0000:3b:00.0", netdev: str | None = None) -> None:
    pci_dir = root / "sys/devices/pci0000:00" / pci
    (pci_dir / "net").mkdir(parents=True, exist_ok=True)
    if netdev:
        (pci_dir / "net" / netdev).mkdir(exist_ok=True)
    dev_dir = root / "sys/class/infiniband" / dev
    (dev_dir / "ports" / str(port)).mkdir(parents=True, exist_ok=True)
    if not (dev_dir / "device").exists():
        os.symlink(pci_dir, dev_dir / "device")
    for name, text in (("state", state), ("phys_state", phys), ("rate", rate), ("link_layer", layer)):
        (dev_dir / "ports" / str(port) / name).write_text(text + "\n")


def _netdev(root: Path, name: str, *, physical: bool, type_: str = "1", speed: str | None = "100000",
            operstate: str = "up") -> None:
    d = root / "sys/class/net" / name
    d.mkdir(parents=True)
    if physical:
        target = root / "sys/devices/pci0000:00" / f"0000:{len(name):02x}:00.0"
        target.mkdir(parents=True, exist_ok=True)
        os.symlink(target, d / "device")
    (d / "type").write_text(type_ + "\n")
    (d / "operstate").write_text(operstate + "\n")
    if speed is not None:
        (d / "speed").write_text(speed + "\n")


@pytest.fixture
def node_root(tmp_path):
    """Four NDR ports (one down), one RoCE port with its netdev, an Ethernet NIC, and interfaces that
    are not NICs (loopback, veth, IPoIB)."""
    for k in range(4):
        up = k != 3
        _ib_port(tmp_path, f"mlx5_{k}", 1, "4: ACTIVE" if up else "1: DOWN", "5: LinkUp" if up else "2: Polling",
                 "400 Gb/sec (4X NDR)", pci=f"0000:{0x1a + k:02x}:00.0")
    _ib_port(tmp_path, "mlx5_4", 1, "4: ACTIVE", "5: LinkUp", "200 Gb/sec (4X HDR)", layer="Ethernet",
             pci="0000:40:00.0", netdev="ens4np0")
    _netdev(tmp_path, "ens4np0", physical=True)  # the RoCE port's own netdev: counted once, as RoCE
    _netdev(tmp_path, "eno1", physical=True, speed="25000")
    _netdev(tmp_path, "lo", physical=False, type_="772")
    _netdev(tmp_path, "veth12", physical=False)
    _netdev(tmp_path, "ib0", physical=True, type_="32")
    return tmp_path


def test_ports_from_sysfs(node_root):
    ports = {p.name: p for p in network.read_ports(node_root)}
    assert sorted(ports) == ["eno1", "mlx5_0/1", "mlx5_1/1", "mlx5_2/1", "mlx5_3/1", "mlx5_4/1"]
    assert ports["mlx5_0/1"].kind == "infiniband" and ports["mlx5_0/1"].up
    assert ports["mlx5_0/1"].rate_bytes_per_s == 50e9 and ports["mlx5_0/1"].device_id == "0000:1a:00.0"
    assert not ports["mlx5_3/1"].up and ports["mlx5_3/1"].state == "DOWN" and ports["mlx5_3/1"].phys_state == "Polling"
    assert ports["mlx5_4/1"].kind == "roce" and ports["mlx5_4/1"].rate_bytes_per_s == 25e9
    assert ports["eno1"].kind == "ethernet" and ports["eno1"].rate_bytes_per_s == 25000e6 / 8


def test_no_nic_at_all(tmp_path):
    assert network.read_ports(tmp_path) == []
    assert network.line_rate([], 8) == (None, "no NIC found")


def test_a_port_down_fails_naming_it(node_root, shipped):
    ports = network.ports_as_data(network.read_ports(node_root))
    v = checks.network.nic_ports_up(shipped, ports=ports)
    assert v.outcome == "fail" and "mlx5_3/1" in v.message and "DOWN" in v.message and "Polling" in v.message
    assert "mlx5_0/1" not in v.message
    healthy = [p for p in ports if p["name"] != "mlx5_3/1"]
    assert checks.network.nic_ports_up(shipped, ports=healthy).outcome == "pass"


def test_a_port_trained_down_fails_naming_it(node_root, shipped):
    ports = network.ports_as_data(network.read_ports(node_root))
    v = checks.network.nic_rate(shipped, ports=ports, profile=None)
    assert v.outcome == "fail" and "mlx5_4/1" in v.message and "200 Gb/s" in v.message and "400 Gb/s" in v.message
    same = [p for p in ports if p["name"] != "mlx5_4/1"]
    assert checks.network.nic_rate(shipped, ports=same, profile=None).outcome == "pass"


def _with_profile(tmp_path, **fields):
    data = yaml.safe_load((PROJECT / "thresholds.yaml").read_text())
    data["profiles"]["h100-sxm-8"].update(fields)
    path = tmp_path / "th.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_thresholds(path)


def test_count_and_rate_against_the_profile(node_root, tmp_path, shipped):
    ports = [p for p in network.ports_as_data(network.read_ports(node_root)) if p["name"] != "mlx5_4/1"]
    assert checks.network.nic_count(shipped, ports=ports, profile="h100-sxm-8").outcome == "skip"
    th = _with_profile(tmp_path, nic_ports=8, nic_rate="50 GB/s")
    count = checks.network.nic_count(th, ports=ports, profile="h100-sxm-8")
    assert count.outcome == "fail" and "4 InfiniBand/RoCE port(s) found" in count.message and "expects 8" in count.message
    assert checks.network.nic_rate(th, ports=ports, profile="h100-sxm-8").outcome == "pass"
    th = _with_profile(tmp_path, nic_ports=4, nic_rate="25 GB/s")
    assert checks.network.nic_count(th, ports=ports, profile="h100-sxm-8").outcome == "pass"
    rate = checks.network.nic_rate(th, ports=ports, profile="h100-sxm-8")
    assert rate.outcome == "fail" and "expects 200 Gb/s" in rate.message


def test_no_rdma_port_skips_with_its_reason(shipped):
    eth = [{"name": "eth0", "kind": "ethernet", "up": True, "rate_bytes_per_s": None}]
    for v in (checks.network.nic_ports_up(shipped, ports=eth), checks.network.nic_rate(shipped, ports=eth, profile=None)):
        assert v.outcome == "skip" and "no InfiniBand/RoCE port" in v.message and "Socket" in v.message


def test_line_rate_one_nic_per_gpu(node_root):
    ports = network.ports_as_data(network.read_ports(node_root))
    rdma_up = 4  # three NDR + one RoCE port up; the slowest (RoCE, 200 Gb/s) sets the rate
    rate, basis = network.line_rate(ports, 8)
    assert rate == rdma_up * 25e9 and "4 of 4 active RDMA port(s)" in basis
    one, _ = network.line_rate(ports, 1)
    assert one == 25e9, "one GPU drives one NIC"
    ndr = [p for p in ports if p["name"] in ("mlx5_0/1", "mlx5_1/1", "mlx5_2/1")]
    assert network.line_rate(ndr, 2)[0] == 2 * 50e9
    job, why = network.job_line_rate({"a": {"ports": ndr, "gpus": 8}, "b": {"ports": ndr[:1], "gpus": 8}})
    assert job == 50e9 and why.startswith("slowest node b")
    unknown, why = network.job_line_rate({"a": {"ports": ndr, "gpus": 1}, "vm": {"ports": [
        {"name": "eth0", "kind": "ethernet", "up": True, "rate_bytes_per_s": None}], "gpus": 1}})
    assert unknown is None and "vm: the kernel gives no rate for eth0" in why


# ---- GPU-to-NIC paths from recorded topo -m texts ----------------------------------------------------


def _paths(name: str) -> dict:
    path = TOPOLOGIES / name
    return network.nic_paths_from_topo_text(path.read_text(), str(path))


def test_nic_columns_of_every_recorded_format():
    hgx = _paths("hgx-h100-8-nics.partial.txt")  # NIC index is not GPU index: GPU3's PIX NIC is NIC5
    assert network.nearest_nic(hgx[3]) == ("NIC5", "PIX") and len(hgx[0]) == 10
    legend = _paths("h100-sxm-8-nics.txt")  # names from the NIC Legend block
    assert network.nearest_nic(legend[0]) == ("mlx5_0", "PIX") and network.nearest_nic(legend[1])[1] == "NODE"
    spaces = _paths("h100-nv6-4-nics.spaces.txt")
    assert {g: network.nearest_nic(p) for g, p in spaces.items()} == {g: (f"NIC{g}", "PIX") for g in range(4)}
    pcie = _paths("rtx4090-pcie-8.txt")
    assert network.nearest_nic(pcie[6]) == ("NIC0", "PHB") and network.nearest_nic(pcie[0]) == ("NIC0", "SYS")
    assert _paths("h200-sxm-2.txt") == {} and _paths("a100-pcie-nv12-pairs-4.txt") == {}


def test_a_short_row_names_the_line():
    text = "\tGPU0\tGPU1\tNIC0\tCPU Affinity\nGPU0\t X \tNV18\tPIX\t0-7\nGPU1\tNV18\t X \n"
    with pytest.raises(ValueError, match=r"snippet, line 3: row GPU1 has 2 cells for 3 device columns"):
        network.nic_paths_from_topo_text(text, "snippet")


def test_affinity_warns_naming_the_gpu_and_follows_the_file(shipped, tmp_path):
    paths = _paths("h100-sxm-8-nics.txt")
    near = checks.network.gpu_nic_affinity(shipped, gpu=0, paths=paths[0], source="f")
    assert near.outcome == "pass" and "warning" not in near.details
    far = checks.network.gpu_nic_affinity(shipped, gpu=1, paths=paths[1], source="f")
    # a warn: ok (the test passes, the node is not drained), but not a pass
    assert far.outcome == "warn" and far.ok and far.message.startswith("nearest NIC on GPU1: measured NODE > ceiling PXB")
    assert "mlx5_0 through NODE" in far.message and "crosses the host bridge" in far.message
    assert "network.gpu_nic_path" in far.yaml_path and far.details["warning"] == far.message
    data = yaml.safe_load((PROJECT / "thresholds.yaml").read_text())
    data["network"]["gpu_nic_path"]["max"] = "NODE"
    loose = tmp_path / "loose.yaml"
    loose.write_text(yaml.safe_dump(data))
    assert "warning" not in checks.network.gpu_nic_affinity(load_thresholds(loose), gpu=1, paths=paths[1], source="f").details
    assert checks.network.gpu_nic_affinity(shipped, gpu=0, paths={}, source="topo.txt").outcome == "skip"


def test_affinity_fails_beyond_the_profiles_nic_path(shipped, tmp_path):
    """A profile's gpu_nic_path is the node type's build: farther, or no NIC, fails naming the GPU; the
    generic warning stays for profiles without it and for records made before the input existed."""
    paths = _paths("h100-sxm-8-nics.txt")
    th = _with_profile(tmp_path, gpu_nic_path="PIX")
    near = checks.network.gpu_nic_affinity(th, gpu=0, paths=paths[0], source="f", profile="h100-sxm-8")
    assert near.outcome == "pass" and "warning" not in near.details and near.limit == {"max": "PIX"}
    far = checks.network.gpu_nic_affinity(th, gpu=1, paths=paths[1], source="f", profile="h100-sxm-8")
    assert far.outcome == "fail" and far.measured == "NODE"
    assert far.message.startswith("nearest NIC on GPU1: mlx5_0 is NODE, farther than the PIX profile h100-sxm-8 "
                                  "expects (f)") and "profiles.h100-sxm-8" in far.yaml_path
    none = checks.network.gpu_nic_affinity(th, gpu=0, paths={}, source="topo.txt", profile="h100-sxm-8")
    assert none.outcome == "fail" and "nearest NIC on GPU0: no NIC in topo.txt, profile h100-sxm-8 expects one within PIX" in none.message
    loose = _with_profile(tmp_path, gpu_nic_path="NODE")  # the node type is built this way: no warning either
    assert checks.network.gpu_nic_affinity(loose, gpu=1, paths=paths[1], source="f", profile="h100-sxm-8").details == {}
    for profile in ("h100-sxm-8", None):  # the shipped profile has no gpu_nic_path; old records have no profile
        v = checks.network.gpu_nic_affinity(shipped, gpu=1, paths=paths[1], source="f", profile=profile)
        assert v.outcome == "warn" and v.ok and "warning" in v.details
    with pytest.raises(ThresholdsError, match=r"profiles\.h100-sxm-8\.gpu_nic_path.*write one of: PIX, PXB"):
        _with_profile(tmp_path, gpu_nic_path="FAR")


def test_the_network_tests_fail_a_gpu_beyond_the_profiles_nic_path(pytester):
    """tests/test_network.py can fail: with a profile built with a NIC under every GPU (PIX), each GPU of
    the recorded node whose nearest NIC is NODE fails, naming it."""
    def edit(data):
        data["profiles"]["h100-sxm-8"]["gpu_nic_path"] = "PIX"

    make_project(pytester, thresholds_with(edit))
    result = run_suite(pytester, "--simulate=h100-sxm-8-nics", "--profile=h100-sxm-8", "tests/test_network.py")
    result.assert_outcomes(passed=4, failed=4, skipped=3)
    out = result.stdout.str()
    for gpu in (1, 2, 5, 7):  # the failure block: what, where, what was found
        assert f"gpu_nic_affinity FAILED on GPU{gpu}: nearest NIC" in out
    assert out.count("found     mlx5_0 is NODE, farther than the PIX profile h100-sxm-8 expects") == 4, out
    assert "GPU0: its nearest" not in out


def test_the_network_tests_in_simulation_warn_per_gpu(pytester):
    """tests/test_network.py on a recorded node with NIC rows: each far GPU is a warning naming it; the
    port checks skip with their reason (a simulation reads no port)."""
    make_project(pytester)
    result = run_suite(pytester, "--simulate=h100-sxm-8-nics", "tests/test_network.py", "-rs", "-W",
                       "always::UserWarning")
    result.assert_outcomes(passed=8, skipped=3, warnings=4)
    out = result.stdout.str()
    for gpu in (1, 2, 5, 7):
        assert f"VerdictWarning: nearest NIC on GPU{gpu}: measured NODE > ceiling PXB" in out
    assert "GPU0: its nearest" not in out
    assert "simulation: NIC ports are read from the live node only" in out


def test_the_network_tests_skip_without_nic_rows(pytester):
    make_project(pytester)
    result = run_suite(pytester, "--simulate=h200-sxm-2", "tests/test_network.py", "-rs")
    result.assert_outcomes(skipped=5)
    assert "has no NIC columns" in result.stdout.str()
