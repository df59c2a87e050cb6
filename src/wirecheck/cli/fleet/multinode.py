"""`wirecheck fleet multinode [options] [-- multinode options]`: its options and usage. What it runs
(torchrun with c10d rendezvous on `wirecheck.fleet.multinode`, once on every node) and its exit
statuses: wirecheck.fleet.launch.
"""

from __future__ import annotations

import argparse

from wirecheck.cli.protocol import at_least_one, entry
from wirecheck.fleet.settings import DEFAULT_JOIN_TIMEOUT_S, DEFAULT_PORT

NAME = "multinode"
HELP = "torchrun (c10d) on wirecheck.fleet.multinode: collectives across nodes and pairs"


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(NAME, help=HELP, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nnodes", type=at_least_one("nodes", "4"), help="nodes in the job (default: $SLURM_JOB_NUM_NODES)")
    p.add_argument("--nproc-per-node", type=at_least_one("GPUs", "8"),
                   help="GPUs per node (default: $CUDA_VISIBLE_DEVICES, else nvidia-smi -L; 1 with --simulate)")
    p.add_argument("--rdzv-endpoint", help=f"HOST:PORT of the c10d rendezvous (default: the job's first node:{DEFAULT_PORT})")
    p.add_argument("--rdzv-id", help="job id shared by every node (default: $SLURM_JOB_ID)")
    p.add_argument("--join-timeout", type=at_least_one("seconds", "600"), default=DEFAULT_JOIN_TIMEOUT_S,
                   help=f"seconds to wait for every node to join (default {DEFAULT_JOIN_TIMEOUT_S})")
    p.add_argument("--dry-run", action="store_true", help="print the torchrun command and exit")
    p.add_argument("multinode_args", nargs=argparse.REMAINDER,
                   help="after --: options for wirecheck.fleet.multinode (--wirecheck-json PATH, --simulate, --ops ...)")
    return p


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from wirecheck.fleet import launch  # here, not at the top: only this command starts torchrun

    return launch.run(args)


main = entry("fleet", NAME)
