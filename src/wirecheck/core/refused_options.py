"""Options of other pytest plugins that the suite refuses, in one place: the suite's plugin refuses them where the
plugin is loaded (bare pytest), and `wirecheck validate`, which loads only the suite's plugins, says the same when
pytest does not know them."""

from __future__ import annotations

from typing import Sequence

XDIST = ("-n (pytest-xdist): the suite measures the node's GPUs, which tests in parallel processes would share, and "
         "each process would keep a record of its own; run it without -n (the suite spreads its own work over the GPUs)")


def xdist_asked(args: Sequence[str]) -> bool:
    """Whether `args` (pytest's, before a bare --) ask pytest-xdist for processes: -n N, -nN, --numprocesses."""
    for arg in args:
        if arg == "--":
            return False
        if arg in ("-n", "--numprocesses") or arg.startswith("--numprocesses=") or \
                (arg.startswith("-n") and arg[2:].isalnum() and not arg.startswith("--")):
            return True
    return False
