"""The node's network: InfiniBand/RoCE ports up and at one rate, as many as the profile expects, and
each GPU near a NIC (PIX/PXB; farther is a warning naming the GPU, or a failure beyond the profile's
gpu_nic_path).

Ports come from the live node's sysfs; in simulation they are skipped (this machine's NICs are not
the simulated node's). GPU-to-NIC paths come from `nvidia-smi topo -m`, or in simulation from the
recorded topology's NIC columns. Nothing here touches a GPU. The inventory is recorded once, so the
fleet report can compare the line rate across nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from wirecheck import checks
from wirecheck.node import network
from wirecheck.records.file import Measurement
from wirecheck.vocab import records as kinds

pytestmark = [pytest.mark.stage("inventory", order=3), pytest.mark.levels("quick", "acceptance", "burn-in")]


@dataclass(frozen=True)
class Nics:
    ports: list | None  # None: not readable here (simulation)
    ports_reason: str | None
    paths: dict | None  # {GPU index: {NIC: code}}; None: no topo -m to read
    paths_source: str


@pytest.fixture(scope="module")
def nics(node, reporter) -> Nics:
    if node.simulated:
        paths, source = network.recorded_nic_paths(node.simulation_source)
        return Nics(None, f"simulation: NIC ports are read from the live node only ({node.simulation_source} records "
                          "no port state or rate)", paths, source)
    ports = network.ports_as_data(network.read_ports())
    paths, source = network.live_nic_paths()
    gpus = node.topology.n_gpus if node.topology else 1
    rate, basis = network.line_rate(ports, gpus)
    reporter.measurement(Measurement(kinds.NETWORK, None, "NIC inventory", rate / 1e9 if rate else None, "GB/s", {
        "ports": ports, "gpu_nic_paths": paths, "paths_source": source, "gpus": gpus, "line_rate_basis": basis}))
    return Nics(ports, None, paths, source)


def _ports(nics: Nics) -> list:
    if nics.ports is None:
        pytest.skip(nics.ports_reason)
    return nics.ports


@pytest.mark.work()
def test_nic_ports_up(node, nics, record):
    """Every InfiniBand/RoCE port is ACTIVE with its physical link up."""
    verdict = record(checks.network.nic_ports_up(node.thresholds, ports=_ports(nics)))
    assert verdict.ok, verdict.message


@pytest.mark.work()
def test_nic_rate(node, nics, record):
    """Every active InfiniBand/RoCE port at one rate (and the profile's, when it gives one)."""
    verdict = record(checks.network.nic_rate(node.thresholds, ports=_ports(nics), profile=node.profile_name))
    assert verdict.ok, verdict.message


@pytest.mark.work()
def test_nic_count(node, nics, record):
    """As many InfiniBand/RoCE ports as the profile's nic_ports."""
    verdict = record(checks.network.nic_count(node.thresholds, ports=_ports(nics), profile=node.profile_name))
    assert verdict.ok, verdict.message


@pytest.mark.work()
def test_gpu_nearest_nic(node, nics, gpu, record):
    """The GPU reaches a NIC through PIX/PXB; farther (PHB, NODE, SYS) is a warning naming the GPU.
    With a profile that gives the node type's gpu_nic_path, farther than that (or no NIC) fails."""
    if nics.paths is None:
        pytest.skip(f"no GPU-to-NIC paths: {nics.paths_source}")
    verdict = record(checks.network.gpu_nic_affinity(node.thresholds, gpu=gpu, paths=nics.paths.get(gpu, {}),
                                                     source=nics.paths_source, profile=node.profile_name))
    assert verdict.ok, verdict.message  # a warn verdict passes; `record` shows it as a pytest warning
