"""`wirecheck fleet diagnose (FLEET_REPORT.json | RECORD_DIR) [--good NODE,...] [--run] [--nodes FILE]`

Across nodes, which node or which path is slow. From a fleet report (`wirecheck fleet report --json`) or the
records directory it is made from: the suspects (nodes the pair schedule named, both ends of a slow link,
a NIC line rate below the fleet's, any other failed node with a record) and the known-good nodes (passed
everything; --good names them instead). Each suspect is paired with 2-3 distinct good partners, the
suspects with each other once, and a few pairs of two good nodes are the reference measured alongside.
Without --run the plan is printed. With --run the pairs are measured by the multi-node step the fleet
already runs (`wirecheck fleet multinode -- --pair-list ...`): under Slurm one `srun` over the plan's nodes
inside this allocation, as scripts/slurm/fleet-acceptance.sbatch starts it; for a simulated fleet, one
torchrun agent per node on this machine (CPU ranks, gloo). `--pairs-record FILE` judges a pair run made by
hand instead. The findings go to a record of their own (verdicts of check `diagnosis`, as
`wirecheck diagnose` writes them), which `wirecheck fleet report DIR --diagnosis FILE` shows.

Exit codes (wirecheck.core.exit_codes, as `wirecheck diagnose`): 0 nothing to localize (no suspect), 20
found (a node or a path is named), 21 not reproduced (every suspect fine with its partners), 22 not
localized (slow with some partners only, or not measured), 23 planned (without --run), 2 bad input.
"""

from __future__ import annotations

import argparse

from wirecheck.cli.protocol import entry

NAME = "diagnose"
HELP = "which node or which path is slow: each suspect paired with good nodes"


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(NAME, help=HELP, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", metavar="FLEET_REPORT.json|RECORD_DIR",
                   help="`wirecheck fleet report --json` output, or the directory of node records it judges")
    p.add_argument("--good", metavar="NODE,...", help="the known-good partners to pair with (default: every node that "
                                                      "passed everything)")
    p.add_argument("--nodes", metavar="FILE", help="the fleet's nodes, one per line (as `fleet report --nodes`): only "
                                                   "these count; a listed one without a record is left out, said so")
    p.add_argument("--leaves", metavar="FILE", help="'NODE LEAF' per line: which leaf switch each node is on, so that "
                                                    "partners on another leaf are taken first (the records do not say)")
    p.add_argument("--run", dest="run_pairs", action="store_true", help="measure the pairs and name the node or path")
    p.add_argument("--pairs-record", metavar="FILE", help="judge this pair run's record (`wirecheck fleet multinode -- "
                                                          "--pair-list ...` made by hand) instead of running one")
    p.add_argument("--json", dest="out", metavar="PATH", help="where the diagnosis record goes (default: a new "
                   "fleet-diagnosis-<UTC>-<host>-<pid>.jsonl in .wirecheck/); the pair run's record goes beside it "
                   "(<name>.pairs.jsonl): under Slurm on a filesystem every node sees")
    p.add_argument("--thresholds", metavar="FILE", help="thresholds file (default: the one shipped with wirecheck)")
    p.add_argument("--pair-worker", action="append", default=[], metavar="NODE=MODULE:FUNCTION",
                   help="a simulated run's pair worker for one node (self-tests inject a slow node through it)")
    return p


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from wirecheck.fleet import diagnose  # here, not at the top: the plan and the pairs' judging are this command's alone

    return diagnose.run(args)


main = entry("fleet", NAME)
