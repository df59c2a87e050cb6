"""`wirecheck judge`: judge recorded runs again (wirecheck.judge parses its own arguments)."""

from __future__ import annotations

import argparse

NAME = "judge"


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(NAME, help="judge recorded runs again against a thresholds file, without GPUs",
                                   add_help=False)
    parser.set_defaults(passes_extra_args=True)
    return parser


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from wirecheck.judge import main

    return main(extra)
