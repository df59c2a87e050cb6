"""`wirecheck fleet COMMAND`: beyond one node. report: judge every node's record together (own verdicts,
the fleet rule, pairs); inventory: this node's network; multinode: collectives across nodes (torchrun on
wirecheck.fleet.multinode, run on every node); diagnose: which node or path is slow.
`wirecheck fleet COMMAND --help` for a command's options."""

from __future__ import annotations

import argparse

from wirecheck.cli.protocol import commands, entry

NAME = "fleet"


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        NAME, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        help="fleet acceptance: judge every node's record together (report), this node's network (inventory), "
             "collectives across nodes through torchrun (multinode), which node or path is slow (diagnose)")
    # Each command is a module of this package under wirecheck.cli.protocol, found as `wirecheck`'s are: a
    # new one is one module. Their modules import nothing of the fleet's until they run.
    import wirecheck.cli.fleet as package

    found = commands(package)
    sub = parser.add_subparsers(dest="fleet_command", required=True, title="commands",
                                metavar="{" + ",".join(c.NAME for c in found) + "}")
    for command in found:
        # Each command's own parser refuses the arguments it does not take, with its own usage line.
        command_parser = command.add_parser(sub)
        command_parser.set_defaults(fleet_run=command.run, command_parser=command_parser)
    return parser


def run(args: argparse.Namespace, extra: list[str]) -> int:
    return args.fleet_run(args, extra)


main = entry(NAME)
