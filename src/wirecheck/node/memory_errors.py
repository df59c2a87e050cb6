"""A GPU's memory-error counters as plain data: volatile ECC errors (single-bit corrected,
double-bit uncorrected) and remapped rows, from one NVML health reading.

The session reads them at start (fixtures/pytest_wirecheck/node.py) and again after the run; the check
(wirecheck.checks.gpu_health.ecc_row_remap_growth) judges what grew in between, so that a
recorded run can be judged again. An unreadable counter is {"unsupported": reason}.
"""

from __future__ import annotations

from typing import Any

from wirecheck.node.nvml import GpuHealth, Unsupported

REMAP_FIELDS = ("correctable", "uncorrectable", "pending", "failure")


def _plain(value: Any) -> Any:
    if isinstance(value, Unsupported):
        return {"unsupported": value.reason}
    return value


def memory_errors(health: GpuHealth) -> dict[str, Any]:
    """{"volatile_sbe", "volatile_dbe": int | {"unsupported"}, "remapped_rows": {correctable,
    uncorrectable, pending, failure} | {"unsupported"}}."""
    rows = health.remapped_rows
    return {
        "volatile_sbe": _plain(health.volatile_corrected_ecc),
        "volatile_dbe": _plain(health.volatile_uncorrected_ecc),
        "remapped_rows": _plain(rows if isinstance(rows, Unsupported) else dict(zip(REMAP_FIELDS, rows))),
    }
