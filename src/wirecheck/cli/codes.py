"""`wirecheck codes [CODE ...] [--markdown]`: the stable failure codes, what each means and what to do.

Without a code: every check's fail and warn codes, one line each. With codes (WC2021 ...): each one's
entry. --markdown prints the catalog as docs/failure-codes.md holds it. Exit 0, or 2 for a code no check
was ever given.
"""

from __future__ import annotations

import argparse
import sys

from wirecheck.cli.protocol import entry
from wirecheck.core import exit_codes

NAME = "codes"


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(NAME, help="the stable failure codes (WC2021 ...): what each means, what to do",
                                   description=__doc__.split("\n\n")[0], epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("code", nargs="*", help="codes to explain (e.g. WC2021); none: list them all")
    parser.add_argument("--markdown", action="store_true", help="print the catalog as docs/failure-codes.md")
    return parser


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from wirecheck.checks import catalog

    if args.markdown:
        print(catalog.markdown(), end="")
        return exit_codes.OK
    if not args.code:
        for row in catalog.rows():
            print(f"{row['fail']}  {row['warn']}  {row['check']:<24} {row['component']:<8} {row['means']}")
        return exit_codes.OK
    status = exit_codes.OK
    for code in args.code:
        text = catalog.describe(code)
        if text is None:
            print(f"wirecheck {NAME}: {code}: no check was given this code; `wirecheck codes` lists them", file=sys.stderr)
            status = exit_codes.BAD_INPUT
        else:
            print(text)
    return status


main = entry(NAME)
