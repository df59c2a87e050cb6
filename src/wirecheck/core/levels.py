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


def check_level(text: str, where: str = "--level") -> str:
    """`text` when it names a level; otherwise a ValueError naming the choices."""
    if text not in LEVELS:
        raise ValueError(f"{where} {text!r}: unknown level; choose one of {', '.join(LEVELS)}")
    return text


def thresholds_key(level: str) -> str:
    """The key of `level` in thresholds.yaml (gpu_health.*.sustained.duration.burn_in)."""
    return check_level(level).replace("-", "_")
