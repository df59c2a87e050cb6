"""Writing one run's record: its `run` header, the measurements and verdicts as they come, its `end`.

The suite's plugin, rank 0 of `wirecheck.fleet.multinode` and `wirecheck nccl-tests` all write their
records through `RunWriter`, so every record has the same header keys (`run_header`) and the same end
line, and the verdict counts and wall time are kept in one place. Line by line the file stays a
`RecordFile` (records/file.py): each line is flushed the moment it exists.

The header describes the node through attributes of wirecheck.node's objects (a topology: fabric,
gpus, index_groups, matrix(); a placement: id, klass, gpus), read here without importing them.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from wirecheck.core.verdict import Verdict
from wirecheck.records.file import Measurement, RecordFile, env_switches

COMPLETE = "complete"
INTERRUPTED = "interrupted"
ERROR = "error"  # a multi-node job that broke: a rank raised, died or hung
BUSY = "busy"  # another run held the node longer than this one would wait: nothing ran (exit_codes.NODE_BUSY)


def placement_entry(placement) -> dict:
    """A placement as the header lists it."""
    return {"id": placement.id, "class": placement.klass, "gpus": list(placement.gpus)}


def topology_fields(topology) -> dict:
    """The node's GPUs, NVLink groups and link matrix as the header holds them; empty without a topology."""
    if topology is None:
        return {"fabric": None, "gpus": [], "groups": [], "matrix": []}
    return {
        "fabric": topology.fabric,
        "gpus": [{"index": g.index, "name": g.name, "bus_id": g.bus_id, "memory_bytes": g.memory_bytes,
                  "nvlinks_active": g.active_links} for g in topology.gpus],
        "groups": [list(g) for g in topology.index_groups],
        "matrix": topology.matrix(),
    }


def run_header(*, simulated: bool, simulation_source: str | None, thresholds: str | Path, versions: dict,
               placements: Iterable[dict], topology=None, gpus: list | None = None, unavailable: str | None = None,
               profile: str | None = None, **extra: Any) -> dict:
    """The provenance of a run that measures and judges: what was simulated, against which thresholds,
    with which versions and environment, on which GPUs and placements. `gpus` replaces the topology's
    GPU list where there is no topology (the ranks of a multi-node job); `extra` adds keys of its own
    (`multinode`)."""
    fields = topology_fields(topology)
    if gpus is not None:
        fields["gpus"] = gpus
    return {
        "simulated": simulated,
        "simulation_source": simulation_source,
        "unavailable": unavailable,
        "profile": profile,
        "thresholds": str(thresholds),
        "versions": versions,
        "env": env_switches(),
        **fields,
        "placements": list(placements),
        **extra,
    }


class RunWriter:
    """One run's record file: the header, then measurements and verdicts (counted), then the end.

    At `path` (the user's: runs may append to it), or, without one, a new file of the run's own
    naming, `<prefix>-<UTC>-<host>-<pid>.jsonl` in `folder` (RecordFile.fresh). Raises
    RecordFileError when the file cannot be written: the caller names its own option."""

    def __init__(self, path: str | Path | None, *, folder: str | Path = ".wirecheck", prefix: str = "results",
                 started: float | None = None):
        self.file = RecordFile(path) if path else RecordFile.fresh(folder, prefix)
        self.started = time.monotonic() if started is None else started  # for wall_s: time.monotonic()
        self.verdicts: Counter = Counter()  # outcome -> count, as written
        self.simulated = False
        self.exit_status: int | None = None  # set by end()

    @property
    def path(self) -> Path:
        return self.file.path

    def header(self, provenance: dict) -> None:
        self.simulated = bool(provenance.get("simulated"))
        self.file.header(provenance)

    def measurement(self, m: Measurement) -> None:
        self.file.measurement(m)

    def verdict(self, v: Verdict, test: str | None) -> None:
        self.verdicts[v.outcome] += 1
        self.file.verdict(v, test)

    def end(self, status: str, exit_status: int, tests: dict | None = None, **extra: Any) -> None:
        """The last line: how the run ended, its exit status, test and verdict counts, wall time, and
        `extra` keys of its own (a busy run's holder)."""
        self.exit_status = int(exit_status)
        self.file.end({
            "status": status,
            "exit_status": self.exit_status,
            "simulated": self.simulated,
            "tests": dict(tests or {}),
            "verdicts": dict(self.verdicts),
            "wall_s": round(time.monotonic() - self.started, 1),
            **extra,
        })

    def close(self) -> None:
        self.file.close()
