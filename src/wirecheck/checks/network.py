"""The node's NICs: ports up, one rate, the expected count, and each GPU near a NIC.

Inputs are the port dicts of wirecheck.node.network (`ports_as_data`) and topo -m path codes, so a
recorded run is judged again unchanged. A GPU far from every NIC is a warning, not a failure: the
node works, its multi-node traffic only crosses the CPU (a `warn` verdict: the test passes with a
pytest warning, the run is not failed and the node not drained). Only a profile that gives the node
type's `gpu_nic_path` makes it a failure, as its nic_ports and nic_rate do for the ports.
"""

from __future__ import annotations

from dataclasses import dataclass

from wirecheck.checks import check
from wirecheck.checks.inventory import PROFILES
from wirecheck.checks.words import Words
from wirecheck.node.network import RDMA_KINDS, nearest_nic
from wirecheck.node.topology import PCIE_LEVELS
from wirecheck.core.verdict import FAIL, PASS, WARN, Verdict, expect, no_problems, skip
from wirecheck.thresholds.declared import Rule
from wirecheck.thresholds.fields import Nested, Share, Source, Word, spec


@dataclass(frozen=True)
class LineRateShare:
    WHAT = "efficiency and source"
    # the share of the NICs' line rate a multi-node busbw must reach (the network class's derived floor)
    efficiency: float = spec(Share('"80 %"', "a floor cannot exceed the line rate; write at most 100 %", positive=False))
    source: str = spec(Source())
    yaml_path: str


@dataclass(frozen=True)
class NicPath:
    WHAT = "GPU-to-NIC path limit"
    max: str = spec(Word(words=PCIE_LEVELS), "PXB")  # the farthest topo -m path from a GPU to its nearest NIC, no warning
    source: str = spec(Source())
    yaml_path: str


@dataclass(frozen=True)
class NetworkLimits:
    """Multi-node collectives and the node's NICs (wirecheck.fleet.multinode, tests/test_network.py)."""

    WHAT = "network limits"
    derived_floor: LineRateShare = spec(Nested('{efficiency: "80 %", source: ...}', LineRateShare))
    gpu_nic_path: NicPath = spec(Nested("{max: PXB, source: ...}", NicPath))


NETWORK = Rule("network", NetworkLimits, '{derived_floor: {efficiency: "80 %", source: ...}, gpu_nic_path: {max: PXB, source: ...}}')

_NO_RDMA = ("no InfiniBand/RoCE port under /sys/class/infiniband: multi-node traffic would use TCP sockets (NCCL's "
            "Socket transport); nothing to judge")

PORTS_UP = Words(
    what="InfiniBand/RoCE ports up",
    means="an InfiniBand/RoCE port is down: multi-node jobs lose its bandwidth",
    todo="`ibstat`; check the cable, the switch port and the subnet manager",
    say={"no_rdma": _NO_RDMA,
         "down": "{name} ({kind}): state {state}, physical {phys_state}",
         "not_up": "{down} of {ports} InfiniBand/RoCE port(s) not up"})
RATE = Words(
    what="InfiniBand/RoCE port rate",
    means="a NIC port runs below the expected rate",
    todo="`ibstat` (rate and width); reseat or replace the cable",
    say={"no_rdma": _NO_RDMA, "none_up": "no InfiniBand/RoCE port is up",
         "no_rate": "the kernel gives no rate for {ports}",
         "one_rate": "one rate",
         "different": "InfiniBand/RoCE ports at different rates: {slow} below {fastest} (a port trained down)",
         "profile": "InfiniBand/RoCE ports at {rate}, profile {profile} expects {expected}"})
COUNT = Words(
    what="InfiniBand/RoCE port count",
    means="the node has another number of NIC ports than its profile",
    todo="`ibstat`; check the build sheet (a card missing, or its driver not loaded)",
    say={"no_profile": "no --profile with nic_ports given: the expected count is unknown",
         "no_ports": "profile {profile} has no nic_ports",
         "differs": "{found} InfiniBand/RoCE port(s) found, profile {profile} expects {expected}"})
AFFINITY = Words(
    what="nearest NIC",
    means="a GPU's nearest NIC is far (across a CPU socket): its network traffic crosses the host",
    todo="`nvidia-smi topo -m`; check the NIC slots against the node's design",
    say={"no_columns": "{source} has no NIC columns",
         "through": "{nic} through {code}, read from {source}",
         "crosses": "its network traffic crosses the host bridge or the CPU interconnect",
         "no_nic": "no NIC in {source}, profile {profile} expects one within {limit} (a NIC missing or its driver not "
                   "loaded)",
         "farther": "{nic} is {code}, farther than the {limit} profile {profile} expects ({source}): a NIC missing, "
                    "disabled or in another slot, or the GPU in the wrong one",
         "profile_limit": "{nic} through {code}, read from {source}; profile {profile}'s limit"})


def _rdma(ports: list) -> list:
    return [p for p in ports if p["kind"] in RDMA_KINDS]


def _gbps(bytes_per_s: float) -> str:
    return f"{bytes_per_s * 8 / 1e9:g} Gb/s"


@check("nic_ports_up", words=PORTS_UP)
def nic_ports_up(thresholds, *, ports: list) -> Verdict:
    """Every InfiniBand/RoCE port is ACTIVE with its physical link up."""
    what = PORTS_UP.judged()
    rdma = _rdma(ports)
    if not rdma:
        return skip(what, None, PORTS_UP.said("no_rdma"))
    down = [PORTS_UP.said("down", name=p["name"], kind=p["kind"], state=p["state"], phys_state=p["phys_state"])
            for p in rdma if not p["up"]]
    return no_problems(what, None, down, measured=len(rdma) - len(down), unit="ports up",
                       intro=PORTS_UP.said("not_up", down=len(down), ports=len(rdma)))


