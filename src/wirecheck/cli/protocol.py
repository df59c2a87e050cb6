"""The one protocol every `wirecheck` subcommand follows, and how `wirecheck` finds them.

A subcommand is one module in wirecheck/cli/ (nothing else lists it) with:
- `NAME`: the word after `wirecheck` (`"nccl-tests"`);
- `add_parser(subparsers) -> argparse.ArgumentParser`: `subparsers.add_parser(NAME, help=..., ...)`
  with its options; a command that hands the arguments it does not know on (validate's to pytest,
  node-state's to validate after `--`) sets `parser.set_defaults(passes_extra_args=True)`, every other
  command refuses them with its own usage line;
- `run(args, extra) -> int`: the work, through the library, mapped to an exit code of
  wirecheck.core.exit_codes (the module is thin: parse, call the library, map the outcome);
- `main = entry(NAME)`: the same command called from Python, `main(argv) -> exit code` (self-tests,
  scripts that run `python -m wirecheck.cli.main NAME`).
A module imports its library inside `run`: `wirecheck topo` must not pay for thresholds or torch.

A command of commands is a package of the same shape one floor down: `wirecheck fleet` is
wirecheck/cli/fleet/, whose modules (report, inventory, multinode, diagnose) follow this same protocol
and are found by `commands(package)`; its parser makes them argparse subcommands, and each one's
`main = entry("fleet", NAME)`.

`wirecheck` itself (`dispatch`: find the commands, parse, run one) is here too, beside `entry`, which calls it:
wirecheck.cli.main is only the console script's name for it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import platform
import signal
import sys
from pathlib import Path
from types import ModuleType
from typing import Callable

from wirecheck.core import exit_codes

PROTOCOL = ("NAME", "add_parser", "run")
DESCRIPTION = ("validate that a multi-GPU node moves data as fast as its wiring allows, and read what it recorded: "
               "one command below per task (`wirecheck COMMAND --help` for its options)")


def commands(package: ModuleType | None = None, only: str | None = None) -> list[ModuleType]:
    """Every module of `package` (default wirecheck.cli; wirecheck.cli.fleet for `wirecheck fleet`'s) that
    is a subcommand, by NAME; a module with part of the protocol is an error that names what it lacks.
    `only`: the module of that NAME alone (its module's name is the NAME with `_` for `-`), or none."""
    if package is None:
        import wirecheck.cli as package

    found = []
    for info in pkgutil.iter_modules(package.__path__):
        if only is not None and info.name != only.replace("-", "_"):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        has = [name for name in PROTOCOL if hasattr(module, name)]
        if "NAME" in has:
            missing = [name for name in PROTOCOL if name not in has]
            if missing:
                raise TypeError(f"{module.__name__}: a wirecheck subcommand (NAME = {module.NAME!r}) without "
                                f"{', '.join(missing)}; see wirecheck.cli.protocol")
            found.append(module)
    return sorted((m for m in found if only is None or m.NAME == only), key=lambda m: m.NAME)


def entry(*names: str) -> Callable[[list[str] | None], int]:
    """`main(argv) -> exit code` of the subcommand `names` (`"topo"`, or `"fleet", "report"`), as `wirecheck
    names... argv...` runs it."""
    def main(argv: list[str] | None = None) -> int:
        return dispatch([*names, *(sys.argv[1:] if argv is None else argv)])

    main.__doc__ = f"`wirecheck {' '.join(names)} ARGV...` from Python: the exit code."
    return main


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """`wirecheck`'s parser with every command; with `command` (the word after `wirecheck`), that command's
    alone where there is one by that name: importing every command's module was 0.4 s of each start on this
    project's CPU machine, and the prolog's `validate --trust-recent` needs only its own."""
    parser = argparse.ArgumentParser(prog="wirecheck", description=DESCRIPTION)
    parser.add_argument("--version", action=PrintVersion,
                        help="the version, and where this wirecheck is installed (a checkout or a wheel)")
    found = (commands(only=command) if command else []) or commands()
    sub = parser.add_subparsers(dest="command", required=True, metavar="{" + ",".join(c.NAME for c in found) + "}")
    for command in found:
        command_parser = command.add_parser(sub)
        # Kept so that arguments a command does not take are refused with its own usage line.
        command_parser.set_defaults(run=command.run, command_parser=command_parser)
    return parser


def at_least_one(what: str, example: str) -> Callable[[str], int]:
    """An option's type: a whole number of `what` of at least 1 (GPUs, nodes, seconds), refused by argparse with
    the value, the bound and an example."""
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of {what}; write e.g. {example}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{value} {what}: at least 1 is needed; write e.g. {example}")
        return value
    return convert


def version_line() -> str:
    """`wirecheck --version`: the version (wirecheck.__version__, the one place it is written; every record's
    header keeps it too), the folder it runs from (an editable checkout's src/ or an environment's
    site-packages) and the Python."""
    import wirecheck

    return (f"wirecheck {wirecheck.__version__} from {Path(wirecheck.__file__).resolve().parent} "
            f"(Python {platform.python_version()})")


class PrintVersion(argparse.Action):
    """argparse's own version action wraps the line at the terminal's width; a path must stay whole."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit()


def dispatch(argv: list[str] | None = None) -> int:
    """`wirecheck ARGV...`: the exit code."""
    from wirecheck.workers import bytecode

    # Before the command's imports: where the node's Python keeps no bytecode, they come from wirecheck's cache
    # instead of being compiled from source at every start.
    bytecode.use_here()
    # Imported here, not with the module: every command imports this module for `entry`, and importing a
    # command must not load the thresholds package (the checks' registry) before the command runs.
    from wirecheck.thresholds.declared import DeclarationsError

    try:
        return _main(argv)
    except DeclarationsError as exc:  # the install is broken (no checks to read limits against), whatever the command
        print(f"wirecheck: {exc}", file=sys.stderr)
        return exit_codes.INTERNAL_ERROR
    except Exception as exc:  # noqa: BLE001 - a bug of ours must never exit 1, which says a check failed (drain)
        import traceback

        traceback.print_exc()
        given = sys.argv[1:] if argv is None else argv
        named = given[0] if given and not given[0].startswith("-") else None
        print(f"wirecheck{' ' + named if named else ''}: crashed ({type(exc).__name__}: {exc}): a bug of wirecheck, "
              f"not a finding about the node; the traceback above is for a bug report; exit {exit_codes.HARNESS_CRASH}",
              file=sys.stderr)
        return exit_codes.HARNESS_CRASH


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    named = argv[0] if argv and not argv[0].startswith("-") else None
    args, extra = build_parser(named).parse_known_args(argv)
    if extra and not getattr(args, "passes_extra_args", False):
        args.command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.run(args, extra)
    except BrokenPipeError:
        # The reader went away (`wirecheck topo | head`): stop quietly, as a command killed by
        # SIGPIPE does. stdout goes to devnull so that the flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
