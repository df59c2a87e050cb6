"""The node's wiring: NVLink groups, links per GPU, link speed, peer access."""

from __future__ import annotations

import pytest

from wirecheck import checks
from wirecheck.node.placement import CLASS_PAIR

pytestmark = [pytest.mark.stage("inventory", order=2), pytest.mark.levels("quick", "acceptance", "burn-in")]


@pytest.mark.work()
def test_groups_are_full_meshes(node, topology, record):
    """Inside an NVLink group every pair is linked with the same NV# (no half-bridged group)."""
    groups = [list(g) for g in topology.index_groups]
    nv = {f"{a}-{b}": topology.nv_between(a, b) for g in groups for a in g for b in g if a < b}
    verdict = record(checks.topology.nvlink_groups(node.thresholds, fabric=topology.fabric, groups=groups, nv=nv))
    assert verdict.ok, verdict.message


@pytest.mark.work()
def test_nvlinks_per_gpu(node, topology, gpu, record):
    """Every NVLink of the GPU is up and it has as many as the fabric expects
    (18 to the switches on Hopper NVSwitch; NV6 to each of 3 peers inside an NVL quad)."""
    g = topology.gpu(gpu)
    if topology.fabric == "nvswitch":
        peers = [j for j in topology.indices if j != gpu]
    else:
        peers = [j for j in next(grp for grp in topology.index_groups if gpu in grp) if j != gpu]
    verdict = record(checks.topology.nvlinks_per_gpu(
        node.thresholds, gpu=gpu, bus_id=g.bus_id, fabric=topology.fabric,
        links=[{"index": link.index, "active": link.active} for link in g.nvlinks] if g.nvlinks else None,
        nv_to_peers={j: topology.nv_between(gpu, j) for j in peers}, profile=node.profile_name))
    assert verdict.ok, verdict.message


@pytest.mark.work()
def test_nvlink_speed_uniform(node, topology, gpu, record):
    """All active links of the GPU run at one speed (and the profile's speed when given)."""
    speeds = {link.index: link.speed_mbps for link in topology.gpu(gpu).nvlinks if link.active and link.speed_mbps}
    verdict = record(checks.topology.nvlink_speed(node.thresholds, gpu=gpu, speeds_mbps=speeds, profile=node.profile_name))
    assert verdict.ok, verdict.message


@pytest.mark.work()
@pytest.mark.placements(CLASS_PAIR)
def test_peer_access_over_nvlink(node, live, placement, record):
    """NVML reports peer-to-peer read, write and NVLink access OK between NVLink-connected GPUs."""
    a, b = placement.gpus
    status = {k: (v if isinstance(v, str) else f"unreadable: {v.reason}") for k, v in live.p2p_status(a, b).items()}
    verdict = record(checks.topology.peer_access(node.thresholds, a=a, b=b, status=status))
    assert verdict.ok, verdict.message
