"""The node's wiring: NVLink groups, links per GPU, link speed, peer access.

Inputs use GPU indices (NVML's numbering, as in the test ids), never positions.
"""

from __future__ import annotations

from wirecheck.checks import check
from wirecheck.checks.inventory import PROFILES
from wirecheck.core.verdict import Verdict, expect, no_problems, skip

FABRICS_KNOWN = ("nvswitch", "bridged", "pcie")


@check("nvlink_groups")
def nvlink_groups(thresholds, *, fabric: str, groups: list, nv: dict) -> Verdict:
    """Inside an NVLink group every pair is linked with the same NV# (no half-bridged group).
    `nv`: {"a-b": NV#} for every pair a < b inside a group."""
    what = "NVLink groups"
    problems = []
    if fabric not in FABRICS_KNOWN:
        problems.append(f"unknown fabric {fabric!r}")
    for group in groups:
        counts = {pair: n for pair, n in nv.items() if {int(x) for x in pair.split("-")} <= set(group)}
        if counts and (min(counts.values()) == 0 or len(set(counts.values())) > 1):
            problems.append(f"group {group}: " + ", ".join(f"GPU{p.replace('-', '-GPU')} NV{n}" for p, n in counts.items()))
    return no_problems(what, None, problems, measured=groups, intro="uneven NVLink groups (a bridge or link missing)")


@check("nvlinks_per_gpu", limits=(PROFILES,))
def nvlinks_per_gpu(thresholds, *, gpu: int, bus_id: str | None, fabric: str, links: list | None,
                    nv_to_peers: dict, profile: str | None) -> Verdict:
    """Every NVLink of the GPU is up and it has as many as the fabric expects (18 to the
    switches on Hopper NVSwitch; NV6 to each of 3 peers inside an NVL quad).

    `links`: [{"index", "active"}] from NVML, or None when the source has only NV# per pair
    (a `topo -m` text); `nv_to_peers`: {peer index: NV#} over the peers that should be linked.
    """
    what, where = "NVLinks", f"GPU{gpu}"
    p = thresholds.profile(profile) if profile else None
    cite = {"source": p.source, "yaml_path": p.yaml_path} if p else {}
    if links is not None and links:
        down = [link["index"] for link in links if not link["active"]]
        active = len(links) - len(down)
        if down:
            return expect(what, where, active, len(links), False,
                          f"GPU{gpu} ({bus_id}): NVLink(s) {down} down, {active}/{len(links)} active")
        if p and p.nvlinks_per_gpu:
            return expect(what, where, active, p.nvlinks_per_gpu, active == p.nvlinks_per_gpu,
                          f"GPU{gpu}: {active} active NVLinks, profile {p.name} expects {p.nvlinks_per_gpu}", **cite)
        return expect(what, where, active, len(links), True, "")
    if fabric == "pcie":
        return skip(what, where, "PCIe-only fabric: no NVLink expected")
    if not nv_to_peers:
        return skip(what, where, f"GPU{gpu} is in no NVLink group")
    if fabric == "nvswitch":
        expected = p.nvlinks_per_gpu if p else max(nv_to_peers.values())
    else:
        expected = p.nvlinks_per_peer if p and p.nvlinks_per_peer else max(nv_to_peers.values())
    short = {f"GPU{j}": f"NV{n}" for j, n in nv_to_peers.items() if n != expected}
    return expect(what, where, nv_to_peers, expected, not short,
                  f"GPU{gpu}: expected NV{expected} to each peer, found {short}", **cite)


@check("nvlink_speed", limits=(PROFILES,))
def nvlink_speed(thresholds, *, gpu: int, speeds_mbps: dict, profile: str | None) -> Verdict:
    """All active links of the GPU run at one speed (and the profile's speed when given).
    `speeds_mbps`: {link index: MB/s} of the active links."""
    what, where = "NVLink speed", f"GPU{gpu}"
    if not speeds_mbps:
        return skip(what, where, "no per-link speed in the topology source")
    distinct = sorted(set(speeds_mbps.values()))
    if len(distinct) > 1:
        return expect(what, where, distinct, "one speed", False,
                      f"GPU{gpu}: NVLinks at different speeds {speeds_mbps} (MB/s): a link trained down", unit="MB/s")
    p = thresholds.profile(profile) if profile else None
    if p and p.nvlink_speed:
        expected = p.nvlink_speed / 1e6
        return expect(what, where, distinct[0], expected, abs(distinct[0] - expected) <= 0.01 * expected,
                      f"GPU{gpu}: NVLink speed {distinct[0]} MB/s, profile {p.name} expects {expected:.0f} MB/s",
                      p.source, p.yaml_path, unit="MB/s")
    return expect(what, where, distinct[0], "one speed", True, "", unit="MB/s")


@check("peer_access")
def peer_access(thresholds, *, a: int, b: int, status: dict) -> Verdict:
    """NVML reports peer-to-peer read, write and NVLink access OK between NVLink-connected GPUs."""
    what, where = "P2P access", f"pair-{a}.{b}"
    bad = {k: v for k, v in status.items() if k in ("read", "write", "nvlink") and v != "OK"}
    return no_problems(what, where, [f"{k}: {v}" for k, v in bad.items()], measured=status,
                       intro=f"GPU{a}-GPU{b}: P2P not OK over NVLink (NCCL falls back to the host path)")
