"""`wirecheck fleet COMMAND`: report (judge a fleet's records), inventory (this node's network),
multinode (torchrun on wirecheck.fleet.multinode, run on every node), diagnose (which node or path is slow)."""

from __future__ import annotations

import sys

from wirecheck.core import exit_codes

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


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return exit_codes.OK if argv else exit_codes.BAD_INPUT
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"wirecheck fleet: unknown command {name!r}\n{usage()}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    import importlib

    return importlib.import_module(COMMANDS[name][0]).main(rest)


if __name__ == "__main__":
    sys.exit(main())
