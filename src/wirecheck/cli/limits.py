"""`wirecheck limits`: every limit a node would be held to, before anything runs.

For each placement and op, each GPU figure, host and peer copies and training: the bound and its
unit, the rule that made it (measured: a table entry for this hardware; derived: from the node's own
peaks; peers; simulated) and its source, so a wrong number is visible at a glance. The node is this
one (NVML), the one a profile describes (--profile NAME: its hardware and recorded topology), a
recorded topology (--simulate TOPO: a `wirecheck topo --save` snapshot carries the hardware, a
`topo -m` text only the links) or the node a run's record was taken on (--record RUN.jsonl).
--schema prints the JSON Schema of the thresholds file instead (thresholds.schema.json, for editors).
"""

from __future__ import annotations

import argparse
import json
import sys

from wirecheck.cli.protocol import entry
from wirecheck.core import exit_codes
from wirecheck.core.levels import DEFAULT_LEVEL, LEVELS
from wirecheck.core.paths import suite_paths
from wirecheck.node import hardware as node_hardware
from wirecheck.node import nvml, profile_topology, visible
from wirecheck.node.topo_text import DEFAULT_SIMULATION
from wirecheck.node.topology import Gpu, NvLink, Topology
from wirecheck.records.file import RecordFileError, read_run
from wirecheck.thresholds import listing
from wirecheck.thresholds.file import load_thresholds
from wirecheck.thresholds.schema import schema_of

NAME = "limits"
PROG = f"wirecheck {NAME}"


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        NAME, help="list every limit a node would be held to (bound, unit, rule, source), before running anything",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--profile", metavar="NAME", help="the node a thresholds profile describes (profiles.NAME)")
    where.add_argument("--simulate", nargs="?", const=DEFAULT_SIMULATION, metavar="TOPO",
                       help=f"a recorded topology (a NAME in fixtures/pytest_wirecheck/topologies, a topo -m text or "
                            f"snapshot JSON; default {DEFAULT_SIMULATION})")
    where.add_argument("--record", metavar="RUN.jsonl", help="the node a run's record was taken on")
    parser.add_argument("--level", choices=LEVELS, default=DEFAULT_LEVEL,
                        help=f"the checks of this level (default {DEFAULT_LEVEL})")
    parser.add_argument("--thresholds", metavar="PATH", help="thresholds file; default: the suite's")
    parser.add_argument("--json", action="store_true", help="print JSON: one object per limit")
    parser.add_argument("--schema", action="store_true",
                        help="print the JSON Schema of thresholds.yaml (what thresholds.schema.json holds, for editors) "
                             "and nothing else")
    return parser


def _from_record(path: str) -> tuple[Topology, node_hardware.Hardware | None, bool, str]:
    """The node a record's header describes: its GPUs, link matrix and (from this version on) hardware."""
    record = read_run(path)
    header = record.run
    known = node_hardware.Hardware.from_dict(header.get("hardware"))
    matrix = header.get("matrix") or []
    speed = int(known.nvlink_speed / 1e6) if known and known.nvlink_speed else None
    gpus = tuple(Gpu(index=g["index"], name=g.get("name"), bus_id=g.get("bus_id"), memory_bytes=g.get("memory_bytes"),
                     nvlinks=tuple(NvLink(index=k, active=True, remote_type="switch" if header.get("fabric") == "nvswitch"
                                          else "gpu", speed_mbps=speed) for k in range(g.get("nvlinks_active") or 0)))
                 for g in header.get("gpus") or [])
    if not gpus:
        raise ValueError(f"--record {path}: the record names no GPU ({header.get('unavailable') or 'no topology'}); "
                         "pass --profile NAME or --simulate TOPO instead")

    def nv(cell: str) -> int:
        return int(cell[2:]) if isinstance(cell, str) and cell.startswith("NV") and cell[2:].isdigit() else 0

    n = len(gpus)
    topology = Topology(
        gpus=gpus, nvlinks=tuple(tuple(nv(matrix[i][j]) if i < len(matrix) and j < len(matrix[i]) else 0
                                       for j in range(n)) for i in range(n)),
        pcie_paths=tuple(tuple(None if i == j or nv(matrix[i][j]) else matrix[i][j] for j in range(n)) for i in range(n)),
        source=f"the record {path}", declared_fabric=header.get("fabric"))
    what = f"the node recorded in {path}"
    if "hardware" not in header:
        # As `wirecheck judge` judges such a record: every table entry applies as it is.
        what += " (a record without the hardware reading: table entries apply as they are)"
    return topology, known, bool(header.get("simulated")), what


def _node(args, thresholds) -> tuple[Topology, node_hardware.Hardware | None, bool, str]:
    paths = suite_paths()
    named = profile_topology.profile_name(args.simulate)
    if args.profile or named:  # `--simulate profile:NAME` is the node the profile describes, its hardware too
        name = args.profile or named
        profile = thresholds.profile(name)  # an unknown name is refused, naming the known ones
        topology = profile_topology.simulated(profile_topology.PREFIX + name, thresholds, paths.topologies)
        return topology, node_hardware.from_profile(profile), False, f"the node profile {name} describes"
    if args.simulate is not None:
        topology = profile_topology.simulated(args.simulate, thresholds, paths.topologies)
        return topology, node_hardware.from_topology(topology), False, f"the node {topology.source} describes"
    if args.record:
        return _from_record(args.record)
    topology = visible.from_environment(nvml.read_topology())
    return topology, node_hardware.from_topology(topology), False, "this node (NVML)"


def schema_text() -> str:
    """The JSON Schema as thresholds.schema.json holds it (a self-test keeps the two equal)."""
    return json.dumps(schema_of(suite_paths().thresholds), indent=1, ensure_ascii=False)


def run(args: argparse.Namespace, extra: list[str]) -> int:
    if args.schema:
        if args.profile or args.simulate or args.record or args.thresholds:
            print(f"{PROG}: --schema prints the schema of the thresholds file format, made from the shipped "
                  "file; drop --profile, --simulate, --record and --thresholds", file=sys.stderr)
            return exit_codes.BAD_INPUT
        print(schema_text())
        return exit_codes.OK
    try:
        thresholds = load_thresholds(args.thresholds or suite_paths().thresholds)
        topology, hardware, simulated, what = _node(args, thresholds)
    except nvml.NvmlUnavailable as exc:
        print(f"{PROG}: {nvml.without_simulate_hint(exc)}; for a node type without its GPUs pass --profile NAME "
              "(or --simulate TOPO, --record RUN.jsonl)", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except (ValueError, OSError, RecordFileError) as exc:  # ThresholdsError is a ValueError
        print(f"{PROG}: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    rows = listing.node_limits(thresholds, topology, hardware, args.level, simulated)
    if args.json:
        print(json.dumps({"node": what, "hardware": hardware.as_dict() if hardware else None, "level": args.level,
                          "simulated": simulated, "thresholds": str(thresholds.path),
                          "limits": [r.as_json() for r in rows]}, indent=1))
        return exit_codes.OK
    title = (f"limits at {args.level} on {what}: {hardware.describe() if hardware else 'hardware unknown'}"
             + (" (a simulated run: CPU sanity limits)" if simulated else "") + f"; {thresholds.path}")
    print("\n".join(listing.text(rows, title)))
    return exit_codes.OK


main = entry(NAME)
