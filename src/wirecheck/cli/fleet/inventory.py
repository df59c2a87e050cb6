"""`wirecheck fleet inventory [--json] [--simulate FILE|NAME] [--sysfs-root DIR]`: this node's NICs
(InfiniBand/RoCE ports from /sys/class/infiniband, Ethernet from /sys/class/net), each GPU's nearest
NIC from `nvidia-smi topo -m` (or a recorded topology's NIC columns), the line rate a multi-node job
on all of its GPUs can use, and the network checks' verdicts.

Exit codes: 0 no check failed (a warning or a skip is not a failure); 1 a check failed; 2 bad input.
"""

from __future__ import annotations

import argparse

from wirecheck.cli.protocol import entry

NAME = "inventory"
HELP = "this node's NICs, GPU-to-NIC paths and line rate"


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(NAME, help=HELP, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print JSON: ports, paths, line rate, verdicts")
    p.add_argument("--simulate", metavar="FILE|NAME",
                   help="GPU-to-NIC paths from a recorded `topo -m` text instead of nvidia-smi (ports are still this machine's)")
    p.add_argument("--sysfs-root", default="/", metavar="DIR", help="filesystem root holding sys/class (default /)")
    p.add_argument("--thresholds", metavar="FILE", help="thresholds file (default: the one shipped with wirecheck)")
    p.add_argument("--profile", help="expected node (profiles: nic_ports, nic_rate)")
    return p


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from wirecheck.fleet import inventory  # here, not at the top: reading NICs needs none of the other commands' modules

    return inventory.run(args)


main = entry("fleet", NAME)
