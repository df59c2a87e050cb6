"""The run levels: one set of tests, three moments an operator checks a node at (docs/levels.md).

- `quick`: before each job (a Slurm prolog, a Kubernetes node-problem check), so seconds: the
  inventory, link state and counters, NCCL's path, one large all_reduce per placement class and
  a few seconds of each GPU health check; no training.
- `acceptance`: after provisioning and nightly, minutes: every check (the default).
- `burn-in`: new hardware, hours under load (`--duration`): the inventory and GPU figures, then every GPU
  under the GEMM load while collectives cycle over every placement, in rounds, with the memory test between
  them (tests/test_burn_in.py, wirecheck.burnin), stopped at the first hard fault.

Each test declares the levels it belongs to (the plugin's `levels` marker); a test that declares
none belongs to DEFAULT_TEST_LEVELS. thresholds.yaml keys levels as identifiers (`burn_in`).
"""

from __future__ import annotations

import re

QUICK, ACCEPTANCE, BURN_IN = "quick", "acceptance", "burn-in"
LEVELS = (QUICK, ACCEPTANCE, BURN_IN)
DEFAULT_LEVEL = ACCEPTANCE
# A test that names no level: a full check, too slow for the pre-job level.
DEFAULT_TEST_LEVELS = (ACCEPTANCE, BURN_IN)

# What each level is for: the run's header line and the help say it.
PURPOSE = {
    QUICK: "before each job: inventory, link state and counters, NCCL's path, one large all_reduce per placement "
           "class, a few seconds of each GPU check; no training",
    ACCEPTANCE: "after provisioning and nightly: every check",
    BURN_IN: "new hardware, under load for --duration: every GPU under the GEMM load while collectives cycle over "
             "every placement, in rounds with the memory test between them; stops at the first hard fault",
}


# The longest --duration taken: a burn-in of new hardware lasts hours to a few days; a value past a week is
# a slip of the finger (1e9h, a forgotten unit), refused before the node is taken for it.
MAX_DURATION_S = 7 * 86400.0
MAX_DURATION = "7d"


def check_duration(seconds: float, text: str, round_s: float | None = None, round_from: str = "") -> float:
    """`seconds` (what --duration `text` says) when a burn-in can run for it: no longer than a week and, once
    the thresholds are known, no shorter than one of its rounds (`round_s`, read at `round_from`); else a
    ValueError naming the option and the fix."""
    if seconds > MAX_DURATION_S:
        raise ValueError(f"--duration {text}: longer than a week ({MAX_DURATION}), the longest burn-in taken; "
                         f"give at most --duration {MAX_DURATION} (e.g. --duration 48h), and run again for longer")
    if round_s is not None and seconds < round_s:
        raise ValueError(f"--duration {text}: shorter than one burn-in round ({round_s:g} s, {round_from}), so no "
                         f"round would run; give at least --duration {_whole(round_s)} (e.g. --duration 30min), or "
                         "--level quick for a check of seconds")
    return seconds


def _whole(seconds: float) -> str:
    """A round's length as --duration takes it: 60 s -> 1m, 3 s -> 3s, 90 s -> 90s."""
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


# --duration's value when it is given without one (nargs="?": so that `--duration -5m` reaches
# join_negative_duration instead of argparse's "expected one argument").
NO_VALUE = ""


def join_negative_duration(args: list[str]) -> None:
    """`--duration -5m` as `--duration=-5m`, in place, so that the message is about the value (a duration
    is never negative) rather than argparse's "expected one argument" (it reads -5m as an option)."""
    for i, arg in enumerate(args[:-1]):
        if arg == "--":
            return
        if arg == "--duration" and re.match(r"-\s*[\d.]", args[i + 1]):
            args[i:i + 2] = [f"--duration={args[i + 1]}"]
            return


def check_level(text: str, where: str = "--level") -> str:
    """`text` when it names a level; otherwise a ValueError naming the choices."""
    if text not in LEVELS:
        raise ValueError(f"{where} {text!r}: unknown level; choose one of {', '.join(LEVELS)}")
    return text


def thresholds_key(level: str) -> str:
    """The key of `level` in thresholds.yaml (gpu_health.*.sustained.duration.burn_in)."""
    return check_level(level).replace("-", "_")
