"""`wirecheck fleet multinode [options] [-- multinode options]`: torchrun with c10d rendezvous on
`wirecheck.fleet.multinode`, run once on every node (under Slurm: `srun --ntasks-per-node=1`).

It only builds the torchrun command the README documents and runs it with this environment
(NCCL switches pass through); under Slurm the node count, the rendezvous host (the job's first node)
and the job id come from Slurm's variables. When torchrun cannot reach or complete the rendezvous it
says so in one line that names the endpoint and the fix, instead of leaving the operator with a C++
stack. Exit status: torchrun's (0 every rank passed; 1 a rank failed: a verdict, a broken measurement,
bad input), 10 when every rank exited 10 (a simulation that failed nothing, which torchrun reports as
failed ranks), 2 when the rendezvous failed or an option is missing, and 128+N when a signal stopped it
(SIGTERM 143, SIGHUP 129, Ctrl-C 130): SIGTERM and SIGHUP are passed on to torchrun, which passes them
to the ranks, whose record ends naming the signal; Ctrl-C at a terminal reaches torchrun itself.
"""

from __future__ import annotations

import argparse

from wirecheck.cli.protocol import entry
from wirecheck.fleet.settings import DEFAULT_JOIN_TIMEOUT_S, DEFAULT_PORT

NAME = "multinode"
HELP = "torchrun (c10d) on wirecheck.fleet.multinode: collectives across nodes and pairs"


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(NAME, help=HELP, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nnodes", type=int, help="nodes in the job (default: $SLURM_JOB_NUM_NODES)")
    p.add_argument("--nproc-per-node", type=int, help="GPUs per node (default: $CUDA_VISIBLE_DEVICES, else nvidia-smi -L; "
                                                      "1 with --simulate)")
    p.add_argument("--rdzv-endpoint", help=f"HOST:PORT of the c10d rendezvous (default: the job's first node:{DEFAULT_PORT})")
    p.add_argument("--rdzv-id", help="job id shared by every node (default: $SLURM_JOB_ID)")
    p.add_argument("--join-timeout", type=int, default=DEFAULT_JOIN_TIMEOUT_S,
                   help=f"seconds to wait for every node to join (default {DEFAULT_JOIN_TIMEOUT_S})")
    p.add_argument("--dry-run", action="store_true", help="print the torchrun command and exit")
    p.add_argument("multinode_args", nargs=argparse.REMAINDER,
                   help="after --: options for wirecheck.fleet.multinode (--wirecheck-json PATH, --simulate, --ops ...)")
    return p


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from wirecheck.fleet import launch  # here, not at the top: only this command starts torchrun

    return launch.run(args)


main = entry("fleet", NAME)
