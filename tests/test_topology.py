"""The node's wiring: fabric, NVLink groups, links per GPU, link speed, peer access."""

from __future__ import annotations

import pytest

from wirecheck.placement import CLASS_PAIR
from wirecheck.topology import BRIDGED, FABRICS, NVSWITCH


def test_groups_are_full_meshes(topology, record):
    """Inside an NVLink group every pair is linked with the same NV# (no half-bridged group)."""
    problems = []
    for group in topology.groups:
        counts = {(a, b): topology.nv(a, b) for a in group for b in group if a < b}
        if counts and (min(counts.values()) == 0 or len(set(counts.values())) > 1):
            problems.append(f"group {list(group)}: " + ", ".join(f"GPU{a}-GPU{b} NV{n}" for (a, b), n in counts.items()))
    record("topology", "NVLink groups", value=[list(g) for g in topology.groups], details={"fabric": topology.fabric},
           verdict="fail" if problems or topology.fabric not in FABRICS else "pass")
    assert topology.fabric in FABRICS
    assert not problems, "uneven NVLink groups (a bridge or link missing): " + "; ".join(problems)


def test_nvlinks_per_gpu(node, topology, gpu, record):
    """Every NVLink of the GPU is up and it has as many as the fabric expects
    (18 to the switches on Hopper NVSwitch; NV6 to each of 3 peers inside an NVL quad)."""
    g = topology.gpus[gpu]
    profile = node.profile
    peers = [j for j in range(topology.n_gpus) if j != gpu]
    if g.nvlinks:
        down = [link.index for link in g.nvlinks if not link.active]
        record("topology", f"GPU{gpu} NVLinks", value=g.active_links, details={"down": down},
               limit={"expected": profile.nvlinks_per_gpu} if profile else None, verdict="fail" if down else "pass")
        assert not down, f"GPU{gpu} ({g.bus_id}): NVLink(s) {down} down, {g.active_links}/{len(g.nvlinks)} active"
        if profile and profile.nvlinks_per_gpu:
            assert g.active_links == profile.nvlinks_per_gpu, (
                f"GPU{gpu}: {g.active_links} active NVLinks, profile {profile.name} expects {profile.nvlinks_per_gpu}")
        return
    # A `topo -m` text: only the NV# per pair is known.
    if topology.fabric == NVSWITCH:
        expected = profile.nvlinks_per_gpu if profile else max(topology.nv(gpu, j) for j in peers)
        targets = peers
    elif topology.fabric == BRIDGED:
        group = topology.group_of(gpu)
        targets = [j for j in group if j != gpu]
        if not targets:
            pytest.skip(f"GPU{gpu} is in no NVLink group")
        expected = profile.nvlinks_per_peer if profile and profile.nvlinks_per_peer else max(topology.nv(gpu, j) for j in targets)
    else:
        pytest.skip("PCIe-only fabric: no NVLink expected")
    short = {f"GPU{j}": f"NV{topology.nv(gpu, j)}" for j in targets if topology.nv(gpu, j) != expected}
    record("topology", f"GPU{gpu} NV# to peers", value={f"GPU{j}": topology.nv(gpu, j) for j in targets},
           limit={"expected": expected}, verdict="fail" if short else "pass")
    assert not short, f"GPU{gpu}: expected NV{expected} to each peer, found {short} ({topology.source})"


def test_nvlink_speed_uniform(node, topology, gpu, record):
    """All active links of the GPU run at one speed (and the profile's speed when given)."""
    g = topology.gpus[gpu]
    speeds = {link.index: link.speed_mbps for link in g.nvlinks if link.active and link.speed_mbps}
    if not speeds:
        pytest.skip(f"{topology.source} has no per-link speed for GPU{gpu}")
    distinct = sorted(set(speeds.values()))
    record("topology", f"GPU{gpu} NVLink speed", value=distinct, unit="MB/s", verdict="pass" if len(distinct) == 1 else "fail")
    assert len(distinct) == 1, f"GPU{gpu}: NVLinks at different speeds {speeds} (MB/s): a link trained down"
    profile = node.profile
    if profile and profile.nvlink_speed:
        expected = profile.nvlink_speed / 1e6
        assert abs(distinct[0] - expected) <= 0.01 * expected, (
            f"GPU{gpu}: NVLink speed {distinct[0]} MB/s, profile {profile.name} expects {expected:.0f} MB/s")


@pytest.mark.placements(CLASS_PAIR)
def test_peer_access_over_nvlink(live, placement, record):
    """NVML reports peer-to-peer read, write and NVLink access OK between NVLink-connected GPUs."""
    a, b = placement.gpus
    status = live.p2p_status(a, b)
    bad = {k: v for k, v in status.items() if k in ("read", "write", "nvlink") and v != "OK"}
    record("topology", f"P2P GPU{a}-GPU{b}", value=status, verdict="fail" if bad else "pass")
    assert not bad, f"GPU{a}-GPU{b}: P2P not OK over NVLink: {bad} (NCCL falls back to the host path)"