@check("nic_rate", words=RATE, limits=(PROFILES,))
def nic_rate(thresholds, *, ports: list, profile: str | None) -> Verdict:
    """Every active InfiniBand/RoCE port at one rate (a port trained down stands out), and at the
    profile's rate when it gives one."""
    what = RATE.judged()
    active = [p for p in _rdma(ports) if p["up"]]
    if not active:
        return skip(what, None, RATE.said("no_rdma" if not _rdma(ports) else "none_up"))
    rates = {p["name"]: p["rate_bytes_per_s"] for p in active}
    if None in rates.values():
        return skip(what, None, RATE.said("no_rate", ports=", ".join(n for n, r in rates.items() if r is None)))
    distinct = sorted(set(rates.values()))
    if len(distinct) > 1:
        slow = {n: _gbps(r) for n, r in rates.items() if r < distinct[-1]}
        return expect(what, None, {n: _gbps(r) for n, r in rates.items()}, RATE.said("one_rate"), False,
                      RATE.said("different", slow=slow, fastest=_gbps(distinct[-1])), unit="Gb/s")
    p = thresholds.profile(profile) if profile else None
    if p and p.nic_rate:
        return expect(what, None, _gbps(distinct[0]), _gbps(p.nic_rate), abs(distinct[0] - p.nic_rate) <= 0.01 * p.nic_rate,
                      RATE.said("profile", rate=_gbps(distinct[0]), profile=p.name, expected=_gbps(p.nic_rate)),
                      p.source, p.yaml_path, unit="Gb/s")
    return expect(what, None, _gbps(distinct[0]), RATE.said("one_rate"), True, "", unit="Gb/s")


@check("nic_count", words=COUNT, limits=(PROFILES,))
def nic_count(thresholds, *, ports: list, profile: str | None) -> Verdict:
    """As many InfiniBand/RoCE ports as the profile expects (up or not: a missing one is a card or driver)."""
    what = COUNT.judged()
    p = thresholds.profile(profile) if profile else None
    if p is None or p.nic_ports is None:
        return skip(what, None, COUNT.said("no_profile") if p is None else COUNT.said("no_ports", profile=p.name))
    found = len(_rdma(ports))
    return expect(what, None, found, p.nic_ports, found == p.nic_ports,
                  COUNT.said("differs", found=found, profile=p.name, expected=p.nic_ports), p.source, p.yaml_path,
                  unit="ports")


@check("gpu_nic_affinity", words=AFFINITY, limits=(PROFILES, NETWORK))
def gpu_nic_affinity(thresholds, *, gpu: int, paths: dict, source: str, profile: str | None = None) -> Verdict:
    """The GPU reaches a NIC through at most `network.gpu_nic_path.max` (PIX/PXB: under PCIe switches).
    Farther (PHB, NODE, SYS) warns (the verdict is ok, its outcome `warn`), naming the GPU and its nearest NIC. A profile with
    `gpu_nic_path` says how near this node type is built to be: farther, or no NIC at all, fails (a
    NIC missing, disabled, or in another slot), and that limit replaces the warning's.
    `paths`: {NIC name: topo -m code} from the GPU's row; `source`: where they were read. `profile`
    defaults to None so that records made before it existed are judged as they were."""
    what, where = AFFINITY.judged(), f"GPU{gpu}"
    nearest = nearest_nic(paths)
    p = thresholds.profile(profile) if profile else None
    if p is not None and p.gpu_nic_path is not None:
        return _affinity_against_profile(what, where, nearest, source, p)
    if nearest is None:
        return skip(what, where, AFFINITY.said("no_columns", source=source))
    nic, code = nearest
    rule = thresholds.network.gpu_nic_path
    allowed = PCIE_LEVELS.index(code) <= PCIE_LEVELS.index(rule.max)
    v = Verdict("", what, where, PASS if allowed else WARN, measured=code, limit={"max": rule.max},
                bound="ceiling", source=rule.source, yaml_path=rule.yaml_path,
                note=AFFINITY.said("through", nic=nic, code=code, source=source), hint=AFFINITY.said("crosses"))
    # details["warning"]: the fleet report lists a node's warnings by it
    return v if allowed else v.amended(details={"warning": v.message})


def _affinity_against_profile(what: str, where: str, nearest: tuple[str, str] | None, source: str, p) -> Verdict:
    """The node type's own NIC layout is a requirement, as its nic_ports and nic_rate are."""
    limit = p.gpu_nic_path
    if nearest is None:
        code = None
        problem = AFFINITY.said("no_nic", source=source, profile=p.name, limit=limit)
    else:
        nic, code = nearest
        problem = None if PCIE_LEVELS.index(code) <= PCIE_LEVELS.index(limit) else AFFINITY.said(
            "farther", nic=nic, code=code, limit=limit, profile=p.name, source=source)
    if problem:
        return Verdict("", what, where, FAIL, measured=code, limit={"max": limit}, bound="ceiling", source=p.source,
                       yaml_path=p.yaml_path, details={"problems": [problem]})
    return Verdict("", what, where, PASS, measured=code, limit={"max": limit}, bound="ceiling", source=p.source,
                   yaml_path=p.yaml_path, note=AFFINITY.said("profile_limit", nic=nic, code=code, source=source,
                                                             profile=p.name))
