"""`wirecheck fleet report DIR [--thresholds FILE] [--nodes FILE | --expect N] [--expect-network] [--json FILE] [--html FILE]
[--diagnosis FILE] [-q] [--full] [--jobs N]`

Judges a fleet's records together: one record per node in DIR (each node ran
`wirecheck validate ... --wirecheck-json DIR/$(hostname).jsonl`), plus any multi-node records
(`wirecheck.fleet.multinode`). For every node: its record is there and complete, its own verdicts (as
recorded where the record was judged under these very thresholds by this very wirecheck, else judged
again with them), every key figure (busbw per placement and collective at the floor size, tokens/s per
strategy and wire, one GPU's tokens/s, NIC line rate) against the other nodes' median (the fleet rule
of thresholds.yaml `fleet:`), each GPU's health figures (HBM copy and read, GEMM bf16 and fp8,
sustained TFLOP/s) against every other GPU of its model in the fleet (`fleet.<mode>.gpus`, naming
the node and the GPU), and the pair schedule's verdict on it. A node 10 % below its peers is named
even when it clears its own floors.

Linear in nodes (10,000 records in 40-53 s on 2 cores, docs/fleet.md): records are read and judged by one
process per CPU and kept as counts, failures and figures; each fleet verdict keeps the others'
median, scaled MAD and n, not their values. The output leads with the failures, then a summary
(nodes per state, the worst, each figure's spread); every node's row up to 50 nodes or with --full.

Exit codes: 0 every node passed (hardware); 1 a node failed, is missing or cut short, or a
multi-node run failed (or, with --expect-network, left no record); 2 bad input (no such directory,
a file that is not a wirecheck record, a malformed thresholds or node list file, a --json or --html
path that holds a record or is an input, refused before anything is read); 10 everything
passed but the records are a simulation.
"""

from __future__ import annotations

import argparse

from wirecheck.cli.protocol import entry
from wirecheck.fleet.settings import FULL_TABLE_UP_TO, MAX_LINES, PARALLEL_FROM

NAME = "report"
HELP = "judge every node's record together: own verdicts, the fleet rule, pairs"


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(NAME, help=HELP, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("directory", metavar="DIR", help="the results directory: one record file per node, named after it")
    p.add_argument("--thresholds", metavar="FILE", help="thresholds file (default: the one shipped with wirecheck)")
    who = p.add_mutually_exclusive_group()
    who.add_argument("--nodes", metavar="FILE", help="the nodes that must have a record, one name per line: a missing "
                                                     "one is a failed node")
    who.add_argument("--expect", type=int, metavar="N", help="how many node records there must be (when names are not known)")
    p.add_argument("--expect-network", action="store_true",
                   help="the job ran the multi-node step (`wirecheck fleet multinode`): a directory without its record "
                        "is a failure, as a missing node is")
    p.add_argument("--json", metavar="FILE", help="also write the fleet verdicts as JSON (for reports and dashboards)")
    p.add_argument("--html", metavar="FILE", help="also write a fleet page with figures (needs matplotlib)")
    p.add_argument("--jobs", type=int, metavar="N",
                   help="processes that read and judge the records at once (default: one per CPU; a directory of "
                        f"fewer than {PARALLEL_FROM} records is read by one)")
    p.add_argument("--diagnosis", metavar="FILE", help="a `wirecheck fleet diagnose --run` record: its findings as a "
                                                       "section of the report and the page")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="failures, counts and the figures a node was named in only (no warnings)")
    p.add_argument("--full", action="store_true",
                   help=f"every node's row and every failure and warning (by default a fleet of more than "
                        f"{FULL_TABLE_UP_TO} nodes lists its failed nodes and the first {MAX_LINES} failures)")
    return p


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from wirecheck.fleet import report  # here, not at the top: the other fleet commands do not read records

    return report.run(args)


main = entry("fleet", NAME)
