"""`wirecheck nccl-tests`: nccl-tests beside the suite (wirecheck.nccl_tests parses its own arguments)."""

from __future__ import annotations

import argparse

NAME = "nccl-tests"


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(NAME, help="run nccl-tests beside the suite on the same placements and sizes",
                                   add_help=False)
    parser.set_defaults(passes_extra_args=True)
    return parser


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from wirecheck.nccl_tests import main

    return main(extra)
