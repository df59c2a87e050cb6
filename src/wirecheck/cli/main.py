"""`wirecheck` command: topo (what the node is wired like), limits (every limit the node would be held to),
memory (the memory model), advise (which strategy and GPUs for a model, from the node's records),
validate (run the validation suite on this node, or in simulation without a driver), plan (how long
a level takes, predicted), node-state (what a validate run says about the node, for a drain hook),
judge (judge recorded runs again), calibrate (floors from the site's clean runs), report (one page from a record, with the trend),
diagnose (localize a record's failures: which GPU, pair or link), fleet (report,
inventory, multinode: beyond one node), nccl-tests (the reference tool beside the suite).

Each command is a module of this package that follows wirecheck.cli.protocol (NAME,
add_parser(subparsers), run(args, extra) -> exit code), which finds them, parses and dispatches
(`protocol.dispatch`); this module is the console script's name for it. A new command is one module.
"""

from __future__ import annotations

import sys

from wirecheck.cli.protocol import build_parser, dispatch

main = dispatch
__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    sys.exit(main())
