"""The kinds of line a run's record holds, and the kinds of measurement line: the names writers put in
"type" and "kind", and readers (judge, report, fleet, the plan, the scripts over records) look for.
One spelling each, so a reader never waits for a name no writer uses. A site's own tests may record
measurements of kinds of their own (the readers here pass over them).
"""

from __future__ import annotations

# Line types, in the order a record holds them: one run line, then measurement and verdict lines
# as they come, then one end line.
RUN, MEASUREMENT, VERDICT, END = "run", "measurement", "verdict", "end"
LINE_TYPES = (RUN, MEASUREMENT, VERDICT, END)

# Measurement kinds.
COLLECTIVE = "collective"  # one size of a collective sweep (wirecheck.measure.sweep)
STRATEGY = "strategy"  # one strategy run (wirecheck.training.strategy_run)
SINGLE_GPU_TRAINING = "single_gpu_training"  # one GPU alone (wirecheck.training.scaling)
NCCL_PATH = "nccl_path"  # the path NCCL took, from its log (tests/test_nccl_path.py)
NCCL_TESTS = "nccl_tests"  # one size, suite beside nccl-tests (wirecheck.nccl.tests)
COPY_BANDWIDTH = "copy_bandwidth"  # host and peer copies (tests/test_copy_bandwidth.py)
NETWORK = "network"  # the NIC inventory (tests/test_network.py)
PAIR = "pair"  # one node pair's all_reduce (wirecheck.fleet.multinode)
GPU_FIGURES, GPU_SUSTAINED, GPU_MEMORY = "gpu_figures", "gpu_sustained", "gpu_memory"  # the GPU load's phases
GPU_EVENT = "gpu_event"  # an XID or ECC event during the run
BURN_IN_ROUND, BURN_IN = "burn_in_round", "burn_in"  # each burn-in round, then the burn-in's end
SPARE_WORKERS = "spare_workers"  # at the run's end: spare workers started and taken (wirecheck.workers.spares)
NCCL_RAS = "nccl_ras"  # NCCL RAS's reading: its readiness diagnostics, or its status asked by a script (wirecheck.workers.ras)
DCGM_DIAG = "dcgm_diag"  # a `dcgmi diag -j` run: its level, version, seconds and output (wirecheck.records.dcgm)
NVBANDWIDTH = "nvbandwidth"  # nvbandwidth's matrices beside the suite's copies (wirecheck.nccl.nvbandwidth)
MEASUREMENT_KINDS = (COLLECTIVE, STRATEGY, SINGLE_GPU_TRAINING, NCCL_PATH, NCCL_TESTS, COPY_BANDWIDTH, NETWORK, PAIR,
                     GPU_FIGURES, GPU_SUSTAINED, GPU_MEMORY, GPU_EVENT, BURN_IN_ROUND, BURN_IN, SPARE_WORKERS, NCCL_RAS,
                     DCGM_DIAG, NVBANDWIDTH)
if len(set(MEASUREMENT_KINDS)) != len(MEASUREMENT_KINDS):
    raise ValueError(f"a measurement kind is listed twice: {MEASUREMENT_KINDS}")


def gpu_phase_kind(phase: str) -> str:
    """The measurement kind of a GPU load phase (figures, sustained, memory)."""
    kind = f"gpu_{phase}"
    if kind not in MEASUREMENT_KINDS:
        raise ValueError(f"GPU load phase {phase!r} has no measurement kind; known: {MEASUREMENT_KINDS}")
    return kind
