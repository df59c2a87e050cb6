"""The node's wiring: NVLink groups, links per GPU, link speed, peer access.

Inputs use GPU indices (NVML's numbering, as in the test ids), never positions.
"""

from __future__ import annotations

from wirecheck.checks import check
from wirecheck.checks.inventory import PROFILES
from wirecheck.checks.words import Words
from wirecheck.core.verdict import Verdict, expect, no_problems, skip

FABRICS_KNOWN = ("nvswitch", "bridged", "pcie")

GROUPS = Words(
    what="NVLink groups",
    means="the NVLink groups are not the full meshes this fabric is built as: a link or a bridge is missing",
    todo="`nvidia-smi topo -m` against the node's wiring; reseat the NVLink bridge or check the fabric manager",
    say={"unknown": "unknown fabric {fabric!r}", "group": "group {group}: {pairs}",
         "uneven": "uneven NVLink groups (a bridge or link missing)"})
LINKS = Words(
    what="NVLinks",
    means="a GPU has fewer NVLinks up than the fabric expects",
    todo="`nvidia-smi nvlink -s -i <gpu>` names the link that is down; reseat or replace the GPU/bridge, or reset the GPU",
    say={"down": "GPU{gpu} ({bus_id}): NVLink(s) {down} down, {active}/{links} active",
         "profile": "GPU{gpu}: {active} active NVLinks, profile {profile} expects {expected}",
         "pcie": "PCIe-only fabric: no NVLink expected",
         "no_group": "GPU{gpu} is in no NVLink group",
         "short": "GPU{gpu}: expected NV{expected} to each peer, found {short}"})
SPEED = Words(
    what="NVLink speed",
    means="NVLinks run at different speeds: one trained down",
    todo="`nvidia-smi nvlink -s`; a GPU reset retrains the link, a repeat means hardware",
    say={"no_speed": "no per-link speed in the topology source", "one_speed": "one speed",
         "different": "GPU{gpu}: NVLinks at different speeds {speeds} (MB/s): a link trained down",
         "profile": "GPU{gpu}: NVLink speed {speed} MB/s, profile {profile} expects {expected:.0f} MB/s"})
PEER_ACCESS = Words(
    what="P2P access",
    means="two GPUs cannot read/write each other directly",
    todo="`nvidia-smi topo -p2p r`; check IOMMU/ACS settings in the BIOS and the container's device access",
    say={"status": "{kind}: {status}",
         "not_ok": "GPU{a}-GPU{b}: P2P not OK over NVLink (NCCL falls back to the host path)"})


@check("nvlink_groups", words=GROUPS)
def nvlink_groups(thresholds, *, fabric: str, groups: list, nv: dict) -> Verdict:
    """Inside an NVLink group every pair is linked with the same NV# (no half-bridged group).
    `nv`: {"a-b": NV#} for every pair a < b inside a group."""
    problems = []
    if fabric not in FABRICS_KNOWN:
        problems.append(GROUPS.said("unknown", fabric=fabric))
    for group in groups:
        counts = {pair: n for pair, n in nv.items() if {int(x) for x in pair.split("-")} <= set(group)}
        if counts and (min(counts.values()) == 0 or len(set(counts.values())) > 1):
            problems.append(GROUPS.said("group", group=group, pairs=", ".join(
                f"GPU{p.replace('-', '-GPU')} NV{n}" for p, n in counts.items())))
    return no_problems(GROUPS.judged(), None, problems, measured=groups, intro=GROUPS.said("uneven"))


@check("nvlinks_per_gpu", words=LINKS, limits=(PROFILES,))
def nvlinks_per_gpu(thresholds, *, gpu: int, bus_id: str | None, fabric: str, links: list | None,
                    nv_to_peers: dict, profile: str | None) -> Verdict:
    """Every NVLink of the GPU is up and it has as many as the fabric expects (18 to the
    switches on Hopper NVSwitch; NV6 to each of 3 peers inside an NVL quad).

    `links`: [{"index", "active"}] from NVML, or None when the source has only NV# per pair
    (a `topo -m` text); `nv_to_peers`: {peer index: NV#} over the peers that should be linked.
    """
    what, where = LINKS.judged(), f"GPU{gpu}"
    p = thresholds.profile(profile) if profile else None
    cite = {"source": p.source, "yaml_path": p.yaml_path} if p else {}
    if links is not None and links:
        down = [link["index"] for link in links if not link["active"]]
        active = len(links) - len(down)
        if down:
            return expect(what, where, active, len(links), False,
                          LINKS.said("down", gpu=gpu, bus_id=bus_id, down=down, active=active, links=len(links)))
        if p and p.nvlinks_per_gpu:
            return expect(what, where, active, p.nvlinks_per_gpu, active == p.nvlinks_per_gpu,
                          LINKS.said("profile", gpu=gpu, active=active, profile=p.name, expected=p.nvlinks_per_gpu),
                          **cite)
        return expect(what, where, active, len(links), True, "")
    if fabric == "pcie":
        return skip(what, where, LINKS.said("pcie"))
    if not nv_to_peers:
        return skip(what, where, LINKS.said("no_group", gpu=gpu))
    if fabric == "nvswitch":
        expected = p.nvlinks_per_gpu if p else max(nv_to_peers.values())
    else:
        expected = p.nvlinks_per_peer if p and p.nvlinks_per_peer else max(nv_to_peers.values())
    short = {f"GPU{j}": f"NV{n}" for j, n in nv_to_peers.items() if n != expected}
    return expect(what, where, nv_to_peers, expected, not short,
                  LINKS.said("short", gpu=gpu, expected=expected, short=short), **cite)


@check("nvlink_speed", words=SPEED, limits=(PROFILES,))
def nvlink_speed(thresholds, *, gpu: int, speeds_mbps: dict, profile: str | None) -> Verdict:
    """All active links of the GPU run at one speed (and the profile's speed when given).
    `speeds_mbps`: {link index: MB/s} of the active links."""
    what, where = SPEED.judged(), f"GPU{gpu}"
    if not speeds_mbps:
        return skip(what, where, SPEED.said("no_speed"))
    distinct = sorted(set(speeds_mbps.values()))
    if len(distinct) > 1:
        return expect(what, where, distinct, SPEED.said("one_speed"), False,
                      SPEED.said("different", gpu=gpu, speeds=speeds_mbps), unit="MB/s")
    p = thresholds.profile(profile) if profile else None
    if p and p.nvlink_speed:
        expected = p.nvlink_speed / 1e6
        return expect(what, where, distinct[0], expected, abs(distinct[0] - expected) <= 0.01 * expected,
                      SPEED.said("profile", gpu=gpu, speed=distinct[0], profile=p.name, expected=expected),
                      p.source, p.yaml_path, unit="MB/s")
    return expect(what, where, distinct[0], SPEED.said("one_speed"), True, "", unit="MB/s")


@check("peer_access", words=PEER_ACCESS)
def peer_access(thresholds, *, a: int, b: int, status: dict) -> Verdict:
    """NVML reports peer-to-peer read, write and NVLink access OK between NVLink-connected GPUs."""
    bad = {k: v for k, v in status.items() if k in ("read", "write", "nvlink") and v != "OK"}
    return no_problems(PEER_ACCESS.judged(), f"pair-{a}.{b}",
                       [PEER_ACCESS.said("status", kind=k, status=v) for k, v in bad.items()], measured=status,
                       intro=PEER_ACCESS.said("not_ok", a=a, b=b))
