"""Eager calls vs CUDA-graph replay at every size, to check the suite's per-size choice of timing path.

    python scripts/device/explore_paths.py [--placement ID] [--sizes 8B:512MiB:4] [--ops all_reduce,...]
                                           [--env NCCL_GRAPH_MIXING_SUPPORT=0 ...] [--out FILE.jsonl]

The suite times both paths only up to thresholds.yaml's graph_up_to and keeps the faster; here both are
timed at every size, with the suite's worker function, iteration counts and element checks, so the
table shows where the graph wins, where it loses, and whether graph_up_to leaves time on the table.
`--env` adds variables to the workers (e.g. NCCL_PROTO=Simple, NCCL_GRAPH_MIXING_SUPPORT=0) to see
what moves the graph path; the parent environment (NVLS switches and all) is passed through as always.
`--simulate NAME` runs the same plumbing on CPU/gloo (no graphs: a dry run of this script, no data).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from wirecheck.nccl import tests as nccl_tests
from wirecheck.measure.curve import GRAPH, choose_path, parse_sweep
from wirecheck.core.paths import suite_paths
from wirecheck.node.placement import Placement, enumerate_placements
from wirecheck.thresholds.file import load_thresholds


def _table(op: str, placement: Placement, results, graph_up_to: int | None, iters: int, replays: int) -> str:
    lines = [
        f"# {op} on {placement.id} ({placement.n_gpus} GPUs){' ' + str(placement.env) if placement.env else ''}: "
        f"eager calls vs CUDA-graph replay, slowest rank, mean of {iters} calls ({replays} replay(s) of them)",
        f"#{'size':>11} {'eager':>10} {'graph':>10} {'graph/':>7} {'faster':>7} {'busbw':>8} {'suite':>6}",
        f"#{'(B)':>11} {'(us)':>10} {'(us)':>10} {'eager':>7} {'':>7} {'(GB/s)':>8} {'uses':>6}",
    ]
    lost = []
    for r in results:
        eager, graph = r.eager_time_s, r.graph_time_s
        faster, best = choose_path(eager, graph)
        # What tests/test_collectives.py keeps: the faster path up to graph_up_to, eager above it.
        suite = faster if graph_up_to is not None and r.bytes <= graph_up_to else "eager"
        ratio = f"{graph / eager:.3f}" if graph else "-"
        lines.append(f" {r.bytes:>11} {eager * 1e6:>10.2f} {graph * 1e6 if graph else float('nan'):>10.2f} "
                     f"{ratio:>7} {faster:>7} {r.busbw / 1e9:>8.2f} {suite:>6}")
        if suite != faster:
            lost.append(f"{r.bytes} B ({(1 - best / eager) * 100:.1f} % faster on the graph)")
        if r.graph_note:
            lines.append(f"#   graph path: {r.graph_note}")
        if not r.ok:
            lines.append(f"#   WRONG: {r.wrong_summary()}")
    lines.append("# suite's choice (graph_up_to) leaves time on the table at: " + (", ".join(lost) if lost else "no size")
                 if any(r.graph_time_s is not None for r in results) else "# no graph times")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--placement", default="nvswitch-2gpu-0.1", help="placement id (default nvswitch-2gpu-0.1)")
    parser.add_argument("--sizes", default="8B:512MiB:4", help="FROM:TO:STEP (default 8B:512MiB:4)")
    parser.add_argument("--ops", default=",".join(nccl_tests.DEFAULT_OPS))
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="extra worker environment")
    parser.add_argument("--graph-replays", type=int, help="timed replays of the captured calls (default: thresholds.yaml)")
    parser.add_argument("--out", type=Path, help="JSON lines: one per op and size")
    parser.add_argument("--simulate", metavar="NAME", help="CPU/gloo dry run on a recorded topology")
    args = parser.parse_args(argv)

    thresholds = load_thresholds(suite_paths().thresholds)
    settings = thresholds.collective_settings(simulated=False)
    spec = parse_sweep(args.sizes)
    extra = dict(item.split("=", 1) for item in args.env)
    if args.simulate:
        from wirecheck.node.topo_text import load_recorded

        topo, backend = load_recorded(args.simulate, suite_paths().topologies), "gloo"
    else:
        from wirecheck.node import nvml

        topo, backend = nvml.read_topology(), "nccl"
    base = next((p for p in enumerate_placements(topo) if p.id == args.placement), None)
    if base is None:
        print(f"explore_paths: no placement {args.placement}", file=sys.stderr)
        return 2
    placement = Placement(base.klass, base.gpus, {**base.env, **extra})
    # Both paths at every size: graph_up_to at the top of the sweep.
    explore = dataclasses.replace(settings, graph_up_to=spec.sizes[-1])
    if args.graph_replays is not None:
        explore = dataclasses.replace(explore, graph_replays=args.graph_replays)
    ops = [op for op in args.ops.split(",") if op]
    outcome = nccl_tests.Outcome(placement)
    pool = nccl_tests.suite_pool([placement], backend, explore)
    try:
        nccl_tests.measure_suite(pool, placement, ops, spec.sizes, explore, outcome)
    finally:
        pool.close()
    out = open(args.out, "a", encoding="utf-8") if args.out else None
    try:
        for op in ops:
            results = outcome.suite.get(op, [])
            print(_table(op, placement, results, settings.graph_up_to, settings.iters, explore.graph_replays))
            print()
            for r in results:
                if out:
                    out.write(json.dumps({"op": op, "placement": placement.id, "env": extra, "nccl": outcome.suite_nccl,
                                          "suite_graph_up_to": settings.graph_up_to, "graph_replays": explore.graph_replays, **r.as_dict(),
                                          "faster": choose_path(r.eager_time_s, r.graph_time_s)[0]}) + "\n")
    finally:
        if out:
            out.close()
    for error in outcome.errors:
        print(f"ERROR: {error}")
    graphs = sum(1 for rs in outcome.suite.values() for r in rs if r.path == GRAPH)
    print(f"explore_paths: {graphs} of {sum(len(rs) for rs in outcome.suite.values())} sizes faster as graph replays")
    return 1 if outcome.errors else 0


if __name__ == "__main__":
    sys.exit(main())
