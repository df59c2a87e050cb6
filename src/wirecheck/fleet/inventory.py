"""The work of `wirecheck fleet inventory` (its options and usage: wirecheck.cli.fleet.inventory): this
node's NICs (InfiniBand/RoCE ports from /sys/class/infiniband, Ethernet from /sys/class/net), each GPU's
nearest NIC from `nvidia-smi topo -m` (or a recorded topology's NIC columns), the line rate a multi-node job
on all of its GPUs can use, and the network checks' verdicts; `run(args)` with the command's options parsed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from wirecheck.core import exit_codes
from wirecheck import checks
from wirecheck.node import network
from wirecheck.core.paths import suite_paths
from wirecheck.thresholds.file import ThresholdsError, load_thresholds
from wirecheck.core.verdict import FAIL


def inventory(args) -> dict:
    ports = network.ports_as_data(network.read_ports(args.sysfs_root))
    if args.simulate:
        from wirecheck.node.topo_text import load_recorded

        topo = load_recorded(args.simulate, suite_paths().topologies)
        paths, source = network.recorded_nic_paths(topo.source)
    else:
        paths, source = network.live_nic_paths()
    gpus = len(paths) if paths else 1
    rate, basis = network.line_rate(ports, gpus)
    return {"ports": ports, "gpu_nic_paths": paths, "paths_source": source, "gpus": gpus,
            "line_rate_bytes_per_s": rate, "line_rate_basis": basis}


def run(args) -> int:
    """`wirecheck fleet inventory` with its options parsed (wirecheck.cli.fleet.inventory): 0 no check failed,
    1 one did, 2 bad input."""
    try:
        thresholds = load_thresholds(Path(args.thresholds) if args.thresholds else suite_paths().thresholds)
        if args.profile:
            thresholds.profile(args.profile)
        inv = inventory(args)
    except (ThresholdsError, ValueError, OSError) as exc:
        print(f"wirecheck fleet inventory: {exc}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    verdicts = [
        checks.network.nic_ports_up(thresholds, ports=inv["ports"]),
        checks.network.nic_rate(thresholds, ports=inv["ports"], profile=args.profile),
        checks.network.nic_count(thresholds, ports=inv["ports"], profile=args.profile),
    ]
    if inv["gpu_nic_paths"]:
        verdicts += [checks.network.gpu_nic_affinity(thresholds, gpu=g, paths=p, source=inv["paths_source"],
                                                      profile=args.profile)
                     for g, p in sorted(inv["gpu_nic_paths"].items())]
    if args.json:
        print(json.dumps({**inv, "verdicts": [v.as_record() for v in verdicts]}, indent=1, default=str))
    else:
        print(f"NIC ports ({len(inv['ports'])}):")
        for p in inv["ports"]:
            rate = f"{p['rate_bytes_per_s'] * 8 / 1e9:g} Gb/s" if p["rate_bytes_per_s"] else "rate unknown"
            print(f"  {p['name']:14} {p['kind']:10} {str(p['state']):8} {str(p['phys_state'] or ''):9} {rate:14} "
                  f"{p['rate_text'] or ''} [{p['device_id'] or '-'}]")
        print(f"GPU-to-NIC paths ({inv['paths_source']}):")
        for g, p in sorted((inv["gpu_nic_paths"] or {}).items()):
            near = network.nearest_nic(p)
            print(f"  GPU{g}: nearest {near[0]} ({near[1]}); " + " ".join(f"{n}={c}" for n, c in p.items()))
        rate = inv["line_rate_bytes_per_s"]
        print(f"line rate for {inv['gpus']} GPU(s): " + (f"{rate / 1e9:.1f} GB/s ({inv['line_rate_basis']})" if rate
                                                        else f"unknown ({inv['line_rate_basis']})"))
        for v in verdicts:
            print(f"{v.outcome.upper():4} {v.check:18} {v.message}")
    return exit_codes.verdict(failed=any(v.outcome == FAIL for v in verdicts), simulated=False)
