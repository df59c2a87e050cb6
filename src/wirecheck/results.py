"""Measurement records and the run's JSON-lines file.

Every record is written (and flushed to disk) the moment it exists, one JSON object per
line, so a crash, a hung rank or Ctrl-C loses nothing already measured.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# Environment switches that change what NCCL does; recorded with every run.
ENV_SWITCHES = (
    "NCCL_P2P_DISABLE",
    "NCCL_SHM_DISABLE",
    "NCCL_NVLS_ENABLE",
    "NCCL_IB_DISABLE",
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_NET_GDR_LEVEL",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "NVSHMEM_DISABLE_NVLS",
    "CUDA_VISIBLE_DEVICES",
)


def env_switches(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The NCCL-relevant environment as a worker of a placement sees it."""
    env = {k: os.environ[k] for k in ENV_SWITCHES if k in os.environ}
    env.update(extra or {})
    return env


@dataclass
class Record:
    """One checked or measured thing: what, where, value, limit, verdict."""

    kind: str  # "collective", "strategy", "inventory", "wire_check", ...
    test: str  # pytest node id
    placement: str | None
    what: str  # e.g. "all_reduce busbw @ 1 GiB"
    value: Any = None
    unit: str | None = None
    limit: dict | None = None  # {"min", "max", "source", "yaml_path"}
    verdict: str | None = None  # "pass" | "fail" | "skip" | "info"
    details: dict = field(default_factory=dict)
    time: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))


class RecordFile:
    """Append-only JSON-lines file: one header line, then one line per record."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a", encoding="utf-8")

    def write(self, obj: dict) -> None:
        self._fh.write(json.dumps(obj, default=_jsonable) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def header(self, provenance: dict) -> None:
        self.write({"type": "run", "host": platform.node(), **provenance})

    def record(self, rec: Record) -> None:
        self.write({"type": "record", **asdict(rec)})

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()


def read_records(path: str | Path) -> list[dict]:
    """All lines of a record file; a torn last line (crash mid-write) is skipped."""
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def _jsonable(obj: Any) -> Any:
    if hasattr(obj, "__dataclass_fields__"):
        return asdict(obj)
    if isinstance(obj, (set, tuple)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    return repr(obj)
