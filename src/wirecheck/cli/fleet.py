"""`wirecheck fleet COMMAND`: report (judge a fleet's records), inventory (this node's network),
multinode (torchrun on wirecheck.fleet.multinode, run on every node), diagnose (which node or path is
slow). Each of them parses its own
arguments in its fleet module (`main(argv) -> exit code`); this command names them and hands the
rest of the line over."""

from __future__ import annotations

import argparse
import importlib
import sys

from wirecheck.cli.protocol import entry
from wirecheck.core import exit_codes

NAME = "fleet"
COMMANDS = {
    "report": ("wirecheck.fleet.report", "judge every node's record together: own verdicts, the fleet rule, pairs"),
    "inventory": ("wirecheck.fleet.inventory", "this node's NICs, GPU-to-NIC paths and line rate"),
    "multinode": ("wirecheck.fleet.launch", "torchrun (c10d) on wirecheck.fleet.multinode: collectives across nodes and pairs"),
    "diagnose": ("wirecheck.fleet.diagnose", "which node or which path is slow: each suspect paired with good nodes"),
}


def usage() -> str:
    lines = ["usage: wirecheck fleet COMMAND [options]", "", "commands:"]
    lines += [f"  {name:10} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines.append("\n`wirecheck fleet COMMAND --help` for a command's options")
    return "\n".join(lines)


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        NAME, add_help=False,
        help="fleet acceptance: judge every node's record together (report), this node's network (inventory), "
             "collectives across nodes through torchrun (multinode), which node or path is slow (diagnose)")
    parser.set_defaults(passes_extra_args=True)
    return parser


def run(args: argparse.Namespace, extra: list[str]) -> int:
    if not extra or extra[0] in ("-h", "--help"):
        print(usage())
        return exit_codes.OK if extra else exit_codes.BAD_INPUT
    name, rest = extra[0], extra[1:]
    if name not in COMMANDS:
        print(f"wirecheck fleet: unknown command {name!r}\n{usage()}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    # Imported when used: `wirecheck fleet inventory` must not pay for the report's modules.
    return importlib.import_module(COMMANDS[name][0]).main(rest)


main = entry(NAME)
