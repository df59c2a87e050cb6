"""`wirecheck fleet report|inventory|multinode|diagnose`: beyond one node (wirecheck.fleet.cli parses its own
arguments)."""

from __future__ import annotations

import argparse

NAME = "fleet"


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        NAME, add_help=False,
        help="fleet acceptance: judge every node's record together (report), this node's network (inventory), "
             "collectives across nodes through torchrun (multinode), which node or path is slow (diagnose)")
    parser.set_defaults(passes_extra_args=True)
    return parser


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from wirecheck.fleet.cli import main

    return main(extra)
