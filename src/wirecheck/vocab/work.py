"""What a test of the suite makes when it is the first to need it: the kinds of work the time model
(`wirecheck plan`) prices. A test declares its own with `@pytest.mark.work(SWEEP, BENCHMARK)`
(registered by the plugin, fixtures/pytest_wirecheck/work.py); `@pytest.mark.work()` declares a test that reads NVML,
sysfs or the topology only; `opt_in="why"` one that a plain run skips. A test without the marker is
priced at pytest's per-test share alone and listed as unknown by the plan.
"""

from __future__ import annotations

MARKER = "work"

SWEEP = "sweep"  # the placement's collective sweep, for the test's op
FLOOR_SWEEP = "floor sweep"  # the sweep at the floor size only
AXIS_SWEEP = "axis sweep"  # the test's op at its dtype and reduction: the floor size only, every size with --sweep full
# The --sweep that gives the further dtypes and reductions every size of the sweep (others: the floor size alone).
AXES_FULL_SWEEP = "full"
BENCHMARK = "benchmark"  # pytest-benchmark rounds of the op
# How a run made them, in its header's `benchmark` (absent before): the sweep's own floor-size calls are the
# first round (wirecheck.measure.sweep.swept_round), the others are measured anew; a run that keeps or compares
# none of them (no --benchmark-autosave, -save, -json, -compare, -histogram or -csv) makes only that first one.
BENCHMARK_FIRST_ROUND_SWEPT = "first round from the sweep"
BENCHMARK_SWEPT_ONLY = "the sweep's round only: nothing kept or compared the rounds"
TWIN_SWEEP = "twin sweep"  # the all_reduce sweep of the placement's NVLink twin
PAIR_SWEEPS = "pair sweeps"  # the all_reduce sweep of every pair of the same NV#
INNER_PAIR_SWEEP = "inner pair sweep"  # the all_reduce sweep of a pair inside the placement
PROBE = "probe"  # the NCCL path probe
COPIES = "copies"  # the copy-bandwidth measurement
RUN = "run"  # the test's strategy run
REFERENCE_RUN = "reference run"  # the reference strategy's run on the same placement
ALL_RUNS = "all runs"  # every strategy's run
TWIN_RUN = "twin run"  # the test's strategy on the NVLink twin
TWIN_ALL_RUNS = "twin all runs"  # every strategy on the NVLink twin
SINGLE_GPU_RUN = "single-GPU run"  # one GPU alone
# The GPU load's phases: what the plan prices, and the phases' own names (wirecheck.gpu.load).
FIGURES, SUSTAINED, MEMORY = "figures", "sustained", "memory"
BURN_IN_LOOP = "burn-in loop"  # the burn-in's rounds (wirecheck.burnin)

KINDS = (SWEEP, FLOOR_SWEEP, AXIS_SWEEP, BENCHMARK, TWIN_SWEEP, PAIR_SWEEPS, INNER_PAIR_SWEEP, PROBE, COPIES, RUN, REFERENCE_RUN,
         ALL_RUNS, TWIN_RUN, TWIN_ALL_RUNS, SINGLE_GPU_RUN, FIGURES, SUSTAINED, MEMORY, BURN_IN_LOOP)
GPU_PHASES = (FIGURES, SUSTAINED, MEMORY)
if len(set(KINDS)) != len(KINDS):
    raise ValueError(f"a kind of work is listed twice: {KINDS}")


def declared(args, kwargs, where: str) -> dict:
    """A work marker's arguments as {"work": (kinds...), "opt_in": str | None}; unknown kinds or keys
    raise ValueError naming `where` and the known ones."""
    unknown = [a for a in args if a not in KINDS]
    if unknown:
        raise ValueError(f"{where}: pytest.mark.{MARKER}{tuple(args)}: unknown kind {unknown[0]!r}; "
                         f"known: {', '.join(KINDS)}")
    extra = set(kwargs) - {"opt_in"}
    if extra:
        raise ValueError(f"{where}: pytest.mark.{MARKER}: unknown keyword {sorted(extra)[0]!r}; it takes opt_in=\"why\"")
    return {"work": tuple(args), "opt_in": kwargs.get("opt_in")}
