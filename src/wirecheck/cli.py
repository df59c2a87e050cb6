"""`wirecheck` command: topo (what the node is wired like), memory (the memory model),
validate (run the validation suite on this node, or in simulation without GPUs)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from wirecheck import nvml
from wirecheck.paths import suite_paths
from wirecheck.placement import enumerate_placements, pinning_advice
from wirecheck.topo_text import load_recorded
from wirecheck.topology import Topology

DEFAULT_SIMULATION = "h200-nvl-8"


def _topology(simulate: str | None) -> Topology:
    if simulate:
        return load_recorded(simulate, suite_paths().topologies)
    return nvml.read_topology()


def topo_json(topo: Topology) -> dict:
    return {
        "fabric": topo.fabric,
        "source": topo.source,
        "gpus": [{"index": g.index, "name": g.name, "bus_id": g.bus_id, "nvlinks_active": g.active_links,
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


def cmd_topo(args) -> int:
    try:
        topo = _topology(args.simulate)
    except (ValueError, OSError, nvml.NvmlUnavailable) as exc:
        print(f"wirecheck topo: {exc}", file=sys.stderr)
        return 2
    if args.save:
        topo.save(args.save)
        print(f"saved the topology snapshot to {args.save}", file=sys.stderr)
    print(json.dumps(topo_json(topo), indent=1) if args.json else topo_text(topo))
    return 0


def cmd_memory(args) -> int:
    from wirecheck.memory_model import format_memory_table

    print(format_memory_table(args.params, args.gpus, args.accounting, args.precision))
    return 0


def cmd_validate(args, pytest_args: list[str]) -> int:
    """Run the suite on this node; without a GPU, in simulation, and say so."""
    suite = suite_paths()
    cmd = [sys.executable, "-m", "pytest", str(suite.tests), "--rootdir", str(suite.root)]
    if not suite.checkout:
        # An installed suite lives in site-packages: keep pytest's cache out of it.
        cmd += ["-p", "no:cacheprovider"]
    if not any(a.startswith("--simulate") for a in pytest_args):
        try:
            nvml.read_topology()
        except nvml.NvmlUnavailable as exc:
            print(f"wirecheck validate: {exc}\nwirecheck validate: no GPU here: running in SIMULATION on the recorded "
                  f"topology {DEFAULT_SIMULATION} (CPU/gloo, nothing about this machine is validated)", file=sys.stderr)
            cmd.append(f"--simulate={DEFAULT_SIMULATION}")
    cmd += pytest_args
    print("wirecheck validate: " + " ".join(cmd), file=sys.stderr)
    return subprocess.call(cmd)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wirecheck", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    topo = sub.add_parser("topo", help="show the NVLink/PCIe topology, fabric, groups, placements and pinning advice")
    topo.add_argument("--simulate", nargs="?", const=DEFAULT_SIMULATION, metavar="FILE|NAME",
                      help=f"read a recorded topology (topo -m text, snapshot JSON or a NAME in fixtures/topologies; "
                           f"default {DEFAULT_SIMULATION}) instead of NVML")
    topo.add_argument("--json", action="store_true", help="print JSON: fabric, gpus, matrix, groups, placements")
    topo.add_argument("--save", metavar="FILE", help="write a snapshot JSON that --simulate FILE replays")
    mem = sub.add_parser("memory", help="predicted model-state memory per GPU for each strategy")
    mem.add_argument("--params", type=float, required=True, help="parameter count, e.g. 7.24e9")
    mem.add_argument("--gpus", type=int, required=True, help="number of GPUs (data-parallel ranks)")
    mem.add_argument("--accounting", choices=("article", "implementation"), default="article",
                     help="article: 2+2+8 bytes/param (default); implementation: how each library really stores it")
    mem.add_argument("--precision", choices=("bf16", "fp32"), default="bf16", help="training precision (default bf16)")
    sub.add_parser("validate", help="run the validation suite (extra arguments go to pytest)", add_help=False)
    sub.add_parser("nccl-tests", help="run nccl-tests beside the suite on the same placements and sizes", add_help=False)
    sub.add_parser("judge", help="judge recorded runs again against a thresholds file, without GPUs", add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "validate":
        return cmd_validate(None, argv[1:])
    if argv and argv[0] == "nccl-tests":
        from wirecheck.nccl_tests import main as nccl_tests_main

        return nccl_tests_main(argv[1:])
    if argv and argv[0] == "judge":
        from wirecheck.judge import main as judge_main

        return judge_main(argv[1:])
    args = build_parser().parse_args(argv)
    return {"topo": cmd_topo, "memory": cmd_memory}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
