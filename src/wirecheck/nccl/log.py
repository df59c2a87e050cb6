"""What NCCL says it chose, read from its own INFO log (NCCL_DEBUG=INFO).

Line formats are NCCL's format strings (src/transport/p2p.cc, shm.cc, net.cc, graph/search.cc,
graph/paths.cc, enqueue.cc, init.cc), checked against 2.21 to 2.28:
- a connection:  `Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read` (P2P/IPC, P2P/direct pointer,
  P2P/indirect/2[2]), `Channel 00 : 0[0] -> 1[1] via SHM/direct/direct`,
  `Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/3/GDRDMA`: channel, ranks and their devices,
  the transport and how it moves data;
- the path between two GPUs, from the topology dump (INFO GRAPH, non-trace builds):
  `GPU/0-18000 :GPU/0-18000 (0/5000.0/LOC) GPU/0-2a000 (1/480.0/NVL) CPU/0-0 (...)`:
  hops/bandwidth/type, type NVL (NVLink, or NVLink through NVSwitch), NVB (NVLink through
  another GPU), PIX/PXB/PHB/SYS (PCIe, through a switch, the host bridge, across sockets);
  with NCCL_P2P_DISABLE=1 NCCL diverts GPU traffic through the CPU, so the type becomes PHB/SYS;
- each searched graph: `Pattern 4, crossNic 0, nChannels 16, bw 40.000000/40.000000, type NVL/PIX, sameChannels 1`;
- channel counts: `16 coll channels, 16 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer`;
- what each collective ran with (INFO TUNING, rank 0 only): 2.26+ `AllReduce: 1073741824 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..15}`,
  2.21-2.25 `AllReduce: 1048576 Bytes -> Algo 1 proto 2 time 37.5` (numbers: NCCL's enum order);
- the rank and bus id of a communicator: `ncclCommInitRankConfig comm 0x... rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 ... - Init COMPLETE`;
- `NCCL version 2.28.9+cuda13.0`; `NCCL_P2P_DISABLE set by environment to 1`.
Anything else is ignored, so a new NCCL adding lines does not break the reading; a changed
format shows as missing evidence, which the check reports instead of passing.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable

# NCCL's enum order (src/include/nccl_common.h): the numbers older TUNING lines print.
ALGORITHMS = ("TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT")
PROTOCOLS = ("LL", "LL128", "SIMPLE")
# Path types between GPUs that ride NVLink.
NVLINK_PATH_TYPES = ("NVL", "NVB")

# "host:pid:tid [dev] NCCL INFO message" (the timestamp and prefix are optional).
_INFO = re.compile(r"(?:(?P<prefix>\S+:\d+:\d+) )?\[(?P<dev>\d+)\] NCCL INFO (?P<msg>.*)$")
_CONNECTION = re.compile(
    r"^Channel (?P<channel>\d+)(?:/(?P<conn>\d+))? : (?P<src>\d+)\[(?P<src_dev>[0-9a-fx]+)\] -> "
    r"(?P<dst>\d+)\[(?P<dst_dev>[0-9a-fx]+)\](?: \[(?P<direction>send|receive)\])? via (?P<transport>[A-Za-z][A-Za-z0-9]*)"
    r"(?:/(?P<detail>.*?))?\s*$")
_GPU_PATHS = re.compile(r"^GPU/(?P<sys>[0-9a-f]+)-(?P<bus>[0-9a-f]+) :(?P<rest>.*)$")
_PATH_ENTRY = re.compile(r"(?P<kind>[A-Z]+)/(?P<sys>[0-9a-f]+)-(?P<bus>[0-9a-f]+) \((?P<hops>\d+)/(?P<bw>[\d.]+)/(?P<type>[A-Z]+)\)")
_PATTERN = re.compile(
    r"^Pattern (?P<pattern>\d+), crossNic (?P<cross_nic>\d+), nChannels (?P<n_channels>\d+), "
    r"bw (?P<bw_intra>[\d.]+)/(?P<bw_inter>[\d.]+), type (?P<type_intra>\w+)/(?P<type_inter>\w+)")
_CHANNELS = re.compile(
    r"^(?P<coll>\d+) coll channels, (?:(?P<collnet>\d+) collnet channels, )?(?P<nvls>\d+) nvls channels, "
    r"(?P<p2p>\d+) p2p channels, (?P<p2p_per_peer>\d+) p2p channels per peer")
_TUNING_NAMED = re.compile(
    r"^(?P<op>\w+): (?P<bytes>\d+) Bytes -> Algo (?P<algo>[A-Za-z_]+) proto (?P<proto>[A-Za-z0-9_]+)"
    r"(?: channel\{Lo\.\.Hi\}=\{(?P<lo>\d+)\.\.(?P<hi>\d+)\})?")
_TUNING_NUMBERED = re.compile(
    r"^(?:(?P<op>\w+): )?(?P<bytes>\d+) Bytes -> Algo (?P<algo>\d+) proto (?P<proto>\d+)(?: time (?P<time>[\d.]+))?")
_INIT_COMPLETE = re.compile(
    r"comm (?P<comm>0x[0-9a-f]+) rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<cuda_dev>\d+) "
    r"nvmlDev (?P<nvml_dev>\d+) busId (?P<bus>[0-9a-f]+)")
_VERSION = re.compile(r"NCCL version (?P<version>\d+\.\d+\.\d+)")
_ENV = re.compile(r"^(?P<name>NCCL_[A-Z0-9_]+) set by environment to (?P<value>.*?)\.?\s*$")


@dataclass(frozen=True)
class Connection:
    channel: int
    conn: int | None  # connection index (0 collectives, 1 p2p/send-recv); SHM lines have none
    src: int  # rank
    dst: int
    src_dev: str
    dst_dev: str
    direction: str | None  # send | receive (NET lines only)
    transport: str  # P2P | SHM | NET | COLLNET ...
    detail: str  # CUMEM/read, direct/direct, IB/3/GDRDMA, ...
    line: str  # the log line from "[dev] NCCL INFO" on, to quote


@dataclass
class LogFacts:
    """Everything recognised in one or more NCCL logs."""

    version: str | None = None
    ranks: dict[int, dict[str, Any]] = field(default_factory=dict)  # rank -> bus, cuda_dev, nvml_dev, nranks
    connections: list[Connection] = field(default_factory=list)
    gpu_paths: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # bus -> bus -> {hops, bw, type}
    graphs: list[dict[str, Any]] = field(default_factory=list)
    channel_counts: dict[str, int] = field(default_factory=dict)
    collectives: list[dict[str, Any]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    info_lines: int = 0


def _name(table: tuple[str, ...], value: str) -> str:
    """An algorithm/protocol as NCCL names it, from a name or the enum number older NCCLs print."""
    if value.isdigit():
        i = int(value)
        return table[i] if i < len(table) else f"#{i}"
    return value.upper()


def _quote(match: re.Match) -> str:
    return f"[{match['dev']}] NCCL INFO {match['msg'].strip()}"


def parse(lines: Iterable[str], facts: LogFacts | None = None) -> LogFacts:
    """Read NCCL log lines (one rank's file or several concatenated) into `facts`."""
    facts = facts or LogFacts()
    for raw in lines:
        line = raw.rstrip("\n")
        if facts.version is None:
            v = _VERSION.search(line)
            if v:
                facts.version = v["version"]
        m = _INFO.search(line)
        if not m:
            continue
        facts.info_lines += 1
        msg = m["msg"].strip()
        if c := _CONNECTION.match(msg):
            facts.connections.append(Connection(
                int(c["channel"]), int(c["conn"]) if c["conn"] is not None else None, int(c["src"]), int(c["dst"]),
                c["src_dev"], c["dst_dev"], c["direction"], c["transport"].upper(), (c["detail"] or "").strip(),
                _quote(m)))
        elif p := _GPU_PATHS.match(msg):
            paths = facts.gpu_paths.setdefault(p["bus"], {})
            for e in _PATH_ENTRY.finditer(p["rest"]):
                if e["kind"] == "GPU":
                    paths[e["bus"]] = {"hops": int(e["hops"]), "bw": float(e["bw"]), "type": e["type"]}
        elif g := _PATTERN.match(msg):
            graph = {"pattern": int(g["pattern"]), "cross_nic": int(g["cross_nic"]), "n_channels": int(g["n_channels"]),
                     "bw_intra": float(g["bw_intra"]), "bw_inter": float(g["bw_inter"]),
                     "type_intra": g["type_intra"], "type_inter": g["type_inter"]}
            if graph not in facts.graphs:
                facts.graphs.append(graph)
        elif ch := _CHANNELS.match(msg):
            facts.channel_counts = {k: int(v) for k, v in ch.groupdict().items() if v is not None}
        elif t := (_TUNING_NAMED.match(msg) or _TUNING_NUMBERED.match(msg)):
            entry = {"op": t["op"], "bytes": int(t["bytes"]), "algo": _name(ALGORITHMS, t["algo"]),
                     "proto": _name(PROTOCOLS, t["proto"])}
            if "lo" in t.groupdict() and t["lo"] is not None:
                entry["channels"] = int(t["hi"]) - int(t["lo"]) + 1
            if entry not in facts.collectives:
                facts.collectives.append(entry)
        elif e := _ENV.match(msg):
            facts.env[e["name"]] = e["value"]
        if i := _INIT_COMPLETE.search(msg):
            facts.ranks[int(i["rank"])] = {"bus": i["bus"], "cuda_dev": int(i["cuda_dev"]),
                                           "nvml_dev": int(i["nvml_dev"]), "nranks": int(i["nranks"])}
    return facts


def pair_key(a: int, b: int) -> str:
    return f"{a}-{b}"


def summarize(texts: Iterable[str]) -> dict[str, Any]:
    """Plain data (for the record and the check) from every rank's log text.

    connections: one entry per (src, dst, transport, detail) with its channels and the first
    line that showed it; path_types: "src-dst" (ranks) -> NCCL's path type between their GPUs.
    """
    facts = LogFacts()
    for text in texts:
        parse(text.splitlines(), facts)
    grouped: dict[tuple, dict[str, Any]] = {}
    for c in facts.connections:
        key = (c.src, c.dst, c.transport, c.detail)
        entry = grouped.setdefault(key, {"src": c.src, "dst": c.dst, "transport": c.transport, "detail": c.detail,
                                         "channels": [], "line": c.line})
        if c.channel not in entry["channels"]:
            entry["channels"].append(c.channel)
    bus_rank = {info["bus"]: rank for rank, info in facts.ranks.items()}
    path_types: dict[str, str] = {}
    for src_bus, dests in facts.gpu_paths.items():
        for dst_bus, path in dests.items():
            if src_bus in bus_rank and dst_bus in bus_rank and src_bus != dst_bus:
                path_types[pair_key(bus_rank[src_bus], bus_rank[dst_bus])] = path["type"]
    return {
        "nccl_version": facts.version,
        "ranks": {str(r): info for r, info in sorted(facts.ranks.items())},
        "connections": sorted(grouped.values(), key=lambda e: (e["src"], e["dst"], e["transport"], e["detail"])),
        "path_types": dict(sorted(path_types.items())),
        "graphs": facts.graphs,
        "channel_counts": facts.channel_counts,
        "collectives": facts.collectives,
        "env": facts.env,
        "info_lines": facts.info_lines,
    }


def transports_by_pair(connections: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Unordered rank pair "a-b" (a < b) -> the connection entries between them, both directions."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in connections:
        a, b = sorted((c["src"], c["dst"]))
        out[pair_key(a, b)].append(c)
    return dict(out)
