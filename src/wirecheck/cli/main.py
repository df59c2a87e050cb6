"""`wirecheck` command: topo (what the node is wired like), limits (every limit the node would be held to),
memory (the memory model), advise (which strategy and GPUs for a model, from the node's records),
validate (run the validation suite on this node, or in simulation without a driver), plan (how long
a level takes, predicted), node-state (what a validate run says about the node, for a drain hook),
judge (judge recorded runs again), calibrate (floors from the site's clean runs), report (one page from a record, with the trend),
diagnose (localize a record's failures: which GPU, pair or link), fleet (report,
inventory, multinode: beyond one node), nccl-tests (the reference tool beside the suite).

Each command is a module of this package that follows wirecheck.cli.protocol (NAME,
add_parser(subparsers), run(args, extra) -> exit code); this module only finds them, parses and
dispatches. A new command is one module.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import sys
from pathlib import Path

import wirecheck
from wirecheck.cli.protocol import commands
from wirecheck.core import exit_codes
from wirecheck.thresholds.declared import DeclarationsError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wirecheck", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action=PrintVersion,
                        help="the version, and where this wirecheck is installed (a checkout or a wheel)")
    found = commands()
    sub = parser.add_subparsers(dest="command", required=True, metavar="{" + ",".join(c.NAME for c in found) + "}")
    for command in found:
        command_parser = command.add_parser(sub)
        # Kept so that arguments a command does not take are refused with its own usage line.
        command_parser.set_defaults(run=command.run, command_parser=command_parser)
    return parser


def version_line() -> str:
    """`wirecheck --version`: the version (wirecheck.__version__, the one place it is written; every record's
    header keeps it too), the folder it runs from (an editable checkout's src/ or an environment's
    site-packages) and the Python."""
    return (f"wirecheck {wirecheck.__version__} from {Path(wirecheck.__file__).resolve().parent} "
            f"(Python {platform.python_version()})")


class PrintVersion(argparse.Action):
    """argparse's own version action wraps the line at the terminal's width; a path must stay whole."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit()


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except DeclarationsError as exc:  # the install is broken (no checks to read limits against), whatever the command
        print(f"wirecheck: {exc}", file=sys.stderr)
        return exit_codes.INTERNAL_ERROR


def _main(argv: list[str] | None) -> int:
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
