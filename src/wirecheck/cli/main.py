"""`wirecheck` command: topo (what the node is wired like), limits (every limit the node would be held to),
memory (the memory model), advise (which strategy and GPUs for a model, from the node's records),
validate (run the validation suite on this node, or in simulation without a driver), plan (how long
a level takes, predicted), node-state (what a validate run says about the node, for a drain hook),
judge (judge recorded runs again), calibrate (floors from the site's clean runs), report (one page from a record, with the trend),
diagnose (localize a record's failures: which GPU, pair or link), fleet (report,
inventory, multinode: beyond one node), nccl-tests (the reference tool beside the suite).

Each command is a module with NAME, add_parser(subparsers) and run(args, extra_args) -> exit
code; this module only parses and dispatches. A new command is one module and one line in
COMMANDS.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from wirecheck.cli import advise as cli_advise, calibrate as cli_calibrate, diagnose as cli_diagnose, fleet as cli_fleet, limits as cli_limits, \
    memory as cli_memory
from wirecheck.cli import node_state as cli_node_state, plan as cli_plan
from wirecheck.cli import report as cli_report, topo as cli_topo, validate as cli_validate
from wirecheck.cli.passthrough import judge, nccl_tests

COMMANDS = (cli_topo, cli_limits, cli_memory, cli_advise, cli_validate, cli_plan, cli_node_state, judge, cli_calibrate,
            cli_report, cli_diagnose, cli_fleet, nccl_tests)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wirecheck", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="{" + ",".join(c.NAME for c in COMMANDS) + "}")
    for command in COMMANDS:
        command_parser = command.add_parser(sub)
        # Kept so that arguments a command does not take are refused with its own usage line.
        command_parser.set_defaults(run=command.run, command_parser=command_parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args, extra = build_parser().parse_known_args(argv)
    if extra and not getattr(args, "passes_extra_args", False):
        args.command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.run(args, extra)
    except BrokenPipeError:
        # The reader went away (`wirecheck topo | head`): stop quietly, as a command killed by
        # SIGPIPE does. stdout goes to devnull so that the flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
