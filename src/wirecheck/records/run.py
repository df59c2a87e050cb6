"""Writing one run's record: its `run` header, the measurements and verdicts as they come, its `end`.

The suite's plugin, rank 0 of `wirecheck.fleet.multinode` and `wirecheck nccl-tests` all write their
records through `RunWriter`, so every record has the same header keys (`run_header`) and the same end
line, and the verdict counts and wall time are kept in one place. Line by line the file stays a
`RecordFile` (records/file.py): each line is flushed the moment it exists.

The header describes the node through attributes of wirecheck.node's objects (a topology: fabric,
gpus, index_groups, matrix(); a placement: id, klass, gpus), read here without importing them.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

import yaml

from wirecheck.core.paths import extends_target
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
        # uuid and serial name the GPU itself (an index or bus id names a slot): its history follows them
        "gpus": [{"index": g.index, "name": g.name, "bus_id": g.bus_id, "uuid": getattr(g, "uuid", None),
                  "serial": getattr(g, "serial", None),
                  "memory_bytes": g.memory_bytes, "nvlinks_active": g.active_links} for g in topology.gpus],
        "groups": [list(g) for g in topology.index_groups],
        "matrix": topology.matrix(),
    }


def thresholds_fields(path: str | Path) -> dict:
    """The thresholds file a run judged against, as the header keeps it: its path, the sha256 of its
    bytes and the bytes themselves (gzip, base64: ~20 kB for the shipped 60 kB file), so that `wirecheck
    judge` judges a record again against the run's own limits on any machine, whatever became of the
    file. Without a readable file: the path only."""
    fields: dict = {"thresholds": str(Path(path).absolute())}  # judge looks for it again, from anywhere
    try:
        data = Path(path).read_bytes()
    except OSError:
        return fields
    fields["thresholds_sha256"] = hashlib.sha256(data).hexdigest()
    fields["thresholds_gz_b64"] = base64.b64encode(gzip.compress(data, mtime=0)).decode("ascii")
    bases = [{"path": str(base), "sha256": hashlib.sha256(raw).hexdigest(),
              "gz_b64": base64.b64encode(gzip.compress(raw, mtime=0)).decode("ascii")}
             for base, raw in _extended_files(Path(path), data)]
    if bases:
        fields["thresholds_bases"] = bases
    return fields


def _extended_files(path: Path, data: bytes) -> list[tuple[Path, bytes]]:
    """The files a thresholds file's `extends:` chain names, nearest first, with their bytes, so a
    record keeps every layer its limits came from. What cannot be read is left out: the loader, which
    ran before the header is written, has said why."""
    out: list[tuple[Path, bytes]] = []
    seen = {Path(path).absolute()}
    while True:
        try:
            doc = yaml.safe_load(data)
        except yaml.YAMLError:
            return out
        name = doc.get("extends") if isinstance(doc, dict) else None
        if not isinstance(name, str) or not name.strip():
            return out
        try:
            target = extends_target(name, path)
            data = target.read_bytes()
        except (OSError, RuntimeError):
            return out
        if target in seen:
            return out
        seen.add(target)
        out.append((target, data))
        path = target


def recorded_bases(header: dict) -> dict[str, bytes]:
    """The base files of the run's thresholds (`extends:`), absolute path -> bytes, as the header kept
    them. ValueError when they are damaged."""
    out = {}
    for base in header.get("thresholds_bases") or []:
        try:
            raw = gzip.decompress(base64.b64decode(base["gz_b64"], validate=True))
        except (ValueError, OSError, EOFError, KeyError, TypeError) as exc:
            raise ValueError(f"the recorded base thresholds cannot be unpacked ({exc})") from None
        if hashlib.sha256(raw).hexdigest() != base.get("sha256"):
            raise ValueError(f"the recorded base thresholds {base.get('path')} do not match their recorded sha256")
        out[str(base.get("path"))] = raw
    return out


def recorded_thresholds(header: dict) -> tuple[bytes, str] | None:
    """(the thresholds file's bytes, its sha256) as a run header recorded them; None for a header
    without them (records written before 2026-12-01, or whose thresholds file could not be read).
    ValueError when they are there but damaged."""
    packed = header.get("thresholds_gz_b64")
    if packed is None:
        return None
    try:
        data = gzip.decompress(base64.b64decode(packed, validate=True))
    except (ValueError, OSError, EOFError) as exc:
        raise ValueError(f"the recorded thresholds cannot be unpacked ({exc})") from None
    digest = hashlib.sha256(data).hexdigest()
    if header.get("thresholds_sha256") not in (None, digest):
        raise ValueError("the thresholds copy in the record's header does not match the sha256 recorded beside it: "
                         "the record was edited or damaged after the run")
    return data, digest


def cannot_write(exc: Exception, option: str, named: bool, folder: str | Path) -> str:
    """The message for a record file that cannot be made: the option that names it and the fix. A
    run given no path was never asked for one: say where the default went and how to choose."""
    if named:
        return f"{option}: {exc}; pass a writable path"
    return (f"{exc}: without {option}, a run keeps its record in {folder}; start it from a writable directory, "
            f"or pass {option} PATH")


def run_header(*, simulated: bool, simulation_source: str | None, thresholds: str | Path, versions: dict,
               placements: Iterable[dict], topology=None, gpus: list | None = None, unavailable: str | None = None,
               profile: str | None = None, level: str | None = None, duration_s: float | None = None,
               **extra: Any) -> dict:
    """The provenance of a run that measures and judges: what was simulated, against which thresholds,
    with which versions and environment, on which GPUs and placements, at which level (the suite's
    --level, a burn-in's duration; None for a run without levels). `gpus` replaces the topology's
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
        **thresholds_fields(thresholds),
        "versions": versions,
        "env": env_switches(),
        **fields,
        "placements": list(placements),
        "level": level,
        "duration_s": duration_s,
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
        self.ended = False
        self.measurements = 0

    @property
    def path(self) -> Path:
        return self.file.path

    def header(self, provenance: dict) -> None:
        self.simulated = bool(provenance.get("simulated"))
        self.file.header(provenance)

    def measurement(self, m: Measurement) -> None:
        self.measurements += 1
        self.file.measurement(m)

    def verdict(self, v: Verdict, test: str | None) -> None:
        self.verdicts[v.outcome] += 1
        self.file.verdict(v, test)

    @property
    def measured(self) -> bool:
        """Whether anything was recorded after the header."""
        return bool(self.verdicts) or self.measurements > 0

    def end(self, status: str, exit_status: int, tests: dict | None = None, signal: str | None = None,
            skipped_without_verdict: dict | None = None, test_durations_s: dict | None = None,
            **extra: Any) -> None:
        """The last line: how the run ended (`signal`: the one that stopped it, None otherwise), its exit
        status (what the process returns), test and verdict counts (`skipped_without_verdict`: reason ->
        tests skipped before any check ran, which pytest counts and the verdicts do not), wall time, each
        test's seconds (setup, call and teardown: the time model's figures; {} where there are no tests),
        and `extra` keys of its own (a busy run's holder)."""
        self.exit_status = int(exit_status)
        self.file.end({
            "status": status,
            "signal": signal,
            "exit_status": self.exit_status,
            "simulated": self.simulated,
            "tests": dict(tests or {}),
            "skipped_without_verdict": dict(skipped_without_verdict or {}),
            "verdicts": dict(self.verdicts),
            "wall_s": round(time.monotonic() - self.started, 1),
            "test_durations_s": {test: round(seconds, 3) for test, seconds in (test_durations_s or {}).items()},
            **extra,
        })
        self.ended = True

    def close(self) -> None:
        self.file.close()

    def discard(self) -> None:
        """A run that measured nothing (a usage error, nothing collected) leaves no record: the file
        it made is removed, the lines it appended to a named one are taken back."""
        self.file.discard()
