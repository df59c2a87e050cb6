"""`wirecheck topo`: what the node is wired like (link matrix, fabric, groups, placements,
pinning advice), from NVML or from a recorded topology."""

from __future__ import annotations

import argparse
import json
import sys

from wirecheck.cli.protocol import entry
from wirecheck.core import exit_codes
from wirecheck.node import nvml, visible
from wirecheck.core.paths import suite_paths
from wirecheck.node.placement import enumerate_placements, pinning_advice
from wirecheck.node.topo_text import DEFAULT_SIMULATION
from wirecheck.node.topology import Topology

NAME = "topo"


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        NAME, help="show the NVLink/PCIe topology, fabric, groups, placements and pinning advice",
        description=__doc__,
    )
    from wirecheck.core.paths import suite_paths
    from wirecheck.node.topo_text import recorded_names

    names = ", ".join(recorded_names(suite_paths().topologies))  # only this command's parser is built: no cost elsewhere
    parser.add_argument("--simulate", nargs="?", const=DEFAULT_SIMULATION, metavar="FILE|NAME",
                        help=f"read a recorded topology (topo -m text, snapshot JSON, profile:PROFILE or a NAME of "
                             f"the recorded ones: {names}; default {DEFAULT_SIMULATION}) instead of NVML")
    parser.add_argument("--json", action="store_true", help="print JSON: fabric, gpus, matrix, groups, placements")
    parser.add_argument("--save", metavar="FILE", help="write a snapshot JSON that --simulate FILE replays")
    return parser


def _topology(simulate: str | None) -> Topology:
    if simulate is not None:
        from wirecheck.node import profile_topology
        from wirecheck.thresholds.file import load_thresholds

        paths = suite_paths()
        thresholds = load_thresholds(paths.thresholds) if profile_topology.profile_name(simulate) else None
        return profile_topology.simulated(simulate, thresholds, paths.topologies)
    # The GPUs this process may use, as `wirecheck validate` sees them (placement ids match).
    return visible.from_environment(nvml.read_topology())


def topo_json(topo: Topology) -> dict:
    return {
        "fabric": topo.fabric,
        "source": topo.source,
        "gpus": [{"index": g.index, "name": g.name, "bus_id": g.bus_id, "nvlinks_active": topo.nvlinks_up(g.index),
                  "nvlinks": len(g.nvlinks), "memory_bytes": g.memory_bytes} for g in topo.gpus],
        "matrix": topo.matrix(),
        "groups": [[topo.gpus[p].index for p in group] for group in topo.groups],
        "placements": [{"id": p.id, "class": p.klass, "gpus": list(p.gpus)} for p in enumerate_placements(topo)],
    }


def topo_text(topo: Topology) -> str:
    n = topo.n_gpus
    head = "      " + "".join(f"GPU{topo.gpus[j].index:<4}" for j in range(n))
    rows = [head] + [f"GPU{topo.gpus[i].index:<3}" + "".join(f"{topo.cell(i, j):<7}" for j in range(n)) for i in range(n)]
    out = [f"source: {topo.source}", *rows, "", f"fabric: {topo.fabric}"]
    out.append("NVLink groups: " + " ".join("{" + ",".join(str(topo.gpus[p].index) for p in g) + "}" for g in topo.groups))
    for g in topo.gpus:
        if g.nvlinks:
            speeds = sorted({link.speed_mbps for link in g.nvlinks if link.active and link.speed_mbps})
            speed = "/".join(f"{s / 1000:.3f} GB/s" for s in speeds) or "speed n/a"
            out.append(f"GPU{g.index}: {g.name or '?'} {g.bus_id or ''}  NVLinks {g.active_links}/{len(g.nvlinks)} active, {speed} per link")
        elif g.name:
            out.append(f"GPU{g.index}: {g.name}")
    out += ["", "placements (use with pytest -k or --placement):"]
    out += [f"  {p.id:34} {p.klass}" for p in enumerate_placements(topo)]
    out += ["", "pinning:"]
    sizes = sorted({2, 4, 8, n} & set(range(2, n + 1))) if n > 1 else []
    out += [f"  {pinning_advice(topo, k)}" for k in sizes]
    return "\n".join(out)


def run(args: argparse.Namespace, extra: list[str]) -> int:
    try:
        topo = _topology(args.simulate)
    except (ValueError, OSError, nvml.NvmlUnavailable) as exc:
        print(f"wirecheck topo: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    if args.save:
        try:
            topo.save(args.save)
        except OSError as exc:
            print(f"wirecheck topo: --save {args.save}: cannot write it ({exc.strerror or exc}); pass a writable path",
                  file=sys.stderr)
            return exit_codes.BAD_INPUT
        print(f"saved the topology snapshot to {args.save}", file=sys.stderr)
    print(json.dumps(topo_json(topo), indent=1) if args.json else topo_text(topo))
    return exit_codes.OK


main = entry(NAME)
