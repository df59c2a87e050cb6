"""What NVML can tell about the node in about a second, as plain data: the snapshot a passing run keeps
in its record's end line and that `wirecheck validate --trust-recent` compares the node with now
(wirecheck.records.trust decides; this module only reads).

One NVML session: the driver version, and per GPU its identity (model, UUID, serial, bus id), its uncorrectable
ECC counts (volatile: since the driver loaded; aggregate: since the GPU was made), its remapped rows
(pending and failed remaps), which NVLinks are up and each up link's error counters, and the compute
processes on it. Nothing here starts work on a GPU. A reading this GPU or driver cannot give is None.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

import wirecheck
from wirecheck.node import nvml
from wirecheck.node.memory_errors import REMAP_FIELDS
from wirecheck.node.nvml import ECC_UNCORRECTED, NVLINK_COUNTERS, NVLINK_STATE_ACTIVE, Unsupported

ECC_AGGREGATE = 1  # NVML's counter type: since the GPU was made (ECC_VOLATILE, 0: since the driver loaded)
SCHEMA = 1


def _plain(value: Any) -> Any:
    return None if isinstance(value, Unsupported) else value


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def read_snapshot() -> dict[str, Any]:
    """The node now; NvmlUnavailable (nvml's) when NVML cannot be read at all."""
    # nvml's session and readers are reused as they are, so a GPU lost or a missing binding reads the
    # same here as in every other reading of the suite.
    with nvml._session() as nv:
        versions = nvml._read_versions(nv)
        gpus = [_gpu(nv, i, h) for i, h in enumerate(nvml._handles(nv))]
    return {"schema": SCHEMA, "taken_at": now_iso(), "wirecheck": wirecheck.__version__, "booted_at": booted_at(),
            "driver": versions["driver"], "gpus": gpus}


def booted_at(stat: str = "/proc/stat") -> int | None:
    """When the machine booted (the kernel's btime, epoch seconds): a reboot clears the volatile counters and
    the kernel log, so a pass from before one cannot be compared with the node now. None where unreadable."""
    try:
        with open(stat) as fh:
            for line in fh:
                if line.startswith("btime "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _gpu(nv: Any, i: int, h: Any) -> dict[str, Any]:
    health = nvml._read_gpu_health(nv, i, h)
    rows = health.remapped_rows
    links_up, counters = [], {}
    for link in range(nvml._link_count(nv, i, h)):
        if nvml._try(nv, i, "nvmlDeviceGetNvLinkState", h, link) == NVLINK_STATE_ACTIVE:
            links_up.append(link)
    for c in health.nvlink_counters:
        counters[str(c.link)] = {name: _plain(getattr(c, name)) for name in NVLINK_COUNTERS}
    processes = health.compute_processes
    return {
        "index": i,
        "name": nvml._text(nvml._try(nv, i, "nvmlDeviceGetName", h)),  # for CUDA_VISIBLE_DEVICES on mixed nodes
        "bus_id": health.bus_id,
        "uuid": nvml._text(nvml._try(nv, i, "nvmlDeviceGetUUID", h)),
        "serial": nvml._serial(nv, i, h),
        "ecc_volatile_uncorrected": _plain(health.volatile_uncorrected_ecc),
        "ecc_aggregate_uncorrected": _plain(nvml._try(nv, i, "nvmlDeviceGetTotalEccErrors", h, ECC_UNCORRECTED,
                                                      ECC_AGGREGATE)),
        # (rows remapped for correctable errors, for uncorrectable ones, a remap pending a reset, a remap failed)
        "remapped_rows": None if isinstance(rows, Unsupported) else dict(zip(REMAP_FIELDS, (int(r) for r in rows))),
        "links_up": links_up,
        "link_counters": counters,
        "processes": None if isinstance(processes, Unsupported)
        else [{"pid": p.pid, "name": p.name} for p in processes],
    }


def snapshot_or_reason() -> dict[str, Any]:
    """The snapshot, or {"unreadable": why}: a run's end line keeps either, and never fails for it."""
    try:
        return read_snapshot()
    except nvml.NvmlUnavailable as exc:
        return {"schema": SCHEMA, "taken_at": now_iso(), "unreadable": str(exc)}
